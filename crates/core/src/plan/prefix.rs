//! PEEL's static power-of-two prefix state (PEEL §3.2) and the per-group cover sets
//! that use it, with the programmable-core refinement's accounting (§3.3).
//!
//! Every rack (ToR; the leaf above a GPU server's NIC) of a pod gets an id of
//! `bits = ⌈log2(racks per pod)⌉` bits. Every switch one tier above the racks — an
//! aggregation switch of a fat-tree pod, a spine of a leaf–spine (one pod) — holds one
//! static rule per power-of-two block of that id space: 2^(bits+1) − 1 = k − 1 rules for
//! a k-ary fat-tree. A packet carries one (prefix value, prefix length) and the switch
//! replicates it to every rack of that block. A group's destination racks are covered
//! by the outermost complete subtrees of their binary trie ([`exact_cover`]), or, to
//! send fewer packets, by larger blocks whose extra racks discard the copy
//! ([`bounded_cover`]).
//!
//! [`plan_group`] turns a multicast tree (PEEL §2) into the packets a source emits: the
//! tree says which prefix-tier switch (the "plane") serves each destination rack, and
//! the racks of one plane are covered together. Racks the tree reaches without a
//! plane (the source's own rack) are served on the way up and need no packet.
//!
//! Memory: a [`PrefixLayout`] is 8 bytes per rack and prefix-tier switch; a plan is
//! 12 bytes per packet.

use super::multicast_tree::MulticastTree;
use super::topology::{NodeId, NodeRole, Topology};
use std::collections::{BTreeMap, BTreeSet};

/// One power-of-two block of rack ids: the ids whose top `len` bits equal `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    pub value: u32,
    pub len: u8,
}

impl Prefix {
    /// First id of the block in a `bits`-bit space.
    pub fn first(&self, bits: u8) -> u32 {
        self.value << (bits - self.len)
    }
    /// Ids in the block.
    pub fn size(&self, bits: u8) -> u32 {
        1 << (bits - self.len)
    }
    pub fn contains(&self, id: u32, bits: u8) -> bool {
        (id >> (bits - self.len)) == self.value
    }
    /// The paper's notation: `01*` for value 0b01, length 2, in a 3-bit space.
    pub fn render(&self, bits: u8) -> String {
        let mut s: String = (0..self.len)
            .map(|i| {
                if (self.value >> (self.len - 1 - i)) & 1 == 1 {
                    '1'
                } else {
                    '0'
                }
            })
            .collect();
        s.extend(std::iter::repeat_n('*', (bits - self.len) as usize));
        if s.is_empty() {
            s.push('*');
        }
        s
    }
}

/// Bits of a rack id for `racks` racks per pod: ⌈log2 racks⌉.
pub fn id_bits(racks: u32) -> u8 {
    if racks <= 1 {
        0
    } else {
        (32 - (racks - 1).leading_zeros()) as u8
    }
}

/// Header bits for one (value, length) tuple: `bits + ⌈log2(bits + 1)⌉` (§3.2).
pub fn header_bits(bits: u8) -> u32 {
    bits as u32 + id_bits(bits as u32 + 1) as u32
}

/// Entries naive IP multicast may need at one prefix-tier switch: one per non-empty
/// subset of its pod's racks, 2^racks − 1 (saturating at `u128::MAX`).
pub fn naive_entries(racks: u32) -> u128 {
    if racks >= 128 {
        u128::MAX
    } else {
        (1u128 << racks) - 1
    }
}

/// The static rules of a prefix-tier switch over `racks` racks: every power-of-two block
/// holding at least one existing id, shortest prefixes first.
pub fn static_rules(racks: u32) -> Vec<Prefix> {
    let bits = id_bits(racks);
    let mut v = Vec::new();
    for len in 0..=bits {
        for value in 0..(1u32 << len) {
            let p = Prefix { value, len };
            if p.first(bits) < racks {
                v.push(p);
            }
        }
    }
    v
}

