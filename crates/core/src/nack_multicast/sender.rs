//! The sending side of one NACK multicast stream (see the module doc).
//!
//! Calling order, as for every rocast state machine: feed [`handle_packet`] with every
//! NACK and STATUS that arrives and call [`handle_timeout`] when [`poll_timeout`] says;
//! then drain [`poll_transmit`] (every packet goes to the group) and [`poll_event`].
//! [`send`] queues a message; it is refused, not buffered without bound, when the
//! retransmission window is full.
//!
//! Whom it listens to (see the module doc's "Trust"): STATUS and NACKs of its own
//! stream, sealed with the group key when there is one, from each receiver's own
//! address ([`SenderConfig::receiver_addresses`], or the first STATUS's source when it
//! was given none), for at most [`SenderConfig::max_receivers`] receivers. Everything
//! else is counted and ignored: a stranger's STATUS cannot make it declare completion
//! or release packets a real receiver still misses.
//!
//! [`handle_packet`]: NackMulticastSender::handle_packet
//! [`handle_timeout`]: NackMulticastSender::handle_timeout
//! [`poll_timeout`]: NackMulticastSender::poll_timeout
//! [`poll_transmit`]: NackMulticastSender::poll_transmit
//! [`poll_event`]: NackMulticastSender::poll_event
//! [`send`]: NackMulticastSender::send

use super::auth::{GroupKey, AUTH_TAG_LEN};
use super::packet::{
    mark_repair, DataRepr, Packet, PacketRepr, DATA_HEADER_LEN, FLAG_FIRST, FLAG_LAST,
};
use super::Peer;
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use thiserror::Error;

/// Whose progress limits the sender (Aeron's flow-control strategies).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FlowControl {
    /// The slowest live receiver (the default: every receiver gets everything).
    #[default]
    Min,
    /// The fastest receiver; slower ones may fall out of the window and are told so.
    Max,
    /// The slowest of these receivers; the others are served best-effort.
    Tagged(BTreeSet<u32>),
}

#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// The stream id: random per sender start (the runtime's CSPRNG), so a restarted
    /// sender is a new stream; fixed only in the seeded simulator.
    pub session: u32,
    /// Payload bytes per DATA packet: the UD path MTU minus the 32-byte DATA header.
    pub max_payload: usize,
    /// Retransmission buffer, in packets; also the most a message may span.
    pub window: usize,
    /// Sent when nothing else was for this long: lets receivers detect tail loss.
    pub heartbeat_interval: Duration,
    pub flow_control: FlowControl,
    /// Receivers the flow control waits for before the first window is exceeded.
    pub expected_receivers: usize,
    /// A receiver silent this long no longer limits the sender.
    pub receiver_timeout: Duration,
    /// Repairs queued at once; NACKed sequences beyond it are refused (counted) and
    /// NACKed again by their receivers later.
    pub max_pending_repairs: usize,
    /// After repairing a sequence, further NACKs for it are ignored this long: one
    /// repair per NACK burst, however many receivers missed the packet.
    pub repair_linger: Duration,
    /// The receiver window assumed before any STATUS arrives.
    pub initial_receiver_window: u32,
    /// The group key: with one, every packet sent is sealed and only sealed STATUS and
    /// NACKs are taken ([`super::auth`]). The payload per packet stays `max_payload`:
    /// leave [`AUTH_TAG_LEN`] bytes of the MTU for the tag.
    pub group_key: Option<GroupKey>,
    /// The receivers and their addresses, when the sender knows them: STATUS and NACKs
    /// are then taken only from these (id, address) pairs. Empty: each receiver id is
    /// bound to the source of its first STATUS.
    pub receiver_addresses: BTreeMap<u32, Peer>,
    /// Receivers tracked at most (further ids are refused, counted).
    pub max_receivers: usize,
}

impl SenderConfig {
    pub fn new(session: u32, max_payload: usize) -> Self {
        SenderConfig {
            session,
            max_payload,
            window: 1024,
            heartbeat_interval: Duration::from_us(100),
            flow_control: FlowControl::Min,
            expected_receivers: 0,
            receiver_timeout: Duration::from_ms(100),
            max_pending_repairs: 256,
            repair_linger: Duration::from_us(50),
            initial_receiver_window: 256,
            group_key: None,
            receiver_addresses: BTreeMap::new(),
            max_receivers: 1024,
        }
    }
}

