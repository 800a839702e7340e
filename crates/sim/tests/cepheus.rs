//! Cepheus groups end to end in the simulator (issue 5): unmodified RC endpoints,
//! MRP registration, switch replication and feedback aggregation, loss, fallback.

use rocast_sim::cepheus::{run_cepheus, CepheusSpec};
use rocast_sim::config::Scenario;
use rocast_sim::run::{build_topology, engine_config};
use std::path::Path;

/// A k=4 fat-tree (16 hosts, 3 tiers) with the given overrides.
fn fat_tree(extra: &[&str]) -> Scenario {
    let mut sets: Vec<String> = ["topology.kind=\"fat-tree\"", "topology.k=4"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    sets.extend(extra.iter().map(|s| s.to_string()));
    Scenario::from_toml("", &sets).unwrap()
}

#[test]
fn smoke() {
    let sc = fat_tree(&[]);
    let topo = build_topology(&sc, Path::new(".")).unwrap();
    let cfg = engine_config(&sc, &topo).unwrap();
    let mut spec = CepheusSpec::new(0, (1..16).collect(), 100_000);
    spec.messages = 3;
    spec.verify_data = true;
    let out = run_cepheus(topo, cfg, &spec).unwrap();
    println!("{out:#?}");
    assert!(out.corrupt_receivers.is_empty());
    assert!(out.fallback.is_none());
}
