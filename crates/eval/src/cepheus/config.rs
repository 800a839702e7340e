//! The keys only one Cepheus experiment reads, in that experiment's own table:
//! `[experiment.loss]` ([`LossConfig`], `cepheus-loss`), `[experiment.safeguard]`
//! ([`SafeguardConfig`], `cepheus-safeguard`), `[experiment.io-latency]`
//! ([`IoLatencyConfig`], `cepheus-fig10`) and `[experiment.iops]` ([`IopsConfig`],
//! `cepheus-iops`). Every key is optional (the type's default); an unknown key is an
//! error naming the table. The keys the experiments share with the rest of rocast
//! (`group`, `groups`, `message`, `loss`, `loss_rank`, the safeguard's, …) stay in
//! `[multicast]`.

use rocast_sim::scenario::checks::{one_of, ConfigError};
use serde::Deserialize;

/// `[experiment.loss]` (Cepheus Fig. 13): the random loss rates, and where the frames
/// drop: "middle-switches" (every frame an aggregation switch sends: Cepheus §V-C's
/// "randomly discarding packets in the middle switches") or "switch-links" (every
/// switch-to-switch link, either way).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LossConfig {
    pub loss_rates: Vec<f64>,
    pub loss_at: String,
}

impl Default for LossConfig {
    fn default() -> Self {
        LossConfig {
            loss_rates: vec![0.0, 1e-8, 1e-6, 1e-5, 1e-4],
            loss_at: "switch-links".into(),
        }
    }
}

impl LossConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        one_of(
            "experiment.loss.loss_at",
            &self.loss_at,
            &["middle-switches", "switch-links"],
        )
    }
}

/// `[experiment.safeguard]` (`cepheus-safeguard`): the ranks whose switch port drops
/// `multicast.loss` of its frames (empty: `multicast.loss_rank` alone), from when (ms),
/// and the IOs the source keeps in flight.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SafeguardConfig {
    pub loss_ranks: Vec<u32>,
    pub loss_from_ms: f64,
    pub queue_depth: u32,
}

impl Default for SafeguardConfig {
    fn default() -> Self {
        SafeguardConfig {
            loss_ranks: Vec::new(),
            loss_from_ms: 0.0,
            queue_depth: 16,
        }
    }
}

/// `[experiment.io-latency]` (Cepheus Fig. 10): the IOs each latency is the mean of,
/// and the host storage stack's cost per copy of an IO (µs).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IoLatencyConfig {
    pub ios: u32,
    pub io_stack_us: f64,
}

impl Default for IoLatencyConfig {
    fn default() -> Self {
        IoLatencyConfig {
            ios: 20_000,
            io_stack_us: 0.842,
        }
    }
}

/// `[experiment.iops]` (Cepheus Table I): replication IOs: size, count, queue depth,
/// and the host storage stack's cost per IO (each copy of the data passes through it
/// once), µs.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IopsConfig {
    pub io: String,
    pub ios: u32,
    pub queue_depth: u32,
    pub io_stack_us: f64,
}

impl Default for IopsConfig {
    fn default() -> Self {
        IopsConfig {
            io: "8K".into(),
            ios: 20_000,
            queue_depth: 16,
            io_stack_us: 0.842,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::experiment_config;
    use crate::experiments::scenario;

    /// Each preset's moved keys arrive in its experiment's config type.
    #[test]
    fn the_presets_tables_are_the_configs() {
        let sc = scenario("cepheus-loss", &[]).unwrap();
        let l: LossConfig = experiment_config(&sc, "loss").unwrap();
        assert_eq!(l.loss_at, "middle-switches");
        assert_eq!(l.loss_rates, [0.0, 1e-8, 1e-6, 1e-5, 1e-4]);
        let sc = scenario("cepheus-safeguard", &[]).unwrap();
        let s: SafeguardConfig = experiment_config(&sc, "safeguard").unwrap();
        assert_eq!((s.queue_depth, s.loss_from_ms), (4, 1.0));
        let sc = scenario("cepheus-iops", &[]).unwrap();
        let i: IopsConfig = experiment_config(&sc, "iops").unwrap();
        assert_eq!(i, IopsConfig::default());
        let sc = scenario("cepheus-fig10", &["experiment.ios=7".into()]).unwrap();
        let f: IoLatencyConfig = experiment_config(&sc, "io-latency").unwrap();
        assert_eq!((f.ios, f.io_stack_us), (7, 0.842));
    }

    /// A key the experiment does not read, or a bad value, is refused naming its table.
    #[test]
    fn unknown_keys_and_bad_values_name_the_table() {
        for (preset, set, want) in [
            (
                "cepheus-loss",
                "experiment.nope=1",
                "experiment.loss: unknown field `nope`",
            ),
            (
                "cepheus-loss",
                "experiment.loss_at=\"everywhere\"",
                "experiment.loss.loss_at",
            ),
            (
                "cepheus-safeguard",
                "experiment.io=\"8K\"",
                "experiment.safeguard: unknown field `io`",
            ),
            (
                "cepheus-fig10",
                "experiment.queue_depth=2",
                "experiment.io-latency: unknown field `queue_depth`",
            ),
            (
                "cepheus-iops",
                "experiment.loss_rates=[0.1]",
                "experiment.iops: unknown field `loss_rates`",
            ),
        ] {
            let sc = scenario(preset, &[set.into()]).unwrap();
            let e = crate::experiments::registry()
                .experiment(sc.experiment_name().unwrap())
                .expect("an experiment")
                .check(&sc)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{preset} {set}: {e}");
        }
    }
}
