//! Attacks on a Cepheus group's RC data path, each by a stranger: a lab host
//! with its own switch port and address that is in no group. The leader is h0, the
//! members h1 and h2, the stranger h3. Every attack must end with every member holding
//! every byte, every process exiting 0, and the stranger's packets counted where they
//! were refused.
//!
//! | attack (by h3, during the group)                     | refused by                              |
//! |------------------------------------------------------|-----------------------------------------|
//! | WRITEs to a member at the old, predictable QPN, RKey and PSN (0x100 + octet, 0x5a5a, 0) | the member's QP: no such QPN (random now) |
//! | WRITEs at the member's real QPN and PSN, from h3's own address | the member's QP: wrong source        |
//! | the same, spoofing the group's address as source      | the switch's source guard (`drop_source_guard`) |
//! | fatal NAKs and ACKs to the leader (old QPN 0x11 and its real one; own and spoofed source) | the leader's QP (wrong source, wrong QPN) or the switch |
//!
//! On the code from before random QPNs, RKeys and start PSNs the first attack alone
//! corrupts the members' first 1024 bytes (their QP takes the stranger's WRITE as PSN 0
//! and the leader's own as a duplicate), so the verdict fails and the test fails; the
//! NAK spray ends the group.
//! Run it there with `ROCAST_TEST_BIN=<old rocast> cargo test --test attack_rc_lab`.

mod common;
use common::lab::*;
use common::LabGuard;
use rocast_core::wire::{
    AckSyndrome, AethRepr, BthRepr, ExtHeaders, Ipv4Address, NakCode, Opcode, Psn, RethRepr,
};
use std::path::Path;
use std::time::{Duration, Instant};

const GROUP: Ipv4Address = Ipv4Address::new(10, 77, 0, 200);
/// The member's WRITE region VA (the runtime's fixed one; the RKey is what is random).
const MEMBER_VA: u64 = 0x1000_0000;

/// An RDMA WRITE ONLY of 1024 bytes of 0xee at the start of a member's region.
fn forged_write(src: Ipv4Address, dst: Ipv4Address, qpn: u32, psn: u32, rkey: u32) -> Vec<u8> {
    let payload = [0xeeu8; 1024];
    let mut bth = BthRepr::new(Opcode::RC_WRITE_ONLY, qpn, Psn::new(psn));
    bth.ack_req = true;
    let ext = ExtHeaders {
        reth: Some(RethRepr {
            va: MEMBER_VA,
            rkey,
            dma_len: payload.len() as u32,
        }),
        ..Default::default()
    };
    roce_packet(src, dst, bth, ext, &payload)
}

/// An ACK or NAK to the leader at `psn`.
fn forged_feedback(src: Ipv4Address, qpn: u32, psn: u32, syndrome: AckSyndrome) -> Vec<u8> {
    let bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, qpn, Psn::new(psn));
    let ext = ExtHeaders {
        aeth: Some(AethRepr { syndrome, msn: 1 }),
        ..Default::default()
    };
    roce_packet(src, host_addr(0), bth, ext, &[])
}

