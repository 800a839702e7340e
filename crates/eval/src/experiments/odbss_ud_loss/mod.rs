//! Broadcast-select §III: loss ratio of NACK multicast over UD (implementation: `crate::odbss::ud_loss`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, ODBSS, Paper, Preset};
use crate::report::EvalReport;

pub struct OdbssUdLoss;

pub static EXPERIMENT: OdbssUdLoss = OdbssUdLoss;

impl Experiment for OdbssUdLoss {
    fn name(&self) -> &'static str {
        "ud-loss"
    }
    fn paper(&self) -> &'static Paper {
        &ODBSS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "ud-loss",
                toml: include_str!("ud-loss.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "odbss-loss",
                figure: "§III",
                what: "loss ratio of NACK multicast over UD, 10^8 packets, 4 receivers",
                args: &["sim", "--preset", "ud-loss"],
                quick: &[],
                quick_says: "",
                typical_s: 58.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 50,
            },
        ]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        let config: crate::odbss::ud_loss_config::UdLossConfig =
            crate::experiment::experiment_config(sc, self.name())?;
        Ok(config.validate()?)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::odbss::ud_loss_config::UdLossConfig = cx.config(self.name())?;
        crate::odbss::ud_loss(cx.scenario, &config)
    }
}
