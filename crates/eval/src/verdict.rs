//! Structured verdicts: one record per claim of a paper an experiment checks (the
//! claim, the paper's figure, rocast's, the word, the reading it ran under and the
//! reason where it differs). `rocast sim` renders a report's verdict section and
//! `verdicts.json` from these records, and `rocast repro` counts them from that file:
//! never from the report's text, where a note that mentions "reproduced" would count.
//!
//! Three words: **reproduced** (rocast's figure within [`REPRODUCED_WITHIN`]
//! of the paper's), **differs** (with the direction), and **calibrated**: the result
//! matches by construction, because a constant of the preset was set from the paper's
//! own figure (Cepheus Table I's absolute IOPS from `io_stack_us`), or because it is
//! arithmetic over the paper's own fields (the MFT memory). A calibrated verdict carries
//! its sensitivity to the constant in `reason`.

use crate::error::EvalError;
use std::fmt::Write as _;

/// rocast's tolerance for a verdict of "reproduced": rocast's figure within
/// 0.8-1.25× of the paper's (rocast's own threshold; the papers' numbers are read from
/// their text).
pub const REPRODUCED_WITHIN: f64 = 1.25;

/// Whether `ratio` (rocast's figure over the paper's) counts as reproduced.
pub fn reproduced(ratio: f64) -> bool {
    (1.0 / REPRODUCED_WITHIN..=REPRODUCED_WITHIN).contains(&ratio)
}

/// "reproduced", or "differs (rocast higher|lower)", for rocast's figure over the paper's
/// ("not measured" when there is no figure): [`Word::of_ratio`] in words.
pub fn verdict_word(ratio: f64) -> &'static str {
    Word::of_ratio(ratio).as_str()
}

/// [`Word::of_range`] in words.
pub fn range_verdict(ours: (f64, f64), paper: (f64, f64)) -> &'static str {
    Word::of_range(ours, paper).as_str()
}

/// The verdict word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Word {
    Reproduced,
    /// rocast's figure above the paper's (by more than the tolerance).
    DiffersHigher,
    /// rocast's figure below the paper's.
    DiffersLower,
    /// Differs in kind (an effect absent, an order reversed), not in size.
    Differs,
    /// Matches by construction: a calibrated constant or the paper's own arithmetic.
    Calibrated,
    /// rocast has no figure for this claim (a size not run).
    NotMeasured,
}

impl Word {
    /// The word as reports print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Word::Reproduced => "reproduced",
            Word::DiffersHigher => "differs (rocast higher)",
            Word::DiffersLower => "differs (rocast lower)",
            Word::Differs => "differs",
            Word::Calibrated => "calibrated",
            Word::NotMeasured => "not measured",
        }
    }

    /// The word a report prints ([`Word::as_str`]) read back.
    pub fn parse(s: &str) -> Option<Word> {
        Some(match s {
            "reproduced" => Word::Reproduced,
            "differs (rocast higher)" => Word::DiffersHigher,
            "differs (rocast lower)" => Word::DiffersLower,
            "differs" => Word::Differs,
            "calibrated" => Word::Calibrated,
            "not measured" => Word::NotMeasured,
            _ => return None,
        })
    }

    /// Reproduced or differs: the verdicts that test a prediction (calibrated ones and
    /// unmeasured ones do not).
    pub fn is_prediction(self) -> bool {
        !matches!(self, Word::Calibrated | Word::NotMeasured)
    }

    /// The word for a pass/fail check (an effect present or absent).
    pub fn of(ok: bool) -> Word {
        if ok {
            Word::Reproduced
        } else {
            Word::Differs
        }
    }

    /// The word for rocast's figure over the paper's: reproduced within
    /// [`REPRODUCED_WITHIN`], else which way it lies; not measured without a figure.
    pub fn of_ratio(ratio: f64) -> Word {
        if !ratio.is_finite() {
            Word::NotMeasured
        } else if reproduced(ratio) {
            Word::Reproduced
        } else if ratio > 1.0 {
            Word::DiffersHigher
        } else {
            Word::DiffersLower
        }
    }

    /// The word for rocast's range against the paper's stated range (`paper`: lo, hi):
    /// reproduced when rocast's whole range lies in the paper's, widened by
    /// [`REPRODUCED_WITHIN`] at both ends.
    pub fn of_range(ours: (f64, f64), paper: (f64, f64)) -> Word {
        if ours.0 >= paper.0 / REPRODUCED_WITHIN && ours.1 <= paper.1 * REPRODUCED_WITHIN {
            Word::Reproduced
        } else if ours.1 > paper.1 * REPRODUCED_WITHIN {
            Word::DiffersHigher
        } else {
            Word::DiffersLower
        }
    }
}

