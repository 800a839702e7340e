//! Cepheus §V-C, Fig. 13: a 128 MB multicast under random loss (implementation: `crate::cepheus::loss`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusLoss;

pub static EXPERIMENT: CepheusLoss = CepheusLoss;

impl Experiment for CepheusLoss {
    fn name(&self) -> &'static str {
        "loss"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-loss",
                toml: include_str!("cepheus-loss.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig13",
                figure: "Fig. 13",
                what: "128 MB multicast under random loss, groups of 64 and 512, vs chain",
                args: &["sim", "--preset", "cepheus-loss"],
                quick: &["--set", "multicast.groups=[64]"],
                quick_says: "the group of 64 only",
                typical_s: 258.0,
                calibrated: None,
                alternatives: AlternativeScale::At(&["--set", "multicast.groups=[512]", "--set", "experiment.loss_rates=[0.0,1e-4]"], "the paper's crossover cell only: 512 members, no loss and 1e-4"),
                rank: 70,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("loss", "cepheus_fig13")]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        let config: crate::cepheus::config::LossConfig =
            crate::experiment::experiment_config(sc, self.name())?;
        Ok(config.validate()?)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::cepheus::config::LossConfig = cx.config(self.name())?;
        crate::cepheus::loss(cx.scenario, cx.topology, cx.engine, &config)
    }
}
