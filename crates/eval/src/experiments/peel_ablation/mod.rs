//! Which assumption moves PEEL Figs 5-7's ratios (implementation: `crate::peel::ablation`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;

mod ablation;

pub struct PeelAblation;

pub static EXPERIMENT: PeelAblation = PeelAblation;

impl Experiment for PeelAblation {
    fn name(&self) -> &'static str {
        "peel-ablation"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-ablation",
                toml: include_str!("peel-ablation.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-ablation",
                figure: "Figs 5-7 (ablation)",
                what: "which assumption moves PEEL Figs 5-7's ratios",
                args: &["sim", "--preset", "peel-ablation"],
                quick: &[],
                quick_says: "",
                typical_s: 362.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 100,
            },
        ]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        ablation::ablation(cx.scenario)
    }
}
