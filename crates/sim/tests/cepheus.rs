//! Cepheus groups end to end in the simulator: unmodified RC endpoints,
//! MRP registration, switch replication, bridging and feedback aggregation, random
//! loss, source switching, and the safeguard fallback.

use rocast_core::control::SafeguardConfig;
use rocast_core::fabric::cepheus::VIRTUAL_QPN;
use rocast_core::plan::Topology;
use rocast_core::time::Duration;
use rocast_core::wire::{classify_frame, FrameClass, Ipv4Address, Opcode};
use rocast_sim::engine::EngineConfig;
use rocast_sim::multicast::cepheus::{run_cepheus, CepheusOutcome, CepheusSpec};
use rocast_sim::packet::host_ip;
use rocast_sim::scenario::topology::fabric_with;

/// A k=4 fat-tree (16 hosts, 20 switches) with the given overrides.
fn fat_tree(extra: &[&str]) -> (Topology, EngineConfig) {
    let mut sets = vec!["topology.kind=\"fat-tree\"", "topology.k=4"];
    sets.extend_from_slice(extra);
    fabric_with(&sets).unwrap()
}

fn group(receivers: &[u32], size: u64, messages: u32) -> CepheusSpec {
    let mut s = CepheusSpec::new(0, receivers.to_vec(), size);
    s.messages = messages;
    s.window = 2;
    s.verify_data = true;
    s
}

/// Every member holds every message exactly once, byte for byte.
fn assert_exactly_once(out: &CepheusOutcome, members: usize, messages: u32) {
    assert_eq!(out.delivered, vec![messages; members], "{out:?}");
    assert_eq!(out.duplicates, 0);
    assert!(out.session_ok, "every member's verdict: intact");
    assert!(
        out.corrupt_receivers.is_empty(),
        "{:?}",
        out.corrupt_receivers
    );
    assert!(out.message_done_ps.iter().all(Option::is_some));
}

#[test]
fn every_receiver_gets_every_message_once_under_random_loss() {
    let receivers: Vec<u32> = (1..16).collect();
    for (loss, seed) in [
        ("1e-6", 1),
        ("1e-4", 2),
        ("1e-3", 3),
        ("1e-2", 4),
        ("1e-2", 5),
    ] {
        let (topo, cfg) = fat_tree(&[
            &format!("topology.link_loss={loss}"),
            &format!("seed={seed}"),
        ]);
        let out = run_cepheus(topo, cfg, &group(&receivers, 48_000, 6)).unwrap();
        assert_exactly_once(&out, 16, 6);
        assert!(out.fallback.is_none(), "loss {loss}: {:?}", out.fallback);
        // The source saw ordinary RoCE feedback only, and fewer ACKs than the
        // receivers sent: aggregation works.
        let fb = &out.source_feedback;
        assert_eq!(fb.refused, 0, "loss {loss}: {fb:?}");
        assert!(fb.acks > 0 && fb.acks < out.switches.acks_in, "{fb:?}");
        if loss == "1e-2" {
            assert!(out.retransmitted > 0, "1% loss must cost retransmissions");
            assert!(out.switches.filtered > 0, "retransmissions are filtered");
        }
    }
}

#[test]
fn frames_toward_the_source_are_ordinary_feedback_and_bridged_frames_verify() {
    let (topo, mut cfg) = fat_tree(&["topology.link_loss=1e-3", "seed=9"]);
    // The source's link and a receiver's link.
    let src_link = topo.ports(0)[0].0;
    let rx_link = topo.ports(5)[0].0;
    cfg.capture_links = vec![src_link, rx_link];
    cfg.capture_max_packets = 1_000_000;
    let spec = group(&[3, 5, 9, 14], 30_000, 3);
    let out = run_cepheus(topo, cfg, &spec).unwrap();
    assert_exactly_once(&out, 5, 3);
    let mcst = spec.mcst_id;
    let (src, rx) = (
        Ipv4Address::from_u32(host_ip(0)),
        Ipv4Address::from_u32(host_ip(5)),
    );
    let (mut to_source, mut to_rx) = (0, 0);
    for (_, frame) in &out.capture {
        let FrameClass::Roce { frame, icrc_ok } = classify_frame(frame) else {
            panic!("not RoCE");
        };
        assert!(icrc_ok, "every frame's ICRC verifies: {frame:?}");
        let r = frame.roce;
        if r.ip.dst_addr == src {
            // Toward the source: ACK/NAK/CNP from its virtual remote, to its QP.
            assert_eq!(r.ip.src_addr, mcst);
            assert!(r.ext.aeth.is_some() || r.bth.opcode == Opcode::CNP, "{r:?}");
            to_source += 1;
        } else if r.ip.dst_addr == rx {
            // Bridged to receiver 5: from the McstID, to its own QP, not the virtual one.
            assert_eq!(r.ip.src_addr, mcst);
            assert_ne!(r.bth.dest_qp, VIRTUAL_QPN);
            assert!(r.ext.aeth.is_none());
            to_rx += 1;
        } else {
            // Sent by the source or by the receiver: addressed to the McstID.
            assert_eq!(r.ip.dst_addr, mcst, "{r:?}");
            assert_eq!(r.bth.dest_qp, VIRTUAL_QPN);
        }
    }
    assert!(to_source > 0 && to_rx >= 3 * 30_000 / 1024);
}

