//! One rank of an overlay broadcast in time: the [`BroadcastDriver`] of its schedule
//! plus everything a driver of real or simulated connections would otherwise grow on
//! its own — the queue of posts with their bytes and immediates, the transport
//! choice for blocks, and failure detection by the rank's own clock (RDMC §3 and
//! §4.6). The simulator (`rocast_sim::multicast::broadcast`, through
//! [`BroadcastGroup`](super::BroadcastGroup)) and the runtime (`rocast mcast`/`bcast`'s
//! overlay in `rocast_net::mcast`) drive this one object; they keep only I/O: post
//! what [`OverlayRank::poll_post`] returns on their connections, report what their
//! connections complete and deliver, and call [`OverlayRank::handle_timeout`] at
//! [`OverlayRank::poll_timeout`].
//!
//! - **Blocks** travel as RDMA WRITE with immediate into the receiver's message buffer
//!   at the block's offset, or as SEND with immediate into a receive posted per block
//!   ([`BlockOp`]); the immediate is the block number either way.
//! - **Control** (RDMC's ready-for-block, §4.6's failure relay, the probes) is a
//!   zero-length message with a [`ControlImm`] on a second connection per peer, so it
//!   never queues behind blocks.
//! - **Ready-for-block** (`DriverConfig::ready_for_block`): a rank sends a block only
//!   after its receiver said it has a buffer for it, so a member that falls behind
//!   holds its senders back instead of having its buffers overrun.
//! - **Failure detection**: a rank that has made no progress (no block, completion or
//!   control message) for `suspect_after` probes every peer it waits on, so a dead
//!   peer nobody sends to is found by an RC retry error on the probe; one that has
//!   made none for `fail_after` suspects those peers failed and relays it, so every
//!   survivor ends with the same [`GroupOutcome::Failed`] instead of waiting forever
//!   on a peer that is alive but never sends.
//!
//! Time is passed in; nothing here reads a clock or touches a socket
//! (ARCHITECTURE.md). Memory: the driver's O(sends + receives + blocks), plus one
//! queued post per outstanding driver action (at most the rank's sends, readies and
//! one notice or probe per member).

use std::collections::VecDeque;

use super::driver::{
    BroadcastDriver, ControlImm, DriverAction, DriverConfig, DriverError, GroupOutcome,
};
use super::Scheme;
use crate::time::{Duration, Instant};

/// How blocks travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockOp {
    /// RDMA WRITE with immediate at the block's offset (RDMC; the simulator).
    WriteImm,
    /// SEND with immediate into the receive posted for the block (the runtime: its
    /// receivers post one receive per block they are scheduled to get).
    SendImm,
}

/// One rank's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverlayRankConfig {
    pub scheme: Scheme,
    pub group_size: u32,
    pub root: u32,
    pub rank: u32,
    pub driver: DriverConfig,
    pub block_op: BlockOp,
    /// No progress for this long: probe the peers this rank waits on. `None`: never.
    pub suspect_after: Option<Duration>,
    /// No progress for this long: those peers are failed (relayed to every member).
    /// `None`: never; a dead peer is then found only by a connection's error.
    pub fail_after: Option<Duration>,
}

/// Which of a peer pair's two connections a post goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Channel {
    /// Blocks.
    Data,
    /// Zero-length control messages (ready, failure notice, probe).
    Control,
}

/// One message for the driver of the connections to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverlayPost {
    pub to: u32,
    pub channel: Channel,
    /// What the schedule's driver asked for.
    pub action: DriverAction,
    /// How a block travels (meaningless for control posts, which carry no bytes).
    pub op: BlockOp,
    /// The block's byte range of the message; (0, 0) for control.
    pub offset: u64,
    pub len: u64,
    /// The block number, or the encoded [`ControlImm`].
    pub imm: u32,
    /// For a block, the id to report with [`OverlayRank::handle_send_complete`]; 0
    /// for control (report with [`OverlayRank::handle_control_sent`]).
    pub wr_id: u64,
}

impl OverlayPost {
    /// The post that carries driver action `a` of a rank running `driver`.
    pub fn of(driver: &DriverConfig, op: BlockOp, a: DriverAction) -> Self {
        match a {
            DriverAction::SendBlock { to, id, block, .. } => {
                let (offset, len) = driver.block_range(block);
                OverlayPost {
                    to,
                    channel: Channel::Data,
                    action: a,
                    op,
                    offset,
                    len,
                    imm: block,
                    wr_id: id as u64,
                }
            }
            DriverAction::SendReady { to, step } => {
                Self::control(to, a, ControlImm::Ready { step }, op)
            }
            DriverAction::NotifyFailure { to, failed } => {
                Self::control(to, a, ControlImm::FailureNotice { failed }, op)
            }
            DriverAction::Probe { to } => Self::control(to, a, ControlImm::Probe, op),
        }
    }

