//! The lab keeps its word: a lab on another subnet carries its
//! multicast through the switch (the switch's group space follows `--subnet`), a
//! transfer that fell back to an overlay says so in its exit status when the user
//! asked for in-network multicast (`--require-multicast`), and addresses outside
//! unicast space are refused.
//!
//! The lab tests need root (network namespaces); each holds [`one_lab`] and a
//! [`LabGuard`], every process runs under the suite's deadline, and each lab is taken
//! down and checked gone. The refusals need neither.

mod common;
use common::lab::*;
use common::{rocast, LabGuard};
use std::path::PathBuf;

/// `mcast lead`/`mcast join`'s exit status when the group fell back to an overlay
/// under `--require-multicast` (the bytes arrived, not the way the user asked for).
const EXIT_FELL_BACK: i32 = 4;

const SMALL_PAYLOAD: usize = 2 << 20;

fn ip(subnet: &str, i: usize) -> String {
    format!("{subnet}.{}", i + 1)
}

fn up(lab: &str, extra: &[&str]) -> (Vec<u8>, String) {
    let mut args = vec!["lab", "up", "--name", lab];
    args.extend_from_slice(extra);
    let r = rocast(&args);
    assert_eq!(r.code, 0, "lab up {extra:?}: {}{}", r.stdout, r.stderr);
    let payload = rocast_core::payload::message_data(45, 0, SMALL_PAYLOAD);
    let file = format!("/tmp/rocast-{lab}-payload.bin");
    std::fs::write(&file, &payload).unwrap();
    (payload, file)
}

/// Member `i` of a lab on `subnet` joins (with more `mcast join` options).
fn join(lab: &str, subnet: &str, i: usize, extra: &[&str]) -> (Proc, PathBuf) {
    let out = PathBuf::from(format!("/tmp/rocast-{lab}-h{i}.bin"));
    let _ = std::fs::remove_file(&out);
    let (me, leader) = (ip(subnet, i), ip(subnet, 0));
    let mut args = vec![
        "mcast",
        "join",
        "--bind",
        &me,
        "--leader",
        &leader,
        "--out",
        out.to_str().unwrap(),
        "--timeout",
        "15",
    ];
    args.extend_from_slice(extra);
    (Proc::spawn(lab, "join", i, &args), out)
}

fn lead(lab: &str, subnet: &str, members: usize, file: &str, extra: &[&str]) -> Proc {
    let (n, me) = (members.to_string(), ip(subnet, 0));
    let mut args = vec![
        "mcast",
        "lead",
        "--bind",
        &me,
        "--members",
        &n,
        "--file",
        file,
        "--rate-mbps",
        RATE_MBPS,
        "--timeout",
        "15",
    ];
    args.extend_from_slice(extra);
    Proc::spawn(lab, "lead", 0, &args)
}

/// (a) `--subnet 10.78.0.0/24 --switch`: the switch's group space is the subnet's
/// upper half, `mcast` derives the same from `--bind`, and the buffer goes through the
/// switch; `--require-multicast` then exits 0 everywhere.
#[test]
fn lk_subnet_lab_multicasts_through_the_switch() {
    let _one = one_lab();
    let lab = "lksub";
    let subnet = "10.78.0";
    let _guard = LabGuard::new(lab);
    let (payload, file) = up(
        lab,
        &["--hosts", "3", "--subnet", "10.78.0.0/24", "--switch"],
    );
    let status = rocast(&["lab", "status", "--name", lab]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("group space 10.78.0.128/25"),
        "lab status names the group space:\n{}",
        status.stdout
    );
    let joins: Vec<_> = (1..=2)
        .map(|i| join(lab, subnet, i, &["--require-multicast"]))
        .collect();
    let leader = lead(lab, subnet, 2, &file, &["--require-multicast"]);
    let text = every_byte_everywhere(leader, joins, &payload);
    assert!(
        text.contains(" via cepheus "),
        "through the switch:\n{text}"
    );
    assert!(!text.contains("fallback"), "{text}");
    let stats = switch_query(lab, false);
    assert!(
        counter(&stats, "cepheus", "data_in") > 0,
        "the switch carried the data:\n{stats}"
    );
    assert_eq!(counter(&stats, "switch", "mrp_refused"), 0, "{stats}");
    down_and_check(lab, &file);
}

/// (a') `--group-space` chooses another block of the subnet: the switch takes it, and
/// `mcast` given the same `--group-space` (its McstID defaults into it) goes through
/// the switch.
#[test]
fn lk_explicit_group_space_is_the_switch_s() {
    let _one = one_lab();
    let lab = "lkspace";
    let subnet = "10.79.0";
    let _guard = LabGuard::new(lab);
    let (payload, file) = up(
        lab,
        &[
            "--hosts",
            "2",
            "--subnet",
            "10.79.0",
            "--switch",
            "--group-space",
            "10.79.0.64/26",
        ],
    );
    let status = rocast(&["lab", "status", "--name", lab]);
    assert!(
        status.stdout.contains("group space 10.79.0.64/26"),
        "{}",
        status.stdout
    );
    let opts = ["--group-space", "10.79.0.64/26", "--require-multicast"];
    let joins = vec![join(lab, subnet, 1, &opts)];
    let leader = lead(lab, subnet, 1, &file, &opts);
    let text = every_byte_everywhere(leader, joins, &payload);
    assert!(text.contains(" via cepheus "), "{text}");
    let stats = switch_query(lab, false);
    assert!(counter(&stats, "cepheus", "data_in") > 0, "{stats}");
    down_and_check(lab, &file);
}

