//! Frame-by-frame scripts for [`FrameSwitch`]: each test feeds Ethernet frames in and
//! checks exactly what comes out.
//!
//! The stage: a 4-port switch; host h_p (10.77.0.(p+1), MAC 02:72:63:00:00:(p+1)) on
//! port p, pinned; the group address space 10.77.0.128/25 and McstID 10.77.0.200. The
//! leader h0 (QPN 0x11) multicasts to h1..h3 (QPN 0x101..0x103).

use super::*;
use crate::control::registration::GroupSpec;
use crate::fabric::cepheus::{ForwardAllCnp, VIRTUAL_QPN};
use crate::wire::mrp::{MrpMember, MrpRepr};
use crate::wire::{AckSyndrome, AethRepr, BthRepr, ExtHeaders, Opcode, Psn};

const MCST: Ipv4Address = Ipv4Address::new(10, 77, 0, 200);

pub(super) fn ip(p: u16) -> Ipv4Address {
    Ipv4Address::new(10, 77, 0, p as u8 + 1)
}
pub(super) fn mac(p: u16) -> EthernetAddress {
    EthernetAddress([2, 0x72, 0x63, 0, 0, p as u8 + 1])
}
fn qpn(p: u16) -> u32 {
    if p == 0 {
        0x11
    } else {
        0x100 + p as u32
    }
}
/// The tests read whole frames: one input, then everything it caused.
pub(super) trait CollectFrames {
    fn handle_frame_into(&mut self, now: Instant, port: u16, frame: &[u8], out: &mut Vec<OutFrame>);
}

impl CollectFrames for FrameSwitch {
    fn handle_frame_into(
        &mut self,
        now: Instant,
        port: u16,
        frame: &[u8],
        out: &mut Vec<OutFrame>,
    ) {
        self.handle_frame(now, port, frame);
        let mut buf = vec![0u8; frame.len().max(64)];
        while let Some(t) = self.poll_transmit(now, &mut buf) {
            out.push(OutFrame {
                port: t.port,
                frame: buf[..t.len].to_vec(),
            });
        }
        assert_eq!(self.pending_transmits(), 0);
    }
}

fn now() -> Instant {
    Instant::from_ps(1_000_000)
}

fn switch(max_groups: usize) -> FrameSwitch {
    let mut sw = FrameSwitch::new(
        FrameSwitchConfig {
            max_groups,
            switch_id: 9,
            group_lease: None,
            ..FrameSwitchConfig::new(4)
        },
        Box::new(ForwardAllCnp),
    );
    for p in 0..4 {
        sw.add_host(ip(p), p, mac(p)).unwrap();
    }
    sw
}

fn frame(src: EthernetAddress, dst: EthernetAddress, ethertype: EtherType, body: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; ETHERNET_HEADER_LEN + body.len()];
    EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        ethertype,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[ETHERNET_HEADER_LEN..].copy_from_slice(body);
    f
}

fn roce_frame(from: u16, dst_mac: EthernetAddress, r: &RoceRepr<'_>) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b);
    frame(mac(from), dst_mac, EtherType::Ipv4, &b)
}

fn parse_out(f: &OutFrame) -> (EthernetAddress, RoceRepr<'_>) {
    let eth = EthernetFrame::new_checked(&f.frame[..]).unwrap();
    let r = RoceRepr::parse_verified(&f.frame[ETHERNET_HEADER_LEN..]).expect("ICRC verifies");
    (eth.dst_addr(), r)
}

/// The group h0 → h1..h3.
fn spec() -> GroupSpec {
    spec_for(MCST)
}

/// The group h0 → h1..h3 under McstID `mcst`.
fn spec_for(mcst: Ipv4Address) -> GroupSpec {
    let member = |p: u16| MrpMember {
        ip: ip(p),
        qpn: qpn(p),
        region: None,
    };
    let space = GroupAddressSpace::parse("10.77.0.128/25").unwrap();
    GroupSpec::in_space(space, mcst, member(0), (1..4).map(member).collect()).unwrap()
}

/// Its one registration packet's bytes.
fn registration_body() -> Vec<u8> {
    registration_body_for(MCST)
}

/// An MRP prune of host `p` from the group.
fn prune_body(p: u16) -> Vec<u8> {
    let prune = crate::wire::mrp::MrpPrune {
        mcst_id: MCST,
        members: vec![ip(p)],
    };
    let mut body = vec![0u8; prune.buffer_len()];
    prune.emit(&mut body);
    body
}

/// Registers the group h0 → h1..h3 and returns the MRP frames the switch sent.
fn register(sw: &mut FrameSwitch) -> Vec<OutFrame> {
    let mut out = Vec::new();
    for m in spec().mrp_packets() {
        let mut body = vec![0u8; m.buffer_len()];
        m.emit(&mut body);
        let ipb = FrameSwitch::udp_packet(ip(0), MCST, MRP_UDP_PORT, &body);
        sw.handle_frame_into(
            now(),
            0,
            &frame(mac(0), sw.port_mac(0), EtherType::Ipv4, &ipb),
            &mut out,
        );
    }
    out
}

fn send_only(psn: u32) -> RoceRepr<'static> {
    let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, VIRTUAL_QPN, Psn::new(psn));
    bth.ack_req = true;
    RoceRepr::new(
        ip(0),
        MCST,
        26,
        Ecn::Ect0,
        49152,
        bth,
        ExtHeaders::default(),
        &[7u8; 64],
    )
}

fn ack(from: u16, psn: u32) -> RoceRepr<'static> {
    let bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, VIRTUAL_QPN, Psn::new(psn));
    let ext = ExtHeaders {
        aeth: Some(AethRepr {
            syndrome: AckSyndrome::Ack { credits: 31 },
            msn: 1,
        }),
        ..Default::default()
    };
    RoceRepr::new(ip(from), MCST, 26, Ecn::NotEct, 49153, bth, ext, &[])
}

