//! The responder half of an RC QP (IBTA vol. 1 §9.7.5 and §9.7.6): accepts requests in
//! PSN order, places SEND data in posted receive buffers and WRITE data in registered
//! memory, and produces the ACK/NAK stream and CNPs.
//!
//! Rules, each pinned by a script test in `qp.rs`:
//! - in-order acceptance by expected PSN (`epsn`);
//! - ACK after `ack_every` packets, on a message's last packet, or on an ACK request;
//! - one PSN-sequence-error NAK per gap, not per packet (repeated only for a packet
//!   beyond the gap that carries AckReq, in case the first NAK was lost);
//! - duplicates re-acknowledged (first of a run, or when they ask), never delivered twice;
//! - WRITE checked against the registered region, else a remote-access NAK;
//! - SEND with no receive buffer posted gets an RNR NAK, and later packets of that
//!   burst are dropped silently until the NAKed PSN comes again;
//! - ECN-CE on a data packet yields a CNP, at most one per `cnp_interval`.

use super::{
    Event, MemoryRegion, QpConfig, QpStats, Retransmission, WcError, SACK_LEN, SACK_WINDOW,
};
use crate::time::Instant;
use crate::wire::{AckSyndrome, BthRepr, Ecn, ExtHeaders, NakCode, Psn};
use std::collections::VecDeque;

#[derive(Debug)]
pub(crate) struct RecvWqe {
    pub wr_id: u64,
    pub buf: Vec<u8>,
    pub max_len: usize,
}

/// A message being received.
#[derive(Debug)]
enum InProgress {
    Send {
        wqe: RecvWqe,
    },
    Write {
        va: u64,
        rkey: u32,
        dma_len: u32,
        done: u32,
    },
}

/// Feedback waiting to go to the requester: an ACK (syndrome `Ack`) or a NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Feedback {
    pub psn: Psn,
    pub msn: u32,
    pub syndrome: AckSyndrome,
    /// Append the SACK bitmap.
    pub sack: bool,
}

/// A request packet held out of order (selective repeat), with its payload copied.
#[derive(Debug)]
struct HeldPacket {
    bth: BthRepr,
    ext: ExtHeaders,
    payload: Vec<u8>,
}

/// Why an in-order packet was refused.
enum Refusal {
    Nak(NakCode),
    Rnr,
}

#[derive(Debug)]
pub(crate) struct Responder {
    pub epsn: Psn,
    pub msn: u32,
    pub rq: VecDeque<RecvWqe>,
    cur: Option<InProgress>,
    pkts_since_ack: u32,
    nak_sent: bool,
    rnr_nak_sent: bool,
    dup_streak: u32,
    pub feedback: VecDeque<Feedback>,
    last_cnp: Option<Instant>,
    pub cnp_pending: bool,
    pub mrs: Vec<MemoryRegion>,
    held: VecDeque<Option<HeldPacket>>,
    highest_held: usize,
    spare: Vec<Vec<u8>>,
}

impl Responder {
    pub fn new(cfg: &QpConfig) -> Self {
        Responder {
            epsn: cfg.recv_psn,
            msn: 0,
            rq: VecDeque::new(),
            cur: None,
            pkts_since_ack: 0,
            nak_sent: false,
            rnr_nak_sent: false,
            dup_streak: 0,
            feedback: VecDeque::new(),
            last_cnp: None,
            cnp_pending: false,
            mrs: Vec::new(),
            held: VecDeque::new(),
            highest_held: 0,
            spare: Vec::new(),
        }
    }

    fn queue_ack(&mut self, sack: bool) {
        self.pkts_since_ack = 0;
        let fb = Feedback {
            psn: self.epsn.sub(1),
            msn: self.msn,
            syndrome: AckSyndrome::Ack {
                credits: AckSyndrome::CREDITS_INVALID,
            },
            sack,
        };
        // A newer cumulative ACK makes a queued one redundant.
        if let Some(last) = self.feedback.back_mut().filter(|f| f.syndrome.is_ack()) {
            *last = fb;
        } else {
            self.feedback.push_back(fb);
        }
    }
    fn queue_nak(&mut self, syndrome: AckSyndrome, sack: bool) {
        self.pkts_since_ack = 0;
        self.feedback.push_back(Feedback {
            psn: self.epsn,
            msn: self.msn,
            syndrome,
            sack,
        });
    }

