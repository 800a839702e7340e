//! The `ud-loss` preset: the loss ratio of UD multicast on the optical
//! broadcast-select fabric, without and with NACK repair.
//!
//! Leong, Li and Liu (APSIPA Trans. 2019, §III) pushed traffic through their 4-node
//! ODBSS test-bed and saw a loss ratio better than 1 in 6.8×10^10: on a passive
//! coupler the only places a frame can be lost are the receivers' buffers (§II-B) and
//! the fibre (bit errors), which is what makes a simple NACK-based L4 multicast over
//! UD practical. This module reproduces that experiment in the simulator.
//!
//! It owns (its `[experiment.ud-loss]` keys are [`UdLossConfig`], in
//! `crate::odbss::ud_loss_config`):
//!
//! - A driver that runs the real protocol objects, [`NackMulticastSender`] and one
//!   [`NackMulticastReceiver`] per receiver (`rocast_core::nack_multicast`), over one
//!   [`BroadcastSelectElement`] (sender on port 0, receivers on ports 1..=R, one group
//!   of all ports): every DATA packet is encoded by the sender and parsed by
//!   `handle_packet` in every receiver it reaches; NACKs are multicast (heard by the
//!   sender and the other receivers), STATUS is unicast to the sender. Nothing is
//!   sampled: every packet of the run goes through the element and the protocol.
//! - The receive path's loss models, on top of the element's own (transmit
//!   serialisation, bounded NIC packet buffer drained at the DMA rate with counted
//!   overruns, bit errors per transmit and receive fibre): a host receive queue of
//!   `rq_depth` posted UD receive buffers per host (a UD frame that finds no posted
//!   buffer is dropped, as on a real RNIC), reposted by a host CPU whose per-packet
//!   service has seeded jitter and rare OS-scheduling stalls (exponential, tens of
//!   µs). Receive-buffer overruns therefore come from the model, not from a coin.
//! - Checks on every run: each receiver delivers every message exactly once and in
//!   order, with its content verified (the first 8 bytes are the message sequence,
//!   the rest a seeded pattern of it); any duplicate, gap, reordering, corruption or
//!   `Unrecoverable` report makes the run an error, as does a delivered ratio ≠ 1 or
//!   a stall (no progress for 1 s of virtual time).
//! - A seeded sweep with an extra injected per-packet drop at every receiver port
//!   (0 to 5 %), mixed message sizes (fragmentation), reporting NACKs per lost
//!   packet, repairs and completion time.
//!
//! Memory: the sender holds at most `window` packets (each ≤ MTU, plus 16 B); each
//! receiver at most `rx_window` out-of-order fragments and one partial message, plus
//! `rq_depth` posted receive buffers of one MTU each (the host ring); the element
//! holds `nic_frames` completion times per port. The report prints the measured peak:
//! 4.7 MiB for the preset (window 4096, 4 receivers with rx window 4096 and 1024-buffer
//! rings of 1 KiB), 22 MiB resident for the whole process.
//!
//! The preset's result (`docs/ud/ud-loss.txt`, seed 1): 10^8 DATA packets of 64 B to 4
//! receivers in about 130 s of wall time (0.8 M packets/s, 3.1 M protocol deliveries/s,
//! one core); 2088 packets lost before repair (2079 receive-queue overruns in 12 bursts
//! after host stalls longer than the ring's 152 µs at line rate, 9 bit errors against
//! 11.9 expected), a loss ratio of 5.2e-6 against the paper's < 1.5e-11; every receiver
//! delivered every message exactly once, in order: delivered ratio 1. The overruns need
//! a receiver window larger than the posted receive buffers: with `rx_window` ≤
//! `rq_depth` (the sender never has more unconsumed packets out than a receiver has
//! buffers) only bit errors remain.

use crate::error::EvalError;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::rc::Rc;

pub use super::ud_loss_config::UdLossConfig;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rocast_core::nack_multicast::{
    Destination, NackMulticastReceiver, NackMulticastSender, ReceiverConfig, ReceiverEvent,
    SenderConfig,
};
use rocast_core::payload::splitmix64;
use rocast_core::time::{Duration, Instant};
use rocast_sim::{uniform, Scenario};

use crate::odbss::broadcast_select::{
    frame_error_prob, BroadcastSelectElement, Dest, ElementConfig, Frame,
};
use crate::report::{parallel, EvalReport};

/// The protocol's DATA header in front of every fragment.
const DATA_HEADER: u32 = rocast_core::nack_multicast::packet::DATA_HEADER_LEN as u32;
const SESSION: u32 = 1;

