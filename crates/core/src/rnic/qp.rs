//! [`RcQueuePair`]: one reliable-connection queue pair, requester and responder halves
//! joined, with the handle/poll interface of every rocast state machine.

use super::requester::{DataPacket, Requester, SendWqe};
use super::responder::{Feedback, RecvWqe, Responder};
use super::{
    ConfigError, Event, MemoryRegion, QpConfig, QpStats, RateController, SendOp, SendRequest,
    Unlimited, SACK_LEN,
};
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use crate::wire::{
    AethRepr, BthRepr, Ecn, ExtHeaders, Opcode, Psn, RethRepr, RoceRepr, BTH_LEN, ICRC_LEN,
    IPV4_HEADER_LEN, RETH_LEN, UDP_HEADER_LEN,
};
use std::collections::VecDeque;

/// Why `handle_packet` dropped a packet. Every drop is also counted in [`QpStats`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RxDrop {
    #[error("malformed packet: {0}")]
    Malformed(crate::wire::Error),
    #[error("bad ICRC")]
    BadIcrc,
    #[error("addressed to QP {0:#x}, not this QP")]
    WrongQp(u32),
    /// From an address other than the connection's remote: an RC packet
    /// carries no source QPN, so the source address is what binds it to the
    /// connection; a stranger's packet (an injected SEND, a forged ACK or NAK) stops
    /// here, counted.
    #[error("from {0}, not this connection's remote")]
    WrongSource(crate::wire::Ipv4Address),
    #[error("opcode {0} is not handled by an RC QP")]
    UnexpectedOpcode(Opcode),
    #[error("the QP is in the error state")]
    QpInError,
}

/// The longest message one work request carries: RoCE's DMA length field is 32 bits,
/// and RC messages stop at 2^31 - 1 bytes.
pub const MAX_MESSAGE_BYTES: usize = i32::MAX as usize;

/// Why a work request could not be posted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    #[error("the QP is in the error state")]
    QpInError,
    #[error("message of {0} bytes exceeds the 2 GiB RC limit")]
    TooLong(usize),
    #[error("rkey {0:#x} is already registered")]
    DuplicateRkey(u32),
}

/// Why a PSN could not be modified ([`RcQueuePair::set_send_psn`],
/// [`RcQueuePair::set_recv_psn`]). A refused modify changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModifyError {
    #[error("the QP is in the error state")]
    QpInError,
    /// Requests are queued or PSNs are unacknowledged: moving the send PSN would renumber
    /// packets the peer may already hold.
    #[error("the send queue is not drained ({queued} requests queued, {outstanding} PSNs unacknowledged)")]
    SendQueueBusy { queued: usize, outstanding: u32 },
    /// A multi-packet message is half received: moving the expected PSN would strand it.
    #[error("a multi-packet message is half received")]
    MessageInProgress,
}

/// One RC queue pair: a requester for what we send and a responder for what we receive.
///
/// Methods, by kind (as quinn-proto's `Connection` sorts them):
/// - getters: [`config`](Self::config), [`stats`](Self::stats), [`is_error`](Self::is_error),
///   [`outstanding`](Self::outstanding), [`send_psn`](Self::send_psn),
///   [`expected_psn`](Self::expected_psn), [`mr`](Self::mr),
///   [`max_packet_len`](Self::max_packet_len);
/// - mutators from the application: [`post_send`](Self::post_send),
///   [`post_recv`](Self::post_recv), [`register_mr`](Self::register_mr), and the
///   verbs-style modifies [`set_send_psn`](Self::set_send_psn) and
///   [`set_recv_psn`](Self::set_recv_psn);
/// - `handle_*` from the driver: [`handle_packet`](Self::handle_packet) (or
///   [`handle_repr`](Self::handle_repr) for a packet already parsed) and
///   [`handle_timeout`](Self::handle_timeout);
/// - `poll_*` to the driver: [`poll_transmit`](Self::poll_transmit),
///   [`poll_timeout`](Self::poll_timeout), [`poll_event`](Self::poll_event).
///
/// Calling order: after any `handle_*` or mutator call, the driver drains
/// `poll_transmit` until it returns `None`, drains `poll_event`, then sleeps until the
/// earlier of the next packet and `poll_timeout`, where it calls `handle_timeout`.
#[derive(Debug)]
pub struct RcQueuePair {
    cfg: QpConfig,
    req: Requester,
    resp: Responder,
    events: VecDeque<Event>,
    stats: QpStats,
    /// The SACK bitmap of the ACK `poll_transmit_repr` last returned (it borrows from here).
    sack_scratch: [u8; SACK_LEN],
}

