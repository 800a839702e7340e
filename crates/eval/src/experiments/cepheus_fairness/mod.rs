//! Cepheus §V-C, Fig. 14: one multicast against two unicasts, fairness and convergence (implementation: `crate::tmcf::fairness`, beside the other CNP policies).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusFairness;

pub static EXPERIMENT: CepheusFairness = CepheusFairness;

impl Experiment for CepheusFairness {
    fn name(&self) -> &'static str {
        "fairness"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-fairness",
                toml: include_str!("cepheus-fairness.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig14",
                figure: "Fig. 14",
                what: "throughput of one multicast against two unicasts: fairness and convergence",
                args: &["sim", "--preset", "cepheus-fairness"],
                quick: &[],
                quick_says: "",
                typical_s: 7.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 80,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("fairness", "cepheus_fig14")]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::tmcf::FairnessConfig>(sc, self.name())
            .map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::tmcf::FairnessConfig = cx.config(self.name())?;
        crate::tmcf::fairness(cx.scenario, cx.base, &config)
    }
}
