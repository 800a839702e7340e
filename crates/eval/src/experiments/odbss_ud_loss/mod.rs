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
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::odbss::ud_loss(cx.scenario)
    }
}
