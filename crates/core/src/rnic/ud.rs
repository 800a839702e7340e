//! [`UdEndpoint`]: one host's unreliable-datagram (UD) queue pairs, with IP multicast
//! attach and detach, as a sans-IO state machine.
//!
//! What it owns: the host's UD QPs (Q_Key, send PSN, receive queue), the multicast
//! attachment table (group → attached QPs), a per-source PSN record for loss accounting,
//! and the queue of datagrams waiting for [`poll_transmit`](UdEndpoint::poll_transmit).
//! It reads no clock and opens no socket; drivers feed whole Ethernet frames to
//! [`handle_frame`](UdEndpoint::handle_frame) and put what `poll_transmit` returns on
//! the wire.
//!
//! The rules it follows:
//! - UD service, IBTA vol. 1 §9.8: every message is one SEND_ONLY (or
//!   SEND_ONLY_WITH_IMMEDIATE) packet of at most one path MTU, carrying a DETH with the
//!   Q_Key and the source QPN. A receiving QP drops a packet whose Q_Key differs from its
//!   own; a posted send whose Q_Key has the high bit set uses the sending QP's own
//!   Q_Key instead (the "controlled Q_Key" rule). There are no ACKs, no retransmission,
//!   and a packet finding no receive buffer is silently dropped (here: counted).
//! - Multicast, IBTA vol. 1 §10.5 and RoCEv2 (Annex A17): a UD QP attaches to a group
//!   named by its GID; for RoCEv2 over IPv4 the GID of group `a.b.c.d` is the IPv4-mapped
//!   IPv6 address `::ffff:a.b.c.d` and frames go to MAC `01:00:5e` + the low 23 bits of
//!   the address (RFC 1112 §6.4). Multicast packets carry destination QPN 0xFFFFFF and
//!   are delivered to every QP of the host attached to the group (§10.5.2). The driver
//!   decides whether a host sees its own multicast frames (multicast loopback); this
//!   module delivers whatever it is fed.
//! - PSNs: each UD QP numbers its packets from its start PSN, modulo 2^24. The receiver
//!   does not enforce order, but it records the last PSN per source (source IP, source
//!   QPN) and counts gaps, a loss indicator that must stay right across the 24-bit wrap:
//!   the broadcast-select reliable-multicast work (paper 002, §III-A) found a Soft-RoCE
//!   bug exactly at the PSN wrap after billions of UD packets. Every well-formed UD
//!   packet addressed to this host or to any multicast group is recorded, taken by a QP
//!   or not. A gap means PSNs this host did not see; it is a loss only where the source
//!   sends everything to this host (as in that paper's fabric, where every node
//!   receives every packet), not where it also sends unicast to other hosts.
//!
//! Every bad input is a counted drop ([`UdCounters`]), never a panic.
//!
//! Left out: the 40-byte GRH that verbs places in front of a UD receive buffer (a
//! receive buffer's `len` here counts payload bytes only), P_Key tables beyond one
//! P_Key per endpoint, and congestion control (UD frames are sent Not-ECT).

use super::WcError;
use crate::time::Instant;
use crate::transmit::Transmit;
use crate::wire::{
    classify_frame, BthRepr, DethRepr, Ecn, EtherType, EthernetAddress, EthernetRepr, ExtHeaders,
    FrameClass, Ipv4Address, Opcode, Psn, RoceFrameRepr, RoceRepr, BTH_LEN, DETH_LEN,
    ETHERNET_HEADER_LEN, ICRC_LEN, IMMDT_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::mem::size_of;

/// Destination QPN of every multicast packet (IBTA §10.5.2); no QP may take it.
pub const MULTICAST_QPN: u32 = 0xff_ffff;

/// The Q_Key bit that, set in a posted send's Q_Key, makes the sending QP's own Q_Key
/// go on the wire instead (IBTA vol. 1, the controlled-Q_Key rule for UD sends).
pub const QKEY_USE_OWN: u32 = 0x8000_0000;

/// The Ethernet address IPv4 multicast group `group` maps to: `01:00:5e` followed by the
/// low 23 bits of the address (RFC 1112 §6.4). `None` if `group` is not multicast.
/// 32 groups share each MAC; receivers still check the IP destination.
pub fn ipv4_multicast_mac(group: Ipv4Address) -> Option<EthernetAddress> {
    if !group.is_multicast() {
        return None;
    }
    let [_, b, c, d] = group.0;
    Some(EthernetAddress([0x01, 0x00, 0x5e, b & 0x7f, c, d]))
}

/// The RoCEv2 GID of an IPv4 address: the IPv4-mapped IPv6 address `::ffff:a.b.c.d`
/// (Annex A17). Total: any IPv4 address has one.
pub fn ipv4_gid(ip: Ipv4Address) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip.0);
    g
}

