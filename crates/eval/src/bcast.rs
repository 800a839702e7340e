//! The OSU-style broadcast benchmark's measurement, shared by `rocast bcast` and the
//! Python package (`rocast.bcast`): the fabric (a star of one leaf switch, a preset or
//! a scenario file, ranks spread over its hosts), then one broadcast per scheme and
//! size on the otherwise idle fabric (RDMC §4's schemes, `rocast_core::overlay`), each
//! beside the analytic model's critical path.
//!
//! Memory: one engine per broadcast, dropped before the next; a row per (scheme,
//! size) and a `done_us` per rank.

use crate::error::EvalError;
use rocast_core::overlay::driver::DriverConfig;
use rocast_core::overlay::model::critical_path;
use rocast_core::overlay::Scheme;
use rocast_core::plan::topology::{NodeId, Topology};
use rocast_core::plan::Routes;
use rocast_core::time::Duration;
use rocast_sim::engine::EngineConfig;
use rocast_sim::multicast::broadcast::{
    bench_driver_config, message_cost, run_broadcast, spread_hosts, BroadcastOutcome,
    BroadcastSpec, MemberFailure,
};
use rocast_sim::scenario::topology::{build_topology, engine_config};
use rocast_sim::Scenario;
use std::path::{Path, PathBuf};

/// The fabric's scenario: `star` (one leaf switch and one host per rank: idle and
/// non-blocking), a preset name, or a scenario TOML file; `sets` override its keys.
/// The base directory is where the file's relative names resolve.
pub fn fabric_scenario(
    topo: &str,
    group: u32,
    sets: &[String],
) -> Result<(Scenario, PathBuf), EvalError> {
    let star = topo == "star";
    let mut all: Vec<String> = if star {
        vec![
            "topology.kind=\"leaf-spine\"".into(),
            "topology.spines=1".into(),
            "topology.leaves=1".into(),
            format!("topology.hosts_per_leaf={group}"),
        ]
    } else {
        Vec::new()
    };
    all.extend(sets.iter().cloned());
    if star {
        return Ok((Scenario::from_toml("", &all)?, PathBuf::new()));
    }
    let path = Path::new(topo);
    if path.exists() {
        return Ok(Scenario::from_file(path, &all)?);
    }
    let sc = crate::experiments::scenario(topo, &all).map_err(|e| {
        EvalError::argument(
            "topo",
            format!("{topo:?}: not star, a preset or a file ({e})"),
        )
    })?;
    Ok((sc, PathBuf::new()))
}

/// A fabric ready for broadcasts: its topology, engine settings, routes, which host
/// each rank runs on.
pub struct BcastFabric {
    pub scenario: Scenario,
    pub topology: Topology,
    pub engine: EngineConfig,
    pub routes: Routes,
    /// Host of each rank, spread evenly over the fabric's hosts.
    pub hosts: Vec<NodeId>,
}

impl BcastFabric {
    /// Builds `sc`'s fabric for a group of `group` ranks.
    pub fn new(sc: Scenario, base: &Path, group: u32) -> Result<Self, EvalError> {
        let topology = build_topology(&sc, base)?;
        let engine = engine_config(&sc, &topology)?;
        let hosts_n = topology.num_hosts() as u32;
        if group > hosts_n {
            return Err(EvalError::argument(
                "group_size",
                format!("{group}: larger than the fabric's {hosts_n} hosts"),
            ));
        }
        let hosts = spread_hosts(hosts_n, group);
        let routes = Routes::compute(&topology)?;
        Ok(Self {
            scenario: sc,
            topology,
            engine,
            routes,
            hosts,
        })
    }
}

/// How every broadcast of a run is made (the flags of `rocast bcast`).
#[derive(Clone, Debug)]
pub struct BcastSettings {
    pub group: u32,
    pub root: u32,
    /// Block size of chain and pipeline.
    pub block: u64,
    /// The ring's slice size and slices in flight (NCCL's Simple protocol).
    pub ring_slice: u64,
    pub ring_slots: u32,
    /// Software overhead per post at every hop.
    pub overhead: Duration,
    /// RDMC's ready-for-block.
    pub flow_control: bool,
    /// Carry real bytes and compare every receiver's buffer with the root's.
    pub verify: bool,
    pub failure: Option<MemberFailure>,
    pub suspect_after: Duration,
}

