//! Packet-by-packet scripts for the Cepheus switch rules (smoltcp style): each test
//! feeds packets in and checks exactly what comes out.
//!
//! The stage: a 5-port switch; the source S on port 0 and receivers R1..R3 on ports
//! 1..3 are hosts, port 4 leads to another switch (added by the tests that need it).

use super::*;
use crate::time::{Duration, Instant};
use crate::wire::{AethRepr, BthRepr, Ecn, ExtHeaders, RethRepr};

const MCST: Ipv4Address = Ipv4Address::new(239, 0, 0, 1);
const S_QPN: u32 = 0x11;

fn host_ip(port: u16) -> Ipv4Address {
    Ipv4Address::new(10, 0, 0, 10 + port as u8)
}
fn host_qpn(port: u16) -> u32 {
    if port == 0 {
        S_QPN
    } else {
        0x100 + port as u32
    }
}
fn region(port: u16) -> (u64, u32) {
    (0x1000_0000 * port as u64, 0x40 + port as u32)
}

fn switch(filter: Box<dyn CnpFilter>) -> CepheusSwitch {
    let mut sw = CepheusSwitch::new(5, 16, filter);
    for port in 0..4 {
        let hop = NextHop::Host {
            ip: host_ip(port),
            qpn: host_qpn(port),
            region: Some(region(port)),
        };
        sw.set_path(MCST, port, hop, port == 0).unwrap();
    }
    sw
}

fn data(psn: u32, op: Opcode, ack_req: bool) -> RoceRepr<'static> {
    let mut bth = BthRepr::new(op, VIRTUAL_QPN, Psn::new(psn));
    bth.ack_req = ack_req;
    let mut ext = ExtHeaders::default();
    if op.is_first() || op == Opcode::RC_WRITE_ONLY {
        ext.reth = Some(RethRepr {
            va: 0x80,
            rkey: 0,
            dma_len: 64,
        });
    }
    RoceRepr::new(host_ip(0), MCST, 26, Ecn::Ect0, 49152, bth, ext, &[7u8; 64])
}

fn aeth(from: u16, psn: u32, syndrome: AckSyndrome) -> RoceRepr<'static> {
    let bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, VIRTUAL_QPN, Psn::new(psn));
    let ext = ExtHeaders {
        aeth: Some(AethRepr { syndrome, msn: psn }),
        ..Default::default()
    };
    RoceRepr::new(host_ip(from), MCST, 26, Ecn::NotEct, 49153, bth, ext, &[])
}
fn ack(from: u16, psn: u32) -> RoceRepr<'static> {
    aeth(from, psn, AckSyndrome::Ack { credits: 31 })
}
fn nak(from: u16, epsn: u32) -> RoceRepr<'static> {
    aeth(from, epsn, AckSyndrome::Nak(NakCode::PsnSequenceError))
}
fn cnp(from: u16) -> RoceRepr<'static> {
    let (bth, ext) = crate::wire::cnp_headers(VIRTUAL_QPN);
    RoceRepr::new(host_ip(from), MCST, 48, Ecn::NotEct, 49153, bth, ext, &[])
}

fn feed(sw: &mut CepheusSwitch, port: u16, p: &RoceRepr<'_>) -> Vec<CepheusAction> {
    let now = Instant::from_us(1);
    assert_eq!(sw.handle_packet(now, port, p), Handling::Handled);
    let out: Vec<CepheusAction> = std::iter::from_fn(|| sw.poll_transmit(now)).collect();
    out
}

/// The ports a data packet was replicated to.
fn replicas(out: &[CepheusAction]) -> Vec<u16> {
    out.iter()
        .filter_map(|a| match a {
            CepheusAction::Replicate { port, .. } => Some(*port),
            _ => None,
        })
        .collect()
}

