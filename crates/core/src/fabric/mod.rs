//! `fabric`: what one switch decides, as pure functions and small state machines with
//! no clock and no packets of their own — ECMP hashing, the shared-buffer MMU with PFC,
//! and ECN RED marking — and the multicast engines that plug into the pipeline:
//! [`cepheus`] (MFT, replication, connection bridging, feedback aggregation, CNP
//! filtering). The simulator's switch model drives them; [`frame_switch`] puts them
//! together on Ethernet frames for the real-time switch (`rocast switch`).
//!
//! The models follow the HPCC simulator (Li et al., SIGCOMM 2019;
//! `alibaba-edu/High-Precision-Congestion-Control`, `switch-mmu.cc` and `switch-node.cc`),
//! which is what the RDMA congestion-control literature measures against.

pub mod cepheus;
pub mod ecmp;
pub mod frame_switch;
pub mod mmu;
pub mod red;

pub use ecmp::ecmp_hash;
pub use frame_switch::{FrameSwitch, FrameSwitchConfig, FrameSwitchStats, OutFrame};
pub use mmu::{MmuConfig, SharedBufferMmu};
pub use red::EcnRed;
