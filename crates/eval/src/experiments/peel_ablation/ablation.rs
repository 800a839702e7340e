//! Why PEEL §4's headline ratios differ in rocast: reduced runs of
//! `peel-fig5`, `peel-fig6` and `peel-fig7` with one assumption changed at a time.
//!
//! Every variant is the three presets plus the `--set`s it prints (and the reduction
//! below), so any row can be re-run alone with `rocast sim --preset peel-fig5 --set …`.
//! The reduction (to keep a row near half a minute on two cores): Fig 5 at 2 MB and
//! 32 MB (its 512 MB point is 6 jobs of ~0.3 s each, minutes per scheme) with 20 jobs
//! per point, Fig 6 at 256 GPUs with 20 jobs, Fig 7 at 10% failed links with 25
//! trials; only the schemes the claims compare.
//!
//! Each row names its parameter's source: a paper section, a cited paper, or rocast's
//! assumption.

use crate::error::EvalError;
use std::fmt::Write as _;
use std::path::Path;

use rocast_sim::multicast::collective::CollectiveScheme;
use rocast_sim::scenario::topology::build_topology;
use rocast_sim::Scenario;

use crate::peel::config::PeelFigureConfig;
use crate::peel::figures::{fig5_points, fig6_points, fig7_points, ratio_at, Point, Stat, PEEL_CLAIMS};
use crate::report::EvalReport;

/// One variant: a name, what it changes, where the value comes from, and its `--set`s.
struct Variant {
    name: &'static str,
    what: &'static str,
    source: &'static str,
    sets: &'static [&'static str],
}

const VARIANTS: [Variant; 15] = [
    Variant {
        name: "rocast",
        what: "the presets as they are",
        source: "-",
        sets: &[],
    },
    Variant {
        name: "consecutive",
        what: "jobs on consecutive servers from a random one, blind to racks",
        source: "rocast's earlier model",
        sets: &["experiment.job_placement=\"consecutive\""],
    },
    Variant {
        name: "aligned",
        what: "bin-packed windows only at power-of-two offsets (a buddy allocator)",
        source: "rocast's assumption, most favourable to prefixes",
        sets: &["experiment.job_placement=\"aligned\""],
    },
    Variant {
        name: "over-cover",
        what: "one prefix per plane: the source sends fewer copies, ToRs discard the extra",
        source: "PEEL 3.3 (coarse prefixes over-cover)",
        sets: &["experiment.cover_max=1"],
    },
    Variant {
        name: "cores-from-start",
        what: "controller set-up 0: programmable cores (and Orca's rules) from the first packet",
        source: "PEEL 3.3 with no controller delay",
        sets: &["experiment.setup_ms=0", "experiment.setup_sd_ms=0"],
    },
    Variant {
        name: "setup-50ms",
        what: "controller set-up N(50, 25) ms instead of N(10, 5)",
        source: "PEEL 5 (set-up 'as high as 50ms' [16,17])",
        sets: &["experiment.setup_ms=50", "experiment.setup_sd_ms=25"],
    },
    Variant {
        name: "orca-agent",
        what: "Orca's host-side agents do each rack's last-hop fan-out (PEEL 3.1's description)",
        source: "rocast's earlier model; PEEL 4 models Orca by its controller delay",
        sets: &["experiment.orca_agent=true"],
    },
    Variant {
        name: "upward-lowest",
        what: "every fault-free tree climbs through the lowest-numbered switches instead of ECMP's hash",
        source: "rocast's earlier model",
        sets: &["experiment.upward=\"lowest\""],
    },
    Variant {
        name: "load-10",
        what: "10% offered load instead of 30%",
        source: "rocast's (contention)",
        sets: &["experiment.load=0.1"],
    },
    Variant {
        name: "load-60",
        what: "60% offered load instead of 30%",
        source: "rocast's (contention)",
        sets: &["experiment.load=0.6"],
    },
    Variant {
        name: "concurrent-8",
        what: "Fig 7: 8 Broadcasts sharing each trial's fabric at 30% load instead of one",
        source: "rocast's earlier model; PEEL 4: 'a Broadcast ... is repeated'",
        sets: &["experiment.concurrent_jobs=8"],
    },
    Variant {
        name: "pfc-3k",
        what: "PFC resume 3 KB below the pause threshold instead of 5 MTU",
        source: "rocast's earlier default; PEEL 4 states a 5-MTU hysteresis",
        sets: &["switch.resume_offset_bytes=3072"],
    },
    Variant {
        name: "limiter-and-guard",
        what: "the receivers' 50 us CNP spacing kept beside the sender's guard",
        source: "rocast's earlier model; PEEL 4: the guard 'replaces' the receiver-side limiter",
        sets: &["nic.cnp_interval_us=50"],
    },
    Variant {
        name: "cores-remote-pods",
        what: "PEEL+cores after set-up: the source pod's prefixes stay separate source copies",
        source: "rocast's earlier model; PEEL 3.3: 'a *single* copy of each packet through the core'",
        sets: &["experiment.core_copy=\"remote-pods\""],
    },
    Variant {
        name: "seed-2",
        what: "another seed: the jobs, placements and failures redrawn",
        source: "sample noise",
        sets: &["seed=2"],
    },
];

