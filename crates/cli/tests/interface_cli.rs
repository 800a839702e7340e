//! Interfaces that keep their word: sizes and spans take their documented units in
//! flags and in `--set`, a key the run would ignore is refused, a closed stdout ends a
//! command quietly, and every usage error exits 2.

mod common;
use common::{bin, rocast};
use std::process::{Command, Stdio};

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rocast-iface-{name}-{}", std::process::id()))
}

/// The flow sizes a default-preset run on a k=4 fat-tree wrote to fct.txt, with
/// `workload.size_bytes` set to `size`.
fn flow_sizes(size: &str) -> Vec<u64> {
    let out = tmp(&format!("size-{size}"));
    let set = format!("workload.size_bytes={size}");
    let r = rocast(&[
        "sim",
        "--set",
        "topology.k=4",
        "--set",
        &set,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{set}: {}", r.stderr);
    let fct = std::fs::read_to_string(out.join("fct.txt")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    // HPCC's columns: sip dip sport dport size start fct standalone_fct.
    fct.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().nth(4).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_set_size_key_takes_every_documented_unit() {
    for (text, bytes) in [
        ("20000", 20_000),
        ("20KB", 20_000),
        ("20K", 20_480),
        ("20KiB", 20_480),
    ] {
        let sizes = flow_sizes(text);
        assert!(!sizes.is_empty());
        assert!(sizes.iter().all(|&s| s == bytes), "{text}: {sizes:?}");
    }
    let bad = rocast(&["sim", "--set", "workload.size_bytes=20Kb", "--quiet"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("bad size \"20Kb\""), "{}", bad.stderr);
}

#[test]
fn a_key_the_run_would_ignore_is_refused() {
    // [multicast] on a workload run, [workload] on an experiment.
    let r = rocast(&["sim", "--set", "multicast.sizes=\"10MB\"", "--quiet"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("multicast.sizes does not apply"),
        "{}",
        r.stderr
    );
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-fig10",
        "--set",
        "workload.size_bytes=1",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("workload.size_bytes does not apply"),
        "{}",
        r.stderr
    );
}

#[test]
fn span_flags_take_units_and_a_bare_number_is_seconds() {
    // The flag's value is accepted (the command then stops on what is missing).
    for d in ["500ms", "2s", "0.5"] {
        let r = rocast(&["tree", "--exact-time-limit", d, "--topo", "bogus"]);
        assert!(!r.stderr.contains("exact-time-limit"), "{d}: {}", r.stderr);
        let r = rocast(&["switch", "--duration", d, "--port", "no-such-interface-x"]);
        assert!(!r.stderr.contains("--duration"), "{d}: {}", r.stderr);
    }
    for bad in ["5furlongs", "-1", "10h"] {
        let r = rocast(&["tree", &format!("--exact-time-limit={bad}")]);
        assert_eq!(r.code, 2, "{bad}");
        assert!(r.stderr.contains("exact-time-limit"), "{bad}: {}", r.stderr);
        let r = rocast(&["switch", &format!("--duration={bad}")]);
        assert_eq!(r.code, 2, "{bad}");
        assert!(r.stderr.contains("duration"), "{bad}: {}", r.stderr);
    }
}

/// Runs `rocast args` with its stdout a pipe whose reader is already gone.
fn with_closed_stdout(args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(bin())
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tmp("pipe");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("s.pcap");
    assert_eq!(rocast(&["pcap", "sample", pcap.to_str().unwrap()]).code, 0);
    let out = dir.join("out");
    let commands: Vec<Vec<&str>> = vec![
        vec!["sim", "--list"],
        vec![
            "sim",
            "--set",
            "topology.k=4",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        vec![
            "bcast",
            "-m",
            "4K",
            "--schemes",
            "chain",
            "--out",
            out.to_str().unwrap(),
        ],
        vec!["tree", "--topo", "fat-tree:k=4", "--dst", "random:4"],
        vec!["pcap", "dump", pcap.to_str().unwrap()],
        vec!["pcap", "dump", "--jsonl", pcap.to_str().unwrap()],
        vec!["repro", "--list"],
        vec!["bench", "fat-tree", "--k", "4"],
    ];
    for args in commands {
        let (status, stderr) = with_closed_stdout(&args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // Ends as a Unix filter does: done, or stopped by SIGPIPE (never exit 101).
        assert!(
            status.code() == Some(0) || status.signal() == Some(libc_sigpipe()),
            "{args:?}: {status:?} {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn libc_sigpipe() -> i32 {
    13
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["sim", "--set", "no_such_key=1"],
        vec!["sim", "--no-such-flag"],
        vec!["repro"],
        vec!["tree", "--exact-time-limit", "soon"],
        vec!["perf", "client", "127.0.0.1", "--mtu", "1000"],
        vec!["perf", "client", "127.0.0.1", "-s", "1Mb"],
        vec!["bench", "udp", "--size", "4Kb"],
        vec!["pcap", "dump", "--json", "--jsonl", "x.pcap"],
    ] {
        let r = rocast(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.is_empty(), "{args:?}");
    }
    // `repro` with no figures says how to run them all.
    assert!(rocast(&["repro"]).stderr.contains("--all"));
}
