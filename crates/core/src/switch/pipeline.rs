//! The decisions every rocast switch makes about a packet before any engine sees it,
//! written once: which engine a packet goes to ([`classify`], the order of the
//! [`FrameSwitch`](super::FrameSwitch) docs' steps 3–7), which MRP message it carries
//! ([`MrpMessage::parse`], Cepheus §III-C plus rocast's prune, release and allocation),
//! and which port a unicast packet leaves by ([`unicast_port`]: the forwarding plug,
//! ECMP among equal-cost ports).
//!
//! Two drivers call these: `FrameSwitch` on parsed frames (`rocast switch`, the
//! byte-level fabric) and the simulator's packet-record engine on its records. Each
//! supplies a [`PacketHeadline`] — the few fields the decision reads — and a
//! [`UnicastTable`]: the frame switch its learned and pinned host table (one port per
//! host), the simulator the fabric's routes (every equal-cost port). Each then hands
//! the packet to the same engines: [`CepheusSwitch`](crate::fabric::cepheus::CepheusSwitch)
//! for RoCE to a group, [`PeelSwitch`](crate::fabric::peel::PeelSwitch) for a PEEL
//! shim, the [`mrp_agent`](super::mrp_agent) for MRP.
//!
//! Nothing here holds state; memory is the caller's.

use super::mrp_agent::{UnicastRoute, UnicastTable};
use crate::fabric::cepheus::GroupAddressSpace;
use crate::wire::igmp::IP_PROTO_IGMP;
use crate::wire::mrp::{MrpAllocate, MrpPrune, MrpRelease, MrpRepr, MRP_UDP_PORT};
use crate::wire::peel::PEEL_UDP_PORT;
use crate::wire::{Ipv4Address, IP_PROTO_UDP, ROCEV2_UDP_PORT};

/// The fields of an IPv4 packet that decide which engine takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHeadline {
    pub dst: Ipv4Address,
    pub protocol: u8,
    /// The UDP destination port, when the packet is UDP with a readable header.
    pub udp_dst_port: Option<u16>,
}

/// Which engine an IPv4 packet goes to, in the order a switch asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketClass {
    /// A PEEL shim (UDP 4793) at a switch with a PEEL role (PEEL §3.2–3.3).
    Peel,
    /// IGMP: snooped (RFC 4541).
    Igmp,
    /// MRP to a group address (Cepheus §III-C).
    Mrp,
    /// RoCE to a group address: the Cepheus engine (§III-B/§III-D).
    GroupRoce,
    /// Anything else to a group address: only RoCE and MRP are carried to groups.
    GroupOther,
    /// IPv4 multicast outside the group space (plain IP, RoCE UD multicast).
    IpMulticast,
    /// Unicast: the forwarding plug decides.
    Unicast,
}

/// Which engine takes `h`, at a switch whose McstIDs are `groups` and which runs PEEL
/// when `peel` (a switch without a PEEL role treats a shim as any other packet).
pub fn classify(h: &PacketHeadline, groups: &GroupAddressSpace, peel: bool) -> PacketClass {
    let udp = if h.protocol == IP_PROTO_UDP {
        h.udp_dst_port
    } else {
        None
    };
    if peel && udp == Some(PEEL_UDP_PORT) {
        return PacketClass::Peel;
    }
    if h.protocol == IP_PROTO_IGMP {
        return PacketClass::Igmp;
    }
    if groups.contains(h.dst) {
        return match udp {
            Some(MRP_UDP_PORT) => PacketClass::Mrp,
            Some(ROCEV2_UDP_PORT) => PacketClass::GroupRoce,
            _ => PacketClass::GroupOther,
        };
    }
    if h.dst.is_multicast() {
        return PacketClass::IpMulticast;
    }
    PacketClass::Unicast
}

/// Where a unicast packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnicastDecision {
    Port(u16),
    /// The route leads back out of the arrival port: dropped (a loop, or a host
    /// talking to itself through the switch).
    Hairpin,
    /// No route to the destination.
    Unroutable,
}

/// The port a unicast packet to `dst`, arrived on `in_port`, leaves by: the attached
/// host's port, or one of the equal-cost ports chosen by `flow_hash` (ECMP: the same
/// flow always takes the same port, so a flow's packets stay in order).
#[inline]
pub fn unicast_port(
    table: &dyn UnicastTable,
    dst: Ipv4Address,
    flow_hash: u32,
    in_port: u16,
) -> UnicastDecision {
    let port = match table.route(dst) {
        UnicastRoute::Attached(p) => p,
        UnicastRoute::Via([]) | UnicastRoute::Unknown => return UnicastDecision::Unroutable,
        UnicastRoute::Via(ports) => ports[flow_hash as usize % ports.len()],
    };
    if port == in_port {
        UnicastDecision::Hairpin
    } else {
        UnicastDecision::Port(port)
    }
}

