//! `rocast lab` on the real machine: namespaces, veths, a bridge, tc shaping, and
//! teardown that survives a lost state directory.
//!
//! These tests create network namespaces, so they need root; without it they fail
//! (loudly, not by passing vacuously). Each test uses its own lab name, so they run in
//! parallel, and holds a [`LabGuard`] that runs `lab down` even when an assertion
//! fails. Argument errors are checked without root.

mod common;
#[allow(unused_imports)]
use common::{require_root, rocast, LabGuard};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rocast");

/// The namespaces of lab `name`, from `ip netns list` (not from rocast).
fn namespaces(name: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("run ip netns list");
    let prefix = format!("rocast-{name}-");
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn state_dir(name: &str) -> String {
    format!("/run/rocast-lab/{name}")
}

fn up(name: &str, extra: &[&str]) {
    let mut args = vec!["lab", "up", "--name", name];
    args.extend_from_slice(extra);
    let r = rocast(&args);
    assert_eq!(r.code, 0, "lab up {extra:?}: {}{}", r.stdout, r.stderr);
}

fn exec(name: &str, host: &str, cmd: &[&str]) -> common::Run {
    let mut args = vec!["lab", "exec", "--name", name, host, "--"];
    args.extend_from_slice(cmd);
    rocast(&args)
}

/// Whether this kernel has netem, tried once (tests run in parallel and would race on
/// the probe namespace's name) on `lo` of a throwaway namespace of our own.
fn kernel_has_netem() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        let ns = format!("rocastprobe_{}", std::process::id());
        let ip = |args: &[&str]| Command::new("ip").args(args).status().unwrap();
        assert!(ip(&["netns", "add", &ns]).success());
        let ok = Command::new("tc")
            .args(["-n", &ns, "qdisc", "add", "dev", "lo", "root", "netem"])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        ip(&["netns", "del", &ns]);
        ok
    })
}

const ECHO_SERVER: &str = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.77.0.3", 9999))
s.settimeout(30)
while True:
    d, a = s.recvfrom(65536)
    s.sendto(d, a)
"#;

// Retries until the server is bound and ARP has resolved. 4000 bytes with "don't
// fragment, ever" (IP_MTU_DISCOVER = IP_PMTUDISC_DO, 10 = 2 on Linux) checks the
// 9000-byte MTU end to end: at 1500 anywhere the send or the delivery would fail.
const ECHO_CLIENT: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)
s.settimeout(0.2)
msg = b"rocast-lab" * 400
end = time.time() + 10
while time.time() < end:
    s.sendto(msg, ("10.77.0.3", 9999))
    try:
        d, a = s.recvfrom(65536)
        if d == msg:
            print("echo from", a[0])
            sys.exit(0)
    except socket.timeout:
        pass
sys.exit(1)
"#;