/// The one feedback packet in `out`, as (port, kind, psn).
fn one_feedback(out: &[CepheusAction]) -> (u16, FeedbackPacket) {
    assert_eq!(out.len(), 1, "{out:?}");
    match out[0] {
        CepheusAction::Feedback { port, packet } => (port, packet),
        a => panic!("not feedback: {a:?}"),
    }
}

fn is_ack(p: &FeedbackPacket) -> bool {
    matches!(
        p.kind,
        FeedbackKind::Ack {
            syndrome: AckSyndrome::Ack { .. },
            ..
        }
    )
}
fn is_nak(p: &FeedbackPacket) -> bool {
    matches!(
        p.kind,
        FeedbackKind::Ack {
            syndrome: AckSyndrome::Nak(NakCode::PsnSequenceError),
            ..
        }
    )
}

#[test]
fn data_is_replicated_and_bridged_to_each_receiver() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    let pkt = data(0, Opcode::RC_WRITE_FIRST, false);
    let out = feed(&mut sw, 0, &pkt);
    assert_eq!(replicas(&out), vec![1, 2, 3], "never back to the source");
    for a in &out {
        let CepheusAction::Replicate {
            port,
            bridge: Some(b),
        } = *a
        else {
            panic!("host paths are bridged: {a:?}");
        };
        let mut copy = pkt;
        b.apply(&mut copy);
        assert_eq!(
            copy.ip.src_addr, MCST,
            "feedback must come back to the McstID"
        );
        assert_eq!(copy.ip.dst_addr, host_ip(port));
        assert_eq!(copy.bth.dest_qp, host_qpn(port));
        let reth = copy.ext.reth.unwrap();
        assert_eq!(
            (reth.va, reth.rkey),
            (region(port).0 + 0x80, region(port).1)
        );
        // On bytes: the rewritten packet carries a fresh IP checksum and ICRC.
        let mut bytes = vec![0; pkt.buffer_len()];
        pkt.emit(&mut bytes);
        b.rewrite_ip_packet(&mut bytes).unwrap();
        let back = RoceRepr::parse_verified(&bytes).expect("valid checksum and ICRC");
        assert_eq!(back.ip.dst_addr, host_ip(port));
        assert_eq!(back.bth.dest_qp, host_qpn(port));
        assert_eq!(back.ext.reth.unwrap().rkey, region(port).1);
        assert_eq!(back.payload, pkt.payload);
        let mut direct = vec![0; copy.buffer_len()];
        copy.emit(&mut direct);
        assert_eq!(direct, bytes, "byte rewrite and parsed rewrite agree");
    }
    // A middle packet has no RETH: only addresses change.
    let mid = data(1, Opcode::RC_WRITE_MIDDLE, false);
    let out = feed(&mut sw, 0, &mid);
    assert_eq!(replicas(&out), vec![1, 2, 3]);
    assert_eq!(sw.stats.bridged, 6);
}

#[test]
fn a_corrupted_packet_is_not_laundered_by_the_rewrite() {
    let pkt = data(0, Opcode::RC_WRITE_ONLY, true);
    let mut bytes = vec![0; pkt.buffer_len()];
    pkt.emit(&mut bytes);
    let n = bytes.len();
    bytes[n - 10] ^= 0xff; // payload bit flip: ICRC no longer matches
    let before = bytes.clone();
    let b = Bridge {
        mcst_id: MCST,
        dst_ip: host_ip(1),
        dst_qp: 5,
        region: None,
    };
    assert!(b.rewrite_ip_packet(&mut bytes).is_err());
    assert_eq!(bytes, before);
    assert!(b.rewrite_ip_packet(&mut bytes[..20]).is_err(), "truncated");
}