/// The reduction every variant runs under, per figure.
const FIG5: &[&str] = &[
    "multicast.sizes=\"2M,32M\"",
    "experiment.broadcasts=20",
    "multicast.schemes=[\"peel\",\"peel-cores\",\"orca\",\"optimal\"]",
];
const FIG6: &[&str] = &[
    "multicast.groups=[256]",
    "experiment.broadcasts=20",
    "multicast.schemes=[\"peel\",\"ring\",\"binary-tree\",\"orca\"]",
];
const FIG7: &[&str] = &[
    "experiment.fail_fractions=[0.1]",
    "experiment.instances=25",
    "multicast.schemes=[\"peel\",\"ring\",\"binary-tree\"]",
];

/// One column: a ratio of two schemes' statistic at a point of figure `fig` (0, 1, 2:
/// Figs 5, 6, 7).
struct Column {
    head: &'static str,
    fig: usize,
    x: f64,
    stat: Stat,
    slower: CollectiveScheme,
    faster: CollectiveScheme,
}

impl Column {
    /// The paper's figure for this exact ratio, where `PEEL_CLAIMS` states one.
    fn paper(&self) -> Option<f64> {
        let figure = ["peel-fig5", "peel-fig6", "peel-fig7"][self.fig];
        PEEL_CLAIMS
            .iter()
            .find(|c| {
                (c.figure, c.x, c.stat, c.slower, c.faster)
                    == (figure, self.x, self.stat, self.slower, self.faster)
            })
            .map(|c| c.paper)
    }
}

const MB: f64 = (1u64 << 20) as f64;

fn columns() -> Vec<Column> {
    use CollectiveScheme::*;
    let c = |head, fig, x, stat, slower, faster| Column {
        head,
        fig,
        x,
        stat,
        slower,
        faster,
    };
    vec![
        c("f5 2M peel/opt", 0, 2.0 * MB, Stat::Mean, Peel, Optimal),
        c("f5 32M peel/opt", 0, 32.0 * MB, Stat::Mean, Peel, Optimal),
        c("f5 2M orca/peel p99", 0, 2.0 * MB, Stat::P99, Orca, Peel),
        c(
            "f5 32M cores/opt",
            0,
            32.0 * MB,
            Stat::Mean,
            PeelCores,
            Optimal,
        ),
        c("f6 ring/peel", 1, 256.0, Stat::Mean, Ring, Peel),
        c("f6 tree/peel", 1, 256.0, Stat::Mean, BinaryTree, Peel),
        c("f6 orca/peel", 1, 256.0, Stat::Mean, Orca, Peel),
        c("f7 ring/peel p99", 2, 0.1, Stat::P99, Ring, Peel),
        c("f7 tree/peel p99", 2, 0.1, Stat::P99, BinaryTree, Peel),
    ]
}

/// Figure preset `name` under the reduction and variant `v`, and its experiment's
/// table (checked as `rocast sim --preset` checks it).
fn preset(
    name: &str,
    reduce: &[&str],
    v: &Variant,
    sc: &Scenario,
) -> Result<(Scenario, PeelFigureConfig), EvalError> {
    let mut sets: Vec<String> = reduce.iter().map(|s| s.to_string()).collect();
    sets.push(format!("seed={}", sc.seed));
    sets.push(format!("multicast.threads={}", sc.multicast.threads));
    sets.extend(v.sets.iter().map(|s| s.to_string()));
    let s = crate::experiments::scenario(name, &sets)
        .map_err(|e| EvalError::Setting(format!("variant {}: {e}", v.name)))?;
    let c = PeelFigureConfig::of(&s, name)
        .map_err(|e| EvalError::Setting(format!("variant {}: {e}", v.name)))?;
    Ok((s, c))
}

/// The packets per message PEEL's source sent at a point.
fn copies(points: &[Point], x: f64) -> Option<f64> {
    points
        .iter()
        .find(|p| p.x == x && p.scheme == CollectiveScheme::Peel)
        .map(|p| p.packets_per_message)
}

