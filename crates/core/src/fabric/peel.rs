//! PEEL at one switch (PEEL §3.2–3.3): the decisions a switch makes about a packet
//! that carries the PEEL shim ([`crate::wire::peel`]), on the shim's fields alone.
//! It owns the two kinds of PEEL state a fabric holds, and nothing per packet:
//!
//! - [`PrefixRules`]: the static power-of-two rules of one **prefix-tier** switch
//!   (an aggregation switch of a fat-tree pod, a spine of a leaf–spine): one rule per
//!   (prefix value, prefix length) block of the pod's rack-id space, k − 1 rules for a
//!   k-ary fat-tree, installed once and shared by every group ("deploy once, touch
//!   never", §3.2). A rule's ports are the block's racks. The simulator
//!   (`rocast_sim`'s `StaticPrefixRules`) and the frame pipeline
//!   (`switch::FrameSwitch`) look up this one table.
//! - [`PeelSwitch`] with [`PeelRole::Rack`]: a **rack-tier** switch (ToR). Its only
//!   per-group state is the group's member ports, what a commodity ToR keeps by IGMP
//!   snooping (here filled by configuration: [`PeelSwitch::add_member`]). A copy from
//!   a host climbs to the uplink of the shim's plane and, when it carries
//!   `SOURCE_RACK`, also goes to the rack's other members (the source's rack is served
//!   on the way up, §3.2, and never by a prefix). A copy from above goes to the
//!   members with the shim stripped ([`PeelAction::Deliver`]); a rack with no member
//!   is one the cover over-covers, and discards and counts the copy (§3.3, "redundant
//!   packets that the ToRs later discard").
//!
//! Every decision is a [`PeelAction`], in the core's shape: `handle_packet` in,
//! `poll_transmit` out; the byte work (keeping or stripping the shim)
//! is the pipeline's. A copy never leaves by the port it arrived on. Nothing here
//! panics on any header: an unknown prefix, pod, plane or uplink is a counted drop
//! ([`PeelStats`]).
//!
//! Memory: a prefix-tier switch holds 8 bytes per rule plus 2 per port in it — for a
//! pod of 32 racks (k = 64), 63 rules and 192 ports, 888 bytes, for every group at
//! once; a rack switch holds 8 bytes per group plus 2 per member port.

use crate::plan::prefix::{static_rules, Prefix};
use crate::wire::peel::PeelHeader;
use crate::wire::Ipv4Address;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The static prefix rules of one prefix-tier switch: per (length, value), the ports
/// toward the block's racks (a TCAM's ternary match on the shim's value under the
/// length's mask).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefixRules {
    rules: BTreeMap<(u8, u32), Vec<u16>>,
}

impl PrefixRules {
    /// The rules for a pod whose rack id `i` is behind port `rack_ports[i]`: every
    /// power-of-two block of `⌈log2 racks⌉`-bit ids that holds an existing rack.
    pub fn for_racks(rack_ports: &[u16]) -> Self {
        let racks = rack_ports.len() as u32;
        let bits = crate::plan::prefix::id_bits(racks);
        let rules = static_rules(racks)
            .into_iter()
            .map(|p| {
                let first = p.first(bits) as usize;
                let end = (first + p.size(bits) as usize).min(rack_ports.len());
                ((p.len, p.value), rack_ports[first..end].to_vec())
            })
            .collect();
        PrefixRules { rules }
    }

    /// Rules given as (block, ports) pairs, e.g. `PrefixLayout::rules` of a planned
    /// topology.
    pub fn from_rules(rules: impl IntoIterator<Item = (Prefix, Vec<u16>)>) -> Self {
        PrefixRules {
            rules: rules
                .into_iter()
                .map(|(p, ports)| ((p.len, p.value), ports))
                .collect(),
        }
    }

    /// The ports of the rule for exactly `prefix`, if the switch holds one.
    pub fn lookup(&self, prefix: Prefix) -> Option<&[u16]> {
        self.rules
            .get(&(prefix.len, prefix.value))
            .map(Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
    /// Every rule, shortest prefixes first.
    pub fn iter(&self) -> impl Iterator<Item = (Prefix, &[u16])> {
        self.rules
            .iter()
            .map(|(&(len, value), ports)| (Prefix { value, len }, ports.as_slice()))
    }

    /// Bytes of the table (see the module docs).
    pub fn memory_bytes(&self) -> usize {
        self.rules.values().map(|p| 8 + 2 * p.len()).sum()
    }
}

/// What a switch is in the PEEL fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeelRole {
    /// One tier above the racks: the `plane`-th prefix-tier switch of pod `pod`.
    Prefix {
        pod: u16,
        plane: u16,
        rules: PrefixRules,
    },
    /// A rack switch (ToR): `uplinks[plane]` is its port toward the pod's plane
    /// `plane`; every other port faces hosts.
    Rack { uplinks: Vec<u16> },
}

/// One copy to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeelAction {
    /// Out of this port with the shim kept (toward another switch).
    Forward(u16),
    /// Out of this port with the shim stripped (to a member host).
    Deliver(u16),
}