/// The element a `ud-loss` run uses: sender on port 0, receivers on 1..=R.
fn element(cfg: &UdLossConfig) -> ElementConfig {
    ElementConfig {
        ports: cfg.receivers + 1,
        gbps: cfg.gbps,
        prop: Duration::from_ns(cfg.prop_ns),
        frame_overhead: cfg.frame_overhead,
        tx_frames: cfg.tx_frames,
        rx_frames: cfg.nic_frames,
        host_frame_ns: cfg.dma_ns,
        host_gbps: cfg.dma_gbps,
        ber_tx: cfg.ber,
        ber_rx: cfg.ber,
    }
}

// ---------------------------------------------------------------------------
// Messages: sizes and contents the receivers can verify
// ---------------------------------------------------------------------------

/// Message `m`: `fixed` bytes, or seeded 8..=max; bytes 0..8 are `m`, the rest a
/// pattern of a hash of it.
#[derive(Clone, Copy)]
struct Msgs {
    seed: u64,
    fixed: Option<u32>,
    max: u32,
}

impl Msgs {
    fn fill(&self, m: u64, out: &mut Vec<u8>) {
        let h = splitmix64(self.seed ^ m.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let len = match self.fixed {
            Some(n) => n as usize,
            None => 8 + (h % (self.max as u64 - 7)) as usize,
        };
        out.clear();
        out.resize(len.next_multiple_of(8), 0);
        out[..8].copy_from_slice(&m.to_le_bytes());
        // Byte j is byte j % 8 of h xor j (as u8), written a word at a time.
        let idx = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        for (k, chunk) in out.chunks_exact_mut(8).enumerate().skip(1) {
            let j0 = (k * 8) as u8 as u64 * 0x0101_0101_0101_0101;
            chunk.copy_from_slice(&(h ^ (idx.wrapping_add(j0))).to_le_bytes());
        }
        out.truncate(len);
    }
}

/// The expected bytes of recently delivered messages: the receivers deliver the same
/// message within a few frames of each other, so one fill serves all of them.
struct ExpectedMessages {
    slots: Vec<(u64, Vec<u8>)>,
}

impl ExpectedMessages {
    const SLOTS: usize = 64;
    fn new() -> ExpectedMessages {
        ExpectedMessages {
            slots: (0..Self::SLOTS).map(|_| (u64::MAX, Vec::new())).collect(),
        }
    }
    fn get(&mut self, msgs: &Msgs, m: u64) -> &[u8] {
        let slot = &mut self.slots[m as usize % Self::SLOTS];
        if slot.0 != m {
            msgs.fill(m, &mut slot.1);
            slot.0 = m;
        }
        &slot.1
    }
}

// ---------------------------------------------------------------------------
// The host receive path
// ---------------------------------------------------------------------------

/// One host's UD receive queue: `cap` posted buffers, consumed when the NIC places a
/// frame and reposted when the host CPU has processed it. Service is FIFO, so each
/// frame's completion is known on admission.
struct HostRing {
    cap: usize,
    /// (completion time, the frame): the element's buffer, shared with the other
    /// receivers of the frame (a placed frame is never written again).
    q: VecDeque<(u64, Rc<Vec<u8>>)>,
    /// The completion time of `q`'s front, `u64::MAX` when empty (read several times
    /// per step of the run's loop, so kept beside the queue).
    head: u64,
    last: u64,
    cpu_ps: u64,
    jitter_ps: u64,
    stall_prob: f64,
    stall_mean_ps: f64,
    inject: f64,
    rng: ChaCha8Rng,
    buf_cap: usize,
    overruns: u64,
    /// Overrun bursts: overruns whose previous frame was admitted.
    bursts: u64,
    in_burst: bool,
    injected: u64,
    stalls: u64,
    stall_ps: u64,
    peak: usize,
}

impl HostRing {
    fn new(cfg: &UdLossConfig, stalls: bool, inject: f64, seed: u64) -> HostRing {
        HostRing {
            cap: cfg.rq_depth as usize,
            q: VecDeque::with_capacity(cfg.rq_depth as usize + 4),
            head: u64::MAX,
            last: 0,
            cpu_ps: cfg.cpu_ns * 1000,
            jitter_ps: cfg.cpu_jitter_ns * 1000,
            stall_prob: if stalls { cfg.stall_prob } else { 0.0 },
            stall_mean_ps: cfg.stall_us * 1e6,
            inject,
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf_cap: cfg.mtu as usize,
            overruns: 0,
            bursts: 0,
            in_burst: false,
            injected: 0,
            stalls: 0,
            stall_ps: 0,
            peak: 0,
        }
    }

