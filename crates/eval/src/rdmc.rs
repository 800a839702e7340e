//! The application-layer baselines of the multicast experiments (RDMC §3, and the
//! MPI/NCCL schemes of `rocast_core::overlay`): one message broadcast over RC
//! connections on the simulated fabric, timed from the root's post until the last
//! rank holds it, with the block each scheme cuts the message into.

use crate::error::EvalError;
use rocast_core::overlay::Scheme;
use rocast_core::plan::Topology;
use rocast_core::time::Duration;
use rocast_sim::engine::EngineConfig;
use rocast_sim::multicast::broadcast::{
    bench_driver_config, run_broadcast, spread_hosts, BroadcastSpec,
};
use rocast_sim::scenario::config::parse_bytes;
use rocast_sim::Scenario;

/// One timed run's result.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timed {
    pub ps: u64,
    pub events: u64,
    /// Loss recoveries: packets the overlay's ranks retransmitted, or NAKs that
    /// reached Cepheus' source.
    pub recoveries: u64,
    /// With data verification: members holding bytes other than the source's
    /// (`None`: not verified).
    pub corrupt: Option<usize>,
}

/// The per-post host software overhead of every scheme.
pub(crate) fn overhead(sc: &Scenario) -> Duration {
    Duration::from_ps((sc.multicast.overhead_us * 1e6) as u64)
}

/// The hosts of a group of `n` ranks (rank order) under `multicast.placement`.
pub(crate) fn member_hosts(sc: &Scenario, num_hosts: u32, n: u32) -> Vec<u32> {
    match sc.multicast.placement.as_str() {
        "contiguous" => (0..n.min(num_hosts)).collect(),
        _ => spread_hosts(num_hosts, n),
    }
}

/// How the overlay baselines run, beyond scheme and block (`multicast.flow_control`
/// and `multicast.tree_window`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OverlayKnobs {
    pub flow_control: bool,
    /// Transfers (blocks) of at most this many bytes skip the ready-for-block: MPI's
    /// eager protocol below the rendezvous threshold (`multicast.eager_limit`).
    pub eager_limit: u64,
    /// Binomial tree's outstanding sends per rank; 0: all children at once.
    pub tree_window: u32,
    /// Carry seeded bytes and compare every rank's buffer with the root's.
    pub verify_data: bool,
}

impl OverlayKnobs {
    pub(crate) fn of(sc: &Scenario) -> Self {
        OverlayKnobs {
            flow_control: sc.multicast.flow_control,
            // Validated with the scenario.
            eager_limit: parse_bytes(&sc.multicast.eager_limit).unwrap_or(0),
            tree_window: sc.multicast.tree_window,
            verify_data: false,
        }
    }
}

/// An overlay scheme's broadcast of one message.
#[allow(clippy::too_many_arguments)]
pub(crate) fn overlay_once(
    topo: &Topology,
    cfg: &EngineConfig,
    scheme: Scheme,
    hosts: &[u32],
    size: u64,
    block: u64,
    post: Duration,
    knobs: OverlayKnobs,
) -> Result<Timed, EvalError> {
    let n = hosts.len() as u32;
    let block = block.min(size).max(1);
    let mut driver = bench_driver_config(
        scheme,
        n,
        size,
        block,
        8,
        knobs.flow_control && block > knobs.eager_limit,
    );
    if scheme == Scheme::BinomialTree {
        // A rank has at most log2(n) children.
        driver.window = match knobs.tree_window {
            0 => n.saturating_sub(1).max(1),
            w => w,
        };
    }
    let spec = BroadcastSpec {
        scheme,
        hosts: hosts.to_vec(),
        root: 0,
        driver,
        overhead: post,
        verify_data: knobs.verify_data,
        seed: 1,
        failures: Vec::new(),
        suspect_after: rocast_sim::multicast::broadcast::DEFAULT_SUSPECT_AFTER,
    };
    let out = run_broadcast(topo.clone(), cfg.clone(), &spec)?;
    Ok(Timed {
        ps: out.latency_ps,
        events: out.events,
        recoveries: out.retransmitted,
        corrupt: knobs.verify_data.then_some(out.corrupt_ranks.len()),
    })
}

/// The block a scheme uses for a message to a group of `group` ranks: the chain cut
/// into as many slices as ranks (`chain_slices_per_rank`, the paper's §V-A rule) or
/// into `chain_slices` slices, never below `chain_min_slice` bytes (fewer slices for a
/// small message), else the configured block.
pub(crate) fn block_for(
    sc: &Scenario,
    scheme: Scheme,
    size: u64,
    group: u32,
) -> Result<u64, EvalError> {
    let m = &sc.multicast;
    let block = parse_bytes(&m.block)?;
    let slices = if m.chain_slices_per_rank {
        group
    } else {
        m.chain_slices
    };
    let floor = parse_bytes(&m.chain_min_slice)?;
    Ok(match scheme {
        Scheme::Chain if slices > 0 => size
            .div_ceil(slices as u64)
            .max(floor)
            .clamp(1, size.max(1)),
        _ => block,
    })
}