/// The multicast GID a QP attaches to for IPv4 group `group` ([`ipv4_gid`] of it).
/// `None` if `group` is not multicast.
pub fn ipv4_multicast_gid(group: Ipv4Address) -> Option<[u8; 16]> {
    group.is_multicast().then(|| ipv4_gid(group))
}

/// A multicast group as a UD QP sees it: the IPv4 group address and its two mappings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulticastGroup {
    /// The group address (224.0.0.0/4).
    pub ip: Ipv4Address,
    /// The group's Ethernet address ([`ipv4_multicast_mac`]).
    pub mac: EthernetAddress,
    /// The GID verbs' `ibv_attach_mcast` takes for this group ([`ipv4_multicast_gid`]).
    pub gid: [u8; 16],
}

impl MulticastGroup {
    /// The group of `ip`, or [`UdError::NotMulticast`].
    pub fn new(ip: Ipv4Address) -> Result<Self, UdError> {
        match (ipv4_multicast_mac(ip), ipv4_multicast_gid(ip)) {
            (Some(mac), Some(gid)) => Ok(MulticastGroup { ip, mac, gid }),
            _ => Err(UdError::NotMulticast(ip)),
        }
    }
}

/// Where a UD send goes: a resolved address handle plus the remote QP and Q_Key
/// (verbs' `ibv_ah` with the `remote_qpn`/`remote_qkey` of a UD work request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdAddress {
    pub ip: Ipv4Address,
    pub mac: EthernetAddress,
    /// Destination QPN; [`MULTICAST_QPN`] for a group.
    pub qpn: u32,
    /// Q_Key to send with; with [`QKEY_USE_OWN`] set, the sending QP's Q_Key is used.
    pub qkey: u32,
}

impl UdAddress {
    /// A unicast destination: QP `qpn` on the host at `ip`/`mac`.
    pub fn unicast(ip: Ipv4Address, mac: EthernetAddress, qpn: u32, qkey: u32) -> Self {
        UdAddress { ip, mac, qpn, qkey }
    }
    /// Multicast group `group`: its MAC and QPN 0xFFFFFF filled in.
    pub fn multicast(group: Ipv4Address, qkey: u32) -> Result<Self, UdError> {
        let g = MulticastGroup::new(group)?;
        Ok(UdAddress {
            ip: g.ip,
            mac: g.mac,
            qpn: MULTICAST_QPN,
            qkey,
        })
    }
    pub fn is_multicast(&self) -> bool {
        self.ip.is_multicast()
    }
}

/// One host's UD settings (its port attributes, in verbs terms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdConfig {
    pub local_ip: Ipv4Address,
    pub local_mac: EthernetAddress,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 bytes; the largest UD message.
    pub mtu: usize,
    /// UDP source port of our packets.
    pub udp_src_port: u16,
    /// The P_Key our packets carry and arriving packets must match.
    pub pkey: u16,
    /// DSCP of our packets.
    pub dscp: u8,
    /// Most (source IP, source QPN) pairs whose PSNs are tracked; packets from further
    /// sources are delivered but not tracked (counted in `psn_untracked`). Bounds memory
    /// against a flood of distinct sources.
    pub max_tracked_sources: usize,
}

impl UdConfig {
    /// The defaults: MTU 4096, UDP source port 49152, default P_Key, DSCP 26, 4096 sources.
    pub fn new(local_ip: Ipv4Address, local_mac: EthernetAddress) -> Self {
        UdConfig {
            local_ip,
            local_mac,
            mtu: 4096,
            udp_src_port: 49152,
            pkey: 0xffff,
            dscp: 26,
            max_tracked_sources: 4096,
        }
    }
    pub fn validate(&self) -> Result<(), UdError> {
        if !matches!(self.mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(UdError::Mtu(self.mtu));
        }
        Ok(())
    }
}

