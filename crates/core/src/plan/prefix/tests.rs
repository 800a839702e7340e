use super::*;
use crate::plan::multicast_tree::{layer_peeling_tree, symmetric_tree};
use crate::plan::topology::TierSpec;
use crate::time::Duration;
use proptest::prelude::*;

fn tier() -> TierSpec {
    TierSpec::new(100_000_000_000, Duration::from_ns(1000))
}

fn rendered(covers: &[Prefix], bits: u8) -> Vec<String> {
    covers.iter().map(|p| p.render(bits)).collect()
}

#[test]
fn the_papers_example_gives_1xx_and_01x() {
    let racks = [0b010, 0b011, 0b100, 0b101, 0b110, 0b111];
    let mut covers = rendered(&exact_cover(&racks, 8, 3), 3);
    covers.sort();
    assert_eq!(covers, ["01*", "1**"]);
}

#[test]
fn ids_that_name_no_rack_are_covered_for_free() {
    // k=6: 3 racks per pod in a 2-bit space. All three: one `**` packet (id 3 has no
    // rack), not `0*` and `10`.
    assert_eq!(rendered(&exact_cover(&[0, 1, 2], 3, 2), 2), ["**"]);
    // Racks 1 and 2 of 3: `01` and `1*` (id 3 is free; rack 0 is not a member).
    assert_eq!(rendered(&exact_cover(&[1, 2], 3, 2), 2), ["01", "1*"]);
    // Rack 2 alone: `1*` reaches it and nothing else.
    assert_eq!(rendered(&exact_cover(&[2], 3, 2), 2), ["1*"]);
    // 48 leaves in 6 bits: leaves 32..47 are the whole upper half's existing ids.
    let upper: Vec<u32> = (32..48).collect();
    assert_eq!(rendered(&exact_cover(&upper, 48, 6), 6), ["1*****"]);
    // With every id a rack, nothing changes.
    assert_eq!(exact_cover(&[0, 1, 2], 4, 2).len(), 2);
}

#[test]
fn rule_counts_are_k_minus_one() {
    for k in [8u32, 16, 32, 64, 128] {
        assert_eq!(static_rules(k / 2).len() as u32, k - 1, "k={k}");
    }
    // A leaf-spine with 48 leaves: blocks of a 6-bit space that hold a leaf.
    assert_eq!(id_bits(48), 6);
    assert_eq!(static_rules(48).len(), 1 + 2 + 3 + 6 + 12 + 24 + 48);
}

#[test]
fn header_fits_in_a_byte_or_two() {
    // k=128: 6 value bits + 3 length bits.
    assert_eq!(header_bits(id_bits(64)), 9);
    assert_eq!(header_bits(id_bits(32)), 5 + 3);
    assert_eq!(naive_entries(32), (1u128 << 32) - 1);
    assert_eq!(naive_entries(200), u128::MAX);
}

#[test]
fn bounded_cover_trades_packets_for_discards() {
    // Racks 0, 2, 5 of 8: exactly three singletons; with one packet the whole pod
    // (5 discards); with two, 0** and 101 (2 discards) or 0*0... the cheapest.
    let m = [0, 2, 5];
    assert_eq!(exact_cover(&m, 8, 3).len(), 3);
    let one = bounded_cover(&m, &[], 8, 3, 1).unwrap();
    assert_eq!(rendered(&one, 3), ["***"]);
    let two = bounded_cover(&m, &[], 8, 3, 2).unwrap();
    assert_eq!(rendered(&two, 3), ["0**", "101"]);
    // Rack 1 is forbidden (served by another plane): 0** is no longer allowed.
    let two = bounded_cover(&m, &[1], 8, 3, 2);
    assert_eq!(two, None);
    let three = bounded_cover(&m, &[1], 8, 3, 3).unwrap();
    assert_eq!(rendered(&three, 3), ["000", "010", "101"]);
    // Only existing racks count as discards: 6 racks, one packet covering all.
    let one = bounded_cover(&[0, 5], &[], 6, 3, 1).unwrap();
    assert_eq!(rendered(&one, 3), ["***"]);
}

#[test]
fn fat_tree_layout_has_one_pod_per_pod_and_63_rules_at_k64() {
    let t = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
    let l = PrefixLayout::from_topology(&t).unwrap();
    assert_eq!(l.rack_tier, 0);
    assert_eq!(l.pods.len(), 8);
    assert!(l
        .pods
        .iter()
        .all(|p| p.racks.len() == 4 && p.planes.len() == 4));
    assert_eq!(l.max_rules(), 7);
    let plane = l.pods[1].planes[0];
    let rules = l.rules(&t, plane);
    assert_eq!(rules.len(), 7);
    assert_eq!(rules[0].1.len(), 4, "the /0 rule reaches every rack");
    let t64 = Topology::fat_tree(64, 1, tier(), tier(), tier()).unwrap();
    assert_eq!(PrefixLayout::from_topology(&t64).unwrap().max_rules(), 63);
}

#[test]
fn gpu_leaf_spine_racks_are_the_leaves() {
    let t = Topology::leaf_spine(4, 6, 2, 8, tier(), tier(), tier()).unwrap();
    let l = PrefixLayout::from_topology(&t).unwrap();
    assert_eq!(l.rack_tier, 1);
    assert_eq!(l.pods.len(), 1);
    assert_eq!(l.pods[0].racks.len(), 6);
    assert_eq!(l.pods[0].planes.len(), 4);
}

