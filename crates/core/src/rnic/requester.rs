//! The requester half of an RC QP: turns send work requests into PSN-numbered packets
//! and recovers losses (IBTA vol. 1 §9.7.1–§9.7.5.2; selective repeat after IRN §3).
//!
//! PSNs are assigned when a request is posted, so the packet for any PSN in flight can
//! be rebuilt from the send queue: `[una, snd_max)` is in flight, `snd_nxt` is the next
//! PSN to put on the wire (behind `snd_max` while go-back-N resends), and
//! `next_assign` is where the next posted request will start.

use super::{
    Event, QpConfig, QpStats, RateController, Retransmission, SendOp, SendRequest, WcError,
    SACK_LEN,
};
use crate::time::{Duration, Instant};
use crate::wire::{AckSyndrome, AethRepr, NakCode, Opcode, Psn};
use std::collections::VecDeque;

#[derive(Debug)]
pub(crate) struct SendWqe {
    pub req: SendRequest,
    pub first_psn: Psn,
    pub npkts: u32,
}

/// Selective-repeat state of one in-flight PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PktState {
    Sent,
    Sacked,
    RetxQueued,
    Retransmitted,
}

/// One data packet the requester wants on the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataPacket {
    pub psn: Psn,
    pub opcode: Opcode,
    pub wqe_index: usize,
    pub offset: usize,
    pub len: usize,
    pub ack_req: bool,
    pub retransmission: bool,
}

/// RFC 6298 §2's estimator, in picoseconds: SRTT and RTTVAR with gains 1/8 and 1/4.
#[derive(Debug, Default, Clone, Copy)]
struct RttEstimator {
    srtt_ps: Option<u64>,
    rttvar_ps: u64,
}

