//! PEEL Fig. 7: Broadcast CCT vs failed links (implementation: `crate::peel::fig7`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelFig7;

pub static EXPERIMENT: PeelFig7 = PeelFig7;

impl Experiment for PeelFig7 {
    fn name(&self) -> &'static str {
        "peel-fig7"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-fig7",
                toml: include_str!("peel-fig7.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-fig7",
                figure: "Fig. 7",
                what: "Broadcast CCT vs failed links, 16x48 leaf-spine",
                args: &["sim", "--preset", "peel-fig7"],
                quick: &[],
                quick_says: "",
                typical_s: 7.0,
                calibrated: None,
                alternatives: AlternativeScale::At(&["--set", "experiment.fail_fractions=[0.1]"], "10% failed links (the claims' point), the preset's trials"),
                rank: 80,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("peel-fig7", "peel")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::peel::config::PeelFigureConfig::of(sc, self.name()).map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let p = crate::peel::config::PeelFigureConfig::of(cx.scenario, self.name())?;
        crate::peel::fig7(cx.scenario, &p, cx.base)
    }
}
