use super::*;

fn floor_log2(n: u32) -> u32 {
    31 - n.leading_zeros()
}

/// A binary-tree rank's first send step, by walking to the root: each hop adds one,
/// and one more when the rank is its parent's second child.
fn binary_tree_offset(mut v: u32) -> u32 {
    let mut a = 0;
    while v > 0 {
        a += 1 + (v - 1) % 2;
        v = (v - 1) / 2;
    }
    a
}

/// RDMC's `test_pattern`, for every group size 2–64 and block count 1–32, every
/// scheme, root 0: the schedule is consistent and its length is the published one.
#[test]
fn every_schedule_is_consistent_for_groups_2_to_64_and_blocks_1_to_32() {
    for n in 2..=64u32 {
        for k in 1..=32u32 {
            for scheme in Scheme::ALL {
                let s = Schedule::new(scheme, n, 0, k).unwrap();
                if let Err(e) = check_schedule(&s) {
                    panic!("{scheme} n={n} blocks={k}: {e}");
                }
                let l = floor_log2(n);
                let want = match scheme {
                    Scheme::BinomialPipeline if n.is_power_of_two() => k + l - 1,
                    Scheme::BinomialPipeline => k + l,
                    Scheme::Chain | Scheme::Ring => k + n - 2,
                    Scheme::Sequential => k * (n - 1),
                    Scheme::BinomialTree => k * schedule::ceil_log2(n),
                    // The deepest offset (depth plus right turns) plus two steps
                    // per further block.
                    Scheme::BinaryTree => (1..n).map(binary_tree_offset).max().unwrap() + 2 * k - 2,
                    // Each tree's deepest offset (depth + popcount − 1 of a 1-indexed
                    // heap position) plus two substeps per further block, interleaved.
                    Scheme::DoubleBinaryTree => {
                        let deepest = (1..n)
                            .map(|p| floor_log2(p) + p.count_ones() - 1)
                            .max()
                            .unwrap();
                        (0..2u32)
                            .filter(|&t| (k + 1 - t) / 2 > 0)
                            .map(|t| 2 * (deepest + 2 * ((k + 1 - t) / 2 - 1)) + t + 1)
                            .max()
                            .unwrap()
                    }
                };
                assert_eq!(s.total_steps(), want, "{scheme} n={n} k={k}");
            }
        }
    }
}

/// NCCL's double binary tree forwards about one copy per block per rank: with an even
/// number of non-root ranks every rank is interior in at most one tree, so no rank sends
/// more than about k copies (a binary tree's interior ranks send 2k), and the root
/// sends each block once.
#[test]
fn double_binary_tree_halves_each_ranks_forwarding() {
    for (n, k) in [(9u32, 16u32), (17, 32), (64, 8), (33, 64)] {
        let d = Schedule::new(Scheme::DoubleBinaryTree, n, 0, k).unwrap();
        let b = Schedule::new(Scheme::BinaryTree, n, 0, k).unwrap();
        let most = |s: &Schedule| (0..n).map(|r| s.sends_of(r).len()).max().unwrap();
        assert_eq!(
            d.sends_of(0).len(),
            k as usize,
            "the root sends each block once"
        );
        assert!(most(&d) <= k as usize + 1, "n={n} k={k}: {}", most(&d));
        assert_eq!(most(&b), 2 * k as usize);
        // Both trees' interiors are disjoint: no rank forwards in both.
        for r in 1..n {
            let blocks: std::collections::BTreeSet<u32> =
                d.sends_of(r).iter().map(|(_, t)| t.block % 2).collect();
            assert!(blocks.len() <= 1, "rank {r} forwards in both trees");
        }
    }
}

#[test]
fn any_root_works_by_rotation() {
    for n in [2u32, 3, 7, 12, 16, 33] {
        for root in [1, n / 2, n - 1] {
            for scheme in Scheme::ALL {
                for k in [1u32, 5] {
                    let s = Schedule::new(scheme, n, root, k).unwrap();
                    check_schedule(&s)
                        .unwrap_or_else(|e| panic!("{scheme} n={n} root={root}: {e}"));
                    assert!(s.receives_of(root).is_empty());
                }
            }
        }
    }
}

#[test]
fn a_broken_schedule_is_caught() {
    // The checker must be able to fail: a chain that claims one step fewer leaves
    // the last rank without its last block.
    let s = Schedule::new(Scheme::Chain, 5, 0, 3).unwrap();
    let mut have_last = 0;
    for step in 0..s.total_steps() - 1 {
        if s.incoming(4, step).is_some() {
            have_last += 1;
        }
    }
    assert_eq!(have_last, 2);
}

