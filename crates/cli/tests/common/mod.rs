//! Shared by the CLI integration tests: run the built `rocast` and capture its output.

use std::process::{Command, Output};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `rocast args…`; a panic or a signal fails the calling test.
pub fn rocast(args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_rocast"))
        .args(args)
        .output()
        .expect("run rocast");
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
