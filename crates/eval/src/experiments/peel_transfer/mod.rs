//! One PEEL transfer through the labelled tree, checked byte for byte (implementation: `crate::peel::transfer`).

use crate::error::EvalError;
use crate::experiment::{Context, Experiment, PEEL, Paper, Preset};
use crate::report::EvalReport;

pub struct PeelTransfer;

pub static EXPERIMENT: PeelTransfer = PeelTransfer;

impl Experiment for PeelTransfer {
    fn name(&self) -> &'static str {
        "peel-transfer"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-transfer",
                toml: include_str!("peel-transfer.toml"),
            },
        ]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::peel::transfer::transfer(cx.scenario)
    }
}
