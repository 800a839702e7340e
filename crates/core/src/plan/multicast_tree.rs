//! Multicast trees on Clos fabrics, PEEL §2, plus Cepheus' hop-by-hop tree for
//! comparison. Pure graph algorithms: they read a [`Topology`] (and, for the hop-by-hop
//! tree, its [`Routes`]) and return a [`MulticastTree`]; nothing here sends packets.
//!
//! - [`symmetric_tree`]: the optimal tree on a fault-free leaf–spine or fat-tree
//!   (Lemma 2.1). The core is treated as one super-node: the source climbs one chain of
//!   lowest-numbered uplinks, and each destination climbs until it meets the tree,
//!   preferring the uplink whose own uplinks already touch it (that alignment is what
//!   "collapsing the core" means on a three-tier fat-tree: every destination pod joins
//!   through the aggregation switch that shares the source's core). Unused chain ends
//!   are pruned. Cost O(|D| · tiers · k²) for k-port switches, independent of fabric size.
//! - [`layer_peeling_tree`]: the §2.3 greedy for asymmetric fabrics (failed links or
//!   switches). Hop layers from the source; from the farthest layer inward, every tree
//!   node of layer i+1 that has no tree neighbour on layer i is attached by repeatedly
//!   adding the layer-i switch that attaches the most of them (ties: lowest node id).
//!   Every node's parent sits one layer closer to the source, so the result is a
//!   loop-free tree, of at most |D|·F links (Lemma 2.3).
//! - [`hop_by_hop_tree`]: what Cepheus' MRP builds (Cepheus §III-C, our
//!   `switch::mrp_agent::handle_mrp`): from the source, each switch sends each
//!   member on an equal-cost next hop, reusing a port already in the tree, else the
//!   least-used one.
//! - [`lower_bound`]: max(|D|, F) links (Lemma 2.4), the yardstick for the ratio.
//!
//! The exact optimum (an ILP) is solved outside the core, by HiGHS (`rocast tree
//! --algo exact`), because it needs a solver library.
//!
//! Hosts never relay: a breadth-first search does not expand a host other than the
//! source, and only switches (or the source) are parents.
//!
//! Memory: a tree is 12 bytes per link; the algorithms use one 4-byte distance per node
//! of the fabric (0.3 MB at k=64) plus O(tree) scratch.

use super::routing::Routes;
use super::topology::{NodeId, NodeRole, Topology};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

/// One arc of a multicast tree: `parent` forwards to `child` over `link`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TreeArc {
    pub parent: NodeId,
    pub child: NodeId,
    pub link: u32,
}

/// A multicast tree: arcs oriented away from the source, sorted by (parent, child).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulticastTree {
    pub source: NodeId,
    /// Sorted, without duplicates and without the source.
    pub destinations: Vec<NodeId>,
    pub arcs: Vec<TreeArc>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("node {0} is not in the topology")]
    NoSuchNode(NodeId),
    #[error("node {0} is not a host")]
    NotAHost(NodeId),
    #[error("no destinations (other than the source)")]
    NoDestinations,
    #[error("destination {0} is unreachable from the source over working links")]
    Unreachable(NodeId),
    #[error("the symmetric construction needs a fault-free Clos: {0}")]
    NotSymmetric(String),
    #[error("not a valid multicast tree: {0}")]
    Invalid(String),
}

/// Figures of one tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeSummary {
    pub switches: usize,
    pub links: usize,
    /// Links on the longest source-to-leaf path.
    pub depth: u32,
    /// max(|D|, F): no tree has fewer links (Lemma 2.4).
    pub lower_bound: usize,
}

/// Checks the source and destinations; returns the destinations sorted and deduplicated
/// with the source removed.
pub fn normalise_destinations(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
) -> Result<Vec<NodeId>, TreeError> {
    for &n in std::iter::once(&source).chain(destinations) {
        if n as usize >= topo.num_nodes() {
            return Err(TreeError::NoSuchNode(n));
        }
        if !topo.is_host(n) {
            return Err(TreeError::NotAHost(n));
        }
    }
    let d: BTreeSet<NodeId> = destinations
        .iter()
        .copied()
        .filter(|&d| d != source)
        .collect();
    if d.is_empty() {
        return Err(TreeError::NoDestinations);
    }
    Ok(d.into_iter().collect())
}

/// Neighbours of `n` over links that have not failed: (link, peer).
fn working(topo: &Topology, n: NodeId) -> impl Iterator<Item = (u32, NodeId)> + '_ {
    topo.ports(n)
        .iter()
        .copied()
        .filter(move |&(l, _)| !topo.links[l as usize].failed)
}

