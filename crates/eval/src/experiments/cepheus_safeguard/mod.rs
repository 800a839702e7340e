//! Cepheus §V-D: a lossy branch mid-transfer and the safeguard's fallback to RDMC (implementation: `crate::cepheus::safeguard`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusSafeguard;

pub static EXPERIMENT: CepheusSafeguard = CepheusSafeguard;

impl Experiment for CepheusSafeguard {
    fn name(&self) -> &'static str {
        "safeguard"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-safeguard",
                toml: include_str!("cepheus-safeguard.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-safeguard",
                figure: "§V-D",
                what: "a lossy branch mid-transfer and the safeguard's fallback to RDMC",
                args: &["sim", "--preset", "cepheus-safeguard"],
                quick: &[],
                quick_says: "",
                typical_s: 1.2,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 90,
            },
        ]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        let config: Result<crate::cepheus::config::SafeguardConfig, _> =
            crate::experiment::experiment_config(sc, self.name());
        config.map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::cepheus::config::SafeguardConfig = cx.config(self.name())?;
        crate::cepheus::safeguard(cx.scenario, cx.topology, cx.engine, &config)
    }
}