/// Why an endpoint could not be created or a verb was refused. A refused call changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UdError {
    /// The configured path MTU is not one IBTA defines.
    #[error("path MTU {0} is not one of 256, 512, 1024, 2048, 4096")]
    Mtu(usize),
    /// QPNs are 24 bits; 0 and 1 (SMI, GSI) and 0xFFFFFF (multicast) are reserved.
    #[error("QP number {0:#x} is reserved or wider than 24 bits")]
    InvalidQpn(u32),
    /// `create_qp` with a QPN this endpoint already has.
    #[error("QP {0:#x} already exists")]
    QpExists(u32),
    /// The verb names a QP this endpoint does not have.
    #[error("no UD QP {0:#x} on this endpoint")]
    NoSuchQp(u32),
    /// A UD message is one packet: it may not exceed the path MTU.
    #[error("UD message of {len} bytes exceeds the path MTU of {mtu} bytes")]
    MessageTooLong { len: usize, mtu: usize },
    /// Attach, detach or a multicast address with an address outside 224.0.0.0/4.
    #[error("{0} is not an IPv4 multicast address (224.0.0.0/4)")]
    NotMulticast(Ipv4Address),
    /// The QP is attached to this group already.
    #[error("QP {qpn:#x} is already attached to {group}")]
    AlreadyAttached { qpn: u32, group: Ipv4Address },
    /// Detach of a QP from a group it is not attached to.
    #[error("QP {qpn:#x} is not attached to {group}")]
    NotAttached { qpn: u32, group: Ipv4Address },
    /// A send address that mixes unicast and multicast: a multicast IP needs QPN
    /// 0xFFFFFF and the group MAC, a unicast IP a unicast 24-bit QPN.
    #[error("destination {0:?} mixes multicast and unicast addressing")]
    BadDestination(UdAddress),
}

/// Why an arriving frame, or its delivery to one QP, was dropped. Each reason has its
/// own counter in [`UdCounters`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UdDrop {
    /// Not IPv4/UDP to port 4791 (`drop_not_roce`).
    #[error("not a RoCEv2 frame")]
    NotRoce,
    /// Addressed to UDP 4791 but unparsable: truncated, bad lengths, bad IPv4 checksum,
    /// missing DETH, non-zero BTH TVer (`drop_malformed`).
    #[error("malformed RoCEv2 frame: {0}")]
    Malformed(crate::wire::Error),
    /// The ICRC does not verify (`drop_bad_icrc`).
    #[error("bad ICRC")]
    BadIcrc,
    /// Destination MAC/IP is neither this host nor a multicast group (`drop_not_for_us`).
    #[error("addressed to another host")]
    NotForUs,
    /// An opcode other than UD SEND_ONLY or SEND_ONLY_WITH_IMMEDIATE, e.g. RC
    /// (`drop_wrong_transport`).
    #[error("opcode {0} is not UD SEND")]
    WrongTransport(Opcode),
    /// The BTH P_Key does not match the endpoint's (`drop_pkey_mismatch`).
    #[error("P_Key {0:#06x} does not match")]
    PkeyMismatch(u16),
    /// Destination QPN 0xFFFFFF to a unicast IP, or a multicast IP with another QPN
    /// (`drop_multicast_mismatch`).
    #[error("destination QPN {qpn:#x} does not fit destination {ip}")]
    MulticastMismatch { qpn: u32, ip: Ipv4Address },
    /// No QP with the destination QPN (`drop_unknown_qpn`).
    #[error("no UD QP {0:#x}")]
    UnknownQpn(u32),
    /// A multicast packet for a group no QP of this host is attached to (`drop_unknown_group`).
    #[error("no QP attached to group {0}")]
    UnknownGroup(Ipv4Address),
    /// The DETH Q_Key differs from the receiving QP's (`drop_qkey_mismatch`; per QP).
    #[error("Q_Key {got:#x} does not match QP {qpn:#x}'s Q_Key")]
    QkeyMismatch { qpn: u32, got: u32 },
    /// The receiving QP has no posted receive buffer (`drop_no_recv_buffer`; per QP).
    #[error("QP {0:#x} has no receive buffer posted")]
    NoRecvBuffer(u32),
    /// The payload does not fit the posted buffer, which completes with
    /// [`WcError::LocalLength`] (`drop_too_long`; per QP).
    #[error("{len}-byte message does not fit QP {qpn:#x}'s {buf_len}-byte buffer")]
    TooLong {
        qpn: u32,
        len: usize,
        buf_len: usize,
    },
}

/// What happened, for the layer above.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UdEvent {
    /// A posted send went on the wire (UD completes sends locally; nothing is acknowledged).
    SendComplete { qpn: u32, wr_id: u64 },
    /// A message arrived in receive buffer `wr_id` of QP `qpn`.
    Receive {
        qpn: u32,
        wr_id: u64,
        src_ip: Ipv4Address,
        src_qpn: u32,
        psn: Psn,
        imm: Option<u32>,
        /// The group it was sent to; `None` for unicast.
        group: Option<Ipv4Address>,
        data: Vec<u8>,
    },
    /// Receive buffer `wr_id` of QP `qpn` completed in error (too small for the message).
    RecvError {
        qpn: u32,
        wr_id: u64,
        error: WcError,
    },
}

