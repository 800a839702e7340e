//! The receiving side: any number of sender streams (sessions), each delivered exactly
//! once and in order (see the module doc).
//!
//! Calling order: feed every packet that arrives from the group (DATA, heartbeats, other
//! receivers' NACKs) to [`handle_packet`], call [`handle_timeout`] when
//! [`poll_timeout`] says, and drain [`poll_transmit`] (NACKs to the group, STATUS to the
//! sender) and [`poll_event`] (messages and loss reports, in stream order).
//!
//! NACK rules, per stream (RFC 5401 §3.5 and NORM's suppression):
//! 1. A gap (sequences below the highest seen, from DATA or a heartbeat, that have not
//!    arrived) arms a NACK timer with a random back-off ([`NackBackoff`]) if none is armed
//!    and the stream is not holding off.
//! 2. When the timer fires, the missing ranges not covered by NACKs heard from other
//!    receivers since the timer was armed are NACKed (to the group); the stream then
//!    holds off for `nack_holdoff` (long enough for the repair to arrive).
//! 3. If every missing range was covered by heard NACKs, nothing is sent: suppressed.
//! 4. After the hold-off, whatever is still missing starts again at rule 1.
//! 5. After `max_fruitless_nack_rounds` rounds in which no DATA of the stream arrived,
//!    the stream is not NACKed again until one does: a stream that only heartbeats
//!    announce (a made-up one, or a sender that died) costs a bounded number of NACKs.
//!
//! Whom it listens to (module doc, "Trust"): a stream is bound to the source of its
//! first DATA or heartbeat, and its packets from any other source are dropped
//! (`wrong_source`); with a group key only sealed packets are taken (`auth_failures`);
//! at most `max_streams` streams are tracked (`streams_refused`; a stream silent for
//! `stream_idle_timeout` is evicted to make room, `streams_evicted`). STATUS goes to
//! each stream's bound source ([`NackMulticastReceiver::stream_sender`]).
//!
//! [`handle_packet`]: NackMulticastReceiver::handle_packet
//! [`handle_timeout`]: NackMulticastReceiver::handle_timeout
//! [`poll_timeout`]: NackMulticastReceiver::poll_timeout
//! [`poll_transmit`]: NackMulticastReceiver::poll_transmit
//! [`poll_event`]: NackMulticastReceiver::poll_event

use super::auth::{GroupKey, AUTH_TAG_LEN};
use super::backoff::NackBackoff;
use super::packet::{DataRepr, Packet, PacketRepr, NACK_LEN, STATUS_LEN};
use super::{Destination, Peer};
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub receiver_id: u32,
    /// Out-of-order packets held per stream; advertised to the sender as the window.
    /// Keep it within the UD receive buffers posted below this receiver: UD drops a
    /// packet that finds none, and a larger window lets the sender put more packets in
    /// flight than a stalled host can absorb (`ud-loss`: 5.2e-6 lost at window 4096 over
    /// 1024 buffers, only bit errors at 1000).
    pub window: u32,
    /// Receivers in the group: scales the NACK back-off (RFC 5401 λ = ln N + 1).
    pub group_size: usize,
    /// The back-off's upper bound (a few one-way delays).
    pub nack_max_backoff: Duration,
    /// After NACKing (or being suppressed), wait this long before NACKing the same gap
    /// again: at least a round trip plus the sender's repair time.
    pub nack_holdoff: Duration,
    /// STATUS period (also sent when the position advanced a quarter window).
    pub status_interval: Duration,
    /// NACK ranges per timer expiry (the rest wait for the next round).
    pub max_nack_ranges: usize,
    pub seed: u64,
    /// The group key: with one, only sealed packets are taken and every NACK and
    /// STATUS sent is sealed ([`super::auth`]).
    pub group_key: Option<GroupKey>,
    /// Streams tracked at most; a new one past it is refused (counted) unless a
    /// tracked stream has been silent for `stream_idle_timeout` (it is evicted).
    pub max_streams: usize,
    pub stream_idle_timeout: Duration,
    /// NACK rounds without any DATA of the stream arriving, after which the stream is
    /// not NACKed until DATA arrives (rule 5).
    pub max_fruitless_nack_rounds: u32,
    /// The longest message taken (longer ones are malformed): bounds reassembly.
    pub max_message_len: u32,
}