    /// A zero-length control message. Steps and ranks fit 30 bits (groups and block
    /// counts are far below 2^30, and `OverlayRank::new` checks them); a value beyond
    /// would encode as `u32::MAX`, which every receiver refuses.
    fn control(to: u32, action: DriverAction, c: ControlImm, op: BlockOp) -> Self {
        OverlayPost {
            to,
            channel: Channel::Control,
            action,
            op,
            offset: 0,
            len: 0,
            imm: c.encode().unwrap_or(u32::MAX),
            wr_id: 0,
        }
    }

    pub fn is_control(&self) -> bool {
        self.channel == Channel::Control
    }
}

/// Counters of one rank; every input that changed nothing is counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OverlayRankStats {
    pub blocks_received: u64,
    pub blocks_sent: u64,
    pub controls_sent: u64,
    pub controls_received: u64,
    /// Times the rank probed (each probes every peer it waited on).
    pub probes: u64,
    /// Times it gave up on the peers it waited on (`fail_after`).
    pub suspicions: u64,
}

/// One rank of an overlay broadcast: see the module docs.
pub struct OverlayRank {
    cfg: OverlayRankConfig,
    driver: BroadcastDriver,
    posts: VecDeque<OverlayPost>,
    last_progress: Instant,
    probed: bool,
    watchdog: bool,
    message_at: Option<Instant>,
    stats: OverlayRankStats,
}

impl OverlayRank {
    /// A rank starting at `now` (the root holds the message from then on).
    pub fn new(cfg: OverlayRankConfig, now: Instant) -> Result<Self, DriverError> {
        // Control immediates carry steps and ranks in 30 bits.
        if cfg.group_size > 1 << 30 || cfg.driver.blocks() >= 1 << 29 {
            return Err(DriverError::ControlOverflow);
        }
        let driver =
            BroadcastDriver::new(cfg.scheme, cfg.group_size, cfg.root, cfg.rank, cfg.driver)?;
        let mut r = OverlayRank {
            cfg,
            driver,
            posts: VecDeque::new(),
            last_progress: now,
            probed: false,
            watchdog: true,
            message_at: None,
            stats: OverlayRankStats::default(),
        };
        r.pump(now);
        Ok(r)
    }

    pub fn config(&self) -> &OverlayRankConfig {
        &self.cfg
    }

    pub fn rank(&self) -> u32 {
        self.cfg.rank
    }

    pub fn stats(&self) -> &OverlayRankStats {
        &self.stats
    }

    /// Turns this rank's failure detection off (the simulator's member that is
    /// scheduled to crash: it crashes rather than suspects).
    pub fn disable_watchdog(&mut self) {
        self.watchdog = false;
    }

    /// The next message to post, if any.
    pub fn poll_post(&mut self) -> Option<OverlayPost> {
        self.posts.pop_front()
    }

    /// Block `block` from `from` is in this rank's buffer (the WRITE's or SEND's
    /// immediate completed a receive).
    pub fn handle_block(&mut self, now: Instant, from: u32, block: u32) -> Result<(), DriverError> {
        self.progress(now);
        self.driver.handle_block(from, block)?;
        self.stats.blocks_received += 1;
        self.pump(now);
        Ok(())
    }

    /// The block post `wr_id` completed (acknowledged by its receiver).
    pub fn handle_send_complete(&mut self, now: Instant, wr_id: u64) -> Result<(), DriverError> {
        self.progress(now);
        let id = u32::try_from(wr_id).map_err(|_| DriverError::UnexpectedCompletion(u32::MAX))?;
        self.driver.handle_send_complete(id)?;
        self.pump(now);
        Ok(())
    }

    /// A control post completed (it carries no state; it is progress).
    pub fn handle_control_sent(&mut self, now: Instant) {
        self.progress(now);
    }

    /// A control message from `from` arrived with immediate `imm`.
    pub fn handle_control(&mut self, now: Instant, from: u32, imm: u32) -> Result<(), DriverError> {
        self.progress(now);
        self.stats.controls_received += 1;
        let r = match ControlImm::decode(imm)? {
            ControlImm::Ready { step } => self.driver.handle_ready(from, step),
            ControlImm::FailureNotice { failed } => self.driver.handle_failure_notice(from, failed),
            ControlImm::Probe => Ok(()),
        };
        self.pump(now);
        r
    }

