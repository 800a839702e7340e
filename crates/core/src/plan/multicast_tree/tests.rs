use super::*;
use crate::plan::topology::TierSpec;
use crate::time::Duration;
use proptest::prelude::*;

fn tier() -> TierSpec {
    TierSpec::new(100_000_000_000, Duration::from_ns(1000))
}

fn leaf_spine(spines: u32, leaves: u32, hosts: u32) -> Topology {
    Topology::leaf_spine(spines, leaves, hosts, 0, tier(), tier(), tier()).unwrap()
}

fn fat_tree(k: u32) -> Topology {
    Topology::fat_tree(k, 1, tier(), tier(), tier()).unwrap()
}

/// Node id of leaf `l` in `leaf_spine(spines, leaves, hosts)`.
fn leaf(leaves_hosts: u32, l: u32) -> NodeId {
    leaves_hosts + l
}

#[test]
fn symmetric_fat_tree_tree_is_the_hand_counted_optimum() {
    // k=4: 16 hosts, 2 per edge; pod p edge e holds hosts 4p+2e, 4p+2e+1.
    let t = fat_tree(4);
    let dests = [2, 4, 10]; // same pod other rack, pod 1 rack 0, pod 2 rack 1
    let tree = symmetric_tree(&t, 0, &dests).unwrap();
    tree.validate(&t).unwrap();
    // h0-e00, e00-a00, a00-e01, e01-h2, a00-c0, c0-a10, a10-e10, e10-h4,
    // c0-a20, a20-e21, e21-h10.
    assert_eq!(tree.arcs.len(), 11);
    assert_eq!(tree.switches(&t), 8);
    assert_eq!(tree.depth(), 6);
    let lp = layer_peeling_tree(&t, 0, &dests).unwrap();
    lp.validate(&t).unwrap();
    assert_eq!(
        lp.arcs.len(),
        11,
        "the greedy is optimal on a symmetric fat-tree too"
    );
}

#[test]
fn symmetric_tree_within_one_rack_does_not_climb() {
    let t = fat_tree(4);
    let tree = symmetric_tree(&t, 0, &[1]).unwrap();
    tree.validate(&t).unwrap();
    assert_eq!(tree.arcs.len(), 2);
    assert_eq!(tree.summary(&t).unwrap().lower_bound, 2);
}

#[test]
fn leaf_spine_tree_meets_the_lemma_2_1_count() {
    let t = leaf_spine(4, 6, 3);
    // Source host 0 on leaf 0; destinations: 2 on leaf 0, all hosts of leaves 2..6.
    let mut dests = vec![1, 2];
    dests.extend(6..18);
    let tree = symmetric_tree(&t, 0, &dests).unwrap();
    tree.validate(&t).unwrap();
    // host→leaf0, leaf0→spine, spine→4 leaves, 14 destination host links.
    assert_eq!(tree.arcs.len(), 1 + 1 + 4 + 14);
    assert_eq!(tree.switches(&t), 6);
}

#[test]
fn layer_peeling_picks_the_spine_that_covers_most_leaves() {
    // 3 spines, 4 leaves, 1 host per leaf; source on leaf 0, destinations on 1..4.
    let mut t = leaf_spine(3, 4, 1);
    let s = |i: u32| 4 + 4 + i;
    // Spine 0 reaches only leaf 1, spine 1 leaves 2 and 3, spine 2 all leaves.
    for l in [2, 3] {
        t.fail_link(leaf(4, l), s(0)).unwrap();
    }
    t.fail_link(leaf(4, 1), s(1)).unwrap();
    let tree = layer_peeling_tree(&t, 0, &[1, 2, 3]).unwrap();
    tree.validate(&t).unwrap();
    assert_eq!(tree.arcs.len(), 1 + 1 + 3 + 3);
    assert!(tree
        .arcs
        .iter()
        .any(|a| a.parent == leaf(4, 0) && a.child == s(2)));
    assert!(matches!(
        symmetric_tree(&t, 0, &[1, 2, 3]),
        Err(TreeError::NotSymmetric(_))
    ));
}

#[test]
fn layer_peeling_on_a_set_cover_instance_uses_two_spines() {
    // No spine reaches every destination leaf: the best tree needs two spines.
    let mut t = leaf_spine(3, 5, 1);
    let s = |i: u32| 5 + 5 + i;
    // spine 0: leaves 1,2; spine 1: leaves 3,4; spine 2: leaves 2,3.
    for (l, sp) in [(3, 0), (4, 0), (1, 1), (2, 1), (1, 2), (4, 2)] {
        t.fail_link(leaf(5, l), s(sp)).unwrap();
    }
    let tree = layer_peeling_tree(&t, 0, &[1, 2, 3, 4]).unwrap();
    tree.validate(&t).unwrap();
    // host→leaf0, leaf0→2 spines, 4 spine→leaf, 4 leaf→host.
    assert_eq!(tree.arcs.len(), 1 + 2 + 4 + 4);
}