#[test]
fn arp_for_a_group_address_is_answered_by_the_switch() {
    let mut sw = switch(4);
    let req = ArpRepr {
        operation: ArpOperation::Request,
        sender_mac: mac(0),
        sender_ip: ip(0),
        target_mac: EthernetAddress([0; 6]),
        target_ip: MCST,
    };
    let mut body = [0u8; ARP_LEN];
    req.emit(&mut body);
    let mut out = Vec::new();
    sw.handle_frame_into(
        now(),
        0,
        &frame(mac(0), EthernetAddress::BROADCAST, EtherType::Arp, &body),
        &mut out,
    );
    assert_eq!(out.len(), 1, "answered, not flooded");
    assert_eq!(out[0].port, 0);
    let reply = ArpRepr::parse(&out[0].frame[ETHERNET_HEADER_LEN..]).unwrap();
    assert_eq!(reply.operation, ArpOperation::Reply);
    assert_eq!((reply.sender_ip, reply.sender_mac), (MCST, sw.port_mac(0)));
    assert_eq!((reply.target_ip, reply.target_mac), (ip(0), mac(0)));
    // ARP for a host is flooded to the other ports.
    let mut host_req = req;
    host_req.target_ip = ip(2);
    host_req.emit(&mut body);
    out.clear();
    sw.handle_frame_into(
        now(),
        0,
        &frame(mac(0), EthernetAddress::BROADCAST, EtherType::Arp, &body),
        &mut out,
    );
    assert_eq!(
        out.iter().map(|o| o.port).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(sw.stats().arp_proxied, 1);
    assert_eq!(sw.stats().flooded, 1);
}

#[test]
fn hosts_are_learned_and_unicast_is_forwarded_by_the_host_table() {
    let mut sw = FrameSwitch::new(switch(4).config().clone(), Box::new(ForwardAllCnp));
    let pkt = FrameSwitch::udp_packet(ip(1), ip(2), 5000, b"hello");
    let mut out = Vec::new();
    // h2 unknown: flooded (by MAC), h1 learned on port 1.
    sw.handle_frame_into(
        now(),
        1,
        &frame(mac(1), mac(2), EtherType::Ipv4, &pkt),
        &mut out,
    );
    assert_eq!(out.len(), 3);
    assert_eq!(sw.hosts().count(), 1);
    // h2 answers: learned, and its packet goes to port 1 only.
    out.clear();
    let back = FrameSwitch::udp_packet(ip(2), ip(1), 5000, b"hi");
    sw.handle_frame_into(
        now(),
        2,
        &frame(mac(2), mac(1), EtherType::Ipv4, &back),
        &mut out,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    assert_eq!(&out[0].frame[ETHERNET_HEADER_LEN..], &back[..]);
    // A frame for a host behind its own arrival port is dropped.
    out.clear();
    sw.handle_frame_into(
        now(),
        1,
        &frame(mac(1), mac(1), EtherType::Ipv4, &pkt),
        &mut out,
    );
    let to_self = FrameSwitch::udp_packet(ip(1), ip(1), 5000, b"x");
    sw.handle_frame_into(
        now(),
        1,
        &frame(mac(1), mac(1), EtherType::Ipv4, &to_self),
        &mut out,
    );
    assert!(out.iter().all(|o| o.port != 1));
    assert!(sw.stats().hairpin_drops >= 1);
}

#[test]
fn mrp_fills_the_mft_and_reaches_each_member_at_its_own_address() {
    let mut sw = switch(4);
    let out = register(&mut sw);
    assert_eq!(
        out.iter().map(|o| o.port).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for o in &out {
        let eth = EthernetFrame::new_checked(&o.frame[..]).unwrap();
        assert_eq!(eth.dst_addr(), mac(o.port));
        let ipk = Ipv4Packet::new_checked(&o.frame[ETHERNET_HEADER_LEN..]).unwrap();
        assert_eq!((ipk.src_addr(), ipk.dst_addr()), (ip(0), ip(o.port)));
        let udp = UdpPacket::new_checked(ipk.payload()).unwrap();
        assert_eq!(udp.dst_port(), MRP_UDP_PORT);
        let m = MrpRepr::parse(udp.payload()).unwrap();
        assert_eq!(m.mcst_id, MCST);
        assert_eq!(
            m.members.iter().map(|x| x.ip).collect::<Vec<_>>(),
            vec![ip(o.port)]
        );
    }
    assert_eq!(
        sw.group_members(MCST),
        vec![
            (0, ip(0), qpn(0)),
            (1, ip(1), qpn(1)),
            (2, ip(2), qpn(2)),
            (3, ip(3), qpn(3))
        ]
    );
    assert_eq!((sw.stats().mrp_in, sw.stats().mrp_out), (1, 3));
}

#[test]
fn data_is_replicated_bridged_and_acks_are_aggregated() {
    let mut sw = switch(4);
    register(&mut sw);
    let mut out = Vec::new();
    sw.handle_frame_into(
        now(),
        0,
        &roce_frame(0, sw.port_mac(0), &send_only(5)),
        &mut out,
    );
    assert_eq!(
        out.iter().map(|o| o.port).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for o in &out {
        let (dst, r) = parse_out(o);
        assert_eq!(dst, mac(o.port));
        assert_eq!((r.ip.src_addr, r.ip.dst_addr), (MCST, ip(o.port)));
        assert_eq!(r.bth.dest_qp, qpn(o.port));
        assert_eq!(r.payload, &[7u8; 64][..]);
    }
    // ACKs from h1 and h2: nothing yet; from h3: one aggregated ACK to the leader.
    for p in 1..3 {
        out.clear();
        sw.handle_frame_into(
            now(),
            p,
            &roce_frame(p, sw.port_mac(p), &ack(p, 5)),
            &mut out,
        );
        assert!(out.is_empty(), "ACK from {p} alone is not the group's");
    }
    out.clear();
    sw.handle_frame_into(
        now(),
        3,
        &roce_frame(3, sw.port_mac(3), &ack(3, 5)),
        &mut out,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 0);
    let (dst, r) = parse_out(&out[0]);
    assert_eq!(dst, mac(0));
    assert_eq!(
        (r.ip.src_addr, r.ip.dst_addr, r.bth.dest_qp),
        (MCST, ip(0), qpn(0))
    );
    assert_eq!(
        (r.bth.opcode, r.bth.psn),
        (Opcode::RC_ACKNOWLEDGE, Psn::new(5))
    );
    let st = sw.cepheus().stats.clone();
    assert_eq!(
        (st.data_in, st.replicas, st.acks_in, st.acks_out),
        (1, 3, 3, 1)
    );
    assert_eq!(
        sw.stats().replicated_bytes,
        3 * send_only(5).buffer_len() as u64
    );
}

#[test]
fn a_full_mft_refuses_and_reports_to_the_leader() {
    let mut sw = switch(0);
    let out = register(&mut sw);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 0);
    let ipk = Ipv4Packet::new_checked(&out[0].frame[ETHERNET_HEADER_LEN..]).unwrap();
    assert_eq!(ipk.dst_addr(), ip(0));
    let udp = UdpPacket::new_checked(ipk.payload()).unwrap();
    let report = SwitchReport::parse(udp.payload()).unwrap();
    assert_eq!(
        report,
        SwitchReport {
            switch: 9,
            mcst_id: MCST,
            reason: SwitchRejection::TableFull
        }
    );
    assert_eq!(sw.stats().mrp_refused, 1);
    assert_eq!(sw.cepheus().num_groups(), 0);
}

#[test]
fn bad_frames_are_counted_and_never_forwarded_or_laundered() {
    let mut sw = switch(4);
    register(&mut sw);
    let mut out = Vec::new();
    let before = sw.stats().clone();
    sw.handle_frame_into(now(), 0, &[0u8; 10], &mut out); // shorter than Ethernet
    sw.handle_frame_into(
        now(),
        9,
        &roce_frame(0, sw.port_mac(0), &send_only(1)),
        &mut out,
    ); // no port 9
    let mut bad_ip = roce_frame(0, sw.port_mac(0), &send_only(1));
    bad_ip[ETHERNET_HEADER_LEN] = 0x65; // IPv6 version in an IPv4 frame
    sw.handle_frame_into(now(), 0, &bad_ip, &mut out);
    sw.handle_frame_into(
        now(),
        0,
        &frame(
            mac(0),
            EthernetAddress::BROADCAST,
            EtherType::Arp,
            &[0, 1, 2],
        ),
        &mut out,
    );
    assert_eq!(sw.stats().malformed, before.malformed + 4);
    // Garbage UDP to the group's RoCE port, and an MRP that does not parse.
    let junk = FrameSwitch::udp_packet(ip(0), MCST, ROCEV2_UDP_PORT, &[1, 2, 3]);
    sw.handle_frame_into(
        now(),
        0,
        &frame(mac(0), sw.port_mac(0), EtherType::Ipv4, &junk),
        &mut out,
    );
    assert_eq!(sw.stats().roce_malformed, before.roce_malformed + 1);
    assert!(out.is_empty());
    let bad_mrp = FrameSwitch::udp_packet(ip(0), MCST, MRP_UDP_PORT, &[10, 77, 0, 200, 0]);
    sw.handle_frame_into(
        now(),
        0,
        &frame(mac(0), sw.port_mac(0), EtherType::Ipv4, &bad_mrp),
        &mut out,
    );
    assert_eq!(sw.stats().mrp_malformed, 1);
    assert_eq!(
        out.len(),
        1,
        "a malformed registration is reported to its sender"
    );
    out.clear();
    // A data packet whose payload was corrupted: its ICRC fails, no replica is made.
    let mut corrupt = roce_frame(0, sw.port_mac(0), &send_only(2));
    let n = corrupt.len();
    corrupt[n - 10] ^= 0xff;
    sw.handle_frame_into(now(), 0, &corrupt, &mut out);
    assert!(out.is_empty());
    assert_eq!(sw.stats().bad_icrc, 1);
    assert_eq!(sw.cepheus().stats.data_in, 0, "the engine never saw it");
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap deterministic sweep (the fuzz target covers more).
    let mut sw = switch(4);
    register(&mut sw);
    let base = roce_frame(0, sw.port_mac(0), &send_only(3));
    let mut out = Vec::new();
    let mut x: u32 = 0x1234_5678;
    for i in 0..2000 {
        let mut f = base.clone();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let at = x as usize % f.len();
        f[at] ^= (x >> 8) as u8 | 1;
        f.truncate(f.len() - (i % 7));
        sw.handle_frame_into(now(), (i % 4) as u16, &f, &mut out);
        out.clear();
    }
    assert!(sw.stats().rx_frames >= 2000);
}

#[test]
fn a_release_from_the_leader_frees_the_group_and_others_are_refused() {
    let mut sw = switch(4);
    register(&mut sw);
    let rel = crate::wire::mrp::MrpRelease { mcst_id: MCST };
    let mut body = [0u8; 8];
    rel.emit(&mut body);
    let mut out = Vec::new();
    // From a member's port: refused, the group stays.
    let from_member = FrameSwitch::udp_packet(ip(2), MCST, MRP_UDP_PORT, &body);
    sw.handle_frame_into(
        now(),
        2,
        &frame(mac(2), sw.port_mac(2), EtherType::Ipv4, &from_member),
        &mut out,
    );
    assert_eq!(sw.cepheus().num_groups(), 1);
    assert_eq!(sw.stats().mrp_refused, 1);
    // From the leader: freed; a re-registration starts clean.
    let from_leader = FrameSwitch::udp_packet(ip(0), MCST, MRP_UDP_PORT, &body);
    sw.handle_frame_into(
        now(),
        0,
        &frame(mac(0), sw.port_mac(0), EtherType::Ipv4, &from_leader),
        &mut out,
    );
    assert_eq!(sw.cepheus().num_groups(), 0);
    assert_eq!(sw.stats().mrp_released, 1);
    // The leader's repeated release finds nothing: counted apart from refusals.
    sw.handle_frame_into(
        now(),
        0,
        &frame(mac(0), sw.port_mac(0), EtherType::Ipv4, &from_leader),
        &mut out,
    );
    assert_eq!(
        (sw.stats().mrp_stale_release, sw.stats().mrp_refused),
        (1, 1)
    );
    assert!(out.is_empty(), "no downstream switches to tell");
    register(&mut sw);
    assert_eq!(sw.cepheus().num_groups(), 1);
}

/// The MRP payload `body` from host `from` (on port `from`) to the group.
fn mrp_from(sw: &mut FrameSwitch, at: Instant, from: u16, body: &[u8]) -> Vec<OutFrame> {
    mrp_from_to(sw, at, from, MCST, body)
}

#[test]
fn a_group_lease_is_refreshed_by_its_registration_and_reclaimed_when_it_runs_out() {
    let lease = Duration::from_ms(500);
    let mut sw = switch(4);
    sw.cfg.group_lease = Some(lease);
    register(&mut sw);
    assert_eq!(sw.lease_end(MCST), Some(now() + lease));
    assert_eq!(sw.poll_timeout(), Some(now() + lease));
    // Before the end nothing happens; a refresh moves the end.
    sw.handle_timeout(now() + Duration::from_ms(499));
    assert_eq!(sw.cepheus().num_groups(), 1);
    let later = now() + Duration::from_ms(400);
    mrp_from(&mut sw, later, 0, &registration_body());
    assert_eq!(sw.lease_end(MCST), Some(later + lease));
    assert_eq!(
        sw.cepheus().group(MCST).unwrap().entries().len(),
        4,
        "unchanged"
    );
    sw.handle_timeout(now() + lease);
    assert_eq!(sw.cepheus().num_groups(), 1, "refreshed: still held");
    assert_eq!(sw.stats().lease_expired, 0);
    // No refresh: the group is reclaimed, and the table has room again.
    sw.handle_timeout(later + lease);
    assert_eq!(sw.cepheus().num_groups(), 0);
    assert_eq!(sw.stats().lease_expired, 1);
    assert_eq!(sw.poll_timeout(), None);
    assert_eq!(sw.lease_end(MCST), None);
    // Without leases, entries stay until released.
    let mut sw = switch(4);
    register(&mut sw);
    assert_eq!(sw.poll_timeout(), None);
    sw.handle_timeout(now() + Duration::from_ms(1_000_000));
    assert_eq!(sw.cepheus().num_groups(), 1);
}

#[test]
fn a_prune_from_the_leader_takes_one_member_off_and_a_members_prune_does_nothing() {
    let mut sw = switch(4);
    register(&mut sw);
    let body = prune_body(2);
    mrp_from(&mut sw, now(), 3, &body);
    assert_eq!(sw.stats().mrp_prune_ignored, 1);
    assert_eq!(sw.group_members(MCST).len(), 4);
    let out = mrp_from(&mut sw, now(), 0, &body);
    assert!(
        out.is_empty(),
        "an attached member is pruned here, nothing passed on"
    );
    assert_eq!(sw.stats().mrp_pruned, 1);
    let left: Vec<Ipv4Address> = sw.group_members(MCST).iter().map(|m| m.1).collect();
    assert_eq!(left, vec![ip(0), ip(1), ip(3)]);
    // Data now goes to the two members left (and not back to the source).
    let mut out = Vec::new();
    sw.handle_frame_into(
        now(),
        0,
        &roce_frame(0, sw.port_mac(0), &send_only(1)),
        &mut out,
    );
    let ports: Vec<u16> = out.iter().map(|f| f.port).collect();
    assert_eq!(ports, vec![1, 3]);
}

#[test]
fn pruning_the_laggard_releases_the_aggregated_ack_it_held_back() {
    let mut sw = switch(4);
    register(&mut sw);
    let mut out = Vec::new();
    for psn in 0..8 {
        sw.handle_frame_into(
            now(),
            0,
            &roce_frame(0, sw.port_mac(0), &send_only(psn)),
            &mut out,
        );
    }
    // Members 1 and 3 hold everything; member 2 (about to die) only up to PSN 2.
    out.clear();
    for (p, psn) in [(2, 2), (1, 7), (3, 7)] {
        sw.handle_frame_into(
            now(),
            p,
            &roce_frame(p, sw.port_mac(p), &ack(p, psn)),
            &mut out,
        );
    }
    let acked = |out: &[OutFrame]| -> Vec<u32> {
        out.iter()
            .filter(|f| f.port == 0)
            .map(|f| parse_out(f).1.bth.psn.value())
            .collect()
    };
    assert_eq!(acked(&out), vec![2], "held at the laggard");
    out.clear();
    mrp_from(&mut sw, now(), 0, &prune_body(2));
    // The source times out and retransmits PSN 3: every path left holds it, so the
    // switch answers for them with their minimum instead of staying silent.
    sw.handle_frame_into(
        now(),
        0,
        &roce_frame(0, sw.port_mac(0), &send_only(3)),
        &mut out,
    );
    assert_eq!(acked(&out), vec![7]);
    assert_eq!(sw.cepheus().stats.reacks, 1);
}

#[test]
fn with_a_fabric_key_only_sealed_fresh_mrp_changes_the_tables() {
    use crate::wire::mrp_auth::FabricKey;
    let key = FabricKey::new([0x42; 32]);
    let mut sw = switch(4);
    sw.cfg.mrp_key = Some(key.clone());
    let body = registration_body();
    // Plain MRP, or sealed with another key, or claiming another source: nothing.
    mrp_from(&mut sw, now(), 0, &body);
    mrp_from(
        &mut sw,
        now(),
        0,
        &FabricKey::new([1; 32]).seal(ip(0), 5, &body),
    );
    mrp_from(&mut sw, now(), 3, &key.seal(ip(0), 5, &body));
    assert_eq!(sw.stats().mrp_unauthenticated, 3);
    assert_eq!(sw.cepheus().num_groups(), 0);
    // Sealed by the leader: registered; the members get their bare records.
    let sealed = key.seal(ip(0), 5, &body);
    let out = mrp_from(&mut sw, now(), 0, &sealed);
    assert_eq!(sw.cepheus().num_groups(), 1);
    assert_eq!(out.len(), 3);
    for f in &out {
        let ip_bytes = &f.frame[ETHERNET_HEADER_LEN..];
        let udp = UdpPacket::new_checked(&ip_bytes[IPV4_HEADER_LEN..]).unwrap();
        assert!(MrpRepr::parse(udp.payload()).is_ok(), "a member has no key");
    }
    // The same datagram again, or an older counter: a replay.
    mrp_from(&mut sw, now(), 0, &sealed);
    mrp_from(&mut sw, now(), 0, &key.seal(ip(0), 4, &body));
    assert_eq!(sw.stats().mrp_replayed, 2);
    // An unsealed release or prune changes nothing; a sealed fresh one does.
    let rel = crate::wire::mrp::MrpRelease { mcst_id: MCST };
    let mut r = [0u8; 8];
    rel.emit(&mut r);
    mrp_from(&mut sw, now(), 0, &r);
    assert_eq!(sw.cepheus().num_groups(), 1);
    mrp_from(&mut sw, now(), 0, &key.seal(ip(0), 6, &r));
    assert_eq!(sw.cepheus().num_groups(), 0);
    // A refusal goes back sealed, so the leader can tell it from a forgery.
    let mut full = switch(0);
    full.cfg.mrp_key = Some(key.clone());
    let out = mrp_from(&mut full, now(), 0, &key.seal(ip(0), 1, &body));
    assert_eq!(out.len(), 1);
    let ip_bytes = &out[0].frame[ETHERNET_HEADER_LEN..];
    let src = Ipv4Packet::new_checked(ip_bytes).unwrap().src_addr();
    let udp = UdpPacket::new_checked(&ip_bytes[IPV4_HEADER_LEN..]).unwrap();
    let (report, _) = key.open(src, udp.payload()).expect("sealed by the switch");
    assert_eq!(
        SwitchReport::parse(report).unwrap().reason,
        SwitchRejection::TableFull
    );
}

/// The one registration packet of the group h0 → h1..h3 under McstID `mcst`.
fn registration_body_for(mcst: Ipv4Address) -> Vec<u8> {
    let m = spec_for(mcst).mrp_packets().remove(0);
    let mut body = vec![0u8; m.buffer_len()];
    m.emit(&mut body);
    body
}

/// Host `from` asks for a group address; returns the UDP payloads the switch sent
/// back (with their IPv4 source).
fn ask_allocation(
    sw: &mut FrameSwitch,
    at: Instant,
    from: u16,
    body: &[u8],
) -> Vec<(Ipv4Address, Vec<u8>)> {
    let ipb = FrameSwitch::udp_packet(
        ip(from),
        Ipv4Address::new(10, 77, 0, 128),
        MRP_UDP_PORT,
        body,
    );
    let mut out = Vec::new();
    let f = frame(mac(from), sw.port_mac(from), EtherType::Ipv4, &ipb);
    sw.handle_frame_into(at, from, &f, &mut out);
    out.iter()
        .map(|o| {
            assert_eq!(o.port, from, "answered to the requester only");
            let ipk = Ipv4Packet::new_checked(&o.frame[ETHERNET_HEADER_LEN..]).unwrap();
            assert_eq!(ipk.dst_addr(), ip(from));
            let udp = UdpPacket::new_checked(ipk.payload()).unwrap();
            (ipk.src_addr(), udp.payload().to_vec())
        })
        .collect()
}

fn allocate_body(nonce: u64, lease_ms: u32) -> Vec<u8> {
    let req = crate::wire::mrp::MrpAllocate { nonce, lease_ms };
    let mut b = vec![0u8; req.buffer_len()];
    req.emit(&mut b);
    b
}

#[test]
fn the_switch_allocates_group_addresses_and_registers_each_only_for_its_holder() {
    use crate::wire::mrp::MrpAllocation;
    let mut sw = switch(2);
    sw.cfg.require_allocation = true;
    sw.cfg.allocation_lease = Duration::from_ms(1_000);
    // Without an allocation a registration is refused (NotAllocated), nothing kept.
    let out = mrp_from(&mut sw, now(), 0, &registration_body());
    let ipk = Ipv4Packet::new_checked(&out[0].frame[ETHERNET_HEADER_LEN..]).unwrap();
    let udp = UdpPacket::new_checked(ipk.payload()).unwrap();
    assert_eq!(
        SwitchReport::parse(udp.payload()).unwrap().reason,
        SwitchRejection::NotAllocated
    );
    assert_eq!(sw.cepheus().num_groups(), 0);
    // h0 asks: the space's first free address, the nonce echoed, the lease capped.
    let ans = ask_allocation(&mut sw, now(), 0, &allocate_body(77, 60_000));
    assert_eq!(ans.len(), 1);
    let a = MrpAllocation::parse(&ans[0].1).unwrap();
    let first = Ipv4Address::new(10, 77, 0, 128);
    assert_eq!(
        a,
        MrpAllocation {
            mcst_id: first,
            nonce: 77,
            lease_ms: 1_000
        }
    );
    assert_eq!(ans[0].0, first, "sent from the allocated address");
    // h1 asks next: another address.
    let b = MrpAllocation::parse(&ask_allocation(&mut sw, now(), 1, &allocate_body(5, 100))[0].1)
        .unwrap();
    assert_eq!(b.mcst_id, Ipv4Address::new(10, 77, 0, 129));
    assert_eq!(b.lease_ms, 100);
    assert_eq!(sw.stats().allocated, 2);
    // The table cap (2) counts allocations: a third request is told TableFull.
    let full = ask_allocation(&mut sw, now(), 2, &allocate_body(9, 100));
    let r = SwitchReport::parse(&full[0].1).unwrap();
    assert_eq!(
        (r.mcst_id, r.reason),
        (Ipv4Address::UNSPECIFIED, SwitchRejection::TableFull)
    );
    assert_eq!(sw.stats().allocation_full, 1);
    // h1's address registered by h0 (the holder is h1): refused.
    mrp_from_to(
        &mut sw,
        now(),
        0,
        b.mcst_id,
        &registration_body_for(b.mcst_id),
    );
    assert!(sw.cepheus().group(b.mcst_id).is_none());
    // h0 registers its own: accepted, and the registration renews the allocation.
    let later = now() + Duration::from_ms(900);
    let out = mrp_from_to(&mut sw, later, 0, first, &registration_body_for(first));
    assert_eq!(out.len(), 3, "one MRP packet per member");
    assert!(sw.cepheus().group(first).is_some());
    // At 1 s h1's allocation (100 ms) and h0's first lease are past; h0's was renewed.
    sw.handle_timeout(now() + Duration::from_ms(1_000));
    let held: Vec<_> = sw.allocations().map(|(ip, a)| (ip, a.holder)).collect();
    assert_eq!(held, vec![(first, ip(0))]);
    assert_eq!(sw.stats().allocation_expired, 1);
    // The freed address goes to the next request only after the others (the cursor).
    let c = MrpAllocation::parse(&ask_allocation(&mut sw, later, 2, &allocate_body(1, 100))[0].1)
        .unwrap();
    assert_eq!(c.mcst_id, Ipv4Address::new(10, 77, 0, 130));
}

#[test]
fn without_required_allocation_a_chosen_address_works_unless_another_host_holds_it() {
    let mut sw = switch(4);
    register(&mut sw);
    assert_eq!(
        sw.cepheus().num_groups(),
        1,
        "open mode: the leader chose MCST"
    );
    // h3 holds 10.77.0.128: h0 may not register it.
    let a = ask_allocation(&mut sw, now(), 3, &allocate_body(1, 1_000));
    let a = crate::wire::mrp::MrpAllocation::parse(&a[0].1).unwrap();
    mrp_from_to(
        &mut sw,
        now(),
        0,
        a.mcst_id,
        &registration_body_for(a.mcst_id),
    );
    assert!(sw.cepheus().group(a.mcst_id).is_none());
    assert_eq!(sw.stats().mrp_refused, 1);
}

#[test]
fn with_a_fabric_key_an_unsealed_allocation_request_is_dropped() {
    use crate::wire::mrp_auth::FabricKey;
    let key = FabricKey::new([0x42; 32]);
    let mut sw = switch(4);
    sw.cfg.mrp_key = Some(key.clone());
    assert!(ask_allocation(&mut sw, now(), 0, &allocate_body(1, 1_000)).is_empty());
    assert_eq!(sw.stats().mrp_unauthenticated, 1);
    let ans = ask_allocation(
        &mut sw,
        now(),
        0,
        &key.seal(ip(0), 3, &allocate_body(1, 1_000)),
    );
    let (src, payload) = &ans[0];
    let (inner, _) = key.open(*src, payload).expect("the answer is sealed");
    let a = crate::wire::mrp::MrpAllocation::parse(inner).unwrap();
    assert_eq!((a.mcst_id, a.nonce), (*src, 1));
}

/// Like [`mrp_from`], to McstID `to`.
fn mrp_from_to(
    sw: &mut FrameSwitch,
    at: Instant,
    from: u16,
    to: Ipv4Address,
    body: &[u8],
) -> Vec<OutFrame> {
    let ipb = FrameSwitch::udp_packet(ip(from), to, MRP_UDP_PORT, body);
    let mut out = Vec::new();
    let f = frame(mac(from), sw.port_mac(from), EtherType::Ipv4, &ipb);
    sw.handle_frame_into(at, from, &f, &mut out);
    out
}

/// A switch with h0 and h1 on ports 0 and 1, and h2 and h3 behind port 3, which
/// leads to another switch when `switch_ports` says so.
fn switch_with_uplink(switch_ports: Vec<u16>) -> FrameSwitch {
    let mut sw = FrameSwitch::new(
        FrameSwitchConfig {
            switch_id: 9,
            group_lease: None,
            switch_ports,
            ..FrameSwitchConfig::new(4)
        },
        Box::new(ForwardAllCnp),
    );
    for (p, port) in [(0, 0), (1, 1), (2, 3), (3, 3)] {
        sw.add_host(ip(p), port, mac(p)).unwrap();
    }
    sw
}

#[test]
fn members_behind_a_switch_port_get_one_switch_hop_and_unbridged_copies() {
    let mut sw = switch_with_uplink(vec![3]);
    let out = register(&mut sw);
    // One MRP per next hop: h1 at its own address, and one toward the next switch
    // naming both members behind it.
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![1, 3]);
    let up = &out[1];
    let ipk = Ipv4Packet::new_checked(&up.frame[ETHERNET_HEADER_LEN..]).unwrap();
    let udp = UdpPacket::new_checked(ipk.payload()).unwrap();
    let m = MrpRepr::parse(udp.payload()).unwrap();
    assert_eq!(
        m.members.iter().map(|x| x.ip).collect::<Vec<_>>(),
        vec![ip(2), ip(3)]
    );
    // Data: bridged to h1, as is (the group's address and virtual QP) toward the
    // switch, which bridges for its own members.
    let mut copies = Vec::new();
    sw.handle_frame_into(
        now(),
        0,
        &roce_frame(0, sw.port_mac(0), &send_only(5)),
        &mut copies,
    );
    assert_eq!(
        copies.iter().map(|o| o.port).collect::<Vec<_>>(),
        vec![1, 3]
    );
    let (_, to_h1) = parse_out(&copies[0]);
    assert_eq!((to_h1.ip.dst_addr, to_h1.bth.dest_qp), (ip(1), qpn(1)));
    let (_, up) = parse_out(&copies[1]);
    assert_eq!((up.ip.dst_addr, up.bth.dest_qp), (MCST, VIRTUAL_QPN));
    assert_eq!(up.bth.psn, Psn::new(5));
    assert_eq!(sw.cepheus().stats.bridged, 1);

    // Without the port declared, both hosts behind it look attached to it: the port
    // holds one host path, so one of the two members gets bridged copies and the
    // next switch cannot serve the other (the two-tier lab's failure before
    // `switch_ports`).
    let mut flat = switch_with_uplink(Vec::new());
    register(&mut flat);
    let mut copies = Vec::new();
    flat.handle_frame_into(
        now(),
        0,
        &roce_frame(0, flat.port_mac(0), &send_only(5)),
        &mut copies,
    );
    let (_, up) = parse_out(&copies[1]);
    assert_eq!(copies[1].port, 3);
    assert_ne!(up.ip.dst_addr, MCST, "bridged to one host");
}

/// One RoCE frame from port `port` (its host's MAC) carrying `r`; what came out.
fn roce_in(sw: &mut FrameSwitch, at: Instant, port: u16, r: &RoceRepr<'_>) -> Vec<OutFrame> {
    let mut out = Vec::new();
    sw.handle_frame_into(at, port, &roce_frame(port, sw.port_mac(port), r), &mut out);
    out
}

/// A SEND from `src` to `dst` (any RoCE an end host might send).
fn send_from(src: Ipv4Address, dst: Ipv4Address, psn: u32) -> RoceRepr<'static> {
    let mut r = send_only(psn);
    r.ip.src_addr = src;
    r.ip.dst_addr = dst;
    r
}

#[test]
fn the_source_guard_drops_roce_from_addresses_not_bound_to_the_port() {
    let mut sw = switch(4);
    // h3 claims h1's address toward h0: h1 is bound (pinned) to port 1.
    assert!(roce_in(&mut sw, now(), 3, &send_from(ip(1), ip(0), 1)).is_empty());
    // h3 sends from the group's address, and from another group-space address.
    assert!(roce_in(&mut sw, now(), 3, &send_from(MCST, ip(1), 1)).is_empty());
    let other = Ipv4Address::new(10, 77, 0, 131);
    assert!(roce_in(&mut sw, now(), 3, &send_from(other, ip(1), 1)).is_empty());
    assert_eq!(sw.stats().source_guard_drops, 3);
    assert_eq!(sw.hosts().find(|(a, _)| *a == ip(1)).unwrap().1.port, 1);
    // Its own address passes: Soft-RoCE from a host's own address is untouched.
    let out = roce_in(&mut sw, now(), 3, &send_from(ip(3), ip(0), 1));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 0);
    assert_eq!(sw.stats().source_guard_drops, 3);
    // ARP claiming h1's address from port 3 would poison caches: dropped.
    let spoof = ArpRepr {
        operation: ArpOperation::Reply,
        sender_mac: mac(3),
        sender_ip: ip(1),
        target_mac: mac(0),
        target_ip: ip(0),
    };
    let mut body = [0u8; ARP_LEN];
    spoof.emit(&mut body);
    let mut out = Vec::new();
    sw.handle_frame_into(
        now(),
        3,
        &frame(mac(3), mac(0), EtherType::Arp, &body),
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(sw.stats().arp_spoof_drops, 1);
}

#[test]
fn a_learned_binding_sticks_to_its_port_until_it_ages_out() {
    let mut sw = FrameSwitch::new(
        FrameSwitchConfig {
            group_lease: None,
            table_age: Duration::from_ms(1000),
            ..FrameSwitchConfig::new(4)
        },
        Box::new(ForwardAllCnp),
    );
    let t = |ms: u64| Instant::from_ps(ms * 1_000_000_000);
    // h0 and h1 are learned from their own traffic (first come): h0's frame is
    // flooded (h1 unknown yet), h1's then goes to h0 alone.
    assert_eq!(
        roce_in(&mut sw, t(0), 0, &send_from(ip(0), ip(1), 1)).len(),
        3
    );
    assert_eq!(
        roce_in(&mut sw, t(0), 1, &send_from(ip(1), ip(0), 1)).len(),
        1
    );
    // A stranger on port 3 cannot take h1's address while h1 is fresh.
    assert!(roce_in(&mut sw, t(500), 3, &send_from(ip(1), ip(0), 2)).is_empty());
    assert_eq!(sw.stats().host_move_refused, 1);
    assert_eq!(sw.stats().source_guard_drops, 1);
    // h1 keeps it fresh (seen at 900 ms: bound until 1900 ms) ...
    roce_in(&mut sw, t(900), 1, &send_from(ip(1), ip(0), 3));
    assert!(roce_in(&mut sw, t(1800), 3, &send_from(ip(1), ip(0), 4)).is_empty());
    assert_eq!(sw.stats().source_guard_drops, 2);
    // ... then goes quiet: aged out, the address may be bound anew (h1 moved).
    assert!(sw.poll_timeout().is_some(), "a sweep is due");
    sw.handle_timeout(t(1899));
    assert_eq!(sw.stats().host_expired, 1, "h0, quiet since 0 ms");
    sw.handle_timeout(t(3000));
    assert_eq!(sw.stats().host_expired, 2);
    roce_in(&mut sw, t(3000), 3, &send_from(ip(1), ip(0), 5));
    assert_eq!(sw.stats().source_guard_drops, 2, "bound anew, not dropped");
    assert_eq!(sw.hosts().find(|(a, _)| *a == ip(1)).unwrap().1.port, 3);
}

#[test]
fn host_and_mac_floods_from_one_port_stop_at_its_caps_and_are_counted() {
    let mut sw = FrameSwitch::new(
        FrameSwitchConfig {
            max_hosts_per_port: 4,
            max_macs_per_port: 8,
            max_igmp_per_port: 3,
            ..FrameSwitchConfig::new(4)
        },
        Box::new(ForwardAllCnp),
    );
    sw.add_host(ip(0), 0, mac(0)).unwrap();
    let before = sw.memory_bytes();
    for k in 0..1000u32 {
        let src = Ipv4Address::from_u32(0x0a80_0000 + k);
        let m = EthernetAddress([2, 0x55, 0, (k >> 8) as u8, k as u8, 1]);
        let r = send_from(src, ip(0), k);
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b);
        sw.handle_frame(now(), 3, &frame(m, mac(0), EtherType::Ipv4, &b));
        while sw.poll_transmit(now(), &mut [0u8; 2048]).is_some() {}
    }
    assert_eq!(sw.hosts().filter(|(_, h)| h.port == 3).count(), 4);
    assert_eq!(
        sw.learned_macs(),
        1 + 8,
        "h0's pinned MAC and port 3's eight"
    );
    assert_eq!(sw.stats().host_table_full, 996);
    assert_eq!(sw.stats().mac_table_full, 992);
    assert_eq!(sw.stats().source_guard_drops, 996, "unbound sources' RoCE");
    assert_eq!(
        sw.memory_bytes() - before,
        4 * HOST_ENTRY_BYTES + 8 * MAC_ENTRY_BYTES
    );
    // The other ports still learn.
    roce_in(&mut sw, now(), 1, &send_from(ip(1), ip(0), 1));
    assert!(sw.hosts().any(|(a, h)| a == ip(1) && h.port == 1));
}

