//! PEEL Fig. 1: core-link traversals of unicast Broadcast vs multicast (implementation: `crate::peel::fig1`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelFig1;

pub static EXPERIMENT: PeelFig1 = PeelFig1;

impl Experiment for PeelFig1 {
    fn name(&self) -> &'static str {
        "peel-fig1"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-fig1",
                toml: include_str!("peel-fig1.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-fig1",
                figure: "Fig. 1",
                what: "core-link traversals of unicast Broadcast vs multicast, 16x48 leaf-spine",
                args: &["sim", "--preset", "peel-fig1"],
                quick: &[],
                quick_says: "",
                typical_s: 0.1,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 10,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("peel-fig1", "peel_static")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::peel::config::Fig1Config>(sc, self.name())
            .map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::peel::fig1(cx.scenario, &cx.config(self.name())?, cx.base)
    }
}