#[test]
fn aggregated_ack_carries_the_minimum_and_fires_only_on_tri_port() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    assert!(feed(&mut sw, 1, &ack(1, 5)).is_empty());
    assert!(
        feed(&mut sw, 2, &ack(2, 3)).is_empty(),
        "R3 has not acknowledged"
    );
    let (port, fb) = one_feedback(&feed(&mut sw, 3, &ack(3, 7)));
    // Out of the source's port, looking like an ACK from its virtual remote.
    assert_eq!(port, 0);
    assert!(is_ack(&fb));
    assert_eq!(fb.psn, Psn::new(3));
    assert_eq!((fb.src_ip, fb.dst_ip, fb.dst_qp), (MCST, host_ip(0), S_QPN));
    assert_eq!(sw.group(MCST).unwrap().tri_port, Some(2));
    // Paths other than triPort advancing change nothing upstream.
    assert!(feed(&mut sw, 1, &ack(1, 9)).is_empty());
    assert!(feed(&mut sw, 3, &ack(3, 9)).is_empty());
    // triPort advances: the new minimum is its own 6.
    let (_, fb) = one_feedback(&feed(&mut sw, 2, &ack(2, 6)));
    assert_eq!(fb.psn, Psn::new(6));
    // triPort passes the others: the minimum is 9, held by port 1 (first of the tie).
    let (_, fb) = one_feedback(&feed(&mut sw, 2, &ack(2, 12)));
    assert_eq!(fb.psn, Psn::new(9));
    assert_eq!(sw.group(MCST).unwrap().tri_port, Some(1));
    // Port 1 advances, but port 3 still holds 9: triPort moves, nothing is sent.
    assert!(feed(&mut sw, 1, &ack(1, 12)).is_empty());
    assert_eq!(sw.group(MCST).unwrap().tri_port, Some(3));
    let (_, fb) = one_feedback(&feed(&mut sw, 3, &ack(3, 12)));
    assert_eq!(fb.psn, Psn::new(12));
    // A duplicate ACK is absorbed.
    assert!(feed(&mut sw, 3, &ack(3, 12)).is_empty());
    assert_eq!(sw.stats.acks_in, 10);
    assert_eq!(
        sw.stats.acks_out, 4,
        "four aggregated ACKs for ten received"
    );
}

/// The paper's inter-covering example: R1 loses p1 = 5 and R2 loses p2 = 8 of PSNs
/// 0..=9; R3 loses nothing. R2's NAK must not reach the sender (it would acknowledge
/// p1 for R1); p1's NAK must, and the go-back-N retransmission must still bring p2 to
/// R2 while the filter spares those who have the packets.
#[test]
fn nak_inter_covering_example() {
    for r2_first in [true, false] {
        let mut sw = switch(Box::new(ForwardAllCnp));
        let r2 = |sw: &mut CepheusSwitch| feed(sw, 2, &nak(2, 8));
        if r2_first {
            assert!(r2(&mut sw).is_empty(), "p2's NAK would cover p1: held");
        }
        assert!(feed(&mut sw, 3, &ack(3, 9)).is_empty());
        let out = feed(&mut sw, 1, &nak(1, 5));
        let out = if r2_first {
            out
        } else {
            assert!(out.is_empty(), "R2 has not reported yet");
            r2(&mut sw)
        };
        let (port, fb) = one_feedback(&out);
        assert_eq!(port, 0);
        assert!(is_nak(&fb), "{fb:?}");
        assert_eq!(fb.psn, Psn::new(5), "p1's NAK, not p2's");
        assert_eq!(sw.group(MCST).unwrap().me_psn, None, "MePSN resets");
        // Go-back-N from 5: each retransmission goes only where it is missing.
        let mut got = BTreeMap::<u16, Vec<u32>>::new();
        for psn in 5..=9 {
            for p in replicas(&feed(
                &mut sw,
                0,
                &data(psn, Opcode::RC_WRITE_MIDDLE, false),
            )) {
                got.entry(p).or_default().push(psn);
            }
        }
        assert_eq!(got.get(&1), Some(&vec![5, 6, 7, 8, 9]));
        assert_eq!(got.get(&2), Some(&vec![8, 9]), "p2 is not forgotten");
        assert_eq!(got.get(&3), None, "R3 has everything");
        assert_eq!(sw.stats.filtered, 3 + 5);
        // Both catch up. R1 held the minimum: its ACK releases R2's 7.
        let (_, fb) = one_feedback(&feed(&mut sw, 1, &ack(1, 9)));
        assert!(is_ack(&fb));
        assert_eq!(fb.psn, Psn::new(7));
        let (_, fb) = one_feedback(&feed(&mut sw, 2, &ack(2, 9)));
        assert!(is_ack(&fb));
        assert_eq!(fb.psn, Psn::new(9));
    }
}

