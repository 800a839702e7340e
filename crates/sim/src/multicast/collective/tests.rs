use super::*;
use crate::scenario::topology::fabric_with;

/// A k=4 fat-tree (16 hosts, 2 per rack) with the given overrides.
fn fabric(extra: &[&str]) -> (Topology, EngineConfig) {
    let mut sets = vec!["topology.kind=\"fat-tree\"", "topology.k=4", "nic.mtu=4096"];
    sets.extend_from_slice(extra);
    fabric_with(&sets).unwrap()
}

fn quick() -> CollectiveSettings {
    CollectiveSettings {
        setup_mean: Duration::from_us(200),
        setup_sd: Duration::from_us(50),
        ..Default::default()
    }
}

/// Two overlapping jobs: one from host 0 to 8 hosts in three pods, one from host 5.
fn two_jobs(bytes: u64) -> Vec<BroadcastJob> {
    vec![
        BroadcastJob {
            start_ps: 0,
            members: vec![0, 1, 2, 3, 4, 6, 9, 12, 14],
            bytes,
        },
        BroadcastJob {
            start_ps: 20_000_000,
            members: vec![5, 7, 8, 10, 11, 13, 15],
            bytes,
        },
    ]
}

/// The time one copy of `bytes` needs on a 100 Gb/s link (payload only): no scheme
/// can beat it.
fn wire_floor_ps(bytes: u64) -> u64 {
    bytes * 8 * 1000 / 100
}

#[test]
fn every_scheme_completes_overlapping_jobs() {
    let (topo, cfg) = fabric(&[]);
    let jobs = two_jobs(1 << 20);
    let mut cct = BTreeMap::new();
    for scheme in CollectiveScheme::ALL {
        let out = run_collectives(topo.clone(), cfg.clone(), &jobs, scheme, &quick()).unwrap();
        assert_eq!(out.cct_ps.len(), 2);
        for &c in &out.cct_ps {
            assert!(
                c > wire_floor_ps(1 << 20),
                "{scheme:?}: {c} ps beats the wire"
            );
        }
        assert_eq!(out.drops, 0, "{scheme:?}: lossless fabric");
        cct.insert(scheme, out);
    }
    let peel = &cct[&CollectiveScheme::Peel];
    let optimal = &cct[&CollectiveScheme::Optimal];
    let orca = &cct[&CollectiveScheme::Orca];
    // Orca waits for its controller; its tree is the optimal one.
    for i in 0..2 {
        assert!(orca.cct_ps[i] >= orca.setup_ps[i] + wire_floor_ps(1 << 20));
    }
    // PEEL's copies climb separately: more bytes on switch links than the optimal
    // tree, never fewer.
    assert!(peel.switch_tx_bytes > optimal.switch_tx_bytes);
    assert!(peel.packets_per_message > optimal.packets_per_message);
    assert_eq!(peel.tree.repair_copies, 0, "nothing lost, nothing repaired");
    assert_eq!(peel.tree.stray_copies, 0);
    assert!(peel.tree.feedback_in > 0 && peel.tree.feedback_to_source > 0);
    assert!(
        peel.tree.feedback_to_source < peel.tree.feedback_in,
        "the source's NIC aggregates receivers' ACKs"
    );
    // The application-layer schemes move the message host to host.
    let ring = &cct[&CollectiveScheme::Ring];
    assert!(ring.host_tx_bytes > optimal.host_tx_bytes * 4);
}

#[test]
fn programmable_cores_take_over_after_the_set_up_delay() {
    let (topo, cfg) = fabric(&[]);
    let jobs = two_jobs(4 << 20);
    let s = quick();
    let peel =
        run_collectives(topo.clone(), cfg.clone(), &jobs, CollectiveScheme::Peel, &s).unwrap();
    let cores = run_collectives(topo, cfg, &jobs, CollectiveScheme::PeelCores, &s).unwrap();
    assert_eq!(peel.tree.core_copies, 0);
    assert!(cores.tree.core_copies > 0, "{:?}", cores.tree);
    assert!(cores.tree.label_copies < peel.tree.label_copies);
    assert!(cores.switch_tx_bytes < peel.switch_tx_bytes);
}

