use super::*;
use crate::plan::prefix::{exact_cover, id_bits, PrefixLayout};
use crate::plan::topology::{TierSpec, Topology};
use crate::time::Duration;
use proptest::prelude::*;

const G: Ipv4Address = Ipv4Address([239, 77, 0, 1]);

/// A shim for pod 0, plane 0 (the frame pipeline's PEEL tests use it too).
pub(crate) fn shim(len: u8, value: u16, flags: u8) -> PeelHeader {
    PeelHeader {
        flags,
        prefix_len: len,
        pod: 0,
        prefix_value: value,
        plane: 0,
    }
}

/// An 8-rack pod: rack i behind port 10 + i.
fn prefix_switch() -> PeelSwitch {
    let ports: Vec<u16> = (10..18).collect();
    PeelSwitch::new(PeelRole::Prefix {
        pod: 0,
        plane: 0,
        rules: PrefixRules::for_racks(&ports),
    })
}

#[test]
fn for_racks_holds_k_minus_one_rules_and_the_papers_blocks() {
    let r = PrefixRules::for_racks(&(10..18).collect::<Vec<u16>>());
    assert_eq!(r.len(), 15, "2^(3+1) - 1 blocks of a 3-bit space");
    assert_eq!(
        r.lookup(Prefix { value: 0b1, len: 1 }),
        Some(&[14u16, 15, 16, 17][..]),
        "1** = racks 100..111"
    );
    assert_eq!(
        r.lookup(Prefix {
            value: 0b01,
            len: 2
        }),
        Some(&[12u16, 13][..])
    );
    assert_eq!(r.lookup(Prefix { value: 0, len: 0 }).unwrap().len(), 8);
    assert_eq!(
        r.lookup(Prefix {
            value: 0b101,
            len: 3
        }),
        Some(&[15u16][..])
    );
    assert_eq!(r.lookup(Prefix { value: 0, len: 4 }), None);
    assert_eq!(r.memory_bytes(), 15 * 8 + 4 * 8 * 2);
    // A pod of 3 racks: blocks that hold no existing rack are not installed.
    let r3 = PrefixRules::for_racks(&[1, 2, 3]);
    assert_eq!(
        r3.lookup(Prefix {
            value: 0b11,
            len: 2
        }),
        None
    );
    assert_eq!(r3.lookup(Prefix { value: 0b1, len: 1 }), Some(&[3u16][..]));
}

#[test]
fn for_racks_is_the_layouts_table_on_a_fat_tree() {
    let tier = TierSpec::new(100_000_000_000, Duration::from_ns(1000));
    let t = Topology::fat_tree(8, 1, tier, tier, tier).unwrap();
    let l = PrefixLayout::from_topology(&t).unwrap();
    let plane = l.pods[2].planes[1];
    let from_layout = PrefixRules::from_rules(l.rules(&t, plane));
    let rack_ports: Vec<u16> = l.pods[2]
        .racks
        .iter()
        .map(|&r| t.ports(plane).iter().position(|&(_, m)| m == r).unwrap() as u16)
        .collect();
    assert_eq!(PrefixRules::for_racks(&rack_ports), from_layout);
}

#[test]
fn the_papers_example_reaches_exactly_its_racks() {
    // Racks 010..111: covers 1** and 01*.
    let members = [2u32, 3, 4, 5, 6, 7];
    let mut sw = prefix_switch();
    let mut reached = Vec::new();
    for p in exact_cover(&members, 8, id_bits(8)) {
        let mut out = Vec::new();
        handle(&mut sw, 0, G, &shim(p.len, p.value as u16, 0), &mut out);
        reached.extend(out);
    }
    let want: Vec<PeelAction> = (12..18).map(PeelAction::Forward).collect();
    let mut got = reached.clone();
    got.sort_by_key(|a| match a {
        PeelAction::Forward(p) | PeelAction::Deliver(p) => *p,
    });
    assert_eq!(got, want);
    assert_eq!(sw.stats.forwarded, 6);
    assert_eq!(sw.stats.packets, 2);
}

