//! All ranks of one broadcast: their [`BroadcastDriver`]s, the per-rank CPU that posts
//! what the drivers ask for, and when each rank had the whole message. Whatever
//! executes a broadcast — the analytic model's ideal network, the simulator's RC
//! connections — feeds arrivals and completions in here and takes timed posts out;
//! time is passed in, never read.
//!
//! The CPU model (Cepheus §II-C: overlay multicast pays the end-host stack at every
//! hop): every post costs its rank `overhead`, posts of one rank one after another,
//! counted from the event that made the driver ask.
//!
//! Memory: the drivers plus 16 bytes per rank.

use super::driver::{BroadcastDriver, DriverAction, DriverConfig, DriverError, GroupOutcome};
use super::Scheme;

/// One action to post: from `rank`, at `at_ps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedPost {
    pub rank: u32,
    pub at_ps: u64,
    pub action: DriverAction,
}

pub struct BroadcastGroup {
    drivers: Vec<BroadcastDriver>,
    overhead_ps: u64,
    cpu_free: Vec<u64>,
    done: Vec<u64>,
    /// Ranks whose drivers may have actions waiting (drained in rank order).
    touched: Vec<u32>,
}

impl BroadcastGroup {
    pub fn new(
        scheme: Scheme,
        n: u32,
        root: u32,
        cfg: DriverConfig,
        overhead_ps: u64,
    ) -> Result<Self, DriverError> {
        let drivers = (0..n)
            .map(|r| BroadcastDriver::new(scheme, n, root, r, cfg))
            .collect::<Result<Vec<_>, _>>()?;
        let mut done = vec![u64::MAX; n as usize];
        done[root as usize] = 0;
        Ok(BroadcastGroup {
            drivers,
            overhead_ps,
            cpu_free: vec![0; n as usize],
            done,
            touched: (0..n).collect(),
        })
    }

    /// Moves every action the touched ranks want posted into `out`, each timed by its
    /// rank's CPU: not before `now_ps`, one `overhead` per post.
    pub fn drain_posts(&mut self, now_ps: u64, out: &mut Vec<TimedPost>) {
        self.touched.sort_unstable();
        self.touched.dedup();
        for r in self.touched.drain(..) {
            while let Some(action) = self.drivers[r as usize].poll_event() {
                let at_ps = now_ps.max(self.cpu_free[r as usize]) + self.overhead_ps;
                self.cpu_free[r as usize] = at_ps;
                out.push(TimedPost {
                    rank: r,
                    at_ps,
                    action,
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
        let d = &mut self.drivers[to as usize];
        d.handle_block(from, block)?;
        if d.has_message() && self.done[to as usize] == u64::MAX {
            self.done[to as usize] = now_ps;
        }
        self.touch(to);
        Ok(())
    }

    /// `rank`'s send `id` completed.
    pub fn handle_send_complete(&mut self, rank: u32, id: u32) -> Result<(), DriverError> {
        self.drivers[rank as usize].handle_send_complete(id)?;
        self.touch(rank);
        Ok(())
    }

    /// `from` told `to` it is ready for `to`'s send at `step`.
    pub fn handle_ready(&mut self, to: u32, from: u32, step: u32) -> Result<(), DriverError> {
        self.drivers[to as usize].handle_ready(from, step)?;
        self.touch(to);
        Ok(())
    }

    /// `rank`'s connection to `peer` reported an error (RDMC §4.6).
    pub fn handle_peer_failure(&mut self, rank: u32, peer: u32) -> Result<(), DriverError> {
        self.drivers[rank as usize].handle_peer_failure(peer)?;
        self.touch(rank);
        Ok(())
    }

    /// `from` told `to` that `failed` has failed.
    pub fn handle_failure_notice(
        &mut self,
        to: u32,
        from: u32,
        failed: u32,
    ) -> Result<(), DriverError> {
        self.drivers[to as usize].handle_failure_notice(from, failed)?;
        self.touch(to);
        Ok(())
    }

    /// `rank` has made no progress for its caller's deadline: it probes whom it waits on.
    pub fn probe_stalled(&mut self, rank: u32) {
        self.drivers[rank as usize].probe_stalled();
        self.touch(rank);
    }

    /// Where `rank` stands.
    pub fn outcome(&self, rank: u32) -> GroupOutcome {
        self.drivers[rank as usize].outcome()
    }

    fn touch(&mut self, r: u32) {
        self.touched.push(r);
    }

    /// When each rank had the whole message (root: 0; `u64::MAX`: not yet).
    pub fn rank_done_ps(&self) -> &[u64] {
        &self.done
    }

    /// The first rank still missing part of the message.
    pub fn first_incomplete(&self) -> Option<u32> {
        self.done
            .iter()
            .position(|&d| d == u64::MAX)
            .map(|r| r as u32)
    }

    /// When the last rank had the whole message (meaningful once all have).
    pub fn latency_ps(&self) -> u64 {
        self.done.iter().copied().max().unwrap_or(0)
    }
}