impl ReceiverConfig {
    pub fn new(receiver_id: u32, group_size: usize, seed: u64) -> Self {
        ReceiverConfig {
            receiver_id,
            window: 256,
            group_size,
            nack_max_backoff: Duration::from_us(20),
            nack_holdoff: Duration::from_us(60),
            status_interval: Duration::from_us(100),
            max_nack_ranges: 16,
            seed,
            group_key: None,
            max_streams: 8,
            stream_idle_timeout: Duration::from_ms(1000),
            max_fruitless_nack_rounds: 16,
            max_message_len: 64 << 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// Message `msg_seq` of `session`, whole, exactly once, in order.
    Message {
        session: u32,
        msg_seq: u64,
        data: Vec<u8>,
    },
    /// Messages `messages` of `session` can never be delivered: part of them left the
    /// sender's retransmission window before it reached this receiver.
    Unrecoverable { session: u32, messages: Range<u64> },
}

/// A packet waiting for [`NackMulticastReceiver::poll_transmit`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct Queued {
    dest: Destination,
    bytes: Vec<u8>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    pub data_packets: u64,
    pub repair_packets: u64,
    pub duplicates: u64,
    /// DATA beyond the advertised window (a sender ignoring flow control).
    pub beyond_window: u64,
    pub heartbeats: u64,
    pub messages: u64,
    pub nacks_sent: u64,
    /// NACK ranges sent (one NACK packet carries one range).
    pub nack_ranges_sent: u64,
    /// Timer expiries whose whole NACK was covered by ones heard from others.
    pub nacks_suppressed: u64,
    pub nacks_heard: u64,
    pub status_sent: u64,
    /// Sequences given up on (left the sender's window).
    pub lost_packets: u64,
    pub lost_messages: u64,
    pub malformed: u64,
    /// DATA or heartbeats of a stream from another source than the one it is bound to.
    pub wrong_source: u64,
    /// Packets without a valid tag while the receiver has a group key.
    pub auth_failures: u64,
    /// New streams refused: `max_streams` tracked and none idle.
    pub streams_refused: u64,
    /// Idle streams forgotten to make room for a new one.
    pub streams_evicted: u64,
    /// NACK rounds not sent because the stream had had `max_fruitless_nack_rounds`
    /// rounds without DATA (rule 5).
    pub nack_rounds_withheld: u64,
}

#[derive(Debug)]
struct Fragment {
    msg_seq: u64,
    msg_len: u32,
    frag_offset: u32,
    first: bool,
    last: bool,
    payload: Vec<u8>,
}

#[derive(Debug)]
struct Stream {
    /// Every sequence below this was consumed (delivered or given up).
    next_seq: u64,
    /// One past the highest sequence known to exist (DATA or heartbeat).
    high: u64,
    /// Out-of-order fragments, index `seq - next_seq - 1` (next_seq itself is never held).
    held: VecDeque<Option<Fragment>>,
    /// The message being reassembled: (msg_seq, bytes so far).
    partial: Option<(u64, Vec<u8>)>,
    /// After a loss: drop fragments until a message starts.
    skipping: bool,
    /// The message sequence expected next (loss reports name messages from here).
    next_msg: u64,
    nack_due: Option<Instant>,
    holdoff_until: Option<Instant>,
    /// NACK ranges heard from other receivers since the timer was armed.
    heard: Vec<Range<u64>>,
    last_status: Option<Instant>,
    status_position: u64,
    /// The source the stream is bound to (its first DATA's or heartbeat's).
    sender: Option<Peer>,
    /// The last packet of the stream taken (idle streams make room for new ones).
    last_heard: Instant,
    /// DATA of the stream arrived since the last NACK round.
    data_since_nack: bool,
    /// Consecutive NACK rounds without DATA (rule 5).
    fruitless_rounds: u32,
}

pub struct NackMulticastReceiver {
    cfg: ReceiverConfig,
    backoff: NackBackoff,
    streams: BTreeMap<u32, Stream>,
    tx: VecDeque<Queued>,
    events: VecDeque<ReceiverEvent>,
    counters: ReceiverCounters,
    /// Message buffers handed back by [`recycle`](Self::recycle), reused for payloads
    /// so that a driver at 10^8 packets does not allocate one per packet.
    spare: Vec<Vec<u8>>,
}

/// The most buffers [`NackMulticastReceiver::recycle`] keeps.
const SPARE_BUFFERS: usize = 64;

/// Counts messages `lost` of `session` as lost (saturating, as every loss count) and
/// tells the application. (Free of `self`: callers hold a stream borrowed.)
fn messages_lost(
    counters: &mut ReceiverCounters,
    events: &mut VecDeque<ReceiverEvent>,
    session: u32,
    lost: Range<u64>,
) {
    counters.lost_messages = counters.lost_messages.saturating_add(lost.end - lost.start);
    events.push_back(ReceiverEvent::Unrecoverable {
        session,
        messages: lost,
    });
}

impl NackMulticastReceiver {
    pub fn new(cfg: ReceiverConfig) -> Self {
        assert!(cfg.window > 0, "window must be positive");
        NackMulticastReceiver {
            backoff: NackBackoff::new(cfg.nack_max_backoff, cfg.group_size, cfg.seed),
            cfg,
            streams: BTreeMap::new(),
            tx: VecDeque::new(),
            events: VecDeque::new(),
            spare: Vec::new(),
            counters: ReceiverCounters::default(),
        }
    }

