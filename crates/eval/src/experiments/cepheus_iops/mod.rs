//! Cepheus §V-C, Table I: 3-replica 8 KB write IOPS (implementation: `crate::cepheus::iops`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusIops;

pub static EXPERIMENT: CepheusIops = CepheusIops;

impl Experiment for CepheusIops {
    fn name(&self) -> &'static str {
        "iops"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-iops",
                toml: include_str!("cepheus-iops.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-table1",
                figure: "Table I",
                what: "3-replica 8 KB write IOPS: 1-unicast, 3-unicasts, Cepheus",
                args: &["sim", "--preset", "cepheus-iops"],
                quick: &[],
                quick_says: "",
                typical_s: 0.5,
                calibrated: Some("the absolute IOPS (io_stack_us is 1 / the paper's 1-unicast rate); the ratio is simulated"),
                alternatives: AlternativeScale::Own,
                rank: 40,
            },
        ]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<crate::cepheus::config::IopsConfig>(sc, self.name())
            .map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::cepheus::config::IopsConfig = cx.config(self.name())?;
        crate::cepheus::iops(cx.scenario, cx.topology, cx.engine, &config)
    }
}
