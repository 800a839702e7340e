//! The optical broadcast-select fabric (ODBSS) of Leong, Li and Liu, "Reliable
//! multicast using RDMA over a passive optical cross-connect fabric enhanced with
//! WDM" (APSIPA Trans. 2019), and the two studies on it:
//!
//! - [`broadcast_select`]: the element (§II-A), the N^D fabric (§II-C), the hybrid
//!   offload (§II-D) and the `ud-latency` study (§III-B): UD multicast against MPI's
//!   binomial tree over RC.
//! - [`fig4`](mod@fig4): the `ud-fig4` study (§III-B, Fig. 4): the paper's Soft-RoCE
//!   speed-ups from its own columns, beside stock Soft-RoCE measured in rxe guests.
//! - [`ud_loss`](mod@ud_loss): the `ud-loss` study (§III): NACK multicast over UD on one element,
//!   its loss ratio without and with repair.
//!
//! Their keys are their experiments' tables: `[experiment.ud-latency]` ([`config`]) and
//! `[experiment.ud-loss]` ([`ud_loss_config`]).

pub mod broadcast_select;
pub mod config;
pub mod fig4;
pub mod ud_loss;
pub mod ud_loss_config;

pub use broadcast_select::ud_latency;
pub use fig4::fig4;
pub use ud_loss::ud_loss;