/// One claim's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// What the paper claims, briefly ("large flows vs chain").
    pub claim: String,
    /// The paper's figure, as it states it ("up to 2.1x").
    pub paper: String,
    /// rocast's figure over the same points.
    pub rocast: String,
    pub word: Word,
    /// The reading it ran under: the preset and any reading that is not the primary
    /// one ("primary" when all are).
    pub reading: String,
    /// Why it differs, or for a calibrated verdict what it was calibrated from and
    /// its sensitivity; empty for a plain reproduction.
    pub reason: String,
}

impl Verdict {
    pub fn new(
        claim: impl Into<String>,
        paper: impl Into<String>,
        rocast: impl Into<String>,
        word: Word,
    ) -> Self {
        Verdict {
            claim: claim.into(),
            paper: paper.into(),
            rocast: rocast.into(),
            word,
            reading: String::new(),
            reason: String::new(),
        }
    }

    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// [`Verdict::because`] unless the claim is reproduced (which needs no reason).
    pub fn because_unless_reproduced(self, reason: impl Into<String>) -> Self {
        if self.word == Word::Reproduced {
            self
        } else {
            self.because(reason)
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "claim": self.claim,
            "paper": self.paper,
            "rocast": self.rocast,
            "word": self.word.as_str(),
            "reading": self.reading,
            "reason": self.reason,
        })
    }

    /// Parses one record of [`to_json`]'s list.
    pub fn from_json(v: &serde_json::Value) -> Result<Verdict, EvalError> {
        let s = |k: &str| -> Result<String, EvalError> {
            v.get(k)
                .and_then(|x| x.as_str())
                .map(str::to_string)
                .ok_or_else(|| EvalError::Setting(format!("verdict without a string {k:?}")))
        };
        let word = s("word")?;
        Ok(Verdict {
            claim: s("claim")?,
            paper: s("paper")?,
            rocast: s("rocast")?,
            word: Word::parse(&word).ok_or_else(|| format!("unknown verdict word {word:?}"))?,
            reading: s("reading")?,
            reason: s("reason")?,
        })
    }
}

/// The verdicts as the JSON list `verdicts.json` holds.
pub fn to_json(vs: &[Verdict]) -> serde_json::Value {
    serde_json::Value::Array(vs.iter().map(Verdict::json).collect())
}

/// `verdicts.json`'s text: the pretty-printed list and a final newline.
pub fn to_json_text(vs: &[Verdict]) -> String {
    serde_json::to_string_pretty(&to_json(vs)).expect("verdicts serialise") + "\n"
}

/// Parses `verdicts.json`'s text.
pub fn from_json_text(text: &str) -> Result<Vec<Verdict>, EvalError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    from_json(&v)
}

/// Reads `verdicts.json`'s list.
pub fn from_json(v: &serde_json::Value) -> Result<Vec<Verdict>, EvalError> {
    v.as_array()
        .ok_or("verdicts.json is not a list")?
        .iter()
        .map(Verdict::from_json)
        .collect()
}

/// How many of each word: (reproduced, differs, calibrated, not measured).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub reproduced: usize,
    pub differs: usize,
    pub calibrated: usize,
    pub not_measured: usize,
}

impl Tally {
    pub fn of(vs: &[Verdict]) -> Tally {
        let mut t = Tally::default();
        for v in vs {
            match v.word {
                Word::Reproduced => t.reproduced += 1,
                Word::DiffersHigher | Word::DiffersLower | Word::Differs => t.differs += 1,
                Word::Calibrated => t.calibrated += 1,
                Word::NotMeasured => t.not_measured += 1,
            }
        }
        t
    }