#[test]
fn prefix_tier_drops_unknown_rules_and_misrouted_copies_and_never_hairpins() {
    let mut sw = prefix_switch();
    let mut out = Vec::new();
    handle(&mut sw, 0, G, &shim(4, 0, 0), &mut out);
    assert!(out.is_empty());
    assert_eq!(sw.stats.no_rule, 1);
    let mut other_pod = shim(1, 1, 0);
    other_pod.pod = 3;
    handle(&mut sw, 0, G, &other_pod, &mut out);
    let mut other_plane = shim(1, 1, 0);
    other_plane.plane = 1;
    handle(&mut sw, 0, G, &other_plane, &mut out);
    assert!(out.is_empty());
    assert_eq!(sw.stats.misrouted, 2);
    // Arriving from rack 5's port, a 1** copy is not sent back there.
    handle(&mut sw, 15, G, &shim(1, 1, 0), &mut out);
    assert_eq!(
        out,
        vec![
            PeelAction::Forward(14),
            PeelAction::Forward(16),
            PeelAction::Forward(17)
        ]
    );
}

/// A ToR with hosts on ports 0..3 and its plane-0 uplink on port 4.
fn rack_switch() -> PeelSwitch {
    let mut sw = PeelSwitch::new(PeelRole::Rack { uplinks: vec![4] });
    sw.add_member(G, 1);
    sw.add_member(G, 2);
    sw
}

#[test]
fn rack_tier_from_a_host_climbs_and_serves_the_source_rack_once() {
    let mut sw = rack_switch();
    let mut out = Vec::new();
    handle(
        &mut sw,
        1,
        G,
        &shim(1, 1, PeelHeader::SOURCE_RACK),
        &mut out,
    );
    assert_eq!(out, vec![PeelAction::Forward(4), PeelAction::Deliver(2)]);
    out.clear();
    // The sender's second packet of the cover: up only.
    handle(&mut sw, 1, G, &shim(2, 0, 0), &mut out);
    assert_eq!(out, vec![PeelAction::Forward(4)]);
    out.clear();
    // A plane without an uplink.
    let mut s = shim(1, 1, 0);
    s.plane = 2;
    handle(&mut sw, 0, G, &s, &mut out);
    assert!(out.is_empty());
    assert_eq!(sw.stats.no_uplink, 1);
}

#[test]
fn rack_tier_from_above_delivers_to_members_or_discards_when_over_covered() {
    let mut sw = rack_switch();
    let mut out = Vec::new();
    handle(&mut sw, 4, G, &shim(0, 0, 0), &mut out);
    assert_eq!(out, vec![PeelAction::Deliver(1), PeelAction::Deliver(2)]);
    out.clear();
    let other = Ipv4Address([239, 77, 0, 2]);
    handle(
        &mut sw,
        4,
        other,
        &shim(0, 0, PeelHeader::OVER_COVERED),
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(sw.stats.over_covered, 1);
    assert!(sw.remove_member(G, 1));
    assert!(sw.remove_member(G, 2));
    assert!(!sw.remove_member(G, 2));
    handle(&mut sw, 4, G, &shim(0, 0, 0), &mut out);
    assert!(out.is_empty());
    assert_eq!(sw.stats.over_covered, 2);
    assert_eq!(sw.groups().count(), 0);
}

proptest! {
    /// Any header at any port: no panic, and every copy goes to a port of the switch
    /// other than the arrival port.
    #[test]
    fn any_header_is_handled(flags in 0u8..8, len in 0u8..17, value in any::<u16>(),
                             pod in 0u16..3, plane in 0u16..3, in_port in 0u16..20,
                             rack in any::<bool>()) {
        let mut sw = if rack { rack_switch() } else { prefix_switch() };
        let h = PeelHeader { flags, prefix_len: len, pod, prefix_value: value, plane };
        let mut out = Vec::new();
        handle(&mut sw, in_port, G, &h, &mut out);
        for a in out {
            let p = match a { PeelAction::Forward(p) | PeelAction::Deliver(p) => p };
            prop_assert!(p != in_port);
            prop_assert!(p < 18);
        }
    }
}

/// One packet through `sw`: the copies it decides, in order.
fn handle(
    sw: &mut PeelSwitch,
    in_port: u16,
    group: Ipv4Address,
    shim: &PeelHeader,
    out: &mut Vec<PeelAction>,
) {
    sw.handle_packet(in_port, group, shim);
    out.extend(std::iter::from_fn(|| sw.poll_transmit()));
}