#[test]
fn lost_packets_are_repaired_to_the_receivers_that_miss_them() {
    let (topo, cfg) = fabric(&["topology.link_loss=0.002"]);
    let jobs = two_jobs(1 << 20);
    for scheme in [CollectiveScheme::Peel, CollectiveScheme::Optimal] {
        let out = run_collectives(topo.clone(), cfg.clone(), &jobs, scheme, &quick()).unwrap();
        assert!(out.drops > 0, "{scheme:?}: the loss must bite");
        assert!(out.retransmitted > 0, "{scheme:?}");
        assert!(out.tree.repair_copies > 0, "{scheme:?}: {:?}", out.tree);
        assert!(
            out.tree.repair_copies < out.retransmitted * 8,
            "{scheme:?}: repairs go to the laggards, not to all 8 receivers"
        );
    }
}

#[test]
fn over_cover_discards_are_counted_and_never_delivered() {
    // k=8: pod 1 holds hosts 16..32, four per rack. Members in its racks 00 and 11:
    // exactly two packets, or one "**" that racks 01 and 10 discard.
    let (topo, cfg) = fabric(&["topology.k=8"]);
    let jobs = vec![BroadcastJob {
        start_ps: 0,
        members: vec![0, 16, 28],
        bytes: 256 << 10,
    }];
    let mut s = quick();
    let exact =
        run_collectives(topo.clone(), cfg.clone(), &jobs, CollectiveScheme::Peel, &s).unwrap();
    assert_eq!(exact.packets_per_message, 2);
    assert_eq!(exact.tree.over_cover_discards, 0);
    s.cover = CoverPolicy::OverCover { max_prefixes: 1 };
    let over = run_collectives(topo, cfg, &jobs, CollectiveScheme::Peel, &s).unwrap();
    assert_eq!(over.packets_per_message, 1);
    let packets = over.tree.full_transmissions;
    assert_eq!(
        over.tree.over_cover_discards,
        2 * packets,
        "two racks discard every packet"
    );
    assert_eq!(over.tree.stray_copies, 0);
    assert!(
        over.host_tx_bytes < exact.host_tx_bytes,
        "one copy leaves the source, not two"
    );
}

#[test]
fn setup_delays_are_seeded_and_truncated_at_zero() {
    let s = CollectiveSettings::default();
    let a: Vec<u64> = (0..200).map(|i| setup_delay(&s, i)).collect();
    let b: Vec<u64> = (0..200).map(|i| setup_delay(&s, i)).collect();
    assert_eq!(a, b);
    let mean = a.iter().sum::<u64>() as f64 / 200.0 / 1e9;
    assert!((8.5..11.5).contains(&mean), "mean {mean} ms");
    assert!(a.contains(&0) || a.iter().all(|&d| d > 0));
}

#[test]
fn poisson_jobs_honour_locality_and_load() {
    let jobs = poisson_broadcasts(
        1024,
        8,
        512,
        2 << 20,
        100,
        0.3,
        100_000_000_000,
        7,
        &JobPlacement::Consecutive,
    )
    .unwrap();
    assert_eq!(jobs.len(), 100);
    let mut roots = std::collections::BTreeSet::new();
    for j in &jobs {
        assert_eq!(j.members.len(), 512);
        // A block of whole servers from a server boundary, any member the root.
        let mut sorted = j.members.clone();
        sorted.sort_unstable();
        let first = (0..512)
            .map(|g| sorted[g])
            .find(|&h| !sorted.contains(&((h + 1023) % 1024)))
            .expect("a wrapping block has a first host");
        assert_eq!(first % 8, 0, "jobs start on a server boundary");
        let block: std::collections::BTreeSet<u32> = (0..512).map(|g| (first + g) % 1024).collect();
        assert_eq!(block, sorted.iter().copied().collect(), "consecutive GPUs");
        roots.insert((j.members[0] + 1024 - first) % 1024);
    }
    assert!(roots.len() > 10, "roots drawn across the block: {roots:?}");
    // λ = 0.3 × 128 × 12.5 GB/s / (2 MiB × 63): mean gap ≈ 277 µs.
    let gap = jobs.last().unwrap().start_ps as f64 / 100.0 / 1e6;
    assert!((200.0..360.0).contains(&gap), "mean gap {gap} µs");
    assert!(poisson_broadcasts(16, 1, 1, 1, 1, 0.3, 1, 1, &JobPlacement::Consecutive).is_err());
    assert!(poisson_broadcasts(16, 1, 4, 1, 1, 0.0, 1, 1, &JobPlacement::Consecutive).is_err());
}

