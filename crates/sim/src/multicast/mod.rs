//! Multicast drivers on the engine: each runs a group's members as engine hosts and
//! reports when every member holds the data.
//!
//! - [`broadcast`]: application-layer broadcast (RDMC/MPI schedules from
//!   `rocast_core::overlay`) over the engine's RC connections (RDMC §3).
//! - [`cepheus`]: Cepheus groups (Cepheus §III): MRP registration, switch
//!   replication and feedback aggregation, the safeguard fallback to the overlay.
//! - [`collective`]: concurrent Broadcast collectives (PEEL §4's workload) on tree
//!   multicast (`engine::tree_multicast`) or overlay schedules.
//! - [`small_message`]: a stream of small messages through per-receiver ring
//!   buffers (RDMC §4.6, Derecho's SMC) against RDMC one message at a time.
//! - [`ud_transfer`]: reliable UD multicast with NACKs through the two-tier PEEL
//!   fabric, on the byte-level fabric (`engine::frames`): the lab's PEEL scenario.

pub mod broadcast;
pub mod cepheus;
pub mod collective;
pub mod small_message;
pub mod ud_transfer;
