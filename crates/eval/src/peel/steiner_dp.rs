//! The exact minimum Steiner tree by dynamic programming over terminal subsets
//! (Dreyfus & Wagner 1971, with the node-wise merge of Erickson, Monma & Veinott 1987),
//! the yardstick `peel-approx` measures PEEL's greedy against (PEEL §2.3).
//!
//! `cost[S][v]` is the fewest links of a tree joining the terminals in `S` and node
//! `v`. Singletons are shortest-path distances; a larger `S` is first the best merge of
//! two complementary subsets at `v`, then relaxed along links (a tree for `S` hanging
//! off a path to `v`). The answer is `cost[all][root]`. It is exact by construction, so
//! it needs no time limit; the HiGHS integer program in [`super::steiner_exact`] is the
//! independent check (`exact_solver = "highs"`, and the tests below).
//!
//! Two exact reductions keep the subsets few: hosts that are neither the source nor a
//! destination cannot relay and are left out, and a terminal with a single working link
//! must use it, so it is replaced by its neighbour (a fat-tree's destinations collapse
//! onto their ToRs). Time O(3^t·n + 2^t·(n + m)) and memory 2^t·n·2 bytes for t
//! terminals left after the reductions, n nodes and m links; at most
//! [`MAX_TERMINALS`] terminals.

use super::steiner_exact::{relay_links, tree_of_arcs};
use crate::error::EvalError;
use rocast_core::plan::multicast_tree::{normalise_destinations, MulticastTree};
use rocast_core::plan::topology::{NodeId, Topology};
use std::collections::{BTreeSet, VecDeque};

/// The most terminals (after reductions) the solver takes: 2^20 subsets.
pub const MAX_TERMINALS: usize = 20;
/// The largest table the solver allocates, bytes.
const MAX_TABLE_BYTES: usize = 1 << 30;
const INF: u16 = 0x3fff;

/// The minimum tree from `source` to `destinations` over working links.
pub fn exact_tree_dp(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
) -> Result<MulticastTree, EvalError> {
    let dests = normalise_destinations(topo, source, destinations)?;
    let links = relay_links(topo, source, &dests);
    // The graph in local indices, nodes in ascending id.
    let nodes: Vec<NodeId> = links
        .iter()
        .flatten()
        .copied()
        .chain(std::iter::once(source))
        .chain(dests.iter().copied())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let local = |g: NodeId| nodes.binary_search(&g).expect("a node of the graph") as u32;
    let n = nodes.len();
    let mut adj: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); n];
    for &[a, b] in &links {
        let (a, b) = (local(a), local(b));
        adj[a as usize].insert(b);
        adj[b as usize].insert(a);
    }
    let mut root = local(source);
    let mut terminals: BTreeSet<u32> = dests.iter().map(|&d| local(d)).collect();
    // Forced edges: a terminal (or the root) whose only link leads on must use it.
    let mut edges: BTreeSet<(u32, u32)> = BTreeSet::new();
    loop {
        let leaf = std::iter::once(root)
            .chain(terminals.iter().copied())
            .find(|&v| adj[v as usize].len() == 1 && !(v == root && terminals.is_empty()));
        let Some(v) = leaf else { break };
        let u = *adj[v as usize].iter().next().expect("one link");
        edges.insert((v.min(u), v.max(u)));
        adj[u as usize].remove(&v);
        adj[v as usize].clear();
        if v == root {
            root = u;
            terminals.remove(&u);
        } else {
            terminals.remove(&v);
            if u != root {
                terminals.insert(u);
            }
        }
    }
    // Destinations are never empty (normalise_destinations), so with no terminal left
    // the forced edges already reach them all.
    let terms: Vec<u32> = terminals.into_iter().collect();
    let t = terms.len();
    if t > 0 {
        if t > MAX_TERMINALS || (n << t) * 2 > MAX_TABLE_BYTES {
            return Err(EvalError::Setting(format!(
                "the exact Steiner solver takes at most {MAX_TERMINALS} terminals on a table of {} MiB; this instance has {t} after reductions on {n} nodes (use exact_solver = \"highs\")",
                MAX_TABLE_BYTES >> 20
            )));
        }
        let adj: Vec<Vec<u32>> = adj.into_iter().map(|s| s.into_iter().collect()).collect();
        let table = SubsetTable::solve(&adj, &terms);
        if table.at(table.full(), root) >= INF {
            return Err(EvalError::Setting(
                "a destination is unreachable from the source over working links".into(),
            ));
        }
        table.collect(table.full(), root, &mut edges);
    }
    // Orient away from the source.
    let mut nbr: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(a, b) in &edges {
        nbr[a as usize].push(b);
        nbr[b as usize].push(a);
    }
    let mut arcs = Vec::with_capacity(edges.len());
    let mut seen = vec![false; n];
    let src = local(source);
    seen[src as usize] = true;
    let mut q = VecDeque::from([src]);
    while let Some(p) = q.pop_front() {
        for &c in &nbr[p as usize] {
            if !std::mem::replace(&mut seen[c as usize], true) {
                q.push_back(c);
                arcs.push((nodes[p as usize], nodes[c as usize]));
            }
        }
    }
    if arcs.len() != edges.len() {
        return Err(EvalError::Setting(
            "internal: the solver's edges are not a tree".into(),
        ));
    }
    tree_of_arcs(topo, source, dests, arcs)
}