#[test]
fn a_lone_job_starting_later_still_runs() {
    // The engine idles until the job's start: the driver must move its own clock.
    let (topo, cfg) = fabric(&[]);
    let jobs = vec![BroadcastJob {
        start_ps: 50_000_000,
        members: vec![3, 0, 9, 14],
        bytes: 64 << 10,
    }];
    for scheme in [
        CollectiveScheme::Ring,
        CollectiveScheme::BinaryTree,
        CollectiveScheme::Peel,
    ] {
        let out = run_collectives(topo.clone(), cfg.clone(), &jobs, scheme, &quick()).unwrap();
        assert!(out.cct_ps[0] > wire_floor_ps(64 << 10), "{scheme:?}");
        assert!(
            out.cct_ps[0] < 1_000_000_000,
            "{scheme:?}: CCT counts from the job's start"
        );
    }
}

#[test]
fn peel_with_switch_feedback_aggregation_spares_the_source_link() {
    let (topo, cfg) = fabric(&[]);
    let jobs = two_jobs(1 << 20);
    let s = quick();
    let host =
        run_collectives(topo.clone(), cfg.clone(), &jobs, CollectiveScheme::Peel, &s).unwrap();
    let agg = run_collectives(topo, cfg, &jobs, CollectiveScheme::PeelAgg, &s).unwrap();
    // Host aggregation: every receiver's ACK crosses the source's link.
    assert_eq!(host.tree.switch_feedback_to_source, 0);
    // Switch aggregation: the fabric merges them; far fewer reach the source.
    assert_eq!(agg.tree.feedback_in, 0);
    assert!(agg.tree.switch_feedback_to_source > 0);
    assert!(
        agg.tree.switch_feedback_to_source * 3 < host.tree.feedback_in,
        "{} vs {}",
        agg.tree.switch_feedback_to_source,
        host.tree.feedback_in
    );
    // Same data plane.
    assert_eq!(agg.tree.label_copies, host.tree.label_copies);
}

#[test]
fn switch_aggregated_groups_recover_losses_through_the_fabric() {
    let (topo, cfg) = fabric(&["topology.link_loss=0.002"]);
    let jobs = two_jobs(1 << 20);
    let out = run_collectives(topo, cfg, &jobs, CollectiveScheme::PeelAgg, &quick()).unwrap();
    assert!(out.drops > 0 && out.retransmitted > 0);
    assert!(out.tree.cepheus_retransmissions > 0, "{:?}", out.tree);
    assert_eq!(
        out.tree.repair_copies, 0,
        "no source-side repairs in this mode"
    );
}

#[test]
fn bin_packed_jobs_take_the_fewest_racks_and_pods() {
    // k=4: 4 pods of 2 racks of 2 hosts.
    let (topo, _) = fabric(&[]);
    let map = RackMap::of(&topo).unwrap();
    assert_eq!(map.pods.len(), 4);
    assert!(map
        .pods
        .iter()
        .all(|p| p.len() == 2 && p.iter().all(|r| r.len() == 2)));
    let rack_of = |h: u32| {
        map.pods
            .iter()
            .enumerate()
            .flat_map(|(p, racks)| racks.iter().enumerate().map(move |(r, hs)| (p, r, hs)))
            .find(|(_, _, hs)| hs.contains(&h))
            .map(|(p, r, _)| (p, r))
            .unwrap()
    };
    let placed = JobPlacement::BinPacked(map.clone());
    for (gpus, racks, pods) in [
        (2u32, 1usize, 1usize),
        (3, 2, 1),
        (4, 2, 1),
        (5, 3, 2),
        (8, 4, 2),
        (16, 8, 4),
    ] {
        let jobs =
            poisson_broadcasts(16, 1, gpus, 1 << 20, 40, 0.3, 100_000_000_000, 3, &placed).unwrap();
        let mut starts = std::collections::BTreeSet::new();
        for j in &jobs {
            assert_eq!(j.members.len(), gpus as usize);
            let r: std::collections::BTreeSet<_> = j.members.iter().map(|&h| rack_of(h)).collect();
            let p: std::collections::BTreeSet<_> = r.iter().map(|&(p, _)| p).collect();
            assert_eq!(
                (r.len(), p.len()),
                (racks, pods),
                "{gpus} hosts: {:?}",
                j.members
            );
            starts.insert(*j.members.iter().min().unwrap());
        }
        // The window is drawn, not fixed (except when the job fills the fabric).
        assert_eq!(starts.len() > 1, gpus < 16, "{gpus}: {starts:?}");
    }
    // Aligned windows start at multiples of their (power-of-two) length: a 2-rack job
    // fills a pod, a 5-host job (3 racks, 2 pods) starts at an even pod.
    let aligned = JobPlacement::Aligned(map.clone());
    for (gpus, unit) in [(3u32, 4u32), (5, 8), (2, 2)] {
        let jobs = poisson_broadcasts(16, 1, gpus, 1 << 20, 40, 0.3, 100_000_000_000, 3, &aligned)
            .unwrap();
        let order: Vec<u32> = map.pods.iter().flatten().flatten().copied().collect();
        let pos = |h: &u32| order.iter().position(|o| o == h).unwrap() as u32;
        let firsts: std::collections::BTreeSet<u32> = jobs
            .iter()
            .map(|j| j.members.iter().map(pos).min().unwrap())
            .collect();
        assert!(firsts.iter().all(|f| f % unit == 0), "{gpus}: {firsts:?}");
        assert!(firsts.len() > 1);
    }
    // Consecutive placement ignores boundaries: 3 hosts from host 1 span 2 racks.
    let jobs = poisson_broadcasts(
        16,
        1,
        3,
        1 << 20,
        40,
        0.3,
        100_000_000_000,
        3,
        &JobPlacement::Consecutive,
    )
    .unwrap();
    assert!(jobs
        .iter()
        .any(|j| j.members.iter().min().unwrap() % 2 == 1));
}

