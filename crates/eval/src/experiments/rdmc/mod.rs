//! RDMC (DSN 2018): the application-layer baselines' own figures. They run through `rocast bcast` (the overlay schemes on the simulator), not as a scenario: `run` says so.

use crate::error::EvalError;
use crate::experiment::{AlternativeScale, Context, Experiment, Figure, Paper, RDMC};
use crate::report::EvalReport;

pub struct Rdmc;

pub static EXPERIMENT: Rdmc = Rdmc;

impl Experiment for Rdmc {
    fn name(&self) -> &'static str {
        "rdmc"
    }
    fn paper(&self) -> &'static Paper {
        &RDMC
    }
    fn figures(&self) -> &'static [Figure] {
        &[
            Figure {
                id: "rdmc-slack",
                figure: "§4.2",
                what: "the binomial pipeline's average slack per step beside 2(1-(l-1)/(n-2)), and a half-speed link (85.6 %)",
                args: &["bcast", "--analyze", "--group-size", "64", "--sizes", "256M", "--block", "1M", "--schemes", "pipeline,chain"],
                quick: &[],
                quick_says: "",
                typical_s: 1.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 10,
            },
            Figure {
                id: "rdmc-fig4",
                figure: "Fig. 4",
                what: "broadcast latency of RDMC's schemes and MPI's tree, OSU-style",
                args: &["bcast", "--group-size", "8", "--sizes", "64:16M", "-f", "--plot", "{out}/bcast.png"],
                quick: &[],
                quick_says: "",
                typical_s: 0.5,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 20,
            },
            Figure {
                id: "rdmc-small",
                figure: "§4.6 (small messages)",
                what: "the small-message protocol vs the binomial pipeline on a stream",
                args: &["bcast", "--smc"],
                quick: &["--smc-groups", "2,8,16,64"],
                quick_says: "groups 2, 8, 16, 64",
                typical_s: 11.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 30,
            },
            Figure {
                id: "rdmc-failure",
                figure: "§4.6 (failure)",
                what: "a member crash mid-transfer: the outcome every survivor reports",
                args: &["bcast", "--group-size", "8", "--sizes", "64K,4M", "--schemes", "sequential,tree,chain,pipeline", "--fail", "3@100us"],
                quick: &[],
                quick_says: "",
                typical_s: 1.0,
                calibrated: None,
                alternatives: AlternativeScale::Own,
                rank: 40,
            },
        ]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("bcast", "bcast")]
    }
    fn run(&self, _cx: &Context) -> Result<EvalReport, EvalError> {
        Err(EvalError::Setting("rdmc's figures run through `rocast bcast` (see `rocast repro --list`), not as a scenario".into()))
    }
}