impl RttEstimator {
    fn sample(&mut self, r: u64) {
        match self.srtt_ps {
            None => {
                self.srtt_ps = Some(r);
                self.rttvar_ps = r / 2;
            }
            Some(srtt) => {
                self.rttvar_ps = (3 * self.rttvar_ps + srtt.abs_diff(r)) / 4;
                self.srtt_ps = Some((7 * srtt + r) / 8);
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct Requester {
    pub sq: VecDeque<SendWqe>,
    next_assign: Psn,
    pub una: Psn,
    snd_nxt: Psn,
    snd_max: Psn,
    pkts_since_ack_req: u32,
    force_ack_req: bool,
    rto_deadline: Option<Instant>,
    /// With `QpConfig::adaptive_rto`: the round-trip estimate the timeout follows.
    rtt: RttEstimator,
    /// The packet being timed: (PSN, when it was first sent). Only a packet sent
    /// once is timed, and a retransmission cancels the sample (Karn's rule): an ACK
    /// after a resend cannot say which copy it answers.
    rtt_probe: Option<(Psn, Instant)>,
    retries: u8,
    rnr_retries: u8,
    rnr_until: Option<Instant>,
    pkt_state: VecDeque<PktState>,
    retx_queue: VecDeque<Psn>,
    pub failed: bool,
    pub rate: Box<dyn RateController>,
    /// With `QpConfig::slow_restart`: most PSNs past `una` that may be in flight now
    /// (`max_outstanding` until a loss shrinks it).
    window: u32,
}

impl Requester {
    pub fn new(cfg: &QpConfig, rate: Box<dyn RateController>) -> Self {
        Requester {
            sq: VecDeque::new(),
            next_assign: cfg.send_psn,
            una: cfg.send_psn,
            snd_nxt: cfg.send_psn,
            snd_max: cfg.send_psn,
            pkts_since_ack_req: 0,
            force_ack_req: false,
            rto_deadline: None,
            rtt: RttEstimator::default(),
            rtt_probe: None,
            retries: 0,
            rnr_retries: 0,
            rnr_until: None,
            pkt_state: VecDeque::new(),
            retx_queue: VecDeque::new(),
            failed: false,
            rate,
            window: cfg.max_outstanding,
        }
    }

    /// Whether the packet at `snd_nxt` (a go-back-N resend or new data) fits the
    /// slow-restart window.
    fn in_window(&self) -> bool {
        self.snd_nxt.distance_from(self.una) < self.window
    }

    pub fn post(&mut self, cfg: &QpConfig, req: SendRequest) {
        let npkts = (req.data.len().div_ceil(cfg.mtu)).max(1) as u32;
        let first_psn = self.next_assign;
        self.next_assign = first_psn.add(npkts);
        self.sq.push_back(SendWqe {
            req,
            first_psn,
            npkts,
        });
    }

    /// PSNs sent and not yet acknowledged.
    pub fn outstanding(&self) -> u32 {
        self.snd_max.distance_from(self.una)
    }

    /// Where the next posted request will start: verbs' SQ PSN as the application sees it.
    pub fn send_psn(&self) -> Psn {
        self.next_assign
    }

    /// Nothing queued and nothing in flight: the only state in which the send PSN may
    /// be moved without renumbering packets a responder may already hold.
    pub fn is_drained(&self) -> bool {
        self.sq.is_empty() && self.outstanding() == 0 && !self.has_unsent()
    }

    /// Moves every send cursor to `psn` (the caller checked [`is_drained`](Self::is_drained)).
    /// Loss-recovery state belongs to PSNs that are all acknowledged, so it is dropped;
    /// an ACK for the old numbering that arrives later falls outside `[una - 1, snd_max - 1]`
    /// and is counted as stale, never applied.
    pub fn set_send_psn(&mut self, psn: Psn) {
        self.next_assign = psn;
        self.una = psn;
        self.snd_nxt = psn;
        self.snd_max = psn;
        self.pkt_state.clear();
        self.retx_queue.clear();
        self.rto_deadline = None;
        self.rtt_probe = None;
        self.retries = 0;
        self.pkts_since_ack_req = 0;
        self.force_ack_req = false;
    }
    fn has_unsent(&self) -> bool {
        self.snd_nxt != self.next_assign
    }

    /// Whether a data packet could go now if pacing allowed it.
    pub fn wants_to_send(&self, cfg: &QpConfig, now: Instant) -> bool {
        !self.rnr_until.is_some_and(|t| t > now) && self.has_work(cfg)
    }

    /// Something to send once any RNR wait is over.
    pub fn has_work(&self, cfg: &QpConfig) -> bool {
        !self.failed
            && (!self.retx_queue.is_empty()
                || (self.snd_nxt != self.snd_max && self.in_window())
                || (self.has_unsent()
                    && self.outstanding() < cfg.max_outstanding
                    && self.in_window()))
    }

    fn state_mut(&mut self, psn: Psn) -> Option<&mut PktState> {
        let i = psn.distance_from(self.una) as usize;
        self.pkt_state.get_mut(i)
    }

    /// Chooses the next data packet and advances the send state as if it were sent.
    pub fn next_packet(&mut self, cfg: &QpConfig, now: Instant) -> Option<DataPacket> {
        if !self.wants_to_send(cfg, now) {
            return None;
        }
        self.rnr_until = None;
        let (psn, retransmission) = loop {
            if let Some(p) = self.retx_queue.pop_front() {
                if !p.in_window(self.una, self.outstanding()) {
                    continue; // acknowledged meanwhile
                }
                match self.state_mut(p) {
                    Some(s @ PktState::RetxQueued) => *s = PktState::Retransmitted,
                    _ => continue,
                }
                break (p, true);
            }
            if !self.in_window() {
                return None;
            }
            if self.snd_nxt != self.snd_max {
                let p = self.snd_nxt;
                self.snd_nxt = p.next();
                break (p, true);
            }
            if self.has_unsent() && self.outstanding() < cfg.max_outstanding {
                let p = self.snd_nxt;
                self.snd_nxt = p.next();
                self.snd_max = self.snd_nxt;
                if cfg.retransmission == Retransmission::SelectiveRepeat {
                    self.pkt_state.push_back(PktState::Sent);
                }
                break (p, false);
            }
            return None;
        };
        let mut pkt = self.describe(cfg, psn, retransmission);
        // A slow-restart window smaller than `ack_req_every` would otherwise fill with
        // packets no responder acknowledges (it ACKs every `ack_every`, or on request)
        // and open again only at the next timeout: the packet that fills it asks.
        if cfg.slow_restart && !self.in_window() {
            pkt.ack_req = true;
        }
        if retransmission {
            self.rtt_probe = None;
        } else if cfg.adaptive_rto && self.rtt_probe.is_none() {
            self.rtt_probe = Some((psn, now));
        }
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.backoff_rto(cfg));
        }
        if pkt.ack_req {
            self.pkts_since_ack_req = 0;
            self.force_ack_req = false;
        } else {
            self.pkts_since_ack_req += 1;
        }
        Some(pkt)
    }

    fn backoff_rto(&self, cfg: &QpConfig) -> Duration {
        self.rto(cfg).saturating_shl(self.retries.min(16) as u32)
    }

    /// The timeout before back-off: `retransmit_timeout`, or with `adaptive_rto`
    /// SRTT + 4·RTTVAR once a round trip was measured, never below
    /// `retransmit_timeout` (RFC 6298 §2; a RoCE NIC's adaptive retransmission).
    pub fn rto(&self, cfg: &QpConfig) -> Duration {
        match (cfg.adaptive_rto, self.rtt.srtt_ps) {
            (true, Some(srtt)) => {
                let ps = srtt.saturating_add(self.rtt.rttvar_ps.saturating_mul(4));
                Duration::from_ps(ps.max(cfg.retransmit_timeout.as_ps()))
            }
            _ => cfg.retransmit_timeout,
        }
    }

    /// The smoothed round trip measured so far (with `adaptive_rto`).
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt_ps.map(Duration::from_ps)
    }

    /// Which WQE, offset and opcode a PSN in flight stands for.
    fn describe(&self, cfg: &QpConfig, psn: Psn, retransmission: bool) -> DataPacket {
        let base = self.sq.front().expect("PSN in flight has a WQE").first_psn;
        let dist = psn.distance_from(base);
        let wqe_index = self
            .sq
            .partition_point(|w| w.first_psn.distance_from(base) <= dist)
            - 1;
        let w = &self.sq[wqe_index];
        let i = psn.distance_from(w.first_psn);
        let offset = i as usize * cfg.mtu;
        let len = w.req.data.len().saturating_sub(offset).min(cfg.mtu);
        let (first, last) = (i == 0, i + 1 == w.npkts);
        let opcode = match (w.req.op, first, last) {
            (SendOp::Send, true, true) => Opcode::RC_SEND_ONLY,
            (SendOp::SendImm(_), true, true) => Opcode::RC_SEND_ONLY_IMM,
            (SendOp::Send | SendOp::SendImm(_), true, false) => Opcode::RC_SEND_FIRST,
            (SendOp::Send | SendOp::SendImm(_), false, false) => Opcode::RC_SEND_MIDDLE,
            (SendOp::Send, false, true) => Opcode::RC_SEND_LAST,
            (SendOp::SendImm(_), false, true) => Opcode::RC_SEND_LAST_IMM,
            (SendOp::Write { .. }, true, true) => Opcode::RC_WRITE_ONLY,
            (SendOp::WriteImm { .. }, true, true) => Opcode::RC_WRITE_ONLY_IMM,
            (SendOp::Write { .. } | SendOp::WriteImm { .. }, true, false) => Opcode::RC_WRITE_FIRST,
            (SendOp::Write { .. } | SendOp::WriteImm { .. }, false, false) => {
                Opcode::RC_WRITE_MIDDLE
            }
            (SendOp::Write { .. }, false, true) => Opcode::RC_WRITE_LAST,
            (SendOp::WriteImm { .. }, false, true) => Opcode::RC_WRITE_LAST_IMM,
        };
        let ack_req =
            last || self.force_ack_req || self.pkts_since_ack_req + 1 >= cfg.ack_req_every;
        DataPacket {
            psn,
            opcode,
            wqe_index,
            offset,
            len,
            ack_req,
            retransmission,
        }
    }

    /// Everything up to and including `psn` is acknowledged.
    fn acknowledge_through(
        &mut self,
        cfg: &QpConfig,
        now: Instant,
        psn: Psn,
        events: &mut VecDeque<Event>,
        stats: &mut QpStats,
    ) -> bool {
        let newly = psn.next().distance_from(self.una);
        if newly == 0 || newly > self.outstanding() {
            return false;
        }
        let mut bytes = 0u64;
        if let Some((probe, sent)) = self.rtt_probe {
            if probe.distance_from(self.una) < newly {
                self.rtt.sample((now - sent).as_ps());
                self.rtt_probe = None;
            }
        }
        self.una = psn.next();
        for _ in 0..newly.min(self.pkt_state.len() as u32) {
            self.pkt_state.pop_front();
        }
        while let Some(w) = self.sq.front() {
            if self.una.distance_from(w.first_psn) >= w.npkts {
                let w = self.sq.pop_front().unwrap();
                bytes += w.req.data.len() as u64;
                stats.messages_sent += 1;
                events.push_back(Event::SendComplete {
                    wr_id: w.req.wr_id,
                    result: Ok(()),
                });
            } else {
                break;
            }
        }
        if self.snd_nxt.distance_from(self.una) > self.snd_max.distance_from(self.una) {
            self.snd_nxt = self.una; // acknowledged past the go-back-N cursor
        }
        if cfg.slow_restart {
            self.window = self.window.saturating_add(newly).min(cfg.max_outstanding);
        }
        self.retries = 0;
        self.rnr_retries = 0;
        self.rto_deadline = if self.outstanding() > 0 {
            Some(now + self.rto(cfg))
        } else {
            None
        };
        self.rate.on_ack(now, bytes);
        true
    }

    /// An ACKNOWLEDGE (or the AETH of an ATOMIC_ACKNOWLEDGE) for this QP.
    pub fn on_ack(
        &mut self,
        cfg: &QpConfig,
        now: Instant,
        psn: Psn,
        aeth: AethRepr,
        payload: &[u8],
        events: &mut VecDeque<Event>,
        stats: &mut QpStats,
    ) {
        if self.failed {
            return;
        }
        // Acceptable ACK PSNs lie in [una - 1, snd_max - 1]; anything else is stale or bogus.
        let in_range = psn.next().distance_from(self.una) <= self.outstanding();
        if !in_range {
            stats.rx_stale_acks += 1;
            return;
        }
        let sack =
            cfg.retransmission == Retransmission::SelectiveRepeat && payload.len() == SACK_LEN;
        match aeth.syndrome {
            AckSyndrome::Ack { .. } => {
                stats.rx_acks += 1;
                self.acknowledge_through(cfg, now, psn, events, stats);
                if sack {
                    self.apply_sack(psn.next(), payload);
                }
            }
            AckSyndrome::Nak(NakCode::PsnSequenceError) => {
                stats.rx_naks += 1;
                // The NAK's PSN is the responder's expected PSN: everything before it arrived.
                self.acknowledge_through(cfg, now, psn.sub(1), events, stats);
                if sack {
                    self.apply_sack(psn, payload);
                } else {
                    self.go_back_to(psn);
                }
                if cfg.slow_restart {
                    self.window = (self.window / 2).max(1);
                }
                self.rto_deadline = Some(now + self.backoff_rto(cfg));
            }
            AckSyndrome::RnrNak { timer } => {
                stats.rx_naks += 1;
                self.acknowledge_through(cfg, now, psn.sub(1), events, stats);
                self.rnr_retries = self.rnr_retries.saturating_add(1);
                if cfg.rnr_retry_limit != 7 && self.rnr_retries > cfg.rnr_retry_limit {
                    self.fail(WcError::RnrRetryExceeded, events);
                    return;
                }
                let until = now + AckSyndrome::rnr_timer(timer);
                self.rnr_until = Some(until);
                self.go_back_to(psn);
                self.rto_deadline = Some(until + self.backoff_rto(cfg));
            }
            AckSyndrome::Nak(code) => {
                stats.rx_naks += 1;
                self.acknowledge_through(cfg, now, psn.sub(1), events, stats);
                self.fail(WcError::RemoteNak(code), events);
            }
            AckSyndrome::Reserved(_) => stats.drop_malformed += 1,
        }
    }

    fn go_back_to(&mut self, psn: Psn) {
        if psn.in_window(self.una, self.outstanding()) {
            self.snd_nxt = psn;
        }
        self.retx_queue.clear();
        for s in self.pkt_state.iter_mut() {
            if *s != PktState::Sacked {
                *s = PktState::Sent;
            }
        }
    }

    /// Marks what the responder holds and queues the holes below its highest held PSN.
    fn apply_sack(&mut self, expected: Psn, bitmap: &[u8]) {
        let mut highest: Option<u32> = None; // offset from una
        for (i, byte) in bitmap.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    let p = expected.add(1 + (i * 8 + bit) as u32);
                    let off = p.distance_from(self.una);
                    if let Some(s) = self.pkt_state.get_mut(off as usize) {
                        *s = PktState::Sacked;
                        highest = Some(highest.map_or(off, |h| h.max(off)));
                    }
                }
            }
        }
        // The expected PSN itself is missing (that is what the NAK or ACK says).
        let holes_end = highest
            .unwrap_or(0)
            .max(expected.distance_from(self.una) + 1);
        for off in 0..holes_end.min(self.pkt_state.len() as u32) {
            let s = &mut self.pkt_state[off as usize];
            if *s == PktState::Sent {
                *s = PktState::RetxQueued;
                self.retx_queue.push_back(self.una.add(off));
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.rto_deadline
                .filter(|_| self.outstanding() > 0 && !self.failed),
            self.rnr_until,
            self.rate.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn handle_timeout(
        &mut self,
        cfg: &QpConfig,
        now: Instant,
        events: &mut VecDeque<Event>,
        stats: &mut QpStats,
    ) {
        self.rate.handle_timeout(now);
        // An RNR wait that has passed is over, whether or not anything is left to send.
        if self.rnr_until.is_some_and(|t| t <= now) {
            self.rnr_until = None;
        }
        let Some(deadline) = self.rto_deadline else {
            return;
        };
        if deadline > now || self.failed {
            return;
        }
        if self.outstanding() == 0 {
            self.rto_deadline = None;
            return;
        }
        stats.timeouts += 1;
        self.retries += 1;
        self.rtt_probe = None;
        if self.retries > cfg.retry_limit {
            self.fail(WcError::RetryExceeded(cfg.retry_limit), events);
            return;
        }
        match cfg.retransmission {
            Retransmission::GoBackN => self.snd_nxt = self.una,
            Retransmission::SelectiveRepeat => {
                self.retx_queue.clear();
                for off in 0..self.pkt_state.len() {
                    let s = &mut self.pkt_state[off];
                    if *s != PktState::Sacked {
                        *s = PktState::RetxQueued;
                        self.retx_queue.push_back(self.una.add(off as u32));
                    }
                }
            }
        }
        if cfg.slow_restart {
            self.window = 1;
        }
        self.force_ack_req = true;
        self.rto_deadline = Some(now + self.backoff_rto(cfg));
    }

    /// Forgets the timeouts so far and retransmits at the next timer turn (`now`):
    /// see [`RcQueuePair::retry_now`](super::RcQueuePair::retry_now).
    pub fn retry_now(&mut self, now: Instant) {
        if self.failed || self.outstanding() == 0 {
            return;
        }
        self.retries = 0;
        self.rto_deadline = Some(now);
    }

    /// Moves to the error state: the failing request completes with `err`, the rest flush.
    pub fn fail(&mut self, err: WcError, events: &mut VecDeque<Event>) {
        if self.failed {
            return;
        }
        self.failed = true;
        for (i, w) in self.sq.drain(..).enumerate() {
            let result = Err(if i == 0 { err } else { WcError::Flushed });
            events.push_back(Event::SendComplete {
                wr_id: w.req.wr_id,
                result,
            });
        }
        self.retx_queue.clear();
        self.pkt_state.clear();
        self.rto_deadline = None;
        self.rnr_until = None;
        events.push_back(Event::QpError(err));
    }
}
