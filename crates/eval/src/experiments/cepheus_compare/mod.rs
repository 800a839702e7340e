//! Cepheus against the application-layer schemes on any fabric (the `multicast` preset; implementation: `crate::cepheus::testbed`).

use crate::error::EvalError;
use crate::experiment::{CEPHEUS, Context, Experiment, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusCompare;

pub static EXPERIMENT: CepheusCompare = CepheusCompare;

impl Experiment for CepheusCompare {
    fn name(&self) -> &'static str {
        "compare"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "multicast",
                toml: include_str!("multicast.toml"),
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("multicast", "multicast")]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::cepheus::testbed(cx.scenario, cx.topology, cx.engine, crate::cepheus::TableMode::Compare)
    }
}
