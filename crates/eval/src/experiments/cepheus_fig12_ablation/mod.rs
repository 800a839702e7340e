//! Cepheus Fig. 12 under every alternative reading, one at a time (implementation: `crate::cepheus::fig12_ablation`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

mod ablation;

pub struct CepheusFig12Ablation;

pub static EXPERIMENT: CepheusFig12Ablation = CepheusFig12Ablation;

impl Experiment for CepheusFig12Ablation {
    fn name(&self) -> &'static str {
        "fig12-ablation"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-fig12-ablation",
                toml: include_str!("cepheus-fig12-ablation.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig12-ablation",
                figure: "Fig. 12 (ablation)",
                what: "Fig. 12 under every alternative reading, one at a time",
                args: &["sim", "--preset", "cepheus-fig12-ablation"],
                quick: &[],
                quick_says: "",
                typical_s: 105.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 60,
            },
        ]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        ablation::fig12_ablation(cx.scenario)
    }
}