#[test]
fn a_nak_waits_for_lagging_acks_then_fires() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    for p in 1..=3 {
        feed(&mut sw, p, &ack(p, 1));
    }
    // R1 NAKs 5 while R2 has acknowledged only 1 (coalesced ACKs): not yet.
    assert!(feed(&mut sw, 1, &nak(1, 5)).is_empty());
    assert!(feed(&mut sw, 3, &ack(3, 9)).is_empty());
    // R2 catches up past the hole: now every path holds everything below 5.
    let (_, fb) = one_feedback(&feed(&mut sw, 2, &ack(2, 9)));
    assert!(is_nak(&fb));
    assert_eq!(fb.psn, Psn::new(5));
}

#[test]
fn fully_acknowledged_retransmission_is_answered_not_forwarded() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    for p in 1..=3 {
        feed(&mut sw, p, &ack(p, 12));
    }
    // The aggregated ACK(12) was lost; the source times out and resends 12.
    let (port, fb) = one_feedback(&feed(&mut sw, 0, &data(12, Opcode::RC_WRITE_LAST, true)));
    assert_eq!(port, 0);
    assert!(is_ack(&fb));
    assert_eq!(fb.psn, Psn::new(12));
    assert_eq!(sw.stats.reacks, 1);
    // Without AckReq it is simply absorbed.
    assert!(feed(&mut sw, 0, &data(11, Opcode::RC_WRITE_MIDDLE, false)).is_empty());
    // A new PSN still goes everywhere.
    assert_eq!(
        replicas(&feed(&mut sw, 0, &data(13, Opcode::RC_WRITE_ONLY, true))),
        vec![1, 2, 3]
    );
}

/// A switch whose every member was pruned (the evicted member was its only
/// one) keeps the branch its upstream switch sends on; it acknowledges what arrives on
/// it, so the upstream aggregate does not wait on an empty subtree.
#[test]
fn a_branch_with_every_member_pruned_acknowledges_what_reaches_it() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    for p in 1..=3 {
        feed(&mut sw, p, &ack(p, 4));
    }
    assert!(feed(&mut sw, 0, &data(5, Opcode::RC_WRITE_ONLY, true))
        .iter()
        .all(|a| !matches!(a, CepheusAction::Feedback { .. })));
    for p in 1..=3 {
        assert!(sw.remove_path(MCST, p));
    }
    // Nothing below: the packet is acknowledged at once, toward the source.
    let (port, fb) = one_feedback(&feed(&mut sw, 0, &data(6, Opcode::RC_WRITE_ONLY, true)));
    assert_eq!(port, 0);
    assert!(is_ack(&fb));
    assert_eq!(fb.psn, Psn::new(6));
    // Without AckReq nothing is answered or forwarded.
    assert!(feed(&mut sw, 0, &data(7, Opcode::RC_WRITE_MIDDLE, false)).is_empty());
}

