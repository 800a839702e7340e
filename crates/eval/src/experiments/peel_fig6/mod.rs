//! PEEL Fig. 6: Broadcast CCT vs group size (implementation: `crate::peel::fig6`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelFig6;

pub static EXPERIMENT: PeelFig6 = PeelFig6;

impl Experiment for PeelFig6 {
    fn name(&self) -> &'static str {
        "peel-fig6"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-fig6",
                toml: include_str!("peel-fig6.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-fig6",
                figure: "Fig. 6",
                what: "Broadcast CCT vs group size, 64 MB",
                args: &["sim", "--preset", "peel-fig6"],
                quick: &["--set", "multicast.groups=[32,64,128,256]", "--set", "experiment.broadcasts=20"],
                quick_says: "groups 32-256, 20 broadcasts per point (not 32-1024, 60)",
                typical_s: 330.0,
                calibrated: None,
                alternatives: AlternativeScale::At(&["--set", "multicast.groups=[256]", "--set", "experiment.broadcasts=20"], "256 GPUs (the claims' point), 20 Broadcasts"),
                rank: 70,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("peel-fig6", "peel")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::peel::config::PeelFigureConfig::of(sc, self.name()).map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let p = crate::peel::config::PeelFigureConfig::of(cx.scenario, self.name())?;
        crate::peel::fig6(cx.scenario, &p, cx.base)
    }
}
