//! `rocast tree`: trees, exports, prefix state, and clear errors on bad arguments.

mod common;
use common::rocast;
use std::path::Path;

fn tmp(name: &str) -> String {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tree_cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name).to_str().unwrap().to_string()
}

/// The row of `algo` in the summary table: (switches, links, depth).
fn row(stdout: &str, algo: &str) -> (u32, u32, u32) {
    let l = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(algo))
        .unwrap_or_else(|| panic!("no {algo} row: {stdout}"));
    let f: Vec<u32> = l
        .split_whitespace()
        .skip(1)
        .take(3)
        .map(|x| x.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

#[test]
fn symmetric_fat_tree_trees_agree_and_export() {
    let dot = tmp("t.dot");
    let json = tmp("t.json");
    let r = rocast(&[
        "tree",
        "--topo",
        "fat-tree:k=4",
        "--dst",
        "2,4,10",
        "--algo",
        "optimal,peel,cepheus,exact",
        "--dot",
        &dot,
        "--json",
        &json,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // The hand-counted optimum (plan::multicast_tree tests): 8 switches, 11 links.
    for algo in ["optimal", "peel", "cepheus", "exact"] {
        assert_eq!(row(&r.stdout, algo), (8, 11, 6), "{algo}");
    }
    let d = std::fs::read_to_string(&dot).unwrap();
    assert_eq!(d.matches(" -> ").count(), 11);
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\"links\": 11"), "{j}");
}

#[test]
fn prefix_state_at_k64_is_63_rules() {
    let r = rocast(&[
        "tree",
        "--topo",
        "fat-tree:k=64",
        "--fail",
        "0.05",
        "--dst",
        "random:512",
        "--prefix",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("rules per prefix-tier switch: 63 static"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("naive IP multicast: up to 4294967295"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("(6554 failed)"), "{}", r.stdout);
    assert!(r.stdout.contains("covers of this group"));
}

#[test]
fn over_covering_sends_fewer_packets_and_reports_discards() {
    let args = |cover: &'static str| {
        vec![
            "tree",
            "--topo",
            "fat-tree:k=8",
            "--dst",
            "random:20",
            "--seed",
            "3",
            "--prefix",
            "--cover",
            cover,
        ]
    };
    let count = |s: &str, key: &str| -> u32 {
        let at = s.find(key).unwrap_or_else(|| panic!("{key}: {s}")) + key.len();
        s[at..]
            .split(|c: char| !c.is_ascii_digit())
            .find(|x| !x.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    let exact = rocast(&args("exact"));
    let over = rocast(&args("over:1"));
    assert_eq!(exact.code, 0, "{}", exact.stderr);
    assert_eq!(over.code, 0, "{}", over.stderr);
    assert_eq!(count(&exact.stdout, "over-covered racks discarding "), 0);
    assert!(
        count(&over.stdout, "packets per message ") < count(&exact.stdout, "packets per message ")
    );
    assert!(
        count(&over.stdout, "over-covered racks discarding ") > 0,
        "{}",
        over.stdout
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    for (args, want) in [
        (vec!["tree", "--topo", "torus:k=4"], "expected fat-tree"),
        (vec!["tree", "--topo", "fat-tree:k=5"], "topology.k"),
        (vec!["tree", "--topo", "fat-tree:q=4"], "unknown key"),
        (vec!["tree", "--dst", "random:0"], "N must be"),
        (vec!["tree", "--dst", "1,2,9999"], "not a host"),
        (vec!["tree", "--algo", "magic"], "--algo"),
        (vec!["tree", "--fail", "1.5"], "fraction"),
        (vec!["tree", "--prefix", "--cover", "over:0"], "--cover"),
        (
            vec![
                "tree",
                "--topo",
                "fat-tree:k=4",
                "--dst",
                "random:8",
                "--algo",
                "optimal",
                "--fail",
                "0.3",
            ],
            "fault-free",
        ),
    ] {
        let r = rocast(&args);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
}
