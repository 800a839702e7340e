//! `rnic`: a sans-IO software RoCE endpoint — the reliable-connection (RC) transport of
//! a commodity RNIC, per IBTA vol. 1 ch. 9 (§9.7 reliable service) and Annex A17 (RoCEv2).
//!
//! This module knows one host's queue pairs and nothing else. In particular it has no
//! idea that multicast exists: Cepheus' claim (Cepheus §III-A) is that *unmodified*
//! RoCE endpoints take part in switch-replicated multicast, with the only host-side
//! change being where a QP points (dstIP = McstID, dstQP = 1). Keeping multicast logic
//! out of this module is what lets rocast prove that claim; do not add any.
//!
//! The state machine has the shape every rocast core object shares (ARCHITECTURE.md):
//! `handle_packet`/`handle_timeout` feed it, `poll_transmit`/`poll_timeout`/`poll_event`
//! drain it. It never reads a clock or touches a socket; the simulator and the real
//! runtimes are drivers of it.
//!
//! What it implements:
//! - Requester: SEND and RDMA WRITE, with and without immediate, segmented by path MTU;
//!   a window of outstanding PSNs; go-back-N on a sequence-error NAK; retransmission
//!   timeout with exponential back-off and a retry limit; RNR NAK wait and retry.
//! - Responder: in-order acceptance, ACK coalescing, one NAK per gap, duplicate
//!   re-acknowledgement, WRITE access checks, RNR NAK on an empty receive queue, CNP
//!   generation on ECN-CE at most once per interval.
//! - Optional selective repeat in the manner of IRN (Mittal et al., SIGCOMM 2018).
//!
//! Left out on purpose: RDMA READ and atomics as *operations* (their headers are in
//! `wire`; an RC responder here answers them with an invalid-request NAK), end-to-end
//! credits (ACKs carry the "credits invalid" code 31, as Linux rxe does), and path
//! migration.
//!
//! Beside RC, [`UdEndpoint`] (in `ud`) holds one host's unreliable-datagram QPs. The RC
//! part above still knows nothing of Cepheus multicast; UD multicast attach/detach is
//! different: it is the standard IBTA feature (vol. 1 §10.5, RoCEv2 Annex A17) that the
//! broadcast-select reliable-multicast path of paper 002 runs on, so the endpoint owns
//! the group table a real RNIC owns.

mod cc;
mod qp;
mod requester;
mod responder;
mod ud;

pub use cc::{Dcqcn, DcqcnConfig, FixedRate, RateController, Unlimited};
pub use qp::{ModifyError, PostError, RcQueuePair, MAX_MESSAGE_BYTES};
pub use ud::{
    ipv4_gid, ipv4_multicast_gid, ipv4_multicast_mac, psn_step, MulticastGroup, PsnStep, UdAddress,
    UdConfig, UdCounters, UdDrop, UdEndpoint, UdError, UdEvent, MULTICAST_QPN, QKEY_USE_OWN,
};

use crate::time::Duration;
use crate::wire::{Ipv4Address, NakCode, Psn};
use std::sync::Arc;

/// How a QP recovers lost packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Retransmission {
    /// The RoCE default: the responder drops out-of-order packets and NAKs the first
    /// gap; the requester resends everything from the NAKed PSN.
    #[default]
    GoBackN,
    /// IRN-style: the responder buffers out-of-order packets within the window and, if the
    /// peer also runs selective repeat, reports which PSNs it holds (the SACK extension
    /// below); the requester resends only what is missing. Falls back to go-back-N
    /// behaviour against a go-back-N peer.
    SelectiveRepeat,
}