/// Endpoint counters. Frame-level drops count once per frame; the per-QP drops
/// (`drop_qkey_mismatch`, `drop_no_recv_buffer`, `drop_too_long`) once per QP a
/// multicast frame was meant for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdCounters {
    pub tx_packets: u64,
    /// Payload bytes sent.
    pub tx_bytes: u64,
    pub tx_multicast_packets: u64,
    /// Frames that found their QP or attached group (before the per-QP checks).
    pub rx_packets: u64,
    pub rx_multicast_packets: u64,
    /// Messages placed in a receive buffer (a multicast frame counts once per QP).
    pub rx_deliveries: u64,
    /// Payload bytes delivered.
    pub rx_bytes: u64,
    pub drop_not_roce: u64,
    pub drop_malformed: u64,
    pub drop_bad_icrc: u64,
    pub drop_not_for_us: u64,
    pub drop_wrong_transport: u64,
    pub drop_pkey_mismatch: u64,
    pub drop_multicast_mismatch: u64,
    pub drop_unknown_qpn: u64,
    pub drop_unknown_group: u64,
    pub drop_qkey_mismatch: u64,
    pub drop_no_recv_buffer: u64,
    pub drop_too_long: u64,
    /// Times a source's PSN jumped ahead by more than one (each is one run of missing PSNs).
    pub psn_gaps: u64,
    /// PSNs skipped over in those jumps.
    pub psn_gap_packets: u64,
    /// Packets repeating their source's last PSN.
    pub psn_duplicates: u64,
    /// Packets behind their source's last PSN (reordered, or filling an earlier gap).
    pub psn_late: u64,
    /// Packets from sources beyond `max_tracked_sources`, whose PSNs went unrecorded.
    pub psn_untracked: u64,
}

impl UdCounters {
    fn count(&mut self, d: &UdDrop) {
        let c = match d {
            UdDrop::NotRoce => &mut self.drop_not_roce,
            UdDrop::Malformed(_) => &mut self.drop_malformed,
            UdDrop::BadIcrc => &mut self.drop_bad_icrc,
            UdDrop::NotForUs => &mut self.drop_not_for_us,
            UdDrop::WrongTransport(_) => &mut self.drop_wrong_transport,
            UdDrop::PkeyMismatch(_) => &mut self.drop_pkey_mismatch,
            UdDrop::MulticastMismatch { .. } => &mut self.drop_multicast_mismatch,
            UdDrop::UnknownQpn(_) => &mut self.drop_unknown_qpn,
            UdDrop::UnknownGroup(_) => &mut self.drop_unknown_group,
            UdDrop::QkeyMismatch { .. } => &mut self.drop_qkey_mismatch,
            UdDrop::NoRecvBuffer(_) => &mut self.drop_no_recv_buffer,
            UdDrop::TooLong { .. } => &mut self.drop_too_long,
        };
        *c += 1;
    }
    /// Every drop, frame-level and per-QP.
    pub fn drops_total(&self) -> u64 {
        self.drop_not_roce
            + self.drop_malformed
            + self.drop_bad_icrc
            + self.drop_not_for_us
            + self.drop_wrong_transport
            + self.drop_pkey_mismatch
            + self.drop_multicast_mismatch
            + self.drop_unknown_qpn
            + self.drop_unknown_group
            + self.drop_qkey_mismatch
            + self.drop_no_recv_buffer
            + self.drop_too_long
    }
}

/// How a PSN relates to the last PSN seen from the same source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnStep {
    /// Exactly one ahead.
    Next,
    /// Ahead by `missing + 1`: `missing` PSNs in between were not seen.
    Gap { missing: u32 },
    /// The same PSN again.
    Duplicate,
    /// `behind` PSNs behind (reordered or late).
    Late { behind: u32 },
}

/// Classifies `got` against `last` by wrapping distance (`Psn::diff`, in (-2^23, 2^23]),
/// so a step across 0xFFFFFF → 0 is as ordinary as any other.
pub fn psn_step(last: Psn, got: Psn) -> PsnStep {
    match got.diff(last) {
        0 => PsnStep::Duplicate,
        1 => PsnStep::Next,
        d if d > 1 => PsnStep::Gap {
            missing: d as u32 - 1,
        },
        d => PsnStep::Late {
            behind: d.unsigned_abs(),
        },
    }
}

#[derive(Debug)]
struct RecvWqe {
    wr_id: u64,
    len: usize,
}

