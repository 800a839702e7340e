//! Broadcast-select Fig. 4: Soft-RoCE latency, the paper's speed-ups beside stock rxe measured (implementation: `crate::odbss::fig4`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, ODBSS, Paper, Preset};
use crate::report::EvalReport;

pub struct OdbssUdFig4;

pub static EXPERIMENT: OdbssUdFig4 = OdbssUdFig4;

impl Experiment for OdbssUdFig4 {
    fn name(&self) -> &'static str {
        "ud-fig4"
    }
    fn paper(&self) -> &'static Paper {
        &ODBSS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "ud-fig4",
                toml: include_str!("ud-fig4.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "odbss-fig4",
                figure: "Fig. 4",
                what: "Soft-RoCE latency: the paper's speed-ups beside stock rxe measured",
                args: &["sim", "--preset", "ud-fig4"],
                quick: &[],
                quick_says: "",
                typical_s: 0.1,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 20,
            },
        ]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::odbss::fig4(cx.scenario)
    }
}
