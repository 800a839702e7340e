//! Cepheus §V-C, Fig. 11: HPL panel broadcast and row swap (implementation: `crate::cepheus::hpl`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusHpl;

pub static EXPERIMENT: CepheusHpl = CepheusHpl;

impl Experiment for CepheusHpl {
    fn name(&self) -> &'static str {
        "hpl"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-fig11",
                toml: include_str!("cepheus-fig11.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig11",
                figure: "Fig. 11",
                what: "HPL panel broadcast and row swap",
                args: &["sim", "--preset", "cepheus-fig11"],
                quick: &[],
                quick_says: "",
                typical_s: 0.9,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 30,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("fig11", "cepheus_fig11")]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::cepheus::hpl(cx.scenario, cx.topology, cx.engine)
    }
}