    /// `from` is ready for this rank's send at `step` (a ready that arrived some other
    /// way than [`handle_control`](Self::handle_control): the analytic model).
    pub fn handle_ready(&mut self, now: Instant, from: u32, step: u32) -> Result<(), DriverError> {
        self.progress(now);
        let r = self.driver.handle_ready(from, step);
        self.pump(now);
        r
    }

    /// A connection of this rank to `peer` failed (RC retry or remote access error):
    /// `peer` is failed, relayed to every other member.
    pub fn handle_peer_failure(&mut self, now: Instant, peer: u32) -> Result<(), DriverError> {
        self.progress(now);
        let r = self.driver.handle_peer_failure(peer);
        self.pump(now);
        r
    }

    /// When [`handle_timeout`](Self::handle_timeout) has something to do: the next
    /// probe or suspicion, while the rank is waiting.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.watchdog || self.driver.outcome() != GroupOutcome::InProgress {
            return None;
        }
        let probe = self
            .cfg
            .suspect_after
            .filter(|_| !self.probed)
            .map(|d| self.last_progress + d);
        let fail = self.cfg.fail_after.map(|d| self.last_progress + d);
        probe.into_iter().chain(fail).min()
    }

    /// Probes or suspects the peers this rank waits on when their deadline passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.watchdog || self.driver.outcome() != GroupOutcome::InProgress {
            return;
        }
        let idle = now.saturating_since(self.last_progress);
        if self.cfg.fail_after.is_some_and(|d| idle >= d) {
            let waited = self.driver.waiting_on();
            self.stats.suspicions += 1;
            for p in waited {
                // A peer of this rank's schedule, so never an error.
                let _ = self.driver.handle_peer_failure(p);
            }
        } else if !self.probed && self.cfg.suspect_after.is_some_and(|d| idle >= d) {
            self.probed = true;
            self.stats.probes += 1;
            self.driver.probe_stalled();
        }
        self.pump(now);
    }

    /// Where this rank stands.
    pub fn outcome(&self) -> GroupOutcome {
        self.driver.outcome()
    }

    /// Every block is here.
    pub fn has_message(&self) -> bool {
        self.driver.has_message()
    }

    /// Every block is here and every send this rank owes completed.
    pub fn is_complete(&self) -> bool {
        self.driver.is_complete()
    }

    /// When the rank first held the whole message (the root: when it started).
    pub fn message_at(&self) -> Option<Instant> {
        self.message_at
    }

    fn progress(&mut self, now: Instant) {
        self.last_progress = self.last_progress.max(now);
        self.probed = false;
    }

    fn pump(&mut self, now: Instant) {
        if self.message_at.is_none() && self.driver.has_message() {
            self.message_at = Some(now);
        }
        while let Some(a) = self.driver.poll_event() {
            let p = OverlayPost::of(&self.cfg.driver, self.cfg.block_op, a);
            if p.is_control() {
                self.stats.controls_sent += 1;
            } else {
                self.stats.blocks_sent += 1;
            }
            self.posts.push_back(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: u32, rank: u32, ready: bool) -> OverlayRankConfig {
        OverlayRankConfig {
            scheme: Scheme::Chain,
            group_size: n,
            root: 0,
            rank,
            driver: DriverConfig {
                message_bytes: 3000,
                block_bytes: 1000,
                window: 1,
                ready_for_block: ready,
            },
            block_op: BlockOp::WriteImm,
            suspect_after: Some(Duration::from_ms(10)),
            fail_after: Some(Duration::from_ms(100)),
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::from_ps(ms * 1_000_000_000)
    }

    /// Script (smoltcp style): a chain of three with ready-for-block. Rank 0 posts
    /// nothing until rank 1 says it is ready; each post names its connection, bytes
    /// and immediate.
    #[test]
    fn ready_for_block_holds_the_sender_until_the_receiver_has_a_buffer() {
        let mut r0 = OverlayRank::new(cfg(3, 0, true), at(0)).unwrap();
        let mut r1 = OverlayRank::new(cfg(3, 1, true), at(0)).unwrap();
        assert_eq!(
            r0.poll_post(),
            None,
            "no block before the receiver is ready"
        );
        let ready = r1.poll_post().unwrap();
        assert_eq!(
            (ready.to, ready.channel, ready.len),
            (0, Channel::Control, 0)
        );
        assert_eq!(
            ControlImm::decode(ready.imm).unwrap(),
            ControlImm::Ready { step: 0 }
        );
        r0.handle_control(at(1), 1, ready.imm).unwrap();
        let b = r0.poll_post().unwrap();
        assert_eq!(
            (b.to, b.channel, b.offset, b.len, b.imm, b.op),
            (1, Channel::Data, 0, 1000, 0, BlockOp::WriteImm)
        );
        assert_eq!(r0.poll_post(), None, "window 1: one block in flight");
        r0.handle_send_complete(at(2), b.wr_id).unwrap();
        assert_eq!(r0.poll_post(), None, "block 1 waits for its own ready");
        assert_eq!(r0.stats().blocks_sent, 1);
        assert_eq!(r0.message_at(), Some(at(0)));
    }

    /// A rank that hears nothing probes the peer it waits on once per quiet spell,
    /// then suspects it failed and relays that to every other member; its outcome is
    /// `Failed` naming that peer and it asks for nothing more.
    #[test]
    fn a_quiet_peer_is_probed_then_suspected_and_relayed() {
        let mut r2 = OverlayRank::new(cfg(3, 2, false), at(0)).unwrap();
        assert_eq!(r2.poll_post(), None);
        assert_eq!(r2.poll_timeout(), Some(at(10)));
        r2.handle_timeout(at(9));
        assert_eq!(r2.poll_post(), None, "not yet");
        r2.handle_timeout(at(10));
        let p = r2.poll_post().unwrap();
        assert_eq!((p.to, p.channel), (1, Channel::Control));
        assert_eq!(ControlImm::decode(p.imm).unwrap(), ControlImm::Probe);
        assert_eq!(
            r2.poll_timeout(),
            Some(at(100)),
            "probed once: next is the suspicion"
        );
        // Progress (the probe's completion) restarts both clocks.
        r2.handle_control_sent(at(20));
        assert_eq!(r2.poll_timeout(), Some(at(30)));
        r2.handle_timeout(at(30));
        assert!(r2.poll_post().is_some());
        r2.handle_timeout(at(119));
        assert_eq!(
            r2.poll_post(),
            None,
            "99 ms quiet since the probe completed: not yet"
        );
        r2.handle_timeout(at(120));
        let notices: Vec<_> = std::iter::from_fn(|| r2.poll_post()).collect();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(
            notices[0].action,
            DriverAction::NotifyFailure { to: 0, failed: 1 }
        );
        assert_eq!(r2.outcome(), GroupOutcome::Failed { failed: vec![1] });
        assert_eq!(r2.poll_timeout(), None);
        assert_eq!((r2.stats().probes, r2.stats().suspicions), (2, 1));
    }

    /// Without deadlines a rank never probes or suspects, however long it waits; a
    /// rank whose watchdog is off neither.
    #[test]
    fn no_deadline_no_watchdog() {
        let mut c = cfg(3, 2, false);
        c.suspect_after = None;
        c.fail_after = None;
        let mut r = OverlayRank::new(c, at(0)).unwrap();
        assert_eq!(r.poll_timeout(), None);
        r.handle_timeout(at(1_000_000));
        assert_eq!(r.poll_post(), None);
        let mut r = OverlayRank::new(cfg(3, 2, false), at(0)).unwrap();
        r.disable_watchdog();
        assert_eq!(r.poll_timeout(), None);
        r.handle_timeout(at(1_000_000));
        assert_eq!(
            (r.poll_post(), r.outcome()),
            (None, GroupOutcome::InProgress)
        );
    }

    /// Bad control input is an error and changes nothing: an immediate of no known
    /// kind, a ready from a rank that is not this send's receiver.
    #[test]
    fn bad_control_is_refused_and_changes_nothing() {
        let mut r0 = OverlayRank::new(cfg(3, 0, true), at(0)).unwrap();
        assert!(r0.handle_control(at(1), 1, 3 << 30).is_err());
        let ready2 = ControlImm::Ready { step: 0 }.encode().unwrap();
        assert!(r0.handle_control(at(1), 2, ready2).is_err());
        assert_eq!(r0.poll_post(), None);
        assert!(r0.handle_send_complete(at(1), 1 << 40).is_err());
        assert_eq!(r0.outcome(), GroupOutcome::InProgress);
    }

    /// SEND-with-immediate is configuration: the posts say so, the rest is the same.
    #[test]
    fn the_block_transport_is_configuration() {
        let mut c = cfg(2, 0, false);
        c.block_op = BlockOp::SendImm;
        let mut r0 = OverlayRank::new(c, at(0)).unwrap();
        let b = r0.poll_post().unwrap();
        assert_eq!(
            (b.op, b.channel, b.imm, b.len),
            (BlockOp::SendImm, Channel::Data, 0, 1000)
        );
    }
}