/// The fewest prefix blocks that cover exactly the members among the `racks` existing
/// ids of a `bits`-bit space: ids at or above `racks` name no rack, so a block may
/// include them for free (k=6 has 3 racks per pod in a 2-bit space: all three go as one
/// `**` packet, not `0*` and `10`). Top down, each block whose existing ids are all
/// members is taken whole; prefix blocks nest, so the largest such block is never worse
/// than any split of it. Duplicates are ignored.
pub fn exact_cover(members: &[u32], racks: u32, bits: u8) -> Vec<Prefix> {
    let set: BTreeSet<u32> = members.iter().copied().collect();
    let mut out = Vec::new();
    exact_walk(&set, racks, Prefix { value: 0, len: 0 }, bits, &mut out);
    out
}

fn exact_walk(set: &BTreeSet<u32>, racks: u32, p: Prefix, bits: u8, out: &mut Vec<Prefix>) {
    let lo = p.first(bits);
    let hi = lo + p.size(bits);
    let n = set.range(lo..hi).count() as u32;
    if n == 0 {
        return;
    }
    // Members at or above `racks` (a caller's slip) must still be covered: count them
    // as existing so their block is only taken when it holds nothing else.
    let existing =
        hi.min(racks).saturating_sub(lo) + set.range(racks.clamp(lo, hi)..hi).count() as u32;
    if n == existing {
        out.push(p);
        return;
    }
    for half in 0..2 {
        let child = Prefix {
            value: p.value * 2 + half,
            len: p.len + 1,
        };
        exact_walk(set, racks, child, bits, out);
    }
}

/// Covers `members` with at most `max_prefixes` blocks, over-covering as few existing
/// racks (ids below `racks`) as possible and never a `forbidden` id (a rack served by
/// another packet). Ties go to fewer blocks. `None` when no such cover exists.
pub fn bounded_cover(
    members: &[u32],
    forbidden: &[u32],
    racks: u32,
    bits: u8,
    max_prefixes: u32,
) -> Option<Vec<Prefix>> {
    let m: BTreeSet<u32> = members.iter().copied().collect();
    if m.is_empty() {
        return Some(Vec::new());
    }
    let f: BTreeSet<u32> = forbidden.iter().copied().collect();
    let budget = (max_prefixes as usize).min(m.len());
    if budget == 0 {
        return None;
    }
    let table = bounded_walk(&m, &f, racks, Prefix { value: 0, len: 0 }, bits, budget);
    table[budget].clone().map(|(_, v)| v)
}

/// Per budget b (0..=budget): the cheapest cover of the members under `p` with at most
/// b blocks, as (over-covered racks, blocks).
type CoverTable = Vec<Option<(u32, Vec<Prefix>)>>;

fn bounded_walk(
    m: &BTreeSet<u32>,
    f: &BTreeSet<u32>,
    racks: u32,
    p: Prefix,
    bits: u8,
    budget: usize,
) -> CoverTable {
    let lo = p.first(bits);
    let hi = lo + p.size(bits);
    let inside = m.range(lo..hi).count() as u32;
    if inside == 0 {
        return vec![Some((0, Vec::new())); budget + 1];
    }
    let mut best: CoverTable = vec![None; budget + 1];
    if f.range(lo..hi).next().is_none() {
        let existing = hi.min(racks).saturating_sub(lo);
        for slot in best.iter_mut().skip(1) {
            *slot = Some((existing - inside, vec![p]));
        }
    }
    if p.len < bits {
        let child = |half| Prefix {
            value: p.value * 2 + half,
            len: p.len + 1,
        };
        let left = bounded_walk(m, f, racks, child(0), bits, budget);
        let right = bounded_walk(m, f, racks, child(1), bits, budget);
        for b in 0..=budget {
            for bl in 0..=b {
                let (Some((cl, vl)), Some((cr, vr))) = (&left[bl], &right[b - bl]) else {
                    continue;
                };
                let cost = cl + cr;
                let n = vl.len() + vr.len();
                let better = match &best[b] {
                    None => true,
                    Some((c, v)) => (cost, n) < (*c, v.len()),
                };
                if better {
                    let mut v = vl.clone();
                    v.extend_from_slice(vr);
                    best[b] = Some((cost, v));
                }
            }
        }
    }
    best
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("the topology has no switch tier above its racks to hold prefix rules")]
    NoPrefixTier,
    #[error("rack {0} has no prefix-tier neighbour")]
    OrphanRack(NodeId),
    #[error("pod {pod} has {racks} racks: ids need {bits} bits, more than 16")]
    TooManyRacks { pod: usize, racks: usize, bits: u8 },
    #[error("the tree reaches rack {rack} through node {parent}, which holds no prefix rules")]
    NotAPlane { rack: NodeId, parent: NodeId },
}

