//! `rocast-eval`: the papers' experiments on the `rocast-sim` simulator, one module
//! per paper, each printing rocast's figures beside the paper's. `rocast sim
//! --preset NAME` runs them through [`run_experiment`].
//!
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

pub mod cepheus;
pub mod odbss;
pub mod peel;
pub mod rdmc;
pub mod readings;
pub mod report;
pub mod resources;
pub mod tmcf;
pub mod trees;
pub mod verdict;

use std::fmt::Write as _;
use std::path::Path;

pub use report::EvalReport;
use rocast_sim::scenario::topology::{build_topology, engine_config};
use rocast_sim::Scenario;

/// Runs the scenario's `[multicast]` experiment.
pub fn run_experiment(sc: &Scenario, base: &Path) -> Result<EvalReport, String> {
    let t0 = std::time::Instant::now();
    let topo = build_topology(sc, base)?;
    let cfg = engine_config(sc, &topo)?;
    let mut r = match sc.multicast.experiment.as_str() {
        "testbed" => cepheus::testbed(sc, &topo, &cfg, cepheus::TableMode::Testbed)?,
        "large-scale" => cepheus::testbed(sc, &topo, &cfg, cepheus::TableMode::LargeScale)?,
        "compare" => cepheus::testbed(sc, &topo, &cfg, cepheus::TableMode::Compare)?,
        "fig12-ablation" => cepheus::fig12_ablation(sc)?,
        "memory" => cepheus::memory(sc)?,
        "io-latency" => cepheus::io_latency(sc, &topo, &cfg)?,
        "hpl" => cepheus::hpl(sc, &topo, &cfg)?,
        "safeguard" => cepheus::safeguard(sc, &topo, &cfg)?,
        "loss" => cepheus::loss(sc, &topo, &cfg)?,
        "iops" => cepheus::iops(sc, &topo, &cfg)?,
        "fairness" => tmcf::fairness(sc, base)?,
        "peel-rules" => peel::rules(sc)?,
        "peel-approx" => peel::approx(sc, base)?,
        "peel-fig5" => peel::fig5(sc, base)?,
        "peel-fig6" => peel::fig6(sc, base)?,
        "peel-fig7" => peel::fig7(sc, base)?,
        "peel-ablation" => peel::ablation(sc)?,
        "peel-fig1" => peel::fig1(sc, base)?,
        "peel-fig3" => peel::fig3(sc)?,
        "peel-fig4" => peel::fig4(sc, base)?,
        "peel-guard" => peel::guard(sc, base)?,
        "tmcf-cpmp" => tmcf::cpmp(sc, base)?,
        "tmcf-moving" => tmcf::moving(sc, base)?,
        "tmcf-robustness" => tmcf::robustness(sc, base)?,
        "transfer" => cepheus::transfer(sc, &topo, &cfg)?,
        "peel-transfer" => peel::transfer::transfer(sc)?,
        "ud-latency" => odbss::ud_latency(sc)?,
        "ud-loss" => odbss::ud_loss(sc)?,
        "ud-fig4" => odbss::fig4(sc)?,
        other => {
            return Err(format!(
            "multicast.experiment {other:?}: expected compare, testbed, large-scale, fig12-ablation, memory, io-latency, hpl, safeguard, loss, iops, fairness, peel-rules, peel-approx, peel-fig1/3/4/5/6/7, peel-guard, peel-ablation, tmcf-cpmp, tmcf-moving, tmcf-robustness, transfer, peel-transfer, ud-latency, ud-loss or ud-fig4"
        ))
        }
    };
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
