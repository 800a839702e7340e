//! `rocast-sim`: a discrete-event datacenter simulator. It drives the same
//! `rocast_core::rnic` RC endpoints the real-time runtime uses (no simulator-only
//! transport) over a RoCE fabric modelled from `rocast_core::fabric` (ECMP, shared
//! buffer, PFC, ECN) on topologies from `rocast_core::plan`.
//!
//! - [`broadcast`]: application-layer broadcast (RDMC/MPI schedules from
//!   `rocast_core::overlay`) executed over the engine's RC connections.
//! - [`broadcast_select`]: the optical broadcast-select fabric (ODBSS): elements,
//!   multi-dimensional scaling, hybrid offload and the `ud-latency` preset.
//! - [`ud_loss`]: the `ud-loss` preset: 10^8 packets of NACK multicast over UD through
//!   a broadcast-select element with NIC, receive-queue and bit-error loss models.
//! - [`config`]: TOML scenarios, presets and `--set` overrides.
//! - [`workload`]: flow generators (permutation, incast, all-to-all, Poisson with the
//!   WebSearch/Hadoop CDFs, HPCC flow files, explicit lists with dependencies).
//! - [`engine`]: the event loop, links, switch ports, NICs.
//! - [`packet`]: the compact packet record and its serialisation for captures.
//! - [`peel_eval`]: PEEL's evaluation presets (rule counts, approximation ratio).
//! - [`steiner_exact`]: the exact minimum Steiner tree via HiGHS, PEEL's yardstick.
//! - [`run`]: ties them together and writes `fct.txt`, `summary.json`, logs and pcaps.

pub mod broadcast;
pub mod broadcast_select;
pub mod cc_eval;
pub mod cepheus;
pub mod cepheus_eval;
pub mod collective;
pub mod config;
pub mod engine;
pub mod packet;
pub mod peel_eval;
pub mod run;
pub mod steiner_exact;
pub mod tree_multicast;
pub mod ud_loss;
pub mod workload;

pub use config::Scenario;

/// A uniform draw in [0, 1) from the run's seeded generator (53 random bits).
pub(crate) fn uniform(rng: &mut impl rand_core::RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}
pub use run::{run_scenario, RunOptions, RunReport};
