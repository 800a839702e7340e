//! `switch`: the one switch pipeline, sans-IO, that the simulator's switches and the
//! real-time daemon (`rocast switch`) both drive (ARCHITECTURE.md, "Where the house is
//! going"). It composes `fabric`'s parts — ECMP, the shared-buffer MMU with PFC, ECN
//! RED, the Cepheus engine (MFT, bridging, feedback aggregation, CNP filters) — with
//! the switch's side of MRP, and owns the decisions a switch makes about a packet from
//! ingress to egress:
//!
//! - [`frame`]: ingress on Ethernet frames — parsing and ICRC check, L2 learning and
//!   flooding, proxy ARP for group addresses, IPv4 forwarding by the host table, MRP to
//!   the agent, RoCE to a group into the Cepheus engine (Cepheus §III-B/§III-D), each
//!   replica bridged and re-emitted with a fresh ICRC.
//! - [`igmp_snooping`]: which ports joined which IPv4 multicast group, from IGMP
//!   reports (RFC 4541), for plain IP and RoCE UD multicast outside Cepheus groups.
//! - [`pipeline`]: the decisions every driver makes first — which engine takes a packet
//!   (PEEL, IGMP, MRP, Cepheus, IP multicast, unicast), which MRP message it carries,
//!   and the unicast forwarding plug ([`pipeline::unicast_port`] over a
//!   [`mrp_agent::UnicastTable`]: a host table, or routes with ECMP).
//! - [`mrp_agent`]: MRP at a switch (Cepheus §III-C steps 2–3): members routed through
//!   the unicast table, ports reused or load-balanced, MFT entries filled, and the MRP
//!   packets for the next hops.
//! - [`egress`]: per (port, class) queues admitted by the MMU, PFC pause/resume
//!   signals, RED marking at dequeue, control class first.
//! - [`two_tier`]: the two-tier PEEL fabric (ToRs under one aggregation switch, PEEL
//!   §3.2) described once, so the namespace lab and the simulator's byte-level fabric
//!   set up the same switches.
//! - [`mark_ce`]: the CE mark on a frame's bytes (what RED's decision does to a real
//!   frame; the simulator sets a bit in its packet record instead).
//!
//! The simulator keeps only links, time and its compact packet record: its switches
//! call [`pipeline`] to classify and route every packet (the fabric's routes as the
//! forwarding plug), [`egress::EgressQueues`] for every queueing decision,
//! [`mrp_agent`] for MRP, the same [`PeelSwitch`](crate::fabric::peel::PeelSwitch)
//! roles for PEEL's prefix and rack tiers, and the same
//! [`CepheusSwitch`](crate::fabric::cepheus::CepheusSwitch) the frame pipeline holds, on a [`RoceRepr`](crate::wire::RoceRepr) built from its record
//! instead of parsed bytes (it skips the byte-level work — parse, ICRC, emit — that its
//! record makes moot; the decisions are the same calls).
//!
//! Dependencies point one way: `switch` imports `fabric`, `control` (the report types
//! of registration), `plan` and `wire`; none of those import `switch`.
//!
//! Every state machine in the core has one shape (see the crate docs): `handle_*(now,
//! …)` to feed input, `handle_timeout(now)`, `poll_transmit(now, buf)`,
//! `poll_timeout()`, `poll_event()`. A switch is the stateless-in-time exception: it
//! holds no timers (the CNP filters age by the `now` of the next packet), so it is
//! driven by `handle_frame(now, port, frame)` and `poll_transmit(now, buf)` alone.

pub mod egress;
pub mod fast_path;
pub mod frame;
pub mod igmp_snooping;
pub mod mrp_agent;
pub mod pipeline;
pub mod two_tier;

pub use egress::{Departure, EgressConfig, EgressQueues, Ingress};
pub use frame::{
    FrameSwitch, FrameSwitchConfig, FrameSwitchError, FrameSwitchStats, HostEntry, OutFrame,
};

use crate::wire::{Ecn, EtherType, EthernetFrame, Ipv4Packet, ETHERNET_HEADER_LEN};

/// Sets CE on an ECN-capable IPv4 frame; false (and the frame untouched) if it is not
/// one. The ICRC masks the TOS byte, so only the IPv4 header checksum changes.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
        return false;
    };
    if eth.ethertype() != EtherType::Ipv4 {
        return false;
    }
    let Ok(mut ip) = Ipv4Packet::new_checked(&mut frame[ETHERNET_HEADER_LEN..]) else {
        return false;
    };
    if ip.ecn() == Ecn::NotEct {
        return false;
    }
    ip.set_ecn(Ecn::Ce);
    ip.fill_checksum();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EthernetAddress, EthernetRepr, Ipv4Address, Ipv4Repr, IPV4_HEADER_LEN};

    fn frame(ecn: Ecn) -> Vec<u8> {
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 8];
        EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        Ipv4Repr {
            src_addr: Ipv4Address([10, 0, 0, 1]),
            dst_addr: Ipv4Address([10, 0, 0, 2]),
            dscp: 26,
            ecn,
            ident: 7,
            dont_frag: true,
            ttl: 64,
            protocol: crate::wire::IP_PROTO_UDP,
            payload_len: 8,
        }
        .emit(&mut f[ETHERNET_HEADER_LEN..]);
        f
    }

    #[test]
    fn mark_ce_marks_ect_only_and_keeps_the_checksum_valid() {
        let mut f = frame(Ecn::Ect0);
        assert!(mark_ce(&mut f));
        let ip = Ipv4Packet::new_checked(&f[ETHERNET_HEADER_LEN..]).unwrap();
        assert_eq!(ip.ecn(), Ecn::Ce);
        assert!(ip.verify_checksum());
        let mut g = frame(Ecn::NotEct);
        let before = g.clone();
        assert!(!mark_ce(&mut g));
        assert_eq!(g, before);
        // Not IPv4, or too short: untouched.
        let mut short = before[..20].to_vec();
        assert!(!mark_ce(&mut short));
    }
}
