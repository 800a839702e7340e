//! PEEL §3.4: the sender's CNP guard timer vs the receiver's CNP limiter (implementation: `crate::peel::guard`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelGuard;

pub static EXPERIMENT: PeelGuard = PeelGuard;

impl Experiment for PeelGuard {
    fn name(&self) -> &'static str {
        "peel-guard"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-guard",
                toml: include_str!("peel-guard.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-guard",
                figure: "§3.4",
                what: "the sender's CNP guard timer vs the receiver's CNP limiter",
                args: &["sim", "--preset", "peel-guard"],
                quick: &[],
                quick_says: "",
                typical_s: 4.5,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 90,
            },
        ]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::peel::config::PeelFigureConfig::of(sc, self.name()).map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let p = crate::peel::config::PeelFigureConfig::of(cx.scenario, self.name())?;
        crate::peel::guard(cx.scenario, &p, cx.base)
    }
}
