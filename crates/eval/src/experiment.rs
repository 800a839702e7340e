//! The experiment registry: every paper result rocast redraws is one [`Experiment`],
//! and every experiment is one folder under `crates/eval/src/experiments/` holding its
//! implementation (or the call into its paper's module), its preset TOMLs, the figures
//! `rocast repro` lists for it, and the plot modules (of the Python package's
//! `rocast.plot`) that draw its tables. `build.rs` finds the folders, so adding a
//! figure is one folder here plus its plot module; nothing else names it.
//!
//! Everything that lists experiments reads a [`Registry`]: `rocast sim --list`
//! ([`Registry::preset_table`]), `rocast repro --list` ([`Registry::figures`]),
//! `rocast.presets()` ([`Registry::preset_descriptions`]), the table-to-plot map
//! ([`Registry::plot_for_table`]) and `rocast sim --preset` ([`Registry::scenario`]);
//! `crate::experiments` holds the built-in one. The simulator keeps only its own
//! workload presets (`default`, `incast`, …), which a registry lists first.

use crate::error::EvalError;
use std::path::Path;

use rocast_core::plan::Topology;
use rocast_sim::engine::EngineConfig;
use rocast_sim::scenario::config::{ConfigError, WORKLOAD_PRESETS};
use rocast_sim::Scenario;
use serde::de::DeserializeOwned;

use crate::report::EvalReport;

/// A paper rocast reproduces: the short name `rocast repro` selects it by, and its
/// title as the listings print it.
#[derive(Debug)]
pub struct Paper {
    pub key: &'static str,
    pub title: &'static str,
    /// Where the paper's figures come in `rocast repro --list` (papers in this order).
    pub rank: u32,
}

pub const CEPHEUS: Paper = Paper {
    key: "cepheus",
    title: "Cepheus (HPCA 2024)",
    rank: 0,
};
pub const PEEL: Paper = Paper {
    key: "peel",
    title: "PEEL (HotNets 2025)",
    rank: 1,
};
pub const TMCF: Paper = Paper {
    key: "tmcf",
    title: "TMCF (poster)",
    rank: 2,
};
pub const ODBSS: Paper = Paper {
    key: "odbss",
    title: "Broadcast-select UD multicast (APSIPA 2019)",
    rank: 3,
};
pub const RDMC: Paper = Paper {
    key: "rdmc",
    title: "RDMC (DSN 2018)",
    rank: 4,
};

/// Every paper, in listing order.
pub const PAPERS: [&Paper; 5] = [&CEPHEUS, &PEEL, &TMCF, &ODBSS, &RDMC];

/// A built-in scenario: its name (`rocast sim --preset NAME`) and TOML text.
#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    pub toml: &'static str,
}

/// The scale `rocast repro --alternatives` runs a figure's alternative readings at.
#[derive(Debug)]
pub enum AlternativeScale {
    /// The figure's own scale.
    Own,
    /// These extra arguments, and what they change in words.
    At(&'static [&'static str], &'static str),
    /// The alternatives are not run here, and why.
    NotRun(&'static str),
}

/// One figure or table of a paper, as `rocast repro` runs it: `rocast ARGS…` (the
/// output folder appended), and at the quick scale with extra arguments.
#[derive(Debug)]
pub struct Figure {
    /// `rocast repro ID`.
    pub id: &'static str,
    /// The paper's own name for it ("Fig. 12", "§V-D").
    pub figure: &'static str,
    pub what: &'static str,
    pub args: &'static [&'static str],
    /// Extra arguments of the quick scale (empty: the figure is quick already).
    pub quick: &'static [&'static str],
    /// What the quick scale changes, in words.
    pub quick_says: &'static str,
    /// Typical wall time at full scale on this project's 2-core VM, seconds.
    pub typical_s: f64,
    /// What of the figure is calibrated to the paper rather than simulated, if any.
    pub calibrated: Option<&'static str>,
    pub alternatives: AlternativeScale,
    /// Where the figure comes among its paper's figures (the paper's order).
    pub rank: u32,
}

impl Figure {
    /// The preset the figure runs (`rocast sim --preset P`), if it runs one.
    pub fn preset(&self) -> Option<&'static str> {
        (self.args.first() == Some(&"sim") && self.args.get(1) == Some(&"--preset"))
            .then(|| self.args[2])
    }
}

/// What an experiment runs on: the scenario, the directory its relative file names
/// resolve against, and the fabric and engine configuration built from it.
pub struct Context<'a> {
    pub scenario: &'a Scenario,
    pub base: &'a Path,
    pub topology: &'a Topology,
    pub engine: &'a EngineConfig,
}

impl Context<'_> {
    /// The experiment's own `[experiment.NAME]` table as its config type (every key
    /// optional: the type's `Default` fills the rest; an unknown key is an error).
    pub fn config<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T, EvalError> {
        experiment_config(self.scenario, name)
    }
}

/// `[experiment.NAME]` of a scenario as `T` (its defaults when the table is absent).
pub fn experiment_config<T: DeserializeOwned + Default>(
    sc: &Scenario,
    name: &str,
) -> Result<T, EvalError> {
    match sc.experiment.get(name) {
        None => Ok(T::default()),
        Some(t) => T::deserialize(toml::Value::Table(t.clone()))
            .map_err(|e| EvalError::Setting(format!("experiment.{name}: {}", e.message()))),
    }
}

