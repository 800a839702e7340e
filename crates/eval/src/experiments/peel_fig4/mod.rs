//! PEEL Fig. 4: Orca's set-up delay vs p99 CCT of a 32 MB Broadcast (implementation: `crate::peel::fig4`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelFig4;

pub static EXPERIMENT: PeelFig4 = PeelFig4;

impl Experiment for PeelFig4 {
    fn name(&self) -> &'static str {
        "peel-fig4"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-fig4",
                toml: include_str!("peel-fig4.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-fig4",
                figure: "Fig. 4",
                what: "Orca's set-up delay vs p99 CCT of a 32 MB Broadcast",
                args: &["sim", "--preset", "peel-fig4"],
                quick: &["--set", "experiment.broadcasts=20"],
                quick_says: "20 broadcasts per point (not 60)",
                typical_s: 58.0,
                calibrated: None,
                alternatives: AlternativeScale::At(&["--set", "multicast.groups=[512]", "--set", "experiment.broadcasts=20"], "512 GPUs only, 20 Broadcasts"),
                rank: 50,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("peel-fig4", "peel")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::peel::config::PeelFigureConfig::of(sc, self.name()).map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let p = crate::peel::config::PeelFigureConfig::of(cx.scenario, self.name())?;
        crate::peel::fig4(cx.scenario, &p, cx.base)
    }
}