impl RcQueuePair {
    /// A connected QP without rate control.
    pub fn new(cfg: QpConfig) -> Result<Self, ConfigError> {
        Self::with_rate_controller(cfg, Box::new(Unlimited::default()))
    }

    pub fn with_rate_controller(
        cfg: QpConfig,
        rate: Box<dyn RateController>,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(RcQueuePair {
            req: Requester::new(&cfg, rate),
            resp: Responder::new(&cfg),
            cfg,
            events: VecDeque::new(),
            stats: QpStats::default(),
            sack_scratch: [0; SACK_LEN],
        })
    }

    // ---- getters ----

    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &QpStats {
        &self.stats
    }
    pub fn is_error(&self) -> bool {
        self.req.failed
    }
    /// PSNs sent and not yet acknowledged.
    pub fn outstanding(&self) -> u32 {
        self.req.outstanding()
    }
    /// Send requests posted and not yet completed.
    pub fn send_queue_len(&self) -> usize {
        self.req.sq.len()
    }
    /// Receive requests posted and not yet consumed.
    pub fn recv_queue_len(&self) -> usize {
        self.resp.rq.len()
    }
    /// The PSN the responder expects next (verbs' RQ PSN as it stands now).
    pub fn expected_psn(&self) -> Psn {
        self.resp.epsn
    }
    /// The PSN the next posted send request will start at (verbs' SQ PSN as it stands
    /// now). [`QpConfig::send_psn`] is only where the QP started.
    pub fn send_psn(&self) -> Psn {
        self.req.send_psn()
    }
    pub fn rate_controller(&self) -> &dyn RateController {
        self.req.rate.as_ref()
    }
    pub fn mr(&self, rkey: u32) -> Option<&MemoryRegion> {
        self.resp.mrs.iter().find(|m| m.rkey == rkey)
    }
    /// The largest IP packet this QP emits (size of the buffer `poll_transmit` needs).
    pub fn max_packet_len(&self) -> usize {
        IPV4_HEADER_LEN
            + UDP_HEADER_LEN
            + BTH_LEN
            + RETH_LEN
            + 4
            + self.cfg.mtu.max(SACK_LEN + 4)
            + ICRC_LEN
    }

    // ---- mutators ----

    pub fn post_send(&mut self, req: SendRequest) -> Result<(), PostError> {
        if self.req.failed {
            return Err(PostError::QpInError);
        }
        if req.data.len() > MAX_MESSAGE_BYTES {
            return Err(PostError::TooLong(req.data.len()));
        }
        self.req.post(&self.cfg, req);
        Ok(())
    }

    /// Posts a receive request for a SEND of at most `max_len` bytes (or a WRITE with immediate).
    pub fn post_recv(&mut self, wr_id: u64, max_len: usize) -> Result<(), PostError> {
        self.post_recv_buffer(wr_id, Vec::new(), max_len)
    }

    /// Like [`post_recv`](Self::post_recv), reusing `buf`'s allocation (its contents are discarded).
    pub fn post_recv_buffer(
        &mut self,
        wr_id: u64,
        mut buf: Vec<u8>,
        max_len: usize,
    ) -> Result<(), PostError> {
        if self.req.failed {
            return Err(PostError::QpInError);
        }
        buf.clear();
        self.resp.rq.push_back(RecvWqe {
            wr_id,
            buf,
            max_len,
        });
        Ok(())
    }