/// One pod: racks sharing the same prefix-tier switches ("planes").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// Racks in id order: rack id i is `racks[i]`.
    pub racks: Vec<NodeId>,
    /// Prefix-tier switches, ascending; the header's plane field indexes this.
    pub planes: Vec<NodeId>,
    pub bits: u8,
}

/// Where prefix rules live in a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixLayout {
    /// Tier of the racks (0: ToRs holding hosts; 1: leaves above GPU servers' NICs).
    pub rack_tier: u8,
    pub pods: Vec<Pod>,
    /// Rack → (pod, id).
    rack_index: BTreeMap<NodeId, (u32, u32)>,
    /// Plane → pod.
    plane_pod: BTreeMap<NodeId, u32>,
}

fn switch_tier(topo: &Topology, n: NodeId) -> Option<u8> {
    match topo.roles[n as usize] {
        NodeRole::Switch { tier } => Some(tier),
        NodeRole::Host => None,
    }
}

impl PrefixLayout {
    /// Derives pods from the wiring (failed links included: rules are static). Racks
    /// are the hosts' switches, or one tier higher when a host's switch has a single
    /// uplink (a GPU server's NIC).
    pub fn from_topology(topo: &Topology) -> Result<Self, PrefixError> {
        let first_switch = topo.num_hosts() as NodeId;
        let attach = topo
            .ports(0)
            .first()
            .map(|&(_, s)| s)
            .ok_or(PrefixError::NoPrefixTier)?;
        let attach_tier = switch_tier(topo, attach).ok_or(PrefixError::NoPrefixTier)?;
        let uplinks = topo
            .ports(attach)
            .iter()
            .filter(|&&(_, m)| !topo.is_host(m))
            .count();
        let rack_tier = if uplinks == 1 {
            attach_tier + 1
        } else {
            attach_tier
        };
        let mut by_planes: BTreeMap<Vec<NodeId>, Vec<NodeId>> = BTreeMap::new();
        let mut order: Vec<Vec<NodeId>> = Vec::new();
        for n in first_switch..topo.num_nodes() as NodeId {
            if switch_tier(topo, n) != Some(rack_tier) {
                continue;
            }
            let mut planes: Vec<NodeId> = topo
                .ports(n)
                .iter()
                .map(|&(_, m)| m)
                .filter(|&m| switch_tier(topo, m) == Some(rack_tier + 1))
                .collect();
            planes.sort_unstable();
            planes.dedup();
            if planes.is_empty() {
                return Err(PrefixError::OrphanRack(n));
            }
            if !by_planes.contains_key(&planes) {
                order.push(planes.clone());
            }
            by_planes.entry(planes).or_default().push(n);
        }
        if order.is_empty() {
            return Err(PrefixError::NoPrefixTier);
        }
        let mut layout = PrefixLayout {
            rack_tier,
            pods: Vec::new(),
            rack_index: BTreeMap::new(),
            plane_pod: BTreeMap::new(),
        };
        for planes in order {
            let racks = by_planes.remove(&planes).expect("recorded");
            let bits = id_bits(racks.len() as u32);
            let pod = layout.pods.len();
            if bits > 16 {
                return Err(PrefixError::TooManyRacks {
                    pod,
                    racks: racks.len(),
                    bits,
                });
            }
            for (i, &r) in racks.iter().enumerate() {
                layout.rack_index.insert(r, (pod as u32, i as u32));
            }
            for &p in &planes {
                layout.plane_pod.insert(p, pod as u32);
            }
            layout.pods.push(Pod {
                racks,
                planes,
                bits,
            });
        }
        Ok(layout)
    }

    /// (pod, id) of a rack.
    pub fn rack(&self, rack: NodeId) -> Option<(u32, u32)> {
        self.rack_index.get(&rack).copied()
    }

