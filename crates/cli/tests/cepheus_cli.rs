//! `rocast sim --preset cepheus-*`: the evaluation presets run and print the paper's
//! figures beside rocast's (on reduced sizes, to stay quick).

mod common;
use common::rocast;
use std::path::Path;

fn out_dir(name: &str) -> String {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cepheus_cli")
        .join(name);
    d.to_str().unwrap().to_string()
}

#[test]
fn testbed_preset_compares_every_scheme() {
    let out = out_dir("testbed");
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-testbed",
        "--set",
        "multicast.sizes=\"64,2M\"",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "cepheus us",
        "tree us",
        "chain us",
        "pipeline us",
        "paper 3-5.2x",
        "paper 2-2.8x",
    ] {
        assert!(r.stdout.contains(want), "{want}: {}", r.stdout);
    }
    let csv = std::fs::read_to_string(Path::new(&out).join("testbed.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 4);
    // Cepheus beats every baseline at both sizes on one switch.
    for line in r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("64 ") || l.trim_start().starts_with("2M "))
    {
        let ratios: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.strip_suffix('x'))
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(ratios.len(), 3, "{line}");
        assert!(ratios.iter().all(|&x| x > 1.0), "{line}");
    }
}

#[test]
fn iops_preset_reproduces_the_replication_gap() {
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-iops",
        "--set",
        "experiment.ios=2000",
        "--out",
        &out_dir("iops"),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let miops = |name: &str| -> f64 {
        let l = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap();
        l.split_whitespace().last().unwrap().parse().unwrap()
    };
    let (one, three, ceph) = (miops("1-unicast"), miops("3-unicasts"), miops("cepheus"));
    assert!(ceph > 2.5 * three, "{ceph} vs {three}");
    assert!(ceph > 0.95 * one && ceph <= one * 1.01, "{ceph} vs {one}");
}

#[test]
fn bad_experiment_settings_are_clear_errors() {
    for (preset, set, says) in [
        (
            "cepheus-testbed",
            "multicast.experiment=\"nope\"",
            "multicast.experiment",
        ),
        (
            "cepheus-iops",
            "experiment.queue_depth=0",
            "experiment.ios, experiment.queue_depth",
        ),
        (
            "cepheus-iops",
            "experiment.loss_at=\"middle-switches\"",
            "experiment.iops: unknown field `loss_at`",
        ),
        ("cepheus-testbed", "multicast.group=99", "does not fit"),
        (
            "cepheus-loss",
            "experiment.loss_rates=[2.0]",
            "not a probability",
        ),
        (
            "cepheus-fig12",
            "multicast.placement=\"random\"",
            "multicast.placement",
        ),
        (
            "cepheus-fig12-ablation",
            "multicast.overhead_us=-1",
            "multicast.overhead_us",
        ),
    ] {
        let r = rocast(&["sim", "--preset", preset, "--set", set]);
        assert_eq!(r.code, 2, "{set}");
        assert!(r.stderr.contains(says), "{set}: {}", r.stderr);
    }
}

/// Reads `rocast sim`'s CSV `name` in `dir` as rows of (column → value).
fn csv_rows(dir: &str, name: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(Path::new(dir).join(name)).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

#[test]
fn fig12_prints_a_verdict_per_claim() {
    let out = out_dir("fig12");
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-fig12",
        "--set",
        "multicast.group=16",
        "--set",
        "multicast.sizes=\"64,1M\"",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for claim in [
        "short flows vs chain",
        "short flows vs tree",
        "large flows vs chain",
        "large flows vs tree",
    ] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(claim))
            .unwrap_or_else(|| panic!("{claim}: {}", r.stdout));
        assert!(
            line.contains("reproduced") || line.contains("differs"),
            "{line}"
        );
        // A claim that differs says why.
        if line.contains("differs") {
            assert!(r.stdout.contains(&format!("why {claim}:")), "{}", r.stdout);
        }
    }
    assert_eq!(csv_rows(&out, "fig12.csv").len(), 2 * 3);
    // The readings it ran under, and one structured verdict per claim.
    assert!(
        r.stdout.contains("readings (Cepheus Fig. 12"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("nic.dcqcn_preset=\"cx5\""),
        "{}",
        r.stdout
    );
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(&out).join("verdicts.json")).unwrap(),
    )
    .unwrap();
    let v = v.as_array().unwrap();
    assert_eq!(v.len(), 4, "{v:?}");
    for x in v {
        assert_eq!(x["reading"], "primary");
        let w = x["word"].as_str().unwrap();
        assert!(w == "reproduced" || w.starts_with("differs"), "{x}");
        // A verdict that differs says why.
        assert_eq!(
            w != "reproduced",
            !x["reason"].as_str().unwrap().is_empty(),
            "{x}"
        );
    }
}

