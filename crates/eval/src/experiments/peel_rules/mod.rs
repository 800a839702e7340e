//! PEEL §3.2: prefix rules and header bits, k = 8 ... 128 (implementation: `crate::peel::rules`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelRules;

pub static EXPERIMENT: PeelRules = PeelRules;

impl Experiment for PeelRules {
    fn name(&self) -> &'static str {
        "peel-rules"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-rules",
                toml: include_str!("peel-rules.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-rules",
                figure: "§3.2",
                what: "prefix rules and header bits, k = 8 ... 128",
                args: &["sim", "--preset", "peel-rules"],
                quick: &[],
                quick_says: "",
                typical_s: 0.5,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 40,
            },
        ]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::peel::config::RulesConfig>(sc, self.name())
            .map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::peel::rules(&cx.config(self.name())?)
    }
}