#[derive(Debug)]
struct UdQp {
    qkey: u32,
    next_psn: Psn,
    rq: VecDeque<RecvWqe>,
}

#[derive(Debug)]
struct SendWqe {
    qpn: u32,
    wr_id: u64,
    dest: UdAddress,
    /// The Q_Key after the high-bit rule.
    qkey: u32,
    psn: Psn,
    imm: Option<u32>,
    payload: Vec<u8>,
}

/// One host's UD queue pairs behind one port: demultiplexing by destination QPN,
/// multicast replication to attached QPs, and per-source PSN accounting.
///
/// Calling order, as for [`RcQueuePair`](super::RcQueuePair): after any verb or
/// `handle_frame`, drain `poll_transmit`, then `poll_event`. UD keeps no timers.
///
/// Memory ([`memory_bytes`](Self::memory_bytes)): the struct itself, plus
/// [`QP_BYTES`](Self::QP_BYTES) per QP, [`RECV_WQE_BYTES`](Self::RECV_WQE_BYTES) per
/// receive-queue slot, [`GROUP_BYTES`](Self::GROUP_BYTES) per group with an attached QP,
/// [`ATTACHMENT_BYTES`](Self::ATTACHMENT_BYTES) per (QP, group) attachment,
/// [`SOURCE_BYTES`](Self::SOURCE_BYTES) per tracked source, and queued sends and
/// events with their payloads. Map entries are counted as key plus value; B-tree node
/// and allocator overheads are not.
#[derive(Debug)]
pub struct UdEndpoint {
    cfg: UdConfig,
    qps: BTreeMap<u32, UdQp>,
    /// Group → attached QPNs; ordered so replication order is ascending QPN.
    groups: BTreeMap<Ipv4Address, BTreeSet<u32>>,
    /// (source IP, source QPN) → last PSN seen.
    sources: BTreeMap<(Ipv4Address, u32), Psn>,
    sendq: VecDeque<SendWqe>,
    events: VecDeque<UdEvent>,
    counters: UdCounters,
}

impl UdEndpoint {
    /// Bytes per QP (map key and state, receive queue slots excluded).
    pub const QP_BYTES: usize = size_of::<(u32, UdQp)>();
    /// Bytes per receive-queue slot.
    pub const RECV_WQE_BYTES: usize = size_of::<RecvWqe>();
    /// Bytes per group with at least one attached QP.
    pub const GROUP_BYTES: usize = size_of::<(Ipv4Address, BTreeSet<u32>)>();
    /// Bytes per (QP, group) attachment.
    pub const ATTACHMENT_BYTES: usize = size_of::<u32>();
    /// Bytes per tracked (source IP, source QPN).
    pub const SOURCE_BYTES: usize = size_of::<((Ipv4Address, u32), Psn)>();

    pub fn new(cfg: UdConfig) -> Result<Self, UdError> {
        cfg.validate()?;
        Ok(UdEndpoint {
            cfg,
            qps: BTreeMap::new(),
            groups: BTreeMap::new(),
            sources: BTreeMap::new(),
            sendq: VecDeque::new(),
            events: VecDeque::new(),
            counters: UdCounters::default(),
        })
    }

    // ---- getters ----

