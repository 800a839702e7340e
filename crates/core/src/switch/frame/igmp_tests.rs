//! Frame-by-frame scripts for IGMP snooping in [`FrameSwitch`] (module docs, step 6;
//! RFC 4541): what multicast outside the group space does before and after hosts
//! join, leave, and when the switch is the querier.
//!
//! The stage: a 4-port switch, host h_p (10.77.0.(p+1)) on port p; the group
//! 239.1.1.7.

use super::tests::{ip, mac, CollectFrames};
use super::*;
use crate::fabric::cepheus::ForwardAllCnp;
use crate::wire::igmp::IgmpRepr;

const GROUP: Ipv4Address = Ipv4Address::new(239, 1, 1, 7);

fn at(s: u64) -> Instant {
    Instant::from_ps(s * 1_000_000_000_000 + 1)
}

fn switch(cfg: FrameSwitchConfig) -> FrameSwitch {
    FrameSwitch::new(cfg, Box::new(ForwardAllCnp))
}

/// An Ethernet frame holding an IPv4 packet of `protocol` from h`from` to `dst`.
fn ip_frame(from: u16, dst: Ipv4Address, protocol: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; IPV4_HEADER_LEN + payload.len()];
    Ipv4Repr {
        src_addr: ip(from),
        dst_addr: dst,
        dscp: 0,
        ecn: Ecn::NotEct,
        ident: 0,
        dont_frag: true,
        ttl: 1,
        protocol,
        payload_len: payload.len(),
    }
    .emit(&mut b);
    b[IPV4_HEADER_LEN..].copy_from_slice(payload);
    let m = dst.0;
    let dst_mac = EthernetAddress([1, 0, 0x5e, m[1] & 0x7f, m[2], m[3]]);
    let mut f = vec![0u8; ETHERNET_HEADER_LEN + b.len()];
    EthernetRepr {
        src_addr: mac(from),
        dst_addr: dst_mac,
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[ETHERNET_HEADER_LEN..].copy_from_slice(&b);
    f
}