/// Everything fixed when a QP is connected (the INIT→RTR→RTS attributes of verbs).
#[derive(Clone, Debug)]
pub struct QpConfig {
    pub local_qpn: u32,
    pub remote_qpn: u32,
    pub local_ip: Ipv4Address,
    pub remote_ip: Ipv4Address,
    /// UDP source port of our packets (ECMP entropy; Linux rxe uses 49152 and up).
    pub udp_src_port: u16,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 bytes of payload per packet.
    pub mtu: usize,
    /// First PSN our requester sends (sq_psn).
    pub send_psn: Psn,
    /// First PSN our responder expects (rq_psn).
    pub recv_psn: Psn,
    pub pkey: u16,
    /// DSCP of data packets and ACKs.
    pub dscp: u8,
    /// DSCP of CNPs (commonly a higher priority than data).
    pub cnp_dscp: u8,
    /// Mark data packets ECN-capable (ECT(0)) so switches can signal congestion.
    pub ecn_capable: bool,
    /// Most PSNs the requester keeps unacknowledged.
    pub max_outstanding: u32,
    /// The requester asks for an ACK (BTH AckReq) at least this often, and always on a
    /// message's last packet.
    pub ack_req_every: u32,
    /// The responder ACKs after this many packets even without an ACK request.
    pub ack_every: u32,
    /// Retransmission timeout before back-off (with `adaptive_rto`, its floor).
    pub retransmit_timeout: Duration,
    /// Follow the measured round trip: after the first ACK of a packet sent once, the
    /// timeout is max(`retransmit_timeout`, SRTT + 4·RTTVAR) (RFC 6298 §2, Karn's rule
    /// for samples), as RoCE NICs' adaptive retransmission does. Off by default: the
    /// simulator's QPs keep a fixed timeout, as the papers' RNICs are modelled; the
    /// real-time runtime turns it on, where a busy host's round trip varies by orders
    /// of magnitude and a fixed 1 ms timeout fires spuriously.
    pub adaptive_rto: bool,
    /// Restart slowly after loss (NVIDIA's lossy-RoCE accelerations, `ROCE_ACCL`'s
    /// `roce_slow_restart_en` with its transmission window `roce_tx_window_en`): a
    /// retransmission timeout shrinks the requester's window to one packet and a
    /// PSN sequence NAK halves it; every newly acknowledged packet opens it by one
    /// (doubling per round trip) back up to `max_outstanding`. Without it a timeout
    /// resends the whole window at once: when the timeout was spurious (a receiver or
    /// a software switch descheduled past it) every copy is a duplicate queued behind
    /// the originals, and on a loaded host the queue, the round trip and the next
    /// timeout grow together. Off by default (the simulator's RNICs are the papers'
    /// lossless-fabric NICs); the real-time runtime turns it on.
    pub slow_restart: bool,
    /// Timeouts in a row (without progress) before the QP fails. 7 as in verbs' retry_cnt.
    pub retry_limit: u8,
    /// RNR NAKs in a row before the QP fails; 7 means "retry forever" (verbs' rnr_retry).
    pub rnr_retry_limit: u8,
    /// The RNR timer code (IBTA Table 46) our responder advertises in RNR NAKs.
    pub min_rnr_timer: u8,
    /// Least spacing of CNPs sent for this QP (DCQCN's notification point: 50 µs).
    pub cnp_interval: Duration,
    pub retransmission: Retransmission,
    /// The peer runs selective repeat and understands the SACK extension (agreed at connection set-up).
    pub peer_sack: bool,
}

impl QpConfig {
    /// A config with the documented defaults for a QP between two addresses.
    pub fn new(
        local_ip: Ipv4Address,
        local_qpn: u32,
        remote_ip: Ipv4Address,
        remote_qpn: u32,
    ) -> Self {
        QpConfig {
            local_qpn,
            remote_qpn,
            local_ip,
            remote_ip,
            udp_src_port: 49152 | (local_qpn as u16 & 0x3fff),
            mtu: 4096,
            send_psn: Psn::new(0),
            recv_psn: Psn::new(0),
            pkey: 0xffff,
            dscp: 26,
            cnp_dscp: 48,
            ecn_capable: true,
            max_outstanding: 256,
            ack_req_every: 64,
            ack_every: 16,
            // Loss is normally repaired by NAKs within an RTT; the timer covers tail loss.
            retransmit_timeout: Duration::from_ms(1),
            adaptive_rto: false,
            slow_restart: false,
            retry_limit: 7,
            rnr_retry_limit: 7,
            min_rnr_timer: 1, // 10 µs
            cnp_interval: Duration::from_us(50),
            retransmission: Retransmission::GoBackN,
            peer_sack: false,
        }
    }
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        if self.max_outstanding == 0 || self.max_outstanding >= Psn::HALF {
            return Err(ConfigError::Window(self.max_outstanding));
        }
        if self.retransmission == Retransmission::SelectiveRepeat
            && self.max_outstanding > SACK_WINDOW as u32
        {
            return Err(ConfigError::SackWindow(self.max_outstanding));
        }
        if self.ack_every == 0 || self.ack_req_every == 0 {
            return Err(ConfigError::AckEvery);
        }
        if self.local_qpn > 0xff_ffff || self.remote_qpn > 0xff_ffff {
            return Err(ConfigError::Qpn);
        }
        Ok(())
    }
}

/// PSNs a SACK bitmap covers past the expected PSN (the selective-repeat window).
pub const SACK_WINDOW: usize = 256;
/// Bytes of the SACK extension: a bitmap, bit i (LSB-first per byte) set when PSN
/// `expected + 1 + i` is held by the responder. It travels as the payload of an
/// ACKNOWLEDGE packet (pad count 0), only to peers that agreed to selective repeat.
pub const SACK_LEN: usize = SACK_WINDOW / 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("path MTU {0} is not one of 256, 512, 1024, 2048, 4096")]
    Mtu(usize),
    #[error("window of {0} PSNs is out of range (1 to 2^23-1)")]
    Window(u32),
    #[error("selective repeat needs max_outstanding <= {SACK_WINDOW}, got {0}")]
    SackWindow(u32),
    #[error("ack_every and ack_req_every must be at least 1")]
    AckEvery,
    #[error("QP numbers are 24 bits")]
    Qpn,
}

/// What a send work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendImm(u32),
    Write { remote_va: u64, rkey: u32 },
    WriteImm { remote_va: u64, rkey: u32, imm: u32 },
}

