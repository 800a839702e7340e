//! Application-layer multicast ("overlay" multicast): a broadcast built from unicast
//! RC connections, the way applications do it today and rocast's fallback when the
//! network cannot replicate (Cepheus §II-C "AMcast", its "safeguard"; RDMC, DSN 2018).
//!
//! - [`schedule`]: pure block schedules — sequential send, binomial tree, chain,
//!   RDMC's binomial pipeline (with the twin construction for groups that are not a
//!   power of two) and the NCCL-style ring. Given (group size, root, blocks, rank, step)
//!   they say who sends which block to whom.
//! - [`driver`]: one rank's sans-IO executor of a schedule. It is told what arrived and
//!   what completed and answers with the sends to post; the simulator and any
//!   real-time runtime drive the same object over RC connections.
//! - [`rank`]: one rank in time — the driver, its post queue, the block transport
//!   (WRITE or SEND with immediate), ready-for-block and failure detection: the one
//!   overlay loop the simulator and the runtime both drive.
//! - [`group`]: all ranks' drivers of one broadcast with the per-rank CPU that times
//!   their posts — shared by the model and the simulator.
//! - [`model`]: the analytic completion time of a schedule on an idle non-blocking
//!   fabric, in closed form where one exists, and the critical-path evaluation the
//!   simulator is checked against.
//! - [`small_message`]: the small-message protocol paired with RDMC (RDMC §4.6,
//!   Derecho's SMC): writes into per-receiver ring buffers, credit returned.
//! - [`check_schedule`]: the exhaustive consistency check (RDMC's `test_pattern`).

pub mod driver;
pub mod group;
pub mod model;
pub mod rank;
pub mod schedule;
pub mod small_message;

pub use driver::{
    BroadcastDriver, ControlImm, DriverAction, DriverConfig, DriverError, GroupOutcome,
};
pub use group::{BroadcastGroup, TimedPost};
pub use rank::{BlockOp, Channel, OverlayPost, OverlayRank, OverlayRankConfig, OverlayRankStats};
pub use schedule::{BlockTransfer, Schedule, ScheduleError};

use std::fmt;
use std::str::FromStr;

/// The broadcast algorithms rocast implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scheme {
    /// The root sends the message to each receiver in turn (N unicasts).
    Sequential,
    /// MPI's binomial tree: ⌈log2 n⌉ rounds, the whole message per hop.
    BinomialTree,
    /// A pipelined chain of blocks (RDMC "chain send").
    Chain,
    /// RDMC's binomial pipeline: a hypercube schedule in which every rank sends and
    /// receives a block at every step.
    BinomialPipeline,
    /// NCCL's ring broadcast: blocks flow root → root+1 → … around the ring, with
    /// several slices in flight per connection instead of one block at a time.
    Ring,
    /// A pipelined binary tree (the "Binary Tree" of PEEL §4 and NCCL's tree): rank
    /// v's children are 2v+1 and 2v+2; each block goes to the first child, then the
    /// second, so a rank forwards one block every two steps.
    BinaryTree,
    /// NCCL's double binary tree (NCCL 2.4, "Massively Scale Your Deep Learning
    /// Training with NCCL 2.4", which PEEL cites as \[3\]): the root's blocks alternate
    /// between two binary trees over the other ranks, each rank interior in at most one
    /// of them, so each rank forwards about one copy per block where a binary tree's
    /// interior ranks forward two.
    DoubleBinaryTree,
}

impl Scheme {
    pub const ALL: [Scheme; 7] = [
        Scheme::Sequential,
        Scheme::BinomialTree,
        Scheme::Chain,
        Scheme::BinomialPipeline,
        Scheme::Ring,
        Scheme::BinaryTree,
        Scheme::DoubleBinaryTree,
    ];

    /// The scheme's code in the group control channel's `Overlay` message
    /// (`wire::group_control`). Written out per scheme rather than taken from the
    /// position in [`ALL`](Self::ALL), so reordering or extending `ALL` cannot change
    /// the bytes peers exchange.
    pub fn code(self) -> u8 {
        match self {
            Scheme::Sequential => 0,
            Scheme::BinomialTree => 1,
            Scheme::Chain => 2,
            Scheme::BinomialPipeline => 3,
            Scheme::Ring => 4,
            Scheme::BinaryTree => 5,
            Scheme::DoubleBinaryTree => 6,
        }
    }

    /// The scheme with this [`code`](Self::code); None for a code no scheme has.
    pub fn from_code(code: u8) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The short name the CLI and the CSV use.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Sequential => "sequential",
            Scheme::BinomialTree => "tree",
            Scheme::Chain => "chain",
            Scheme::BinomialPipeline => "pipeline",
            Scheme::Ring => "ring",
            Scheme::BinaryTree => "binary-tree",
            Scheme::DoubleBinaryTree => "double-binary-tree",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name [`Scheme`]'s `FromStr` does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    #[error(
        "unknown scheme {0:?} (expected sequential, tree, chain, pipeline, ring, binary-tree or double-binary-tree)"
    )]
    Unknown(String),
}

