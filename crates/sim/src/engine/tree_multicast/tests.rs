use super::*;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use rocast_core::plan::multicast_tree::{layer_peeling_tree, symmetric_tree};
use rocast_core::plan::prefix::{plan_group, CoverPolicy};
use rocast_core::plan::TierSpec;
use rocast_core::time::Duration;

fn tier() -> TierSpec {
    TierSpec::new(100_000_000_000, Duration::from_ns(1000))
}

/// What the fabric does with one first transmission: copies per host, discards.
#[derive(Debug, Default)]
struct Walk {
    delivered: BTreeMap<NodeId, u32>,
    discards: usize,
    link_copies: usize,
}

/// Follows every copy of one transmission through the switches' rules (the same
/// `PeelFabric::step` the engine runs, on the core's `PeelSwitch`), without queues.
fn walk(
    topo: &Topology,
    peel: &mut PeelFabric,
    f: &GroupForwarding,
    src: NodeId,
    send: &[u16],
) -> Walk {
    let group = Ipv4Address([239, 0, 0, 1]);
    peel.install(topo, group, f);
    let mut w = Walk::default();
    let mut todo: Vec<(NodeId, u16, u16)> = Vec::new();
    let arrive = |link: u32, next: NodeId| topo.port_of(next, link).expect("link at its end");
    for &l in send {
        // The source host: its label's hop (its only port).
        for &(p, out) in f.labels[l as usize]
            .hops
            .get(&src)
            .expect("source on every label")
        {
            let (link, next) = topo.ports(src)[p as usize];
            w.link_copies += 1;
            todo.push((next, arrive(link, next), out));
        }
    }
    while let Some((node, in_port, label)) = todo.pop() {
        if topo.is_host(node) {
            *w.delivered.entry(node).or_insert(0) += 1;
            continue;
        }
        let outs: Vec<(Hop, bool)> = match peel.step(f, node, in_port, group, label) {
            Step::Hops(h) => h.iter().map(|&h| (h, false)).collect(),
            Step::Peel => peel
                .actions()
                .iter()
                .map(|a| match *a {
                    PeelAction::Forward(p) => ((p, label), true),
                    PeelAction::Deliver(p) => ((p, label), false),
                })
                .collect(),
            Step::Discard => {
                w.discards += 1;
                continue;
            }
        };
        for ((p, out), by_rule) in outs {
            let (link, next) = topo.ports(node)[p as usize];
            if topo.links[link as usize].failed {
                // A static rule's port whose link is down: the copy goes nowhere, as
                // a discard (only an over-covered rack can sit behind it).
                assert!(by_rule, "a tree copy took failed link {link}");
                w.discards += 1;
                continue;
            }
            w.link_copies += 1;
            todo.push((next, arrive(link, next), out));
        }
    }
    peel.remove(group, f);
    w
}

fn check_delivers_once(w: &Walk, dests: &[NodeId]) {
    let want: BTreeMap<NodeId, u32> = dests.iter().map(|&d| (d, 1)).collect();
    assert_eq!(w.delivered, want, "every member exactly once, nobody else");
}

#[test]
fn per_group_tree_uses_each_tree_link_once() {
    let topo = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
    let dests = [1, 2, 4, 10];
    let tree = symmetric_tree(&topo, 0, &dests).unwrap();
    let f = GroupForwarding::group_tree(&topo, &tree).unwrap();
    let mut peel = PeelFabric::default();
    let w = walk(&topo, &mut peel, &f, 0, &f.static_send);
    check_delivers_once(&w, &dests);
    assert_eq!(w.link_copies, tree.arcs.len());
    assert_eq!(w.discards, 0);
}

#[test]
fn peel_packets_climb_separately_and_match_the_plan() {
    // k=8 fat-tree: 4 racks per pod, 4 hosts per rack. Source host 0 (pod 0 rack 0);
    // members in its own rack, in pod 0 racks 1 and 2, and in pod 1 racks 0, 1, 3.
    let topo = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
    let layout = PrefixLayout::from_topology(&topo).unwrap();
    let mut peel = PeelFabric::new(&topo, &layout).unwrap();
    assert_eq!(
        peel.rule_count(),
        8 * 4 * 7,
        "k − 1 = 7 rules at each of 32 aggregation switches"
    );
    let dests: Vec<NodeId> = vec![1, 5, 9, 16, 20, 28];
    let tree = symmetric_tree(&topo, 0, &dests).unwrap();
    for (policy, packets, discards) in [
        (CoverPolicy::Exact, 4, 0),
        // Pod 0 cannot take ** (the source's rack 00 is on the tree without a plane),
        // so 01 and 10 stay exact; pod 1 takes ** and rack 10 discards.
        (CoverPolicy::OverCover { max_prefixes: 1 }, 3, 1),
    ] {
        let plan = plan_group(&topo, &layout, &tree, policy).unwrap();
        assert_eq!(plan.packets.len(), packets, "{policy:?}");
        assert_eq!(plan.discarded_rack_copies, discards, "{policy:?}");
        let f = GroupForwarding::peel(&topo, &layout, &tree, &plan, None).unwrap();
        let w = walk(&topo, &mut peel, &f, 0, &f.static_send);
        check_delivers_once(&w, &dests);
        assert_eq!(w.discards, plan.discarded_rack_copies, "{policy:?}");
        // Link copies: the plan's count, which includes a copy per discarding ToR.
        assert_eq!(w.link_copies, plan.static_link_copies, "{policy:?}");
        assert!(f.core_send.is_empty());
    }
}