/// Waits until host `i` has its group QP up (its UDP 4791 socket is bound: the QP
/// opens on the leader's `Params`, before the group is registered), then returns the
/// QPN and start PSN it printed (`… as QPN 0x…, data from PSN 0x…`), or None from a
/// build that prints none (one from before random QPNs and start PSNs).
fn group_qp_up(lab: &str, i: usize, log: &Path) -> Option<(u32, u32)> {
    wait_until(DEADLINE_S, "the group QP's socket", || {
        let ss = std::process::Command::new("ip")
            .args(["netns", "exec", &format!("rocast-{lab}-h{i}")])
            .args(["ss", "-Huan", "sport", "=", ":4791"])
            .output()
            .unwrap();
        !ss.stdout.is_empty()
    });
    // The line is printed right after the QP opens; give the pipe a moment.
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(" as QPN ")) {
            let hex = |key: &str| {
                let v = l
                    .split(key)
                    .nth(1)
                    .unwrap()
                    .split([',', ' '])
                    .next()
                    .unwrap();
                u32::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
            };
            return Some((hex("as QPN "), hex("from PSN ")));
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The leader's or a member's `group QP drops:` counter.
fn qp_drops(out: &str, key: &str) -> u64 {
    common::line_counter(out, "group QP drops:", key)
}

#[test]
fn a_strangers_writes_and_forged_feedback_change_no_byte_and_end_no_group() {
    let _one = one_lab();
    let lab = LabGuard::new("ar1");
    let (payload, file) = lab_up(lab.0, 4);
    let leader = lead(lab.0, 2, &file);
    // h1 first: the group waits for h2, so h1's QP is open and idle while h3 attacks it.
    let first = join_one(lab.0, 1, &[]);
    let old_qpn = 0x102; // the old, predictable QPN: 0x100 + the address's last octet
    let real = group_qp_up(lab.0, 1, &first.0.out);
    // What the old code used (QPN from the address, PSN 0, RKey 0x5a5a), from h3's own
    // address and spoofing the group's; then, for an attacker who sniffed the real QPN
    // and PSN, those too.
    let mut writes = vec![
        forged_write(host_addr(3), host_addr(1), old_qpn, 0, 0x5a5a),
        forged_write(GROUP, host_addr(1), old_qpn, 0, 0x5a5a),
    ];
    if let Some((qpn, psn)) = real {
        writes.push(forged_write(host_addr(3), host_addr(1), qpn, psn, 0x5a5a));
        writes.push(forged_write(GROUP, host_addr(1), qpn, psn, 0x5a5a));
    }
    inject_from(lab.0, 3, &writes);
    let joins = vec![first, join_one(lab.0, 2, &[])];
    // Feedback while the buffer is in flight: fatal NAKs and ACKs sprayed over the PSN
    // space the old leader used (from 0) and around the real one, at the old fixed QPN
    // 0x11 and the real one, from h3's own address and spoofing the group's.
    let (leader_qpn, leader_psn) = group_qp_up(lab.0, 0, &leader.out).unwrap_or((0x11, 0));
    let mut leader = leader;
    // Mid-buffer, or as soon as the group already ended (the old code's did, corrupted).
    wait_until(20, "data through the switch", || {
        matches!(leader.child.try_wait(), Ok(Some(_)))
            || counter(&switch_query(lab.0, false), "cepheus", "data_in") > 200
    });
    let mut feedback = Vec::new();
    for qpn in [0x11, leader_qpn] {
        for src in [host_addr(3), GROUP] {
            for k in 0..256u32 {
                for base in [0, leader_psn] {
                    let psn = Psn::new(base).add(k * 96).value();
                    let nak = AckSyndrome::Nak(NakCode::RemoteAccessError);
                    feedback.push(forged_feedback(src, qpn, psn, nak));
                    let ack = AckSyndrome::Ack { credits: 31 };
                    feedback.push(forged_feedback(src, qpn, psn, ack));
                }
            }
        }
    }
    inject_from(lab.0, 3, &feedback);
    let (lc, lt) = leader.finish();
    assert_eq!(lc, 0, "the group survived the forged feedback: {lt}");
    // Everything spoofed from the group's address stopped at the switch's source guard:
    // the 2 (or 1, from a build that printed no QPN) WRITEs and half the feedback.
    let spoofed = (writes.len() / 2 + feedback.len() / 2) as u64;
    wait_until(
        10,
        "the switch's source guard counting the spoofed packets",
        || counter(&switch_query(lab.0, false), "switch", "drop_source_guard") >= spoofed,
    );
    // The leader's QP refused the forgeries that reached it from h3's own address at
    // its real QPN (the spoofed ones never get past the switch).
    assert!(qp_drops(&lt, "wrong_source") >= 256, "{lt}");
    for (i, (p, out)) in joins.into_iter().enumerate() {
        let (jc, jt) = p.finish();
        assert_eq!(jc, 0, "{jt}");
        assert!(
            read_and_remove(&out) == payload,
            "a member's bytes differ: {jt}"
        );
        if i == 0 {
            // h1's QP: the WRITE at the old QPN found no QP, the one from h3's own
            // address at the real QPN and PSN was refused for its source.
            eprintln!(
                "h1: {}",
                jt.lines()
                    .find(|l| l.starts_with("group QP drops"))
                    .unwrap_or("")
            );
            assert!(qp_drops(&jt, "wrong_qp") >= 1, "{jt}");
            assert!(qp_drops(&jt, "wrong_source") >= 1, "{jt}");
        }
    }
    eprintln!(
        "leader: {}",
        lt.lines()
            .find(|l| l.starts_with("group QP drops"))
            .unwrap_or("")
    );
    down_and_check(lab.0, &file);
}