#[test]
fn data_to_a_group_from_other_than_its_registered_source_is_a_counted_drop() {
    let mut sw = switch(4);
    register(&mut sw);
    assert_eq!(sw.group_source(MCST), Some((ip(0), 0)));
    // h2, a member, sends data to the group from its own address: refused, and the
    // source stays h0's.
    assert!(roce_in(&mut sw, now(), 2, &send_from(ip(2), MCST, 9)).is_empty());
    assert_eq!(sw.stats().group_source_drops, 1);
    assert_eq!(sw.cepheus().stats.source_switches, 0);
    assert_eq!(sw.cepheus().group(MCST).unwrap().ack_out_port, Some(0));
    // Feedback from a member is not data: aggregated as before.
    let out = roce_in(&mut sw, now(), 0, &send_only(0));
    assert_eq!(out.len(), 3, "h0's data replicated to h1..h3");
    roce_in(&mut sw, now(), 2, &ack(2, 0));
    assert_eq!(sw.cepheus().stats.acks_in, 1);
    assert_eq!(sw.stats().group_source_drops, 1);
}

#[test]
fn a_new_incarnations_registration_resets_the_groups_ack_state_and_a_refresh_keeps_it() {
    let mut sw = switch(4);
    register(&mut sw);
    roce_in(&mut sw, now(), 0, &send_only(5));
    for p in 1..4 {
        roce_in(&mut sw, now(), p, &ack(p, 5));
    }
    let acked = |sw: &FrameSwitch| {
        let g = sw.cepheus().group(MCST).unwrap();
        g.entries().iter().filter(|e| e.ack_psn.is_some()).count()
    };
    assert_eq!(acked(&sw), 3);
    // A refresh (what a running leader sends) keeps the positions.
    mrp_from(&mut sw, now(), 0, &registration_body());
    assert_eq!(acked(&sw), 3);
    assert_eq!(sw.stats().mrp_new_incarnations, 0);
    // The restarted leader's first registration is a new incarnation: fresh state,
    // so its data from PSN 0 is not filtered as already acknowledged.
    let mut m = spec().mrp_packets().remove(0);
    m.new_incarnation = true;
    let mut body = vec![0u8; m.buffer_len()];
    m.emit(&mut body);
    mrp_from(&mut sw, now(), 0, &body);
    assert_eq!(sw.stats().mrp_new_incarnations, 1);
    assert_eq!(acked(&sw), 0);
    assert_eq!(sw.cepheus().group(MCST).unwrap().agg_ack_psn, None);
    assert_eq!(roce_in(&mut sw, now(), 0, &send_only(0)).len(), 3);
}

