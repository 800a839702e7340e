//! Percentiles and means: the core's one statistics module
//! ([`rocast_core::stats`]), under the path the simulator's outputs have used.

pub use rocast_core::stats::*;
