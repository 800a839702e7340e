//! `rocast bcast` end to end: OSU-format tables, the CSV, verified bytes, bad input.

mod common;
use common::{assert_contains_all, rocast};

#[test]
fn bcast_prints_osu_tables_and_writes_csv() {
    let dir = std::env::temp_dir().join(format!("rocast-bcast-cli-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let r = rocast(&[
        "bcast",
        "--group",
        "6",
        "--sizes",
        "64,4M",
        "--schemes",
        "chain,pipeline,tree",
        "--block",
        "512K",
        "--verify",
        "--root",
        "2",
        "--out",
        out,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let stdout = r.stdout;
    assert_eq!(
        stdout.matches("# OSU MPI Broadcast Latency Test").count(),
        3
    );
    assert_eq!(stdout.matches("# Size").count(), 3);
    // One line per size under each header: "64   <latency>".
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("64 ") || l.starts_with("4194304 "))
        .collect();
    assert_eq!(rows.len(), 6, "{stdout}");
    for r in rows {
        let us: f64 = r.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(us > 1.0 && us < 10_000.0, "{r}");
    }
    let csv = std::fs::read_to_string(dir.join("bcast.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6);
    assert!(csv.starts_with("scheme,group,size_bytes,"));
    // The pipeline beats the whole-message tree at 4 MiB in 512 KiB blocks.
    let lat = |scheme: &str| -> f64 {
        csv.lines()
            .find(|l| l.starts_with(&format!("{scheme},6,4194304,")))
            .unwrap()
            .split(',')
            .nth(6)
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(lat("pipeline") < lat("tree"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bcast_rejects_bad_arguments_with_exit_2() {
    for args in [
        vec!["bcast", "--schemes", "gossip"],
        vec!["bcast", "--sizes", "0:8"],
        vec!["bcast", "--group", "1"],
        vec!["bcast", "--group", "4", "--root", "4"],
        vec!["bcast", "--block", "0"],
        vec!["bcast", "--topo", "no-such-preset"],
        vec!["bcast", "--verify", "--sizes", "1G"],
        vec!["bcast", "--overhead-us", "-1"],
    ] {
        let r = rocast(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with("rocast bcast: ") || r.stderr.contains("error"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn a_star_wider_than_the_port_numbers_is_refused_in_words() {
    // One switch for 70,000 ranks needs port numbers past 16 bits: a clear limit, not a
    // QP error mid-run.
    let r = rocast(&[
        "bcast",
        "--group",
        "70000",
        "--sizes",
        "64",
        "--schemes",
        "chain",
    ]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("16-bit port numbers") && r.stderr.contains("70001 ports"),
        "{}",
        r.stderr
    );
}

#[test]
fn analyze_prints_rdmcs_slack_beside_the_schedules() {
    let r = rocast(&[
        "bcast",
        "--analyze",
        "--group",
        "16",
        "--sizes",
        "16M",
        "--schemes",
        "pipeline,chain",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // 16 blocks over 16 ranks: k + log2 n − 1 steps; every steady step at the formula.
    assert_contains_all(
        &r.stdout,
        &[
            "pipeline: 19 steps",
            "mean 1.5714, min 1.5714, max 1.5714",
            "2(1 - (l-1)/(n-2)) = 1.5714",
            "chain: 30 steps",
        ],
    );
}

/// RDMC §4.2's slow link, on the analytic model: at n = 64 one half-speed link between
/// two ranks costs the binomial pipeline 14 % (the paper: it keeps 85.6 %), the chain
/// nearly half; a slow NIC, which the pipeline's every step meets, halves it too.
#[test]
fn analyze_measures_rdmcs_half_speed_link() {
    let r = rocast(&[
        "bcast",
        "--analyze",
        "--group",
        "64",
        "--sizes",
        "256M",
        "--block",
        "1M",
        "--schemes",
        "pipeline,chain",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_contains_all(
        &r.stdout,
        &[
            "the link 62-63, then rank 63's whole NIC, at half rate",
            "  pipeline      22417.6      26020.9      86.2%      43888.7      51.1%",
            "     chain      27251.4      48727.5      55.9%      48727.5      55.9%",
        ],
    );
}

/// RDMC §4.6 through the CLI: a member crash mid-transfer ends in one printed outcome
/// shared by all survivors; malformed --fail values are clear errors.
#[test]
fn fail_prints_one_outcome_for_all_survivors() {
    let dir = std::env::temp_dir().join(format!("rocast-bcast-fail-{}", std::process::id()));
    let r = rocast(&[
        "bcast",
        "--group",
        "8",
        "--sizes",
        "4M",
        "--schemes",
        "chain,pipeline",
        "--fail",
        "3@100us",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_contains_all(
        &r.stdout,
        &[
            "4194304    rank 3 crashed at 100.000 us: all 7 survivors: group failed, members [3]; 3 of 7 survivors held the message",
            "4194304    rank 3 crashed at 100.000 us: all 7 survivors: group failed, members [3]; 1 of 7 survivors held the message",
        ],
    );
    for bad in ["3", "9@1us", "x@1us", "3@100"] {
        let r = rocast(&["bcast", "--group", "8", "--fail", bad]);
        assert_eq!(r.code, 2, "--fail {bad}: {}", r.stderr);
        assert!(r.stderr.contains("--fail"), "--fail {bad}: {}", r.stderr);
    }
}

/// RDMC §4.6's small-message protocol against RDMC on a stream: pinned rows of the
/// seeded simulation (the ring wins in a small group, RDMC in a large one), the CSV,
/// and bad values refused.
#[test]
fn smc_compares_ring_writes_with_rdmc() {
    let dir = std::env::temp_dir().join(format!("rocast-bcast-smc-{}", std::process::id()));
    let r = rocast(&[
        "bcast",
        "--smc",
        "--smc-groups",
        "2,32",
        "--smc-sizes",
        "1K",
        "--messages",
        "20",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let row = |group: &str| -> Vec<String> {
        r.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(group))
            .unwrap_or_else(|| panic!("no row for {group}: {}", r.stdout))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let speedup = |g: &str| row(g)[4].trim_end_matches('x').parse::<f64>().unwrap();
    assert!(speedup("2") > 2.0, "{}", r.stdout);
    assert!(speedup("32") < 1.0, "{}", r.stdout);
    let csv = std::fs::read_to_string(dir.join("bcast-smc.csv")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.starts_with("group,size_bytes,messages,slots,"));
    for bad in [
        vec!["bcast", "--smc", "--smc-groups", "1"],
        vec!["bcast", "--smc", "--smc-sizes", "0"],
        vec!["bcast", "--smc", "--messages", "0"],
        vec!["bcast", "--smc", "--slots", "0"],
    ] {
        let r = rocast(&bad);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
    }
}