#[test]
fn a_new_incarnation_replaces_the_tree_so_a_member_it_no_longer_lists_holds_nothing_back() {
    let mut sw = switch(4);
    register(&mut sw);
    assert_eq!(sw.group_members(MCST).len(), 4, "h0..h3");
    // The restarted leader has h1 only.
    let member = |p: u16| MrpMember {
        ip: ip(p),
        qpn: qpn(p) + 0x1000,
        region: None,
    };
    let space = GroupAddressSpace::parse("10.77.0.128/25").unwrap();
    let spec = GroupSpec::in_space(space, MCST, member(0), vec![member(1)]).unwrap();
    let mut m = spec.mrp_packets().remove(0);
    m.new_incarnation = true;
    let mut body = vec![0u8; m.buffer_len()];
    m.emit(&mut body);
    mrp_from(&mut sw, now(), 0, &body);
    let members: Vec<(u16, u32)> = sw
        .group_members(MCST)
        .iter()
        .map(|&(p, _, q)| (p, q))
        .collect();
    assert_eq!(members, vec![(0, qpn(0) + 0x1000), (1, qpn(1) + 0x1000)]);
    // h1's ACK alone now completes the aggregate.
    roce_in(&mut sw, now(), 0, &send_only(0));
    let out = roce_in(&mut sw, now(), 1, &ack(1, 0));
    assert_eq!(out.len(), 1, "the aggregated ACK toward h0");
    assert_eq!(out[0].port, 0);
    // From another port a new incarnation is still a conflict: nothing replaced.
    mrp_from(&mut sw, now(), 2, &body);
    assert_eq!(sw.group_members(MCST).len(), 2);
    assert_eq!(sw.group_source(MCST), Some((ip(0), 0)));
}
