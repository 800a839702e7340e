//! Shared by the CLI integration tests: run the built `rocast` and capture its output.

pub mod lab;

use std::process::{Command, Output};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The `rocast` under test: this build's, or `ROCAST_TEST_BIN` when set (how the
/// attack suites were run against the code from before random QPNs, RKeys and start
/// PSNs, to show they fail there).
pub fn bin() -> String {
    std::env::var("ROCAST_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rocast").into())
}

/// Runs `rocast args…`; a panic or a signal fails the calling test.
pub fn rocast(args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(bin()).args(args).output().expect("run rocast");
    let run = Run {
        code: status.code().expect("rocast was killed by a signal"),
        stdout: String::from_utf8(stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(stderr).expect("utf-8 stderr"),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "rocast {args:?} panicked:\n{}",
        run.stderr
    );
    assert_ne!(run.code, 101, "rocast {args:?} panicked");
    run
}

/// Fails the calling test unless it runs as root (the lab tests create namespaces).
#[allow(dead_code)]
pub fn require_root() {
    if !rustix::process::geteuid().is_root() {
        panic!(
            "the `rocast lab` tests create network namespaces and must run as root \
             (e.g. `sudo -E cargo test -p rocast-cli --test lab_cli`)"
        );
    }
}

/// Owns lab `name` for one test: clears leftovers of an earlier aborted run on creation
/// and runs `lab down` on drop, pass or fail.
#[allow(dead_code)]
pub struct LabGuard(pub &'static str);

#[allow(dead_code)]
impl LabGuard {
    pub fn new(name: &'static str) -> LabGuard {
        require_root();
        let r = rocast(&["lab", "down", "--name", name]);
        assert_eq!(r.code, 0, "clearing leftovers: {}", r.stderr);
        LabGuard(name)
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        // No assertions here: a panic while already panicking aborts the test binary.
        let out = Command::new(bin())
            .args(["lab", "down", "--name", self.0])
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            other => eprintln!("`lab down --name {}` failed: {other:?}", self.0),
        }
    }
}

/// The number after `key` on the first line of `out` that starts with `prefix`
/// (`totals: … key N …`, `switch agg: … key N …`); a missing line or key fails the test.
#[allow(dead_code)] // not every test binary reads counters
pub fn line_counter(out: &str, prefix: &str, key: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} line in:\n{out}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let i = f
        .iter()
        .position(|w| *w == key)
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    f[i + 1].parse().unwrap()
}

/// Asserts that `out` contains every one of `wanted`, showing `out` when not.
#[allow(dead_code)] // not every test binary uses it
pub fn assert_contains_all(out: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(out.contains(w), "missing {w:?} in:\n{out}");
    }
}