fn tier(topo: &Topology, n: NodeId) -> i32 {
    match topo.roles[n as usize] {
        NodeRole::Host => -1,
        NodeRole::Switch { tier } => tier as i32,
    }
}

/// Hop distance of every node from `source` over working links (`u32::MAX` when
/// unreachable); hosts other than the source are reached but not expanded.
pub fn hop_distances(topo: &Topology, source: NodeId) -> Vec<u32> {
    let mut dist = vec![u32::MAX; topo.num_nodes()];
    let mut queue = VecDeque::new();
    dist[source as usize] = 0;
    queue.push_back(source);
    while let Some(n) = queue.pop_front() {
        let d = dist[n as usize] + 1;
        for (_, m) in working(topo, n) {
            if dist[m as usize] == u32::MAX {
                dist[m as usize] = d;
                // Hosts are leaves: reached, never expanded.
                if !topo.is_host(m) {
                    queue.push_back(m);
                }
            }
        }
    }
    dist
}

/// max(|D|, F) where F is the farthest destination's hop distance (Lemma 2.4).
pub fn lower_bound(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
) -> Result<usize, TreeError> {
    let d = normalise_destinations(topo, source, destinations)?;
    let dist = hop_distances(topo, source);
    let f = farthest(&dist, &d)?;
    Ok(d.len().max(f as usize))
}

fn farthest(dist: &[u32], destinations: &[NodeId]) -> Result<u32, TreeError> {
    let mut f = 0;
    for &d in destinations {
        match dist[d as usize] {
            u32::MAX => return Err(TreeError::Unreachable(d)),
            x => f = f.max(x),
        }
    }
    Ok(f)
}

impl MulticastTree {
    fn from_parents(
        source: NodeId,
        destinations: Vec<NodeId>,
        parents: &BTreeMap<NodeId, (NodeId, u32)>,
    ) -> Self {
        let mut arcs: Vec<TreeArc> = parents
            .iter()
            .map(|(&child, &(parent, link))| TreeArc {
                parent,
                child,
                link,
            })
            .collect();
        arcs.sort_unstable();
        MulticastTree {
            source,
            destinations,
            arcs,
        }
    }

    /// Switches in the tree.
    pub fn switches(&self, topo: &Topology) -> usize {
        self.arcs.iter().filter(|a| !topo.is_host(a.child)).count()
    }

    /// Parent of every non-source node.
    pub fn parents(&self) -> BTreeMap<NodeId, (NodeId, u32)> {
        self.arcs
            .iter()
            .map(|a| (a.child, (a.parent, a.link)))
            .collect()
    }

    /// Arcs from the source down to `node` (empty for the source; `None` if `node` is
    /// not in the tree).
    pub fn path_to(&self, node: NodeId) -> Option<Vec<TreeArc>> {
        let parents = self.parents();
        let mut path = Vec::new();
        let mut at = node;
        while at != self.source {
            let &(p, link) = parents.get(&at)?;
            path.push(TreeArc {
                parent: p,
                child: at,
                link,
            });
            at = p;
            if path.len() > self.arcs.len() {
                return None;
            }
        }
        path.reverse();
        Some(path)
    }

    /// Links on the longest path from the source.
    pub fn depth(&self) -> u32 {
        let mut children: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
        for a in &self.arcs {
            children.entry(a.parent).or_default().push(a.child);
        }
        let mut depth = 0;
        let mut stack = vec![(self.source, 0u32)];
        while let Some((n, d)) = stack.pop() {
            depth = depth.max(d);
            if d as usize > self.arcs.len() {
                break; // a cycle; `validate` reports it
            }
            for &c in children.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
                stack.push((c, d + 1));
            }
        }
        depth
    }

    pub fn summary(&self, topo: &Topology) -> Result<TreeSummary, TreeError> {
        Ok(TreeSummary {
            switches: self.switches(topo),
            links: self.arcs.len(),
            depth: self.depth(),
            lower_bound: lower_bound(topo, self.source, &self.destinations)?,
        })
    }

    /// Checks that this is a tree of working links rooted at the source that reaches
    /// every destination, in which no host but the source forwards and every leaf is a
    /// destination.
    pub fn validate(&self, topo: &Topology) -> Result<(), TreeError> {
        let bad = |m: String| Err(TreeError::Invalid(m));
        let mut parent_of = BTreeMap::new();
        let mut has_child = BTreeSet::new();
        for a in &self.arcs {
            let Some(l) = topo.links.get(a.link as usize) else {
                return bad(format!("link {} does not exist", a.link));
            };
            if !((l.a == a.parent && l.b == a.child) || (l.b == a.parent && l.a == a.child)) {
                return bad(format!(
                    "link {} does not join {} and {}",
                    a.link, a.parent, a.child
                ));
            }
            if l.failed {
                return bad(format!("link {} has failed", a.link));
            }
            if a.child == self.source {
                return bad("the source has a parent".into());
            }
            if parent_of.insert(a.child, a.parent).is_some() {
                return bad(format!("node {} has two parents", a.child));
            }
            if topo.is_host(a.parent) && a.parent != self.source {
                return bad(format!("host {} forwards", a.parent));
            }
            has_child.insert(a.parent);
        }
        // Every node must climb to the source without repeating itself.
        for &start in parent_of.keys() {
            let mut at = start;
            let mut steps = 0;
            while at != self.source {
                match parent_of.get(&at) {
                    Some(&p) => at = p,
                    None => return bad(format!("node {start} is not connected to the source")),
                }
                steps += 1;
                if steps > self.arcs.len() {
                    return bad(format!("a cycle through node {start}"));
                }
            }
        }
        let dests: BTreeSet<NodeId> = self.destinations.iter().copied().collect();
        for &d in &dests {
            if !parent_of.contains_key(&d) {
                return bad(format!("destination {d} is not in the tree"));
            }
        }
        for &n in parent_of.keys() {
            if !has_child.contains(&n) && !dests.contains(&n) {
                return bad(format!("leaf {n} is not a destination"));
            }
        }
        Ok(())
    }
}