    /// A frame that reached the NIC at `arrived` and was DMA'd by `ready`.
    #[inline]
    fn offer(&mut self, arrived: u64, ready: u64, frame: &Rc<Vec<u8>>) {
        if self.inject > 0.0 && uniform(&mut self.rng) < self.inject {
            self.injected += 1;
            return;
        }
        // Buffers whose frames the host finished by `arrived` are posted again.
        // Completions are FIFO, so the finished frames are a prefix.
        let done = self.q.partition_point(|e| e.0 <= arrived);
        let used = self.q.len() - done;
        if used >= self.cap {
            self.overruns += 1;
            if !self.in_burst {
                self.bursts += 1;
                self.in_burst = true;
            }
            return;
        }
        self.in_burst = false;
        self.peak = self.peak.max(used + 1);
        let mut service = self.cpu_ps;
        if self.jitter_ps > 0 {
            service += self.rng.next_u64() % (self.jitter_ps + 1);
        }
        if self.stall_prob > 0.0 && uniform(&mut self.rng) < self.stall_prob {
            let s = (-(1.0 - uniform(&mut self.rng)).ln() * self.stall_mean_ps) as u64;
            self.stalls += 1;
            self.stall_ps += s;
            service += s;
        }
        let end = self.last.max(ready) + service;
        self.last = end;
        if self.q.is_empty() {
            self.head = end;
        }
        self.q.push_back((end, Rc::clone(frame)));
    }

    fn front(&self) -> Option<u64> {
        (self.head != u64::MAX).then_some(self.head)
    }

    /// The front frame if its host processing has completed by `now`.
    #[inline]
    fn pop_done(&mut self, now: u64) -> Option<Rc<Vec<u8>>> {
        if self.head > now {
            return None;
        }
        let (_, b) = self.q.pop_front().expect("head is set");
        self.head = self.q.front().map_or(u64::MAX, |e| e.0);
        Some(b)
    }

    /// An upper bound: each queued frame counted as a buffer of its own (it is one
    /// when the element has reused its slot since).
    fn memory(&self) -> usize {
        self.q.len() * (self.buf_cap + 32)
    }
}

/// Frames in the element, by tag: a ring larger than the most frames the element
/// can hold (every port's transmit queue, plus one in flight each).
struct FrameStore {
    mask: u64,
    tags: Vec<u64>,
    /// Shared with the host rings that placed the frame: a slot is written in place
    /// when no ring holds it any more, else it gets a new buffer.
    bytes: Vec<Rc<Vec<u8>>>,
}

impl FrameStore {
    fn new(ports: u32, tx_frames: u32, mtu: u32) -> FrameStore {
        let n = ((ports as u64) * (tx_frames as u64 + 2) * 2).next_power_of_two();
        FrameStore {
            mask: n - 1,
            tags: vec![u64::MAX; n as usize],
            bytes: (0..n)
                .map(|_| Rc::new(Vec::with_capacity(mtu as usize)))
                .collect(),
        }
    }
    fn put(&mut self, tag: u64, b: &[u8]) {
        let i = (tag & self.mask) as usize;
        self.tags[i] = tag;
        match Rc::get_mut(&mut self.bytes[i]) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(b);
            }
            None => self.bytes[i] = Rc::new(b.to_vec()),
        }
    }
    /// Its slots' buffers (those displaced while a ring still holds them are counted
    /// by the rings).
    fn memory(&self) -> usize {
        self.bytes.iter().map(|b| b.capacity() + 8 + 16).sum()
    }
    fn get(&self, tag: u64) -> Option<&Rc<Vec<u8>>> {
        let i = (tag & self.mask) as usize;
        (self.tags[i] == tag).then(|| &self.bytes[i])
    }
}

// ---------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    pub injected_loss: f64,
    pub messages: u64,
    /// DATA packets the sender transmitted first (repairs apart).
    pub data_packets: u64,
    /// Per receiver: original DATA packets that never reached the protocol.
    pub lost: Vec<u64>,
    /// Per receiver, all frame kinds: element NIC-buffer overruns, bit-error drops,
    /// receive-queue overruns, injected drops; stalls of the host.
    pub nic_overruns: Vec<u64>,
    pub bit_errors: Vec<u64>,
    pub rq_overruns: Vec<u64>,
    /// Per receiver: runs of consecutive receive-queue overruns (loss events).
    pub rq_bursts: Vec<u64>,
    pub injected: Vec<u64>,
    pub stalls: Vec<u64>,
    pub stall_us: f64,
    /// Messages delivered exactly once, in order, intact, per receiver.
    pub delivered: Vec<u64>,
    /// NACK rounds (timer expiries that sent) and NACK packets (one range each).
    pub nacks: u64,
    pub nack_ranges: u64,
    pub suppressed: u64,
    pub repairs: u64,
    pub repairs_capped: u64,
    pub heartbeats: u64,
    pub status: u64,
    /// Frames the sender's host lost (NACK/STATUS): overruns and bit errors.
    pub sender_drops: u64,
    pub tx_drops: u64,
    /// Virtual time until every receiver had every message.
    pub sim_time: Duration,
    pub wall_s: f64,
    /// Peak of sender window + receivers' buffers + host rings + element, bytes.
    pub memory_peak: usize,
    /// Per receiver: the most receive-queue buffers in use at once.
    pub rq_peak: Vec<usize>,
}