/// `cost[S][v]` for every subset `S` of the terminals and node `v`, row-major by `S`.
struct SubsetTable<'a> {
    adj: &'a [Vec<u32>],
    n: usize,
    terms: &'a [u32],
    cost: Vec<u16>,
}

impl<'a> SubsetTable<'a> {
    fn solve(adj: &'a [Vec<u32>], terms: &'a [u32]) -> SubsetTable<'a> {
        let n = adj.len();
        let subsets = 1usize << terms.len();
        let mut cost = vec![INF; subsets * n];
        let mut order: Vec<u32> = Vec::with_capacity(n);
        let mut bfs: VecDeque<(u16, u32)> = VecDeque::with_capacity(n);
        let mut merged = vec![INF; n];
        for s in 1..subsets {
            merged.fill(INF);
            if s.is_power_of_two() {
                merged[terms[s.trailing_zeros() as usize] as usize] = 0;
            } else {
                // Merges: `a` holds the lowest terminal of `s`, so each split counts once.
                let low = s & s.wrapping_neg();
                let rest = s ^ low;
                let mut sub = rest;
                loop {
                    let a = sub | low;
                    if a != s {
                        let (ra, rb) =
                            (&cost[a * n..a * n + n], &cost[(s ^ a) * n..(s ^ a) * n + n]);
                        for ((m, &x), &y) in merged.iter_mut().zip(ra).zip(rb) {
                            *m = (*m).min(x + y);
                        }
                    }
                    if sub == 0 {
                        break;
                    }
                    sub = (sub - 1) & rest;
                }
            }
            // Relax along unit-cost links: a multi-source BFS, the start nodes taken
            // in order of their merge cost and merged with the BFS queue (whose costs
            // never decrease), so every node is settled at its least cost.
            order.clear();
            order.extend((0..n as u32).filter(|&v| merged[v as usize] < INF));
            order.sort_by_key(|&v| (merged[v as usize], v));
            let row = &mut cost[s * n..s * n + n];
            row.copy_from_slice(&merged);
            let mut next = 0;
            bfs.clear();
            loop {
                let (d, v) = match (order.get(next), bfs.front()) {
                    (Some(&a), Some(&(d, _))) if merged[a as usize] <= d => {
                        next += 1;
                        (merged[a as usize], a)
                    }
                    (Some(&a), None) => {
                        next += 1;
                        (merged[a as usize], a)
                    }
                    (_, Some(_)) => bfs.pop_front().expect("front"),
                    (None, None) => break,
                };
                if d != row[v as usize] {
                    continue; // stale: settled cheaper already
                }
                for &u in &adj[v as usize] {
                    if d + 1 < row[u as usize] {
                        row[u as usize] = d + 1;
                        bfs.push_back((d + 1, u));
                    }
                }
            }
        }
        SubsetTable {
            adj,
            n,
            terms,
            cost,
        }
    }

    fn full(&self) -> usize {
        (1usize << self.terms.len()) - 1
    }

    fn at(&self, s: usize, v: u32) -> u16 {
        self.cost[s * self.n + v as usize]
    }

    /// Adds the edges of an optimal tree for `s` and `v` to `out`.
    fn collect(&self, s: usize, v: u32, out: &mut BTreeSet<(u32, u32)>) {
        let mut stack = vec![(s, v)];
        while let Some((s, v)) = stack.pop() {
            let c = self.at(s, v);
            if s.is_power_of_two() && self.terms[s.trailing_zeros() as usize] == v {
                continue; // c == 0
            }
            if !s.is_power_of_two() {
                let low = s & s.wrapping_neg();
                let rest = s ^ low;
                let mut sub = rest;
                let mut split = None;
                loop {
                    let a = sub | low;
                    if a != s && self.at(a, v) + self.at(s ^ a, v) == c {
                        split = Some(a);
                        break;
                    }
                    if sub == 0 {
                        break;
                    }
                    sub = (sub - 1) & rest;
                }
                if let Some(a) = split {
                    stack.push((a, v));
                    stack.push((s ^ a, v));
                    continue;
                }
            }
            let u = *self.adj[v as usize]
                .iter()
                .find(|&&u| self.at(s, u) + 1 == c)
                .expect("a finite cost is a merge or one link on from a neighbour");
            out.insert((u.min(v), u.max(v)));
            stack.push((s, u));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peel::steiner_exact::exact_tree;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};
    use rocast_core::plan::multicast_tree::layer_peeling_tree;
    use rocast_core::plan::topology::TierSpec;
    use rocast_core::time::Duration;
    use rocast_sim::scenario::workload::sample_hosts;

    fn tier() -> TierSpec {
        TierSpec::new(100_000_000_000, Duration::from_ns(1000))
    }

    #[test]
    fn a_symmetric_fat_tree_gives_the_known_optimum() {
        // k=4: hosts 0,1 under ToR A, 2,3 under ToR B (same pod), 4.. in pod 2.
        let t = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
        // Same ToR: host-ToR-host.
        assert_eq!(exact_tree_dp(&t, 0, &[1]).unwrap().arcs.len(), 2);
        // Same pod, other ToR: host-ToR-agg-ToR-host.
        assert_eq!(exact_tree_dp(&t, 0, &[2]).unwrap().arcs.len(), 4);
        // Both: one more link to host 3.
        assert_eq!(exact_tree_dp(&t, 0, &[2, 3]).unwrap().arcs.len(), 5);
        // Another pod: host-ToR-agg-core-agg-ToR-host.
        assert_eq!(exact_tree_dp(&t, 0, &[4]).unwrap().arcs.len(), 6);
    }

    #[test]
    fn an_unreachable_destination_is_an_error_not_a_tree() {
        // Two leaves of 4 hosts under two spines, every leaf-spine link failed.
        let mut t = Topology::leaf_spine(2, 2, 4, 0, tier(), tier(), tier()).unwrap();
        for l in t.links.iter_mut().filter(|l| !t_is_host_link(l.a, l.b, 8)) {
            l.failed = true;
        }
        let e = exact_tree_dp(&t, 0, &[5]).unwrap_err().to_string();
        assert!(e.contains("unreachable"), "{e}");
    }

    fn t_is_host_link(a: NodeId, b: NodeId, hosts: NodeId) -> bool {
        a < hosts || b < hosts
    }

    /// The independent check: HiGHS' integer program proves the same minimum on
    /// seeded asymmetric fabrics, and the greedy never beats it.
    #[test]
    fn agrees_with_the_highs_integer_program_on_seeded_failed_fabrics() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let mut compared = 0;
        for i in 0..12u64 {
            let mut f = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
            f.fail_fraction([0.1, 0.2, 0.3][i as usize % 3], i + 1)
                .unwrap();
            let hosts = f.num_hosts() as u32;
            let source = (rng.next_u64() % hosts as u64) as u32;
            let dests = sample_hosts(hosts, source, 3 + (i as u32 % 6), i);
            let Ok(greedy) = layer_peeling_tree(&f, source, &dests) else {
                continue; // failures cut a destination off
            };
            let dp = exact_tree_dp(&f, source, &dests).unwrap();
            let ilp = exact_tree(&f, source, &dests, 30.0).unwrap();
            assert_eq!(dp.arcs.len(), ilp.arcs.len(), "instance {i}");
            assert!(dp.arcs.len() <= greedy.arcs.len(), "instance {i}");
            compared += 1;
        }
        assert!(compared >= 8, "only {compared} instances were connected");
    }
}