#[test]
fn cnps_pass_from_the_most_congested_path_only() {
    let mut sw = switch(Box::new(CounterCnpFilter::new(Duration::from_us(100))));
    feed(&mut sw, 0, &data(0, Opcode::RC_WRITE_ONLY, true));
    for _ in 0..3 {
        let (port, fb) = one_feedback(&feed(&mut sw, 1, &cnp(1)));
        assert_eq!(port, 0);
        assert_eq!(fb.kind, FeedbackKind::Cnp);
        assert_eq!((fb.src_ip, fb.dst_ip, fb.dst_qp), (MCST, host_ip(0), S_QPN));
    }
    assert!(feed(&mut sw, 2, &cnp(2)).is_empty(), "R2 is less congested");
    assert_eq!((sw.stats.cnps_out, sw.stats.cnps_filtered), (3, 1));
    // MC-RDMA's forward-all passes both.
    let mut all = switch(Box::new(ForwardAllCnp));
    feed(&mut all, 0, &data(0, Opcode::RC_WRITE_ONLY, true));
    for p in [1, 1, 2] {
        assert_eq!(feed(&mut all, p, &cnp(p)).len(), 1);
    }
}

/// TMCF's buffered reading through the switch: a held CNP leaves nothing on arrival;
/// when it is due, `handle_timeout` sends it toward the source, built on the held
/// CNP's headers (DSCP 48, UDP source port 49153); a removed group releases nothing.
#[test]
fn held_cnps_are_released_later_on_their_own_headers() {
    let mut sw = switch(Box::new(BufferedTmcfCnpFilter::new(Duration::from_us(50))));
    feed(&mut sw, 0, &data(0, Opcode::RC_WRITE_ONLY, true));
    assert_eq!(sw.poll_at(), None);
    assert!(feed(&mut sw, 1, &cnp(1)).is_empty(), "held, not passed");
    // The CNP opened its group's first slot, so it is due one slot later: at that
    // slot's end.
    let due = sw.poll_at().expect("a release is due");
    assert_eq!(due, Instant::from_us(51));
    sw.handle_timeout(Instant::from_us(50));
    assert!(sw.poll_transmit(due).is_none(), "nothing before it is due");
    sw.handle_timeout(due);
    let (port, fb) =
        one_feedback(&std::iter::from_fn(|| sw.poll_transmit(due)).collect::<Vec<_>>());
    assert_eq!(port, 0);
    assert_eq!(
        (fb.kind, fb.src_ip, fb.dst_ip, fb.dst_qp),
        (FeedbackKind::Cnp, MCST, host_ip(0), S_QPN)
    );
    let repr = sw.released_repr(&fb).expect("the held CNP's headers");
    assert_eq!(repr.bth.opcode, Opcode::CNP);
    assert_eq!((repr.ip.dscp, repr.udp.src_port), (48, 49153));
    assert_eq!(sw.stats.cnps_out, 1);
    // A group that is gone has nothing to release and no headers kept.
    assert!(feed(&mut sw, 1, &cnp(1)).is_empty());
    assert!(sw.remove_group(MCST));
    assert!(sw.released_repr(&fb).is_none());
}

#[test]
fn a_new_source_port_redirects_feedback() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    for p in 1..=3 {
        feed(&mut sw, p, &ack(p, 4));
    }
    // R1 becomes the source (its QP synchronised to PSN 100).
    let mut pkt = data(100, Opcode::RC_WRITE_ONLY, true);
    pkt.ip.src_addr = host_ip(1);
    let out = feed(&mut sw, 1, &pkt);
    assert_eq!(replicas(&out), vec![0, 2, 3], "the old source now receives");
    assert_eq!(sw.stats.source_switches, 1);
    let g = sw.group(MCST).unwrap();
    assert_eq!(g.ack_out_port, Some(1));
    assert!(
        g.entries().iter().all(|e| e.ack_psn.is_none()),
        "old ACK state dropped"
    );
    // Feedback now aggregates over 0, 2, 3 and goes to R1's own connection.
    assert!(feed(&mut sw, 0, &ack(0, 100)).is_empty());
    assert!(feed(&mut sw, 2, &ack(2, 100)).is_empty());
    let (port, fb) = one_feedback(&feed(&mut sw, 3, &ack(3, 100)));
    assert_eq!(port, 1);
    assert_eq!(
        (fb.dst_ip, fb.dst_qp, fb.psn),
        (host_ip(1), host_qpn(1), Psn::new(100))
    );
    // Feedback arriving from the source's own port is stray.
    assert!(feed(&mut sw, 1, &ack(1, 3)).is_empty());
    assert_eq!(sw.stats.stray_feedback, 1);
}

