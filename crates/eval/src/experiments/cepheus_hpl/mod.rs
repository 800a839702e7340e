//! Cepheus §V-C, Fig. 11: HPL panel broadcast and row swap (the model: `hpl.rs`). Its
//! own keys live under `[experiment.hpl]` ([`HplConfig`]).

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, CEPHEUS, Context, Experiment, Figure, Paper, Preset};
use crate::report::EvalReport;
use rocast_sim::Scenario;
use serde::Deserialize;

mod hpl;

/// `[experiment.hpl]`: the HPL run modelled. N and NB are rocast's assumptions (the
/// paper gives neither); see the preset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HplConfig {
    /// The matrix order N.
    pub n: u64,
    /// The block size NB (N / NB panels).
    pub nb: u64,
    /// Process grids P x Q: a panel broadcast runs along a row (Q ranks), a row swap
    /// along a column (P ranks).
    pub grids: Vec<[u32; 2]>,
    /// Panels simulated, spread evenly over the N / NB, each standing for its share.
    pub samples: u32,
}

impl Default for HplConfig {
    fn default() -> Self {
        HplConfig {
            n: 40960,
            nb: 256,
            grids: vec![[1, 4], [4, 1]],
            samples: 16,
        }
    }
}

impl HplConfig {
    fn check(&self) -> Result<(), EvalError> {
        if self.nb == 0 || self.n < self.nb || self.samples == 0 || self.grids.is_empty() {
            return Err(EvalError::Setting(
                "cepheus-fig11: experiment.hpl.n >= nb > 0, samples > 0 and grids not empty"
                    .into(),
            ));
        }
        Ok(())
    }
}

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
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<HplConfig>(sc, self.name())?.check()
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: HplConfig = cx.config(self.name())?;
        hpl::hpl(cx.scenario, &config, cx.topology, cx.engine)
    }
}