/// The MRP messages a switch takes, parsed in the one order both drivers use (each
/// type's flags tell it apart; the order settles what a malformed mix would be).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MrpMessage {
    /// A request for a group address (rocast's allocation service).
    Allocate(MrpAllocate),
    /// Evicted members' paths off the tree.
    Prune(MrpPrune),
    /// The group's table freed.
    Release(MrpRelease),
    /// A registration (or a leader's refresh).
    Register(MrpRepr),
}

impl MrpMessage {
    /// `None` if the payload is no MRP message this switch understands.
    pub fn parse(payload: &[u8]) -> Option<Self> {
        if let Ok(a) = MrpAllocate::parse(payload) {
            return Some(MrpMessage::Allocate(a));
        }
        if let Ok(p) = MrpPrune::parse(payload) {
            return Some(MrpMessage::Prune(p));
        }
        if let Ok(r) = MrpRelease::parse(payload) {
            return Some(MrpMessage::Release(r));
        }
        MrpRepr::parse(payload).ok().map(MrpMessage::Register)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Table;
    const ECMP: [u16; 3] = [4, 5, 6];
    impl UnicastTable for Table {
        fn route(&self, ip: Ipv4Address) -> UnicastRoute<'_> {
            match ip.0[3] {
                1 => UnicastRoute::Attached(1),
                2 => UnicastRoute::Via(&ECMP),
                3 => UnicastRoute::Via(&[]),
                _ => UnicastRoute::Unknown,
            }
        }
    }

    fn ip(last: u8) -> Ipv4Address {
        Ipv4Address([10, 0, 0, last])
    }

    #[test]
    fn unicast_goes_to_the_attached_port_or_spreads_flows_over_equal_cost_ports() {
        assert_eq!(unicast_port(&Table, ip(1), 99, 0), UnicastDecision::Port(1));
        assert_eq!(unicast_port(&Table, ip(1), 99, 1), UnicastDecision::Hairpin);
        let ports: Vec<_> = (0..6).map(|h| unicast_port(&Table, ip(2), h, 0)).collect();
        assert_eq!(
            ports,
            [4, 5, 6, 4, 5, 6].map(UnicastDecision::Port).to_vec(),
            "hash modulo the equal-cost set"
        );
        assert_eq!(unicast_port(&Table, ip(2), 1, 5), UnicastDecision::Hairpin);
        assert_eq!(
            unicast_port(&Table, ip(3), 0, 0),
            UnicastDecision::Unroutable
        );
        assert_eq!(
            unicast_port(&Table, ip(9), 0, 0),
            UnicastDecision::Unroutable
        );
    }

    #[test]
    fn the_class_follows_the_switch_step_order() {
        let groups = GroupAddressSpace::new(Ipv4Address([239, 1, 0, 0]), 16).unwrap();
        let h = |dst: [u8; 4], protocol, port| PacketHeadline {
            dst: Ipv4Address(dst),
            protocol,
            udp_dst_port: port,
        };
        let c = |x: PacketHeadline, peel| classify(&x, &groups, peel);
        let g = [239, 1, 0, 7];
        assert_eq!(
            c(h(g, IP_PROTO_UDP, Some(PEEL_UDP_PORT)), true),
            PacketClass::Peel
        );
        // Without a PEEL role a shim to a group is no RoCE and no MRP.
        assert_eq!(
            c(h(g, IP_PROTO_UDP, Some(PEEL_UDP_PORT)), false),
            PacketClass::GroupOther
        );
        assert_eq!(
            c(h(g, IP_PROTO_UDP, Some(MRP_UDP_PORT)), false),
            PacketClass::Mrp
        );
        assert_eq!(
            c(h(g, IP_PROTO_UDP, Some(ROCEV2_UDP_PORT)), false),
            PacketClass::GroupRoce
        );
        assert_eq!(c(h(g, IP_PROTO_UDP, None), false), PacketClass::GroupOther);
        // A port number means nothing outside UDP.
        assert_eq!(
            c(h(g, 6, Some(ROCEV2_UDP_PORT)), false),
            PacketClass::GroupOther
        );
        assert_eq!(c(h(g, IP_PROTO_IGMP, None), false), PacketClass::Igmp);
        assert_eq!(
            c(h([224, 0, 0, 1], IP_PROTO_IGMP, None), false),
            PacketClass::Igmp
        );
        assert_eq!(
            c(
                h([239, 2, 0, 1], IP_PROTO_UDP, Some(ROCEV2_UDP_PORT)),
                false
            ),
            PacketClass::IpMulticast
        );
        assert_eq!(
            c(h([10, 0, 0, 2], IP_PROTO_UDP, Some(ROCEV2_UDP_PORT)), false),
            PacketClass::Unicast
        );
    }

    #[test]
    fn mrp_messages_parse_in_one_order_and_junk_is_none() {
        assert_eq!(MrpMessage::parse(&[]), None);
        assert_eq!(MrpMessage::parse(&[0xff; 3]), None);
        let rel = MrpRelease {
            mcst_id: Ipv4Address([239, 1, 0, 7]),
        };
        let mut b = [0u8; 8];
        rel.emit(&mut b);
        assert_eq!(MrpMessage::parse(&b), Some(MrpMessage::Release(rel)));
    }
}
