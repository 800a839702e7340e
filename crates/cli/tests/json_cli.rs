//! The one output layer: every command's `--json` parses, and says what its table
//! says (OSU's full format included).

mod common;
use common::rocast;

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn every_json_output_parses_and_matches_the_table() {
    let dir = std::env::temp_dir().join(format!("rocast-json-{}", std::process::id()));
    let out = dir.to_str().unwrap();

    // bcast: the table's number is the JSON's latency_us; -f's min <= avg <= max.
    let t = rocast(&[
        "bcast",
        "-m",
        "4K",
        "--schemes",
        "chain",
        "-f",
        "--out",
        out,
    ]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    let row: Vec<f64> = t
        .stdout
        .lines()
        .find(|l| l.starts_with("4096 "))
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        row[2] <= row[1] && row[1] <= row[3] && row[4] == 1.0,
        "{row:?}"
    );
    let j = rocast(&[
        "bcast",
        "-m",
        "4K",
        "--schemes",
        "chain",
        "--json",
        "--out",
        out,
    ]);
    let j = json(&j.stdout);
    assert_eq!(j[0]["scheme"], "chain");
    assert!((j[0]["latency_us"].as_f64().unwrap() - row[3]).abs() < 0.006);
    assert!((j[0]["avg_rank_us"].as_f64().unwrap() - row[1]).abs() < 0.006);

    // bench fat-tree and peel-tree.
    let j = json(&rocast(&["bench", "fat-tree", "--k", "8", "--json"]).stdout);
    assert_eq!((j["hosts"].as_u64(), j["k"].as_u64()), (Some(128), Some(8)));
    let j = json(
        &rocast(&[
            "bench",
            "peel-tree",
            "--k",
            "8",
            "--dst",
            "20",
            "--runs",
            "3",
            "--json",
        ])
        .stdout,
    );
    assert_eq!(j["groups"], 3);
    assert!(j["tree_ms"]["median"].as_f64().unwrap() <= j["tree_ms"]["worst"].as_f64().unwrap());

    // bench udp: the loopback anchor's runs (short ones).
    let u = rocast(&[
        "bench",
        "udp",
        "--seconds",
        "0.2",
        "--reps",
        "1",
        "--iters",
        "100",
        "--json",
    ]);
    assert_eq!(u.code, 0, "{}", u.stderr);
    let j = json(&u.stdout);
    assert!(j[0]["perf_gbps"].as_f64().unwrap() > 0.0, "{j}");
    assert!(u.stderr.contains("rocast bench: wall time"), "{}", u.stderr);

    // pcap dump: one object per RoCE frame, as many as the text has lines.
    let pcap = dir.join("s.pcap");
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(rocast(&["pcap", "sample", pcap.to_str().unwrap()]).code, 0);
    let text = rocast(&["pcap", "dump", pcap.to_str().unwrap()]);
    let lines = rocast(&["pcap", "dump", "--jsonl", pcap.to_str().unwrap()]);
    let objs: Vec<serde_json::Value> = lines.stdout.lines().map(json).collect();
    assert_eq!(objs.len(), text.stdout.lines().count());
    assert_eq!(objs.last().unwrap()["opcode_code"], 0x81);
    assert!(objs.iter().all(|o| o["icrc_ok"] == true));
    // --json: the same objects as one array.
    let array = json(&rocast(&["pcap", "dump", "--json", pcap.to_str().unwrap()]).stdout);
    assert_eq!(array.as_array().unwrap(), &objs);

    // sim --json: each CSV also as an array of row objects.
    let r = rocast(&[
        "sim",
        "--preset",
        "multicast",
        "--set",
        "multicast.sizes=\"4K\"",
        "--set",
        "multicast.schemes=[\"cepheus\",\"tree\"]",
        "--json",
        "--no-plot",
        "--out",
        out,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = json(&std::fs::read_to_string(dir.join("multicast.json")).unwrap());
    assert_eq!(j.as_array().unwrap().len(), 2);
    assert_eq!(j[0]["size_bytes"], 4096);
    let _ = std::fs::remove_dir_all(&dir);
}