    /// (pod, id) of the rack a host sits under: its switch, or that switch's single
    /// uplink when the switch is a GPU server's NIC (one tier below the racks).
    pub fn host_rack(&self, topo: &Topology, host: NodeId) -> Option<(u32, u32)> {
        let &(_, attach) = topo.ports(host).first()?;
        self.rack(attach).or_else(|| {
            let mut up = topo
                .ports(attach)
                .iter()
                .filter(|&&(_, m)| !topo.is_host(m));
            match (up.next(), up.next()) {
                (Some(&(_, rack)), None) => self.rack(rack),
                _ => None,
            }
        })
    }
    /// The pod whose racks `plane` serves.
    pub fn plane_pod(&self, plane: NodeId) -> Option<u32> {
        self.plane_pod.get(&plane).copied()
    }
    /// Index of `plane` among its pod's planes (the header's plane field).
    pub fn plane_index(&self, plane: NodeId) -> Option<u16> {
        let pod = &self.pods[self.plane_pod(plane)? as usize];
        pod.planes
            .iter()
            .position(|&p| p == plane)
            .map(|i| i as u16)
    }

    /// The rules `plane` holds: per block, its ports toward the block's racks.
    pub fn rules(&self, topo: &Topology, plane: NodeId) -> Vec<(Prefix, Vec<u16>)> {
        let Some(pod) = self.plane_pod(plane).map(|p| &self.pods[p as usize]) else {
            return Vec::new();
        };
        static_rules(pod.racks.len() as u32)
            .into_iter()
            .map(|p| {
                let first = p.first(pod.bits) as usize;
                let end = (first + p.size(pod.bits) as usize).min(pod.racks.len());
                let ports = pod.racks[first..end]
                    .iter()
                    .filter_map(|&r| {
                        topo.ports(plane)
                            .iter()
                            .position(|&(_, m)| m == r)
                            .map(|i| i as u16)
                    })
                    .collect();
                (p, ports)
            })
            .collect()
    }

    /// The most rules any prefix-tier switch holds.
    pub fn max_rules(&self) -> usize {
        self.pods
            .iter()
            .map(|p| static_rules(p.racks.len() as u32).len())
            .max()
            .unwrap_or(0)
    }
}

/// How a group's racks under one plane become packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoverPolicy {
    /// Exactly the member racks, in as few blocks as that allows.
    Exact,
    /// At most this many packets per plane, over-covering racks that then discard.
    /// Falls back to the exact cover where no bounded cover exists.
    OverCover { max_prefixes: u32 },
}

/// One packet the source emits per message: it climbs to `plane` (a prefix-tier
/// switch of `pod`), which replicates it to the racks of `prefix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PeelPacket {
    pub pod: u32,
    pub plane: NodeId,
    pub prefix: Prefix,
}

/// A group's PEEL forwarding plan and its cost against the tree it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeelPlan {
    pub packets: Vec<PeelPacket>,
    /// Racks reached from a plane (the ones the covers must include).
    pub member_racks: usize,
    /// Racks a cover includes that have no member: their ToR receives and discards.
    pub discarded_rack_copies: usize,
    /// Link traversals of the tree: one per link, the optimum for this tree.
    pub tree_link_copies: usize,
    /// Link traversals with static prefixes: every packet climbs from the source to
    /// its plane on its own.
    pub static_link_copies: usize,
    /// Link traversals once a programmable core replicates (§3.3): one copy climbs to
    /// the core, which sends one per packet to the planes above the source's pod.
    pub programmable_link_copies: usize,
    /// Per-group entries naive IP multicast installs for this tree: one per switch.
    pub naive_group_entries: usize,
}

impl PeelPlan {
    /// Bytes beyond the tree's per message of `message_bytes`, static and programmable.
    pub fn extra_bytes(&self, message_bytes: u64) -> (u64, u64) {
        let per = |c: usize| (c - self.tree_link_copies) as u64 * message_bytes;
        (
            per(self.static_link_copies),
            per(self.programmable_link_copies),
        )
    }
}