#[test]
fn unreachable_and_malformed_inputs_are_errors() {
    let mut t = leaf_spine(2, 3, 1);
    for sp in 0..2 {
        t.fail_link(leaf(3, 2), 3 + 3 + sp).unwrap();
    }
    assert_eq!(
        layer_peeling_tree(&t, 0, &[1, 2]),
        Err(TreeError::Unreachable(2))
    );
    let routes = Routes::compute(&t).unwrap();
    assert_eq!(
        hop_by_hop_tree(&t, &routes, 0, &[1, 2], &|_, _| 0),
        Err(TreeError::Unreachable(2))
    );
    assert_eq!(layer_peeling_tree(&t, 0, &[3]), Err(TreeError::NotAHost(3)));
    assert_eq!(
        layer_peeling_tree(&t, 0, &[99]),
        Err(TreeError::NoSuchNode(99))
    );
    assert_eq!(
        layer_peeling_tree(&t, 0, &[0]),
        Err(TreeError::NoDestinations)
    );
}

#[test]
fn hop_by_hop_prefers_least_used_then_on_tree_ports() {
    let t = leaf_spine(3, 4, 2);
    let routes = Routes::compute(&t).unwrap();
    let leaf0 = leaf(8, 0);
    // Leaf 0's ports: 2 hosts then spines 0,1,2. Load spines 0 and 1.
    let load = |sw: NodeId, p: u16| if sw == leaf0 && p < 4 { 5 } else { 0 };
    let tree = hop_by_hop_tree(&t, &routes, 0, &[1, 2, 4, 6], &load).unwrap();
    tree.validate(&t).unwrap();
    let spine2 = 8 + 4 + 2;
    assert!(tree
        .arcs
        .iter()
        .any(|a| a.parent == leaf0 && a.child == spine2));
    // One uplink for all members: the on-tree rule.
    assert_eq!(tree.arcs.iter().filter(|a| a.parent == leaf0).count(), 2);
    assert_eq!(tree.arcs.len(), 1 + 1 + 1 + 3 + 3);
}

#[test]
fn a_broken_tree_fails_validation() {
    let t = fat_tree(4);
    let mut tree = symmetric_tree(&t, 0, &[4]).unwrap();
    let last = tree.arcs.pop().unwrap();
    assert!(tree.validate(&t).is_err());
    tree.arcs.push(last);
    tree.arcs.push(TreeArc {
        parent: 4,
        child: 5,
        link: 0,
    });
    assert!(tree.validate(&t).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// On random failures every algorithm returns a valid tree no smaller than the lower
    /// bound, the greedy stays within Lemma 2.3's |D|·F, and on a fault-free fabric
    /// the symmetric construction is never beaten.
    #[test]
    fn trees_are_valid_and_bounded(
        fat in any::<bool>(),
        fail in 0.0f64..0.3,
        seed in 0u64..1000,
        src in 0u32..1000,
        picks in proptest::collection::vec(0u32..1000, 1..12),
    ) {
        let mut t = if fat { fat_tree(4) } else { leaf_spine(4, 6, 3) };
        let h = t.num_hosts() as u32;
        let src = src % h;
        let dests: Vec<NodeId> = picks.iter().map(|p| p % h).collect();
        let Ok(sym) = symmetric_tree(&t, src, &dests) else { return Ok(()); };
        let lp0 = layer_peeling_tree(&t, src, &dests).unwrap();
        prop_assert!(sym.arcs.len() <= lp0.arcs.len());
        t.fail_fraction(fail, seed).unwrap();
        let routes = Routes::compute(&t).unwrap();
        match layer_peeling_tree(&t, src, &dests) {
            Ok(lp) => {
                lp.validate(&t).unwrap();
                let s = lp.summary(&t).unwrap();
                prop_assert!(s.links >= s.lower_bound);
                let dist = hop_distances(&t, src);
                let f = farthest(&dist, &lp.destinations).unwrap() as usize;
                prop_assert!(s.links <= lp.destinations.len() * f);
                if let Ok(hb) = hop_by_hop_tree(&t, &routes, src, &dests, &|_, _| 0) {
                    hb.validate(&t).unwrap();
                    prop_assert!(hb.arcs.len() >= s.lower_bound);
                }
            }
            Err(TreeError::Unreachable(_)) => {}
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}