/// Counters of a [`PeelSwitch`]; each drop by its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeelStats {
    pub packets: u64,
    /// Copies sent with the shim.
    pub forwarded: u64,
    /// Copies sent to members with the shim stripped.
    pub delivered: u64,
    /// Copies from above at a rack with no member of the group (over-covered).
    pub over_covered: u64,
    /// No rule for the shim's (value, length) at a prefix-tier switch.
    pub no_rule: u64,
    /// The shim names another pod or plane than this prefix-tier switch.
    pub misrouted: u64,
    /// From a host, for a plane this rack switch has no uplink to.
    pub no_uplink: u64,
}

/// PEEL at one switch (see the module docs).
#[derive(Clone, Debug)]
pub struct PeelSwitch {
    role: PeelRole,
    /// Per group: its member ports (rack switches only).
    members: BTreeMap<u32, BTreeSet<u16>>,
    /// Copies decided and not yet polled.
    pending: VecDeque<PeelAction>,
    pub stats: PeelStats,
}

impl PeelSwitch {
    pub fn new(role: PeelRole) -> Self {
        PeelSwitch {
            role,
            members: BTreeMap::new(),
            pending: VecDeque::new(),
            stats: PeelStats::default(),
        }
    }

    pub fn role(&self) -> &PeelRole {
        &self.role
    }

    /// Adds `port` to `group`'s members (what IGMP snooping would learn).
    pub fn add_member(&mut self, group: Ipv4Address, port: u16) {
        self.members.entry(group.to_u32()).or_default().insert(port);
    }

    /// Removes `port` from `group`; true if it was a member.
    pub fn remove_member(&mut self, group: Ipv4Address, port: u16) -> bool {
        let Some(m) = self.members.get_mut(&group.to_u32()) else {
            return false;
        };
        let was = m.remove(&port);
        if m.is_empty() {
            self.members.remove(&group.to_u32());
        }
        was
    }

    /// `group`'s member ports, ascending.
    pub fn members(&self, group: Ipv4Address) -> Vec<u16> {
        self.members
            .get(&group.to_u32())
            .map_or(Vec::new(), |m| m.iter().copied().collect())
    }

    /// Every group with members here.
    pub fn groups(&self) -> impl Iterator<Item = Ipv4Address> + '_ {
        self.members.keys().map(|&g| Ipv4Address::from_u32(g))
    }

    /// Bytes of this switch's PEEL state (see the module docs).
    pub fn memory_bytes(&self) -> usize {
        let rules = match &self.role {
            PeelRole::Prefix { rules, .. } => rules.memory_bytes(),
            PeelRole::Rack { uplinks } => 2 * uplinks.len(),
        };
        rules
            + self
                .members
                .values()
                .map(|m| 8 + 2 * m.len())
                .sum::<usize>()
    }

    /// Decides what a copy of a packet to `group` with shim `shim`, arrived on
    /// `in_port`, becomes; [`Self::poll_transmit`] then yields the copies.
    pub fn handle_packet(&mut self, in_port: u16, group: Ipv4Address, shim: &PeelHeader) {
        self.stats.packets += 1;
        let out = &mut self.pending;
        let before = out.len();
        match &self.role {
            PeelRole::Prefix { pod, plane, rules } => {
                if shim.pod != *pod || shim.plane != *plane {
                    self.stats.misrouted += 1;
                    return;
                }
                let prefix = Prefix {
                    value: u32::from(shim.prefix_value),
                    len: shim.prefix_len,
                };
                match rules.lookup(prefix) {
                    None => self.stats.no_rule += 1,
                    Some(ports) => out.extend(
                        ports
                            .iter()
                            .filter(|&&p| p != in_port)
                            .map(|&p| PeelAction::Forward(p)),
                    ),
                }
            }
            PeelRole::Rack { uplinks } => {
                let members = self.members.get(&group.to_u32());
                let local = || {
                    members
                        .into_iter()
                        .flatten()
                        .filter(|&&p| p != in_port)
                        .map(|&p| PeelAction::Deliver(p))
                };
                if uplinks.contains(&in_port) {
                    // From above: this rack is in the packet's block.
                    out.extend(local());
                    if out.len() == before {
                        self.stats.over_covered += 1;
                    }
                } else {
                    // From a host: climb to the plane, and serve the source's rack.
                    match uplinks.get(shim.plane as usize) {
                        Some(&up) => out.push_back(PeelAction::Forward(up)),
                        None => self.stats.no_uplink += 1,
                    }
                    if shim.flags & PeelHeader::SOURCE_RACK != 0 {
                        out.extend(local());
                    }
                }
            }
        }
        for a in out.iter().skip(before) {
            match a {
                PeelAction::Forward(_) => self.stats.forwarded += 1,
                PeelAction::Deliver(_) => self.stats.delivered += 1,
            }
        }
    }

    /// The next copy decided by [`Self::handle_packet`], in decision order.
    pub fn poll_transmit(&mut self) -> Option<PeelAction> {
        self.pending.pop_front()
    }
}

#[cfg(test)]
pub(crate) mod tests;
