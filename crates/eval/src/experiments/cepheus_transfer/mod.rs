//! One Cepheus transfer checked byte for byte, the conformance run `rocast lab run` repeats on real frames (implementation: `crate::cepheus::transfer`).

use crate::error::EvalError;
use crate::experiment::{CEPHEUS, Context, Experiment, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusTransfer;

pub static EXPERIMENT: CepheusTransfer = CepheusTransfer;

impl Experiment for CepheusTransfer {
    fn name(&self) -> &'static str {
        "transfer"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "transfer",
                toml: include_str!("transfer.toml"),
            },
        ]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::cepheus::transfer(cx.scenario, cx.topology, cx.engine)
    }
}