/// Every ablation row is what `cepheus-fig12` prints with that row's --sets: the
/// table can be checked run by run.
#[test]
fn fig12_ablation_rows_are_the_preset_with_their_sets() {
    let out = out_dir("fig12-ablation");
    let small = [
        "--set",
        "multicast.group=8",
        "--set",
        "multicast.sizes=\"64,256K\"",
    ];
    let mut args = vec!["sim", "--preset", "cepheus-fig12-ablation"];
    args.extend(small);
    args.extend(["--out", &out]);
    let r = rocast(&args);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let rows = csv_rows(&out, "fig12-ablation.csv");
    let variants: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["variant"].as_str()).collect();
    // The primary, every alternative of Fig. 12's readings, and two diagnostics.
    for v in [
        "primary",
        "overhead_us#1",
        "eager_limit#1",
        "placement#1",
        "tree_window#1",
        "chain_slices_per_rank#1",
        "k#1",
        "dcqcn_preset#1",
        "mtu#1",
        "one-switch",
        "earlier",
    ] {
        assert!(variants.contains(v), "{v}");
        assert!(
            r.stdout.lines().any(|l| l.starts_with(v)),
            "{v}: {}",
            r.stdout
        );
    }
    assert_eq!(rows.len(), variants.len() * 2 * 3);
    // Re-run two variants as the preset with their sets.
    for v in ["overhead_us#1", "tree_window#1"] {
        let sets = rows.iter().find(|r| r["variant"] == v).unwrap()["sets"].clone();
        let dir = out_dir(&format!("fig12-as-{v}"));
        let mut a = vec!["sim".to_string(), "--preset".into(), "cepheus-fig12".into()];
        for s in sets.split(' ').filter(|s| !s.is_empty()) {
            a.push("--set".into());
            a.push(s.replace(';', ","));
        }
        for s in small {
            a.push(s.into());
        }
        a.extend(["--out".into(), dir.clone()]);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let r2 = rocast(&refs);
        assert_eq!(r2.code, 0, "{}{}", r2.stdout, r2.stderr);
        for p in csv_rows(&dir, "fig12.csv") {
            let row = rows
                .iter()
                .find(|r| {
                    r["variant"] == v
                        && r["size_bytes"] == p["size_bytes"]
                        && r["scheme"] == p["scheme"]
                })
                .unwrap();
            assert_eq!(row["latency_us"], p["latency_us"], "{v} {p:?}");
        }
    }
    // Posting all children at once shortens the tree's small-message latency.
    let lat = |v: &str| -> f64 {
        rows.iter()
            .find(|r| r["variant"] == v && r["size_bytes"] == "64" && r["scheme"] == "tree")
            .unwrap()["latency_us"]
            .parse()
            .unwrap()
    };
    assert!(
        lat("primary") < lat("tree_window#1"),
        "{} vs {}",
        lat("primary"),
        lat("tree_window#1")
    );
}