    /// Registers `len` zeroed bytes at virtual address `va` for remote WRITE under `rkey`.
    pub fn register_mr(&mut self, va: u64, len: usize, rkey: u32) -> Result<(), PostError> {
        self.add_mr(MemoryRegion {
            va,
            rkey,
            len: len as u64,
            data: vec![0; len],
            null: false,
        })
    }

    /// Registers a null region of `len` bytes at `va` (verbs' `ibv_alloc_null_mr`): WRITEs
    /// to it are checked like any other and their bytes discarded, so a sink of synthetic
    /// load holds no buffer.
    pub fn register_null_mr(&mut self, va: u64, len: u64, rkey: u32) -> Result<(), PostError> {
        self.add_mr(MemoryRegion {
            va,
            rkey,
            len,
            data: Vec::new(),
            null: true,
        })
    }

    /// Sets the PSN the requester sends next, as `ibv_modify_qp` with `IBV_QP_SQ_PSN` does.
    ///
    /// rocast has no explicit QP state machine, so instead of asking for a particular
    /// QP state this asks for what makes the change safe: the send queue is empty and
    /// every PSN sent is acknowledged. Then no packet the peer may hold is renumbered;
    /// the next posted request starts at `psn`. A late ACK for the old numbering is
    /// counted as stale (`rx_stale_acks`), never applied. `config().send_psn` keeps the
    /// initial value.
    pub fn set_send_psn(&mut self, psn: Psn) -> Result<(), ModifyError> {
        if self.req.failed {
            return Err(ModifyError::QpInError);
        }
        if !self.req.is_drained() {
            return Err(ModifyError::SendQueueBusy {
                queued: self.req.sq.len(),
                outstanding: self.req.outstanding(),
            });
        }
        self.req.set_send_psn(psn);
        Ok(())
    }

    /// Sets the PSN the responder expects next, as `ibv_modify_qp` with `IBV_QP_RQ_PSN`
    /// does. Refused while a multi-packet message is half received (its remaining
    /// packets would be numbered against the old expectation). Packets held out of
    /// order under selective repeat are dropped, since they were numbered against the
    /// old expectation too. `config().recv_psn` keeps the initial value.
    pub fn set_recv_psn(&mut self, psn: Psn) -> Result<(), ModifyError> {
        if self.req.failed {
            return Err(ModifyError::QpInError);
        }
        if self.resp.message_in_progress() {
            return Err(ModifyError::MessageInProgress);
        }
        self.resp.set_expected_psn(psn);
        Ok(())
    }

    fn add_mr(&mut self, mr: MemoryRegion) -> Result<(), PostError> {
        if self.mr(mr.rkey).is_some() {
            return Err(PostError::DuplicateRkey(mr.rkey));
        }
        self.resp.mrs.push(mr);
        Ok(())
    }

    // ---- handle ----

    /// Feeds an arriving IPv4 RoCEv2 packet (IP header through ICRC). Verifies the ICRC.
    pub fn handle_packet(&mut self, now: Instant, ip_packet: &[u8]) -> Result<(), RxDrop> {
        let repr = match RoceRepr::parse(ip_packet) {
            Ok(r) => r,
            Err(e) => {
                self.stats.drop_malformed += 1;
                return Err(RxDrop::Malformed(e));
            }
        };
        if !repr.icrc_ok(ip_packet) {
            self.stats.drop_bad_icrc += 1;
            return Err(RxDrop::BadIcrc);
        }
        self.handle_repr(now, &repr)
    }

