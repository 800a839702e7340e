//! TMCF Figs 5-6: multicast rate as the bottleneck moves, per CNP policy (implementation: `crate::tmcf::moving`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, Paper, Preset, TMCF};
use crate::report::EvalReport;

pub struct TmcfMoving;

pub static EXPERIMENT: TmcfMoving = TmcfMoving;

impl Experiment for TmcfMoving {
    fn name(&self) -> &'static str {
        "tmcf-moving"
    }
    fn paper(&self) -> &'static Paper {
        &TMCF
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "tmcf-moving",
                toml: include_str!("tmcf-moving.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "tmcf-fig5-6",
                figure: "Figs 5-6",
                what: "multicast rate as the bottleneck moves, per CNP policy",
                args: &["sim", "--preset", "tmcf-moving"],
                quick: &[],
                quick_says: "",
                typical_s: 0.1,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 20,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("tmcf-moving", "tmcf_rate")]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::tmcf::MovingConfig>(sc, self.name())
            .map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::tmcf::MovingConfig = cx.config(self.name())?;
        crate::tmcf::moving(cx.scenario, cx.base, &config)
    }
}
