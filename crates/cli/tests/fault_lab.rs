//! The fault-injection suite: a namespace lab with `rocast switch` and
//! `rocast mcast` hosts, one fault per test injected while a buffer is in flight, and
//! the outcome each fault must have (the README's fault → outcome table):
//!
//! | fault (mid-transfer)            | outcome                                                        |
//! |---------------------------------|----------------------------------------------------------------|
//! | a member killed (`kill -9`)     | evicted and pruned; every other member gets every byte; exit 3 |
//! | the switch killed and restarted | the leader's refresh re-registers the group; every byte; exit 0 |
//! | the leader killed               | members fail explicitly; the switch reclaims the group at its lease |
//! | a member's switch port flapping | the switch counts it; retransmission recovers; every byte; exit 0 |
//! | 5% loss on every port, from now | retransmission recovers; every byte; exit 0                     |
//! | an overlay member killed        | every survivor fails naming it (relayed, RDMC §4.6); no exit 0  |
//!
//! Every step has a deadline (a process that outlives it is killed and the test fails
//! as a hang), every delivered file is compared byte for byte with what was sent, and
//! each test ends with the lab taken down and checked gone (no namespace, no MFT entry
//! left behind). Needs root, as every lab test.

mod common;
use common::lab::*;
use common::{bin, rocast, LabGuard};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_member_killed_mid_transfer_is_evicted_and_the_others_get_every_byte() {
    let _one = one_lab();
    let lab = LabGuard::new("tf1");
    let (payload, file) = lab_up(lab.0, 4);
    let joins = join_all(lab.0, 3);
    let leader = lead(lab.0, 3, &file);
    wait_for_data(lab.0);
    let mut joins = joins.into_iter();
    let (a, a_out) = joins.next().unwrap();
    let (mut victim, victim_out) = joins.next().unwrap();
    let (b, b_out) = joins.next().unwrap();
    victim.kill();
    let (code, text) = leader.finish();
    assert_eq!(
        code, 3,
        "completed for the healthy members, one evicted: {text}"
    );
    assert!(text.contains("member 10.77.0.3: EVICTED"), "{text}");
    assert!(text.contains("member 10.77.0.2: ok") && text.contains("member 10.77.0.4: ok"));
    assert!(text.contains("evicted: 10.77.0.3"), "{text}");
    for (p, out) in [(a, a_out), (b, b_out)] {
        let (jc, jt) = p.finish();
        assert_eq!(jc, 3, "a healthy member, told of the eviction: {jt}");
        assert!(jt.contains("evicted by the leader: 10.77.0.3"), "{jt}");
        assert!(read_and_remove(&out) == payload, "bytes differ: {jt}");
    }
    let (vc, _) = victim.finish();
    assert_eq!(vc, -1, "killed by the signal");
    let _ = std::fs::remove_file(victim_out);
    let stats = switch_query(lab.0, false);
    assert!(counter(&stats, "switch", "mrp_pruned") >= 1, "{stats}");
    assert!(
        switch_query(lab.0, true).starts_with("groups 0 "),
        "released at the close"
    );
    down_and_check(lab.0, &file);
}

/// Kills the lab's switch daemon (SIGKILL: a crash) and starts it again with the same
/// arguments and `extra` ones: an empty MFT (`rocast_net::lab::restart_switch`).
fn restart_switch(lab: &str, extra: &[&str]) {
    rocast_net::lab::restart_switch(lab, extra).expect("restart the switch");
}

#[test]
fn a_restarted_switch_relearns_the_group_from_the_leaders_refresh() {
    let _one = one_lab();
    let lab = LabGuard::new("tf2");
    let (payload, file) = lab_up(lab.0, 3);
    let joins = join_all(lab.0, 2);
    let leader = lead(lab.0, 2, &file);
    wait_for_data(lab.0);
    restart_switch(lab.0, &[]);
    every_byte_everywhere(leader, joins, &payload);
    let stats = switch_query(lab.0, false);
    assert!(
        counter(&stats, "switch", "mrp_in") >= 1,
        "the new switch learnt the group from a refresh: {stats}"
    );
    assert!(switch_query(lab.0, true).starts_with("groups 0 "));
    down_and_check(lab.0, &file);
}

