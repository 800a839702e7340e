//! PEEL §2.3: layer-peeling greedy vs exact Steiner trees on asymmetric fat-trees (implementation: `crate::peel::approx`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelApprox;

pub static EXPERIMENT: PeelApprox = PeelApprox;

impl Experiment for PeelApprox {
    fn name(&self) -> &'static str {
        "peel-approx"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-approx",
                toml: include_str!("peel-approx.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-approx",
                figure: "§2.3",
                what: "layer-peeling greedy vs exact Steiner trees on 200 asymmetric fat-trees",
                args: &["sim", "--preset", "peel-approx"],
                quick: &[],
                quick_says: "",
                typical_s: 0.2,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 20,
            },
        ]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::peel::config::ApproxConfig>(sc, self.name())?
            .check(self.name())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let a: crate::peel::config::ApproxConfig = cx.config(self.name())?;
        a.check(self.name())?;
        crate::peel::approx(cx.scenario, &a, cx.base)
    }
}
