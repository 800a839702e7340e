//! TMCF Figs 3-4: multicast rate as congested paths are added, per CNP policy (implementation: `crate::tmcf::cpmp`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, Paper, Preset, TMCF};
use crate::report::EvalReport;

pub struct TmcfCpmp;

pub static EXPERIMENT: TmcfCpmp = TmcfCpmp;

impl Experiment for TmcfCpmp {
    fn name(&self) -> &'static str {
        "tmcf-cpmp"
    }
    fn paper(&self) -> &'static Paper {
        &TMCF
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "tmcf-cpmp",
                toml: include_str!("tmcf-cpmp.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "tmcf-fig3-4",
                figure: "Figs 3-4",
                what: "multicast rate as congested paths are added, DCQCN with and without TMCF (and Cepheus' filter, PEEL's guard)",
                args: &["sim", "--preset", "tmcf-cpmp"],
                quick: &[],
                quick_says: "",
                typical_s: 0.2,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 10,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("tmcf-cpmp", "tmcf_rate")]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::tmcf::CpmpConfig>(sc, self.name())
            .map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::tmcf::CpmpConfig = cx.config(self.name())?;
        crate::tmcf::cpmp(cx.scenario, cx.base, &config)
    }
}
