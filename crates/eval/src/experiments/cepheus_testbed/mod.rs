//! Cepheus §V-A, Figs 8-9: MPI-Bcast JCT on the 1 -> 3 testbed (implementation: `crate::cepheus::testbed`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusTestbed;

pub static EXPERIMENT: CepheusTestbed = CepheusTestbed;

impl Experiment for CepheusTestbed {
    fn name(&self) -> &'static str {
        "testbed"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-testbed",
                toml: include_str!("cepheus-testbed.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig8-9",
                figure: "Figs 8-9",
                what: "MPI-Bcast JCT on the 1 -> 3 testbed, small and large messages: Cepheus vs chain, binomial tree, RDMC pipeline",
                args: &["sim", "--preset", "cepheus-testbed"],
                quick: &[],
                quick_says: "",
                typical_s: 2.2,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 10,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("testbed", "cepheus_testbed")]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::cepheus::testbed(cx.scenario, cx.topology, cx.engine, crate::cepheus::TableMode::Testbed)
    }
}
