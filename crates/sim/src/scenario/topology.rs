//! Building a scenario's fabric: the topology (fat-tree, leaf-spine or an HPCC
//! topology file, with link loss and failed links) and the engine settings its
//! `[switch]`, `[nic]` and `[output]` keys give.

use crate::engine::EngineConfig;
use crate::scenario::checks::ConfigError;
use crate::scenario::Scenario;
use rocast_core::fabric::cepheus::{CnpFilterError, CnpFilterPolicy};
use rocast_core::fabric::EcnRed;
use rocast_core::plan::{FatTreeShape, TierSpec, Topology};
use rocast_core::rnic::{DcqcnConfig, Retransmission};
use rocast_core::time::Duration;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a scenario's fabric could not be built. The core's topology errors keep the
/// key that led to them.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TopologyError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("topology.file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("topology: {0}")]
    Build(#[source] rocast_core::plan::topology::TopologyError),
    #[error(
        "topology: node {node} has {ports} ports; a switch has at most 65,536 (16-bit port numbers): use a fabric of more switches"
    )]
    TooManyPorts { node: u32, ports: usize },
    #[error("topology: {hosts} hosts; the simulator addresses at most {max}")]
    TooManyHosts { hosts: usize, max: u32 },
    #[error("topology.fail_fraction: {0}")]
    FailFraction(#[source] rocast_core::plan::topology::TopologyError),
    #[error("topology.fail_links: {0}")]
    FailLinks(#[source] rocast_core::plan::topology::TopologyError),
    #[error("{key}: no link between nodes {a} and {b}")]
    NoLink { key: String, a: u32, b: u32 },
    #[error("switch.cnp_filter: {0}")]
    CnpFilter(#[source] CnpFilterError),
}

/// The topology and engine settings of the built-in defaults plus `--set`-style
/// overrides (`"topology.k=4"`), for code and tests that drive an engine directly.
pub fn fabric_with(sets: &[&str]) -> Result<(Topology, EngineConfig), TopologyError> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = Scenario::from_toml("", &sets)?;
    let topo = build_topology(&sc, Path::new("."))?;
    let cfg = engine_config(&sc, &topo)?;
    Ok((topo, cfg))
}

pub fn build_topology(sc: &Scenario, base: &Path) -> Result<Topology, TopologyError> {
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
            let text = std::fs::read_to_string(&path).map_err(|e| TopologyError::Read {
                path: path.clone(),
                source: Arc::new(e),
            })?;
            Topology::from_hpcc_file(&text)
        }
    }
    .map_err(TopologyError::Build)?;
    // Ports are 16-bit in the simulator's tables (a one-switch star of more hosts
    // than that has no numbering for them).
    if let Some((node, ports)) = topo.widest_node().filter(|&(_, d)| d > 1 << 16) {
        return Err(TopologyError::TooManyPorts { node, ports });
    }
    if topo.num_hosts() as u64 > u64::from(crate::packet::MAX_SIM_HOSTS) {
        return Err(TopologyError::TooManyHosts {
            hosts: topo.num_hosts(),
            max: crate::packet::MAX_SIM_HOSTS,
        });
    }
    if t.link_loss > 0.0 {
        for l in &mut topo.links {
            l.loss = t.link_loss;
        }
    }
    if t.fail_fraction > 0.0 {
        topo.fail_fraction(t.fail_fraction, sc.seed)
            .map_err(TopologyError::FailFraction)?;
    }
    for &[a, b] in &t.fail_links {
        topo.fail_link(a, b).map_err(TopologyError::FailLinks)?;
    }
    Ok(topo)
}

/// The link between the two nodes a scenario key names.
pub(crate) fn link_between(
    topo: &Topology,
    [a, b]: [u32; 2],
    key: &str,
) -> Result<u32, TopologyError> {
    topo.find_link(a, b).ok_or_else(|| TopologyError::NoLink {
        key: key.to_string(),
        a,
        b,
    })
}

pub fn engine_config(sc: &Scenario, topo: &Topology) -> Result<EngineConfig, TopologyError> {
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
            .map_err(TopologyError::CnpFilter)?
            .with_damped_z(s.tmcf_damped_z),
        control_latency: Duration::from_us(10),
        switch_loss: None,
    })
}