#[test]
fn members_take_turns_as_source_on_one_tree() {
    let (topo, cfg) = fat_tree(&["topology.link_loss=1e-3", "seed=3"]);
    let mut spec = group(&[2, 6, 11, 15], 20_000, 6);
    // Source 0, then member 2 (host 6), then member 4 (host 15), then 0 again.
    spec.senders = vec![0, 0, 2, 2, 4, 0];
    let out = run_cepheus(topo, cfg, &spec).unwrap();
    assert_exactly_once(&out, 5, 6);
    assert_eq!(out.source_switches, 3);
    assert!(
        out.switches.source_switches >= 3,
        "switches followed the new source"
    );
    assert!(out.fallback.is_none());
}

#[test]
fn registration_failure_falls_back_without_loss_or_duplicates() {
    let (topo, mut cfg) = fat_tree(&[]);
    cfg.mft_max_groups = 0;
    let out = run_cepheus(topo, cfg, &group(&[1, 4, 7, 10, 13], 40_000, 3)).unwrap();
    assert_exactly_once(&out, 6, 3);
    let fb = out.fallback.expect("fell back");
    assert!(fb.reason.contains("TableFull"), "{}", fb.reason);
    assert_eq!((fb.messages, fb.deliveries), (3, 15));
    assert!(out.registered_ps.is_none());
}

#[test]
fn low_throughput_falls_back_mid_transfer_without_loss_or_duplicates() {
    // 2% loss everywhere: go-back-N multicast to 4 receivers crawls; the safeguard
    // notices within its window and the overlay finishes the job.
    let (topo, cfg) = fat_tree(&["topology.link_loss=2e-2", "seed=11"]);
    let mut spec = group(&[1, 5, 9, 13], 64_000, 24);
    spec.safeguard = Some(SafeguardConfig {
        expected_bps: 100_000_000_000,
        threshold: 0.5,
        window: Duration::from_us(200),
        grace: Duration::from_us(20),
    });
    spec.fallback_block = 16_000;
    let out = run_cepheus(topo, cfg, &spec).unwrap();
    assert_exactly_once(&out, 5, 24);
    let fb = out.fallback.expect("fell back");
    assert!(fb.reason.contains("below 50%"), "{}", fb.reason);
    let over_cepheus = out.source_done_ps.iter().filter(|d| d.is_some()).count() as u32;
    assert!(
        over_cepheus > 0 && fb.messages > 0,
        "the switch-over happened mid-transfer"
    );
    assert!(fb.messages <= 24 && fb.messages + over_cepheus >= 24);
}

#[test]
fn a_seeded_group_run_is_pinned() {
    let (topo, cfg) = fat_tree(&["topology.link_loss=1e-3", "seed=21"]);
    let mut spec = group(&(1..16).collect::<Vec<_>>(), 100_000, 4);
    spec.verify_data = false;
    let a = run_cepheus(topo.clone(), cfg.clone(), &spec).unwrap();
    let b = run_cepheus(topo, cfg, &spec).unwrap();
    let key = |o: &CepheusOutcome| {
        (
            o.completion_ps(),
            o.events,
            o.retransmitted,
            o.source_feedback.acks,
        )
    };
    assert_eq!(key(&a), key(&b), "same seed, same run");
    // Events include the group session's control messages and MRP hops (90 more than
    // when the driver did its own registration; the data path is unchanged).
    assert_eq!(key(&a), (Some(116_062_880), 35_463, 753, 33));
}