    pub fn config(&self) -> &UdConfig {
        &self.cfg
    }
    pub fn counters(&self) -> &UdCounters {
        &self.counters
    }
    /// The PSN QP `qpn`'s next posted send will carry.
    pub fn send_psn(&self, qpn: u32) -> Option<Psn> {
        self.qps.get(&qpn).map(|q| q.next_psn)
    }
    /// Receive buffers posted to QP `qpn` and not yet consumed.
    pub fn recv_queue_len(&self, qpn: u32) -> Option<usize> {
        self.qps.get(&qpn).map(|q| q.rq.len())
    }
    /// QPs attached to `group`, ascending.
    pub fn attached_qps(&self, group: Ipv4Address) -> impl Iterator<Item = u32> + '_ {
        self.groups.get(&group).into_iter().flatten().copied()
    }
    /// The last PSN recorded from source QP `src_qpn` at `src_ip`.
    pub fn source_psn(&self, src_ip: Ipv4Address, src_qpn: u32) -> Option<Psn> {
        self.sources.get(&(src_ip, src_qpn)).copied()
    }
    /// The longest frame `poll_transmit` returns (Ethernet header through ICRC).
    pub fn max_frame_len(&self) -> usize {
        ETHERNET_HEADER_LEN
            + IPV4_HEADER_LEN
            + UDP_HEADER_LEN
            + BTH_LEN
            + DETH_LEN
            + IMMDT_LEN
            + self.cfg.mtu
            + ICRC_LEN
    }
    /// Bytes of state held, by the figures in the type's documentation.
    pub fn memory_bytes(&self) -> usize {
        let qps: usize = self
            .qps
            .values()
            .map(|q| Self::QP_BYTES + q.rq.capacity() * Self::RECV_WQE_BYTES)
            .sum();
        let groups: usize = self
            .groups
            .values()
            .map(|s| Self::GROUP_BYTES + s.len() * Self::ATTACHMENT_BYTES)
            .sum();
        let sends: usize = self.sendq.capacity() * size_of::<SendWqe>()
            + self
                .sendq
                .iter()
                .map(|w| w.payload.capacity())
                .sum::<usize>();
        let events: usize = self.events.capacity() * size_of::<UdEvent>()
            + self
                .events
                .iter()
                .map(|e| match e {
                    UdEvent::Receive { data, .. } => data.capacity(),
                    _ => 0,
                })
                .sum::<usize>();
        size_of::<Self>() + qps + groups + self.sources.len() * Self::SOURCE_BYTES + sends + events
    }

    // ---- verbs ----

    /// Creates UD QP `qpn` with Q_Key `qkey`; its first send carries `start_psn`.
    pub fn create_qp(&mut self, qpn: u32, qkey: u32, start_psn: Psn) -> Result<(), UdError> {
        if qpn <= 1 || qpn >= MULTICAST_QPN {
            return Err(UdError::InvalidQpn(qpn));
        }
        if self.qps.contains_key(&qpn) {
            return Err(UdError::QpExists(qpn));
        }
        self.qps.insert(
            qpn,
            UdQp {
                qkey,
                next_psn: start_psn,
                rq: VecDeque::new(),
            },
        );
        Ok(())
    }

    /// Destroys QP `qpn`: detaches it from every group and discards its posted receives
    /// and its sends not yet transmitted (without completions).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), UdError> {
        self.qps.remove(&qpn).ok_or(UdError::NoSuchQp(qpn))?;
        self.groups.retain(|_, s| {
            s.remove(&qpn);
            !s.is_empty()
        });
        self.sendq.retain(|w| w.qpn != qpn);
        Ok(())
    }

    /// Attaches QP `qpn` to multicast group `group` (verbs' `ibv_attach_mcast` with the
    /// group's GID). Returns the group's MAC and GID.
    pub fn attach_multicast(
        &mut self,
        qpn: u32,
        group: Ipv4Address,
    ) -> Result<MulticastGroup, UdError> {
        let g = MulticastGroup::new(group)?;
        if !self.qps.contains_key(&qpn) {
            return Err(UdError::NoSuchQp(qpn));
        }
        if !self.groups.entry(group).or_default().insert(qpn) {
            return Err(UdError::AlreadyAttached { qpn, group });
        }
        Ok(g)
    }

    /// Detaches QP `qpn` from `group`; the group is forgotten with its last QP.
    pub fn detach_multicast(&mut self, qpn: u32, group: Ipv4Address) -> Result<(), UdError> {
        MulticastGroup::new(group)?;
        if !self.qps.contains_key(&qpn) {
            return Err(UdError::NoSuchQp(qpn));
        }
        let set = self
            .groups
            .get_mut(&group)
            .filter(|s| s.contains(&qpn))
            .ok_or(UdError::NotAttached { qpn, group })?;
        set.remove(&qpn);
        if set.is_empty() {
            self.groups.remove(&group);
        }
        Ok(())
    }

    /// Posts a receive buffer of `len` payload bytes to QP `qpn`.
    pub fn post_recv(&mut self, qpn: u32, wr_id: u64, len: usize) -> Result<(), UdError> {
        let qp = self.qps.get_mut(&qpn).ok_or(UdError::NoSuchQp(qpn))?;
        qp.rq.push_back(RecvWqe { wr_id, len });
        Ok(())
    }

    /// Posts one UD SEND from QP `qpn` to `dest`, with immediate data if `imm` is set.
    /// Returns the PSN it will carry. A refused post consumes no PSN.
    pub fn post_send(
        &mut self,
        qpn: u32,
        wr_id: u64,
        dest: &UdAddress,
        payload: &[u8],
        imm: Option<u32>,
    ) -> Result<Psn, UdError> {
        let mtu = self.cfg.mtu;
        let qp = self.qps.get_mut(&qpn).ok_or(UdError::NoSuchQp(qpn))?;
        if payload.len() > mtu {
            return Err(UdError::MessageTooLong {
                len: payload.len(),
                mtu,
            });
        }
        let consistent = match ipv4_multicast_mac(dest.ip) {
            Some(mac) => dest.qpn == MULTICAST_QPN && dest.mac == mac,
            None => dest.qpn < MULTICAST_QPN,
        };
        if !consistent {
            return Err(UdError::BadDestination(*dest));
        }
        let qkey = if dest.qkey & QKEY_USE_OWN != 0 {
            qp.qkey
        } else {
            dest.qkey
        };
        let psn = qp.next_psn;
        qp.next_psn = psn.next(); // modulo 2^24
        self.sendq.push_back(SendWqe {
            qpn,
            wr_id,
            dest: *dest,
            qkey,
            psn,
            imm,
            payload: payload.to_vec(),
        });
        Ok(psn)
    }

    // ---- handle ----

    /// Feeds one arriving Ethernet frame. Returns how many QPs received its message
    /// (0 if every one of them dropped it, each drop counted), or why the frame was
    /// dropped before reaching any QP (also counted). Never panics.
    pub fn handle_frame(&mut self, _now: Instant, frame: &[u8]) -> Result<usize, UdDrop> {
        let r = self.receive(frame);
        if let Err(d) = &r {
            self.counters.count(d);
        }
        r
    }

    fn receive(&mut self, frame: &[u8]) -> Result<usize, UdDrop> {
        let (eth, p) = match classify_frame(frame) {
            FrameClass::NotRoce => return Err(UdDrop::NotRoce),
            FrameClass::Malformed(e) => return Err(UdDrop::Malformed(e)),
            FrameClass::Roce { icrc_ok: false, .. } => return Err(UdDrop::BadIcrc),
            FrameClass::Roce { frame, .. } => (frame.eth, frame.roce),
        };
        let dst = p.ip.dst_addr;
        let group_mac = ipv4_multicast_mac(dst);
        let for_us = match group_mac {
            Some(mac) => eth.dst_addr == mac,
            None => dst == self.cfg.local_ip && eth.dst_addr == self.cfg.local_mac,
        };
        if !for_us {
            return Err(UdDrop::NotForUs);
        }
        let op = p.bth.opcode;
        if op != Opcode::UD_SEND_ONLY && op != Opcode::UD_SEND_ONLY_IMM {
            return Err(UdDrop::WrongTransport(op));
        }
        if p.bth.tver != 0 {
            return Err(UdDrop::Malformed(crate::wire::Error::Unsupported(
                "bth tver",
            )));
        }
        // The UD layout always has a DETH; stay total anyway.
        let deth = p
            .ext
            .deth
            .ok_or(UdDrop::Malformed(crate::wire::Error::Truncated("deth")))?;
        if !pkey_matches(p.bth.pkey, self.cfg.pkey) {
            return Err(UdDrop::PkeyMismatch(p.bth.pkey));
        }
        let qpn = p.bth.dest_qp;
        let multicast = group_mac.is_some();
        if multicast != (qpn == MULTICAST_QPN) {
            return Err(UdDrop::MulticastMismatch { qpn, ip: dst });
        }
        // A well-formed UD packet that reached this host: it counts for loss accounting
        // whether or not a QP takes it. On a broadcast-select fabric every host sees
        // every group's packets, so a source's PSNs stay contiguous here even when it
        // sends to groups this host never joined.
        self.record_psn(p.ip.src_addr, deth.src_qp, p.bth.psn);
        if multicast {
            if !self.groups.contains_key(&dst) {
                return Err(UdDrop::UnknownGroup(dst));
            }
        } else if !self.qps.contains_key(&qpn) {
            return Err(UdDrop::UnknownQpn(qpn));
        }
        self.counters.rx_packets += 1;
        let Self {
            qps,
            groups,
            events,
            counters,
            ..
        } = self;
        let mut delivered = 0;
        if multicast {
            counters.rx_multicast_packets += 1;
            for &q in groups.get(&dst).into_iter().flatten() {
                if let Some(qp) = qps.get_mut(&q) {
                    delivered += deliver(qp, q, &p, deth, Some(dst), events, counters) as usize;
                }
            }
        } else if let Some(qp) = qps.get_mut(&qpn) {
            delivered += deliver(qp, qpn, &p, deth, None, events, counters) as usize;
        }
        Ok(delivered)
    }

    fn record_psn(&mut self, src_ip: Ipv4Address, src_qpn: u32, psn: Psn) {
        let c = &mut self.counters;
        let full = self.sources.len() >= self.cfg.max_tracked_sources;
        match self.sources.get_mut(&(src_ip, src_qpn)) {
            None if full => c.psn_untracked += 1,
            None => {
                self.sources.insert((src_ip, src_qpn), psn);
            }
            Some(last) => match psn_step(*last, psn) {
                PsnStep::Next => *last = psn,
                PsnStep::Gap { missing } => {
                    c.psn_gaps += 1;
                    c.psn_gap_packets += missing as u64;
                    *last = psn;
                }
                // Neither moves the record back: the source's newest PSN stays the reference.
                PsnStep::Duplicate => c.psn_duplicates += 1,
                PsnStep::Late { .. } => c.psn_late += 1,
            },
        }
    }

    // ---- poll ----

    /// Writes the next frame to send (Ethernet header through ICRC) into `buf`, in
    /// posting order across QPs. Each one completes its send (a
    /// [`UdEvent::SendComplete`]). `buf` must hold [`max_frame_len`](Self::max_frame_len)
    /// bytes (a shorter one is a driver bug and panics).
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let w = self.sendq.pop_front()?;
        let opcode = if w.imm.is_some() {
            Opcode::UD_SEND_ONLY_IMM
        } else {
            Opcode::UD_SEND_ONLY
        };
        let mut bth = BthRepr::new(opcode, w.dest.qpn, w.psn);
        bth.pkey = self.cfg.pkey;
        bth.pad_count = ((4 - w.payload.len() % 4) % 4) as u8;
        let ext = ExtHeaders {
            deth: Some(DethRepr {
                qkey: w.qkey,
                reserved: 0,
                src_qp: w.qpn,
            }),
            imm: w.imm,
            ..Default::default()
        };
        let f = RoceFrameRepr {
            eth: EthernetRepr {
                src_addr: self.cfg.local_mac,
                dst_addr: w.dest.mac,
                ethertype: EtherType::Ipv4,
            },
            roce: RoceRepr::new(
                self.cfg.local_ip,
                w.dest.ip,
                self.cfg.dscp,
                Ecn::NotEct,
                self.cfg.udp_src_port,
                bth,
                ext,
                &w.payload,
            ),
        };
        let len = f.buffer_len();
        f.emit(&mut buf[..len]);
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += w.payload.len() as u64;
        if w.dest.qpn == MULTICAST_QPN {
            self.counters.tx_multicast_packets += 1;
        }
        self.events.push_back(UdEvent::SendComplete {
            qpn: w.qpn,
            wr_id: w.wr_id,
        });
        Some(Transmit::one(len))
    }

    /// UD keeps no timers; present for the shape every rocast state machine shares.
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    pub fn poll_event(&mut self) -> Option<UdEvent> {
        self.events.pop_front()
    }
}

