//! One rank's executor of a broadcast schedule, sans-IO (RDMC §3, "group.cpp"'s send
//! and receive loops). The driver is told that a block arrived, that a send
//! completed, or that a peer is ready; it answers with [`DriverAction`]s for its
//! caller to post as RDMA WRITE-with-immediate messages on RC connections. It holds
//! no clock and no socket: the simulator and any real-time runtime drive the same
//! object.
//!
//! Rules, as in RDMC:
//! - sends go out in schedule-step order; a send waits until the rank has the block
//!   and fewer than `window` of its sends are incomplete (RDMC: one at a time; NCCL's
//!   ring keeps several slices in flight);
//! - with `ready_for_block`, a send also waits for the receiver's ready message for
//!   that step, and a receiver keeps `window` receive buffers announced: it announces
//!   its incoming transfer j once transfer j − window has arrived (RDMC: window 1,
//!   one buffer posted at a time; NCCL: a few slots per connection).
//!
//! Bad input (a block nobody scheduled, a duplicate, an unknown completion) is an
//! error the caller counts; it never panics and never changes what was received.
//!
//! Failure (RDMC §4.6 "Recovery From Failure"): a failure is sensed when one of the
//! rank's RC connections reports an error ([`BroadcastDriver::handle_peer_failure`]),
//! or told by another member ([`BroadcastDriver::handle_failure_notice`]). Either way
//! the rank relays every member it newly knows as failed to every member it does not,
//! and ceases new transmissions. Because each survivor relays each failure once to
//! every other survivor over reliable connections, all survivors end with the same
//! set of failed members: the explicit outcome [`GroupOutcome::Failed`], even those
//! that already hold the whole message (RDMC: failure is reported at close; a close
//! without failure means every member has the message). A rank that waits too long
//! is told so by its caller, who owns the clock ([`BroadcastDriver::probe_stalled`]):
//! it then probes the peers it waits on with zero-length messages, so that a dead
//! peer nobody is sending to is still found by an RC retry error.
//!
//! Memory: O(sends + receives + blocks) of this rank: a few bytes per block, plus
//! one bit per member for the failure set.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::schedule::{BlockTransfer, Schedule, ScheduleError};
use super::Scheme;

/// How a rank executes its part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    pub message_bytes: u64,
    pub block_bytes: u64,
    /// Sends a rank may have posted and not seen complete, and (with
    /// `ready_for_block`) receive buffers it keeps announced.
    pub window: u32,
    /// RDMC's receiver-driven flow control: a block is sent only after the receiver
    /// said it is ready for it.
    pub ready_for_block: bool,
}

impl DriverConfig {
    /// Blocks the message is cut into (at least one, even for an empty message).
    pub fn blocks(&self) -> u32 {
        self.message_bytes
            .div_ceil(self.block_bytes.max(1))
            .clamp(1, u32::MAX as u64) as u32
    }
    /// Byte offset and length of `block`.
    pub fn block_range(&self, block: u32) -> (u64, u64) {
        let off = block as u64 * self.block_bytes;
        (
            off.min(self.message_bytes),
            self.block_bytes.min(self.message_bytes.saturating_sub(off)),
        )
    }
}

/// What the driver asks its caller to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverAction {
    /// Write `block` into `to`'s message buffer at the block's offset, with the block
    /// number as immediate. Report completion with [`BroadcastDriver::handle_send_complete`]
    /// and `id`.
    SendBlock {
        id: u32,
        to: u32,
        block: u32,
        step: u32,
    },
    /// Tell `to` that this rank is ready for the block it sends at `step`.
    SendReady { to: u32, step: u32 },
    /// Tell `to` that member `failed` has failed (RDMC §4.6's relay). Its failure to
    /// complete means `to` failed too: report it with
    /// [`BroadcastDriver::handle_peer_failure`].
    NotifyFailure { to: u32, failed: u32 },
    /// A zero-length message to `to`, whose only purpose is that the RC connection
    /// reports an error if `to` is gone.
    Probe { to: u32 },
}

