//! The MRP agent of a switch (Cepheus §III-C, steps 2 and 3): it turns an arriving MRP
//! packet into MFT entries and into the MRP packets for the next hops.
//!
//! For each member in the packet:
//! - a member attached to this switch is reached through its own port, and that path
//!   records the member's connection (IP, QPN, and for WRITE groups VA/RKey);
//! - otherwise the unicast table gives the equal-cost ports toward the member; a port
//!   already on the group's tree is reused (replicate as late as possible, saving
//!   bandwidth), else the port used by the fewest groups is chosen (group-level load
//!   balancing; ties go to the lowest port number, so registration is deterministic).
//!
//! Then every chosen port except the one the packet came from gets an MRP packet with
//! only the members behind it. The arrival port becomes the group's source direction.
//! A member whose route leads back out of the arrival port (other than a host attached
//! there — the leader itself, which is listed so that any member can later be the
//! source) would make the tree a loop and is refused.

use crate::control::registration::SwitchRejection;
use crate::fabric::cepheus::{CepheusSwitch, MftError, NextHop};
use crate::plan::multicast_tree::hop_by_hop_port;
use crate::wire::mrp::{MrpMember, MrpRepr};
use crate::wire::Ipv4Address;
use std::collections::BTreeMap;

/// How the unicast forwarding table reaches an address from this switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnicastRoute<'a> {
    /// A host on this port of this switch.
    Attached(u16),
    /// Equal-cost next-hop ports.
    Via(&'a [u16]),
    /// No route.
    Unknown,
}

/// The switch's unicast forwarding table, as the MRP agent needs it.
pub trait UnicastTable {
    fn route(&self, ip: Ipv4Address) -> UnicastRoute<'_>;
}

/// Frees a group's table on an [`MrpRelease`](crate::wire::mrp::MrpRelease) that
/// arrived from the group's source direction (its AckOutPort): returns the ports
/// toward downstream switches, which get the release in turn. A release from any
/// other port, or for a group this switch does not hold, changes nothing (`None`), so
/// a member cannot tear down its leader's group.
pub fn handle_release(sw: &mut CepheusSwitch, in_port: u16, mcst: Ipv4Address) -> Option<Vec<u16>> {
    let g = sw.group(mcst)?;
    if g.ack_out_port != Some(in_port) {
        return None;
    }
    let next: Vec<u16> = g
        .entries()
        .iter()
        .filter(|e| e.port != in_port && matches!(e.next_hop, NextHop::Switch))
        .map(|e| e.port)
        .collect();
    sw.remove_group(mcst);
    Some(next)
}

/// What a prune did at this switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneOutcome {
    /// Member paths of attached hosts taken off the tree here.
    pub removed: usize,
    /// Named members this switch does not reach through the group's tree.
    pub unknown: usize,
    /// The prunes for downstream switches (port, packet), in port order.
    pub next: Vec<(u16, crate::wire::mrp::MrpPrune)>,
}

/// Takes members off a group's tree on an [`MrpPrune`](crate::wire::mrp::MrpPrune)
/// that arrived from the group's source direction: an attached member's path is
/// removed (its IP must be the path's, so a prune cannot cut another host), a member
/// behind a downstream switch is passed on toward it. From any other port, or for a
/// group this switch does not hold, nothing changes (`None`), so a member cannot evict
/// another. A downstream switch keeps its branch toward a subtree that lost all its
/// members (its paths drain no traffic but the copies, which it acknowledges at once,
/// so the upstream aggregate does not wait on it; the group's release or lease frees
/// it).
pub fn handle_prune(
    sw: &mut CepheusSwitch,
    in_port: u16,
    prune: &crate::wire::mrp::MrpPrune,
    table: &dyn UnicastTable,
) -> Option<PruneOutcome> {
    let mcst = prune.mcst_id;
    if sw.group(mcst)?.ack_out_port != Some(in_port) {
        return None;
    }
    let mut out = PruneOutcome::default();
    let mut behind: BTreeMap<u16, Vec<Ipv4Address>> = BTreeMap::new();
    for &ip in &prune.members {
        let g = sw.group(mcst)?;
        match table.route(ip) {
            UnicastRoute::Attached(p)
                if g.entry(p).is_some_and(
                    |e| matches!(e.next_hop, NextHop::Host { ip: h, .. } if h == ip),
                ) =>
            {
                sw.remove_path(mcst, p);
                out.removed += 1;
            }
            UnicastRoute::Via(ports) => match ports.iter().find(|&&p| {
                p != in_port && g.entry(p).is_some_and(|e| e.next_hop == NextHop::Switch)
            }) {
                Some(&p) => behind.entry(p).or_default().push(ip),
                None => out.unknown += 1,
            },
            _ => out.unknown += 1,
        }
    }
    out.next = behind
        .into_iter()
        .map(|(port, members)| {
            (
                port,
                crate::wire::mrp::MrpPrune {
                    mcst_id: mcst,
                    members,
                },
            )
        })
        .collect();
    Some(out)
}