    /// Feeds a packet that was already parsed (and, if it came off a wire, ICRC-checked).
    pub fn handle_repr(&mut self, now: Instant, p: &RoceRepr<'_>) -> Result<(), RxDrop> {
        if p.bth.dest_qp != self.cfg.local_qpn {
            self.stats.drop_wrong_qp += 1;
            return Err(RxDrop::WrongQp(p.bth.dest_qp));
        }
        if p.ip.src_addr != self.cfg.remote_ip {
            self.stats.drop_wrong_source += 1;
            return Err(RxDrop::WrongSource(p.ip.src_addr));
        }
        if self.req.failed {
            return Err(RxDrop::QpInError);
        }
        let op = p.bth.opcode;
        match op {
            Opcode::CNP => {
                self.stats.rx_cnps += 1;
                self.req.rate.on_cnp(now);
            }
            Opcode::RC_ACKNOWLEDGE | Opcode::RC_ATOMIC_ACKNOWLEDGE => {
                let aeth = p.ext.aeth.expect("layout has AETH");
                self.req.on_ack(
                    &self.cfg,
                    now,
                    p.bth.psn,
                    aeth,
                    p.payload,
                    &mut self.events,
                    &mut self.stats,
                );
                if self.req.failed {
                    self.resp.fail(&mut self.events);
                }
            }
            _ if op.transport() == 0 && !matches!(op.0, 0x0d..=0x10) && op.is_known() => {
                self.resp.on_request(
                    &self.cfg,
                    now,
                    p.ip.ecn,
                    &p.bth,
                    &p.ext,
                    p.payload,
                    &mut self.events,
                    &mut self.stats,
                );
            }
            _ => {
                self.stats.drop_unexpected_opcode += 1;
                return Err(RxDrop::UnexpectedOpcode(op));
            }
        }
        Ok(())
    }

    /// The receivers behind this QP changed (a member evicted from a Cepheus group, whose
    /// switch then answers the next retransmission from the paths left): the timeouts so
    /// far were that member's, so they are forgotten, and what is unacknowledged goes
    /// out again at the next [`handle_timeout`](Self::handle_timeout) instead of after
    /// the backed-off timer (up to seconds, past which the QP would fail).
    pub fn retry_now(&mut self, now: Instant) {
        self.req.retry_now(now);
    }

