//! The PEEL experiments' own keys, each experiment reading its `[experiment.NAME]`
//! table (moved out of the simulator's `[multicast]`): [`PeelFigureConfig`] for the
//! packet-level figures (`peel-fig4`, `peel-fig5`, `peel-fig6`, `peel-fig7`,
//! `peel-guard`), [`RulesConfig`] (`peel-rules`), [`ApproxConfig`] (`peel-approx`) and
//! [`Fig1Config`] (`peel-fig1`). Every key is optional; the defaults are the ones the
//! keys had in `[multicast]`.

use crate::error::EvalError;
use crate::experiment::experiment_config;
use rocast_sim::scenario::config::{one_of, ConfigError};
use rocast_sim::Scenario;
use serde::Deserialize;

/// A check's `ConfigError` for key `k` as an error naming `[experiment.NAME] k`.
fn named(name: &str, e: ConfigError) -> EvalError {
    EvalError::Setting(format!("experiment.{name}.{e}"))
}

fn bad(name: &str, key: &str, msg: impl std::fmt::Display) -> EvalError {
    EvalError::Setting(format!("experiment.{name}.{key}: {msg}"))
}

/// The exact Steiner solver: `dp` (subset dynamic programming in Rust) or `highs` (the
/// integer program through Python, the independent check), and HiGHS' time limit per
/// instance.
#[derive(Debug, Clone, Copy)]
pub struct ExactSolver<'a> {
    pub solver: &'a str,
    pub time_limit_s: f64,
}

fn check_solver(name: &str, solver: &str) -> Result<(), EvalError> {
    one_of("exact_solver", solver, &["dp", "highs"]).map_err(|e| named(name, e))
}

/// `[experiment.peel-fig4|5|6|7]` and `[experiment.peel-guard]`: PEEL §4's
/// packet-level figures on `collective`'s concurrent Broadcasts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PeelFigureConfig {
    /// Fig 7: trials per failed-link fraction, and the fractions.
    pub instances: u32,
    pub fail_fractions: Vec<f64>,
    /// Fig 5: at most this many of the figure's distinct job groups are solved
    /// exactly (`exact_solver`: `dp` or `highs`, HiGHS within `exact_time_limit_s`
    /// per group) to check its symmetric-tree baseline; 0 skips it. On a fault-free
    /// Clos one solve covers every group its symmetries map onto another
    /// (`crate::peel::clos_symmetry`).
    pub exact_solver: String,
    pub exact_time_limit_s: f64,
    pub exact_baseline_groups: usize,
    /// Offered load of the Poisson Broadcasts (fraction of the servers' NIC capacity
    /// their payload needs), the most jobs per point and the bytes a point aims to
    /// move (jobs = budget / size, at least 4, at most `broadcasts`).
    pub load: f64,
    pub broadcasts: u32,
    pub broadcast_budget: String,
    /// GPUs behind each server's NIC (group sizes count GPUs) and their NVLink rate.
    pub gpus_per_server: u32,
    pub nvlink_gbps: f64,
    /// RDMA NICs per server: 1 (every GPU shares the server's NIC; the simulated hosts
    /// are servers) or `gpus_per_server` (one NIC per GPU, as Meta's training servers
    /// [PEEL ref 14]; the simulated hosts are the GPUs' NICs, `hosts_per_leaf` counts
    /// NICs, and ring and tree run one NCCL channel per NIC).
    pub nics_per_server: u32,
    /// Controller set-up delay of Orca and of PEEL's programmable cores, N(mean, sd).
    pub setup_ms: f64,
    pub setup_sd_ms: f64,
    /// Chunks per message of the ring and binary tree.
    pub chunks: u32,
    /// The schedule of PEEL's "Binary Tree" baseline (`binary-tree`): "double" (NCCL's
    /// double binary tree) or "single" (one pipelined binary tree).
    pub tree_algorithm: String,
    /// PEEL covers: 0 exact, else at most this many prefixes per plane.
    pub cover_max: u32,
    /// Where a job's servers sit. "bin-packed" (the fewest racks, then the fewest
    /// pods: PEEL §3.2's "job locality") or "consecutive" (consecutive servers from a
    /// random one, blind to rack boundaries) or "aligned" (bin-packed windows at
    /// power-of-two offsets); the last two for the ablation.
    pub job_placement: String,
    /// Which core a fault-free tree's single upward copy climbs to: "ecmp" (hashed
    /// per group, as a fabric's ECMP spreads flows) or "lowest" (every group through
    /// the lowest-numbered switches; the ablation's).
    pub upward: String,
    /// Orca: the false-positive ratio its Bloom-filter header is sized for (the
    /// smallest of PEEL Fig 3's; 1 carries none), and whether host-side agents do each
    /// rack's last-hop fan-out. false (the primary reading): the controller-only model
    /// PEEL's evaluation states ("We model the controller's flow setup delay as a
    /// normal distribution (N(10 ms, 5 ms)) … for both Orca and PEEL", §4; §3.1 the
    /// same for Fig 4); true: §3.1's description of Orca's agents, an alternative.
    pub orca_fpr: f64,
    pub orca_agent: bool,
    /// PEEL with programmable cores (`peel-cores`) once the controller has installed
    /// the group's core rule: "single" (PEEL §3.3: "the source transmits a *single*
    /// copy of each packet through the core") or "remote-pods" (rocast's earlier
    /// reading: the source pod's prefixes stay separate copies from the source).
    pub core_copy: String,
    /// Fig 7: Poisson Broadcasts (at `load`) sharing each trial's failed fabric; 1
    /// runs one isolated Broadcast per trial.
    pub concurrent_jobs: u32,
}