/// How a member's part of the broadcast ended, once nothing more is in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupOutcome {
    /// Still waiting for blocks or completions.
    InProgress,
    /// This member holds the whole message and owes nothing, and no failure is known.
    Delivered,
    /// The group failed: these members (ascending) are known failed. The same at
    /// every survivor once the relays are through.
    Failed { failed: Vec<u32> },
}

/// The immediate of a zero-length control message of the overlay (ready, failure
/// notice, probe), so that every runtime encodes them alike: two kind bits above a
/// 30-bit step or rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlImm {
    Ready { step: u32 },
    FailureNotice { failed: u32 },
    Probe,
}

impl ControlImm {
    const VALUE: u32 = (1 << 30) - 1;
    pub fn encode(self) -> Result<u32, DriverError> {
        match self {
            ControlImm::Ready { step } if step <= Self::VALUE => Ok(step),
            ControlImm::FailureNotice { failed } if failed <= Self::VALUE => Ok(1 << 30 | failed),
            ControlImm::Probe => Ok(2 << 30),
            _ => Err(DriverError::ControlOverflow),
        }
    }
    pub fn decode(imm: u32) -> Result<Self, DriverError> {
        let v = imm & Self::VALUE;
        match imm >> 30 {
            0 => Ok(ControlImm::Ready { step: v }),
            1 => Ok(ControlImm::FailureNotice { failed: v }),
            2 if v == 0 => Ok(ControlImm::Probe),
            _ => Err(DriverError::BadControl(imm)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("block size must be positive")]
    ZeroBlock,
    #[error("window must be at least 1")]
    ZeroWindow,
    #[error("rank {rank} is not in a group of {n}")]
    BadRank { rank: u32, n: u32 },
    #[error("block {block} from rank {from} is not scheduled for this rank")]
    UnexpectedBlock { from: u32, block: u32 },
    #[error("block {block} from rank {from} arrived twice")]
    DuplicateBlock { from: u32, block: u32 },
    #[error("completion for send {0} that is not outstanding")]
    UnexpectedCompletion(u32),
    #[error("ready from rank {from} for step {step} matches no send")]
    UnexpectedReady { from: u32, step: u32 },
    #[error("member {0} is not in the group")]
    NotAMember(u32),
    #[error("control immediate {0:#x} is not a ready, failure notice or probe")]
    BadControl(u32),
    #[error("step or rank does not fit a control immediate (30 bits)")]
    ControlOverflow,
}

pub struct BroadcastDriver {
    cfg: DriverConfig,
    rank: u32,
    sends: Vec<(u32, BlockTransfer)>,
    send_state: Vec<SendState>,
    next_send: usize,
    in_flight: u32,
    sends_done: usize,
    recvs: Vec<(u32, BlockTransfer)>,
    recv_index: BTreeMap<(u32, u32), usize>,
    recv_done: Vec<bool>,
    recvs_done: usize,
    announced: usize,
    have: Vec<bool>,
    have_count: u32,
    actions: VecDeque<DriverAction>,
    group_size: u32,
    /// Members known failed (RDMC §4.6); non-empty: no new transmissions.
    failed: BTreeSet<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SendState {
    Waiting { ready: bool },
    Posted,
    Done,
}

impl BroadcastDriver {
    pub fn new(
        scheme: Scheme,
        group_size: u32,
        root: u32,
        rank: u32,
        cfg: DriverConfig,
    ) -> Result<Self, DriverError> {
        if cfg.block_bytes == 0 {
            return Err(DriverError::ZeroBlock);
        }
        if cfg.window == 0 {
            return Err(DriverError::ZeroWindow);
        }
        let schedule = Schedule::new(scheme, group_size, root, cfg.blocks())?;
        Self::with_schedule(schedule, rank, cfg)
    }

    pub fn with_schedule(
        schedule: Schedule,
        rank: u32,
        cfg: DriverConfig,
    ) -> Result<Self, DriverError> {
        let n = schedule.group_size();
        if rank >= n {
            return Err(DriverError::BadRank { rank, n });
        }
        let k = schedule.blocks();
        let sends = schedule.sends_of(rank);
        let recvs = schedule.receives_of(rank);
        let recv_index = recvs
            .iter()
            .enumerate()
            .map(|(i, (_, t))| ((t.peer, t.block), i))
            .collect();
        let is_root = rank == schedule.root();
        let mut d = BroadcastDriver {
            cfg,
            rank,
            send_state: vec![SendState::Waiting { ready: false }; sends.len()],
            sends,
            next_send: 0,
            in_flight: 0,
            sends_done: 0,
            recv_done: vec![false; recvs.len()],
            recvs,
            recv_index,
            recvs_done: 0,
            announced: 0,
            have: vec![is_root; k as usize],
            have_count: if is_root { k } else { 0 },
            actions: VecDeque::new(),
            group_size: n,
            failed: BTreeSet::new(),
        };
        d.announce();
        d.pump();
        Ok(d)
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// The next thing to post, if any.
    pub fn poll_event(&mut self) -> Option<DriverAction> {
        self.actions.pop_front()
    }

    /// A block arrived (the WRITE-with-immediate completed at this rank).
    pub fn handle_block(&mut self, from: u32, block: u32) -> Result<(), DriverError> {
        let Some(&i) = self.recv_index.get(&(from, block)) else {
            return Err(DriverError::UnexpectedBlock { from, block });
        };
        if self.recv_done[i] {
            return Err(DriverError::DuplicateBlock { from, block });
        }
        self.recv_done[i] = true;
        self.recvs_done += 1;
        if !self.have[block as usize] {
            self.have[block as usize] = true;
            self.have_count += 1;
        }
        self.announce();
        self.pump();
        Ok(())
    }

    /// The send `id` of a [`DriverAction::SendBlock`] completed (acknowledged).
    pub fn handle_send_complete(&mut self, id: u32) -> Result<(), DriverError> {
        match self.send_state.get(id as usize) {
            Some(SendState::Posted) => {}
            _ => return Err(DriverError::UnexpectedCompletion(id)),
        }
        self.send_state[id as usize] = SendState::Done;
        self.in_flight -= 1;
        self.sends_done += 1;
        self.pump();
        Ok(())
    }

    /// `from` is ready for the block this rank sends it at `step`.
    pub fn handle_ready(&mut self, from: u32, step: u32) -> Result<(), DriverError> {
        if !self.failed.is_empty() {
            // The group has ceased; a late ready changes nothing.
            return if from < self.group_size {
                Ok(())
            } else {
                Err(DriverError::NotAMember(from))
            };
        }
        let i = self.sends.partition_point(|(s, _)| *s < step);
        match (self.sends.get(i), self.send_state.get(i)) {
            (Some((s, t)), Some(SendState::Waiting { ready: false }))
                if *s == step && t.peer == from =>
            {
                self.send_state[i] = SendState::Waiting { ready: true };
                self.pump();
                Ok(())
            }
            _ => Err(DriverError::UnexpectedReady { from, step }),
        }
    }

    /// One of this rank's connections to `peer` reported an error (RC retry or
    /// remote-access error): `peer` is failed. Relayed to every other member.
    pub fn handle_peer_failure(&mut self, peer: u32) -> Result<(), DriverError> {
        self.learn_failed(peer)
    }

    /// `from` relayed that `failed` has failed.
    pub fn handle_failure_notice(&mut self, from: u32, failed: u32) -> Result<(), DriverError> {
        if from >= self.group_size {
            return Err(DriverError::NotAMember(from));
        }
        self.learn_failed(failed)
    }

    fn learn_failed(&mut self, f: u32) -> Result<(), DriverError> {
        if f >= self.group_size {
            return Err(DriverError::NotAMember(f));
        }
        if !self.failed.insert(f) {
            return Ok(());
        }
        // Relay to everyone not known failed, and stop: queued sends are withdrawn
        // (RDMC: the disrupted group ceases new transmissions).
        self.actions.retain(|a| {
            !matches!(
                a,
                DriverAction::SendBlock { .. } | DriverAction::SendReady { .. }
            )
        });
        for to in 0..self.group_size {
            if to != self.rank && !self.failed.contains(&to) {
                self.actions
                    .push_back(DriverAction::NotifyFailure { to, failed: f });
            }
        }
        Ok(())
    }

    /// The caller's clock says this rank has made no progress for too long: probe
    /// every peer it waits on (the senders of the blocks it has announced or expects
    /// next, and the receiver whose ready its next send waits for). Nothing when the
    /// rank has its message and owes nothing, or the group has already failed.
    pub fn probe_stalled(&mut self) {
        if !self.failed.is_empty() || self.is_complete() {
            return;
        }
        for to in self.waiting_on() {
            self.actions.push_back(DriverAction::Probe { to });
        }
    }

    /// The peers this rank waits on (ascending): the senders of the blocks it has
    /// announced or expects next, the receiver whose ready its next send waits for,
    /// and the receivers of its sends in flight.
    pub fn waiting_on(&self) -> BTreeSet<u32> {
        let mut peers = BTreeSet::new();
        let first = self.recv_done.iter().position(|d| !d);
        if let Some(first) = first {
            let last = if self.cfg.ready_for_block {
                self.announced.max(first + 1)
            } else {
                first + 1
            };
            for i in first..last.min(self.recvs.len()) {
                if !self.recv_done[i] {
                    peers.insert(self.recvs[i].1.peer);
                }
            }
        }
        if let Some((_, t)) = self.sends.get(self.next_send) {
            if self.have[t.block as usize] {
                peers.insert(t.peer);
            }
        }
        for (i, st) in self.send_state.iter().enumerate() {
            if *st == SendState::Posted {
                peers.insert(self.sends[i].1.peer);
            }
        }
        peers
    }

    /// Where this rank stands (see [`GroupOutcome`]).
    pub fn outcome(&self) -> GroupOutcome {
        if !self.failed.is_empty() {
            GroupOutcome::Failed {
                failed: self.failed.iter().copied().collect(),
            }
        } else if self.is_complete() {
            GroupOutcome::Delivered
        } else {
            GroupOutcome::InProgress
        }
    }

    /// Every block is here.
    pub fn has_message(&self) -> bool {
        self.have_count as usize == self.have.len()
    }

    /// Every block is here and every send this rank owes has completed.
    pub fn is_complete(&self) -> bool {
        self.has_message() && self.sends_done == self.sends.len()
    }

    fn announce(&mut self) {
        if !self.cfg.ready_for_block || !self.failed.is_empty() {
            return;
        }
        // `window` receive buffers posted ahead (RDMC: one; NCCL: NCCL_STEPS slots):
        // announce transfer j once j − window has arrived.
        while self.announced < self.recvs.len()
            && self.announced < self.recvs_done + self.cfg.window as usize
        {
            let (step, t) = self.recvs[self.announced];
            self.actions
                .push_back(DriverAction::SendReady { to: t.peer, step });
            self.announced += 1;
        }
    }

    fn pump(&mut self) {
        if !self.failed.is_empty() {
            return;
        }
        while self.next_send < self.sends.len() && self.in_flight < self.cfg.window {
            let i = self.next_send;
            let (step, t) = self.sends[i];
            let ready = match self.send_state[i] {
                SendState::Waiting { ready } => ready || !self.cfg.ready_for_block,
                _ => true,
            };
            if !self.have[t.block as usize] || !ready {
                return;
            }
            self.send_state[i] = SendState::Posted;
            self.in_flight += 1;
            self.next_send += 1;
            self.actions.push_back(DriverAction::SendBlock {
                id: i as u32,
                to: t.peer,
                block: t.block,
                step,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(size: u64, block: u64, window: u32, ready: bool) -> DriverConfig {
        DriverConfig {
            message_bytes: size,
            block_bytes: block,
            window,
            ready_for_block: ready,
        }
    }

    /// Runs all ranks against an instantaneous in-order network; returns the
    /// sequence of (from, to, block) sends.
    fn run(scheme: Scheme, n: u32, c: DriverConfig) -> Vec<(u32, u32, u32)> {
        let mut d: Vec<_> = (0..n)
            .map(|r| BroadcastDriver::new(scheme, n, 0, r, c).unwrap())
            .collect();
        let mut log = Vec::new();
        loop {
            let mut progressed = false;
            for r in 0..n as usize {
                while let Some(a) = d[r].poll_event() {
                    progressed = true;
                    match a {
                        DriverAction::SendBlock { id, to, block, .. } => {
                            log.push((r as u32, to, block));
                            d[to as usize].handle_block(r as u32, block).unwrap();
                            d[r].handle_send_complete(id).unwrap();
                        }
                        DriverAction::SendReady { to, step } => {
                            d[to as usize].handle_ready(r as u32, step).unwrap();
                        }
                        DriverAction::NotifyFailure { .. } | DriverAction::Probe { .. } => {
                            panic!("nothing fails here")
                        }
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        for x in &d {
            assert!(x.is_complete(), "rank {} incomplete", x.rank());
        }
        log
    }

    #[test]
    fn every_scheme_completes_with_and_without_flow_control() {
        for scheme in Scheme::ALL {
            for n in [2u32, 3, 5, 8, 13] {
                for ready in [false, true] {
                    for window in [1, 4] {
                        let log = run(scheme, n, cfg(10_000, 1000, window, ready));
                        let s = Schedule::new(scheme, n, 0, 10).unwrap();
                        let scheduled: usize = (0..n).map(|r| s.sends_of(r).len()).sum();
                        assert_eq!(log.len(), scheduled, "{scheme} n={n}");
                    }
                }
            }
        }
    }

    #[test]
    fn chain_script() {
        // Rank 1 of a 3-rank chain, 2 blocks: block 0 in, forward, block 1 in, forward.
        let mut d =
            BroadcastDriver::new(Scheme::Chain, 3, 0, 1, cfg(2048, 1024, 1, false)).unwrap();
        assert_eq!(d.poll_event(), None);
        d.handle_block(0, 0).unwrap();
        assert_eq!(
            d.poll_event(),
            Some(DriverAction::SendBlock {
                id: 0,
                to: 2,
                block: 0,
                step: 1
            })
        );
        d.handle_block(0, 1).unwrap();
        // Window 1: block 1 waits for block 0's completion.
        assert_eq!(d.poll_event(), None);
        d.handle_send_complete(0).unwrap();
        assert_eq!(
            d.poll_event(),
            Some(DriverAction::SendBlock {
                id: 1,
                to: 2,
                block: 1,
                step: 2
            })
        );
        d.handle_send_complete(1).unwrap();
        assert!(d.is_complete());
    }

    #[test]
    fn ready_for_block_script() {
        // Receiver announces one transfer at a time; sender waits for it.
        let c = cfg(2048, 1024, 1, true);
        let mut r2 = BroadcastDriver::new(Scheme::Chain, 3, 0, 2, c).unwrap();
        assert_eq!(
            r2.poll_event(),
            Some(DriverAction::SendReady { to: 1, step: 1 })
        );
        assert_eq!(r2.poll_event(), None);
        r2.handle_block(1, 0).unwrap();
        assert_eq!(
            r2.poll_event(),
            Some(DriverAction::SendReady { to: 1, step: 2 })
        );

        let mut r1 = BroadcastDriver::new(Scheme::Chain, 3, 0, 1, c).unwrap();
        assert_eq!(
            r1.poll_event(),
            Some(DriverAction::SendReady { to: 0, step: 0 })
        );
        r1.handle_block(0, 0).unwrap();
        assert_eq!(
            r1.poll_event(),
            Some(DriverAction::SendReady { to: 0, step: 1 })
        );
        // Has block 0 but rank 2 has not said it is ready.
        assert_eq!(r1.poll_event(), None);
        r1.handle_ready(2, 1).unwrap();
        assert!(matches!(
            r1.poll_event(),
            Some(DriverAction::SendBlock {
                to: 2,
                block: 0,
                ..
            })
        ));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let mut d =
            BroadcastDriver::new(Scheme::Chain, 3, 0, 1, cfg(2048, 1024, 1, false)).unwrap();
        assert_eq!(
            d.handle_block(2, 0),
            Err(DriverError::UnexpectedBlock { from: 2, block: 0 })
        );
        assert_eq!(
            d.handle_block(0, 7),
            Err(DriverError::UnexpectedBlock { from: 0, block: 7 })
        );
        d.handle_block(0, 0).unwrap();
        assert_eq!(
            d.handle_block(0, 0),
            Err(DriverError::DuplicateBlock { from: 0, block: 0 })
        );
        assert_eq!(
            d.handle_send_complete(5),
            Err(DriverError::UnexpectedCompletion(5))
        );
        assert_eq!(
            d.handle_send_complete(1),
            Err(DriverError::UnexpectedCompletion(1))
        );
        assert!(d.handle_ready(2, 99).is_err());
        assert!(BroadcastDriver::new(Scheme::Chain, 3, 0, 3, cfg(1, 1, 1, false)).is_err());
        assert!(BroadcastDriver::new(Scheme::Chain, 3, 0, 0, cfg(1, 0, 1, false)).is_err());
        assert!(BroadcastDriver::new(Scheme::Chain, 3, 0, 0, cfg(1, 1, 0, false)).is_err());
    }

    proptest::proptest! {
        /// Arbitrary blocks, completions and ready messages, in any order: errors, no
        /// panic, never more than `window` sends outstanding, and a block counted once.
        #[test]
        fn arbitrary_input_never_panics(
            ops in proptest::collection::vec((0u8..3, 0u32..40, 0u32..40), 0..300)
        ) {
            let c = cfg(10_000, 1000, 2, true);
            let mut d = BroadcastDriver::new(Scheme::BinomialPipeline, 13, 0, 5, c).unwrap();
            let mut outstanding = 0i64;
            for (kind, a, b) in ops {
                let r = match kind {
                    0 => d.handle_block(a, b),
                    1 => d.handle_send_complete(a),
                    _ => d.handle_ready(a, b),
                };
                if kind == 1 && r.is_ok() {
                    outstanding -= 1;
                }
                while let Some(act) = d.poll_event() {
                    if let DriverAction::SendBlock { .. } = act {
                        outstanding += 1;
                    }
                }
                proptest::prop_assert!((0..=2).contains(&outstanding));
                proptest::prop_assert!(d.have_count as usize <= d.have.len());
            }
        }
    }

    #[test]
    fn control_immediates_round_trip_and_bad_ones_are_errors() {
        for c in [
            ControlImm::Ready { step: 0 },
            ControlImm::Ready {
                step: (1 << 30) - 1,
            },
            ControlImm::FailureNotice { failed: 12345 },
            ControlImm::Probe,
        ] {
            assert_eq!(ControlImm::decode(c.encode().unwrap()), Ok(c));
        }
        assert_eq!(
            ControlImm::Ready { step: 1 << 30 }.encode(),
            Err(DriverError::ControlOverflow)
        );
        assert!(ControlImm::decode(3 << 30).is_err());
        assert!(ControlImm::decode(2 << 30 | 1).is_err());
    }

    fn drain(d: &mut BroadcastDriver) -> Vec<DriverAction> {
        std::iter::from_fn(|| d.poll_event()).collect()
    }

    #[test]
    fn failure_script_relays_once_ceases_and_reports() {
        // Rank 1 of a 4-rank chain with flow control, 3 blocks: it has block 0 and
        // rank 2 is ready, so it sends; then its connection to rank 2 fails.
        let c = cfg(3072, 1024, 1, true);
        let mut d = BroadcastDriver::new(Scheme::Chain, 4, 0, 1, c).unwrap();
        assert_eq!(
            drain(&mut d),
            vec![DriverAction::SendReady { to: 0, step: 0 }]
        );
        d.handle_block(0, 0).unwrap();
        d.handle_ready(2, 1).unwrap();
        let acts = drain(&mut d);
        assert!(acts.contains(&DriverAction::SendBlock {
            id: 0,
            to: 2,
            block: 0,
            step: 1
        }));
        assert_eq!(d.outcome(), GroupOutcome::InProgress);
        d.handle_peer_failure(2).unwrap();
        // Relayed to every member but itself and the failed one, nothing else.
        assert_eq!(
            drain(&mut d),
            vec![
                DriverAction::NotifyFailure { to: 0, failed: 2 },
                DriverAction::NotifyFailure { to: 3, failed: 2 },
            ]
        );
        assert_eq!(d.outcome(), GroupOutcome::Failed { failed: vec![2] });
        // Learned again (a notice from rank 0): no second relay.
        d.handle_failure_notice(0, 2).unwrap();
        assert_eq!(drain(&mut d), vec![]);
        // Ceased: more blocks and readies post nothing, and are not errors.
        d.handle_block(0, 1).unwrap();
        d.handle_ready(2, 2).unwrap();
        d.handle_send_complete(0).unwrap();
        assert_eq!(drain(&mut d), vec![]);
        // A second failure is relayed to the survivors only.
        d.handle_failure_notice(3, 0).unwrap();
        assert_eq!(
            drain(&mut d),
            vec![DriverAction::NotifyFailure { to: 3, failed: 0 }]
        );
        assert_eq!(d.outcome(), GroupOutcome::Failed { failed: vec![0, 2] });
        assert_eq!(
            d.handle_failure_notice(9, 0),
            Err(DriverError::NotAMember(9))
        );
        assert_eq!(d.handle_peer_failure(4), Err(DriverError::NotAMember(4)));
        d.probe_stalled();
        assert_eq!(drain(&mut d), vec![], "a failed group probes no one");
    }

    #[test]
    fn a_delivered_member_still_reports_a_later_failure() {
        let c = cfg(1024, 1024, 1, false);
        let mut last = BroadcastDriver::new(Scheme::Chain, 3, 0, 2, c).unwrap();
        last.handle_block(1, 0).unwrap();
        assert_eq!(last.outcome(), GroupOutcome::Delivered);
        last.handle_failure_notice(0, 1).unwrap();
        assert_eq!(last.outcome(), GroupOutcome::Failed { failed: vec![1] });
    }

    #[test]
    fn probe_stalled_names_the_peers_waited_on() {
        let c = cfg(2048, 1024, 1, true);
        // Rank 2 of a chain waits for block 0 from rank 1.
        let mut r2 = BroadcastDriver::new(Scheme::Chain, 3, 0, 2, c).unwrap();
        drain(&mut r2);
        r2.probe_stalled();
        assert_eq!(drain(&mut r2), vec![DriverAction::Probe { to: 1 }]);
        // Rank 1 holds block 0 and waits for rank 2's ready, and for block 1 from 0.
        let mut r1 = BroadcastDriver::new(Scheme::Chain, 3, 0, 1, c).unwrap();
        r1.handle_block(0, 0).unwrap();
        drain(&mut r1);
        r1.probe_stalled();
        assert_eq!(
            drain(&mut r1),
            vec![DriverAction::Probe { to: 0 }, DriverAction::Probe { to: 2 }]
        );
        // The root of a finished broadcast probes nobody.
        let mut r0 =
            BroadcastDriver::new(Scheme::Chain, 2, 0, 0, cfg(1024, 1024, 1, false)).unwrap();
        let id = match drain(&mut r0)[..] {
            [DriverAction::SendBlock { id, .. }] => id,
            ref other => panic!("{other:?}"),
        };
        r0.handle_send_complete(id).unwrap();
        r0.probe_stalled();
        assert_eq!(drain(&mut r0), vec![]);
    }

    #[test]
    fn block_ranges_cover_the_message() {
        let c = cfg(2500, 1000, 1, false);
        assert_eq!(c.blocks(), 3);
        assert_eq!(c.block_range(0), (0, 1000));
        assert_eq!(c.block_range(2), (2000, 500));
        let e = cfg(0, 1000, 1, false);
        assert_eq!(e.blocks(), 1);
        assert_eq!(e.block_range(0), (0, 0));
    }
}