    /// "2 of 4 reproduced, 1 calibrated" (the predictions counted apart from the rest).
    pub fn summary(&self) -> String {
        let predictions = self.reproduced + self.differs;
        let mut s = format!("{} of {predictions} reproduced", self.reproduced);
        if self.calibrated > 0 {
            let _ = write!(s, ", {} calibrated", self.calibrated);
        }
        if self.not_measured > 0 {
            let _ = write!(s, ", {} not measured", self.not_measured);
        }
        s
    }
}

/// The report's verdict section, rendered from the records: a line per claim and the
/// reason under it.
pub fn render(vs: &[Verdict]) -> String {
    let mut t = String::new();
    if vs.is_empty() {
        return t;
    }
    let _ = writeln!(t, "\nverdicts ({}):", Tally::of(vs).summary());
    for v in vs {
        let _ = writeln!(
            t,
            "  [{}] {}: paper {}, rocast {}{}",
            v.word.as_str(),
            v.claim,
            v.paper,
            v.rocast,
            if v.reading.is_empty() || v.reading == "primary" {
                String::new()
            } else {
                format!(" ({})", v.reading)
            }
        );
        if !v.reason.is_empty() {
            let _ = writeln!(t, "      {}", v.reason);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_come_from_the_words_not_from_the_text() {
        let vs = vec![
            Verdict::new("a", "1x", "1x", Word::Reproduced),
            // A reason that mentions "reproduced" does not make it one.
            Verdict::new("b", "2x", "9x", Word::DiffersHigher)
                .because("would be reproduced under another reading"),
            Verdict::new("c", "1.2M", "1.2M", Word::Calibrated).because("io_stack_us"),
            Verdict::new("d", "3x", "-", Word::NotMeasured),
        ];
        let t = Tally::of(&vs);
        assert_eq!(
            t,
            Tally {
                reproduced: 1,
                differs: 1,
                calibrated: 1,
                not_measured: 1
            }
        );
        assert_eq!(
            t.summary(),
            "1 of 2 reproduced, 1 calibrated, 1 not measured"
        );
    }

    #[test]
    fn json_round_trips_and_rejects_unknown_words() {
        let mut v =
            Verdict::new("large vs tree", "up to 8.9x", "7.1x", Word::DiffersLower).because("why");
        v.reading = "primary".into();
        let back = from_json(&to_json(std::slice::from_ref(&v))).unwrap();
        assert_eq!(back, vec![v]);
        let mut bad = to_json(&[Verdict::new("x", "1", "1", Word::Reproduced)]);
        bad[0]["word"] = "mostly reproduced".into();
        assert!(from_json(&bad).is_err());
        assert!(from_json(&serde_json::json!({"word": 1})).is_err());
    }

    #[test]
    fn words_follow_the_tolerance() {
        assert_eq!(Word::of_ratio(1.2), Word::Reproduced);
        assert_eq!(Word::of_ratio(2.0), Word::DiffersHigher);
        assert_eq!(Word::of_ratio(f64::NAN), Word::NotMeasured);
        assert_eq!(Word::of_range((2.6, 3.5), (2.5, 3.5)), Word::Reproduced);
        assert!(!Word::Calibrated.is_prediction());
    }

    #[test]
    fn verdicts_follow_the_tolerance_at_its_edges() {
        assert_eq!(verdict_word(1.0), "reproduced");
        assert_eq!(verdict_word(1.25), "reproduced");
        assert_eq!(verdict_word(0.8), "reproduced");
        assert_eq!(verdict_word(1.26), "differs (rocast higher)");
        assert_eq!(verdict_word(0.79), "differs (rocast lower)");
        assert_eq!(verdict_word(f64::NAN), "not measured");
    }

    #[test]
    fn a_range_is_reproduced_only_inside_the_widened_paper_range() {
        // Cepheus Figs 8-9's small-message claims against rocast's measured ranges.
        assert_eq!(range_verdict((2.6, 3.5), (2.5, 3.5)), "reproduced");
        assert_eq!(
            range_verdict((5.4, 11.0), (3.0, 5.2)),
            "differs (rocast higher)"
        );
        assert_eq!(
            range_verdict((1.0, 1.2), (2.0, 2.8)),
            "differs (rocast lower)"
        );
        // A range wider than the paper's on both sides is not a reproduction.
        assert_eq!(
            range_verdict((1.0, 9.0), (2.0, 2.8)),
            "differs (rocast higher)"
        );
    }
}
