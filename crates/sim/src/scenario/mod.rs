//! What a run is asked to do: the scenario file and its presets ([`config`]), the flows a workload starts
//! ([`workload`]) and the fabric the keys describe ([`topology`]).

pub mod checks;
pub mod config;
pub mod topology;
pub mod workload;

pub use config::Scenario;