/// Orca's host-side agents: in each rack with two members, the ToR sends one copy to
/// the lower-numbered member, whose NIC sends one unicast copy per other member;
/// without agents the ToR fans out itself. Either way every member gets the whole message once.
#[test]
fn orca_agents_relay_each_racks_fan_out() {
    let (topo, cfg) = fabric(&[]);
    let mtu_packets = (1u64 << 20).div_ceil(4096);
    // Job 0: source 0 and members 1, 2, 3, 4, 6, 9, 12, 14 (racks of two hosts):
    // only the rack {2, 3} has two members below its ToR, so it alone has an agent.
    let jobs = &two_jobs(1 << 20)[..1];
    let run = |agent: bool, fpr: f64| {
        let s = CollectiveSettings {
            orca_agent: agent,
            orca_fpr: fpr,
            ..quick()
        };
        run_collectives(topo.clone(), cfg.clone(), jobs, CollectiveScheme::Orca, &s).unwrap()
    };
    let with = run(true, 0.01);
    let without = run(false, 1.0);
    assert_eq!(
        with.tree.agent_copies, mtu_packets,
        "one relayed copy per packet"
    );
    assert_eq!(without.tree.agent_copies, 0);
    assert_eq!(with.tree.stray_copies + without.tree.stray_copies, 0);
    assert_eq!(with.drops + without.drops, 0);
    // The agent's copies are host transmissions the ToR made before.
    assert!(with.host_tx_bytes > without.host_tx_bytes + mtu_packets * 4096);
    // The Bloom filter rides on every fabric copy: more switch bytes than without.
    assert!(with.switch_tx_bytes > without.switch_tx_bytes);
}

#[test]
fn orca_header_is_a_bloom_filter_of_the_tree_links() {
    let (topo, _) = fabric(&[]);
    let tree = job_tree(&topo, &[0, 2, 3, 9], UplinkChoice::Lowest).unwrap();
    let s = CollectiveSettings {
        orca_agent: true,
        ..CollectiveSettings::default()
    };
    let switch_links = tree.arcs.iter().filter(|a| !topo.is_host(a.parent)).count();
    // With agents: the ToR of 2 and 3 keeps one link (to its agent).
    let with = orca_header_bytes(&topo, &tree, &s).unwrap();
    assert_eq!(with as u64, bloom_bytes(switch_links - 1, 0.01));
    let without = CollectiveSettings {
        orca_agent: false,
        ..s
    };
    assert_eq!(
        orca_header_bytes(&topo, &tree, &without).unwrap() as u64,
        bloom_bytes(switch_links, 0.01)
    );
    let none = CollectiveSettings { orca_fpr: 1.0, ..s };
    assert_eq!(orca_header_bytes(&topo, &tree, &none).unwrap(), 0);
}
