//! Multicast groups that are the same Steiner problem on a fault-free Clos (PEEL §2.3,
//! Lemma 2.1's setting): a symmetry of the fabric maps one group onto the other, so
//! their minimum Steiner trees have the same number of links. Fig 5's exact baseline
//! solves one integer program per class instead of one per group.
//!
//! The symmetries used, each checked on the graph before it is relied on
//! ([`ClosSymmetry::of`] returns `None` otherwise):
//! - hosts under one ToR are interchangeable (each is a leaf on its ToR);
//! - ToRs of one pod are interchangeable (every ToR of the pod links to every
//!   aggregation switch of the pod, and to nothing else above);
//! - pods are interchangeable (each pod's aggregation switches link to the same
//!   collection of core sets).
//!
//! Every pod must have the same number of ToRs and every ToR the same number of hosts,
//! with no failed link and no parallel links. A group's class is then its source's
//! ToR's destination count, the destination counts of the other ToRs of the source's
//! pod, and those of every other pod, each as a sorted multiset of non-zero counts.
//!
//! Memory: two `u32` per host plus one per ToR.

use rocast_core::plan::topology::{NodeId, NodeRole, Topology};
use std::collections::BTreeMap;

/// The position of every host on a symmetric three-tier (or two-tier) Clos.
#[derive(Clone, Debug)]
pub struct ClosSymmetry {
    /// Per host: its ToR's index.
    tor_of_host: Vec<u32>,
    /// Per ToR index: its pod's index.
    pod_of_tor: Vec<u32>,
}

/// A group's class: (the source ToR's destinations, the other ToRs of the source's
/// pod, the other pods), every multiset sorted.
pub type GroupClass = (u32, Vec<u32>, Vec<Vec<u32>>);

fn sorted_unique(mut v: Vec<NodeId>) -> Option<Vec<NodeId>> {
    v.sort_unstable();
    let n = v.len();
    v.dedup();
    (v.len() == n).then_some(v)
}

impl ClosSymmetry {
    /// The symmetry of `topo`, if it is a fault-free Clos of the shape above.
    pub fn of(topo: &Topology) -> Option<ClosSymmetry> {
        if topo.links.iter().any(|l| l.failed) {
            return None;
        }
        let tier = |n: NodeId| match topo.roles[n as usize] {
            NodeRole::Host => None,
            NodeRole::Switch { tier } => Some(tier),
        };
        // Neighbours of `n` on tier `t` (sorted), refusing parallel links.
        let peers = |n: NodeId, t: Option<u8>| -> Option<Vec<NodeId>> {
            let all: Vec<NodeId> = topo.ports(n).iter().map(|&(_, p)| p).collect();
            let all = sorted_unique(all)?;
            Some(all.into_iter().filter(|&p| tier(p) == t).collect())
        };
        let mut tor_index: BTreeMap<NodeId, u32> = BTreeMap::new();
        let mut tor_of_host = Vec::with_capacity(topo.num_hosts());
        for h in 0..topo.num_hosts() as NodeId {
            let [(_, tor)] = topo.ports(h) else {
                return None;
            };
            if tier(*tor) != Some(0) {
                return None;
            }
            let next = tor_index.len() as u32;
            tor_of_host.push(*tor_index.entry(*tor).or_insert(next));
        }
        // Every tier-0 switch must hold hosts, and the same number of them.
        let tors: Vec<NodeId> = (0..topo.num_nodes() as NodeId)
            .filter(|&n| tier(n) == Some(0))
            .collect();
        if tors.len() != tor_index.len() {
            return None;
        }
        let per_tor = topo.num_hosts() / tors.len().max(1);
        let mut hosts_of = vec![0usize; tors.len()];
        for &t in &tor_of_host {
            hosts_of[t as usize] += 1;
        }
        if hosts_of.iter().any(|&c| c != per_tor) {
            return None;
        }
        // Pods: ToRs with the same aggregation set; each ToR links only to hosts and
        // its pod's aggregation switches, each of which links only to the pod's ToRs
        // and cores.
        let mut pod_by_aggs: BTreeMap<Vec<NodeId>, u32> = BTreeMap::new();
        let mut pod_of_tor = vec![0u32; tors.len()];
        let mut tors_in_pod: Vec<Vec<NodeId>> = Vec::new();
        for &t in &tors {
            let aggs = peers(t, Some(1))?;
            if peers(t, None)?.len() + aggs.len() != topo.ports(t).len() || aggs.is_empty() {
                return None;
            }
            let next = pod_by_aggs.len() as u32;
            let pod = *pod_by_aggs.entry(aggs).or_insert(next);
            if pod as usize == tors_in_pod.len() {
                tors_in_pod.push(Vec::new());
            }
            tors_in_pod[pod as usize].push(t);
            pod_of_tor[tor_index[&t] as usize] = pod;
        }
        let per_pod = tors_in_pod.first()?.len();
        let mut core_sets: Option<Vec<Vec<NodeId>>> = None;
        for (aggs, &pod) in &pod_by_aggs {
            let pod_tors = &tors_in_pod[pod as usize];
            if pod_tors.len() != per_pod {
                return None;
            }
            let mut cores_of_pod = Vec::with_capacity(aggs.len());
            for &a in aggs {
                let down = peers(a, Some(0))?;
                let up = peers(a, Some(2))?;
                if down != *pod_tors || down.len() + up.len() != topo.ports(a).len() {
                    return None;
                }
                cores_of_pod.push(up);
            }
            cores_of_pod.sort();
            match &core_sets {
                None => core_sets = Some(cores_of_pod),
                Some(c) if *c == cores_of_pod => {}
                Some(_) => return None,
            }
        }
        // Cores link only to aggregation switches.
        let cores_ok = (0..topo.num_nodes() as NodeId)
            .filter(|&n| tier(n) == Some(2))
            .all(|c| peers(c, Some(1)).is_some_and(|a| a.len() == topo.ports(c).len()));
        if !cores_ok || (0..topo.num_nodes() as NodeId).any(|n| tier(n).is_some_and(|t| t > 2)) {
            return None;
        }
        Some(ClosSymmetry {
            tor_of_host,
            pod_of_tor,
        })
    }