    /// Lets timers fire: retransmission timeout, RNR wait, the rate controller's timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.req
            .handle_timeout(&self.cfg, now, &mut self.events, &mut self.stats);
        if self.req.failed {
            self.resp.fail(&mut self.events);
        }
    }

    // ---- poll ----

    /// Writes the next packet to send (IPv4 header through ICRC) into `buf` and says
    /// how long it is. CNPs go first, then ACK/NAKs, then data as the window and the
    /// rate controller allow. `buf` must hold [`max_packet_len`](Self::max_packet_len)
    /// bytes (a shorter one is a driver bug and panics).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let repr = self.poll_transmit_repr(now)?;
        Some(Transmit::one(repr.emit(buf)))
    }

    /// Whether a CNP or an ACK/NAK waits to be sent: a NIC serves these ahead of data.
    pub fn has_feedback(&self) -> bool {
        self.resp.cnp_pending || !self.resp.feedback.is_empty()
    }

    /// Like [`poll_transmit`](Self::poll_transmit), but returns the packet as a
    /// [`RoceRepr`] borrowing its payload from the send queue, for drivers that carry
    /// headers rather than bytes (the simulator) and serialise only on demand.
    /// `emit` on the result gives exactly the bytes `poll_transmit` would.
    pub fn poll_transmit_repr(&mut self, now: Instant) -> Option<RoceRepr<'_>> {
        if self.resp.cnp_pending {
            self.resp.cnp_pending = false;
            self.stats.tx_cnps += 1;
            let (mut bth, ext) = crate::wire::cnp_headers(self.cfg.remote_qpn);
            bth.pkey = self.cfg.pkey;
            return Some(header_repr(
                &self.cfg,
                self.cfg.cnp_dscp,
                Ecn::NotEct,
                bth,
                ext,
                &[],
            ));
        }
        if let Some(Feedback {
            psn,
            msn,
            syndrome,
            sack,
        }) = self.resp.feedback.pop_front()
        {
            if syndrome.is_ack() {
                self.stats.tx_acks += 1;
            }
            if sack {
                let expected = if syndrome.is_ack() { psn.next() } else { psn };
                self.sack_scratch = self.resp.sack_bitmap(expected);
            }
            let mut bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, self.cfg.remote_qpn, psn);
            bth.pkey = self.cfg.pkey;
            let ext = ExtHeaders {
                aeth: Some(AethRepr { syndrome, msn }),
                ..Default::default()
            };
            let payload: &[u8] = if sack { &self.sack_scratch } else { &[] };
            return Some(header_repr(
                &self.cfg,
                self.cfg.dscp,
                Ecn::NotEct,
                bth,
                ext,
                payload,
            ));
        }
        if self.req.rate.next_send_time().is_some_and(|t| t > now) {
            return None;
        }
        let pkt = self.req.next_packet(&self.cfg, now)?;
        self.stats.tx_data_packets += 1;
        self.stats.tx_data_bytes += pkt.len as u64;
        if pkt.retransmission {
            self.stats.tx_retransmitted += 1;
        }
        // The repr borrows the send queue; the rate controller is a disjoint field.
        let repr = data_repr(&self.cfg, &self.req.sq, &pkt);
        self.req.rate.on_packet_sent(now, repr.buffer_len());
        Some(repr)
    }

    /// When the driver must call [`handle_timeout`](Self::handle_timeout) (or retry
    /// `poll_transmit`, if pacing held a packet back) at the latest.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let pace = if self.req.has_work(&self.cfg) {
            self.req.rate.next_send_time()
        } else {
            None
        };
        [self.req.poll_timeout(), pace].into_iter().flatten().min()
    }

    /// The retransmission timeout now in force, before back-off (see
    /// [`QpConfig::adaptive_rto`]).
    pub fn retransmit_timeout(&self) -> Duration {
        self.req.rto(&self.cfg)
    }

    /// The smoothed round-trip time measured so far (with `adaptive_rto`).
    pub fn srtt(&self) -> Option<Duration> {
        self.req.srtt()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

/// The RoCE packet of data packet `pkt`, its payload borrowed from the send queue.
fn data_repr<'a>(cfg: &QpConfig, sq: &'a VecDeque<SendWqe>, pkt: &DataPacket) -> RoceRepr<'a> {
    let w = &sq[pkt.wqe_index];
    let mut bth = BthRepr::new(pkt.opcode, cfg.remote_qpn, pkt.psn);
    bth.pkey = cfg.pkey;
    bth.ack_req = pkt.ack_req;
    bth.pad_count = ((4 - pkt.len % 4) % 4) as u8;
    let mut ext = ExtHeaders::default();
    if pkt.opcode.is_write() && pkt.opcode.is_first() {
        let (va, rkey) = match w.req.op {
            SendOp::Write { remote_va, rkey }
            | SendOp::WriteImm {
                remote_va, rkey, ..
            } => (remote_va, rkey),
            _ => unreachable!("write opcode for a write request"),
        };
        ext.reth = Some(RethRepr {
            va,
            rkey,
            dma_len: w.req.data.len() as u32,
        });
    }
    if pkt.opcode.has_imm() {
        ext.imm = match w.req.op {
            SendOp::SendImm(imm) | SendOp::WriteImm { imm, .. } => Some(imm),
            _ => unreachable!("imm opcode for an imm request"),
        };
    }
    let ecn = if cfg.ecn_capable {
        Ecn::Ect0
    } else {
        Ecn::NotEct
    };
    let payload = w.req.data.slice(pkt.offset, pkt.len);
    header_repr(cfg, cfg.dscp, ecn, bth, ext, payload)
}

/// This QP's IPv4/UDP addressing around `bth`, `ext` and `payload`.
fn header_repr<'a>(
    c: &QpConfig,
    dscp: u8,
    ecn: Ecn,
    bth: BthRepr,
    ext: ExtHeaders,
    payload: &'a [u8],
) -> RoceRepr<'a> {
    RoceRepr::new(
        c.local_ip,
        c.remote_ip,
        dscp,
        ecn,
        c.udp_src_port,
        bth,
        ext,
        payload,
    )
}
