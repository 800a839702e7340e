//! The experiments, one folder each (`src/experiments/NAME/mod.rs`, its preset
//! TOMLs beside it). `build.rs` lists the folders; [`BUILTIN`] is every folder's
//! `EXPERIMENT`, in folder-name order, and [`registry`] the registry of them that
//! `rocast sim`, `rocast repro` and the Python package read.

use rocast_sim::scenario::config::ConfigError;
use rocast_sim::Scenario;

use crate::experiment::{Figure, Paper, Registry};

include!(concat!(env!("OUT_DIR"), "/experiments.rs"));

/// The built-in experiments.
pub fn registry() -> Registry {
    Registry::new(BUILTIN)
}

/// `rocast sim --list` for the built-in registry.
pub fn preset_table() -> String {
    registry().preset_table()
}

/// `rocast.presets()` for the built-in registry.
pub fn presets() -> Vec<(&'static str, String)> {
    registry().preset_descriptions()
}

/// A built-in preset, parsed with `--set` overrides.
pub fn scenario(name: &str, sets: &[String]) -> Result<Scenario, ConfigError> {
    registry().scenario(name, sets)
}

/// A built-in preset's TOML text.
pub fn preset_toml(name: &str) -> Option<&'static str> {
    registry().preset_toml(name)
}

/// `rocast repro --list`'s figures for the built-in registry.
pub fn figures() -> Vec<(&'static Paper, &'static Figure)> {
    registry().figures()
}

/// The `rocast.plot` module drawing a table of a built-in experiment.
pub fn plot_for_table(table: &str) -> Option<&'static str> {
    registry().plot_for_table(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_the_experiments_write_has_a_plot_module() {
        let plot =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/rocast/plot");
        let tables = [
            "bcast",
            "fairness",
            "fig10",
            "fig11",
            "fig12",
            "loss",
            "multicast",
            "peel-fig1",
            "peel-fig3",
            "peel-fig4",
            "peel-fig5",
            "peel-fig6",
            "peel-fig7",
            "testbed",
            "tmcf-cpmp",
            "tmcf-moving",
            "ud-latency",
        ];
        for t in tables {
            let f = plot_for_table(t).unwrap_or_else(|| panic!("{t}: no figure"));
            assert!(
                plot.join(format!("{f}.py")).is_file(),
                "{t}: {f}.py missing"
            );
        }
        assert_eq!(plot_for_table("fig12-ablation"), None);
        assert_eq!(plot_for_table("peel-fig5-paper"), None);
    }
}
