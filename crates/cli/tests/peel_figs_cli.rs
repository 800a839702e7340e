//! `rocast sim --preset peel-fig5|6|7`, shrunk: every scheme runs, the paper's figures
//! are printed beside the table, the CSV is written, and bad scheme names are errors.

mod common;
use common::rocast;
use std::path::Path;

fn out_dir(name: &str) -> String {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("peel_figs")
        .join(name);
    d.to_str().unwrap().to_string()
}

/// The table rows: (x, scheme, jobs, mean ms).
fn rows(stdout: &str) -> Vec<(String, String, u32, f64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let jobs = f.get(2)?.parse().ok()?;
            let mean = f.get(3)?.parse().ok()?;
            Some((f[0].to_string(), f[1].to_string(), jobs, mean))
        })
        .collect()
}

#[test]
fn fig5_runs_every_scheme_and_writes_its_csv() {
    let out = out_dir("fig5");
    let r = rocast(&[
        "sim",
        "--preset",
        "peel-fig5",
        "--out",
        &out,
        "--set",
        "multicast.sizes=\"256K\"",
        "--set",
        "multicast.group=64",
        "--set",
        "multicast.broadcasts=4",
        "--set",
        "multicast.setup_ms=0.2",
        "--set",
        "multicast.setup_sd_ms=0.05",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("paper: PEEL's mean CCT 23%"),
        "{}",
        r.stdout
    );
    let rows = rows(&r.stdout);
    let schemes: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        schemes,
        [
            "peel",
            "peel-cores",
            "ring",
            "binary-tree",
            "orca",
            "optimal"
        ]
    );
    for (x, s, jobs, mean) in &rows {
        assert_eq!(x, "256K");
        assert_eq!(*jobs, 4, "{s}");
        // 256 KiB at 100 Gb/s takes at least 21 µs.
        assert!(*mean > 0.021, "{s}: {mean} ms");
    }
    let csv = std::fs::read_to_string(Path::new(&out).join("peel-fig5.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7);
    assert!(csv.starts_with("figure,size,scheme,jobs,mean_ms,p99_ms"));
}

#[test]
fn fig6_and_fig7_run_shrunk() {
    let r = rocast(&[
        "sim",
        "--preset",
        "peel-fig6",
        "--out",
        &out_dir("fig6"),
        "--set",
        "multicast.groups=[32, 64]",
        "--set",
        "multicast.message=\"128K\"",
        "--set",
        "multicast.broadcasts=4",
        "--set",
        "multicast.schemes=[\"peel\", \"optimal\"]",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(rows(&r.stdout).len(), 4);
    let r = rocast(&[
        "sim",
        "--preset",
        "peel-fig7",
        "--out",
        &out_dir("fig7"),
        "--set",
        "multicast.instances=3",
        "--set",
        "multicast.fail_fractions=[0.1]",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rows = rows(&r.stdout);
    assert_eq!(rows.len(), 4, "{}", r.stdout);
    assert!(rows.iter().all(|r| r.0 == "10%" && r.2 == 3));
    assert!(r.stdout.contains("30x below Tree's"));
}

#[test]
fn unknown_scheme_is_a_clear_error() {
    let r = rocast(&[
        "sim",
        "--preset",
        "peel-fig7",
        "--out",
        &out_dir("bad"),
        "--set",
        "multicast.schemes=[\"multicast-magic\"]",
    ]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("unknown collective scheme"),
        "{}",
        r.stderr
    );
}

/// TMCF's CPMP preset: forward-all collapses as paths congest, TMCF holds more.
#[test]
fn tmcf_cpmp_preset_separates_the_policies() {
    let out = out_dir("cpmp");
    let r = rocast(&["sim", "--preset", "tmcf-cpmp", "--out", &out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The row with all six paths congested: forward-all, tmcf, cepheus, guard, fair.
    let row: Vec<f64> = r
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("6"))
        .unwrap_or_else(|| panic!("{}", r.stdout))
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let (fa, tmcf, fair) = (row[0], row[1], row[4]);
    assert_eq!(fair, 20.0);
    assert!(fa < 0.6 * fair, "forward-all {fa}");
    assert!(tmcf > 0.65 * fair && tmcf > 1.3 * fa, "tmcf {tmcf} vs {fa}");
    let csv = std::fs::read_to_string(Path::new(&out).join("tmcf-cpmp.csv")).unwrap();
    assert!(csv.starts_with("ms,policy,gbps,u0_gbps,"));
    // The per-phase table: with six congested paths TMCF's Jain index is above
    // forward-all's, and no pauses are sent (the buffer holds every queue).
    let fa6 = phase_row(&r.stdout, "forward-all", "7.0-9.0");
    let tmcf6 = phase_row(&r.stdout, "tmcf", "7.0-9.0");
    assert!(tmcf6.jain > fa6.jain, "{} vs {}", tmcf6.jain, fa6.jain);
    assert_eq!(fa6.pauses + tmcf6.pauses, 0);
}

/// One row of the congestion-control presets' per-phase table.
struct PhaseRow {
    bottleneck: String,
    rate_over_fair: f64,
    jain: f64,
    converge_ms: Option<f64>,
    queue_max_kb: f64,
    pauses: u64,
}

/// The row of `policy` whose phase starts as `phase` does ("7.0-9.0", or "4.0-" for
/// any end).
fn phase_row(stdout: &str, policy: &str, phase: &str) -> PhaseRow {
    let f: Vec<&str> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() == 12 && f[0] == policy && f[1].starts_with(phase))
        .unwrap_or_else(|| panic!("{policy} {phase}: {stdout}"));
    let num = |s: &str| s.parse::<f64>().unwrap_or_else(|_| panic!("{s} in {f:?}"));
    PhaseRow {
        bottleneck: f[3].to_string(),
        rate_over_fair: num(f[6]),
        jain: if f[7] == "-" { f64::NAN } else { num(f[7]) },
        converge_ms: (f[8] != "-").then(|| num(f[8])),
        queue_max_kb: num(f[10]),
        pauses: f[11].parse().unwrap(),
    }
}

/// TMCF's moving bottleneck: while receiver 4 is the worst (two unicasts into it,
/// one into receiver 1), TMCF follows it closer than forward-all.
#[test]
fn tmcf_moving_preset_follows_the_worst_bottleneck() {
    let r = rocast(&[
        "sim",
        "--preset",
        "tmcf-moving",
        "--out",
        &out_dir("moving"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Receiver 4 is the bottleneck (two unicasts into it, one into receiver 1) from 4 ms.
    let fa = phase_row(&r.stdout, "forward-all", "4.0-");
    let tmcf = phase_row(&r.stdout, "tmcf", "4.0-");
    assert_eq!(
        (fa.bottleneck.as_str(), tmcf.bottleneck.as_str()),
        ("4", "4")
    );
    for row in [&fa, &tmcf] {
        assert!((0.5..=1.0).contains(&row.jain), "{}", row.jain);
        assert!(row.queue_max_kb > 0.0);
    }
    assert!(fa.rate_over_fair < 0.8, "forward-all {}", fa.rate_over_fair);
    assert!(
        tmcf.rate_over_fair > 0.85 && tmcf.rate_over_fair > fa.rate_over_fair,
        "tmcf {} vs {}",
        tmcf.rate_over_fair,
        fa.rate_over_fair
    );
    // Converged within the phase, measured from the change.
    assert!(
        tmcf.converge_ms.is_some_and(|c| c < 4.0),
        "{:?}",
        tmcf.converge_ms
    );
    let bad = rocast(&[
        "sim",
        "--preset",
        "tmcf-moving",
        "--out",
        &out_dir("moving-bad"),
        "--set",
        "multicast.unicasts=[[1, 1, 0.0, 1.0]]",
    ]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("multicast.unicasts[0]"),
        "{}",
        bad.stderr
    );
}

/// Cepheus' Fig 14 under every policy: with one unicast, the multicast holds at least
/// 85 % of its half-link share under each policy, with a Jain index above 0.95; the
/// preset's overlap gives a phase with two congested branches, and every phase gets a
/// verdict.
#[test]
fn cepheus_fairness_preset_runs_every_policy() {
    let out = out_dir("fairness");
    let r = rocast(&["sim", "--preset", "cepheus-fairness", "--out", &out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for policy in ["forward-all", "tmcf", "cepheus", "guard"] {
        let f2 = phase_row(&r.stdout, policy, "5.0-");
        assert_ne!(f2.bottleneck, "-");
        assert!(f2.rate_over_fair > 0.85, "{policy}: {}", f2.rate_over_fair);
        assert!(f2.jain > 0.95, "{policy}: {}", f2.jain);
        assert!(r
            .stdout
            .contains(&format!("{policy:<12} multicast done at")));
        let verdicts = r
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("paper vs rocast, per phase"))
            .find(|l| l.trim_start().starts_with(policy))
            .unwrap_or_else(|| panic!("{policy}: {}", r.stdout));
        assert!(
            verdicts.contains("alone") && verdicts.contains("shared"),
            "{verdicts}"
        );
        let two = r.stdout.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 3 && w[0] == policy && w[2] == "2"
        });
        assert!(two, "{policy}: no phase with two congested receivers");
    }
    let csv = std::fs::read_to_string(Path::new(&out).join("fairness.csv")).unwrap();
    assert!(csv.starts_with("ms,policy,gbps,u0_gbps,u1_gbps,queue_kb,pauses\n"));
}