/// The PEEL layer-peeling greedy (§2.3), ties broken by the lowest node id.
pub fn layer_peeling_tree(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
) -> Result<MulticastTree, TreeError> {
    layer_peeling_tree_via(topo, source, destinations, UplinkChoice::Lowest)
}

/// The layer-peeling greedy with its ties (switches attaching equally many waiting
/// nodes) broken by `choice`: the lowest id, or a hash of the salt and the id, so that
/// groups with different salts spread over equally good switches as ECMP spreads
/// flows (otherwise every group on a failed fabric climbs through the same spines).
pub fn layer_peeling_tree_via(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
    choice: UplinkChoice,
) -> Result<MulticastTree, TreeError> {
    let tie = |v: NodeId| -> u64 {
        match choice {
            UplinkChoice::Lowest => v as u64,
            UplinkChoice::Hashed(salt) => UplinkChoice::hash(salt, v),
        }
    };
    let dests = normalise_destinations(topo, source, destinations)?;
    let dist = hop_distances(topo, source);
    let f = farthest(&dist, &dests)? as usize;
    let can_relay = |n: NodeId| n == source || !topo.is_host(n);
    // Flat per-node arrays: this runs on 70,000-node fabrics within milliseconds.
    let mut in_tree = vec![false; topo.num_nodes()];
    let mut waiting = vec![false; topo.num_nodes()];
    // Tree nodes per hop layer.
    let mut layers: Vec<Vec<NodeId>> = vec![Vec::new(); f + 1];
    layers[0].push(source);
    in_tree[source as usize] = true;
    for &d in &dests {
        layers[dist[d as usize] as usize].push(d);
        in_tree[d as usize] = true;
    }
    let mut arcs: Vec<TreeArc> = Vec::with_capacity(dests.len() * 2);
    let mut heap: BinaryHeap<(u32, Reverse<(u64, NodeId)>)> = BinaryHeap::new();
    for i in (0..f).rev() {
        let inner = i as u32;
        // Layers farther out are done with, so this one can be moved out.
        let upper = std::mem::take(&mut layers[i + 1]);
        // Nodes that already see a tree node one layer in are attached to it.
        let mut n_waiting = 0usize;
        let mut candidates: Vec<NodeId> = Vec::new();
        for &u in &upper {
            let hook = working(topo, u)
                .find(|&(_, v)| dist[v as usize] == inner && can_relay(v) && in_tree[v as usize]);
            match hook {
                Some((link, v)) => arcs.push(TreeArc {
                    parent: v,
                    child: u,
                    link,
                }),
                None => {
                    waiting[u as usize] = true;
                    n_waiting += 1;
                    candidates.extend(
                        working(topo, u)
                            .map(|(_, v)| v)
                            .filter(|&v| dist[v as usize] == inner && can_relay(v)),
                    );
                }
            }
        }
        if n_waiting == 0 {
            continue;
        }
        // Greedy set cover: the layer-i switch attaching the most waiting nodes (ties:
        // lowest id). Lazy evaluation: a candidate's count only falls as others are
        // chosen, so a popped candidate whose fresh count still tops the heap is the
        // true maximum.
        candidates.sort_unstable();
        candidates.dedup();
        // Only this layer's nodes are ever waiting: each layer empties before the next.
        let count = |v: NodeId, waiting: &[bool]| {
            working(topo, v)
                .filter(|&(_, u)| waiting[u as usize])
                .count() as u32
        };
        heap.clear();
        heap.extend(
            candidates
                .iter()
                .map(|&v| (count(v, &waiting), Reverse((tie(v), v)))),
        );
        while n_waiting > 0 {
            let Some((_, Reverse((_, v)))) = heap.pop() else {
                return Err(TreeError::Invalid(
                    "a node has no relay one hop closer to the source".into(),
                ));
            };
            let fresh = (count(v, &waiting), Reverse((tie(v), v)));
            if fresh.0 == 0 {
                continue;
            }
            if heap.peek().is_some_and(|&top| top > fresh) {
                heap.push(fresh);
                continue;
            }
            in_tree[v as usize] = true;
            layers[i].push(v);
            for (link, u) in working(topo, v) {
                if waiting[u as usize] {
                    waiting[u as usize] = false;
                    n_waiting -= 1;
                    arcs.push(TreeArc {
                        parent: v,
                        child: u,
                        link,
                    });
                }
            }
        }
    }
    arcs.sort_unstable();
    Ok(MulticastTree {
        source,
        destinations: dests,
        arcs,
    })
}