#[test]
fn a_crashed_leaders_members_fail_and_the_switch_reclaims_its_group_at_the_lease() {
    let _one = one_lab();
    let lab = LabGuard::new("tf3");
    let (_, file) = lab_up(lab.0, 3);
    let joins = join_all(lab.0, 2);
    let mut leader = lead(lab.0, 2, &file);
    wait_for_data(lab.0);
    leader.kill();
    let killed = Instant::now();
    assert_eq!(leader.finish().0, -1);
    for (p, out) in joins {
        let jt = failed_leaving_nothing(p, &out);
        assert!(jt.contains("join failed"), "{jt}");
    }
    assert!(
        switch_query(lab.0, true).starts_with("groups 1 "),
        "still leased"
    );
    // The default lease is 5 s from the last refresh (at most 1 s before the kill).
    wait_until(10, "the lease to run out", || {
        switch_query(lab.0, true).starts_with("groups 0 ")
    });
    let waited = killed.elapsed();
    assert!(
        waited >= Duration::from_secs(3),
        "reclaimed by the lease, not earlier: {waited:?}"
    );
    let stats = switch_query(lab.0, false);
    assert_eq!(counter(&stats, "switch", "lease_expired"), 1, "{stats}");
    down_and_check(lab.0, &file);
}

/// A group that fails after its members verified some buffers leaves nothing at their
/// `--out`: the bytes wait in `<out>.partial` while the group runs (before, they were
/// written under the final name as they came) and go when it fails.
#[test]
fn a_group_that_fails_after_verified_buffers_leaves_nothing_at_out() {
    let _one = one_lab();
    let lab = LabGuard::new("tf9");
    let (_, big) = lab_up(lab.0, 3);
    let _ = std::fs::remove_file(&big);
    // 1 MiB buffers, many of them: about 30 ms each at the lab's rate.
    let file = format!("/tmp/rocast-{}-small.bin", lab.0);
    std::fs::write(&file, rocast_core::payload::message_data(9, 0, 1 << 20)).unwrap();
    let joins = join_all(lab.0, 2);
    let mut leader = lead_with(lab.0, 2, &file, &["--repeat", "400"]);
    let first = &joins[0];
    wait_until(20, "a verified buffer at h1", || {
        std::fs::read_to_string(&first.0.out).is_ok_and(|t| {
            t.lines()
                .any(|l| l.starts_with("received buffer ") && l.ends_with(": ok"))
        })
    });
    assert!(
        partial_of(&first.1).exists() && !first.1.exists(),
        "verified buffers wait in {}.partial",
        first.1.display()
    );
    leader.kill();
    assert_eq!(leader.finish().0, -1);
    for (p, out) in joins {
        let jt = failed_leaving_nothing(p, &out);
        assert!(jt.contains(": ok"), "some buffers were verified: {jt}");
    }
    down_and_check(lab.0, &file);
}

