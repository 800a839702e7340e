//! Multicast drivers on the engine: each runs a group's members as engine hosts and
//! reports when every member holds the data.
//!
//! - [`broadcast`]: application-layer broadcast (RDMC/MPI schedules from
//!   `rocast_core::overlay`) over the engine's RC connections (RDMC §3).
//! - [`cepheus`]: Cepheus groups (Cepheus §III): MRP registration, switch
//!   replication and feedback aggregation, the safeguard fallback to the overlay.
//! - [`collective`]: concurrent Broadcast collectives (PEEL §4's workload) on tree
//!   multicast (`engine::tree_multicast`) or overlay schedules.
//! - [`ud_transfer`]: reliable UD multicast with NACKs through the two-tier PEEL
//!   fabric, on the byte-level fabric (`engine::frames`): the lab's PEEL scenario.

pub mod broadcast;
pub mod cepheus;
pub mod collective;
pub mod ud_transfer;