#[test]
fn memory_preset_measures_the_tables_it_builds() {
    let out = out_dir("memory");
    let r = rocast(&["sim", "--preset", "cepheus-memory", "--out", &out]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let rows = csv_rows(&out, "cepheus-memory.csv");
    let per_group = |what: &str| -> f64 {
        rows.iter()
            .find(|r| r["what"].starts_with(what))
            .unwrap_or_else(|| panic!("{what}: {rows:?}"))["bytes_per_group"]
            .parse()
            .unwrap()
    };
    // The paper's fields packed: 64 × 11 B + 13 B of group state.
    assert_eq!(per_group("packed: the paper's fields"), 717.0);
    let (accounted, measured) = (
        per_group("rocast software: its own accounting"),
        per_group("rocast software: measured heap"),
    );
    // The allocator saw at least what rocast accounts for, and not wildly more.
    assert!(
        measured >= 0.95 * accounted && measured < 2.0 * accounted,
        "{measured} vs {accounted}"
    );
    // Twice the groups, twice the heap (bounded per group, whatever the group size).
    let out2 = out_dir("memory-2k");
    let r2 = rocast(&[
        "sim",
        "--preset",
        "cepheus-memory",
        "--set",
        "experiment.memory.groups=2000",
        "--out",
        &out2,
    ]);
    assert_eq!(r2.code, 0, "{}{}", r2.stdout, r2.stderr);
    let rows2 = csv_rows(&out2, "cepheus-memory.csv");
    let total = |rows: &[std::collections::BTreeMap<String, String>]| -> f64 {
        rows.iter()
            .find(|r| r["what"].starts_with("rocast software: its own"))
            .unwrap()["total_bytes"]
            .parse()
            .unwrap()
    };
    let ratio = total(&rows2) / total(&rows);
    assert!((1.9..2.1).contains(&ratio), "{ratio}");
    let bad = rocast(&[
        "sim",
        "--preset",
        "cepheus-memory",
        "--set",
        "experiment.memory.ports=1",
    ]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("experiment.memory.ports"),
        "{}",
        bad.stderr
    );
}

#[test]
fn safeguard_falls_back_mid_transfer_without_losing_a_byte() {
    let out = out_dir("safeguard");
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-safeguard",
        "--set",
        "multicast.messages=64",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let rows = csv_rows(&out, "safeguard.csv");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let get = |run: &str, col: &str| rows.iter().find(|r| r["run"] == run).unwrap()[col].clone();
    // The loss starts mid-transfer: before it, the lossy runs went as fast as the clean one.
    assert_eq!(get("no-loss", "before_gbps"), get("loss", "before_gbps"));
    assert_eq!(get("no-loss", "retransmitted"), "0");
    assert_ne!(get("loss", "retransmitted"), "0");
    assert_eq!(get("loss", "fallback_ms"), "-");
    // The safeguard fired after the loss began, within its 1 ms window (+ grace), and
    // some messages went over the overlay; every byte arrived (the run fails otherwise).
    let detect: f64 = get("loss+safeguard", "detect_ms").parse().unwrap();
    assert!(detect > 0.0 && detect <= 1.1, "{detect}");
    let overlay: u32 = get("loss+safeguard", "overlay_messages").parse().unwrap();
    assert!(overlay > 0 && overlay < 64, "{overlay}");
    for want in ["verdict, detection", "verdict, delivery", "verdict, cost"] {
        assert!(r.stdout.contains(want), "{want}: {}", r.stdout);
    }
    let bad = rocast(&[
        "sim",
        "--preset",
        "cepheus-safeguard",
        "--set",
        "experiment.loss_ranks=[0]",
    ]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("loss_ranks"), "{}", bad.stderr);
}

#[test]
fn loss_preset_prints_its_verdicts_and_cuts_the_chain_as_configured() {
    let run = |extra: &[&str], name: &str| {
        let out = out_dir(name);
        let mut a = vec![
            "sim",
            "--preset",
            "cepheus-loss",
            "--set",
            "multicast.groups=[8]",
            "--set",
            "experiment.loss_rates=[0.0,1e-3]",
            "--set",
            "multicast.message=\"4M\"",
        ];
        a.extend_from_slice(extra);
        a.extend(["--out", &out]);
        let r = rocast(&a);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        (r.stdout, csv_rows(&out, "loss.csv"))
    };
    // The chain in 1 MiB blocks (the alternative reading) here; slices = ranks (the
    // preset's primary) below.
    let (text, rows) = run(
        &[
            "--set",
            "multicast.chain_slices_per_rank=false",
            "--set",
            "multicast.chain_slices=0",
        ],
        "loss",
    );
    assert!(text.contains("verdict, throughput at 1e-3"), "{text}");
    assert_eq!(rows.len(), 2 * 4);
    let chain_us = |rows: &[std::collections::BTreeMap<String, String>]| -> f64 {
        rows.iter()
            .find(|r| r["scheme"] == "chain" && r["retransmission"] == "gbn" && r["loss"] == "0")
            .unwrap()["fct_us"]
            .parse()
            .unwrap()
    };
    // 4 MiB in 1 MiB blocks vs in 8 slices (one per rank) of 512 KiB: the finer
    // pipeline is faster through 7 hops.
    let (_, sliced) = run(&[], "loss-sliced");
    assert!(
        chain_us(&sliced) < chain_us(&rows),
        "{} vs {}",
        chain_us(&sliced),
        chain_us(&rows)
    );
}

#[test]
fn fig10_io_latency_compares_every_scheme_at_every_size() {
    let out = out_dir("fig10");
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-fig10",
        "--set",
        "multicast.sizes=\"8K,512K\"",
        "--set",
        "experiment.ios=20",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let rows = csv_rows(&out, "fig10.csv");
    assert_eq!(rows.len(), 2 * 4);
    let lat = |size: &str, scheme: &str| -> f64 {
        rows.iter()
            .find(|r| r["size_bytes"] == size && r["scheme"] == scheme)
            .unwrap()["latency_us"]
            .parse()
            .unwrap()
    };
    for size in ["8192", "524288"] {
        // One copy through the client's stack and the wire, not three.
        assert!(lat(size, "cepheus") < lat(size, "3-unicasts"), "{size}");
        assert!(
            lat(size, "cepheus") <= lat(size, "1-unicast") * 1.05,
            "{size}"
        );
    }
    // The gap grows with the IO size (the paper's observation).
    let cut = |size: &str| 1.0 - lat(size, "cepheus") / lat(size, "3-unicasts");
    assert!(cut("524288") > cut("8192"));
    assert!(r.stdout.contains("8K: paper -23%"), "{}", r.stdout);
    assert!(r.stdout.contains("512K: paper -60%"), "{}", r.stdout);
}

#[test]
fn fig11_hpl_model_times_both_operations() {
    let out = out_dir("fig11");
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-fig11",
        "--set",
        "experiment.hpl.n=4096",
        "--set",
        "experiment.hpl.samples=4",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let rows = csv_rows(&out, "fig11.csv");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let cut = |op: &str| -> f64 {
        rows.iter().find(|r| r["op"] == op).unwrap()["reduction"]
            .parse()
            .unwrap()
    };
    // The increasing ring's 3 whole-panel hops against one multicast: about 2/3 saved.
    assert!(
        (0.6..0.72).contains(&cut("PB-1ring")),
        "{}",
        cut("PB-1ring")
    );
    // Spread-roll moves about 1.5x the rows per link on 4 ranks: Cepheus saves less.
    assert!(cut("RS-long") > 0.0 && cut("RS-long") < cut("PB-1ring"));
    for v in ["reproduced", "differs"] {
        assert!(r.stdout.contains(v), "{v}: {}", r.stdout);
    }
    let bad = rocast(&[
        "sim",
        "--preset",
        "cepheus-fig11",
        "--set",
        "experiment.hpl.nb=0",
    ]);
    assert_ne!(bad.code, 0);
}

/// The demonstration preset (`scripts/demo.sh`): one group on the default fat-tree,
/// the best overlay per size, a plot, and a capture of the Cepheus run that passes
/// `rocast pcap check`. Pinned: the seeded run's 4 KB and 1 MB rows (sizes cut to stay
/// quick in a debug build; the middle one, 1 MB, is still the captured run).
#[test]
fn multicast_preset_shows_cepheus_against_the_best_overlay() {
    let out = out_dir("multicast");
    let r = rocast(&[
        "sim",
        "--preset",
        "multicast",
        "--set",
        "multicast.sizes=\"4K,1M,2M\"",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let row = |size: &str| -> Vec<String> {
        r.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size))
            .unwrap_or_else(|| panic!("no {size} row: {}", r.stdout))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    // size, 5 times, 4 ratios, best scheme, best ratio.
    let small = row("4K");
    assert_eq!(
        (small[1].as_str(), small[10].as_str(), small[11].as_str()),
        ("8.80", "tree", "7.98x")
    );
    let large = row("1M");
    assert_eq!((large[10].as_str(), large[11].as_str()), ("tree", "9.53x"));
    assert!(
        r.stdout.contains("Cepheus finishes the group "),
        "{}",
        r.stdout
    );
    let dir = Path::new(&out);
    assert!(dir.join("multicast.png").is_file());
    let cap = dir.join("capture.pcap");
    let check = rocast(&["pcap", "check", cap.to_str().unwrap()]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check
            .stdout
            .starts_with("2176 frames, 2176 roce, 2176 icrc-ok, 0 icrc-bad"),
        "{}",
        check.stdout
    );
}