/// The packets that deliver `tree` through static prefix rules: see the module docs.
pub fn plan_group(
    topo: &Topology,
    layout: &PrefixLayout,
    tree: &MulticastTree,
    policy: CoverPolicy,
) -> Result<PeelPlan, PrefixError> {
    // Member racks per plane, and every rack the tree touches per pod.
    let mut members: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
    let mut touched: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for a in &tree.arcs {
        let Some((pod, id)) = layout.rack(a.child) else {
            continue;
        };
        touched.entry(pod).or_default().insert(id);
        if switch_tier(topo, a.parent) == Some(layout.rack_tier + 1) {
            if layout.plane_pod(a.parent) != Some(pod) {
                return Err(PrefixError::NotAPlane {
                    rack: a.child,
                    parent: a.parent,
                });
            }
            members.entry(a.parent).or_default().push(id);
        }
    }
    let mut packets = Vec::new();
    let mut discarded = 0;
    for (&plane, ids) in &members {
        let pod_no = layout.plane_pod(plane).expect("checked");
        let pod = &layout.pods[pod_no as usize];
        let racks = pod.racks.len() as u32;
        let exact = || exact_cover(ids, racks, pod.bits);
        let covers = match policy {
            CoverPolicy::Exact => exact(),
            CoverPolicy::OverCover { max_prefixes } => {
                let mine: BTreeSet<u32> = ids.iter().copied().collect();
                let forbidden: Vec<u32> = touched[&pod_no]
                    .iter()
                    .copied()
                    .filter(|i| !mine.contains(i))
                    .collect();
                bounded_cover(ids, &forbidden, racks, pod.bits, max_prefixes).unwrap_or_else(exact)
            }
        };
        for prefix in covers {
            let existing = (prefix.first(pod.bits) + prefix.size(pod.bits)).min(racks)
                - prefix.first(pod.bits);
            let inside = ids
                .iter()
                .filter(|&&i| prefix.contains(i, pod.bits))
                .count();
            discarded += existing as usize - inside;
            packets.push(PeelPacket {
                pod: pod_no,
                plane,
                prefix,
            });
        }
    }
    packets.sort_unstable();
    // Link accounting.
    let parents = tree.parents();
    // (parent, link) from the source down to `at`.
    let path_arcs = |mut at: NodeId| {
        let mut v = Vec::new();
        while let Some(&(p, link)) = parents.get(&at) {
            v.push((p, link));
            at = p;
        }
        v.reverse();
        v
    };
    let mut per_plane: BTreeMap<NodeId, usize> = BTreeMap::new();
    for p in &packets {
        *per_plane.entry(p.plane).or_insert(0) += 1;
    }
    let mut union: BTreeSet<u32> = BTreeSet::new();
    let mut static_up = 0;
    // §3.3: one copy climbs to each core a path turns down at (a switch above the
    // prefix tier), which sends one per packet; packets to planes below no core
    // (the source pod's own) still climb on their own.
    let mut core_paths: BTreeMap<NodeId, BTreeSet<u32>> = BTreeMap::new();
    let mut below_core = 0;
    let mut direct_up = 0;
    for (&plane, &n) in &per_plane {
        let arcs = path_arcs(plane);
        static_up += n * arcs.len();
        union.extend(arcs.iter().map(|&(_, l)| l));
        let turn = arcs
            .iter()
            .rposition(|&(p, _)| switch_tier(topo, p).is_some_and(|t| t > layout.rack_tier + 1));
        match turn {
            Some(t) => {
                core_paths
                    .entry(arcs[t].0)
                    .or_default()
                    .extend(arcs[..t].iter().map(|&(_, l)| l));
                below_core += n * (arcs.len() - t);
            }
            None => direct_up += n * arcs.len(),
        }
    }
    let core_up: usize = core_paths.values().map(BTreeSet::len).sum();
    let tree_links = tree.arcs.len();
    Ok(PeelPlan {
        member_racks: members.values().map(Vec::len).sum(),
        discarded_rack_copies: discarded,
        tree_link_copies: tree_links,
        static_link_copies: tree_links + static_up - union.len() + discarded,
        programmable_link_copies: if core_paths.is_empty() {
            tree_links + static_up - union.len() + discarded
        } else {
            tree_links - union.len() + core_up + below_core + direct_up + discarded
        },
        naive_group_entries: tree.switches(topo),
        packets,
    })
}

#[cfg(test)]
mod tests;
