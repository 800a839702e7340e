//! A partitioned run (`engine::partition`) gives byte-identical outputs whatever the
//! number of worker threads, and keeps its books: bytes conserved end to end and on
//! every link, every flow finished.

use rocast_sim::run::{run_scenario, Execution, RunOptions};
use rocast_sim::scenario::Scenario;
use std::path::{Path, PathBuf};

/// Runs `preset` with `sets` on `threads` threads into a fresh directory; returns it
/// and how the run executed.
fn run(preset: &str, sets: &[&str], threads: usize, tag: &str) -> (PathBuf, Execution) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = Scenario::preset(preset, &sets).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "rocast-partitioned-{}-{preset}-{tag}-{threads}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions {
        out_dir: Some(dir.clone()),
        progress: false,
        threads,
        ..RunOptions::default()
    };
    let r = run_scenario(&sc, Path::new("."), &opts).unwrap();
    assert_eq!(r.imbalance_bytes, 0, "{preset}: bytes not conserved");
    assert_eq!(r.links_unbalanced, 0, "{preset}: a link lost count");
    assert_eq!(
        r.totals.flows_finished as usize,
        r.results.len(),
        "{preset}"
    );
    (dir, r.execution)
}

/// `summary.json` without the lines that time the machine.
fn summary_without_wall(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("summary.json"))
        .unwrap()
        .lines()
        .filter(|l| {
            !["\"wall_s\"", "\"setup_s\"", "\"events_per_s\""]
                .iter()
                .any(|k| l.trim_start().starts_with(k))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn same_outputs(preset: &str, sets: &[&str], files: &[&str]) {
    let (one, e1) = run(preset, sets, 1, "a");
    assert!(
        matches!(e1, Execution::Partitioned { partitions, .. } if partitions > 1),
        "{preset} did not partition: {e1}"
    );
    for threads in [2, 3] {
        let (many, e) = run(preset, sets, threads, "b");
        assert!(matches!(e, Execution::Partitioned { .. }), "{e}");
        for f in files {
            let a = std::fs::read(one.join(f)).unwrap();
            let b = std::fs::read(many.join(f)).unwrap();
            assert!(
                a == b,
                "{preset}: {f} differs between 1 and {threads} threads"
            );
        }
        assert_eq!(summary_without_wall(&one), summary_without_wall(&many));
        let _ = std::fs::remove_dir_all(&many);
    }
    let _ = std::fs::remove_dir_all(&one);
}

#[test]
fn permutation_with_dcqcn_is_the_same_on_one_thread_and_many() {
    same_outputs(
        "default",
        &["topology.k=4", "workload.size_bytes=200000"],
        &["fct.txt", "ports.csv"],
    );
}

#[test]
fn poisson_load_is_the_same_on_one_thread_and_many() {
    same_outputs(
        "websearch",
        &["topology.k=4", "workload.duration_ms=0.3"],
        &["fct.txt", "ports.csv"],
    );
}

/// Pauses cross partitions too: an incast from every pod into one host, lossless
/// without ECN and with small buffers, fills the queues until PFC pushes back
/// across the cut.
#[test]
fn pfc_across_partitions_is_the_same_on_one_thread_and_many() {
    let sets = [
        "workload.senders=15",
        "workload.size_bytes=300000",
        "switch.ecn=false",
        "nic.cc=\"none\"",
        "output.qlen_interval_us=0",
        "switch.buffer_mb=0.5",
    ];
    same_outputs("incast", &sets, &["fct.txt", "ports.csv", "pfc.txt"]);
    let (dir, _) = run("incast", &sets, 2, "pfc");
    let pfc = std::fs::read_to_string(dir.join("pfc.txt")).unwrap();
    assert!(pfc.lines().count() > 10, "no PFC in the incast:\n{pfc}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scenarios that need one global order say so and run on one engine.
#[test]
fn a_run_with_queue_samples_runs_on_one_engine() {
    let sc = Scenario::preset("incast", &["workload.size_bytes=10000".into()]).unwrap();
    let r = run_scenario(&sc, Path::new("."), &RunOptions::default()).unwrap();
    assert_eq!(
        r.execution.to_string(),
        "one engine: queues are sampled (output.qlen_interval_us)"
    );
}
