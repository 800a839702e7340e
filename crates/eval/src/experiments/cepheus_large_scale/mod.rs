//! Cepheus §V-B, Fig. 12: FCT of a 512-member multicast on 1024 servers (implementation: `crate::cepheus::testbed`).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;

pub struct CepheusLargeScale;

pub static EXPERIMENT: CepheusLargeScale = CepheusLargeScale;

impl Experiment for CepheusLargeScale {
    fn name(&self) -> &'static str {
        "large-scale"
    }
    fn paper(&self) -> &'static Paper {
        &CEPHEUS
    }
    fn presets(&self) -> &'static [Preset] {
        &[
            Preset {
                name: "cepheus-fig12",
                toml: include_str!("cepheus-fig12.toml"),
            },
        ]
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "cepheus-fig12",
                figure: "Fig. 12",
                what: "FCT of a 512-member multicast on 1024 servers of 64-port switches, 64 B - 1 GB, vs chain and tree",
                args: &["sim", "--preset", "cepheus-fig12"],
                quick: &["--set", "multicast.sizes=\"64,4K,64K,1M,16M\""],
                quick_says: "sizes 64 B - 16 MB (not 64 MB - 1 GB)",
                typical_s: 571.0,
                calibrated: None,
                alternatives: AlternativeScale::NotRun("cepheus-fig12-ablation runs every alternative of Fig. 12's readings at 64 B, 4 KiB and 16 MiB"),
                rank: 50,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("fig12", "cepheus_fig12")]
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        crate::cepheus::testbed(cx.scenario, cx.topology, cx.engine, crate::cepheus::TableMode::LargeScale)
    }
}