#[test]
fn binomial_tree_for_eight_ranks_is_the_mpi_tree() {
    let s = Schedule::new(Scheme::BinomialTree, 8, 0, 1).unwrap();
    let got: Vec<_> = (0..3)
        .flat_map(|step| (0..8).filter_map(move |r| s.outgoing(r, step).map(|t| (step, r, t.peer))))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 0, 1),
            (1, 0, 2),
            (1, 1, 3),
            (2, 0, 4),
            (2, 1, 5),
            (2, 2, 6),
            (2, 3, 7)
        ]
    );
}

#[test]
fn binomial_pipeline_keeps_every_rank_busy_in_steady_state() {
    // RDMC §3.3: with 2^l ranks, in every step after the first l every non-root
    // rank receives a block, and every rank sends one except the root's partner of
    // the step (nobody sends to the root).
    let (n, k) = (16u32, 32u32);
    let s = Schedule::new(Scheme::BinomialPipeline, n, 0, k).unwrap();
    for step in 4..k {
        for r in 0..n {
            let partner_is_root = r ^ (1 << (step % 4)) == 0;
            assert_eq!(
                s.outgoing(r, step).is_some(),
                !partner_is_root,
                "rank {r} at {step}"
            );
            assert_eq!(s.incoming(r, step).is_some(), r != 0);
        }
    }
}

#[test]
fn twin_construction_pairs_ranks() {
    // n = 6: ⌊log2 6⌋ = 2, vertices 0..4; vertices 1 and 2 hold twins 4 and 5.
    let s = Schedule::new(Scheme::BinomialPipeline, 6, 0, 4).unwrap();
    assert_eq!(s.total_steps(), 4 + 2);
    let peers4 = s.peers_of(4);
    assert!(
        peers4.contains(&1),
        "rank 4 relays with its twin 1: {peers4:?}"
    );
}

#[test]
fn bad_parameters_are_errors() {
    assert_eq!(
        Schedule::new(Scheme::Chain, 1, 0, 1),
        Err(ScheduleError::GroupTooSmall(1))
    );
    assert_eq!(
        Schedule::new(Scheme::Chain, 4, 4, 1),
        Err(ScheduleError::BadRoot { root: 4, n: 4 })
    );
    assert_eq!(
        Schedule::new(Scheme::Chain, 4, 0, 0),
        Err(ScheduleError::NoBlocks)
    );
    assert!("bogus".parse::<Scheme>().is_err());
    for s in Scheme::ALL {
        assert_eq!(s.name().parse::<Scheme>().unwrap(), s);
    }
    // Out-of-range queries are None, not a panic.
    let s = Schedule::new(Scheme::BinomialPipeline, 6, 0, 2).unwrap();
    assert_eq!(s.outgoing(6, 0), None);
    assert_eq!(s.incoming(0, 1000), None);
}

/// The control channel's scheme codes are pinned: they are wire bytes a peer of
/// another build must read the same way.
#[test]
fn scheme_codes_are_pinned_and_round_trip() {
    assert_eq!(Scheme::ALL.map(Scheme::code), [0, 1, 2, 3, 4, 5, 6]);
    for s in Scheme::ALL {
        assert_eq!(Scheme::from_code(s.code()), Some(s));
    }
    assert_eq!(Scheme::from_code(7), None);
    assert_eq!(Scheme::from_code(255), None);
}

#[test]
fn binomial_pipeline_slack_is_rdmcs_formula_in_every_steady_step() {
    // RDMC §4.2: for n = 2^l, every steady step's average slack is 2(1 − (l−1)/(n−2)).
    for l in 2..=8u32 {
        let n = 1u32 << l;
        let s = Schedule::new(Scheme::BinomialPipeline, n, 3 % n, 40).unwrap();
        let want = 2.0 * (1.0 - f64::from(l - 1) / f64::from(n - 2));
        let v = s.average_slack_per_step();
        assert_eq!(v.len(), s.total_steps() as usize);
        for (j, a) in v.iter().enumerate().skip(l as usize - 1) {
            let a = a.unwrap_or_else(|| panic!("n {n} step {j}: no sender"));
            assert!((a - want).abs() < 1e-12, "n {n} step {j}: {a} != {want}");
        }
        // Filling the hypercube: the first step only the root sends.
        assert_eq!(v[0], None);
    }
    // A chain's relay passes each block on the step after it arrives.
    let c = Schedule::new(Scheme::Chain, 6, 0, 10).unwrap();
    assert!(c
        .average_slack_per_step()
        .iter()
        .flatten()
        .all(|&a| a == 1.0));
}