#[test]
fn switch_paths_carry_group_addressing_and_aggregate_like_hosts() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    sw.set_path(MCST, 4, NextHop::Switch, false).unwrap();
    let out = feed(&mut sw, 0, &data(0, Opcode::RC_WRITE_ONLY, true));
    assert!(out.contains(&CepheusAction::Replicate {
        port: 4,
        bridge: None
    }));
    for p in 1..=3 {
        feed(&mut sw, p, &ack(p, 0));
    }
    // The downstream switch's aggregated ACK arrives addressed to the McstID.
    let mut agg = ack(4, 0);
    agg.ip.src_addr = MCST;
    let (_, fb) = one_feedback(&feed(&mut sw, 4, &agg));
    assert_eq!(fb.psn, Psn::new(0));
    // Upstream of a switch path, feedback keeps the group's addressing.
    let mut up = CepheusSwitch::new(2, 4, Box::new(ForwardAllCnp));
    up.set_path(MCST, 0, NextHop::Switch, true).unwrap();
    up.set_path(MCST, 1, NextHop::Switch, false).unwrap();
    feed(&mut up, 0, &data(0, Opcode::RC_WRITE_ONLY, true));
    let (port, fb) = one_feedback(&feed(&mut up, 1, &agg));
    assert_eq!((port, fb.dst_ip, fb.dst_qp), (0, MCST, VIRTUAL_QPN));
}

#[test]
fn strays_and_strangers_are_counted_not_forwarded() {
    let mut sw = switch(Box::new(ForwardAllCnp));
    // Unicast traffic is not the engine's.
    let mut uni = data(0, Opcode::RC_WRITE_ONLY, true);
    uni.ip.dst_addr = host_ip(2);
    assert_eq!(
        sw.handle_packet(Instant::from_us(0), 0, &uni),
        Handling::NotMulticast
    );
    let mut other = data(0, Opcode::RC_WRITE_ONLY, true);
    other.ip.dst_addr = Ipv4Address::new(239, 9, 9, 9);
    assert!(feed(&mut sw, 0, &other).is_empty());
    assert!(feed(&mut sw, 4, &data(0, Opcode::RC_WRITE_ONLY, true)).is_empty());
    let read = data(0, Opcode::RC_READ_REQUEST, true);
    assert!(feed(&mut sw, 0, &read).is_empty());
    let reserved = aeth(1, 3, AckSyndrome::Reserved(0x80));
    assert!(feed(&mut sw, 1, &reserved).is_empty());
    let s = &sw.stats;
    assert_eq!((s.unknown_group, s.not_in_tree, s.unsupported), (1, 1, 2));
    // A fatal NAK goes straight to the source.
    let fatal = aeth(2, 3, AckSyndrome::Nak(NakCode::RemoteAccessError));
    let (port, fb) = one_feedback(&feed(&mut sw, 2, &fatal));
    assert_eq!((port, fb.psn), (0, Psn::new(3)));
}