    pub fn counters(&self) -> &ReceiverCounters {
        &self.counters
    }
    pub fn config(&self) -> &ReceiverConfig {
        &self.cfg
    }
    /// The consumed position of `session` (every sequence below it delivered or lost).
    pub fn position(&self, session: u32) -> Option<u64> {
        self.streams.get(&session).map(|s| s.next_seq)
    }
    /// Sequences of `session` known to exist and not yet consumed.
    pub fn missing(&self, session: u32) -> u64 {
        self.streams
            .get(&session)
            .map_or(0, |s| s.high - s.next_seq)
    }
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .streams
                .values()
                .map(|s| {
                    std::mem::size_of::<Stream>()
                        + s.held.len() * std::mem::size_of::<Option<Fragment>>()
                        + s.held
                            .iter()
                            .flatten()
                            .map(|f| f.payload.capacity())
                            .sum::<usize>()
                        + s.partial.as_ref().map_or(0, |p| p.1.capacity())
                })
                .sum::<usize>()
            + self.spare.iter().map(|b| b.capacity()).sum::<usize>()
    }

    /// The source stream `session` is bound to (where its STATUS goes).
    pub fn stream_sender(&self, session: u32) -> Option<Peer> {
        self.streams.get(&session).and_then(|s| s.sender)
    }
    /// Streams tracked.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether a sender's packet (DATA or heartbeat) of `session` from `from` is taken:
    /// its stream is bound to `from`, or is new and there is room (an idle stream is
    /// evicted for it if need be), then created and bound.
    fn admit(&mut self, now: Instant, session: u32, from: Option<Peer>) -> bool {
        if let Some(s) = self.streams.get_mut(&session) {
            if from.is_some() && s.sender.is_some() && s.sender != from {
                self.counters.wrong_source += 1;
                return false;
            }
            s.last_heard = now;
            return true;
        }
        if self.streams.len() >= self.cfg.max_streams {
            let idle = self
                .streams
                .iter()
                .filter(|(_, s)| now >= s.last_heard + self.cfg.stream_idle_timeout)
                .min_by_key(|(_, s)| s.last_heard)
                .map(|(&id, _)| id);
            match idle {
                Some(id) => {
                    self.streams.remove(&id);
                    self.counters.streams_evicted += 1;
                }
                None => {
                    self.counters.streams_refused += 1;
                    return false;
                }
            }
        }
        let s = self.stream(session);
        s.sender = from;
        s.last_heard = now;
        true
    }