impl RunStats {
    pub fn lost_total(&self) -> u64 {
        self.lost.iter().sum()
    }
    /// Lost before repair / (packets × receivers).
    pub fn loss_ratio(&self) -> f64 {
        self.lost_total() as f64 / (self.data_packets as f64 * self.lost.len() as f64).max(1.0)
    }
    /// 95 % upper bound on the loss ratio when nothing was lost (rule of three).
    pub fn loss_upper95(&self) -> f64 {
        3.0 / (self.data_packets as f64 * self.lost.len() as f64).max(1.0)
    }
    /// The worst receiver's delivered / sent.
    pub fn delivered_ratio(&self) -> f64 {
        self.delivered
            .iter()
            .map(|&d| d as f64 / self.messages.max(1) as f64)
            .fold(f64::INFINITY, f64::min)
    }
}

/// Runs `messages` messages from port 0 to every receiver through one element and
/// the real protocol objects; fails on any delivery that is not exactly once, in
/// order and intact, and on a stall.
pub fn run(
    cfg: &UdLossConfig,
    messages: u64,
    msgs: MsgSizes,
    inject: f64,
    seed: u64,
) -> Result<RunStats, EvalError> {
    cfg.validate()?;
    let wall = std::time::Instant::now();
    let r = cfg.receivers as usize;
    let ecfg = element(cfg);
    let mut el = BroadcastSelectElement::new(&ecfg, seed).map_err(|e| e.to_string())?;
    let ports: Vec<u32> = (0..=cfg.receivers).collect();
    let group = el.add_group(&ports).map_err(|e| e.to_string())?;
    let max_payload = (cfg.mtu - DATA_HEADER) as usize;
    let msgs = match msgs {
        MsgSizes::Fixed(n) => Msgs {
            seed,
            fixed: Some(n),
            max: n,
        },
        MsgSizes::Mixed(max) => Msgs {
            seed,
            fixed: None,
            max,
        },
    };

    let mut sc = SenderConfig::new(SESSION, max_payload);
    sc.window = cfg.window as usize;
    sc.expected_receivers = r;
    sc.heartbeat_interval = Duration::from_us(cfg.heartbeat_us);
    sc.repair_linger = Duration::from_us(cfg.repair_linger_us);
    sc.initial_receiver_window = cfg.rx_window;
    let mut sender = NackMulticastSender::new(sc);
    let mut rx: Vec<NackMulticastReceiver> = (0..r)
        .map(|i| {
            let mut c =
                ReceiverConfig::new(i as u32 + 1, r, splitmix64(seed ^ (0x5eed_0000 + i as u64)));
            c.window = cfg.rx_window;
            c.nack_max_backoff = Duration::from_us(cfg.nack_backoff_us);
            c.nack_holdoff = Duration::from_us(cfg.nack_holdoff_us);
            c.status_interval = Duration::from_us(cfg.status_us);
            NackMulticastReceiver::new(c)
        })
        .collect();
    // Ring 0 is the sender's host, 1..=r the receivers'.
    let mut rings: Vec<HostRing> = (0..=r)
        .map(|i| {
            HostRing::new(
                cfg,
                i > 0,
                if i > 0 { inject } else { 0.0 },
                splitmix64(seed ^ (0xa11c_e000 + i as u64)),
            )
        })
        .collect();
    let mut store = FrameStore::new(ecfg.ports, cfg.tx_frames, cfg.mtu);
    let mut next_tag = 0u64;
    let mut lost_tag = false;

    // The least time from a frame reaching a port to its host finishing it: the
    // element may run this far ahead of the protocol without a completion falling
    // behind the protocol's clock.
    let lookahead = (cfg.dma_ns + cfg.cpu_ns).max(1) * 1000;
    let ser = |len: usize| ecfg.serialisation(len as u32).as_ps();

    let mut now = 0u64;
    let mut wire_free = 0u64;
    let mut sender_try = true;
    // The buffers the sender and the receivers write their packets into.
    let mut packet = vec![0u8; sender.max_packet_len()];
    let mut feedback = vec![0u8; rx.first().map_or(0, |x| x.max_packet_len())];
    let mut next_msg = 0u64;
    let mut pending: Vec<u8> = Vec::with_capacity(msgs.max as usize);
    let mut have_pending = false;
    let mut expect: Vec<u64> = vec![0; r];
    let mut expected = ExpectedMessages::new();
    let mut last_progress = 0u64;
    let mut memory_peak = 0usize;
    let mut iter = 0u64;
    let stall_limit = 1_000_000_000_000u64; // 1 s of virtual time without a delivery

    macro_rules! offer {
        ($src:expr, $dest:expr, $bytes:expr) => {{
            let b: &[u8] = $bytes;
            next_tag += 1;
            store.put(next_tag, b);
            el.send(
                Instant(now),
                Frame::new($src, $dest, b.len() as u32, next_tag),
            )
            .map_err(|e| e.to_string())?;
        }};
    }

    // Timer deadlines, refreshed after every call that can move them.
    let mut sender_due = due(sender.poll_timeout());
    let mut rx_due: Vec<u64> = rx.iter().map(|x| due(x.poll_timeout())).collect();
    // A state machine's outputs, timers (and the sender's room for messages) change
    // only when it is handed something, so only those handed something are polled.
    let mut rx_touched: Vec<bool> = vec![false; r];
    let mut sender_changed = true;

    loop {
        iter += 1;
        // Frames whose host processing completes now.
        while let Some(b) = rings[0].pop_done(now) {
            sender.handle_packet(Instant(now), &b);
            sender_try = true;
            sender_changed = true;
            sender_due = due(sender.poll_timeout());
        }
        for i in 0..r {
            let ring = &mut rings[i + 1];
            while let Some(b) = ring.pop_done(now) {
                rx[i].handle_packet(Instant(now), &b);
                rx_touched[i] = true;
            }
        }
        // Timers.
        if sender_due <= now {
            sender.handle_timeout(Instant(now));
            sender_try = true;
            sender_changed = true;
            sender_due = due(sender.poll_timeout());
        }
        for (i, x) in rx.iter_mut().enumerate() {
            if rx_touched[i] {
                rx_due[i] = due(x.poll_timeout());
            }
            if rx_due[i] <= now {
                x.handle_timeout(Instant(now));
                rx_due[i] = due(x.poll_timeout());
                rx_touched[i] = true;
            }
        }
        // The application fills the sender's window.
        while sender_changed && next_msg < messages {
            if !have_pending {
                msgs.fill(next_msg, &mut pending);
                have_pending = true;
            }
            if sender.send(Instant(now), &pending).is_err() {
                sender_changed = false;
                break;
            }
            have_pending = false;
            next_msg += 1;
            sender_try = true;
        }
        // The sender's wavelength: one packet at a time at the line rate.
        if sender_try && wire_free <= now {
            match sender.poll_transmit(Instant(now), &mut packet) {
                Some(t) => {
                    wire_free = now + ser(t.len);
                    offer!(0, Dest::Group(group), &packet[..t.len]);
                    sender_due = due(sender.poll_timeout());
                    sender_changed = true;
                }
                None => sender_try = false,
            }
        }
        // Receivers' NACKs and STATUS, and their deliveries.
        for i in 0..r {
            if !std::mem::take(&mut rx_touched[i]) {
                continue;
            }
            while let Some(t) = rx[i].poll_transmit(Instant(now), &mut feedback) {
                let dest = match t.dest {
                    Destination::Group => Dest::Group(group),
                    Destination::Sender => Dest::Unicast(0),
                };
                offer!(i as u32 + 1, dest, &feedback[..t.len]);
            }
            while let Some(e) = rx[i].poll_event() {
                match e {
                    ReceiverEvent::Message {
                        session,
                        msg_seq,
                        data,
                    } => {
                        if session != SESSION || msg_seq != expect[i] {
                            return Err(EvalError::Setting(format!(
                                "receiver {} delivered message {msg_seq} of session {session}, expected {} (seed {seed}, injected loss {inject}): duplicate or out of order",
                                i + 1,
                                expect[i]
                            )));
                        }
                        if data != expected.get(&msgs, msg_seq) {
                            return Err(EvalError::Setting(format!(
                                "receiver {} message {msg_seq}: content differs (seed {seed})",
                                i + 1
                            )));
                        }
                        expect[i] += 1;
                        last_progress = now;
                        rx[i].recycle(data);
                    }
                    ReceiverEvent::Unrecoverable { messages: m, .. } => {
                        return Err(EvalError::Setting(format!(
                            "receiver {} lost messages {m:?} for good at {} (seed {seed}, injected loss {inject})",
                            i + 1,
                            Instant(now)
                        )));
                    }
                }
            }
        }
        if lost_tag {
            return Err(EvalError::Setting(
                "internal: a frame's bytes were overwritten while in the element".into(),
            ));
        }
        if next_msg == messages && expect.iter().all(|&e| e == messages) {
            break;
        }
        if now - last_progress > stall_limit {
            return Err(EvalError::Setting(format!(
                "stalled: no delivery for 1 s of virtual time at {} (seed {seed}, injected loss {inject}); delivered {:?} of {messages}; sender next_seq {} low_seq {}",
                Instant(now),
                expect,
                sender.next_seq(),
                sender.low_seq()
            )));
        }
        if iter & 0xf_ffff == 0 {
            let m = sender.memory_bytes()
                + rx.iter().map(|x| x.memory_bytes()).sum::<usize>()
                + rings.iter().map(|g| g.memory()).sum::<usize>()
                + store.memory()
                + el.memory_bytes();
            memory_peak = memory_peak.max(m);
        }

        // The next thing to happen.
        let mut next = now + lookahead;
        let mut at = |t: u64| {
            let t = if t <= now { now + 1 } else { t };
            next = next.min(t);
        };
        for g in &rings {
            if let Some(t) = g.front() {
                at(t);
            }
        }
        if sender_due > now && sender_due != u64::MAX {
            at(sender_due);
        }
        for &t in &rx_due {
            if t != u64::MAX {
                at(t);
            }
        }
        if sender_try {
            at(wire_free);
        }
        el.run_until(Instant(next), |d| {
            let Some(b) = store.get(d.frame.tag) else {
                lost_tag = true;
                return;
            };
            rings[d.port as usize].offer(d.arrived.0, d.delivered.0, b);
        });
        now = next;
    }

    let s = sender.counters();
    let mut st = RunStats {
        injected_loss: inject,
        messages,
        data_packets: s.data_packets,
        repairs: s.repair_packets,
        repairs_capped: s.repairs_capped,
        heartbeats: s.heartbeats,
        sim_time: Duration(now),
        delivered: expect.clone(),
        ..RunStats::default()
    };
    for (i, x) in rx.iter().enumerate() {
        let c = x.counters();
        st.lost
            .push(s.data_packets - (c.data_packets - c.repair_packets));
        st.nacks += c.nacks_sent;
        st.nack_ranges += c.nack_ranges_sent;
        st.suppressed += c.nacks_suppressed;
        st.status += c.status_sent;
        let pc = el.counters(i as u32 + 1).expect("port");
        st.nic_overruns.push(pc.overrun_drops);
        st.bit_errors.push(pc.bit_error_drops);
        let g = &rings[i + 1];
        st.rq_overruns.push(g.overruns);
        st.rq_bursts.push(g.bursts);
        st.injected.push(g.injected);
        st.stalls.push(g.stalls);
        st.stall_us += g.stall_ps as f64 / 1e6;
        st.rq_peak.push(g.peak);
    }
    let p0 = el.counters(0).expect("port 0");
    st.sender_drops = p0.overrun_drops + p0.bit_error_drops + rings[0].overruns;
    st.tx_drops = el.totals().tx_drops;
    st.memory_peak = memory_peak.max(
        sender.memory_bytes()
            + rx.iter().map(|x| x.memory_bytes()).sum::<usize>()
            + rings.iter().map(|g| g.memory()).sum::<usize>()
            + el.memory_bytes(),
    );
    st.wall_s = wall.elapsed().as_secs_f64();
    if st.delivered.iter().any(|&d| d != messages) {
        return Err(EvalError::Setting(format!(
            "delivered ratio {} is not 1: {:?} of {messages}",
            st.delivered_ratio(),
            st.delivered
        )));
    }
    Ok(st)
}

