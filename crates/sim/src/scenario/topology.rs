//! Building a scenario's fabric: the topology (fat-tree, leaf-spine or an HPCC
//! topology file, with link loss and failed links) and the engine settings its
//! `[switch]`, `[nic]` and `[output]` keys give.

use crate::engine::EngineConfig;
use crate::scenario::Scenario;
use rocast_core::fabric::cepheus::CnpFilterPolicy;
use rocast_core::fabric::EcnRed;
use rocast_core::plan::{FatTreeShape, TierSpec, Topology};
use rocast_core::rnic::{DcqcnConfig, Retransmission};
use rocast_core::time::Duration;
use std::path::Path;

/// The topology and engine settings of the built-in defaults plus `--set`-style
/// overrides (`"topology.k=4"`), for code and tests that drive an engine directly.
pub fn fabric_with(sets: &[&str]) -> Result<(Topology, EngineConfig), String> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = Scenario::from_toml("", &sets).map_err(|e| e.to_string())?;
    let topo = build_topology(&sc, Path::new("."))?;
    let cfg = engine_config(&sc, &topo)?;
    Ok((topo, cfg))
}

pub fn build_topology(sc: &Scenario, base: &Path) -> Result<Topology, String> {
    let t = &sc.topology;
    let gbps = |g: f64| (g * 1e9).round() as u64;
    let tier = |g: f64, ns: u64| TierSpec::new(gbps(g), Duration::from_ns(ns));
    let mut topo = match t.kind.as_str() {
        "fat-tree" => Topology::fat_tree_shaped(
            FatTreeShape {
                k: t.k,
                oversubscription: t.oversubscription,
                pods: if t.pods == 0 { t.k } else { t.pods },
                edges_per_pod: if t.edges_per_pod == 0 {
                    t.k / 2
                } else {
                    t.edges_per_pod
                },
            },
            t.gpus_per_host,
            tier(t.host_gbps, t.host_delay_ns),
            tier(t.fabric_gbps, t.fabric_delay_ns),
            tier(t.core_gbps, t.core_delay_ns),
            tier(t.gpu_gbps, t.gpu_delay_ns),
        ),
        "leaf-spine" => Topology::leaf_spine(
            t.spines,
            t.leaves,
            t.hosts_per_leaf,
            t.gpus_per_host,
            tier(t.host_gbps, t.host_delay_ns),
            tier(t.fabric_gbps, t.fabric_delay_ns),
            tier(t.gpu_gbps, t.gpu_delay_ns),
        ),
        _ => {
            let path = base.join(&t.file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("topology.file {}: {e}", path.display()))?;
            Topology::from_hpcc_file(&text)
        }
    }
    .map_err(|e| format!("topology: {e}"))?;
    // Ports are 16-bit in the simulator's tables (a one-switch star of more hosts
    // than that has no numbering for them).
    if let Some((node, ports)) = topo.widest_node().filter(|&(_, d)| d > 1 << 16) {
        return Err(format!(
            "topology: node {node} has {ports} ports; a switch has at most 65,536 (16-bit port numbers): use a fabric of more switches"
        ));
    }
    if topo.num_hosts() as u64 > u64::from(crate::packet::MAX_SIM_HOSTS) {
        return Err(format!(
            "topology: {} hosts; the simulator addresses at most {}",
            topo.num_hosts(),
            crate::packet::MAX_SIM_HOSTS
        ));
    }
    if t.link_loss > 0.0 {
        for l in &mut topo.links {
            l.loss = t.link_loss;
        }
    }
    if t.fail_fraction > 0.0 {
        topo.fail_fraction(t.fail_fraction, sc.seed)
            .map_err(|e| format!("topology.fail_fraction: {e}"))?;
    }
    for &[a, b] in &t.fail_links {
        topo.fail_link(a, b)
            .map_err(|e| format!("topology.fail_links: {e}"))?;
    }
    Ok(topo)
}

/// The link between the two nodes a scenario key names.
pub(crate) fn link_between(topo: &Topology, [a, b]: [u32; 2], key: &str) -> Result<u32, String> {
    topo.find_link(a, b)
        .ok_or_else(|| format!("{key}: no link between nodes {a} and {b}"))
}

pub fn engine_config(sc: &Scenario, topo: &Topology) -> Result<EngineConfig, String> {
    let n = &sc.nic;
    let s = &sc.switch;
    let capture_links = sc
        .output
        .capture_links
        .iter()
        .map(|&l| link_between(topo, l, "output.capture_links"))
        .collect::<Result<Vec<_>, _>>()?;
    let host_rate = (sc.topology.host_gbps * 1e9) as u64;
    Ok(EngineConfig {
        seed: sc.seed,
        mtu: n.mtu,
        window: n.window,
        retransmission: if n.retransmission == "selective-repeat" {
            Retransmission::SelectiveRepeat
        } else {
            Retransmission::GoBackN
        },
        rto: Duration::from_us(n.rto_us),
        ack_every: n.ack_every,
        cnp_interval: Duration::from_us(n.cnp_interval_us),
        dcqcn: match (n.cc.as_str(), n.dcqcn_preset.as_str()) {
            ("dcqcn", "paper") => Some(DcqcnConfig::paper(host_rate)),
            ("dcqcn", "cx5") => Some(DcqcnConfig::connectx5(host_rate)),
            ("dcqcn", _) => Some(DcqcnConfig::hpcc(host_rate)),
            _ => None,
        }
        .map(|mut d| {
            if n.cnp_guard_us > 0 {
                d.decrease_interval = Duration::from_us(n.cnp_guard_us);
            }
            d
        }),
        lossless: s.lossless,
        buffer_bytes: (s.buffer_mb * 1024.0 * 1024.0) as u64,
        reserve_bytes: s.reserve_bytes,
        resume_offset_bytes: s.resume_offset_bytes,
        headroom_bytes: s.headroom_bytes,
        alpha_shift: s.alpha_shift,
        ecn: s.ecn.then_some(EcnRed {
            kmin_bytes: (s.kmin_kb * 1000.0) as u64,
            kmax_bytes: (s.kmax_kb * 1000.0) as u64,
            pmax: s.pmax,
        }),
        pfc_log: sc.output.pfc_log,
        qlen_interval: (sc.output.qlen_interval_us > 0.0)
            .then(|| Duration::from_ps((sc.output.qlen_interval_us * 1e6) as u64)),
        capture_links,
        capture_max_packets: sc.output.capture_max_packets,
        carry_payload: false,
        mft_max_groups: 1024,
        // Validated with the scenario (`Scenario::validate`).
        cnp_filter: CnpFilterPolicy::from_name(&s.cnp_filter, Duration::from_us(s.cnp_window_us))
            .map_err(|e| format!("switch.cnp_filter: {e}"))?
            .with_damped_z(s.tmcf_damped_z),
        control_latency: Duration::from_us(10),
        switch_loss: None,
    })
}