/// The shared eviction scenario in the simulator: a receiver's process dies mid-stream
/// (its QP gone, its control connection reset). The group session at the leader evicts
/// it and prunes its path through the switches (`switch::mrp_agent`, as `rocast
/// switch`); the switch's aggregated ACK then stops waiting for it, and every other
/// member gets every message intact, exactly once; its verdict is missing, theirs ok.
/// The shared switch-restart scenario's simulated half: the source's ToR
/// loses its tables mid-stream; the data it drops meanwhile is retransmitted once the
/// leader's next refresh has registered the group again, and every member gets every
/// message once, through the switch, with no member evicted.
#[test]
fn a_switch_restarted_mid_stream_relearns_the_group_from_the_refresh() {
    let (topo, cfg) = fat_tree(&["seed=5"]);
    let mut spec = group(&[1, 5, 9, 13], 256 << 10, 16);
    spec.refresh = Some(Duration::from_ms(40));
    let calm = run_cepheus(topo.clone(), cfg.clone(), &spec).unwrap();
    spec.restart_switch_after = Some(200);
    let out = run_cepheus(topo, cfg, &spec).unwrap();
    let why = format!("{:?} refreshes {}", out.switches, out.leader_refreshes);
    assert_eq!(out.delivered, vec![16; 5], "{why}");
    assert_eq!(out.duplicates, 0);
    assert!(out.corrupt_receivers.is_empty(), "{why}");
    assert_eq!(out.member_verdicts, vec![true; 4], "{why}");
    assert_eq!(out.member_evicted, vec![false; 4], "{why}");
    assert!(
        out.fallback.is_none(),
        "the switch path carried it all: {why}"
    );
    assert!(out.session_ok, "{why}");
    assert_eq!(calm.switches.unknown_group, 0);
    assert!(
        out.switches.unknown_group > 0,
        "the restarted switch dropped the group's packets until the refresh: {why}"
    );
    assert!(out.leader_refreshes >= 1, "{why}");
    assert!(out.switch_restarted && !calm.switch_restarted);
    // The stall lasts until the refresh, a quarter of 40 ms in transfer at most.
    let end = |o: &CepheusOutcome| o.message_done_ps.iter().flatten().max().copied().unwrap();
    assert!(end(&out) > end(&calm), "{} vs {}", end(&out), end(&calm));
    // Without a refresh nothing would teach the new switch the group: refused.
    spec.refresh = None;
    let (topo, cfg) = fat_tree(&[]);
    assert!(run_cepheus(topo, cfg, &spec).is_err());
}

#[test]
fn a_member_killed_mid_stream_is_evicted_and_pruned_and_the_others_get_every_message() {
    let (topo, cfg) = fat_tree(&["seed=5"]);
    let mut spec = group(&[1, 5, 9, 13], 256 << 10, 16);
    spec.kill = Some((2, 200));
    let out = run_cepheus(topo, cfg, &spec).unwrap();
    assert_eq!(
        out.member_evicted,
        vec![false, true, false, false],
        "{out:?}"
    );
    assert_eq!(out.member_verdicts, vec![true, false, true, true]);
    let held: Vec<u32> = out.delivered.clone();
    assert_eq!(
        (held[0], held[1], held[3], held[4]),
        (16, 16, 16, 16),
        "{held:?}"
    );
    assert!(held[2] < 16, "the dead member stopped mid-stream: {held:?}");
    assert_eq!(out.duplicates, 0);
    assert!(
        out.corrupt_receivers.iter().all(|&h| h == 5),
        "{:?}",
        out.corrupt_receivers
    );
    assert!(out.message_done_ps.iter().all(Option::is_some));
    assert!(
        out.fallback.is_none(),
        "the switch path carried the rest: {:?} {:?} ignored {}",
        out.fallback,
        out.switches,
        out.mrp_ignored
    );
    assert!(
        out.session_ok,
        "the group closes ok: every live member intact"
    );
    let bad = run_cepheus(
        fat_tree(&[]).0,
        fat_tree(&[]).1,
        &CepheusSpec {
            kill: Some((5, 1)),
            ..group(&[1, 5, 9, 13], 1000, 1)
        },
    );
    assert!(bad.is_err(), "rank 5 of 4 receivers");
}