/// Message sizes of a run.
#[derive(Debug, Clone, Copy)]
pub enum MsgSizes {
    Fixed(u32),
    /// Seeded, 8 to this many bytes (fragmented above the MTU).
    Mixed(u32),
}

// ---------------------------------------------------------------------------
// The preset
// ---------------------------------------------------------------------------

/// A state machine's next timer in ps, or never.
fn due(t: Option<Instant>) -> u64 {
    t.map_or(u64::MAX, |t| t.0)
}

fn sum(v: &[u64]) -> u64 {
    v.iter().sum()
}

fn csv_row(csv: &mut String, kind: &str, s: &RunStats) {
    let _ = writeln!(
        csv,
        "{kind},{},{},{},{},{},{},{},{},{},{},{},{:.3e},{:.3e},{},{},{},{},{},{},{:.6},{:.3},{:.3}",
        s.injected_loss,
        s.lost.len(),
        s.messages,
        s.data_packets,
        s.lost_total(),
        sum(&s.nic_overruns),
        sum(&s.rq_overruns),
        sum(&s.rq_bursts),
        sum(&s.bit_errors),
        sum(&s.injected),
        sum(&s.stalls),
        s.loss_ratio(),
        s.loss_upper95(),
        s.nacks,
        s.nack_ranges,
        s.suppressed,
        s.repairs,
        s.heartbeats,
        s.status,
        s.delivered_ratio(),
        s.sim_time.as_secs_f64() * 1e3,
        s.wall_s
    );
}