impl FromStr for Scheme {
    type Err = SchemeError;
    fn from_str(s: &str) -> Result<Self, SchemeError> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "sequential" | "seq" => Scheme::Sequential,
            "tree" | "binomial-tree" | "binomial_tree" => Scheme::BinomialTree,
            "chain" => Scheme::Chain,
            "pipeline" | "binomial-pipeline" | "binomial_pipeline" => Scheme::BinomialPipeline,
            "ring" => Scheme::Ring,
            "binary-tree" | "binary_tree" | "btree" => Scheme::BinaryTree,
            "double-binary-tree" | "double_binary_tree" | "dbtree" => Scheme::DoubleBinaryTree,
            other => return Err(SchemeError::Unknown(other.to_string())),
        })
    }
}

/// The first rule a schedule breaks, as [`check_schedule`] finds it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleViolation {
    #[error("step {step}: rank {rank} sends to bad peer {peer}")]
    BadPeer { step: u32, rank: u32, peer: u32 },
    #[error("step {step}: rank {rank} sends bad block {block}")]
    BadBlock { step: u32, rank: u32, block: u32 },
    #[error("step {step}: rank {rank} sends block {block} it does not have")]
    SendsMissingBlock { step: u32, rank: u32, block: u32 },
    #[error("step {step}: rank {rank} sends block {block} to {peer} which expects {expects:?}")]
    UnmatchedSend {
        step: u32,
        rank: u32,
        block: u32,
        peer: u32,
        expects: Option<BlockTransfer>,
    },
    #[error("step {step}: rank {rank} expects block {block} from {peer} which sends {sends:?}")]
    UnmatchedReceive {
        step: u32,
        rank: u32,
        block: u32,
        peer: u32,
        sends: Option<BlockTransfer>,
    },
    #[error("step {step}: the root receives block {block}")]
    RootReceives { step: u32, block: u32 },
    #[error("step {step}: rank {rank} receives block {block} again (first at step {first})")]
    ReceivedTwice {
        step: u32,
        rank: u32,
        block: u32,
        first: u32,
    },
    #[error("rank {rank} never receives block {block}")]
    NeverReceives { rank: usize, block: usize },
}

/// Checks a schedule exhaustively, step by step (RDMC's `test_pattern`):
/// every non-root rank receives every block exactly once and the root none; a rank
/// only sends blocks it already has (received at an earlier step); every send has
/// the matching receive at the same step and vice versa; no rank sends or receives
/// twice in one step. Returns the first violation.
pub fn check_schedule(s: &Schedule) -> Result<(), ScheduleViolation> {
    let n = s.group_size();
    let k = s.blocks() as usize;
    let steps = s.total_steps();
    // have[rank][block]: the step at which rank got the block (root: before step 0).
    let mut have: Vec<Vec<Option<u32>>> = vec![vec![None; k]; n as usize];
    have[s.root() as usize] = vec![Some(0); k];
    for step in 0..steps {
        let mut arriving = Vec::new();
        for r in 0..n {
            if let Some(t) = s.outgoing(r, step) {
                if t.peer >= n || t.peer == r {
                    return Err(ScheduleViolation::BadPeer {
                        step,
                        rank: r,
                        peer: t.peer,
                    });
                }
                if t.block as usize >= k {
                    return Err(ScheduleViolation::BadBlock {
                        step,
                        rank: r,
                        block: t.block,
                    });
                }
                match have[r as usize][t.block as usize] {
                    Some(at) if at <= step && (r == s.root() || at < step) => {}
                    _ => {
                        return Err(ScheduleViolation::SendsMissingBlock {
                            step,
                            rank: r,
                            block: t.block,
                        })
                    }
                }
                let back = s.incoming(t.peer, step);
                if back
                    != Some(BlockTransfer {
                        peer: r,
                        block: t.block,
                    })
                {
                    return Err(ScheduleViolation::UnmatchedSend {
                        step,
                        rank: r,
                        block: t.block,
                        peer: t.peer,
                        expects: back,
                    });
                }
                arriving.push((t.peer, t.block));
            }
            if let Some(t) = s.incoming(r, step) {
                let fwd = s.outgoing(t.peer, step);
                if fwd
                    != Some(BlockTransfer {
                        peer: r,
                        block: t.block,
                    })
                {
                    return Err(ScheduleViolation::UnmatchedReceive {
                        step,
                        rank: r,
                        block: t.block,
                        peer: t.peer,
                        sends: fwd,
                    });
                }
            }
        }
        for (r, b) in arriving {
            if r == s.root() {
                return Err(ScheduleViolation::RootReceives { step, block: b });
            }
            if let Some(at) = have[r as usize][b as usize] {
                return Err(ScheduleViolation::ReceivedTwice {
                    step,
                    rank: r,
                    block: b,
                    first: at,
                });
            }
            have[r as usize][b as usize] = Some(step);
        }
    }
    for (r, h) in have.iter().enumerate() {
        if let Some(b) = h.iter().position(|x| x.is_none()) {
            return Err(ScheduleViolation::NeverReceives { rank: r, block: b });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
