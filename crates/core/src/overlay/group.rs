//! All ranks of one broadcast: their [`OverlayRank`]s, the per-rank CPU that posts
//! what the ranks ask for, and when each rank had the whole message. Whatever
//! executes a broadcast with every rank in one place — the analytic model's ideal
//! network, the simulator's RC connections — feeds arrivals and completions in here
//! and takes timed posts out; time is passed in, never read. (A runtime, where each
//! process is one rank, drives one [`OverlayRank`] directly.)
//!
//! The CPU model (Cepheus §II-C: overlay multicast pays the end-host stack at every
//! hop): every post costs its rank `overhead`, posts of one rank one after another,
//! counted from the event that made the rank ask.
//!
//! Memory: the ranks plus 8 bytes per rank.

use super::driver::{DriverConfig, DriverError, GroupOutcome};
use super::rank::{BlockOp, OverlayPost, OverlayRank, OverlayRankConfig};
use super::Scheme;
use crate::time::{Duration, Instant};

/// One message to post: from `rank`, at `at_ps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedPost {
    pub rank: u32,
    pub at_ps: u64,
    pub post: OverlayPost,
}

pub struct BroadcastGroup {
    ranks: Vec<OverlayRank>,
    overhead_ps: u64,
    cpu_free: Vec<u64>,
    /// Ranks that may have posts waiting (drained in rank order).
    touched: Vec<u32>,
}

impl BroadcastGroup {
    /// Blocks as WRITE with immediate, no failure detection.
    pub fn new(
        scheme: Scheme,
        n: u32,
        root: u32,
        cfg: DriverConfig,
        overhead_ps: u64,
    ) -> Result<Self, DriverError> {
        Self::with_suspect_after(scheme, n, root, cfg, overhead_ps, None)
    }

    /// As [`new`](Self::new), every rank probing whom it waits on after
    /// `suspect_after` without progress (RDMC §4.6).
    pub fn with_suspect_after(
        scheme: Scheme,
        n: u32,
        root: u32,
        cfg: DriverConfig,
        overhead_ps: u64,
        suspect_after: Option<Duration>,
    ) -> Result<Self, DriverError> {
        let ranks = (0..n)
            .map(|rank| {
                OverlayRank::new(
                    OverlayRankConfig {
                        scheme,
                        group_size: n,
                        root,
                        rank,
                        driver: cfg,
                        block_op: BlockOp::WriteImm,
                        suspect_after,
                        fail_after: None,
                    },
                    Instant::ZERO,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BroadcastGroup {
            ranks,
            overhead_ps,
            cpu_free: vec![0; n as usize],
            touched: (0..n).collect(),
        })
    }

    /// Moves every message the touched ranks want posted into `out`, each timed by
    /// its rank's CPU: not before `now_ps`, one `overhead` per post.
    pub fn drain_posts(&mut self, now_ps: u64, out: &mut Vec<TimedPost>) {
        self.touched.sort_unstable();
        self.touched.dedup();
        for r in self.touched.drain(..) {
            while let Some(post) = self.ranks[r as usize].poll_post() {
                let at_ps = now_ps.max(self.cpu_free[r as usize]) + self.overhead_ps;
                self.cpu_free[r as usize] = at_ps;
                out.push(TimedPost {
                    rank: r,
                    at_ps,
                    post,
                });
            }
        }
    }

    /// Block `block` from `from` arrived at `to` at `now_ps`.
    pub fn handle_block(
        &mut self,
        now_ps: u64,
        to: u32,
        from: u32,
        block: u32,
    ) -> Result<(), DriverError> {
        self.rank_mut(to)?
            .handle_block(Instant::from_ps(now_ps), from, block)
    }

    /// `rank`'s block post `wr_id` completed at `now_ps`.
    pub fn handle_send_complete(
        &mut self,
        now_ps: u64,
        rank: u32,
        wr_id: u64,
    ) -> Result<(), DriverError> {
        self.rank_mut(rank)?
            .handle_send_complete(Instant::from_ps(now_ps), wr_id)
    }

    /// `rank`'s control post completed at `now_ps`.
    pub fn handle_control_sent(&mut self, now_ps: u64, rank: u32) -> Result<(), DriverError> {
        self.rank_mut(rank)?
            .handle_control_sent(Instant::from_ps(now_ps));
        Ok(())
    }

    /// A control message from `from` reached `to` with immediate `imm`.
    pub fn handle_control(
        &mut self,
        now_ps: u64,
        to: u32,
        from: u32,
        imm: u32,
    ) -> Result<(), DriverError> {
        self.rank_mut(to)?
            .handle_control(Instant::from_ps(now_ps), from, imm)
    }

    /// `from` told `to` it is ready for `to`'s send at `step`.
    pub fn handle_ready(
        &mut self,
        now_ps: u64,
        to: u32,
        from: u32,
        step: u32,
    ) -> Result<(), DriverError> {
        self.rank_mut(to)?
            .handle_ready(Instant::from_ps(now_ps), from, step)
    }

    /// `rank`'s connection to `peer` reported an error (RDMC §4.6).
    pub fn handle_peer_failure(
        &mut self,
        now_ps: u64,
        rank: u32,
        peer: u32,
    ) -> Result<(), DriverError> {
        self.rank_mut(rank)?
            .handle_peer_failure(Instant::from_ps(now_ps), peer)
    }

    /// `rank` detects no failures (a member scheduled to crash: it crashes rather
    /// than suspects).
    pub fn disable_watchdog(&mut self, rank: u32) {
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.disable_watchdog();
        }
    }

    /// The earliest deadline of any rank (ps).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.ranks
            .iter()
            .filter_map(OverlayRank::poll_timeout)
            .min()
            .map(Instant::as_ps)
    }

    /// Every rank whose deadline passed by `now_ps` probes or suspects.
    pub fn handle_timeout(&mut self, now_ps: u64) {
        let now = Instant::from_ps(now_ps);
        for (i, r) in self.ranks.iter_mut().enumerate() {
            if r.poll_timeout().is_some_and(|t| t <= now) {
                r.handle_timeout(now);
                self.touched.push(i as u32);
            }
        }
    }

    /// Where `rank` stands.
    pub fn outcome(&self, rank: u32) -> GroupOutcome {
        self.ranks[rank as usize].outcome()
    }

    /// One rank.
    pub fn rank(&self, rank: u32) -> &OverlayRank {
        &self.ranks[rank as usize]
    }

    fn rank_mut(&mut self, rank: u32) -> Result<&mut OverlayRank, DriverError> {
        let n = self.ranks.len() as u32;
        let r = self
            .ranks
            .get_mut(rank as usize)
            .ok_or(DriverError::BadRank { rank, n })?;
        self.touched.push(rank);
        Ok(r)
    }

    /// When each rank had the whole message (root: 0, it starts at time zero;
    /// `u64::MAX`: not yet): each rank's [`OverlayRank::message_at`].
    pub fn rank_done_ps(&self) -> Vec<u64> {
        self.ranks.iter().map(Self::done_ps).collect()
    }

    /// The first rank still missing part of the message.
    pub fn first_incomplete(&self) -> Option<u32> {
        self.ranks
            .iter()
            .position(|r| r.message_at().is_none())
            .map(|r| r as u32)
    }

    /// When the last rank had the whole message (meaningful once all have).
    pub fn latency_ps(&self) -> u64 {
        self.ranks.iter().map(Self::done_ps).max().unwrap_or(0)
    }

    fn done_ps(r: &OverlayRank) -> u64 {
        r.message_at().map_or(u64::MAX, Instant::as_ps)
    }
}