/// (b) A group space outside the switch's: the group falls back to the overlay and every
/// byte still arrives, but the leader and the member that asked for in-network
/// multicast exit [`EXIT_FELL_BACK`] and say why; a member that did not ask exits 0.
#[test]
fn lk_fallback_under_require_multicast_exits_non_zero() {
    let _one = one_lab();
    let lab = "lkfall";
    let subnet = "10.77.0";
    let _guard = LabGuard::new(lab);
    let (payload, file) = up(lab, &["--hosts", "3", "--switch"]);
    // Inside the subnet but outside the switch's 10.77.0.128/25: the switch does not
    // take it (it answers ARP only for its own space), so the registration times out.
    let space = [
        "--group-space",
        "10.77.0.64/26",
        "--group-addr",
        "10.77.0.100",
    ];
    let strict: Vec<&str> = space
        .iter()
        .copied()
        .chain(["--require-multicast"])
        .collect();
    let (j1, out1) = join(lab, subnet, 1, &strict);
    let (j2, out2) = join(lab, subnet, 2, &space);
    let leader = lead(lab, subnet, 2, &file, &strict);
    let (code, text) = leader.finish();
    assert_eq!(code, EXIT_FELL_BACK, "leader:\n{text}");
    assert!(text.contains("fallback"), "{text}");
    assert!(text.contains("--require-multicast"), "{text}");
    let (c1, t1) = j1.finish();
    assert_eq!(c1, EXIT_FELL_BACK, "strict member:\n{t1}");
    assert!(t1.contains("--require-multicast"), "{t1}");
    let (c2, t2) = j2.finish();
    assert_eq!(c2, 0, "member that did not ask:\n{t2}");
    // The bytes themselves are verified: they arrived, only not the way asked for.
    assert!(read_and_remove(&out1) == payload, "{t1}");
    assert!(read_and_remove(&out2) == payload, "{t2}");
    // The switch answers no ARP outside its space: the registration never reached it.
    let stats = switch_query(lab, false);
    assert_eq!(counter(&stats, "cepheus", "data_in"), 0, "{stats}");
    down_and_check(lab, &file);
}

/// (b') No switch at all (a plain bridge): nothing answers the registration, the group
/// runs the overlay, and `--require-multicast` says so.
#[test]
fn lk_bridge_lab_under_require_multicast_exits_non_zero() {
    let _one = one_lab();
    let lab = "lkbridge";
    let subnet = "10.77.0";
    let _guard = LabGuard::new(lab);
    let (payload, file) = up(lab, &["--hosts", "2", "--bridge"]);
    let (j1, out1) = join(lab, subnet, 1, &[]);
    let leader = lead(lab, subnet, 1, &file, &["--require-multicast"]);
    let (code, text) = leader.finish();
    assert_eq!(code, EXIT_FELL_BACK, "leader:\n{text}");
    assert!(text.contains("--require-multicast"), "{text}");
    let (c1, t1) = j1.finish();
    assert_eq!(c1, 0, "{t1}");
    assert!(read_and_remove(&out1) == payload, "{t1}");
    let r = rocast(&["lab", "down", "--name", lab]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let _ = std::fs::remove_file(&file);
}

/// (c) Subnets outside unicast space, too small, or with a group space that does not
/// fit are refused before anything is built (no root needed: exit 2, a clear line).
#[test]
fn lk_addresses_outside_unicast_space_are_refused() {
    let refused = |args: &[&str], wanted: &str| {
        let mut all = vec!["lab", "up", "--name", "lkbad", "--hosts", "4"];
        all.extend_from_slice(args);
        let r = rocast(&all);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(wanted),
            "{args:?}: wanted {wanted:?} in:\n{}",
            r.stderr
        );
    };
    refused(&["--subnet", "224.1.2.0/24", "--switch"], "multicast");
    refused(&["--subnet", "239.77.0"], "multicast");
    refused(&["--subnet", "0.1.2.0/24"], "0.0.0.0/8");
    refused(&["--subnet", "127.0.0.0/24"], "loopback");
    refused(&["--subnet", "240.0.0.0/24"], "reserved");
    refused(&["--subnet", "255.255.255.0/24"], "reserved");
    refused(&["--subnet", "10.78.0.0/29"], "too small");
    refused(&["--subnet", "10.78.0.5/24"], "host bits");
    refused(&["--subnet", "10.78.0.0/33"], "--subnet");
    refused(
        &[
            "--subnet",
            "10.78.0.0/24",
            "--switch",
            "--group-space",
            "10.79.0.128/25",
        ],
        "inside the subnet",
    );
    refused(
        &[
            "--subnet",
            "10.78.0.0/24",
            "--switch",
            "--group-space",
            "10.78.0.0/25",
        ],
        "host addresses",
    );
    refused(&["--group-space", "10.77.0.128/25"], "needs --switch");
    // The user asked for the overlay: requiring multicast too is a contradiction.
    let r = rocast(&[
        "mcast",
        "lead",
        "--bind",
        "10.77.0.1",
        "--members",
        "1",
        "--size",
        "1M",
        "--overlay",
        "chain",
        "--require-multicast",
    ]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
}
