//! The one error type of the experiments' public API ([`EvalError`]): a scenario
//! setting an experiment cannot run with, or a failure of the simulator, its
//! configuration or a file it reads, each kept as its own typed source. The text
//! is what `rocast sim` prints after its name; the CLI is the only place it becomes a
//! string.

use rocast_sim::engine::tree_multicast::TreeMulticastError;
use rocast_sim::engine::EngineError;
use rocast_sim::multicast::broadcast::BroadcastError;
use rocast_sim::multicast::cepheus::CepheusError;
use rocast_sim::multicast::collective::CollectiveError;
use rocast_sim::multicast::ud_transfer::UdTransferError;
use rocast_sim::scenario::config::{ConfigError, SizesError};
use rocast_sim::scenario::topology::TopologyError;
use rocast_sim::RunError;

/// Why an experiment could not run (or its result could not be trusted).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A scenario setting this experiment cannot run with, or a run whose result
    /// fails a check the experiment makes (lost bytes, a tree that misses a member);
    /// the message names the key or the run.
    #[error("{0}")]
    Setting(String),
    /// An argument of an offline tool (`rocast tree`, `rocast.tree`) that does not
    /// parse: `name` is the argument's name without dashes (`dst`), `why` starts with
    /// the value given. The CLI prints `--dst "random:999": …`; Python names its own
    /// argument ([`EvalError::python_message`]).
    #[error("--{} {why}", name.replace('_', "-"))]
    Argument { name: &'static str, why: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Sizes(#[from] SizesError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    TreeMulticast(#[from] TreeMulticastError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Broadcast(#[from] BroadcastError),
    #[error(transparent)]
    Cepheus(#[from] CepheusError),
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    #[error(transparent)]
    UdTransfer(#[from] UdTransferError),
    #[error(transparent)]
    Workload(#[from] rocast_sim::scenario::workload::WorkloadError),
    #[error(transparent)]
    FrameFabric(#[from] rocast_sim::engine::frames::FrameFabricError),
    #[error(transparent)]
    Output(#[from] rocast_sim::output::files::OutputError),
    #[error(transparent)]
    Fabric(#[from] rocast_core::plan::TopologyError),
    #[error(transparent)]
    Routing(#[from] rocast_core::plan::routing::RoutingError),
    #[error(transparent)]
    Tree(#[from] rocast_core::plan::multicast_tree::TreeError),
    #[error(transparent)]
    Prefix(#[from] rocast_core::plan::prefix::PrefixError),
    #[error(transparent)]
    Mft(#[from] rocast_core::fabric::cepheus::MftError),
    #[error(transparent)]
    Scheme(#[from] rocast_core::overlay::SchemeError),
    #[error(transparent)]
    TwoTier(#[from] rocast_core::switch::two_tier::TwoTierError),
    #[error(transparent)]
    Units(#[from] rocast_core::units::UnitError),
    /// A file an experiment reads or runs (a data CSV, the exact solver).
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl EvalError {
    /// The message as the Python package shows it: an argument by its keyword
    /// (`dst "random:999": …`, not the CLI's `--dst`).
    pub fn python_message(&self) -> String {
        match self {
            EvalError::Argument { name, why } => format!("{name} {why}"),
            e => e.to_string(),
        }
    }

    /// [`EvalError::Argument`].
    pub fn argument(name: &'static str, why: impl Into<String>) -> Self {
        EvalError::Argument {
            name,
            why: why.into(),
        }
    }
}

impl From<String> for EvalError {
    fn from(s: String) -> Self {
        EvalError::Setting(s)
    }
}

impl From<&str> for EvalError {
    fn from(s: &str) -> Self {
        EvalError::Setting(s.to_string())
    }
}