impl BcastSettings {
    /// The checks `rocast bcast` makes before it builds anything; the error names the
    /// setting by `name` (the CLI's flags and Python's keywords are the same words).
    pub fn validate(&self, sizes: &[u64]) -> Result<(), EvalError> {
        for (name, v) in [("block", self.block), ("ring_slice", self.ring_slice)] {
            if v == 0 {
                return Err(EvalError::argument(name, "0: must be positive"));
            }
        }
        if self.group < 2 {
            return Err(EvalError::argument(
                "group_size",
                format!("{}: must be at least 2", self.group),
            ));
        }
        if self.root >= self.group {
            return Err(EvalError::argument(
                "root",
                format!("{}: not a rank of a group of {}", self.root, self.group),
            ));
        }
        if self.verify && sizes.iter().any(|&s| s > 256 << 20) {
            return Err(EvalError::argument(
                "verify",
                "keeps every rank's buffer in memory: sizes up to 256M".to_string(),
            ));
        }
        Ok(())
    }
}

/// One broadcast's result (a row of `bcast.csv`).
pub struct BcastPoint {
    pub scheme: Scheme,
    pub size: u64,
    pub driver: DriverConfig,
    pub outcome: BroadcastOutcome,
    /// When the last rank held the whole message.
    pub latency_us: f64,
    /// The analytic model's critical path.
    pub model_us: f64,
    /// Average and minimum over the receiving ranks of when each held the message.
    pub avg_rank_us: f64,
    pub min_rank_us: f64,
}

/// `bcast.csv`'s header ([`BcastPoint::csv_row`]).
pub const CSV_HEADER: &str = "scheme,group,size_bytes,block_bytes,window,flow_control,latency_us,model_us,messages,host_tx_bytes,events,retransmitted,avg_rank_us,min_rank_us\n";

/// Runs one broadcast of `size` bytes with `scheme` on `f` and returns how it was
/// driven and what happened (with `failure`, what every survivor concluded).
pub fn run_one(
    f: &BcastFabric,
    s: &BcastSettings,
    scheme: Scheme,
    size: u64,
) -> Result<(DriverConfig, BroadcastOutcome), EvalError> {
    let unit = if scheme == Scheme::Ring {
        s.ring_slice
    } else {
        s.block
    };
    let driver = bench_driver_config(scheme, s.group, size, unit, s.ring_slots, s.flow_control);
    let spec = BroadcastSpec {
        scheme,
        hosts: f.hosts.clone(),
        root: s.root,
        driver,
        overhead: s.overhead,
        verify_data: s.verify,
        seed: f.scenario.seed,
        failures: s.failure.into_iter().collect(),
        suspect_after: s.suspect_after,
    };
    Ok((
        driver,
        run_broadcast(f.topology.clone(), f.engine.clone(), &spec)?,
    ))
}

/// [`run_one`] measured: the latency beside the model's. A receiver whose bytes
/// differ from the root's (with `verify`) is an error.
pub fn measure(
    f: &BcastFabric,
    s: &BcastSettings,
    scheme: Scheme,
    size: u64,
) -> Result<BcastPoint, EvalError> {
    let (driver, outcome) = run_one(f, s, scheme, size)?;
    if !outcome.corrupt_ranks.is_empty() {
        return Err(EvalError::Setting(format!(
            "{scheme} {size} B: ranks {:?} hold different bytes from the root",
            outcome.corrupt_ranks
        )));
    }
    let cost = message_cost(&f.topology, &f.routes, f.engine.mtu, &f.hosts);
    let model = critical_path(scheme, s.group, s.root, driver, s.overhead.as_ps(), &cost)
        .map_err(|e| EvalError::Setting(e.to_string()))?;
    let got: Vec<f64> = outcome
        .rank_done_ps
        .iter()
        .enumerate()
        .filter(|&(r, _)| r as u32 != s.root)
        .map(|(_, &t)| t as f64 / 1e6)
        .collect();
    Ok(BcastPoint {
        scheme,
        size,
        driver,
        latency_us: outcome.latency_ps as f64 / 1e6,
        model_us: model.latency_ps as f64 / 1e6,
        avg_rank_us: got.iter().sum::<f64>() / got.len().max(1) as f64,
        min_rank_us: got.iter().copied().fold(f64::INFINITY, f64::min),
        outcome,
    })
}

impl BcastPoint {
    /// The point as a row of `bcast.csv` ([`CSV_HEADER`]), newline included.
    pub fn csv_row(&self, group: u32) -> String {
        let (d, o) = (&self.driver, &self.outcome);
        format!(
            "{},{group},{},{},{},{},{:.3},{:.3},{},{},{},{},{:.3},{:.3}\n",
            self.scheme,
            self.size,
            d.block_bytes,
            d.window,
            d.ready_for_block,
            self.latency_us,
            self.model_us,
            o.messages,
            o.host_tx_bytes,
            o.events,
            o.retransmitted,
            self.avg_rank_us,
            self.min_rank_us
        )
    }
}