/// `ud-loss`: the main run (loss ratio without repair, delivered ratio with repair)
/// and the injected-loss sweep.
pub fn ud_loss(sc: &Scenario, c: &UdLossConfig) -> Result<EvalReport, EvalError> {
    c.validate()?;
    let el = element(c);
    let wire = c.msg_bytes + DATA_HEADER + c.frame_overhead;
    // Expected bit-error frame drops: a transmit-fibre error loses the frame at every
    // receiver, a receive-fibre error at one.
    let exp_ber =
        c.packets as f64 * c.receivers as f64 * 2.0 * frame_error_prob(c.ber, wire as u64);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# ud-loss: loss ratio of UD multicast on the broadcast-select fabric, without and with NACK repair\n\
         paper (Leong, Li, Liu 2019, §III): loss ratio better than 1 in 6.8e10 on the 4-node ODBSS test-bed.\n\
         model: 1 sender + {} receivers on one {}-port element, {} Gb/s, prop {} ns, {} B wire overhead;\n\
         NIC buffer {} frames drained at {} ns + {} Gb/s (DMA); receive queue {} posted buffers, host CPU {} ns\n\
         + U[0, {}] ns per packet, stalls p = {:e}/packet of exp(mean {} us); BER {:e} per bit on every fibre\n\
         (expected bit-error drops of DATA at {} B on the wire, all receivers: {:.2}); protocol: MTU {}, window {} / rx window {},\n\
         heartbeat {} us, NACK back-off {} us, hold-off {} us, STATUS {} us, repair linger {} us.",
        c.receivers,
        el.ports,
        c.gbps,
        c.prop_ns,
        c.frame_overhead,
        c.nic_frames,
        c.dma_ns,
        c.dma_gbps,
        c.rq_depth,
        c.cpu_ns,
        c.cpu_jitter_ns,
        c.stall_prob,
        c.stall_us,
        c.ber,
        wire,
        exp_ber,
        c.mtu,
        c.window,
        c.rx_window,
        c.heartbeat_us,
        c.nack_backoff_us,
        c.nack_holdoff_us,
        c.status_us,
        c.repair_linger_us
    );
    if c.rx_window as u64 > c.rq_depth as u64 {
        // The receiver advertises more than its posted buffers hold: the sender may put
        // more unconsumed packets in flight than a stalled host can absorb.
        let _ = writeln!(
            text,
            "note: rx window {} > {} posted receive buffers: a host stall longer than the ring's fill time
             overruns it (set rx_window <= rq_depth and only bit errors remain).",
            c.rx_window, c.rq_depth
        );
    }
    let mut csv = String::from(
        "run,injected_loss,receivers,messages,data_packets,lost,nic_overruns,rq_overruns,rq_bursts,bit_errors,injected,stalls,loss_ratio,loss_upper95,nack_rounds,nack_packets,suppressed,repairs,heartbeats,status,delivered_ratio,sim_ms,wall_s\n",
    );

    // The main run.
    let m = run(c, c.packets, MsgSizes::Fixed(c.msg_bytes), 0.0, sc.seed)?;
    csv_row(&mut csv, "main", &m);
    let _ = writeln!(
        text,
        "\n## main run: {} messages of {} B (one DATA packet each) to {} receivers, every packet through the protocol\n\
         wall time {:.1} s = {:.2} M packets/s ({:.2} M receiver deliveries/s); virtual time {:.3} s\n\
         {:>4} {:>10} {:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>9} {:>10} {:>9}",
        m.messages,
        c.msg_bytes,
        c.receivers,
        m.wall_s,
        m.data_packets as f64 / m.wall_s.max(1e-9) / 1e6,
        (m.data_packets * c.receivers as u64) as f64 / m.wall_s.max(1e-9) / 1e6,
        m.sim_time.as_secs_f64(),
        "rx",
        "lost",
        "rq-ovrun",
        "bursts",
        "nic-ovrun",
        "bit-err",
        "stalls",
        "rq-peak",
        "delivered",
        "ratio",
        "in-order"
    );
    for i in 0..m.lost.len() {
        let _ = writeln!(
            text,
            "{:>4} {:>10} {:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>9} {:>10.6} {:>9}",
            i + 1,
            m.lost[i],
            m.rq_overruns[i],
            m.rq_bursts[i],
            m.nic_overruns[i],
            m.bit_errors[i],
            m.stalls[i],
            m.rq_peak[i],
            m.delivered[i],
            m.delivered[i] as f64 / m.messages as f64,
            "yes"
        );
    }
    let lost = m.lost_total();
    let _ = writeln!(
        text,
        "(lost = original DATA packets that never reached the receiver's protocol; the drop columns count every\n\
         frame kind, DATA, heartbeats, NACKs and STATUS; bursts = runs of consecutive receive-queue overruns:\n\
         losses come in bursts, so the ratio's binomial confidence interval does not apply when it is non-zero)\n\
         loss ratio without repair: {} / ({} x {}) = {:.3e}{}\n\
         paper: < 1 / 6.8e10 = {:.2e}\n\
         delivered ratio with repair: {} (every receiver: {} of {} messages, exactly once, in order, content verified)\n\
         NACK rounds {} ({} NACK packets, one range each; {} rounds suppressed by heard NACKs), repairs {} ({} refused by the repair cap),\n\
         heartbeats {}, STATUS {}, NACK packets per lost packet {:.3}, repairs per lost packet {:.3}\n\
         host stalls {} ({:.1} us in all); sender-side drops {}; transmit-queue drops {}\n\
         memory peak: {:.2} MiB (sender window {} x <= {} B, {} receivers' windows and {} x {} B receive rings, the element and its frame store)",
        lost,
        m.data_packets,
        c.receivers,
        m.loss_ratio(),
        if lost == 0 { format!(" (95% upper bound, rule of three: {:.2e})", m.loss_upper95()) } else { String::new() },
        1.0 / 6.8e10,
        m.delivered_ratio(),
        m.messages,
        m.messages,
        m.nacks,
        m.nack_ranges,
        m.suppressed,
        m.repairs,
        m.repairs_capped,
        m.heartbeats,
        m.status,
        m.nack_ranges as f64 / lost.max(1) as f64,
        m.repairs as f64 / lost.max(1) as f64,
        sum(&m.stalls),
        m.stall_us,
        m.sender_drops,
        m.tx_drops,
        m.memory_peak as f64 / (1 << 20) as f64,
        c.window,
        c.mtu,
        c.receivers,
        c.rq_depth,
        c.mtu
    );

    // The sweep.
    if !c.sweep.is_empty() && c.sweep_messages > 0 {
        let jobs: Vec<(usize, f64)> = c.sweep.iter().copied().enumerate().collect();
        let pts = parallel(sc.multicast.threads, &jobs, |&(k, p)| {
            run(
                c,
                c.sweep_messages,
                MsgSizes::Mixed(c.sweep_max_bytes),
                p,
                sc.seed ^ splitmix64(k as u64 + 1),
            )
        })?;
        let _ = writeln!(
            text,
            "\n## sweep: injected per-packet drop at every receiver port (on top of the model), {} messages of 8-{} B\n\
             {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8} {:>7} {:>8} {:>11} {:>9} {:>9}",
            c.sweep_messages,
            c.sweep_max_bytes,
            "inject",
            "packets",
            "lost",
            "injected",
            "nack-pkt",
            "nack/lost",
            "suppr",
            "repairs",
            "rep/lost",
            "complete_ms",
            "delivered",
            "in-order"
        );
        for s in &pts {
            csv_row(&mut csv, "sweep", s);
            let lost = s.lost_total();
            let _ = writeln!(
                text,
                "{:>7} {:>9} {:>8} {:>8} {:>8} {:>9.3} {:>8} {:>7} {:>8.3} {:>11.3} {:>9.6} {:>9}",
                format!("{}%", s.injected_loss * 100.0),
                s.data_packets,
                lost,
                sum(&s.injected),
                s.nack_ranges,
                s.nack_ranges as f64 / lost.max(1) as f64,
                s.suppressed,
                s.repairs,
                s.repairs as f64 / lost.max(1) as f64,
                s.sim_time.as_secs_f64() * 1e3,
                s.delivered_ratio(),
                "yes"
            );
        }
    }
    Ok(EvalReport {
        text,
        files: vec![("ud-loss.csv".into(), csv)],
        capture: Vec::new(),
        verdicts: Vec::new(),
    })
}