/// A send work request: an operation and the bytes it carries.
#[derive(Clone, Debug)]
pub struct SendRequest {
    pub wr_id: u64,
    pub op: SendOp,
    pub data: Payload,
}

/// Zero bytes for [`Payload::Zeros`] packets: one path MTU's worth.
static ZEROS: [u8; 4096] = [0; 4096];

/// `len` zero bytes (`len` at most 4096, the largest path MTU): the payload of a
/// [`Payload::Zeros`] packet, for drivers that rebuild such packets from their length.
pub fn zero_bytes(len: usize) -> &'static [u8] {
    &ZEROS[..len]
}

/// What a send work request carries.
///
/// `Bytes` is application data, shared so a driver can post the same buffer many times
/// without copying it. `Zeros` is synthetic traffic of a given length whose content is
/// all zero bytes: load generators and the simulator use it so that a 2 MB flow costs
/// no 2 MB buffer (perftest's and htsim's flows carry no meaningful data either). On
/// the wire the two are indistinguishable from a real zero-filled buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    Bytes(Arc<[u8]>),
    Zeros(usize),
}

impl Payload {
    pub fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Zeros(n) => *n,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `len` bytes from `offset`; `len` is at most one path MTU (4096 bytes).
    ///
    /// Panics if the range is out of bounds (the requester only asks for ranges it cut
    /// from this payload's length).
    pub fn slice(&self, offset: usize, len: usize) -> &[u8] {
        match self {
            Payload::Bytes(b) => &b[offset..offset + len],
            Payload::Zeros(n) => {
                assert!(offset + len <= *n, "payload range out of bounds");
                zero_bytes(len)
            }
        }
    }
    /// The application bytes, if this is not synthetic.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Payload::Bytes(b) => Some(b),
            Payload::Zeros(_) => None,
        }
    }
}

impl From<Arc<[u8]>> for Payload {
    fn from(b: Arc<[u8]>) -> Self {
        Payload::Bytes(b)
    }
}
impl From<Vec<u8>> for Payload {
    fn from(b: Vec<u8>) -> Self {
        Payload::Bytes(b.into())
    }
}
impl From<&[u8]> for Payload {
    fn from(b: &[u8]) -> Self {
        Payload::Bytes(b.into())
    }
}

/// Why a work request failed (the verbs `ibv_wc_status` values that apply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WcError {
    #[error("retry count exceeded (no ACK after {0} timeouts)")]
    RetryExceeded(u8),
    #[error("RNR retry count exceeded")]
    RnrRetryExceeded,
    #[error("remote NAK: {}", .0.name())]
    RemoteNak(NakCode),
    #[error("flushed: the QP is in the error state")]
    Flushed,
    #[error("local length error: message longer than the receive buffer")]
    LocalLength,
}

/// Something the layer above should know about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A send work request finished: fully acknowledged, or failed.
    SendComplete {
        wr_id: u64,
        result: Result<(), WcError>,
    },
    /// A SEND arrived in the receive buffer of `wr_id`.
    Recv {
        wr_id: u64,
        data: Vec<u8>,
        imm: Option<u32>,
    },
    /// An RDMA WRITE with immediate finished; it consumed receive request `wr_id`.
    RecvWriteImm { wr_id: u64, len: usize, imm: u32 },
    /// A receive request failed (e.g. the message did not fit).
    RecvError { wr_id: u64, error: WcError },
    /// The QP entered the error state; every outstanding request has been flushed.
    QpError(WcError),
}

/// A registered memory region that remote WRITEs may target.
#[derive(Clone, Debug)]
pub struct MemoryRegion {
    pub va: u64,
    pub rkey: u32,
    /// Length in bytes; WRITEs must fall inside `va..va + len`.
    pub len: u64,
    /// The region's bytes; empty for a null region.
    pub data: Vec<u8>,
    /// A null region (verbs' `ibv_alloc_null_mr`): WRITEs are bounds- and key-checked
    /// like any other, then their bytes are discarded. Sinks of synthetic load use it.
    pub null: bool,
}

/// Per-QP counters. Everything dropped is counted with its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QpStats {
    pub tx_data_packets: u64,
    pub tx_data_bytes: u64,
    pub tx_retransmitted: u64,
    pub tx_acks: u64,
    pub tx_naks: u64,
    pub tx_rnr_naks: u64,
    pub tx_cnps: u64,
    pub rx_data_packets: u64,
    pub rx_duplicates: u64,
    pub rx_out_of_order: u64,
    pub rx_acks: u64,
    pub rx_naks: u64,
    pub rx_cnps: u64,
    pub rx_ecn_ce: u64,
    pub rx_stale_acks: u64,
    pub drop_bad_icrc: u64,
    pub drop_malformed: u64,
    pub drop_wrong_qp: u64,
    /// Addressed to this QP from an address other than its remote.
    pub drop_wrong_source: u64,
    pub drop_unexpected_opcode: u64,
    pub timeouts: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
}

#[cfg(test)]
mod tests;