impl Default for PeelFigureConfig {
    fn default() -> Self {
        PeelFigureConfig {
            instances: 200,
            fail_fractions: vec![0.05, 0.1, 0.2, 0.3],
            exact_solver: "dp".into(),
            exact_time_limit_s: 60.0,
            exact_baseline_groups: 0,
            load: 0.3,
            broadcasts: 100,
            broadcast_budget: "4G".into(),
            gpus_per_server: 8,
            nvlink_gbps: 7200.0,
            nics_per_server: 1,
            setup_ms: 10.0,
            setup_sd_ms: 5.0,
            chunks: 8,
            tree_algorithm: "single".into(),
            cover_max: 0,
            job_placement: "bin-packed".into(),
            upward: "ecmp".into(),
            orca_fpr: rocast_sim::multicast::collective::ORCA_DEFAULT_FPR,
            orca_agent: false,
            core_copy: "single".into(),
            concurrent_jobs: 1,
        }
    }
}

impl PeelFigureConfig {
    /// Experiment `name`'s table of `sc`, parsed and checked.
    pub fn of(sc: &Scenario, name: &str) -> Result<Self, EvalError> {
        let c: Self = experiment_config(sc, name)?;
        c.check(name)?;
        Ok(c)
    }

    /// The checks `Scenario::validate` made of these keys in `[multicast]`, naming
    /// `[experiment.NAME]`.
    pub fn check(&self, name: &str) -> Result<(), EvalError> {
        one_of(
            "job_placement",
            &self.job_placement,
            &["bin-packed", "consecutive", "aligned"],
        )
        .map_err(|e| named(name, e))?;
        if !(self.orca_fpr > 0.0 && self.orca_fpr <= 1.0) {
            return Err(bad(
                name,
                "orca_fpr",
                format!("must be in (0, 1] (1: no header), got {}", self.orca_fpr),
            ));
        }
        if self.nics_per_server != 1 && self.nics_per_server != self.gpus_per_server.max(1) {
            return Err(bad(
                name,
                "nics_per_server",
                format!(
                    "must be 1 or gpus_per_server ({}), got {}",
                    self.gpus_per_server, self.nics_per_server
                ),
            ));
        }
        if let Err(e) = rocast_sim::multicast::collective::tree_scheme(&self.tree_algorithm) {
            return Err(bad(name, "tree_algorithm", e));
        }
        if let Err(e) = rocast_sim::engine::tree_multicast::CoreCopy::parse(&self.core_copy) {
            return Err(bad(name, "core_copy", e));
        }
        one_of("upward", &self.upward, &["ecmp", "lowest"]).map_err(|e| named(name, e))?;
        check_solver(name, &self.exact_solver)?;
        for (key, v) in [
            ("setup_ms", self.setup_ms),
            ("setup_sd_ms", self.setup_sd_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(bad(name, key, format!("{v} is not a non-negative time")));
            }
        }
        if rocast_sim::scenario::config::parse_bytes(&self.broadcast_budget).is_err() {
            return Err(bad(
                name,
                "broadcast_budget",
                format!("{:?} is not a size (e.g. \"3G\")", self.broadcast_budget),
            ));
        }
        Ok(())
    }

    pub fn exact(&self) -> ExactSolver<'_> {
        ExactSolver {
            solver: &self.exact_solver,
            time_limit_s: self.exact_time_limit_s,
        }
    }
}

/// `[experiment.peel-rules]`: the rule-count table's fat-tree arities.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RulesConfig {
    pub ks: Vec<u32>,
}

impl Default for RulesConfig {
    fn default() -> Self {
        RulesConfig {
            ks: vec![8, 16, 32, 64, 128],
        }
    }
}

/// `[experiment.peel-approx]`: seeded instances of the approximation experiment, their
/// failed-link fractions (cycled, as `multicast.groups`' destination counts are) and
/// the exact solver.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApproxConfig {
    pub instances: u32,
    pub fail_fractions: Vec<f64>,
    /// `dp` (subset dynamic programming in Rust, the default) or `highs` (the integer
    /// program through Python, the independent check), and HiGHS' time limit per
    /// instance.
    pub exact_solver: String,
    pub exact_time_limit_s: f64,
}