/// One of rocast's experiments. Implementations live one per folder under
/// `src/experiments/`, each exporting `pub static EXPERIMENT`.
pub trait Experiment: Sync {
    /// The key a scenario selects it by: `[experiment.NAME]` (or the older
    /// `multicast.experiment = "NAME"`).
    fn name(&self) -> &'static str;
    fn paper(&self) -> &'static Paper;
    /// Its built-in scenarios.
    fn presets(&self) -> &'static [Preset] {
        &[]
    }
    /// The paper figures `rocast repro` redraws with it.
    fn figures(&self) -> &'static [Figure] {
        &[]
    }
    /// Its tables (CSV names without `.csv`) and the `rocast.plot` module drawing each.
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// Checks the scenario's `[experiment.NAME]` table before anything runs (the
    /// experiments that have a config type parse it here). One without a config type
    /// takes no keys, so a `--set experiment.KEY` it would not read is refused.
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        match sc.experiment.get(self.name()) {
            Some(t) if !t.is_empty() => {
                let keys: Vec<&str> = t.keys().map(String::as_str).collect();
                Err(EvalError::Setting(format!(
                    "experiment.{}: takes no keys, got {}",
                    self.name(),
                    keys.join(", ")
                )))
            }
            _ => Ok(()),
        }
    }
    /// Runs it; [`crate::run_experiment`] calls [`Experiment::check`] first.
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError>;
}

/// The experiments the listings read: the built-in ones, plus any a caller (a test,
/// an embedding) adds.
#[derive(Clone)]
pub struct Registry {
    experiments: Vec<&'static dyn Experiment>,
}

impl Registry {
    /// A registry of these experiments (the built-in one:
    /// [`crate::experiments::registry`]).
    pub fn new(experiments: &[&'static dyn Experiment]) -> Self {
        Registry {
            experiments: experiments.to_vec(),
        }
    }

    /// The registry with one more experiment.
    pub fn with(mut self, e: &'static dyn Experiment) -> Self {
        self.experiments.push(e);
        self
    }

    pub fn experiments(&self) -> &[&'static dyn Experiment] {
        &self.experiments
    }

    /// The experiment a name selects.
    pub fn experiment(&self, name: &str) -> Option<&'static dyn Experiment> {
        self.experiments.iter().copied().find(|e| e.name() == name)
    }

    /// Every preset with the experiment it runs (`None`: the simulator's own
    /// workload presets), in `rocast sim --list` order: the workload presets, then
    /// each experiment's.
    pub fn presets(&self) -> Vec<(&'static str, &'static str, Option<&'static dyn Experiment>)> {
        let mut v: Vec<_> = WORKLOAD_PRESETS
            .iter()
            .map(|(n, t)| (*n, *t, None))
            .collect();
        for e in &self.experiments {
            v.extend(e.presets().iter().map(|p| (p.name, p.toml, Some(*e))));
        }
        v
    }

    /// A preset's TOML text.
    pub fn preset_toml(&self, name: &str) -> Option<&'static str> {
        self.presets()
            .into_iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, t, _)| t)
    }

    /// Every preset's name, comma-separated (the unknown-preset error lists them).
    pub fn preset_names(&self) -> String {
        self.presets()
            .iter()
            .map(|(n, _, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A preset parsed, with `--set` overrides applied and validated.
    pub fn scenario(&self, name: &str, sets: &[String]) -> Result<Scenario, ConfigError> {
        let text = self
            .preset_toml(name)
            .ok_or_else(|| ConfigError::UnknownPreset(name.into(), self.preset_names()))?;
        Scenario::from_toml(text, sets)
    }

    /// Every preset with its one-line description (`rocast.presets()`).
    pub fn preset_descriptions(&self) -> Vec<(&'static str, String)> {
        self.presets()
            .into_iter()
            .map(|(n, t, _)| (n, description(n, t)))
            .collect()
    }

    /// `rocast sim --list`: one preset per line, name then description.
    pub fn preset_table(&self) -> String {
        let d = self.preset_descriptions();
        let w = d.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        d.iter().map(|(n, t)| format!("  {n:<w$}  {t}\n")).collect()
    }

    /// Every figure with its paper, in `rocast repro --list` order (papers in
    /// [`PAPERS`] order, figures by their rank in the paper).
    pub fn figures(&self) -> Vec<(&'static Paper, &'static Figure)> {
        let mut v: Vec<(&'static Paper, &'static Figure)> = self
            .experiments
            .iter()
            .flat_map(|e| e.figures().iter().map(move |f| (e.paper(), f)))
            .collect();
        v.sort_by_key(|(p, f)| (p.rank, f.rank));
        v
    }

    /// The `rocast.plot` module that draws a table (its CSV name without `.csv`).
    pub fn plot_for_table(&self, table: &str) -> Option<&'static str> {
        self.experiments
            .iter()
            .flat_map(|e| e.plots().iter())
            .find(|(t, _)| *t == table)
            .map(|(_, m)| *m)
    }
}

/// The description of a preset: the `name = "…"` line of its TOML, after the preset's
/// own name and a colon when it starts with them.
fn description(preset: &str, toml: &str) -> String {
    let line = toml
        .lines()
        .find_map(|l| {
            let v = l
                .trim()
                .strip_prefix("name")?
                .trim_start()
                .strip_prefix('=')?;
            Some(v.trim().trim_matches('"').to_string())
        })
        .unwrap_or_default();
    line.strip_prefix(preset)
        .and_then(|r| r.strip_prefix(':'))
        .map(|r| r.trim().to_string())
        .unwrap_or(line)
}

/// The experiments' names, for the unknown-experiment error.
pub fn experiment_names(r: &Registry) -> String {
    let mut v: Vec<&str> = r.experiments.iter().map(|e| e.name()).collect();
    v.sort_unstable();
    v.join(", ")
}