#[test]
fn bridged_lab_addresses_reachability_and_down() {
    let _g = LabGuard::new("t1");
    up("t1", &["--hosts", "3", "--bridge"]);
    assert_eq!(
        namespaces("t1"),
        [
            "rocast-t1-h0",
            "rocast-t1-h1",
            "rocast-t1-h2",
            "rocast-t1-sw"
        ]
    );

    let r = exec("t1", "h0", &["ip", "-4", "addr", "show", "dev", "eth0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("inet 10.77.0.1/24"), "{}", r.stdout);
    let r = exec("t1", "h0", &["ip", "link", "show", "dev", "eth0"]);
    assert!(
        r.stdout.contains("link/ether 02:72:63:00:00:01"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("mtu 9000"), "{}", r.stdout);
    let r = exec("t1", "sw", &["ip", "link", "show", "dev", "p2"]);
    assert!(r.stdout.contains("02:72:63:ff:00:03"), "{}", r.stdout);
    assert!(r.stdout.contains("master br0"), "{}", r.stdout);

    // UDP echo h0 → h2 across the bridge (no ping on these machines).
    let mut server = Command::new(BIN)
        .args(["lab", "exec", "--name", "t1", "h2", "--", "python3", "-c"])
        .arg(ECHO_SERVER)
        .stdout(Stdio::null())
        .spawn()
        .expect("start the echo server");
    let r = exec("t1", "h0", &["python3", "-c", ECHO_CLIENT]);
    assert_eq!(r.code, 0, "no echo from h2: {}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("echo from 10.77.0.3"), "{}", r.stdout);

    // `down` stops the server (a process in a lab namespace) and removes everything.
    let r = rocast(&["lab", "down", "--name", "t1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("deleted 4 namespaces"), "{}", r.stdout);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "lab down left the echo server running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(namespaces("t1").is_empty(), "{:?}", namespaces("t1"));
    assert!(!Path::new(&state_dir("t1")).exists());
}

#[test]
fn down_is_idempotent() {
    let _g = LabGuard::new("t2");
    let r = rocast(&["lab", "down", "--name", "t2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing was there"), "{}", r.stdout);

    up("t2", &["--hosts", "1"]);
    let r = rocast(&["lab", "down", "--name", "t2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("deleted 2 namespaces"), "{}", r.stdout);
    let r = rocast(&["lab", "down", "--name", "t2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing was there"), "{}", r.stdout);
    assert!(namespaces("t2").is_empty());
}

#[test]
fn second_up_fails_and_leaves_the_lab_intact() {
    let _g = LabGuard::new("t3");
    up("t3", &["--hosts", "2", "--subnet", "10.78.5"]);
    let before = namespaces("t3");
    assert_eq!(before, ["rocast-t3-h0", "rocast-t3-h1", "rocast-t3-sw"]);

    let r = rocast(&["lab", "up", "--name", "t3", "--hosts", "4"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("lab 't3' already exists"), "{}", r.stderr);
    assert!(
        r.stderr.contains("rocast lab down --name t3"),
        "{}",
        r.stderr
    );

    assert_eq!(namespaces("t3"), before);
    let state = std::fs::read_to_string(format!("{}/state", state_dir("t3"))).unwrap();
    assert!(
        state.contains("hosts=2") && state.contains("subnet=10.78.5"),
        "{state}"
    );
    let r = rocast(&["lab", "status", "--name", "t3"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("2 hosts on 10.78.5.0/24"), "{}", r.stdout);
    assert!(r.stdout.contains("10.78.5.2/24"), "{}", r.stdout);
    let r = exec("t3", "h1", &["ip", "-4", "addr", "show", "dev", "eth0"]);
    assert!(r.stdout.contains("inet 10.78.5.2/24"), "{}", r.stdout);

    // exec hands back the command's exit status and rejects unknown hosts.
    assert_eq!(exec("t3", "h0", &["sh", "-c", "exit 7"]).code, 7);
    let r = exec("t3", "h2", &["true"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no host 'h2'"), "{}", r.stderr);
}

#[test]
fn down_works_without_the_state_dir() {
    let _g = LabGuard::new("t4");
    up("t4", &["--hosts", "2", "--bridge"]);
    // A crash-like loss of the state: only the namespaces are left.
    std::fs::remove_dir_all(state_dir("t4")).unwrap();
    let r = rocast(&["lab", "status", "--name", "t4"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("no state file"), "{}", r.stdout);

    let r = rocast(&["lab", "down", "--name", "t4"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("deleted 3 namespaces"), "{}", r.stdout);
    assert!(namespaces("t4").is_empty(), "{:?}", namespaces("t4"));
    let r = rocast(&["lab", "status", "--name", "t4"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not up"), "{}", r.stderr);
}

#[test]
fn tc_shapes_both_directions_of_every_link() {
    let _g = LabGuard::new("t5");
    up(
        "t5",
        &["--hosts", "2", "--rate", "500mbit", "--delay", "1ms"],
    );
    let state = std::fs::read_to_string(format!("{}/state", state_dir("t5"))).unwrap();
    let netem = state.contains("shaper=netem");
    assert_eq!(netem, kernel_has_netem(), "{state}");
    for (host, dev) in [("sw", "p0"), ("sw", "p1"), ("h0", "eth0"), ("h1", "eth0")] {
        let r = exec("t5", host, &["tc", "qdisc", "show", "dev", dev]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stdout.contains("rate 500Mbit"),
            "{host} {dev}: {}",
            r.stdout
        );
        if netem {
            assert!(r.stdout.contains("qdisc netem"), "{}", r.stdout);
            assert!(r.stdout.contains("limit 10000"), "{}", r.stdout);
            assert!(r.stdout.contains("delay 1ms"), "{}", r.stdout);
            assert!(!r.stdout.contains("loss"), "{}", r.stdout);
        } else {
            assert!(r.stdout.contains("qdisc tbf"), "{}", r.stdout);
        }
    }
}

/// With netem, --loss-host puts the loss on that host's switch port only. Without it,
/// `up` fails after it has started building (the probe runs in a lab namespace), which
/// exercises the half-way teardown: nothing may be left.
#[test]
fn loss_goes_toward_one_host_or_fails_cleanly() {
    let _g = LabGuard::new("t6");
    let r = rocast(&[
        "lab",
        "up",
        "--name",
        "t6",
        "--hosts",
        "2",
        "--loss",
        "0.05",
        "--loss-host",
        "1",
    ]);
    if kernel_has_netem() {
        assert_eq!(r.code, 0, "{}", r.stderr);
        let p1 = exec("t6", "sw", &["tc", "qdisc", "show", "dev", "p1"]);
        assert!(p1.stdout.contains("loss 5%"), "{}", p1.stdout);
        let p0 = exec("t6", "sw", &["tc", "qdisc", "show", "dev", "p0"]);
        assert!(!p0.stdout.contains("loss"), "{}", p0.stdout);
        let h1 = exec("t6", "h1", &["tc", "qdisc", "show", "dev", "eth0"]);
        assert!(!h1.stdout.contains("loss"), "{}", h1.stdout);
    } else {
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("no netem"), "{}", r.stderr);
        assert!(r.stderr.contains("--loss"), "{}", r.stderr);
        assert!(namespaces("t6").is_empty(), "{:?}", namespaces("t6"));
        assert!(!Path::new(&state_dir("t6")).exists());
    }
}

#[test]
fn non_root_is_a_clear_error() {
    require_root();
    let out = Command::new(BIN)
        .args(["lab", "down", "--name", "t7"])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run rocast as nobody");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("must run as root"), "{stderr}");
}

/// Bad arguments exit 2 with a message naming the option, before anything is built
/// (no root needed to see that).
#[test]
fn bad_arguments_are_rejected_up_front() {
    for (args, needle) in [
        (&["--hosts", "0"][..], "--hosts"),
        (&["--hosts", "65"], "1..=64"),
        (&["--hosts", "2", "--rate", "1 gbit"], "--rate"),
        (&["--hosts", "2", "--rate", "fast"], "--rate"),
        (&["--hosts", "2", "--delay", "10"], "--delay"),
        (&["--hosts", "2", "--loss", "1"], "--loss"),
        (&["--hosts", "2", "--loss=-0.5"], "--loss"),
        (&["--hosts", "2", "--loss-host", "1"], "needs --loss"),
        (
            &["--hosts", "2", "--loss", "0.1", "--loss-host", "2"],
            "--loss-host",
        ),
        (&["--hosts", "2", "--subnet", "10.77"], "--subnet"),
        (&["--hosts", "2", "--name", "a-b"], "--name"),
        (
            &["--hosts", "2", "--bridge", "--switch"],
            "cannot be used with",
        ),
    ] {
        let mut a = vec!["lab", "up"];
        if !args.contains(&"--name") {
            a.extend(["--name", "t8"]);
        }
        a.extend_from_slice(args);
        let r = rocast(&a);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
    }
    assert!(namespaces("t8").is_empty());
}

/// A two-tier lab runs one switch daemon per switch namespace; `lab status` names each
/// (agg, tor0, tor1) and whether it runs, and a daemon that died is reported as such.
#[test]
fn status_reports_every_switch_daemon_of_a_two_tier_lab() {
    let _g = LabGuard::new("t9");
    up("t9", &["--hosts", "4", "--switch", "--tors", "2"]);
    let r = rocast(&["lab", "status", "--name", "t9"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for d in ["agg", "tor0", "tor1"] {
        assert!(
            r.stdout.contains(&format!("switch daemon {d}: pid ")) && r.stdout.contains("running"),
            "{d}: {}",
            r.stdout
        );
    }
    // Kill tor1's daemon: status says it is not running and where its log is.
    let pid = std::fs::read_to_string(format!("{}/tor1.pid", state_dir("t9"))).unwrap();
    let k = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(k.success());
    let mut gone = false;
    for _ in 0..50 {
        let r = rocast(&["lab", "status", "--name", "t9"]);
        if r.stdout.contains("switch daemon tor1: pid") && r.stdout.contains("NOT running") {
            assert!(r.stdout.contains("tor1.log"), "{}", r.stdout);
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(gone, "tor1's death never showed in lab status");
}