    /// The stream of `session`, created on its first packet; `last_status: None` makes
    /// the first `after_change` announce the receiver (the sender's flow control waits
    /// for it).
    fn stream(&mut self, session: u32) -> &mut Stream {
        self.streams.entry(session).or_insert_with(|| Stream {
            // A stream starts at sequence 0: a receiver that missed the first packets
            // NACKs them, or is told they are gone. Nothing is skipped silently.
            next_seq: 0,
            high: 0,
            held: VecDeque::new(),
            partial: None,
            skipping: false,
            next_msg: 0,
            nack_due: None,
            holdoff_until: None,
            heard: Vec::new(),
            last_status: None,
            status_position: 0,
            sender: None,
            last_heard: Instant::ZERO,
            data_since_nack: false,
            fruitless_rounds: 0,
        })
    }

    /// Feeds one packet, its source unknown (no source checks; see
    /// [`handle_packet_from`](Self::handle_packet_from)).
    pub fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        self.handle_packet_from(now, None, bytes)
    }

    /// Feeds one packet that arrived from `from` (the UD source address and QPN).
    pub fn handle_packet_from(&mut self, now: Instant, from: Option<Peer>, bytes: &[u8]) {
        let p = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        if let Some(k) = &self.cfg.group_key {
            if !k.verify(bytes) {
                self.counters.auth_failures += 1;
                return;
            }
        }
        match p.repr {
            PacketRepr::Data(d) => {
                if d.msg_len > self.cfg.max_message_len {
                    self.counters.malformed += 1;
                    return;
                }
                if self.admit(now, p.session, from) {
                    self.on_data(now, p.session, &d)
                }
            }
            PacketRepr::Heartbeat {
                next_seq,
                low_seq,
                next_msg,
            } => {
                if !self.admit(now, p.session, from) {
                    return;
                }
                // (The parser refuses a low edge above next_seq.)
                self.counters.heartbeats += 1;
                let s = self.stream(p.session);
                s.high = s.high.max(next_seq);
                if low_seq > s.next_seq {
                    self.give_up_below(p.session, low_seq);
                }
                self.report_tail_loss(p.session, next_seq, next_msg);
                self.after_change(now, p.session);
            }
            PacketRepr::Nack {
                receiver,
                from_seq,
                count,
            } => {
                if receiver == self.cfg.receiver_id {
                    return; // our own, looped back
                }
                self.counters.nacks_heard += 1;
                if let Some(s) = self.streams.get_mut(&p.session) {
                    // Bounded: past 64 heard ranges a receiver may NACK redundantly,
                    // which costs a repair, never correctness.
                    if s.nack_due.is_some() && s.heard.len() < 64 {
                        s.heard.push(from_seq..from_seq + count as u64);
                    }
                }
            }
            PacketRepr::Status { .. } => {} // other receivers' feedback, if it loops back
        }
    }

    fn on_data(&mut self, now: Instant, session: u32, d: &DataRepr<'_>) {
        self.counters.data_packets += 1;
        if d.is_repair() {
            self.counters.repair_packets += 1;
        }
        let window = self.cfg.window as u64;
        let mut buf = self.spare.pop();
        let s = self.stream(session);
        if d.seq < s.next_seq {
            self.counters.duplicates += 1;
            self.spare.extend(buf);
            return;
        }
        if d.seq - s.next_seq > window {
            self.counters.beyond_window += 1;
            self.spare.extend(buf);
            return;
        }
        s.high = s.high.max(d.seq + 1);
        // New DATA of the stream: its sender is alive and NACKs are worth sending.
        s.data_since_nack = true;
        s.fruitless_rounds = 0;
        let mut frag = || {
            let mut payload = buf.take().unwrap_or_default();
            payload.extend_from_slice(d.payload);
            Fragment {
                msg_seq: d.msg_seq,
                msg_len: d.msg_len,
                frag_offset: d.frag_offset,
                first: d.is_first(),
                last: d.is_last(),
                payload,
            }
        };
        if d.seq == s.next_seq {
            self.consume(session, Some(frag()));
            self.drain_held(session);
        } else {
            let idx = (d.seq - s.next_seq - 1) as usize;
            if s.held.len() <= idx {
                s.held.resize_with(idx + 1, || None);
            }
            if s.held[idx].is_some() {
                self.counters.duplicates += 1;
                self.spare.extend(buf);
                return;
            }
            s.held[idx] = Some(frag());
        }
        self.after_change(now, session);
    }

    /// Consumes sequence `next_seq`: a fragment, or `None` for one given up on.
    fn consume(&mut self, session: u32, frag: Option<Fragment>) {
        let s = self.streams.get_mut(&session).expect("stream exists");
        // `held` now starts at the new next_seq: drain_held restores the invariant.
        s.next_seq += 1;
        let Some(f) = frag else {
            // Saturating, as every loss count: forged heartbeats on several sessions
            // can each claim 2^63 lost sequences (the fuzz target's overflow).
            self.counters.lost_packets = self.counters.lost_packets.saturating_add(1);
            s.partial = None;
            s.skipping = true;
            return;
        };
        if s.skipping {
            if !f.first {
                return;
            }
            s.skipping = false;
            if f.msg_seq > s.next_msg {
                let lost = s.next_msg..f.msg_seq;
                messages_lost(&mut self.counters, &mut self.events, session, lost);
            }
            s.next_msg = f.msg_seq;
        }
        if f.first && f.last {
            // A one-packet message (the common case): its payload is the message.
            s.partial = None;
            s.next_msg = f.msg_seq + 1;
            self.counters.messages += 1;
            self.events.push_back(ReceiverEvent::Message {
                session,
                msg_seq: f.msg_seq,
                data: f.payload,
            });
            return;
        }
        if f.first {
            // Capacity grows with the fragments that arrive, not with what the first
            // one claims (`msg_len` is at most `max_message_len` anyway).
            let cap = (f.msg_len as usize).min(1 << 16);
            s.partial = Some((f.msg_seq, Vec::with_capacity(cap)));
        }
        let Some((msg_seq, buf)) = s.partial.as_mut() else {
            return; // a middle fragment without its start: impossible in order
        };
        if *msg_seq != f.msg_seq || buf.len() != f.frag_offset as usize {
            // A sender bug or corruption the parser could not see: the message being
            // reassembled is lost, and said so; the rest of the current message's
            // fragments are skipped until a first fragment (whose gap, if any, is
            // reported then).
            let lost = *msg_seq;
            s.partial = None;
            s.skipping = true;
            s.next_msg = lost + 1;
            self.counters.malformed += 1;
            messages_lost(
                &mut self.counters,
                &mut self.events,
                session,
                lost..lost + 1,
            );
            return;
        }
        buf.extend_from_slice(&f.payload);
        if f.last {
            let (msg_seq, data) = s.partial.take().expect("partial");
            s.next_msg = msg_seq + 1;
            self.counters.messages += 1;
            self.events.push_back(ReceiverEvent::Message {
                session,
                msg_seq,
                data,
            });
        }
    }

    /// After [`consume`](Self::consume): `held[0]` is the new `next_seq`. Consumes held
    /// fragments while they are in order, and drops the slot of the first missing one,
    /// so that `held[i]` is again sequence `next_seq + 1 + i`.
    fn drain_held(&mut self, session: u32) {
        loop {
            let s = self.streams.get_mut(&session).expect("stream exists");
            match s.held.pop_front() {
                Some(Some(f)) => self.consume(session, Some(f)),
                Some(None) | None => return,
            }
        }
    }

    /// The sender can no longer repair anything below `low`: consume what is held and
    /// give up on the rest.
    /// Time O(window), whatever `low` is: once nothing is held past `next_seq`, the
    /// rest of the range is given up at once (a forged heartbeat with a huge low edge
    /// must not walk every sequence).
    fn give_up_below(&mut self, session: u32, low: u64) {
        loop {
            let s = self.streams.get_mut(&session).expect("stream exists");
            if s.next_seq >= low {
                break;
            }
            if s.held.is_empty() {
                // Nothing arrived past next_seq: sequences next_seq..low are all lost,
                // which is what consuming `None` for each of them would record.
                let skipped = low - s.next_seq;
                s.next_seq = low;
                s.partial = None;
                s.skipping = true;
                // Saturating: forged heartbeats on several sessions can each claim
                // 2^63 lost sequences (the fuzz target's overflow).
                self.counters.lost_packets = self.counters.lost_packets.saturating_add(skipped);
                break;
            }
            // next_seq itself never sits in `held` (it would have been consumed).
            self.consume(session, None);
            self.drain_held(session);
        }
    }

    /// Tail loss: after a give-up the stream skips to the next message's first
    /// fragment, and the gap is reported when one arrives. When the sender has sent
    /// nothing more (everything below its `next_seq` is consumed), no fragment will
    /// reveal the gap: the heartbeat's `next_msg` says how many messages started, and
    /// those not delivered are reported lost now.
    fn report_tail_loss(&mut self, session: u32, next_seq: u64, next_msg: u64) {
        let s = self.streams.get_mut(&session).expect("stream exists");
        if !s.skipping || s.next_seq < next_seq || next_msg <= s.next_msg {
            return;
        }
        let lost = s.next_msg..next_msg;
        s.next_msg = next_msg;
        messages_lost(&mut self.counters, &mut self.events, session, lost);
    }

    /// Arms the NACK timer for a gap and sends STATUS when the position moved enough.
    fn after_change(&mut self, now: Instant, session: u32) {
        let window = self.cfg.window as u64;
        let s = self.streams.get_mut(&session).expect("stream exists");
        // next_seq is never held, so anything known beyond it means a gap.
        if s.high <= s.next_seq {
            s.nack_due = None;
            s.holdoff_until = None;
            s.heard.clear();
        } else if s.nack_due.is_none()
            && s.holdoff_until.is_none()
            && s.fruitless_rounds < self.cfg.max_fruitless_nack_rounds
        {
            s.nack_due = Some(now + self.backoff.next_delay());
        }
        if s.last_status.is_none() || s.next_seq >= s.status_position + window / 4 {
            self.send_status(now, session);
        }
    }

    fn send_status(&mut self, now: Instant, session: u32) {
        let s = self.streams.get_mut(&session).expect("stream exists");
        s.last_status = Some(now);
        s.status_position = s.next_seq;
        self.counters.status_sent += 1;
        let mut bytes = Packet {
            session,
            repr: PacketRepr::Status {
                receiver: self.cfg.receiver_id,
                position: s.next_seq,
                window: self.cfg.window,
            },
        }
        .to_vec();
        if let Some(k) = &self.cfg.group_key {
            k.seal(&mut bytes);
        }
        self.tx.push_back(Queued {
            dest: Destination::Sender,
            bytes,
        });
    }

    /// Missing sequence ranges of a stream, in order.
    fn missing_ranges(s: &Stream) -> Vec<Range<u64>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        let mut push = |seq: u64| match out.last_mut() {
            Some(r) if r.end == seq => r.end += 1,
            _ => out.push(seq..seq + 1),
        };
        if s.next_seq < s.high {
            push(s.next_seq);
        }
        for (i, slot) in s.held.iter().enumerate() {
            let seq = s.next_seq + 1 + i as u64;
            if seq >= s.high {
                break;
            }
            if slot.is_none() {
                push(seq);
            }
        }
        let tail_from = s.next_seq + 1 + s.held.len() as u64;
        if tail_from < s.high {
            match out.last_mut() {
                Some(r) if r.end == tail_from => r.end = s.high,
                _ => out.push(tail_from..s.high),
            }
        }
        out
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let sessions: Vec<u32> = self.streams.keys().copied().collect();
        for session in sessions {
            let s = self.streams.get_mut(&session).expect("stream exists");
            let muted = s.fruitless_rounds >= self.cfg.max_fruitless_nack_rounds;
            if !muted
                && s.last_status
                    .is_some_and(|t| now >= t + self.cfg.status_interval)
            {
                self.send_status(now, session);
            }
            let s = self.streams.get_mut(&session).expect("stream exists");
            if s.holdoff_until.is_some_and(|t| now >= t) {
                // Hold-off over: whatever is still missing arms a fresh back-off.
                s.holdoff_until = None;
                self.after_change(now, session);
            }
            let s = self.streams.get_mut(&session).expect("stream exists");
            if !s.nack_due.is_some_and(|t| now >= t) {
                continue;
            }
            s.nack_due = None;
            s.holdoff_until = Some(now + self.cfg.nack_holdoff);
            // Rule 5: a stream whose sender answers nothing stops costing NACKs.
            if s.data_since_nack {
                s.fruitless_rounds = 0;
            } else {
                s.fruitless_rounds += 1;
            }
            s.data_since_nack = false;
            if s.fruitless_rounds >= self.cfg.max_fruitless_nack_rounds {
                s.heard.clear();
                self.counters.nack_rounds_withheld += 1;
                continue;
            }
            let heard = std::mem::take(&mut s.heard);
            let mut ranges = Vec::new();
            for r in Self::missing_ranges(s) {
                subtract(r, &heard, &mut ranges);
            }
            if ranges.is_empty() {
                self.counters.nacks_suppressed += 1;
                continue;
            }
            self.counters.nacks_sent += 1;
            // One range per NACK packet, ranges longer than u32 split, and at most
            // `max_nack_ranges` packets per round however the ranges split: a forged
            // heartbeat claiming 2^63 sequences must not make billions of NACKs.
            let mut budget = self.cfg.max_nack_ranges;
            for r in ranges {
                let mut from = r.start;
                while from < r.end && budget > 0 {
                    budget -= 1;
                    let count = (r.end - from).min(u32::MAX as u64) as u32;
                    self.counters.nack_ranges_sent += 1;
                    let mut bytes = Packet {
                        session,
                        repr: PacketRepr::Nack {
                            receiver: self.cfg.receiver_id,
                            from_seq: from,
                            count,
                        },
                    }
                    .to_vec();
                    if let Some(k) = &self.cfg.group_key {
                        k.seal(&mut bytes);
                    }
                    self.tx.push_back(Queued {
                        dest: Destination::Group,
                        bytes,
                    });
                    from += count as u64;
                }
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for s in self.streams.values() {
            if let Some(x) = s.nack_due {
                at(x);
            } else if let Some(x) = s.holdoff_until {
                at(x);
            }
            // Rule 5 mutes the periodic STATUS too: nothing goes to whoever announced a
            // stream that never answers, until DATA of it arrives.
            let muted = s.fruitless_rounds >= self.cfg.max_fruitless_nack_rounds;
            if let Some(x) = s.last_status.filter(|_| !muted) {
                at(x + self.cfg.status_interval);
            }
        }
        t
    }

    /// The longest packet [`poll_transmit`](Self::poll_transmit) writes.
    pub fn max_packet_len(&self) -> usize {
        NACK_LEN.max(STATUS_LEN)
            + if self.cfg.group_key.is_some() {
                AUTH_TAG_LEN
            } else {
                0
            }
    }

    /// Writes the next NACK (to the group) or STATUS (to the sender) into `buf`. `buf`
    /// must hold [`max_packet_len`](Self::max_packet_len) bytes (a shorter one is a
    /// driver bug and panics).
    pub fn poll_transmit(
        &mut self,
        _now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit<Destination>> {
        let q = self.tx.pop_front()?;
        buf[..q.bytes.len()].copy_from_slice(&q.bytes);
        Some(Transmit::to(q.bytes.len(), q.dest))
    }

    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// Hands back a delivered message's buffer for reuse (optional: a driver that
    /// keeps its messages simply does not call this). At most 64 are kept.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS {
            buf.clear();
            self.spare.push(buf);
        }
    }
}

/// Appends to `out` the parts of `r` that no range in `cover` contains.
fn subtract(r: Range<u64>, cover: &[Range<u64>], out: &mut Vec<Range<u64>>) {
    let mut parts = vec![r];
    for c in cover {
        let mut next = Vec::with_capacity(parts.len() + 1);
        for p in parts {
            if c.end <= p.start || c.start >= p.end {
                next.push(p);
                continue;
            }
            if p.start < c.start {
                next.push(p.start..c.start);
            }
            if c.end < p.end {
                next.push(c.end..p.end);
            }
        }
        parts = next;
    }
    out.extend(parts);
}

#[cfg(test)]
mod tests {
    use super::subtract;

    #[test]
    fn subtract_leaves_the_uncovered_parts() {
        let mut out = Vec::new();
        subtract(10..20, &[12..14, 18..30, 0..5], &mut out);
        assert_eq!(out, vec![10..12, 14..18]);
        out.clear();
        subtract(10..20, &[0..100], &mut out);
        assert!(out.is_empty());
    }
}