    /// Whether PSN `p` (relative to the current state) is held: accepted or buffered.
    pub fn holds(&self, p: Psn) -> bool {
        if p < self.epsn {
            return true;
        }
        let d = p.distance_from(self.epsn) as usize;
        d >= 1 && self.held.get(d - 1).is_some_and(|h| h.is_some())
    }

    /// The SACK bitmap for PSNs `expected + 1 ..= expected + SACK_WINDOW`.
    pub fn sack_bitmap(&self, expected: Psn) -> [u8; SACK_LEN] {
        let mut b = [0u8; SACK_LEN];
        for i in 0..SACK_WINDOW {
            if self.holds(expected.add(1 + i as u32)) {
                b[i / 8] |= 1 << (i % 8);
            }
        }
        b
    }

    /// A request packet (SEND/WRITE/...) addressed to this QP.
    #[allow(clippy::too_many_arguments)]
    pub fn on_request(
        &mut self,
        cfg: &QpConfig,
        now: Instant,
        ecn: Ecn,
        bth: &BthRepr,
        ext: &ExtHeaders,
        payload: &[u8],
        events: &mut VecDeque<Event>,
        stats: &mut QpStats,
    ) {
        stats.rx_data_packets += 1;
        if ecn == Ecn::Ce {
            stats.rx_ecn_ce += 1;
            if self
                .last_cnp
                .is_none_or(|t| now.saturating_since(t) >= cfg.cnp_interval)
            {
                self.last_cnp = Some(now);
                self.cnp_pending = true;
            }
        }
        let sr = cfg.retransmission == Retransmission::SelectiveRepeat;
        let sack = sr && cfg.peer_sack;
        let d = bth.psn.diff(self.epsn);
        if d < 0 {
            stats.rx_duplicates += 1;
            if bth.ack_req || self.dup_streak == 0 {
                self.queue_ack(sack);
            }
            self.dup_streak += 1;
            return;
        }
        if d > 0 {
            stats.rx_out_of_order += 1;
            if self.rnr_nak_sent {
                return; // the requester will come back to the RNR-NAKed PSN
            }
            let d = d as usize;
            let mut new_gap = !self.nak_sent;
            if sr && d <= SACK_WINDOW {
                if self.held.len() < d {
                    self.held.resize_with(d, || None);
                }
                if self.held[d - 1].is_none() {
                    let mut buf = self.spare.pop().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(payload);
                    self.held[d - 1] = Some(HeldPacket {
                        bth: *bth,
                        ext: *ext,
                        payload: buf,
                    });
                    // A hole above the highest held packet is a new gap worth reporting.
                    new_gap |= sack && d > self.highest_held + 1;
                    self.highest_held = self.highest_held.max(d);
                }
            }
            // The gap's one NAK may have been lost: a requester that asks for an ACK
            // from beyond the gap gets the NAK again rather than waiting for its timer.
            new_gap |= bth.ack_req;
            if new_gap {
                self.nak_sent = true;
                stats.tx_naks += 1;
                self.queue_nak(AckSyndrome::Nak(NakCode::PsnSequenceError), sack);
            }
            return;
        }
        // In order.
        match self.accept(cfg, bth, ext, payload, events, stats) {
            Ok(()) => {}
            Err(Refusal::Rnr) => {
                self.rnr_nak_sent = true;
                stats.tx_rnr_naks += 1;
                self.queue_nak(
                    AckSyndrome::RnrNak {
                        timer: cfg.min_rnr_timer,
                    },
                    false,
                );
                return;
            }
            Err(Refusal::Nak(code)) => {
                stats.tx_naks += 1;
                self.queue_nak(AckSyndrome::Nak(code), false);
                return;
            }
        }
        let mut ack = bth.ack_req || bth.opcode.is_last() || self.pkts_since_ack >= cfg.ack_every;
        // Each advance of `epsn` retires the front hold slot: it is the PSN now expected.
        // If that packet was held, accept it too, and so on until the next hole.
        let mut drained = false;
        while let Some(slot) = self.held.pop_front() {
            self.highest_held = self.highest_held.saturating_sub(1);
            let Some(h) = slot else { break };
            drained = true;
            let r = self.accept(cfg, &h.bth, &h.ext, &h.payload, events, stats);
            self.spare.push(h.payload);
            if r.is_err() {
                // Drop what is held; the requester resends from here and meets the NAK then.
                self.held.clear();
                self.highest_held = 0;
                break;
            }
            ack |= h.bth.ack_req || h.bth.opcode.is_last();
        }
        if ack || drained {
            self.queue_ack(sack && !self.held.is_empty());
        }
    }