    /// The class of the group from host `source` to hosts `dests` (a destination equal
    /// to the source, or repeated, counts once). `None` when a member is not a host.
    pub fn class(&self, source: NodeId, dests: &[NodeId]) -> Option<GroupClass> {
        let tor = |h: NodeId| self.tor_of_host.get(h as usize).copied();
        let src_tor = tor(source)?;
        let src_pod = self.pod_of_tor[src_tor as usize];
        let mut uniq: Vec<NodeId> = dests.iter().copied().filter(|&d| d != source).collect();
        uniq.sort_unstable();
        uniq.dedup();
        let mut per_tor: BTreeMap<u32, u32> = BTreeMap::new();
        for d in uniq {
            *per_tor.entry(tor(d)?).or_insert(0) += 1;
        }
        let mut at_source = 0;
        let mut same_pod = Vec::new();
        let mut pods: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (t, n) in per_tor {
            let pod = self.pod_of_tor[t as usize];
            if t == src_tor {
                at_source = n;
            } else if pod == src_pod {
                same_pod.push(n);
            } else {
                pods.entry(pod).or_default().push(n);
            }
        }
        same_pod.sort_unstable();
        let mut others: Vec<Vec<u32>> = pods
            .into_values()
            .map(|mut v| {
                v.sort_unstable();
                v
            })
            .collect();
        others.sort();
        Some((at_source, same_pod, others))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peel::steiner_dp::exact_tree_dp;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};
    use rocast_core::plan::topology::TierSpec;
    use rocast_core::time::Duration;
    use rocast_sim::scenario::workload::sample_hosts;

    fn tier() -> TierSpec {
        TierSpec::new(100_000_000_000, Duration::from_ns(1000))
    }

    #[test]
    fn groups_of_one_class_have_one_optimum_on_seeded_fat_tree_groups() {
        // k=4: 16 hosts, 2 per ToR, 2 ToRs per pod, 4 pods. The exact optimum (the
        // subset DP) of every group must depend on its class alone.
        let t = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
        let sym = ClosSymmetry::of(&t).expect("a fault-free fat-tree is symmetric");
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut optimum: BTreeMap<GroupClass, usize> = BTreeMap::new();
        let mut repeats = 0;
        for i in 0..120u64 {
            let source = (rng.next_u64() % 16) as u32;
            let dests = sample_hosts(16, source, 1 + (i as u32 % 6), i);
            let class = sym.class(source, &dests).unwrap();
            let n = exact_tree_dp(&t, source, &dests).unwrap().arcs.len();
            if let Some(&m) = optimum.get(&class) {
                assert_eq!(m, n, "class {class:?}: {source} -> {dests:?}");
                repeats += 1;
            }
            optimum.insert(class, n);
        }
        // The check compared something: classes recur.
        assert!(repeats >= 40, "{repeats} repeated classes");
        assert!(optimum.len() >= 10, "{} classes", optimum.len());
    }

    #[test]
    fn classes_follow_pod_tor_and_host_swaps_and_nothing_else() {
        let t = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
        let sym = ClosSymmetry::of(&t).unwrap();
        // Hosts 0,1 | 2,3 in pod 0; 4,5 | 6,7 in pod 1; ...
        let c = |s, d: &[u32]| sym.class(s, d).unwrap();
        assert_eq!(c(0, &[1, 2, 4]), c(1, &[0, 3, 14]));
        assert_eq!(c(0, &[2, 3, 4]), c(2, &[0, 1, 9]));
        assert_eq!(c(0, &[1, 2, 4]), (1, vec![1], vec![vec![1]]));
        // Same counts, other places: a different problem.
        assert_ne!(c(0, &[2, 4]), c(0, &[4, 6]));
        assert_ne!(c(0, &[1]), c(0, &[2]));
        // The source and repeats count once.
        assert_eq!(c(0, &[0, 1, 1]), c(0, &[1]));
    }

    #[test]
    fn only_a_fault_free_regular_clos_is_symmetric() {
        let t = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
        let mut failed = t.clone();
        failed.links[20].failed = true;
        assert!(ClosSymmetry::of(&failed).is_none());
        // A leaf-spine is a one-pod Clos.
        let ls = Topology::leaf_spine(2, 4, 3, 0, tier(), tier(), tier()).unwrap();
        let s = ClosSymmetry::of(&ls).unwrap();
        assert_eq!(s.class(0, &[3, 6, 7]), Some((0, vec![1, 2], vec![])));
        // An extra ToR-core link breaks the pods' symmetry.
        let mut extra = t.clone();
        let (tor, core) = (16, t.num_nodes() as u32 - 1);
        extra.add_link(tor, core, tier());
        assert!(ClosSymmetry::of(&extra).is_none());
        // GPU servers (NICs as tier-0 switches) are not this shape.
        let g = Topology::fat_tree_with_gpus(4, 1, 2, tier(), tier(), tier(), tier()).unwrap();
        assert!(ClosSymmetry::of(&g).is_none());
    }
}