#[test]
fn programmable_core_sends_one_copy_through_the_core() {
    let topo = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
    let layout = PrefixLayout::from_topology(&topo).unwrap();
    let mut peel = PeelFabric::new(&topo, &layout).unwrap();
    // Pod 1 racks 0 and 2 (two exact packets), pod 2 rack 1, and pod 0 rack 1.
    let dests: Vec<NodeId> = vec![4, 16, 24, 36];
    let tree = symmetric_tree(&topo, 0, &dests).unwrap();
    let plan = plan_group(&topo, &layout, &tree, CoverPolicy::Exact).unwrap();
    assert_eq!(plan.packets.len(), 4);
    let f =
        GroupForwarding::peel(&topo, &layout, &tree, &plan, Some(CoreCopy::RemotePods)).unwrap();
    let stat = walk(&topo, &mut peel, &f, 0, &f.static_send);
    check_delivers_once(&stat, &dests);
    // One copy for the core, one for the source pod's own plane.
    assert_eq!(f.core_send.len(), 2);
    let core = walk(&topo, &mut peel, &f, 0, &f.core_send);
    check_delivers_once(&core, &dests);
    // By hand: the core packet climbs 3 links, the core sends 3 copies, the planes
    // 2 + 1 rack copies and the racks 3 host copies; the pod-0 packet climbs 2 links
    // and descends 2. Sixteen, against the tree's 13.
    assert_eq!(core.link_copies, 16);
    assert_eq!(plan.tree_link_copies, 13);
    assert_eq!(core.link_copies, plan.programmable_link_copies);
    assert!(core.link_copies < stat.link_copies);
    assert_eq!(stat.link_copies, plan.static_link_copies);
    // PEEL 3.3's single copy: the pod-0 packet rides the core copy and the core sends
    // it back down the link it climbed: the source's NIC sends one copy, and the
    // pod-0 packet's own two climbing links become one descending link. Fifteen.
    let single =
        GroupForwarding::peel(&topo, &layout, &tree, &plan, Some(CoreCopy::Single)).unwrap();
    assert_eq!(single.core_send.len(), 1, "a single copy from the source");
    let one = walk(&topo, &mut peel, &single, 0, &single.core_send);
    check_delivers_once(&one, &dests);
    assert_eq!(one.link_copies, 15);
    assert_eq!(one.discards, 0);
}

#[test]
fn gpu_servers_deliver_through_the_nic() {
    // Leaf–spine, 2 servers per leaf, 4 GPUs each; the source's server peers too.
    let topo = Topology::leaf_spine(4, 6, 2, 4, tier(), tier(), tier()).unwrap();
    let layout = PrefixLayout::from_topology(&topo).unwrap();
    let mut peel = PeelFabric::new(&topo, &layout).unwrap();
    let dests: Vec<NodeId> = vec![1, 2, 5, 9, 10, 11, 30, 47];
    let tree = symmetric_tree(&topo, 0, &dests).unwrap();
    let plan = plan_group(&topo, &layout, &tree, CoverPolicy::Exact).unwrap();
    let f =
        GroupForwarding::peel(&topo, &layout, &tree, &plan, Some(CoreCopy::RemotePods)).unwrap();
    let w = walk(&topo, &mut peel, &f, 0, &f.static_send);
    check_delivers_once(&w, &dests);
    assert!(
        f.core_send.is_empty(),
        "a leaf–spine has no tier above its planes"
    );
}

#[test]
fn random_groups_on_failed_fabrics_deliver_exactly_once() {
    let mut checked = 0;
    for seed in 0..24u64 {
        let mut topo = if seed % 2 == 0 {
            Topology::fat_tree_with_gpus(8, 1, 2, tier(), tier(), tier(), tier()).unwrap()
        } else {
            Topology::leaf_spine(6, 12, 2, 0, tier(), tier(), tier()).unwrap()
        };
        topo.fail_fraction(0.08, seed).unwrap();
        let layout = PrefixLayout::from_topology(&topo).unwrap();
        let mut peel = PeelFabric::new(&topo, &layout).unwrap();
        let hosts = topo.num_hosts() as u32;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = 2 + (rand_core::RngCore::next_u32(&mut rng) % 20);
        let dests = crate::scenario::workload::sample_hosts(hosts, 0, n, seed);
        let Ok(tree) = layer_peeling_tree(&topo, 0, &dests) else {
            continue; // a destination cut off by the failures
        };
        for policy in [
            CoverPolicy::Exact,
            CoverPolicy::OverCover { max_prefixes: 1 },
        ] {
            let plan = plan_group(&topo, &layout, &tree, policy).unwrap();
            for mode in [CoreCopy::RemotePods, CoreCopy::Single] {
                let f = GroupForwarding::peel(&topo, &layout, &tree, &plan, Some(mode)).unwrap();
                for send in [&f.static_send, &f.core_send] {
                    if send.is_empty() {
                        continue;
                    }
                    let w = walk(&topo, &mut peel, &f, 0, send);
                    check_delivers_once(&w, &tree.destinations);
                    assert_eq!(
                        w.discards, plan.discarded_rack_copies,
                        "seed {seed} {policy:?} {mode:?}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 80, "only {checked} walks");
}