/// Applies one MRP packet that arrived on `in_port` to the switch's tables. Returns
/// the MRP packets for the next hops (port, packet), in port order. On a refusal
/// nothing of this packet is kept: the members are checked before any table changes.
pub fn handle_mrp(
    sw: &mut CepheusSwitch,
    in_port: u16,
    mrp: &MrpRepr,
    table: &dyn UnicastTable,
) -> Result<Vec<(u16, MrpRepr)>, SwitchRejection> {
    let mcst = mrp.mcst_id;
    if in_port >= sw.ports() || mrp.members.is_empty() {
        return Err(SwitchRejection::Malformed);
    }
    if mrp.members.iter().any(|m| m.region.is_some() != mrp.write) {
        return Err(SwitchRejection::Malformed);
    }
    // A group already registered from another direction belongs to another leader:
    // merging would let a squatter's group swallow a real one (or a real leader
    // "succeed" into a stranger's tree). Refused; the leader falls back.
    if sw
        .group(mcst)
        .is_some_and(|g| g.ack_out_port.is_some_and(|p| p != in_port))
    {
        return Err(SwitchRejection::Conflict);
    }
    // First decide every member's port without touching the table.
    enum Choice<'a> {
        Host(u16),
        Via(&'a [u16]),
    }
    let mut choices = Vec::with_capacity(mrp.members.len());
    for m in &mrp.members {
        match table.route(m.ip) {
            UnicastRoute::Attached(p) if p < sw.ports() => choices.push(Choice::Host(p)),
            UnicastRoute::Via(ports)
                if !ports.is_empty()
                    && !ports.contains(&in_port)
                    && ports.iter().all(|&p| p < sw.ports()) =>
            {
                choices.push(Choice::Via(ports))
            }
            UnicastRoute::Via(_) => return Err(SwitchRejection::Conflict),
            _ => return Err(SwitchRejection::NotInTree),
        }
    }
    let map_err = |e: MftError| match e {
        MftError::TableFull(_) => SwitchRejection::TableFull,
        _ => SwitchRejection::Malformed,
    };
    sw.set_path(mcst, in_port, NextHop::Switch, true)
        .map_err(map_err)?;
    let mut behind: BTreeMap<u16, Vec<MrpMember>> = BTreeMap::new();
    for (m, choice) in mrp.members.iter().zip(choices) {
        let port = match choice {
            Choice::Host(p) => {
                let hop = NextHop::Host {
                    ip: m.ip,
                    qpn: m.qpn,
                    region: m.region,
                };
                sw.set_path(mcst, p, hop, false).map_err(map_err)?;
                p
            }
            Choice::Via(ports) => {
                let group = sw.group(mcst);
                let p = hop_by_hop_port(
                    ports,
                    in_port,
                    |p| group.is_some_and(|g| g.entry(p).is_some()),
                    |p| sw.port_load(p),
                )
                .expect("non-empty, without in_port: checked above");
                sw.set_path(mcst, p, NextHop::Switch, false)
                    .map_err(map_err)?;
                p
            }
        };
        if port != in_port {
            behind.entry(port).or_default().push(*m);
        }
    }
    Ok(behind
        .into_iter()
        .map(|(port, members)| {
            (
                port,
                MrpRepr {
                    mcst_id: mcst,
                    seq: mrp.seq,
                    total: mrp.total,
                    write: mrp.write,
                    new_incarnation: mrp.new_incarnation,
                    members,
                },
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::cepheus::ForwardAllCnp;
    use crate::wire::mrp::MRP_MAX_MEMBERS;

    const MCST: Ipv4Address = Ipv4Address::new(239, 1, 0, 1);

    /// A leaf switch: hosts 10.0.0.h on ports 0..4, uplinks 4..8 toward 10.1.x.x.
    struct Leaf;
    const UPLINKS: [u16; 4] = [4, 5, 6, 7];
    impl UnicastTable for Leaf {
        fn route(&self, ip: Ipv4Address) -> UnicastRoute<'_> {
            let o = ip.0;
            match (o[0], o[1]) {
                (10, 0) if o[3] < 4 => UnicastRoute::Attached(o[3] as u16),
                (10, 1) => UnicastRoute::Via(&UPLINKS),
                _ => UnicastRoute::Unknown,
            }
        }
    }

    /// The single MRP packet registering `members` for `mcst`.
    fn one(mcst: Ipv4Address, members: &[MrpMember]) -> MrpRepr {
        MrpRepr::split(mcst, members).unwrap().remove(0)
    }

    fn member(ip: Ipv4Address, qpn: u32) -> MrpMember {
        MrpMember {
            ip,
            qpn,
            region: None,
        }
    }

    #[test]
    fn a_registration_for_a_group_held_from_another_port_is_a_conflict() {
        let mut sw = CepheusSwitch::new(8, 8, Box::new(ForwardAllCnp));
        let squatter = vec![
            member(Ipv4Address::new(10, 0, 0, 3), 0x13),
            member(Ipv4Address::new(10, 0, 0, 1), 0x11),
        ];
        handle_mrp(&mut sw, 3, &one(MCST, &squatter), &Leaf).unwrap();
        let real = vec![
            member(Ipv4Address::new(10, 0, 0, 0), 0x10),
            member(Ipv4Address::new(10, 0, 0, 2), 0x12),
        ];
        assert_eq!(
            handle_mrp(&mut sw, 0, &one(MCST, &real), &Leaf),
            Err(SwitchRejection::Conflict)
        );
        assert!(sw.group(MCST).unwrap().entry(2).is_none(), "nothing merged");
        // The holder's own resend is no conflict.
        assert!(handle_mrp(&mut sw, 3, &one(MCST, &squatter), &Leaf).is_ok());
    }

    #[test]
    fn a_prune_from_the_source_removes_attached_members_and_passes_on_remote_ones() {
        use crate::wire::mrp::MrpPrune;
        let mut sw = CepheusSwitch::new(8, 8, Box::new(ForwardAllCnp));
        let members = vec![
            member(Ipv4Address::new(10, 0, 0, 0), 0x10),
            member(Ipv4Address::new(10, 0, 0, 2), 0x12),
            member(Ipv4Address::new(10, 0, 0, 3), 0x13),
            member(Ipv4Address::new(10, 1, 0, 1), 0x21),
        ];
        handle_mrp(&mut sw, 0, &one(MCST, &members), &Leaf).unwrap();
        let prune = |ips: &[Ipv4Address]| MrpPrune {
            mcst_id: MCST,
            members: ips.to_vec(),
        };
        let victim = Ipv4Address::new(10, 0, 0, 2);
        // Only the source direction may prune.
        assert_eq!(handle_prune(&mut sw, 3, &prune(&[victim]), &Leaf), None);
        assert!(sw.group(MCST).unwrap().entry(2).is_some());
        let out = handle_prune(
            &mut sw,
            0,
            &prune(&[
                victim,
                Ipv4Address::new(10, 1, 0, 1),
                Ipv4Address::new(10, 0, 0, 1),
            ]),
            &Leaf,
        )
        .unwrap();
        assert_eq!(out.removed, 1);
        assert_eq!(out.unknown, 1, "10.0.0.1 is not on the tree");
        assert_eq!(out.next.len(), 1);
        assert_eq!(out.next[0].1.members, vec![Ipv4Address::new(10, 1, 0, 1)]);
        let g = sw.group(MCST).unwrap();
        assert!(g.entry(2).is_none());
        assert!(g.entry(3).is_some(), "the healthy member stays");
        assert_eq!(sw.port_load(2), 0);
        // A prune naming a host on a member's port but with another IP cuts nothing.
        let out =
            handle_prune(&mut sw, 0, &prune(&[Ipv4Address::new(10, 0, 0, 9)]), &Leaf).unwrap();
        assert_eq!((out.removed, out.unknown), (0, 1));
        assert_eq!(
            handle_prune(&mut sw, 0, &prune(&[victim]), &Leaf)
                .unwrap()
                .removed,
            0
        );
    }

    #[test]
    fn members_are_split_by_port_and_attached_hosts_recorded() {
        let mut sw = CepheusSwitch::new(8, 8, Box::new(ForwardAllCnp));
        // The leader (port 0) registers two local members and three remote ones.
        let members = vec![
            member(Ipv4Address::new(10, 0, 0, 0), 0x10),
            member(Ipv4Address::new(10, 0, 0, 2), 0x12),
            member(Ipv4Address::new(10, 0, 0, 3), 0x13),
            member(Ipv4Address::new(10, 1, 0, 1), 0x21),
            member(Ipv4Address::new(10, 1, 5, 1), 0x22),
        ];
        let mrp = one(MCST, &members);
        let out = handle_mrp(&mut sw, 0, &mrp, &Leaf).unwrap();
        let ports: Vec<u16> = out.iter().map(|(p, _)| *p).collect();
        assert_eq!(ports, vec![2, 3, 4], "remote members share one uplink");
        assert_eq!(out[2].1.members.len(), 2);
        let g = sw.group(MCST).unwrap();
        assert_eq!(g.ack_out_port, Some(0));
        assert_eq!(
            g.entry(0).unwrap().next_hop,
            NextHop::Host {
                ip: Ipv4Address::new(10, 0, 0, 0),
                qpn: 0x10,
                region: None
            },
            "the leader's own path records its connection"
        );
        assert_eq!(g.entry(4).unwrap().next_hop, NextHop::Switch);
        assert_eq!(g.entries().len(), 4);
    }

    #[test]
    fn groups_balance_over_uplinks_and_reuse_their_own() {
        let mut sw = CepheusSwitch::new(8, 8, Box::new(ForwardAllCnp));
        let leader = member(Ipv4Address::new(10, 0, 0, 0), 1);
        let mut chosen = Vec::new();
        for g in 0..4u8 {
            let mcst = Ipv4Address::new(239, 1, 0, g);
            let mrp = one(mcst, &[leader, member(Ipv4Address::new(10, 1, 0, 1), 2)]);
            let out = handle_mrp(&mut sw, 0, &mrp, &Leaf).unwrap();
            chosen.push(out[0].0);
            // A second registration packet of the same group reuses its uplink.
            let more = one(mcst, &[member(Ipv4Address::new(10, 1, 9, 1), 3)]);
            assert_eq!(handle_mrp(&mut sw, 0, &more, &Leaf).unwrap()[0].0, out[0].0);
        }
        assert_eq!(chosen, vec![4, 5, 6, 7], "least-used uplink each time");
    }

    #[test]
    fn more_than_183_members_span_packets_and_all_arrive() {
        let mut sw = CepheusSwitch::new(8, 8, Box::new(ForwardAllCnp));
        let mut members = vec![member(Ipv4Address::new(10, 0, 0, 0), 1)];
        for i in 0..400u32 {
            members.push(member(
                Ipv4Address::new(10, 1, (i / 200) as u8, (i % 200) as u8),
                100 + i,
            ));
        }
        let packets = MrpRepr::split(MCST, &members).unwrap();
        assert_eq!(packets.len(), 401usize.div_ceil(MRP_MAX_MEMBERS));
        let mut forwarded = 0;
        for p in &packets {
            let mut buf = vec![0; p.buffer_len()];
            p.emit(&mut buf);
            let parsed = MrpRepr::parse(&buf).unwrap();
            for (port, down) in handle_mrp(&mut sw, 0, &parsed, &Leaf).unwrap() {
                assert_eq!(port, 4, "one uplink for the whole group");
                assert!(down.members.len() <= MRP_MAX_MEMBERS);
                assert_eq!((down.seq, down.total), (parsed.seq, parsed.total));
                forwarded += down.members.len();
            }
        }
        assert_eq!(forwarded, 400);
        assert_eq!(
            sw.group(MCST).unwrap().entries().len(),
            2,
            "bounded by ports"
        );
    }

    #[test]
    fn refusals_leave_no_trace() {
        let mut sw = CepheusSwitch::new(8, 1, Box::new(ForwardAllCnp));
        let ok = one(
            Ipv4Address::new(239, 0, 0, 1),
            &[member(Ipv4Address::new(10, 0, 0, 1), 1)],
        );
        handle_mrp(&mut sw, 0, &ok, &Leaf).unwrap();
        let full = one(
            Ipv4Address::new(239, 0, 0, 2),
            &[member(Ipv4Address::new(10, 0, 0, 1), 1)],
        );
        assert_eq!(
            handle_mrp(&mut sw, 0, &full, &Leaf),
            Err(SwitchRejection::TableFull)
        );
        let unknown = one(MCST, &[member(Ipv4Address::new(192, 168, 0, 1), 1)]);
        assert_eq!(
            handle_mrp(&mut sw, 0, &unknown, &Leaf),
            Err(SwitchRejection::NotInTree)
        );
        // A remote member reached back through the arrival uplink would loop.
        let back = one(MCST, &[member(Ipv4Address::new(10, 1, 0, 1), 1)]);
        assert_eq!(
            handle_mrp(&mut sw, 5, &back, &Leaf),
            Err(SwitchRejection::Conflict)
        );
        assert_eq!(sw.num_groups(), 1);
        assert!(sw.group(MCST).is_none());
    }
}