/// Writes the Internet checksum (RFC 1071) into bytes 2..4.
fn with_checksum(mut m: Vec<u8>) -> Vec<u8> {
    let c = !crate::wire::ones_complement_sum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// The IGMPv3 report Linux sends for a join (CHANGE_TO_EXCLUDE {}) or a leave
/// (CHANGE_TO_INCLUDE {}) of `GROUP`, from h`from`.
fn v3_report(from: u16, join: bool) -> Vec<u8> {
    let g = GROUP.0;
    let kind = if join { 4 } else { 3 };
    let body = with_checksum(vec![
        0x22, 0, 0, 0, 0, 0, 0, 1, kind, 0, 0, 0, g[0], g[1], g[2], g[3],
    ]);
    ip_frame(from, Ipv4Address::new(224, 0, 0, 22), IP_PROTO_IGMP, &body)
}

/// A UD datagram to `dst` from h`from` (the bytes past UDP do not matter here).
fn data(from: u16, dst: Ipv4Address) -> Vec<u8> {
    let b = FrameSwitch::udp_packet(ip(from), dst, ROCEV2_UDP_PORT, &[0x64; 40]);
    ip_frame(from, dst, IP_PROTO_UDP, &b[IPV4_HEADER_LEN..])
}

fn ports(out: &[OutFrame]) -> Vec<u16> {
    out.iter().map(|o| o.port).collect()
}

#[test]
fn a_group_goes_to_its_joined_ports_only_and_unregistered_groups_flood() {
    let mut sw = switch(FrameSwitchConfig::new(4));
    let mut out = Vec::new();
    // Nobody joined: flooded, as before snooping.
    sw.handle_frame_into(at(0), 0, &data(0, GROUP), &mut out);
    assert_eq!(ports(&out), vec![1, 2, 3]);
    assert_eq!(sw.stats().mcast_unregistered, 1);
    // h2 and h3 join; their reports go nowhere (no switch ports, RFC 4541 §2.1.1).
    for p in [2, 3] {
        out.clear();
        sw.handle_frame_into(at(1), p, &v3_report(p, true), &mut out);
        assert!(
            out.is_empty(),
            "a report is not forwarded to hosts: {out:?}"
        );
    }
    assert_eq!(sw.stats().igmp_reports, 2);
    assert_eq!(
        sw.igmp_memberships().collect::<Vec<_>>(),
        vec![(GROUP, 2), (GROUP, 3)]
    );
    // Now h0's datagram reaches exactly h2 and h3, byte for byte.
    out.clear();
    let d = data(0, GROUP);
    sw.handle_frame_into(at(2), 0, &d, &mut out);
    assert_eq!(ports(&out), vec![2, 3]);
    assert!(out.iter().all(|o| o.frame == d));
    assert_eq!(sw.stats().mcast_forwarded, 1);
    // A member sending to the group does not get its own frame back.
    out.clear();
    sw.handle_frame_into(at(2), 2, &data(2, GROUP), &mut out);
    assert_eq!(ports(&out), vec![3]);
    // h3 leaves: only h2 is left.
    out.clear();
    sw.handle_frame_into(at(3), 3, &v3_report(3, false), &mut out);
    sw.handle_frame_into(at(3), 0, &data(0, GROUP), &mut out);
    assert_eq!(ports(&out), vec![2]);
    // Link-local groups are always flooded, members or not.
    out.clear();
    sw.handle_frame_into(
        at(4),
        0,
        &data(0, Ipv4Address::new(224, 0, 0, 251)),
        &mut out,
    );
    assert_eq!(ports(&out), vec![1, 2, 3]);
    // Without a querier a membership stands until the table age (300 s by default)
    // passes without a report: a flood's joins do not stay forever.
    sw.handle_timeout(at(300));
    assert_eq!(sw.igmp_memberships().count(), 1);
    sw.handle_timeout(at(303));
    assert_eq!(sw.igmp_memberships().count(), 0);
    assert_eq!(sw.stats().igmp_expired, 1);
}

#[test]
fn a_malformed_igmp_message_is_a_counted_drop() {
    let mut sw = switch(FrameSwitchConfig::new(4));
    let mut out = Vec::new();
    let mut bad = v3_report(1, true);
    let n = bad.len();
    bad[n - 1] ^= 0xff; // the group address: the checksum no longer holds
    sw.handle_frame_into(at(0), 1, &bad, &mut out);
    let short = ip_frame(1, GROUP, IP_PROTO_IGMP, &[0x16, 0, 0]);
    sw.handle_frame_into(at(0), 1, &short, &mut out);
    assert!(out.is_empty());
    assert_eq!(sw.stats().igmp_malformed, 2);
    assert_eq!(sw.igmp_memberships().count(), 0);
}

#[test]
fn toward_other_switches_reports_go_up_and_a_groups_frames_follow() {
    let mut sw = switch(FrameSwitchConfig {
        switch_ports: vec![3],
        ..FrameSwitchConfig::new(4)
    });
    let mut out = Vec::new();
    let r = v3_report(1, true);
    sw.handle_frame_into(at(0), 1, &r, &mut out);
    assert_eq!(ports(&out), vec![3], "the report goes to the switch port");
    assert_eq!(out[0].frame, r);
    // A frame for the group: to h1 and up to the other switch, whose hosts may want it.
    out.clear();
    sw.handle_frame_into(at(1), 0, &data(0, GROUP), &mut out);
    assert_eq!(ports(&out), vec![1, 3]);
    // Arriving from the other switch: to h1 only.
    out.clear();
    sw.handle_frame_into(at(1), 3, &data(0, GROUP), &mut out);
    assert_eq!(ports(&out), vec![1]);
}

#[test]
fn the_querier_queries_host_ports_and_memberships_age_out() {
    let mut sw = switch(FrameSwitchConfig {
        switch_ports: vec![3],
        igmp_query_interval: Some(Duration::from_ms(125_000)),
        ..FrameSwitchConfig::new(4)
    });
    // The start-up query is due at once.
    assert_eq!(sw.poll_timeout(), Some(Instant::from_ps(0)));
    sw.handle_timeout(at(0));
    let mut buf = vec![0u8; 128];
    let mut queries = Vec::new();
    while let Some(t) = sw.poll_transmit(at(0), &mut buf) {
        queries.push((t.port, buf[..t.len].to_vec()));
    }
    assert_eq!(
        queries.iter().map(|q| q.0).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    for (port, f) in &queries {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.src_addr(), sw.port_mac(*port));
        assert_eq!(eth.dst_addr(), EthernetAddress([1, 0, 0x5e, 0, 0, 1]));
        let ipp = Ipv4Packet::new_checked(&f[ETHERNET_HEADER_LEN..]).unwrap();
        assert!(ipp.verify_checksum());
        assert_eq!((ipp.header_len(), ipp.protocol()), (24, IP_PROTO_IGMP));
        assert_eq!(ipp.dst_addr(), Ipv4Address::new(224, 0, 0, 1));
        assert_eq!(
            IgmpRepr::parse(ipp.payload()),
            Ok(IgmpRepr::Query {
                group: Ipv4Address::UNSPECIFIED
            })
        );
    }
    assert_eq!(sw.stats().igmp_queries_sent, 3);
    assert_eq!(sw.poll_timeout(), Some(at(0) + Duration::from_ms(125_000)));
    // h1 joins at 10 s; its membership lasts 2 x 125 + 10 = 260 s.
    let mut out = Vec::new();
    sw.handle_frame_into(at(10), 1, &v3_report(1, true), &mut out);
    sw.handle_timeout(at(269));
    while sw.poll_transmit(at(269), &mut buf).is_some() {}
    assert_eq!(sw.igmp_memberships().count(), 1);
    sw.handle_timeout(at(270));
    assert_eq!(sw.igmp_memberships().count(), 0);
    assert_eq!(sw.stats().igmp_expired, 1);
}