#[test]
fn plan_of_a_symmetric_fat_tree_group() {
    // k=8: pods of 4 racks, 4 hosts per rack; pod p rack r hosts 16p+4r..
    let t = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
    let l = PrefixLayout::from_topology(&t).unwrap();
    // Source in pod 0 rack 0; destinations: pod 0 racks 1-3, pod 2 racks 1,2,3.
    let dests: Vec<NodeId> = [4, 8, 12, 32 + 4, 32 + 8, 32 + 12].to_vec();
    let tree = symmetric_tree(&t, 0, &dests).unwrap();
    let plan = plan_group(&t, &l, &tree, CoverPolicy::Exact).unwrap();
    // Pod 0: racks 1,2,3 → 01, 1*; pod 2 the same.
    assert_eq!(plan.packets.len(), 4);
    assert_eq!(plan.member_racks, 6);
    assert_eq!(plan.discarded_rack_copies, 0);
    assert!(plan.static_link_copies > plan.tree_link_copies);
    assert!(plan.programmable_link_copies < plan.static_link_copies);
    // Over-covering with one packet per plane: pod 2 sends its /0 block (rack 0
    // discards); pod 0 cannot, since rack 0 is the source's own (served on the way
    // up, so forbidden), and keeps its exact two.
    let over = plan_group(&t, &l, &tree, CoverPolicy::OverCover { max_prefixes: 1 }).unwrap();
    assert_eq!(over.packets.len(), 3, "{:?}", over.packets);
    assert_eq!(over.discarded_rack_copies, 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// With fewer racks than ids, an exact cover still reaches exactly the member
    /// racks (its blocks may add ids that name no rack), with disjoint blocks, and never
    /// more of them than the cover that treats every id as a rack; and it is the
    /// smallest: no cover with one block less reaches the members without another rack.
    #[test]
    fn exact_covers_use_missing_racks_for_free(
        members in proptest::collection::btree_set(0u32..32, 1..20),
        racks in 1u32..=32,
    ) {
        let m: Vec<u32> = members.iter().copied().filter(|&i| i < racks).collect();
        prop_assume!(!m.is_empty());
        let covers = exact_cover(&m, racks, 5);
        let mut covered = BTreeSet::new();
        for p in &covers {
            for id in p.first(5)..p.first(5) + p.size(5) {
                prop_assert!(covered.insert(id), "overlap at {id}");
            }
        }
        let reached: BTreeSet<u32> = covered.iter().copied().filter(|&i| i < racks).collect();
        let want: BTreeSet<u32> = m.iter().copied().collect();
        prop_assert_eq!(&reached, &want);
        prop_assert!(covers.len() <= exact_cover(&m, 32, 5).len());
        // Minimal: bounded_cover with every non-member rack forbidden finds no cover with
        // one block fewer.
        let forbidden: Vec<u32> = (0..racks).filter(|i| !want.contains(i)).collect();
        if covers.len() > 1 {
            let fewer = bounded_cover(&m, &forbidden, racks, 5, covers.len() as u32 - 1);
            prop_assert!(fewer.is_none(), "{:?} beats {:?}", fewer, covers);
        }
    }

    /// Exact covers are disjoint blocks whose union is exactly the members; bounded
    /// covers include every member, no forbidden id, and respect the budget.
    #[test]
    fn covers_cover(members in proptest::collection::btree_set(0u32..32, 1..20),
                    forbidden in proptest::collection::btree_set(0u32..32, 0..6),
                    budget in 1u32..6) {
        let m: Vec<u32> = members.iter().copied().collect();
        let covers = exact_cover(&m, 32, 5);
        let mut covered = BTreeSet::new();
        for p in &covers {
            for id in p.first(5)..p.first(5) + p.size(5) {
                prop_assert!(covered.insert(id), "overlap at {id}");
            }
        }
        prop_assert_eq!(&covered, &members);
        let f: Vec<u32> = forbidden.difference(&members).copied().collect();
        if let Some(b) = bounded_cover(&m, &f, 32, 5, budget) {
            prop_assert!(b.len() as u32 <= budget);
            for id in &m {
                prop_assert!(b.iter().any(|p| p.contains(*id, 5)));
            }
            for id in &f {
                prop_assert!(!b.iter().any(|p| p.contains(*id, 5)));
            }
        } else {
            prop_assert!(budget < covers.len() as u32);
        }
    }

    /// On random failures, a greedy tree's plan reaches every member rack once.
    #[test]
    fn plans_cover_the_tree(fail in 0.0f64..0.2, seed in 0u64..500,
                            picks in proptest::collection::vec(0u32..128, 1..30)) {
        let mut t = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
        t.fail_fraction(fail, seed).unwrap();
        let l = PrefixLayout::from_topology(&t).unwrap();
        let Ok(tree) = layer_peeling_tree(&t, 0, &picks) else { return Ok(()); };
        let plan = plan_group(&t, &l, &tree, CoverPolicy::Exact).unwrap();
        let mut reached = BTreeSet::new();
        for p in &plan.packets {
            let pod = &l.pods[p.pod as usize];
            for id in p.prefix.first(pod.bits)..p.prefix.first(pod.bits) + p.prefix.size(pod.bits) {
                prop_assert!(reached.insert((p.pod, id)));
            }
        }
        prop_assert_eq!(reached.len(), plan.member_racks);
        prop_assert_eq!(plan.discarded_rack_copies, 0);
    }
}