    /// Applies one in-order request packet; on success `epsn` has advanced.
    fn accept(
        &mut self,
        cfg: &QpConfig,
        bth: &BthRepr,
        ext: &ExtHeaders,
        payload: &[u8],
        events: &mut VecDeque<Event>,
        stats: &mut QpStats,
    ) -> Result<(), Refusal> {
        let op = bth.opcode;
        let invalid = Err(Refusal::Nak(NakCode::InvalidRequest));
        // Only RC SEND and WRITE are served; READ and atomics are answered as invalid.
        if op.transport() != 0 || !(op.is_send() || op.is_write()) || matches!(op.0, 0x16 | 0x17) {
            stats.drop_unexpected_opcode += 1;
            return invalid;
        }
        let sequence_ok = match &self.cur {
            None => op.is_first(),
            Some(InProgress::Send { .. }) => op.is_send() && !op.is_first(),
            Some(InProgress::Write { .. }) => op.is_write() && !op.is_first(),
        };
        if !sequence_ok {
            return invalid;
        }
        let len_ok = if op.is_last() {
            payload.len() <= cfg.mtu && (op.is_first() || !payload.is_empty())
        } else {
            payload.len() == cfg.mtu
        };
        if !len_ok {
            return invalid;
        }
        // Validate everything before changing state, so a refused packet leaves no trace.
        if op.is_first() {
            if op.is_send() {
                let Some(w) = self.rq.front() else {
                    return Err(Refusal::Rnr);
                };
                if payload.len() > w.max_len {
                    let w = self.rq.pop_front().unwrap();
                    events.push_back(Event::RecvError {
                        wr_id: w.wr_id,
                        error: WcError::LocalLength,
                    });
                    return invalid;
                }
            } else {
                let reth = ext.reth.expect("parsed WRITE FIRST/ONLY has a RETH");
                if payload.len() as u64 > reth.dma_len as u64 {
                    return invalid;
                }
                if reth.dma_len > 0
                    && self
                        .find_mr(reth.va, reth.rkey, reth.dma_len as u64)
                        .is_none()
                {
                    return Err(Refusal::Nak(NakCode::RemoteAccessError));
                }
                if op.has_imm() && op.is_last() && self.rq.is_empty() {
                    return Err(Refusal::Rnr);
                }
            }
        } else {
            match &self.cur {
                Some(InProgress::Send { wqe }) => {
                    if wqe.buf.len() + payload.len() > wqe.max_len {
                        let Some(InProgress::Send { wqe }) = self.cur.take() else {
                            unreachable!()
                        };
                        events.push_back(Event::RecvError {
                            wr_id: wqe.wr_id,
                            error: WcError::LocalLength,
                        });
                        return invalid;
                    }
                }
                Some(InProgress::Write { dma_len, done, .. }) => {
                    let total = *done as u64 + payload.len() as u64;
                    if total > *dma_len as u64 || (op.is_last() && total != *dma_len as u64) {
                        return invalid;
                    }
                    if op.has_imm() && self.rq.is_empty() {
                        return Err(Refusal::Rnr);
                    }
                }
                None => unreachable!("sequence checked"),
            }
        }
        if op.is_first() && op.is_last() && op.is_write() {
            let reth = ext.reth.unwrap();
            if reth.dma_len as usize != payload.len() {
                return invalid;
            }
        }

        // Commit.
        if op.is_first() {
            self.cur = Some(if op.is_send() {
                InProgress::Send {
                    wqe: self.rq.pop_front().unwrap(),
                }
            } else {
                let r = ext.reth.unwrap();
                InProgress::Write {
                    va: r.va,
                    rkey: r.rkey,
                    dma_len: r.dma_len,
                    done: 0,
                }
            });
        }
        match self.cur.as_mut().unwrap() {
            InProgress::Send { wqe } => wqe.buf.extend_from_slice(payload),
            InProgress::Write { va, rkey, done, .. } => {
                if !payload.is_empty() {
                    let (at, rk) = (*va + *done as u64, *rkey);
                    *done += payload.len() as u32;
                    let mr = self
                        .mrs
                        .iter_mut()
                        .find(|m| m.rkey == rk)
                        .expect("checked at FIRST");
                    if !mr.null {
                        let off = (at - mr.va) as usize;
                        mr.data[off..off + payload.len()].copy_from_slice(payload);
                    }
                }
            }
        }
        self.epsn = self.epsn.next();
        self.nak_sent = false;
        self.rnr_nak_sent = false;
        self.dup_streak = 0;
        self.pkts_since_ack += 1;
        if op.is_last() {
            self.msn = (self.msn + 1) & 0xff_ffff;
            stats.messages_received += 1;
            let imm = ext.imm;
            match self.cur.take().unwrap() {
                InProgress::Send { wqe } => events.push_back(Event::Recv {
                    wr_id: wqe.wr_id,
                    data: wqe.buf,
                    imm,
                }),
                InProgress::Write { done, .. } => {
                    if let Some(imm) = imm {
                        let w = self.rq.pop_front().expect("checked before commit");
                        events.push_back(Event::RecvWriteImm {
                            wr_id: w.wr_id,
                            len: done as usize,
                            imm,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// A multi-packet message has started arriving and not finished.
    pub fn message_in_progress(&self) -> bool {
        self.cur.is_some()
    }

    /// Makes `psn` the expected PSN (the caller checked
    /// [`message_in_progress`](Self::message_in_progress)). Packets held out of order were
    /// numbered against the old expectation, so they are dropped: they are a cache, and a
    /// requester resends whatever was not acknowledged. Per-gap NAK and RNR state goes too,
    /// because the gap it described is gone. Queued ACK/NAKs stay: they answer packets
    /// that did arrive.
    pub fn set_expected_psn(&mut self, psn: Psn) {
        self.epsn = psn;
        self.nak_sent = false;
        self.rnr_nak_sent = false;
        self.dup_streak = 0;
        self.pkts_since_ack = 0;
        for h in self.held.drain(..).flatten() {
            self.spare.push(h.payload);
        }
        self.highest_held = 0;
    }

    fn find_mr(&self, va: u64, rkey: u32, len: u64) -> Option<&MemoryRegion> {
        self.mrs.iter().find(|m| {
            m.rkey == rkey
                && va >= m.va
                && va.checked_add(len).is_some_and(|end| end <= m.va + m.len)
        })
    }

    pub fn fail(&mut self, events: &mut VecDeque<Event>) {
        if let Some(InProgress::Send { wqe }) = self.cur.take() {
            events.push_back(Event::RecvError {
                wr_id: wqe.wr_id,
                error: WcError::Flushed,
            });
        }
        for w in self.rq.drain(..) {
            events.push_back(Event::RecvError {
                wr_id: w.wr_id,
                error: WcError::Flushed,
            });
        }
        self.feedback.clear();
        self.held.clear();
    }
}