/// The P_Key check of IBTA vol. 1 §9.6 (header validation): the low 15 bits must
/// match and at least one side be a full member (bit 15).
fn pkey_matches(a: u16, b: u16) -> bool {
    a & 0x7fff == b & 0x7fff && (a | b) & 0x8000 != 0
}

/// The per-QP half of reception: Q_Key check, then a receive buffer. Returns whether
/// the message was delivered; a drop is counted here.
fn deliver(
    qp: &mut UdQp,
    qpn: u32,
    p: &RoceRepr<'_>,
    deth: DethRepr,
    group: Option<Ipv4Address>,
    events: &mut VecDeque<UdEvent>,
    counters: &mut UdCounters,
) -> bool {
    let drop = if deth.qkey != qp.qkey {
        UdDrop::QkeyMismatch {
            qpn,
            got: deth.qkey,
        }
    } else if let Some(wqe) = qp.rq.pop_front() {
        if p.payload.len() <= wqe.len {
            counters.rx_deliveries += 1;
            counters.rx_bytes += p.payload.len() as u64;
            events.push_back(UdEvent::Receive {
                qpn,
                wr_id: wqe.wr_id,
                src_ip: p.ip.src_addr,
                src_qpn: deth.src_qp,
                psn: p.bth.psn,
                imm: p.ext.imm,
                group,
                data: p.payload.to_vec(),
            });
            return true;
        }
        // Verbs completes the buffer with a local length error; the QP carries on.
        events.push_back(UdEvent::RecvError {
            qpn,
            wr_id: wqe.wr_id,
            error: WcError::LocalLength,
        });
        UdDrop::TooLong {
            qpn,
            len: p.payload.len(),
            buf_len: wqe.len,
        }
    } else {
        UdDrop::NoRecvBuffer(qpn)
    };
    counters.count(&drop);
    false
}

#[cfg(test)]
#[path = "ud_tests.rs"]
mod tests;