/// Why [`NackMulticastSender::send`] refused a message.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The retransmission buffer has no room for the message's packets yet: retry after
    /// receivers make progress (the application's back-pressure).
    #[error("window full: {need} packets needed, {free} free")]
    WindowFull { need: usize, free: usize },
    /// The message needs more packets than the whole window holds.
    #[error("message of {len} bytes needs {packets} packets; the window is {window}")]
    TooLarge {
        len: usize,
        packets: usize,
        window: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SenderEvent {
    /// A receiver's first STATUS.
    ReceiverJoined(u32),
    /// A receiver fell silent and no longer limits the sender.
    ReceiverTimedOut(u32),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SenderCounters {
    pub messages: u64,
    pub data_packets: u64,
    pub repair_packets: u64,
    pub heartbeats: u64,
    pub nacks_in: u64,
    /// NACKed sequences inside the linger of their last repair (the burst's echo).
    pub nacked_lingering: u64,
    /// NACKed sequences already queued for repair.
    pub nacked_queued: u64,
    /// NACKed sequences refused because `max_pending_repairs` were queued.
    pub repairs_capped: u64,
    /// NACKed sequences no longer in the buffer (answered with a heartbeat).
    pub nacked_unavailable: u64,
    /// NACKs for sequences never sent, or of another session.
    pub nacks_bogus: u64,
    pub status_in: u64,
    /// Sequences evicted before every live receiver had them (`Max`/`Tagged` only).
    pub evicted_unconsumed: u64,
    pub malformed: u64,
    /// Packets of another stream (another sender, or an old incarnation of this one).
    pub other_stream: u64,
    /// Packets without a valid tag while the sender has a group key.
    pub auth_failures: u64,
    /// STATUS refused: from another source than the receiver's, from a receiver the
    /// sender does not know, or past `max_receivers`.
    pub status_refused: u64,
    /// NACKs refused for the same reasons.
    pub nacks_refused: u64,
}

struct Buffered {
    bytes: Vec<u8>,
    repaired_at: Option<Instant>,
    repair_queued: bool,
}

#[derive(Debug, Clone, Copy)]
struct ReceiverState {
    position: u64,
    window: u32,
    last_heard: Instant,
}

pub struct NackMulticastSender {
    cfg: SenderConfig,
    /// Sequences `low_seq..next_seq`, sent or still to send.
    buffer: VecDeque<Buffered>,
    low_seq: u64,
    next_seq: u64,
    /// Every sequence below this went out at least once.
    sent_upto: u64,
    next_msg_seq: u64,
    repairs: VecDeque<u64>,
    receivers: BTreeMap<u32, ReceiverState>,
    /// Each receiver id's address, learnt from its first STATUS when the configuration
    /// named none (at most `max_receivers`; kept when the receiver times out, so that
    /// nobody else can take its name).
    bound: BTreeMap<u32, Peer>,
    /// Receivers ever heard: `expected_receivers` gates the start only, so a receiver
    /// that later times out does not stall the stream again.
    joined: usize,
    last_tx: Option<Instant>,
    heartbeat_now: bool,
    events: VecDeque<SenderEvent>,
    counters: SenderCounters,
}

impl NackMulticastSender {
    pub fn new(cfg: SenderConfig) -> Self {
        assert!(
            cfg.max_payload > 0 && cfg.window > 0,
            "max_payload and window must be positive"
        );
        NackMulticastSender {
            buffer: VecDeque::with_capacity(cfg.window.min(1 << 16)),
            cfg,
            low_seq: 0,
            next_seq: 0,
            sent_upto: 0,
            next_msg_seq: 0,
            repairs: VecDeque::new(),
            receivers: BTreeMap::new(),
            bound: BTreeMap::new(),
            joined: 0,
            last_tx: None,
            heartbeat_now: false,
            events: VecDeque::new(),
            counters: SenderCounters::default(),
        }
    }

    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }
    pub fn counters(&self) -> &SenderCounters {
        &self.counters
    }
    /// The next sequence number this stream will use.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
    /// The oldest sequence still repairable.
    pub fn low_seq(&self) -> u64 {
        self.low_seq
    }
    /// Live receivers and their consumed positions.
    pub fn receivers(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.receivers.iter().map(|(&id, r)| (id, r.position))
    }
    /// True once every queued packet has been sent and every live receiver (at least
    /// `expected_receivers` of them) has consumed all of it.
    pub fn all_delivered(&self) -> bool {
        self.sent_upto == self.next_seq
            && self.joined >= self.cfg.expected_receivers
            && self.receivers.values().all(|r| r.position >= self.next_seq)
    }
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .buffer
                .iter()
                .map(|b| b.bytes.capacity() + std::mem::size_of::<Buffered>())
                .sum::<usize>()
            + self.repairs.len() * 8
            + self.receivers.len() * (std::mem::size_of::<ReceiverState>() + 16)
            + self.bound.len() * (std::mem::size_of::<Peer>() + 16)
    }

    /// Free packets in the retransmission buffer.
    pub fn free_window(&self) -> usize {
        self.cfg.window - self.buffer.len()
    }

    /// Queues one message; returns its message sequence number.
    /// (`_now` keeps the shape every rocast state machine's inputs share; queueing
    /// itself needs no time.)
    pub fn send(&mut self, _now: Instant, msg: &[u8]) -> Result<u64, SendError> {
        let packets = msg.len().div_ceil(self.cfg.max_payload).max(1);
        if packets > self.cfg.window || msg.len() > u32::MAX as usize {
            return Err(SendError::TooLarge {
                len: msg.len(),
                packets,
                window: self.cfg.window,
            });
        }
        if packets > self.free_window() {
            // Under Max/Tagged the window slides past receivers that are not followed.
            self.release();
            if packets > self.free_window() && self.cfg.flow_control != FlowControl::Min {
                self.evict(packets - self.free_window());
            }
            if packets > self.free_window() {
                return Err(SendError::WindowFull {
                    need: packets,
                    free: self.free_window(),
                });
            }
        }
        let msg_seq = self.next_msg_seq;
        self.next_msg_seq += 1;
        for i in 0..packets {
            let off = i * self.cfg.max_payload;
            let end = (off + self.cfg.max_payload).min(msg.len());
            let mut flags = 0;
            if i == 0 {
                flags |= FLAG_FIRST;
            }
            if i == packets - 1 {
                flags |= FLAG_LAST;
            }
            let bytes = Packet {
                session: self.cfg.session,
                repr: PacketRepr::Data(DataRepr {
                    seq: self.next_seq,
                    msg_seq,
                    msg_len: msg.len() as u32,
                    frag_offset: off as u32,
                    flags,
                    payload: &msg[off..end],
                }),
            }
            .to_vec();
            let mut bytes = bytes;
            if let Some(k) = &self.cfg.group_key {
                k.seal(&mut bytes);
            }
            self.buffer.push_back(Buffered {
                bytes,
                repaired_at: None,
                repair_queued: false,
            });
            self.next_seq += 1;
        }
        self.counters.messages += 1;
        Ok(msg_seq)
    }

    /// The message the sender starts next on the wire: the first unsent packet's when
    /// that packet begins it, one past it when its message already began, and every
    /// queued message when everything went out. (Evictions never pass `sent_upto`, so
    /// the first unsent packet is buffered.)
    pub(super) fn next_msg_on_wire(&self) -> u64 {
        if self.sent_upto >= self.next_seq {
            return self.next_msg_seq;
        }
        let b = &self.buffer[(self.sent_upto - self.low_seq) as usize].bytes;
        match Packet::parse(b) {
            Ok(Packet {
                repr: PacketRepr::Data(d),
                ..
            }) => d.msg_seq + u64::from(!d.is_first()),
            _ => self.next_msg_seq,
        }
    }

    /// The sequence below which the flow-control policy lets the sender transmit.
    fn flow_limit(&self) -> u64 {
        let followed = self.followed_position();
        let window = self
            .receivers
            .values()
            .map(|r| r.window)
            .min()
            .unwrap_or(self.cfg.initial_receiver_window);
        followed.saturating_add(window.max(1) as u64)
    }

    /// The position of the receiver(s) the policy follows.
    fn followed_position(&self) -> u64 {
        if self.joined < self.cfg.expected_receivers {
            // Some expected receivers have not reported: they are at the start.
            return match self.cfg.flow_control {
                FlowControl::Max if !self.receivers.is_empty() => self.max_position(),
                _ => self.low_seq.min(
                    self.receivers
                        .values()
                        .map(|r| r.position)
                        .min()
                        .unwrap_or(0),
                ),
            };
        }
        match &self.cfg.flow_control {
            FlowControl::Min => self
                .receivers
                .values()
                .map(|r| r.position)
                .min()
                .unwrap_or(self.sent_upto),
            FlowControl::Max => self.max_position(),
            FlowControl::Tagged(ids) => self
                .receivers
                .iter()
                .filter(|(id, _)| ids.contains(id))
                .map(|(_, r)| r.position)
                .min()
                .unwrap_or(self.sent_upto),
        }
    }

    fn max_position(&self) -> u64 {
        self.receivers
            .values()
            .map(|r| r.position)
            .max()
            .unwrap_or(self.sent_upto)
    }

    /// Drops buffered packets every live receiver has consumed, whatever the policy:
    /// under `Max`/`Tagged` a slower receiver can still be repaired until the packet is
    /// evicted for room ([`evict`](Self::evict)). Nothing is released before the
    /// expected receivers have all reported.
    fn release(&mut self) {
        if self.joined < self.cfg.expected_receivers {
            return;
        }
        let upto = self
            .receivers
            .values()
            .map(|r| r.position)
            .min()
            .unwrap_or(self.sent_upto);
        self.drop_oldest(upto.min(self.sent_upto).saturating_sub(self.low_seq));
    }

    /// Makes room under `Max`/`Tagged`: drops the oldest packets the followed receivers
    /// have consumed, even though slower receivers have not.
    fn evict(&mut self, want: usize) {
        let followed = self.followed_position().min(self.sent_upto);
        let n = (want as u64).min(followed.saturating_sub(self.low_seq));
        self.drop_oldest(n);
        self.counters.evicted_unconsumed += n;
        if n > 0 {
            // Receivers behind the new low edge learn it now, not at the next heartbeat.
            self.heartbeat_now = true;
        }
    }

    /// Moves the low edge up by `n`, freeing those packets.
    fn drop_oldest(&mut self, n: u64) {
        self.buffer.drain(..n as usize);
        self.low_seq += n;
    }

    /// Feeds one NACK or STATUS addressed to this stream, its source unknown (no
    /// source checks; see [`handle_packet_from`](Self::handle_packet_from)).
    pub fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        self.handle_packet_from(now, None, bytes)
    }

    /// Whether receiver `receiver`'s feedback may come from `from`: its configured
    /// address, else the address it was first heard from (bound now if it is new and
    /// `bind`). `None` (a driver that cannot tell) passes.
    fn source_ok(&mut self, receiver: u32, from: Option<Peer>, bind: bool) -> bool {
        if !self.cfg.receiver_addresses.is_empty() {
            return match self.cfg.receiver_addresses.get(&receiver) {
                Some(a) => from.is_none_or(|f| f == *a),
                None => false,
            };
        }
        let Some(from) = from else {
            return true;
        };
        match self.bound.get(&receiver) {
            Some(a) => *a == from,
            None if !bind => true,
            None if self.bound.len() >= self.cfg.max_receivers => false,
            None => {
                self.bound.insert(receiver, from);
                true
            }
        }
    }

    /// Feeds one NACK or STATUS that arrived from `from` (the UD source address and
    /// QPN). Packets of other streams, unsealed or wrongly sealed ones (with a group
    /// key) and feedback from anyone but the receiver it names are counted and ignored.
    pub fn handle_packet_from(&mut self, now: Instant, from: Option<Peer>, bytes: &[u8]) {
        let Ok(p) = Packet::parse(bytes) else {
            self.counters.malformed += 1;
            return;
        };
        if let Some(k) = &self.cfg.group_key {
            if !k.verify(bytes) {
                self.counters.auth_failures += 1;
                return;
            }
        }
        if p.session != self.cfg.session {
            self.counters.other_stream += 1;
            return;
        }
        match p.repr {
            PacketRepr::Nack {
                receiver,
                from_seq,
                count,
            } => {
                if !self.source_ok(receiver, from, false) {
                    self.counters.nacks_refused += 1;
                    return;
                }
                self.on_nack(now, from_seq, count)
            }
            PacketRepr::Status {
                receiver,
                position,
                window,
            } => {
                if !self.source_ok(receiver, from, true)
                    || (!self.receivers.contains_key(&receiver)
                        && self.receivers.len() >= self.cfg.max_receivers)
                {
                    self.counters.status_refused += 1;
                    return;
                }
                self.counters.status_in += 1;
                // Nobody can have consumed what was never sent.
                let position = position.min(self.sent_upto);
                match self.receivers.get_mut(&receiver) {
                    Some(r) => {
                        r.position = r.position.max(position);
                        r.window = window;
                        r.last_heard = now;
                    }
                    None => {
                        self.receivers.insert(
                            receiver,
                            ReceiverState {
                                position,
                                window,
                                last_heard: now,
                            },
                        );
                        self.joined += 1;
                        self.events.push_back(SenderEvent::ReceiverJoined(receiver));
                    }
                }
                self.release();
            }
            // Our own DATA/heartbeats looped back by the fabric.
            PacketRepr::Data(_) | PacketRepr::Heartbeat { .. } => {}
        }
    }

    fn on_nack(&mut self, now: Instant, from: u64, count: u32) {
        self.counters.nacks_in += 1;
        let end = from + count as u64;
        if end > self.sent_upto {
            self.counters.nacks_bogus += 1;
        }
        if from < self.low_seq {
            self.counters.nacked_unavailable += (self.low_seq.min(end) - from) as u64;
            self.heartbeat_now = true;
        }
        for seq in from.max(self.low_seq)..end.min(self.sent_upto) {
            let b = &mut self.buffer[(seq - self.low_seq) as usize];
            if b.repair_queued {
                self.counters.nacked_queued += 1;
            } else if b
                .repaired_at
                .is_some_and(|t| now < t + self.cfg.repair_linger)
            {
                self.counters.nacked_lingering += 1;
            } else if self.repairs.len() >= self.cfg.max_pending_repairs {
                self.counters.repairs_capped += 1;
            } else {
                b.repair_queued = true;
                self.repairs.push_back(seq);
            }
        }
    }

    /// Expires silent receivers.
    pub fn handle_timeout(&mut self, now: Instant) {
        let timeout = self.cfg.receiver_timeout;
        let dead: Vec<u32> = self
            .receivers
            .iter()
            .filter(|(_, r)| now >= r.last_heard + timeout)
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            self.receivers.remove(&id);
            self.events.push_back(SenderEvent::ReceiverTimedOut(id));
        }
        self.release();
    }

    /// When [`handle_timeout`](Self::handle_timeout) or [`poll_transmit`](Self::poll_transmit)
    /// next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let hb = match self.last_tx {
            Some(t) => t + self.cfg.heartbeat_interval,
            None => Instant::ZERO,
        };
        let expiry = self
            .receivers
            .values()
            .map(|r| r.last_heard + self.cfg.receiver_timeout)
            .min();
        Some(expiry.map_or(hb, |e| e.min(hb)))
    }

    /// The longest packet [`poll_transmit`](Self::poll_transmit) writes: a full DATA
    /// packet (heartbeats are shorter).
    pub fn max_packet_len(&self) -> usize {
        DATA_HEADER_LEN + self.cfg.max_payload + self.tag_len()
    }

    fn tag_len(&self) -> usize {
        if self.cfg.group_key.is_some() {
            AUTH_TAG_LEN
        } else {
            0
        }
    }

    /// Writes the next packet for the group into `buf`: queued repairs first, then new
    /// data within the flow-control limit, then a heartbeat if one is due. `buf` must
    /// hold [`max_packet_len`](Self::max_packet_len) bytes (a shorter one is a driver
    /// bug and panics).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        while let Some(seq) = self.repairs.pop_front() {
            if seq < self.low_seq {
                continue;
            }
            let b = &mut self.buffer[(seq - self.low_seq) as usize];
            b.repair_queued = false;
            b.repaired_at = Some(now);
            let n = b.bytes.len();
            buf[..n].copy_from_slice(&b.bytes);
            mark_repair(&mut buf[..n]);
            self.counters.repair_packets += 1;
            self.last_tx = Some(now);
            return Some(Transmit::one(n));
        }
        if self.sent_upto < self.next_seq && self.sent_upto < self.flow_limit() {
            let bytes = &self.buffer[(self.sent_upto - self.low_seq) as usize].bytes;
            buf[..bytes.len()].copy_from_slice(bytes);
            let n = bytes.len();
            self.sent_upto += 1;
            self.counters.data_packets += 1;
            self.last_tx = Some(now);
            return Some(Transmit::one(n));
        }
        let due = self
            .last_tx
            .is_none_or(|t| now >= t + self.cfg.heartbeat_interval);
        if self.heartbeat_now || due {
            self.heartbeat_now = false;
            self.counters.heartbeats += 1;
            self.last_tx = Some(now);
            let mut hb = Packet {
                session: self.cfg.session,
                repr: PacketRepr::Heartbeat {
                    next_seq: self.sent_upto,
                    low_seq: self.low_seq,
                    next_msg: self.next_msg_on_wire(),
                },
            }
            .to_vec();
            if let Some(k) = &self.cfg.group_key {
                k.seal(&mut hb);
            }
            buf[..hb.len()].copy_from_slice(&hb);
            return Some(Transmit::one(hb.len()));
        }
        None
    }

    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }
}
