//! A toy experiment written exactly as a new figure's folder is: copied to
//! `crates/eval/src/experiments/toy_echo/`, it would be built in and listed (that
//! crate names itself `rocast_eval` too, so these paths resolve in both places). The
//! registry test adds it to a registry at run time and checks every listing sees it.

use rocast_eval::error::EvalError;
use rocast_eval::experiment::{AlternativeScale, Context, Experiment, Figure, Paper, Preset, RDMC};
use rocast_eval::report::EvalReport;
use rocast_eval::verdict::{Verdict, Word};
use rocast_sim::Scenario;
use serde::Deserialize;

/// `[experiment.toy-echo]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToyConfig {
    pub repeat: u32,
    pub word: String,
}

impl Default for ToyConfig {
    fn default() -> Self {
        ToyConfig {
            repeat: 1,
            word: "rocast".into(),
        }
    }
}

pub struct ToyEcho;

pub static EXPERIMENT: ToyEcho = ToyEcho;

impl Experiment for ToyEcho {
    fn name(&self) -> &'static str {
        "toy-echo"
    }
    fn paper(&self) -> &'static Paper {
        &RDMC
    }
    fn presets(&self) -> &'static [Preset] {
        &[Preset {
            name: "toy-echo",
            toml: include_str!("toy-echo.toml"),
        }]
    }
    fn figures(&self) -> &'static [Figure] {
        &[Figure {
            id: "toy-fig1",
            figure: "Fig. 99",
            what: "the word, repeated",
            args: &["sim", "--preset", "toy-echo"],
            quick: &[],
            quick_says: "",
            typical_s: 0.1,
            calibrated: None,
            alternatives: AlternativeScale::Own,
            rank: 999,
        }]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("toy-echo", "bcast")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        rocast_eval::experiment::experiment_config::<ToyConfig>(sc, self.name()).map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let c: ToyConfig = cx.config(self.name())?;
        let words = vec![c.word.as_str(); c.repeat as usize].join(" ");
        Ok(EvalReport {
            text: format!("{words}\n"),
            files: vec![(
                "toy-echo.csv".into(),
                format!("seed,words\n{},{words}\n", cx.scenario.seed),
            )],
            capture: Vec::new(),
            verdicts: vec![Verdict::new(
                "words echoed",
                "3",
                c.repeat.to_string(),
                Word::Reproduced,
            )],
        })
    }
}
