//! The broadcast-select fabric (Figs 1, 3, 5, §II-C) and UD multicast latency on it (implementation: `crate::odbss::ud_latency`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, ODBSS, Paper, Preset};
use crate::report::EvalReport;

pub struct OdbssUdLatency;

pub static EXPERIMENT: OdbssUdLatency = OdbssUdLatency;

impl Experiment for OdbssUdLatency {
    fn name(&self) -> &'static str {
        "ud-latency"
    }
    fn paper(&self) -> &'static Paper {
        &ODBSS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "ud-latency",
                toml: include_str!("ud-latency.toml"),
            },
            Preset {
                name: "odbss-scale-40",
                toml: include_str!("odbss-scale-40.toml"),
            },
            Preset {
                name: "odbss-scale-80",
                toml: include_str!("odbss-scale-80.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "odbss-fig1",
                figure: "Fig. 1, Fig. 3",
                what: "multicast assignments n^n vs n! permutations (in the ud-latency report)",
                args: &["sim", "--preset", "ud-latency"],
                quick: &[],
                quick_says: "",
                typical_s: 1.0,
                calibrated: Some("the hybrid offload (one copy per rack: the paper's formula)"),
                alternatives: AlternativeScale::Own,
                rank: 10,
            },
            Figure {
                id: "odbss-fig5",
                figure: "Fig. 5, §II-C",
                what: "the N^D fabric: 40^3 = 64 K nodes",
                args: &["sim", "--preset", "odbss-scale-40"],
                quick: &[],
                quick_says: "",
                typical_s: 2.0,
                calibrated: Some("the hybrid offload (one copy per rack: the paper's formula)"),
                alternatives: AlternativeScale::Own,
                rank: 30,
            },
            Figure {
                id: "odbss-fig5-80",
                figure: "Fig. 5, §II-C",
                what: "the N^D fabric: 80^3 = 512 K nodes",
                args: &["sim", "--preset", "odbss-scale-80"],
                quick: &[],
                quick_says: "",
                typical_s: 6.2,
                calibrated: Some("the hybrid offload (one copy per rack: the paper's formula)"),
                alternatives: AlternativeScale::Own,
                rank: 40,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("ud-latency", "ud_latency")]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        let config: crate::odbss::config::OdbssConfig =
            crate::experiment::experiment_config(sc, self.name())?;
        Ok(config.validate()?)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::odbss::config::OdbssConfig = cx.config(self.name())?;
        crate::odbss::ud_latency(cx.scenario, &config)
    }
}
