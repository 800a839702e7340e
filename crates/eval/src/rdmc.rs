//! The application-layer baselines of the multicast experiments (RDMC §3, and the
//! MPI/NCCL schemes of `rocast_core::overlay`): one message broadcast over RC
//! connections on the simulated fabric, timed from the root's post until the last
//! rank holds it, with the block each scheme cuts the message into.

use rocast_core::overlay::Scheme;
use rocast_core::plan::Topology;
use rocast_core::time::Duration;
use rocast_sim::engine::EngineConfig;
use rocast_sim::multicast::broadcast::{bench_driver_config, run_broadcast, BroadcastSpec};
use rocast_sim::scenario::config::parse_bytes;
use rocast_sim::Scenario;

/// One timed run's result.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timed {
    pub ps: u64,
    pub events: u64,
}

/// The per-post host software overhead of every scheme.
pub(crate) fn overhead(sc: &Scenario) -> Duration {
    Duration::from_ps((sc.multicast.overhead_us * 1e6) as u64)
}

/// An overlay scheme's broadcast of one message.
pub(crate) fn overlay_once(
    topo: &Topology,
    cfg: &EngineConfig,
    scheme: Scheme,
    hosts: &[u32],
    size: u64,
    block: u64,
    post: Duration,
) -> Result<Timed, String> {
    let n = hosts.len() as u32;
    let spec = BroadcastSpec {
        scheme,
        hosts: hosts.to_vec(),
        root: 0,
        driver: bench_driver_config(scheme, n, size, block.min(size).max(1), 8, true),
        overhead: post,
        verify_data: false,
        seed: 1,
    };
    let out = run_broadcast(topo.clone(), cfg.clone(), &spec)?;
    Ok(Timed {
        ps: out.latency_ps,
        events: out.events,
    })
}

/// The block a scheme uses for a message: chain with `chain_slices` slices, else
/// the configured block.
pub(crate) fn block_for(sc: &Scenario, scheme: Scheme, size: u64) -> Result<u64, String> {
    let block = parse_bytes(&sc.multicast.block)?;
    Ok(match scheme {
        Scheme::Chain if sc.multicast.chain_slices > 0 => {
            size.div_ceil(sc.multicast.chain_slices as u64).max(1)
        }
        _ => block,
    })
}