impl Default for ApproxConfig {
    fn default() -> Self {
        ApproxConfig {
            instances: 200,
            fail_fractions: vec![0.05, 0.1, 0.2, 0.3],
            exact_solver: "dp".into(),
            exact_time_limit_s: 60.0,
        }
    }
}

impl ApproxConfig {
    pub fn check(&self, name: &str) -> Result<(), EvalError> {
        check_solver(name, &self.exact_solver)
    }

    pub fn exact(&self) -> ExactSolver<'_> {
        ExactSolver {
            solver: &self.exact_solver,
            time_limit_s: self.exact_time_limit_s,
        }
    }
}

/// `[experiment.peel-fig1]`: GPUs per server (group sizes count GPUs).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Fig1Config {
    pub gpus_per_server: u32,
}

impl Default for Fig1Config {
    fn default() -> Self {
        Fig1Config { gpus_per_server: 8 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presets_keys_arrive_in_its_config() {
        let sc = crate::experiments::scenario("peel-fig7", &[]).unwrap();
        assert!(sc.experiment.contains_key("peel-fig7"));
        let c = PeelFigureConfig::of(&sc, "peel-fig7").unwrap();
        assert_eq!(c.fail_fractions, vec![0.01, 0.02, 0.05, 0.1]);
        assert_eq!(
            (c.instances, c.nics_per_server, c.concurrent_jobs),
            (100, 8, 1)
        );
        assert_eq!(c.tree_algorithm, "double");
        let sc = crate::experiments::scenario("peel-fig5", &[]).unwrap();
        let c = PeelFigureConfig::of(&sc, "peel-fig5").unwrap();
        assert_eq!(
            (c.exact_solver.as_str(), c.exact_baseline_groups),
            ("highs", 1000)
        );
        assert_eq!((c.broadcasts, c.broadcast_budget.as_str()), (60, "3G"));
        // --set experiment.KEY reaches the running experiment's table.
        let sc =
            crate::experiments::scenario("peel-fig6", &["experiment.broadcasts=4".into()]).unwrap();
        assert_eq!(
            PeelFigureConfig::of(&sc, "peel-fig6").unwrap().broadcasts,
            4
        );
        let sc = crate::experiments::scenario("peel-rules", &[]).unwrap();
        let r: RulesConfig = experiment_config(&sc, "peel-rules").unwrap();
        assert_eq!(r.ks, vec![8, 16, 32, 64, 128]);
        let sc = crate::experiments::scenario("peel-approx", &[]).unwrap();
        let a: ApproxConfig = experiment_config(&sc, "peel-approx").unwrap();
        assert_eq!((a.instances, a.exact_solver.as_str()), (200, "dp"));
        let sc = crate::experiments::scenario("peel-fig1", &[]).unwrap();
        let f: Fig1Config = experiment_config(&sc, "peel-fig1").unwrap();
        assert_eq!(f.gpus_per_server, 8);
    }

    #[test]
    fn unknown_and_bad_keys_name_the_table() {
        let registry = crate::experiments::registry();
        let refused = |preset: &str, set: &str| {
            let sc = crate::experiments::scenario(preset, &[set.into()]).unwrap();
            let e = registry.experiment(preset).unwrap();
            e.check(&sc).unwrap_err().to_string()
        };
        let err = refused("peel-fig6", "experiment.brodcasts=4");
        assert!(
            err.contains("experiment.peel-fig6") && err.contains("brodcasts"),
            "{err}"
        );
        for (preset, set, key) in [
            (
                "peel-fig5",
                "experiment.upward=\"up\"",
                "experiment.peel-fig5.upward",
            ),
            (
                "peel-fig6",
                "experiment.orca_fpr=0",
                "experiment.peel-fig6.orca_fpr",
            ),
            (
                "peel-fig4",
                "experiment.core_copy=\"both\"",
                "experiment.peel-fig4.core_copy",
            ),
            (
                "peel-fig6",
                "experiment.nics_per_server=3",
                "experiment.peel-fig6.nics_per_server",
            ),
            (
                "peel-fig7",
                "experiment.tree_algorithm=\"triple\"",
                "experiment.peel-fig7.tree_algorithm",
            ),
            (
                "peel-guard",
                "experiment.job_placement=\"x\"",
                "experiment.peel-guard.job_placement",
            ),
            (
                "peel-approx",
                "experiment.exact_solver=\"cplex\"",
                "experiment.peel-approx.exact_solver",
            ),
            ("peel-rules", "experiment.load=0.5", "experiment.peel-rules"),
            (
                "peel-fig1",
                "experiment.broadcasts=4",
                "experiment.peel-fig1",
            ),
        ] {
            let err = refused(preset, set);
            assert!(err.contains(key), "{set}: {err}");
        }
        // The simulator no longer knows the moved keys.
        let err = crate::experiments::scenario("peel-fig6", &["multicast.broadcasts=4".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("broadcasts"), "{err}");
    }
}
