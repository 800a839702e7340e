//! `fabric`: what one switch decides, as pure functions and small state machines with
//! no clock and no packets of their own — ECMP hashing, the shared-buffer MMU with PFC,
//! and ECN RED marking — and the multicast engines that plug into the pipeline:
//! [`cepheus`] (MFT, replication, connection bridging, feedback aggregation, CNP
//! filtering) and [`peel`] (static power-of-two prefix rules, rack membership).
//! `switch` composes them into the one switch pipeline that the
//! simulator and `rocast switch` both drive; nothing here imports `switch` or `control`.
//!
//! The models follow the HPCC simulator (Li et al., SIGCOMM 2019;
//! `alibaba-edu/High-Precision-Congestion-Control`, `switch-mmu.cc` and `switch-node.cc`),
//! which is what the RDMA congestion-control literature measures against.

pub mod cepheus;
pub mod ecmp;
pub mod mmu;
pub mod peel;
pub mod red;

pub use ecmp::ecmp_hash;
pub use mmu::{MmuConfig, SharedBufferMmu};
pub use red::EcnRed;