pub fn ablation(sc: &Scenario) -> Result<EvalReport, EvalError> {
    let cols = columns();
    let mut text = String::from(
        "# PEEL Figs 5-7: what moves the headline ratios (reduced runs; each row is the presets plus its --sets)\n",
    );
    let mut csv = String::from("variant,sets");
    for c in &cols {
        let _ = write!(csv, ",{}", c.head.replace(' ', "_").replace('/', "_over_"));
    }
    csv.push_str(",f5_peel_copies,f6_peel_copies,f7_peel_copies\n");
    let _ = write!(text, "{:<17}", "variant");
    for c in &cols {
        let _ = write!(text, " {:>9}", c.head.split(' ').next_back().unwrap_or(""));
    }
    let _ = writeln!(text, " {:>6} {:>6} {:>6}", "cp5", "cp6", "cp7");
    let _ = write!(text, "{:<17}", "");
    for c in &cols {
        let h = c.head.rsplit_once(' ').map_or(c.head, |(a, _)| a);
        let _ = write!(text, " {:>9}", h);
    }
    let _ = writeln!(text);
    let _ = write!(text, "{:<17}", "paper");
    for c in &cols {
        match c.paper() {
            Some(p) => {
                let _ = write!(text, " {:>9.2}", p);
            }
            None => {
                let _ = write!(text, " {:>9}", "-");
            }
        }
    }
    let _ = writeln!(text);
    for v in &VARIANTS {
        let (s5, c5) = preset("peel-fig5", FIG5, v, sc)?;
        let (s6, c6) = preset("peel-fig6", FIG6, v, sc)?;
        let (s7, c7) = preset("peel-fig7", FIG7, v, sc)?;
        let t5 = build_topology(&s5, Path::new(""))?;
        let t6 = build_topology(&s6, Path::new(""))?;
        let t7 = build_topology(&s7, Path::new(""))?;
        let points = [
            fig5_points(&s5, &c5, &t5)?,
            fig6_points(&s6, &c6, &t6)?,
            fig7_points(&s7, &c7, &t7)?.0,
        ];
        let _ = write!(text, "{:<17}", v.name);
        let _ = write!(csv, "{},{}", v.name, v.sets.join(" ").replace(',', ";"));
        for c in &cols {
            match ratio_at(&points[c.fig], c.x, c.stat, c.slower, c.faster) {
                Some(r) => {
                    let _ = write!(text, " {:>9.3}", r);
                    let _ = write!(csv, ",{r:.4}");
                }
                None => {
                    let _ = write!(text, " {:>9}", "-");
                    csv.push(',');
                }
            }
        }
        let cp = [
            copies(&points[0], 2.0 * MB),
            copies(&points[1], 256.0),
            copies(&points[2], 0.1),
        ];
        for c in cp {
            let _ = write!(text, " {:>6.2}", c.unwrap_or(f64::NAN));
            let _ = write!(csv, ",{:.3}", c.unwrap_or(f64::NAN));
        }
        let _ = writeln!(text);
        csv.push('\n');
    }
    let _ = writeln!(
        text,
        "\ncp5/cp6/cp7: copies of each message PEEL's source sends (Fig 5 at 2 MB, Fig 6, Fig 7)."
    );
    let _ = writeln!(text, "\nvariants:");
    for v in &VARIANTS {
        let _ = writeln!(
            text,
            "  {:<17} {} [{}] {}",
            v.name,
            v.what,
            v.source,
            if v.sets.is_empty() {
                String::new()
            } else {
                format!("--set {}", v.sets.join(" --set "))
            }
        );
    }
    let _ = writeln!(
        text,
        "reduction: peel-fig5 --set {}; peel-fig6 --set {}; peel-fig7 --set {}",
        FIG5.join(" --set "),
        FIG6.join(" --set "),
        FIG7.join(" --set ")
    );
    Ok(EvalReport {
        text,
        files: vec![("peel-ablation.csv".into(), csv)],
        capture: Vec::new(),
        verdicts: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row can be re-run as printed: its `--set`s, with the reduction, are valid
    /// on all three presets, and each changes what it says.
    #[test]
    fn every_variant_builds_on_every_preset() {
        let sc = crate::experiments::scenario("peel-ablation", &[]).unwrap();
        for v in &VARIANTS {
            for (name, reduce) in [
                ("peel-fig5", FIG5),
                ("peel-fig6", FIG6),
                ("peel-fig7", FIG7),
            ] {
                let (s, c) = preset(name, reduce, v, &sc).unwrap_or_else(|e| panic!("{e}"));
                build_topology(&s, Path::new("")).unwrap();
                match v.name {
                    "aligned" => assert_eq!(c.job_placement, "aligned"),
                    "cores-from-start" => assert_eq!(c.setup_ms, 0.0),
                    "concurrent-8" => assert_eq!(c.concurrent_jobs, 8),
                    "pfc-3k" => assert_eq!(s.switch.resume_offset_bytes, 3072),
                    "rocast" => {
                        assert_eq!(c.job_placement, "bin-packed");
                        assert_eq!(c.upward, "ecmp");
                        assert!(!c.orca_agent);
                    }
                    "orca-agent" => assert!(c.orca_agent),
                    "upward-lowest" => assert_eq!(c.upward, "lowest"),
                    _ => {}
                }
            }
        }
        // The columns with a paper figure find it among the claims.
        let papers: Vec<Option<f64>> = columns().iter().map(Column::paper).collect();
        assert_eq!(
            papers.iter().filter(|p| p.is_some()).count(),
            7,
            "{papers:?}"
        );
        let names: std::collections::BTreeSet<_> = VARIANTS.iter().map(|v| v.name).collect();
        assert_eq!(names.len(), VARIANTS.len());
    }
}