#[test]
fn table_is_bounded_by_ports_and_groups() {
    let mut sw = CepheusSwitch::new(64, 2, Box::new(ForwardAllCnp));
    let g = |i: u8| Ipv4Address::new(239, 0, 0, i);
    for port in 0..64 {
        sw.set_path(g(1), port, NextHop::Switch, port == 0).unwrap();
        sw.set_path(g(1), port, NextHop::Switch, false).unwrap();
    }
    assert_eq!(sw.group(g(1)).unwrap().entries().len(), 64);
    sw.set_path(g(2), 3, NextHop::Switch, true).unwrap();
    assert_eq!(
        sw.set_path(g(3), 3, NextHop::Switch, true),
        Err(MftError::TableFull(2))
    );
    assert_eq!(
        sw.set_path(g(2), 64, NextHop::Switch, false),
        Err(MftError::NoSuchPort(64))
    );
    assert_eq!(
        sw.set_path(host_ip(1), 1, NextHop::Switch, false),
        Err(MftError::NotMulticast(host_ip(1)))
    );
    assert_eq!((sw.port_load(3), sw.port_load(4)), (2, 1));
    assert!(sw.remove_group(g(1)));
    assert_eq!((sw.port_load(3), sw.port_load(4)), (1, 0));
    // Software footprint: one full 64-port group is a few kilobytes.
    let one = sw.memory_bytes();
    assert!(one < 4096, "{one}");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum In {
        Data { port: u16, psn: u32, ack_req: bool },
        Ack { port: u16, psn: u32 },
        Nak { port: u16, psn: u32 },
        Cnp { port: u16 },
        Other { port: u16, opcode: u8, dst: u32 },
    }

    fn input() -> impl Strategy<Value = In> {
        prop_oneof![
            (0u16..6, 0u32..64, any::<bool>()).prop_map(|(port, psn, ack_req)| In::Data {
                port,
                psn,
                ack_req
            }),
            (0u16..6, 0u32..64).prop_map(|(port, psn)| In::Ack { port, psn }),
            (0u16..6, 0u32..64).prop_map(|(port, psn)| In::Nak { port, psn }),
            (0u16..6).prop_map(|port| In::Cnp { port }),
            (0u16..6, any::<u8>(), any::<u32>()).prop_map(|(port, opcode, dst)| In::Other {
                port,
                opcode,
                dst
            }),
        ]
    }

    proptest! {
        /// Any packet sequence, on any port (including ports off the tree and past the
        /// port count): no panic, every action leaves by a tree port other than the
        /// arrival port, and an aggregated ACK never claims more than every path
        /// acknowledged.
        #[test]
        fn any_sequence_is_handled_within_the_rules(seq in proptest::collection::vec(input(), 0..80)) {
            let mut sw = switch(Box::new(CounterCnpFilter::new(Duration::from_us(10))));
            let mut t = 0;
            for i in seq {
                t += 1;
                let (port, pkt) = match i {
                    In::Data { port, psn, ack_req } => (port, data(psn, Opcode::RC_WRITE_MIDDLE, ack_req)),
                    In::Ack { port, psn } => (port, ack(port.min(3), psn)),
                    In::Nak { port, psn } => (port, nak(port.min(3), psn)),
                    In::Cnp { port } => (port, cnp(port.min(3))),
                    In::Other { port, opcode, dst } => {
                        let mut p = data(0, Opcode(opcode), true);
                        p.ip.dst_addr = Ipv4Address::from_u32(dst);
                        (port, p)
                    }
                };
                let now = Instant::from_us(t);
                sw.handle_packet(now, port, &pkt);
                let out: Vec<CepheusAction> = std::iter::from_fn(|| sw.poll_transmit(now)).collect();
                let g = sw.group(MCST).unwrap();
                for a in &out {
                    let p = match a {
                        CepheusAction::Replicate { port, .. } => *port,
                        CepheusAction::Feedback { port, packet } => {
                            if let FeedbackKind::Ack { syndrome: AckSyndrome::Ack { .. }, .. } = packet.kind {
                                let min = g.entries().iter()
                                    .filter(|e| Some(e.port) != g.ack_out_port)
                                    .map(|e| e.ack_psn)
                                    .collect::<Option<Vec<_>>>()
                                    .and_then(|v| v.into_iter().min());
                                prop_assert!(min.is_some_and(|m| packet.psn <= m), "{packet:?} {g:?}");
                            }
                            *port
                        }
                    };
                    prop_assert!(g.entry(p).is_some());
                    let is_feedback = matches!(a, CepheusAction::Feedback { .. });
                    prop_assert!(p != port || is_feedback, "a copy back out of its arrival port");
                }
            }
        }
    }
}
