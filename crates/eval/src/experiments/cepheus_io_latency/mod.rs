//! Cepheus §V-C, Fig. 10: single IO latency of 3-replica writes (implementation: `crate::cepheus::io_latency`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusIoLatency;

pub static EXPERIMENT: CepheusIoLatency = CepheusIoLatency;

impl Experiment for CepheusIoLatency {
    fn name(&self) -> &'static str {
        "io-latency"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-fig10",
                toml: include_str!("cepheus-fig10.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig10",
                figure: "Fig. 10",
                what: "single IO latency of 3-replica writes",
                args: &["sim", "--preset", "cepheus-fig10"],
                quick: &[],
                quick_says: "",
                typical_s: 0.2,
                calibrated: Some("the 8 KB point (set by the same io_stack_us); 512 KB is simulated"),
                alternatives: AlternativeScale::Own,
                rank: 20,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("fig10", "cepheus_fig10")]
    }
    fn check(&self, sc: &rocast_sim::Scenario) -> Result<(), EvalError> {
        let config: Result<crate::cepheus::config::IoLatencyConfig, _> =
            crate::experiment::experiment_config(sc, self.name());
        config.map(|_| ())
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: crate::cepheus::config::IoLatencyConfig = cx.config(self.name())?;
        crate::cepheus::io_latency(cx.scenario, cx.topology, cx.engine, &config)
    }
}
