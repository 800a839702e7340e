//! `rocast-eval`: the papers' experiments on the `rocast-sim` simulator, each printing
//! rocast's figures beside the paper's. Every experiment is one folder of
//! `src/experiments/` (its code or the call into its paper's module, its presets, its
//! figures and plots), found by `build.rs` and listed by the [`experiment`] registry;
//! `rocast sim --preset NAME` runs them through [`run_experiment`].
//!
//! - [`experiment`]: the `Experiment` trait and the registry every listing reads.
//! - [`cepheus`]: Cepheus §V (testbed, large scale, loss, IOPS) and the sim/lab
//!   conformance transfer.
//! - [`peel`]: PEEL §2–4 (rule counts, approximation ratio against the exact Steiner
//!   tree, concurrent Broadcast CCTs).
//! - [`tmcf`]: multicast congestion control under each CNP policy (TMCF's
//!   congestion path multiplicity and moving bottleneck, Cepheus' fairness).
//! - [`odbss`]: the optical broadcast-select fabric and UD multicast on it (the
//!   `ud-latency` and `ud-loss` studies).
//! - [`rdmc`]: the application-layer baselines the experiments compare against.
//! - [`report`]: the report type every experiment returns.

// Reading glibc's heap statistics (cepheus-memory) needs `unsafe`; it allows it where
// it stands, and nothing else may.
#![deny(unsafe_code)]

// Experiment folders name the crate `rocast_eval::…`, so one folder compiles both
// here and in a test that adds it to a registry (tests/toy_experiment/).
extern crate self as rocast_eval;

pub mod bcast;
pub mod captures;
pub mod cepheus;
pub mod error;
pub mod experiment;
pub mod experiments;
pub mod odbss;
pub mod peel;
pub mod rdmc;
pub mod readings;
pub mod report;
pub mod resources;
pub mod tmcf;
pub mod trees;
pub mod verdict;

use crate::error::EvalError;
use std::fmt::Write as _;
use std::path::Path;

pub use report::EvalReport;
use rocast_sim::scenario::topology::{build_topology, engine_config};
use rocast_sim::Scenario;

/// Runs the scenario's experiment (`[experiment.NAME]` or `multicast.experiment`).
pub fn run_experiment(sc: &Scenario, base: &Path) -> Result<EvalReport, EvalError> {
    run_experiment_in(&experiments::registry(), sc, base)
}

/// [`run_experiment`] with the experiments of `registry`.
pub fn run_experiment_in(
    registry: &experiment::Registry,
    sc: &Scenario,
    base: &Path,
) -> Result<EvalReport, EvalError> {
    let t0 = std::time::Instant::now();
    let topo = build_topology(sc, base)?;
    let cfg = engine_config(sc, &topo)?;
    let name = sc.experiment_name().unwrap_or_default();
    let e = registry.experiment(name).ok_or_else(|| {
        // Name the key the scenario used.
        let key = if sc.multicast.experiment == name {
            "multicast.experiment"
        } else {
            "experiment"
        };
        format!(
            "{key} {name:?}: expected one of {}",
            experiment::experiment_names(registry)
        )
    })?;
    e.check(sc)?;
    let cx = experiment::Context {
        scenario: sc,
        base,
        topology: &topo,
        engine: &cfg,
    };
    let mut r = e.run(&cx)?;
    // The readings the preset runs under (the primary ones unless a --set replaced
    // one), and the verdicts rendered from their records, which `verdicts.json`
    // carries for `rocast repro`.
    let mut reading = "primary".to_string();
    if let Some(p) = readings::for_scenario(&sc.name) {
        r.text.push_str(&readings::table(p));
        let replaced = p.replaced(&sc.overrides);
        if !replaced.is_empty() {
            reading = format!("not primary: --set {}", replaced.join(" --set "));
            let _ = writeln!(
                r.text,
                "  this run replaces readings above: --set {}",
                replaced.join(" --set ")
            );
        }
    }
    for v in r.verdicts.iter_mut().filter(|v| v.reading.is_empty()) {
        v.reading = reading.clone();
    }
    r.text.push_str(&verdict::render(&r.verdicts));
    r.files
        .push(("verdicts.json".into(), verdict::to_json_text(&r.verdicts)));
    let _ = writeln!(r.text, "\nwall time {:.1} s", t0.elapsed().as_secs_f64());
    Ok(r)
}