/// Which uplink the source's chain takes at each tier of a [`symmetric_tree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UplinkChoice {
    /// The lowest-numbered upper node: every group climbs through the same switches.
    Lowest,
    /// An upper node drawn by hashing the salt with the node (ECMP's per-flow hash:
    /// groups with different salts spread over the equal-cost uplinks).
    Hashed(u64),
}

impl UplinkChoice {
    /// ECMP's per-flow hash of `node` under `salt` (the symmetric tree's uplink and the
    /// layer-peeling greedy's tie-break both draw on it).
    fn hash(salt: u64, node: NodeId) -> u64 {
        crate::payload::splitmix64(salt ^ (node as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }
}

/// The optimal tree on a fault-free Clos (PEEL Lemma 2.1): see the module docs. The
/// source's chain climbs through the lowest-numbered switches.
pub fn symmetric_tree(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
) -> Result<MulticastTree, TreeError> {
    symmetric_tree_via(topo, source, destinations, UplinkChoice::Lowest)
}

/// [`symmetric_tree`] with the source's chain climbing by `choice`. Every choice gives
/// a tree of the same (minimum) size on a fault-free Clos: the chain's switches are
/// interchangeable, and the destinations attach to whichever chain there is.
pub fn symmetric_tree_via(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
    choice: UplinkChoice,
) -> Result<MulticastTree, TreeError> {
    let dests = normalise_destinations(topo, source, destinations)?;
    if let Some(l) = topo.links.iter().position(|l| l.failed) {
        return Err(TreeError::NotSymmetric(format!(
            "link {l} has failed; use the layer-peeling tree"
        )));
    }
    let up = |n: NodeId| {
        let t = tier(topo, n);
        working(topo, n).filter(move |&(_, m)| tier(topo, m) > t)
    };
    // A node is in the tree when it is the source or has a parent.
    let mut parents: BTreeMap<NodeId, (NodeId, u32)> = BTreeMap::new();
    let in_tree = |parents: &BTreeMap<NodeId, (NodeId, u32)>, n: NodeId| {
        n == source || parents.contains_key(&n)
    };
    // The source's chain: one uplink at every tier, up to the top.
    let chain_up = |at: NodeId| {
        let mut ups: Vec<(u32, NodeId)> = up(at).collect();
        ups.sort_unstable_by_key(|&(_, m)| m);
        match choice {
            _ if ups.is_empty() => None,
            UplinkChoice::Lowest => Some(ups[0]),
            UplinkChoice::Hashed(salt) => {
                Some(ups[(UplinkChoice::hash(salt, at) % ups.len() as u64) as usize])
            }
        }
    };
    let mut at = source;
    while let Some((l, next)) = chain_up(at) {
        // Data climbs the chain, so each chain node's parent is the one below it.
        parents.insert(next, (at, l));
        at = next;
    }
    for &d in &dests {
        let mut x = d;
        let mut climbed = 0;
        while !in_tree(&parents, x) {
            let ups: Vec<(u32, NodeId)> = up(x).collect();
            let choice = ups
                .iter()
                .filter(|&&(_, y)| in_tree(&parents, y))
                .min_by_key(|&&(_, y)| y)
                .or_else(|| {
                    ups.iter()
                        .filter(|&&(_, y)| up(y).any(|(_, z)| in_tree(&parents, z)))
                        .min_by_key(|&&(_, y)| y)
                })
                .or_else(|| ups.iter().min_by_key(|&&(_, y)| y));
            let Some(&(l, y)) = choice else {
                return Err(TreeError::NotSymmetric(format!(
                    "node {x} has no uplink toward the source's chain"
                )));
            };
            // Data flows y → x.
            parents.insert(x, (y, l));
            x = y;
            climbed += 1;
            if climbed > topo.num_nodes() {
                return Err(TreeError::NotSymmetric("uplinks form a cycle".into()));
            }
        }
    }
    // Prune chain nodes and walk ends that lead to no destination: repeatedly drop
    // leaves that are not destinations.
    let is_dest = |n: NodeId| dests.binary_search(&n).is_ok();
    let mut child_count: BTreeMap<NodeId, u32> = BTreeMap::new();
    for &(p, _) in parents.values() {
        *child_count.entry(p).or_insert(0) += 1;
    }
    let mut leaves: Vec<NodeId> = parents
        .keys()
        .copied()
        .filter(|&n| !child_count.contains_key(&n) && !is_dest(n))
        .collect();
    while let Some(n) = leaves.pop() {
        if let Some((p, _)) = parents.remove(&n) {
            let c = child_count.get_mut(&p).expect("parent counted");
            *c -= 1;
            if *c == 0 && p != source && !is_dest(p) {
                child_count.remove(&p);
                leaves.push(p);
            }
        }
    }
    Ok(MulticastTree::from_parents(source, dests, &parents))
}

/// Cepheus' port rule (Cepheus §III-C), shared by [`hop_by_hop_tree`] and the switch's
/// MRP agent (`switch::mrp_agent::handle_mrp`): among the equal-cost `candidates`
/// other than `in_port`, the first already in the group's tree, else the least used
/// (ties: lowest port). `None` when no candidate is left.
pub fn hop_by_hop_port(
    candidates: &[u16],
    in_port: u16,
    on_tree: impl Fn(u16) -> bool,
    load: impl Fn(u16) -> u32,
) -> Option<u16> {
    let usable = candidates.iter().copied().filter(|&p| p != in_port);
    usable
        .clone()
        .find(|&p| on_tree(p))
        .or_else(|| usable.min_by_key(|&p| (load(p), p)))
}

/// Cepheus' MRP tree: see the module docs. `port_load(switch, port)` is the number of
/// groups already using that port (zero for a single tree).
pub fn hop_by_hop_tree(
    topo: &Topology,
    routes: &Routes,
    source: NodeId,
    destinations: &[NodeId],
    port_load: &dyn Fn(NodeId, u16) -> u32,
) -> Result<MulticastTree, TreeError> {
    let dests = normalise_destinations(topo, source, destinations)?;
    let (first_link, first) = topo.ports(source)[0];
    if topo.links[first_link as usize].failed {
        return Err(TreeError::Unreachable(dests[0]));
    }
    let mut parents: BTreeMap<NodeId, (NodeId, u32)> = BTreeMap::new();
    parents.insert(first, (source, first_link));
    let mut queue: VecDeque<(NodeId, u16, Vec<NodeId>)> = VecDeque::new();
    let in_port = topo.port_of(first, first_link).expect("link at its end");
    queue.push_back((first, in_port, dests.clone()));
    while let Some((sw, in_port, members)) = queue.pop_front() {
        // Members per chosen port; its keys are this switch's ports in the tree.
        let mut behind: BTreeMap<u16, Vec<NodeId>> = BTreeMap::new();
        for m in members {
            let (att, host_port) = routes.attachment(m);
            let port = if att == sw {
                host_port
            } else {
                let choice = hop_by_hop_port(
                    routes.next_hops(sw, m),
                    in_port,
                    |p| behind.contains_key(&p),
                    |p| port_load(sw, p),
                );
                choice.ok_or(TreeError::Unreachable(m))?
            };
            behind.entry(port).or_default().push(m);
        }
        for (port, ms) in behind {
            let (link, peer) = topo.ports(sw)[port as usize];
            if topo.links[link as usize].failed {
                return Err(TreeError::Unreachable(ms[0]));
            }
            if parents.insert(peer, (sw, link)).is_some() || peer == source {
                return Err(TreeError::Invalid(format!(
                    "the hop-by-hop walk reached node {peer} twice"
                )));
            }
            if !topo.is_host(peer) {
                let p = topo.port_of(peer, link).expect("link at its end");
                queue.push_back((peer, p, ms));
            }
        }
    }
    Ok(MulticastTree::from_parents(source, dests, &parents))
}

#[cfg(test)]
mod tests;
