//! PEEL Fig. 5: Broadcast CCT vs message size (implementation: `crate::peel::fig5`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, PEEL, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;

pub struct PeelFig5;

pub static EXPERIMENT: PeelFig5 = PeelFig5;

impl Experiment for PeelFig5 {
    fn name(&self) -> &'static str {
        "peel-fig5"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "peel-fig5",
                toml: include_str!("peel-fig5.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "peel-fig5",
                figure: "Fig. 5",
                what: "Broadcast CCT vs message size, 512 GPUs: PEEL vs ring, tree, Orca, optimal",
                args: &["sim", "--preset", "peel-fig5"],
                quick: &["--set", "multicast.sizes=\"2M,8M,32M\"", "--set", "experiment.broadcasts=20"],
                quick_says: "sizes 2-32 MB, 20 broadcasts per point (not 2-512 MB, 60)",
                typical_s: 396.0,
                calibrated: None,
                alternatives: AlternativeScale::At(&["--set", "multicast.sizes=\"2M,32M\"", "--set", "experiment.broadcasts=20", "--set", "experiment.exact_baseline_groups=0"], "2 MB and 32 MB, 20 Broadcasts per point (the 512 MB claims are not measured at this scale: a 512 MB point takes minutes)"),
                rank: 60,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("peel-fig5", "peel")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::peel::config::PeelFigureConfig::of(sc, self.name()).map(drop)
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let p = crate::peel::config::PeelFigureConfig::of(cx.scenario, self.name())?;
        crate::peel::fig5(cx.scenario, &p, cx.base)
    }
}
