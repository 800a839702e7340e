//! `rocast-sim`: a discrete-event datacenter simulator. It drives the same
//! `rocast_core::rnic` RC endpoints the real-time runtime uses (no simulator-only
//! transport) over a RoCE fabric modelled from `rocast_core::fabric` (ECMP, shared
//! buffer, PFC, ECN) on topologies from `rocast_core::plan`.
//!
//! - [`engine`]: the event loop ([`engine::EventQueue`]), links, switch ports, NICs,
//!   and the switches' tree multicast forwarding.
//! - [`packet`]: the compact packet record and its serialisation for captures.
//! - [`scenario`]: TOML scenarios, presets and `--set` overrides; workloads; the
//!   fabric a scenario describes.
//! - [`multicast`]: multicast drivers on the engine: application-layer broadcast,
//!   Cepheus groups, concurrent Broadcast collectives.
//! - [`output`]: `fct.txt`, `summary.json`, `ports.csv`, logs, pcaps, percentiles.
//! - [`run`]: runs a scenario's workload and writes the outputs.
//!
//! The paper experiments built on these (Cepheus, PEEL, TMCF, ODBSS, RDMC) live in
//! `rocast-eval`.

// One prefetch hint in the engine needs `unsafe` (an x86 intrinsic); it allows it
// where it stands, and nothing else may.
#![deny(unsafe_code)]

pub mod engine;
pub mod multicast;
pub mod output;
pub mod packet;
pub mod run;
pub mod scenario;

pub use run::{run_scenario, RunError, RunOptions, RunReport};
pub use scenario::Scenario;

/// A uniform draw in [0, 1) from the run's seeded generator (53 random bits).
pub fn uniform(rng: &mut impl rand_core::RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}