/// Sets the switch's port `p` (its veth end `p<p>`) up or down.
fn set_switch_port(lab: &str, p: usize, state: &str) {
    let ok = Command::new("ip")
        .args([
            "-n",
            &format!("rocast-{lab}-sw"),
            "link",
            "set",
            &format!("p{p}"),
            state,
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "p{p} {state}");
}

#[test]
fn a_member_port_flapping_mid_transfer_is_counted_and_recovered() {
    let _one = one_lab();
    let lab = LabGuard::new("tf4");
    let (payload, file) = lab_up(lab.0, 3);
    let joins = join_all(lab.0, 2);
    let leader = lead(lab.0, 2, &file);
    wait_for_data(lab.0);
    for state in ["down", "up"] {
        set_switch_port(lab.0, 2, state);
        std::thread::sleep(Duration::from_millis(300));
    }
    every_byte_everywhere(leader, joins, &payload);
    let stats = switch_query(lab.0, false);
    assert!(
        switch_query(lab.0, true).starts_with("groups 0 "),
        "{stats}"
    );
    down_and_check(lab.0, &file);
}

#[test]
fn a_member_cut_off_mid_transfer_is_evicted_and_the_others_get_every_byte() {
    let _one = one_lab();
    let lab = LabGuard::new("tf8");
    let (payload, file) = lab_up(lab.0, 4);
    let joins = join_all(lab.0, 3);
    let leader = lead(lab.0, 3, &file);
    wait_for_data(lab.0);
    // h2's port goes down and stays down: the member is alive but unreachable. The
    // transfer stalls and h2 stops confirming the registration refreshes (every
    // 250 ms while transferring) that the others confirm; the leader evicts it, and
    // the switch, pruned, answers the retransmission from the members left.
    set_switch_port(lab.0, 2, "down");
    let cut = Instant::now();
    let (code, text) = leader.finish();
    let took = cut.elapsed();
    set_switch_port(lab.0, 2, "up");
    assert_eq!(code, 3, "completed for the members left: {text}");
    assert!(text.contains("member 10.77.0.3: EVICTED"), "{text}");
    assert!(text.contains("evicted: 10.77.0.3"), "{text}");
    let mut joins = joins.into_iter();
    let a = joins.next().unwrap();
    let (victim, victim_out) = joins.next().unwrap();
    let b = joins.next().unwrap();
    for (p, out) in [a, b] {
        let (jc, jt) = p.finish();
        assert_eq!(jc, 3, "a healthy member, told of the eviction: {jt}");
        assert!(read_and_remove(&out) == payload, "bytes differ: {jt}");
    }
    // The cut-off member never claims the buffer: once its port is back it hears the
    // leader's Close (or the connection's end) and fails.
    let vt = failed_leaving_nothing(victim, &victim_out);
    assert!(!vt.contains(": ok"), "{vt}");
    let stats = switch_query(lab.0, false);
    assert!(counter(&stats, "switch", "mrp_pruned") >= 1, "{stats}");
    eprintln!(
        "tf8: the leader finished {:.1} s after the cut",
        took.as_secs_f64()
    );
    down_and_check(lab.0, &file);
}

#[test]
fn five_percent_loss_started_mid_run_is_recovered_byte_for_byte() {
    let _one = one_lab();
    let lab = LabGuard::new("tf5");
    let (payload, file) = lab_up(lab.0, 3);
    let joins = join_all(lab.0, 2);
    let leader = lead(lab.0, 2, &file);
    wait_for_data(lab.0);
    let c = control(lab.0);
    let r = rocast(&["switch", "--control", &c, "--set-loss", "0.05"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("loss 0.05 on 3 ports"), "{}", r.stdout);
    let text = every_byte_everywhere(leader, joins, &payload);
    let stats = switch_query(lab.0, false);
    // `port I SPEC … injected_drops N …` lines.
    let dropped: u64 = stats
        .lines()
        .filter(|l| l.starts_with("port "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let at = f.iter().position(|w| *w == "injected_drops").unwrap();
            f[at + 1].parse::<u64>().unwrap()
        })
        .sum();
    assert!(dropped > 0, "{stats}");
    assert!(!text.contains(" 0 packets retransmitted"), "{text}");
    let bad = rocast(&["switch", "--control", &c, "--set-loss", "2"]);
    assert_ne!(bad.code, 0, "a probability over 1 is refused");
    down_and_check(lab.0, &file);
}

/// Sends one UDP datagram from host `i` to the group's MRP port (an attacker's packet).
/// `rocast mcast allocate` from host `i`: (exit code, stdout, stderr).
fn allocate_in(lab: &str, i: usize, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new("timeout")
        .args([
            "20",
            "ip",
            "netns",
            "exec",
            &format!("rocast-{lab}-h{i}"),
            &bin(),
        ])
        .args(["mcast", "allocate", "--bind", &host_ip(i)])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn send_mrp_from(lab: &str, i: usize, datagram: &[u8]) {
    let script = "import socket,sys\n\
        s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
        s.bind((sys.argv[1],0))\n\
        s.sendto(bytes.fromhex(sys.stdin.read()),('10.77.0.200',4792))";
    let hex: String = datagram.iter().map(|b| format!("{b:02x}")).collect();
    python_in(lab, i, script, &[&host_ip(i)], &[hex]);
}

#[test]
fn a_keyed_switch_refuses_forged_and_unkeyed_mrp_and_serves_the_keyed_leader() {
    let _one = one_lab();
    use rocast_core::wire::mrp::{MrpMember, MrpRelease, MrpRepr};
    let lab = LabGuard::new("tf6");
    let (payload, file) = lab_up(lab.0, 4);
    let key = format!("/run/rocast-lab/{}/fabric.key", lab.0);
    std::fs::write(&key, format!("{}\n", "5a".repeat(32))).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    restart_switch(lab.0, &["--fabric-key", &key]);
    // The attacker (h3) registers the group address naming itself and h1, then tries
    // to release it: both plain MRP, as Cepheus has it.
    let ip = |i: usize| rocast_core::wire::Ipv4Address::new(10, 77, 0, i as u8 + 1);
    let group = rocast_core::wire::Ipv4Address::new(10, 77, 0, 200);
    let forged = MrpRepr::split(
        group,
        &[
            MrpMember {
                ip: ip(3),
                qpn: 0x11,
                region: None,
            },
            MrpMember {
                ip: ip(1),
                qpn: 0x101,
                region: None,
            },
        ],
    )
    .unwrap()
    .remove(0);
    let mut b = vec![0u8; forged.buffer_len()];
    forged.emit(&mut b);
    send_mrp_from(lab.0, 3, &b);
    let mut r = [0u8; 8];
    MrpRelease { mcst_id: group }.emit(&mut r);
    send_mrp_from(lab.0, 3, &r);
    wait_until(5, "the forgeries counted", || {
        counter(&switch_query(lab.0, false), "switch", "mrp_unauthenticated") >= 2
    });
    assert!(
        switch_query(lab.0, true).starts_with("groups 0 "),
        "nothing registered"
    );
    // The attacker cannot get a group address either: a keyed switch answers only
    // sealed requests.
    let (code, _, err) = allocate_in(lab.0, 3, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no allocation answer"), "{err}");
    // The keyed leader asks the switch for an address, then its group goes through
    // the switch under it.
    let (code, out, err) = allocate_in(lab.0, 0, &["--fabric-key", &key]);
    assert_eq!(code, 0, "{err}");
    let group = out.split(' ').next().unwrap().to_string();
    assert_eq!(group, "10.77.0.128", "the space's first free address");
    let joins: Vec<_> = (1..=2)
        .map(|i| join_one(lab.0, i, &["--group", &group]))
        .collect();
    let leader = lead_with(lab.0, 2, &file, &["--fabric-key", &key, "--group", &group]);
    let text = every_byte_everywhere(leader, joins, &payload);
    assert!(text.contains(" via cepheus "), "{text}");
    // A keyed leader claiming an address the switch did not allocate is refused
    // (NotAllocated) and falls back.
    let joins = join_all(lab.0, 2);
    let leader = lead_with(lab.0, 2, &file, &["--fabric-key", &key]);
    let text = every_byte_everywhere(leader, joins, &payload);
    assert!(text.contains("fallback: registration failed"), "{text}");
    assert!(text.contains("NotAllocated"), "{text}");
    // A leader without the key is not a controller: the switch never answers it, and
    // the group falls back to the overlay (the data still arrives, intact).
    let joins = join_all(lab.0, 2);
    let leader = lead(lab.0, 2, &file);
    let text = every_byte_everywhere(leader, joins, &payload);
    assert!(text.contains("fallback: registration failed"), "{text}");
    let stats = switch_query(lab.0, false);
    assert!(
        counter(&stats, "switch", "mrp_unauthenticated") >= 3,
        "{stats}"
    );
    assert_eq!(counter(&stats, "switch", "mrp_replayed"), 0, "{stats}");
    down_and_check(lab.0, &file);
}

#[test]
fn with_invitations_a_stranger_is_refused_and_the_invited_members_get_the_data() {
    let _one = one_lab();
    let lab = LabGuard::new("tf7");
    let (payload, file) = lab_up(lab.0, 4);
    let key = format!("/run/rocast-lab/{}/invite.key", lab.0);
    std::fs::write(&key, format!("{}\n", "c3".repeat(32))).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = rocast(&["mcast", "invite", "--key", &key, "10.77.0.2", "10.77.0.3"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let tokens: Vec<&str> = r
        .stdout
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(tokens.len(), 2);
    // The stranger (h3) connects first, as in the attack that squeezed a member out.
    let stranger = join_one(lab.0, 3, &[]);
    std::thread::sleep(Duration::from_millis(300));
    // h2 presents h1's token: it is bound to h1's address.
    let thief = join_one(lab.0, 2, &["--invitation", tokens[0]]);
    let leader = lead_with(lab.0, 2, &file, &["--invitations", &key]);
    std::thread::sleep(Duration::from_millis(300));
    let (sc, st) = stranger.0.finish();
    assert_eq!(sc, 1, "refused: {st}");
    let (tc, tt) = thief.0.finish();
    assert_eq!(tc, 1, "a token from another address is refused: {tt}");
    let _ = std::fs::remove_file(stranger.1);
    let _ = std::fs::remove_file(thief.1);
    let invited: Vec<(Proc, PathBuf)> = [(1, tokens[0]), (2, tokens[1])]
        .into_iter()
        .map(|(i, t)| join_one(lab.0, i, &["--invitation", t]))
        .collect();
    every_byte_everywhere(leader, invited, &payload);
    down_and_check(lab.0, &file);
}

/// An overlay member killed mid-transfer. The overlay is
/// `overlay::OverlayRank`, as in the simulator: the rank that sends to the dead
/// member finds it by its connection's RC retry error, the rank after it by the
/// relay (or its own probe), and every survivor fails the buffer naming the same
/// member (RDMC §4.6): no survivor hangs, none exits 0, none leaves bytes at `--out`.
#[test]
fn an_overlay_member_killed_mid_transfer_fails_the_group_at_every_survivor() {
    let _one = one_lab();
    let lab = LabGuard::new("tf9");
    let (_payload, file) = lab_up(lab.0, 4);
    // `--timeout 6` everywhere: a rank that hears nothing for 6 s suspects whom it
    // waits on, and the overlay's RC retries cover the same span, so the
    // failure is found in about 6 s rather than the helpers' 15.
    let joins: Vec<(Proc, PathBuf)> = (1..=3)
        .map(|i| {
            let out = PathBuf::from(format!("/tmp/rocast-{}-h{i}.bin", lab.0));
            let _ = std::fs::remove_file(&out);
            let (ip, leader_ip) = (host_ip(i), host_ip(0));
            let args = [
                "mcast",
                "join",
                "--bind",
                &ip,
                "--leader",
                &leader_ip,
                "--out",
                out.to_str().unwrap(),
                "--timeout",
                "6",
            ];
            (Proc::spawn(lab.0, "join", i, &args), out)
        })
        .collect();
    // A chain 0 → 1 → 2 → 3 at 40 Mbit/s: about five seconds per hop's stream.
    let ip0 = host_ip(0);
    let leader = Proc::spawn(
        lab.0,
        "lead",
        0,
        &[
            "mcast",
            "lead",
            "--bind",
            &ip0,
            "--members",
            "3",
            "--file",
            &file,
            "--op",
            "write",
            "--rate-mbps",
            "40",
            "--timeout",
            "6",
            "--overlay",
            "chain",
            "--block",
            "65536",
        ],
    );
    let end = Instant::now() + Duration::from_secs(20);
    while try_counter(&switch_query(lab.0, false), "switch", "forwarded").unwrap_or(0) < 3000 {
        assert!(
            Instant::now() < end,
            "no overlay blocks through the switch within 20 s: {}",
            leader.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut joins = joins.into_iter();
    let (a, a_out) = joins.next().unwrap();
    let (mut victim, victim_out) = joins.next().unwrap();
    let (b, b_out) = joins.next().unwrap();
    victim.kill();
    let started = Instant::now();
    let (code, text) = leader.finish();
    assert_ne!(code, 0, "a lost overlay member fails the group: {text}");
    for (p, out) in [(a, a_out), (b, b_out)] {
        let (jc, jt) = p.finish();
        assert_ne!(jc, 0, "{jt}");
        // A rank still owed by or owing the dead member names it; one whose part
        // was done (it held the message and owed nothing) hears the outcome seen by
        // all at the close (RDMC: a failure is reported at close).
        assert!(
            jt.contains("overlay: 10.77.0.3 (rank ")
                || jt.contains("group closed by the leader: FAILED"),
            "the failure reaches every survivor: {jt}\nleader: {text}"
        );
        assert!(!out.exists(), "nothing at --out after a failed group: {jt}");
        let _ = std::fs::remove_file(out.with_extension("bin.partial"));
    }
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "found within the group's --timeout of silence, not a hang: {:?}",
        started.elapsed()
    );
    let (vc, _) = victim.finish();
    assert_eq!(vc, -1, "killed by the signal");
    let _ = std::fs::remove_file(victim_out);
    down_and_check(lab.0, &file);
}
