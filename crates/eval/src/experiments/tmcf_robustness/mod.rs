//! TMCF Table I: CPMP per RTT and phase length, per CNP policy (implementation: `crate::tmcf::robustness`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, Paper, Preset, TMCF};
use crate::report::EvalReport;

pub struct TmcfRobustness;

pub static EXPERIMENT: TmcfRobustness = TmcfRobustness;

impl Experiment for TmcfRobustness {
    fn name(&self) -> &'static str {
        "tmcf-robustness"
    }
    fn paper(&self) -> &'static Paper {
        &TMCF
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "tmcf-robustness",
                toml: include_str!("tmcf-robustness.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "tmcf-table1",
                figure: "Table I",
                what: "CPMP per RTT and phase length, per CNP policy (robustness of Table I's parameters)",
                args: &["sim", "--preset", "tmcf-robustness"],
                quick: &[],
                quick_says: "",
                typical_s: 44.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 30,
            },
        ]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::tmcf::RobustnessConfig>(sc, self.name())
            .map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::tmcf::RobustnessConfig = cx.config(self.name())?;
        crate::tmcf::robustness(cx.scenario, cx.base, &config)
    }
}
