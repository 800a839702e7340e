//! The discrete-event engine: links, switch ports and host NICs driving unmodified
//! `rnic::RcQueuePair` endpoints and the `fabric` switch logic.
//!
//! Design (after htsim): time is integer picoseconds; the event queue holds at most one
//! pending event per port transmitter, one per link direction (the head of its
//! in-flight FIFO), one per QP timer, plus flow starts and link changes. Packets are
//! [`SimPacket`] records in a slab reused through a free list, and queues and links
//! hold a 20-byte `Hop` (the slot plus the fields routing reads), so steady state
//! allocates nothing per packet and a unicast switch hop does not touch the record.
//! Routes are precomputed (`plan::Routes`). Ties in time break by insertion order, so a
//! run is a pure function of scenario and seed.
//!
//! Memory: per port ~300 bytes (8 class queues, in-flight FIFO, counters), per switch
//! 200 bytes per port of MMU state, per active flow two QPs (~1.5 KB), per packet in
//! flight 96 bytes (`SimPacket`), plus 28 bytes per packet in a switch queue (its
//! `Hop`, ingress port and bytes) and 32 per packet on a link (arrival time and `Hop`).

pub mod event_queue;
mod flow;
pub mod frames;
pub mod tree_multicast;

pub use event_queue::EventQueue;
pub use flow::FlowSpec;

use crate::packet::{host_ip, host_of_ip, traffic_class, SimPacket, CONTROL_CLASS};
use crate::uniform;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use rocast_core::control::SwitchReport;
use rocast_core::fabric::cepheus::{
    is_mcst_id, CepheusAction, CepheusSwitch, CnpFilterPolicy, GroupAddressSpace, NextHop,
};
use rocast_core::fabric::mmu::PRIORITIES;
use rocast_core::fabric::peel::PeelAction;
use rocast_core::fabric::{ecmp_hash, EcnRed};
use rocast_core::overlay::model::MessageCost;
use rocast_core::plan::prefix::PrefixLayout;
use rocast_core::plan::{NodeRole, Routes, Topology};
use rocast_core::rnic::{
    Dcqcn, DcqcnConfig, Event, Payload, QpConfig, RateController, RcQueuePair, Retransmission,
    SendOp, SendRequest, Unlimited,
};
use rocast_core::switch::mrp_agent::{self, UnicastRoute, UnicastTable};
use rocast_core::switch::pipeline::{
    self, MrpMessage, PacketClass, PacketHeadline, UnicastDecision,
};
use rocast_core::switch::{EgressConfig, EgressQueues, Ingress};
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::mrp::MrpRepr;
use rocast_core::wire::peel::PEEL_UDP_PORT;
use rocast_core::wire::{
    Ipv4Address, AETH_LEN, BTH_LEN, ICRC_LEN, IMMDT_LEN, IPV4_HEADER_LEN, RETH_LEN, UDP_HEADER_LEN,
};
use rocast_core::wire::{IP_PROTO_UDP, ROCEV2_UDP_PORT};
use std::collections::VecDeque;
use tree_multicast::{GroupForwarding, PeelFabric, Step, TreeMulticastError};

/// Why the engine refused to be built or to open, post or install something: the
/// core's errors pass through unchanged, the engine's own checks name what was asked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Routing(#[from] rocast_core::plan::routing::RoutingError),
    #[error(transparent)]
    Prefix(#[from] rocast_core::plan::prefix::PrefixError),
    #[error(transparent)]
    Mft(#[from] rocast_core::fabric::cepheus::MftError),
    #[error(transparent)]
    QpConfig(#[from] rocast_core::rnic::ConfigError),
    #[error(transparent)]
    Post(#[from] rocast_core::rnic::PostError),
    #[error(transparent)]
    TreeMulticast(#[from] TreeMulticastError),
    #[error("loss {p} toward host {host}: no such host or not in [0, 1)")]
    LossTowardHost { p: f64, host: u32 },
    #[error("{0} is not a McstID")]
    NotMcstId(Ipv4Address),
    #[error("group {0} exists")]
    GroupExists(Ipv4Address),
    #[error("QP {qpn} is not on source host {host}")]
    SourceQpElsewhere { qpn: u32, host: u32 },
    #[error("QP {qpn} is not on receiver host {host}")]
    ReceiverQpElsewhere { qpn: u32, host: u32 },
    #[error("host {0} is a receiver twice")]
    ReceiverTwice(u32),
    #[error("too many receivers")]
    TooManyReceivers,
    #[error("tree link not at its node")]
    TreeLinkNotAtNode,
    #[error("switch {switch}: {source}")]
    SwitchPath {
        switch: u32,
        #[source]
        source: rocast_core::fabric::cepheus::MftError,
    },
    #[error("no such QP")]
    NoSuchQp,
    #[error("region too large")]
    RegionTooLarge,
    #[error("closed")]
    QpClosed,
    #[error("connection {src} -> {dst}: not two distinct hosts of {hosts}")]
    NotTwoHosts { src: u32, dst: u32, hosts: u32 },
    #[error("out of 24-bit QP numbers")]
    OutOfQpns,
    #[error("no connection {0}")]
    NoConnection(u32),
    #[error("no host {0}")]
    NoHost(u32),
    #[error("not an app QP")]
    NotAppQp,
    #[error("no QP {0}")]
    NoQp(u32),
    #[error("node {0} is not a switch")]
    NotSwitch(u32),
}

/// Hands `repr` to a QP; a packet the QP refuses is counted. The caller services
/// the QP afterwards.
fn qp_input(
    qp: &mut RcQueuePair,
    now: u64,
    repr: &rocast_core::wire::RoceRepr<'_>,
    totals: &mut Totals,
) {
    if qp.handle_repr(Instant::from_ps(now), repr).is_err() {
        totals.qp_rx_drops += 1;
    }
}

/// The ingress of a replicated copy whose buffer cell the first copy holds.
const SHARED_CELL: u16 = u16::MAX;

/// Settings the engine needs beyond the topology (resolved from a scenario).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub seed: u64,
    pub mtu: usize,
    pub window: u32,
    pub retransmission: Retransmission,
    pub rto: Duration,
    pub ack_every: u32,
    pub cnp_interval: Duration,
    /// DCQCN parameters (line rate filled per host), or `None` for no rate control.
    pub dcqcn: Option<DcqcnConfig>,
    pub lossless: bool,
    pub buffer_bytes: u64,
    pub reserve_bytes: u64,
    pub resume_offset_bytes: u64,
    /// 0: 3 × the port's bandwidth-delay product.
    pub headroom_bytes: u64,
    pub alpha_shift: u8,
    pub ecn: Option<EcnRed>,
    pub pfc_log: bool,
    pub qlen_interval: Option<Duration>,
    /// Link indices to capture, and the most packets to keep.
    pub capture_links: Vec<u32>,
    pub capture_max_packets: u64,
    /// Carry payload bytes through the fabric (a copy per packet in flight), so that
    /// receivers' memory holds what was sent. Off for synthetic load.
    pub carry_payload: bool,
    /// Cepheus: most groups one switch's MFT holds.
    pub mft_max_groups: usize,
    /// Cepheus: which CNPs a switch passes toward a multicast source.
    pub cnp_filter: CnpFilterPolicy,
    /// Latency of the out-of-band control channel between hosts (MRP confirmations,
    /// switch reports): TCP over the management network in a real deployment.
    pub control_latency: Duration,
    /// Random loss inside the switches of one tier: every frame a switch of this tier
    /// sends drops with this probability (Cepheus §V-C, Fig. 13: "randomly discarding
    /// packets in the middle switches"), once per switch it crosses.
    pub switch_loss: Option<(u8, f64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum EvKind {
    FlowStart,
    LinkChange,
    Pfc,
    Arrive,
    TxDone,
    QpTimer,
    Sample,
    Post,
    Control,
    LossChange,
    /// A switch's multicast engine asked to be woken (a CNP filter releasing held CNPs).
    SwitchTimer,
}

const KINDS: [EvKind; 11] = [
    EvKind::FlowStart,
    EvKind::LinkChange,
    EvKind::Pfc,
    EvKind::Arrive,
    EvKind::TxDone,
    EvKind::QpTimer,
    EvKind::Sample,
    EvKind::Post,
    EvKind::Control,
    EvKind::LossChange,
    EvKind::SwitchTimer,
];

/// An event of the engine's queue: the kind and arguments packed in one word (the
/// queue keeps the time and the insertion order beside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ev {
    /// kind << 56 | b << 32 | a
    payload: u64,
}

impl Ev {
    fn kind(&self) -> EvKind {
        KINDS[(self.payload >> 56) as usize]
    }
    fn a(&self) -> u32 {
        self.payload as u32
    }
    fn b(&self) -> u32 {
        ((self.payload >> 32) & 0xff_ffff) as u32
    }
}

/// Counters of one egress port (one direction of a link).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PortCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Delivered to the far end.
    pub rx_bytes: u64,
    /// Lost on the link (random loss or a failed link).
    pub link_drops: u64,
    pub link_drop_bytes: u64,
    /// Dropped by the MMU on enqueue to this port, or flushed when the link failed.
    pub queue_drops: u64,
    pub queue_drop_bytes: u64,
    pub ecn_marks: u64,
    pub pauses_sent: u64,
    pub pauses_received: u64,
    pub paused_ps: u64,
}

/// A packet as a switch sees it on the way: its slab slot and what routing and
/// queueing read (addresses, UDP source port, class, wire bytes, ECN capability,
/// label). It travels beside the slot through egress queues, the transmitter and the
/// link, so a unicast hop never reads the packet's record: on a large fabric the
/// record has long left the cache, and that read was a fifth of `permutation-1024`'s
/// time (`docs/perf/`). Built from the record where the record is at hand (the NIC,
/// multicast copies); the fields it copies do not change between hops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Hop {
    slot: u32,
    wire: u32,
    src_ip: u32,
    dst_ip: u32,
    sport: u16,
    class: u8,
    bits: u8,
}

impl Hop {
    const ECT: u8 = 1;
    const LABELLED: u8 = 2;
    const IDLE: Hop = Hop {
        slot: u32::MAX,
        wire: 0,
        src_ip: 0,
        dst_ip: 0,
        sport: 0,
        class: 0,
        bits: 0,
    };
    fn of(sp: &SimPacket, slot: u32) -> Hop {
        Hop {
            slot,
            wire: sp.wire_len(),
            src_ip: sp.src_ip,
            dst_ip: sp.dst_ip,
            sport: sp.sport,
            class: sp.class,
            bits: if sp.ecn != 0 { Self::ECT } else { 0 }
                | if sp.label().is_some() {
                    Self::LABELLED
                } else {
                    0
                },
        }
    }
    fn ect(self) -> bool {
        self.bits & Self::ECT != 0
    }
    fn labelled(self) -> bool {
        self.bits & Self::LABELLED != 0
    }
}

/// Laid out (`repr(C)`) so that what every packet's events read is in the first two
/// cache lines, which `Engine::prefetch_ahead` loads: the link FIFO, the ends, the
/// state and the delay in the first (64 bytes); the serialisation, loss, the packet
/// on the wire and the per-packet counters in the second (64); the rest after.
#[repr(C)]
struct Port {
    /// On the link: (arrival time, packet).
    in_flight: VecDeque<(u64, Hop)>,
    node: u32,
    /// The opposite direction's port (owned by the peer).
    reverse: u32,
    local: u16,
    up: bool,
    /// Classes paused by the peer's PFC (bit per class).
    paused: u8,
    capture: bool,
    delay_ps: u64,
    /// The last serialisation computed, `last_ser_bytes` wire bytes in
    /// `last_ser_ps`: most packets on a port are the same size, and the exact time is
    /// a u128 division.
    last_ser_bytes: u32,
    link: u32,
    last_ser_ps: u64,
    loss: f64,
    /// The packet being transmitted ([`Hop::IDLE`] when none: see [`Port::busy`]).
    current: Hop,
    c: PortCounters,
    rate_bps: u64,
    paused_since: [u64; PRIORITIES],
}

impl Port {
    /// Whether the transmitter is sending a packet.
    fn busy(&self) -> bool {
        self.current.slot != Hop::IDLE.slot
    }
}

/// What a QP belongs to: a scenario flow, or a connection opened with
/// [`Engine::open_connection`].
#[derive(Clone, Copy, Debug)]
enum QpOwner {
    Flow(u32),
    Conn(u32),
    /// A QP the layer above drives directly ([`Engine::open_qp`]).
    App,
}

/// QP numbers of flow `i`: 2i+2 (sender) and 2i+3 (receiver). QPNs are never reused
/// (late packets to a finished flow are counted, not misdelivered); 24 bits allow 8
/// million flows.
fn flow_qpns(i: u32) -> (u32, u32) {
    (2 * i + 2, 2 * i + 3)
}

struct QpSlot {
    qp: RcQueuePair,
    host: u32,
    owner: QpOwner,
    in_ctrl: bool,
    in_active: bool,
    timer_at: u64,
}

struct Host {
    port: u32,
    ctrl: VecDeque<u32>,
    active: VecDeque<u32>,
    /// Copies a multicast source's NIC made of one packet (one per PEEL label, or
    /// repairs), waiting for the wire.
    copies: VecDeque<u32>,
}

/// A persistent RC connection opened by a layer above the engine (the overlay
/// multicast drivers): the sender QP at `src`, the receiver QP at `dst`.
#[derive(Clone, Copy, Debug)]
struct Connection {
    sq: u32,
    rq: u32,
}

/// What the engine reports to the layer that posts messages on connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppEvent {
    /// A WRITE with immediate arrived whole at the connection's receiver.
    Delivered { conn: u32, imm: u32, len: usize },
    /// A posted message completed at the sender: acknowledged, or failed.
    SendDone { conn: u32, wr_id: u64, ok: bool },
    /// A WRITE with immediate arrived whole at an app QP ([`Engine::open_qp`]).
    QpDelivered { qpn: u32, imm: u32, len: usize },
    /// A WRITE posted on an app QP completed: acknowledged, or failed.
    QpSendDone { qpn: u32, wr_id: u64, ok: bool },
    /// A SEND with immediate arrived whole at an app QP (its bytes, when carried).
    QpReceived { qpn: u32, imm: u32, data: Vec<u8> },
    /// An MRP packet reached host `host` (its UDP payload).
    Mrp { host: u32, bytes: Vec<u8> },
    /// A control-channel message from host `from` reached host `to`.
    Control { from: u32, to: u32, bytes: Vec<u8> },
    /// A switch refused a registration; it reports to the group's controller over
    /// the control channel.
    SwitchReport(SwitchReport),
}

/// An out-of-band or MRP message in transit.
enum ControlMsg {
    /// An MRP packet arriving at `node` on local port `port`.
    Mrp {
        node: u32,
        port: u16,
        bytes: Vec<u8>,
    },
    /// A control-channel message, or a switch report, to deliver as an app event.
    App(AppEvent),
}

struct PendingPost {
    target: PostTarget,
    remote_offset: u64,
    data: Payload,
    imm: u32,
    wr_id: u64,
}

/// Per-flow record, as `fct.txt` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub size: u64,
    pub start_ps: u64,
    /// Sender completion (all data acknowledged), if it finished.
    pub finish_ps: Option<u64>,
    /// Receiver saw the whole message.
    pub received_ps: Option<u64>,
    pub standalone_ps: u64,
    pub failed: bool,
}

/// Totals across the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub events: u64,
    pub host_tx_bytes: u64,
    pub host_rx_bytes: u64,
    pub switch_rx_bytes: u64,
    pub switch_tx_bytes: u64,
    pub link_drops: u64,
    pub queue_drops: u64,
    pub drop_bytes: u64,
    pub unroutable: u64,
    pub ecn_marks: u64,
    pub pauses: u64,
    pub stale_packets: u64,
    pub qp_rx_drops: u64,
    pub retransmitted: u64,
    pub timeouts: u64,
    pub cnps: u64,
    pub flows_started: u64,
    pub flows_finished: u64,
    pub flows_failed: u64,
    pub peak_packets: u64,
}

/// A tree-multicast group ([`Engine::install_tree_group`]): PEEL, or per-group trees.
#[derive(Clone, Debug)]
pub struct TreeGroupSpec {
    /// The group's address: copies in the fabric are addressed to it.
    pub mcst_id: u32,
    pub source: u32,
    /// The source's QP, connected to (McstID, 1) as a Cepheus member's is.
    pub source_qpn: u32,
    /// (host, QPN) of each receiver; each receiver's QP is connected to the source's
    /// address and QPN, so its ACKs, NAKs and CNPs are ordinary unicast.
    pub receivers: Vec<(u32, u32)>,
    pub forwarding: GroupForwarding,
    /// When the programmable cores hold the group's rule (PEEL §3.3): from then on
    /// first transmissions use `forwarding.core_send`.
    pub core_from: Option<Instant>,
    /// Compose with Cepheus' in-network feedback aggregation: the tree's switches get
    /// MFT paths for the group, receivers' QPs are connected to (McstID, 1) so their
    /// ACKs, NAKs and CNPs climb the tree and are aggregated on the way (Cepheus
    /// §III-D), and retransmissions go as Cepheus packets the switches filter. Data
    /// still travels by `forwarding`. `None`: aggregation at the source's NIC.
    pub switch_feedback: Option<rocast_core::plan::multicast_tree::MulticastTree>,
}

/// What tree multicast did, across groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeMulticastStats {
    /// Data packets the sources' QPs sent to a group, and how many of them went to
    /// every receiver (first transmissions, or retransmissions all still need).
    pub source_packets: u64,
    pub full_transmissions: u64,
    /// Copies put on the sources' links for full transmissions (one per label).
    pub label_copies: u64,
    /// Of those, sent with the programmable cores' rule in place.
    pub core_copies: u64,
    /// Retransmitted copies sent only to the receivers that had not acknowledged
    /// them, as unicast.
    pub repair_copies: u64,
    /// Copies a ToR discarded (rack over-covered) or a static rule could not send
    /// (its port's link down).
    pub over_cover_discards: u64,
    /// Labelled copies at a switch or host that had no use for them (none expected).
    pub stray_copies: u64,
    /// Copies host-side agents sent back into the fabric (Orca's rack fan-out).
    pub agent_copies: u64,
    /// Feedback packets from receivers into the sources' aggregators, and the
    /// aggregated feedback that reached the sources' QPs.
    pub feedback_in: u64,
    pub feedback_to_source: u64,
    /// With switch aggregation: feedback packets that reached the sources' hosts
    /// (already aggregated by the fabric), and retransmissions sent as Cepheus
    /// packets.
    pub switch_feedback_to_source: u64,
    pub cepheus_retransmissions: u64,
}

struct TreeGroup {
    mcst: u32,
    source: u32,
    source_qpn: u32,
    /// Receiver host → (aggregator port, QPN).
    receivers: std::collections::BTreeMap<u32, (u16, u32)>,
    forwarding: GroupForwarding,
    core_from_ps: Option<u64>,
    /// Feedback is aggregated by the switches; the highest PSN sent so far tells
    /// first transmissions (labelled) from retransmissions (Cepheus packets).
    switch_feedback: bool,
    highest_psn: Option<u32>,
    /// The source NIC's feedback aggregation and retransmission filter: Cepheus'
    /// MFT logic with one path per receiver (port 0: the source's QP), so the
    /// sender tracks the minimum over receivers and repairs only the laggards
    /// (PEEL §4 leaves reliability to the hosts). CNPs all pass: the source's DCQCN
    /// reacts at most once per `decrease_interval` (PEEL's 50 µs guard timer).
    aggregator: CepheusSwitch,
}

/// Items waiting for their event (posts, control messages), in slots reused through a
/// free list so that an event carries a `u32` index, not the item.
struct SlotPool<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for SlotPool<T> {
    fn default() -> Self {
        SlotPool {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> SlotPool<T> {
    fn insert(&mut self, item: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(item);
                i
            }
            None => {
                self.slots.push(Some(item));
                self.slots.len() as u32 - 1
            }
        }
    }
    /// The item in slot `i`, freeing the slot; `None` if it is empty.
    fn take(&mut self, i: u32) -> Option<T> {
        let item = self.slots.get_mut(i as usize)?.take()?;
        self.free.push(i);
        Some(item)
    }
}

pub struct Engine {
    pub topo: Topology,
    routes: Routes,
    /// Scheduled loss changes (port, new loss), by index ([`Engine::schedule_loss_toward_host`]).
    loss_changes: Vec<(u32, f64)>,
    cfg: EngineConfig,
    now: u64,
    events: EventQueue<Ev>,
    ports: Vec<Port>,
    node_port_base: Vec<u32>,
    /// Each switch's egress queues (index: switch − hosts): the core's admission, PFC
    /// and RED decisions; the engine owns the links.
    egress: Vec<EgressQueues<Hop>>,
    hosts: Vec<Host>,
    qps: Vec<Option<Box<QpSlot>>>,
    flows: Vec<FlowSpec>,
    pub results: Vec<FlowResult>,
    dependents: Vec<Vec<u32>>,
    slab: Vec<SimPacket>,
    free: Vec<u32>,
    rng: ChaCha8Rng,
    pub totals: Totals,
    pub pfc_log: Vec<String>,
    pub qlen_log: Vec<String>,
    pub capture: Vec<(u64, Vec<u8>)>,
    frame_buf: Vec<u8>,
    event_buf: Vec<Event>,
    last_event: u64,
    /// Bytes of packets no route could take (part of `Totals::drop_bytes` once
    /// finalized).
    unroutable_bytes: u64,
    conns: Vec<Connection>,
    posts: SlotPool<PendingPost>,
    app_events: VecDeque<(u64, AppEvent)>,
    /// Messages posted (or due to be) on connections and not yet completed.
    app_outstanding: u64,
    next_conn_qpn: u32,
    /// Payload bytes per slab slot, when `carry_payload`.
    payloads: Vec<Vec<u8>>,
    payload_scratch: Vec<u8>,
    /// The traffic class of the data packets our QPs send (from their DSCP): the
    /// class whose PFC pause stops a NIC's data.
    data_class: u8,
    /// Each switch's multicast engine (index: switch − hosts).
    cepheus: Vec<CepheusSwitch>,
    cepheus_out: Vec<CepheusAction>,
    /// Per switch: the wake-up its multicast engine has scheduled (ps).
    switch_timer: Vec<Option<u64>>,
    controls: SlotPool<ControlMsg>,
    /// MRP datagrams at a switch that parse as nothing MRP carries.
    pub mrp_malformed: u64,
    /// Prunes and releases a switch refused (not from the group's source direction,
    /// or for a group it does not hold: a repeated release finds nothing).
    pub mrp_ignored: u64,
    tree_groups: Vec<TreeGroup>,
    tree_by_mcst: std::collections::BTreeMap<u32, u32>,
    tree_by_source_qp: std::collections::BTreeMap<u32, u32>,
    /// PEEL's switch engines (`PeelSwitch`): the prefix tier's static rules, built
    /// when the first PEEL group arrives (empty before), and the racks' memberships.
    peel: PeelFabric,
    copy_scratch: Vec<(u16, SimPacket)>,
    pub tree_stats: TreeMulticastStats,
}

/// Where a post goes: a connection's sender, or an app QP with the remote key to use.
#[derive(Clone, Copy, Debug)]
enum PostTarget {
    Conn(u32),
    Qp {
        qpn: u32,
        rkey: u32,
    },
    /// A SEND with immediate on an app QP.
    QpSend {
        qpn: u32,
    },
}

impl PostTarget {
    fn endpoint(self) -> AppEndpoint {
        match self {
            PostTarget::Conn(c) => AppEndpoint::Conn(c),
            PostTarget::Qp { qpn, .. } | PostTarget::QpSend { qpn } => AppEndpoint::Qp(qpn),
        }
    }
}

/// What the layer above knows a QP by: its connection, or (app QPs) its QPN.
#[derive(Clone, Copy, Debug)]
enum AppEndpoint {
    Conn(u32),
    Qp(u32),
}

impl AppEndpoint {
    fn send_done(self, wr_id: u64, ok: bool) -> AppEvent {
        match self {
            AppEndpoint::Conn(conn) => AppEvent::SendDone { conn, wr_id, ok },
            AppEndpoint::Qp(qpn) => AppEvent::QpSendDone { qpn, wr_id, ok },
        }
    }
    fn delivered(self, imm: u32, len: usize) -> AppEvent {
        match self {
            AppEndpoint::Conn(conn) => AppEvent::Delivered { conn, imm, len },
            AppEndpoint::Qp(qpn) => AppEvent::QpDelivered { qpn, imm, len },
        }
    }
    fn received(self, imm: u32, data: &[u8]) -> AppEvent {
        match self {
            AppEndpoint::Conn(conn) => AppEvent::Delivered {
                conn,
                imm,
                len: data.len(),
            },
            AppEndpoint::Qp(qpn) => AppEvent::QpReceived {
                qpn,
                imm,
                data: data.to_vec(),
            },
        }
    }
}

impl Engine {
    pub fn new(
        topo: Topology,
        cfg: EngineConfig,
        flows: Vec<FlowSpec>,
    ) -> Result<Self, EngineError> {
        let routes = Routes::compute(&topo)?;
        let n = topo.num_nodes();
        let mut node_port_base = Vec::with_capacity(n + 1);
        let mut total = 0u32;
        for v in 0..n {
            node_port_base.push(total);
            total += topo.ports(v as u32).len() as u32;
        }
        node_port_base.push(total);
        let mut ports = Vec::with_capacity(total as usize);
        for v in 0..n as u32 {
            for (local, &(link, peer)) in topo.ports(v).iter().enumerate() {
                let l = &topo.links[link as usize];
                let peer_local = topo.port_of(peer, link).expect("symmetric") as u32;
                ports.push(Port {
                    node: v,
                    local: local as u16,
                    link,
                    reverse: node_port_base[peer as usize] + peer_local,
                    rate_bps: l.rate_bps,
                    delay_ps: l.delay.as_ps(),
                    loss: l.loss,
                    up: !l.failed,
                    paused: 0,
                    paused_since: [0; PRIORITIES],
                    current: Hop::IDLE,
                    last_ser_bytes: 0,
                    last_ser_ps: 0,
                    in_flight: VecDeque::new(),
                    capture: cfg.capture_links.contains(&link),
                    c: PortCounters::default(),
                });
                if let (Some((tier, p)), NodeRole::Switch { tier: t }) =
                    (cfg.switch_loss, topo.roles[v as usize])
                {
                    if t == tier {
                        ports.last_mut().expect("just pushed").loss = p;
                    }
                }
            }
        }
        let n_hosts = topo.num_hosts();
        let mut egress = Vec::with_capacity(topo.num_switches());
        for s in n_hosts..n {
            let base = node_port_base[s] as usize;
            let np = topo.ports(s as u32).len();
            let headroom = (0..np)
                .map(|i| {
                    if cfg.headroom_bytes > 0 {
                        cfg.headroom_bytes
                    } else {
                        let p = &ports[base + i];
                        // 3 × BDP of the link, as the HPCC simulator sizes it.
                        (p.rate_bps as u128 * p.delay_ps as u128 / 8 / 1_000_000_000_000 * 3)
                            .max(3 * 1100) as u64
                    }
                })
                .collect();
            egress.push(EgressQueues::new(EgressConfig {
                mmu: rocast_core::fabric::MmuConfig {
                    buffer_bytes: cfg.buffer_bytes,
                    reserve_bytes: cfg.reserve_bytes,
                    resume_offset_bytes: cfg.resume_offset_bytes,
                    headroom_bytes: headroom,
                    alpha_shift: vec![cfg.alpha_shift; np],
                    lossless: cfg.lossless,
                },
                red: cfg.ecn,
                control_class: Some(CONTROL_CLASS),
            }));
        }
        let hosts = (0..n_hosts)
            .map(|h| Host {
                copies: VecDeque::new(),
                port: node_port_base[h],
                ctrl: VecDeque::new(),
                active: VecDeque::new(),
            })
            .collect();
        let mut dependents = vec![Vec::new(); flows.len()];
        for (i, f) in flows.iter().enumerate() {
            if let Some(a) = f.after {
                dependents[a as usize].push(i as u32);
            }
        }
        let mut results = Vec::with_capacity(flows.len());
        for f in &flows {
            let standalone_ps = standalone_fct(&topo, &routes, f.src, f.dst, f.size, cfg.mtu);
            results.push(FlowResult {
                src: f.src,
                dst: f.dst,
                sport: 0,
                size: f.size,
                start_ps: f.start_ps,
                finish_ps: None,
                received_ps: None,
                standalone_ps,
                failed: false,
            });
        }
        let flows_len = flows.len() as u32;
        let cepheus: Vec<CepheusSwitch> = (n_hosts..n)
            .map(|s| empty_cepheus_switch(&topo, &cfg, s as u32))
            .collect();
        let mut e = Engine {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            routes,
            loss_changes: Vec::new(),
            cfg,
            now: 0,
            events: EventQueue::new(),
            ports,
            node_port_base,
            egress,
            hosts,
            qps: Vec::new(),
            flows,
            results,
            dependents,
            slab: Vec::new(),
            free: Vec::new(),
            totals: Totals::default(),
            pfc_log: Vec::new(),
            qlen_log: Vec::new(),
            capture: Vec::new(),
            frame_buf: Vec::new(),
            event_buf: Vec::new(),
            last_event: 0,
            unroutable_bytes: 0,
            conns: Vec::new(),
            posts: SlotPool::default(),
            app_events: VecDeque::new(),
            app_outstanding: 0,
            next_conn_qpn: 2 * flows_len + 2,
            payloads: Vec::new(),
            payload_scratch: Vec::new(),
            data_class: traffic_class(
                QpConfig::new(Ipv4Address::UNSPECIFIED, 0, Ipv4Address::UNSPECIFIED, 0).dscp,
            ),
            switch_timer: vec![None; cepheus.len()],
            cepheus,
            cepheus_out: Vec::new(),
            controls: SlotPool::default(),
            mrp_malformed: 0,
            mrp_ignored: 0,
            tree_groups: Vec::new(),
            tree_by_mcst: Default::default(),
            tree_by_source_qp: Default::default(),
            peel: PeelFabric::default(),
            copy_scratch: Vec::new(),
            tree_stats: TreeMulticastStats::default(),
            topo,
        };
        for i in 0..e.flows.len() {
            if e.flows[i].after.is_none() {
                let t = e.flows[i].start_ps;
                e.schedule(t, EvKind::FlowStart, i as u32, 0);
            }
        }
        if let Some(iv) = e.cfg.qlen_interval {
            e.schedule(iv.as_ps(), EvKind::Sample, 0, 0);
        }
        Ok(e)
    }

    pub fn now(&self) -> Instant {
        Instant::from_ps(self.now)
    }
    /// Time of the last event processed.
    pub fn last_event(&self) -> Instant {
        Instant::from_ps(self.last_event)
    }
    pub fn routes(&self) -> &Routes {
        &self.routes
    }
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The switch port toward `host` (the far end of its link), if `p` is a loss rate.
    fn port_toward_host(&self, host: u32, p: f64) -> Result<u32, EngineError> {
        if host as usize >= self.topo.num_hosts() || !(0.0..1.0).contains(&p) {
            return Err(EngineError::LossTowardHost { p, host });
        }
        Ok(self.ports[self.node_port_base[host as usize] as usize].reverse)
    }

    /// Drops this fraction of the frames the fabric sends to `host` (only that
    /// direction of its link: the switch port toward it), as a lossy switch port
    /// would. Draws from the run's one seeded RNG.
    pub fn set_loss_toward_host(&mut self, host: u32, p: f64) -> Result<(), EngineError> {
        let toward = self.port_toward_host(host, p)?;
        self.ports[toward as usize].loss = p;
        Ok(())
    }

    /// [`Engine::set_loss_toward_host`] from time `at` on (a port that starts to
    /// drop frames mid-run: a failing transceiver or cable).
    pub fn schedule_loss_toward_host(
        &mut self,
        at: Instant,
        host: u32,
        p: f64,
    ) -> Result<(), EngineError> {
        let toward = self.port_toward_host(host, p)?;
        self.loss_changes.push((toward, p));
        let i = self.loss_changes.len() as u32 - 1;
        self.schedule(at.as_ps(), EvKind::LossChange, i, 0);
        Ok(())
    }

    /// Schedules a link failure (`up = false`) or recovery at `at`.
    pub fn schedule_link_change(&mut self, at: Instant, link: u32, up: bool) {
        self.schedule(at.as_ps(), EvKind::LinkChange, link, up as u32);
    }

    fn schedule(&mut self, time: u64, kind: EvKind, a: u32, b: u32) {
        debug_assert!(b < 1 << 24);
        self.events.push(
            time,
            Ev {
                payload: (kind as u64) << 56 | (b as u64) << 32 | a as u64,
            },
        );
    }

    /// Flows started and not yet finished or failed, plus flows not yet started.
    pub fn flows_outstanding(&self) -> u64 {
        self.flows.len() as u64 - self.totals.flows_finished - self.totals.flows_failed
    }

    /// Runs events up to and including time `until`. Returns false when nothing is left
    /// to do (all flows done and no events pending).
    pub fn run_until(&mut self, until: Instant) -> bool {
        self.run(until.as_ps(), false)
    }

    /// Like [`Engine::run_until`], but returns as soon as an event produced
    /// [`AppEvent`]s (collect them with [`Engine::poll_app_event`]).
    pub fn run_until_app_event(&mut self, until: Instant) -> bool {
        self.run(until.as_ps(), true)
    }

    pub fn poll_app_event(&mut self) -> Option<(Instant, AppEvent)> {
        self.app_events
            .pop_front()
            .map(|(t, e)| (Instant::from_ps(t), e))
    }

    fn run(&mut self, until: u64, stop_on_app: bool) -> bool {
        while let Some(time) = self.events.peek_time() {
            if stop_on_app && !self.app_events.is_empty() {
                return true;
            }
            if time > until {
                self.now = until;
                return true;
            }
            if self.flows_outstanding() == 0 && self.app_outstanding == 0 {
                // Everything finished: what is left are stale timers and samples.
                return false;
            }
            let (_, ev) = self.events.pop().expect("peeked");
            self.prefetch_ahead();
            self.now = time;
            self.last_event = self.now;
            self.totals.events += 1;
            let (a, b) = (ev.a(), ev.b());
            match ev.kind() {
                EvKind::FlowStart => self.start_flow(a),
                EvKind::TxDone => self.tx_done(a),
                EvKind::Arrive => self.arrive(a),
                EvKind::Pfc => self.pfc(a, b),
                EvKind::QpTimer => self.qp_timer(a),
                EvKind::LinkChange => self.link_change(a, b != 0),
                EvKind::Sample => self.sample(),
                EvKind::Post => self.do_post(a),
                EvKind::Control => self.control_arrive(a),
                EvKind::LossChange => {
                    let (port, p) = self.loss_changes[a as usize];
                    self.ports[port as usize].loss = p;
                }
                EvKind::SwitchTimer => self.switch_timer_fired(a),
            }
        }
        false
    }

    /// Asks the CPU to load, ahead of time, what the next events of the current slot
    /// will read: on a large fabric nearly every port, link FIFO, queue and packet
    /// record an event touches has left the cache since its last use, and the engine
    /// waits on those loads more than it computes (`docs/perf/`). Three stages follow
    /// the chain of pointers, each an event apart so that its loads have landed when
    /// the next stage reads through them: the port of the event four ahead; the head
    /// of its link FIFO, or its egress queue, or its NIC, at three ahead; the far port
    /// and the packet record, or the queue's head entry, or the NIC's next QP, at two
    /// ahead. Only hints: nothing is read here that a later event might change, and a
    /// wrong guess costs a wasted load.
    #[inline]
    fn prefetch_ahead(&self) {
        let n_hosts = self.topo.num_hosts();
        // The port of an Arrive or TxDone event.
        let port_at = |ahead: usize| {
            let ev = self.events.peek_ahead(ahead)?;
            match ev.kind() {
                EvKind::Arrive | EvKind::TxDone => {
                    Some((ev.kind(), self.ports.get(ev.a() as usize)?))
                }
                _ => None,
            }
        };
        // The egress queue a switch port sends from next: (its header, its head).
        let queue_of = |p: &Port| {
            let sw = (p.node as usize).checked_sub(n_hosts)?;
            self.egress.get(sw)?.next_queue_hint(p.local, p.paused)
        };
        if let Some((_, p)) = port_at(3) {
            prefetch(p);
            prefetch_ptr((p as *const Port as *const u8).wrapping_add(64) as *const ());
        }
        match port_at(2) {
            Some((EvKind::Arrive, p)) => {
                if let Some((_, hop)) = p.in_flight.front() {
                    prefetch(hop);
                }
            }
            Some((_, p)) if p.node as usize >= n_hosts => {
                if let Some((queue, _)) = queue_of(p) {
                    prefetch_ptr(queue);
                }
            }
            Some((_, p)) => {
                if let Some(h) = self.hosts.get(p.node as usize) {
                    prefetch(h);
                }
            }
            None => {}
        }
        match port_at(1) {
            Some((EvKind::Arrive, p)) => {
                if let Some(far) = self.ports.get(p.reverse as usize) {
                    prefetch(far);
                }
                let record = p
                    .in_flight
                    .front()
                    .and_then(|(_, h)| self.slab.get(h.slot as usize));
                if let Some(rec) = record {
                    prefetch(rec);
                }
            }
            Some((_, p)) if p.node as usize >= n_hosts => {
                if let Some((_, head)) = queue_of(p) {
                    prefetch_ptr(head);
                }
            }
            Some((_, p)) => {
                let qpn = self
                    .hosts
                    .get(p.node as usize)
                    .and_then(|h| h.active.front());
                if let Some(Some(slot)) = qpn.and_then(|&q| self.qps.get(q as usize)) {
                    prefetch(&**slot);
                }
            }
            None => {}
        }
    }

    // ---- packets ----

    fn alloc(&mut self, p: SimPacket) -> u32 {
        if let Some(i) = self.free.pop() {
            self.slab[i as usize] = p;
            i
        } else {
            self.slab.push(p);
            let n = self.slab.len() as u64;
            self.totals.peak_packets = self.totals.peak_packets.max(n);
            n as u32 - 1
        }
    }
    fn release(&mut self, i: u32) {
        self.free.push(i);
    }
    /// Allocates a slot for `p`; with `carried`, the slot's payload becomes
    /// `payload_scratch` (swapped in, so buffers are reused, not reallocated).
    /// A new record for `copy` of packet `pkt`, with `pkt`'s payload when payloads
    /// are carried.
    fn alloc_copy_of(&mut self, pkt: u32, copy: SimPacket) -> u32 {
        let carried = self.cfg.carry_payload && copy.is_data();
        if carried {
            self.payload_scratch.clear();
            if let Some(d) = self.payloads.get(pkt as usize) {
                self.payload_scratch.extend_from_slice(d);
            }
        }
        self.alloc_with_scratch_payload(copy, carried)
    }

    fn alloc_with_scratch_payload(&mut self, p: SimPacket, carried: bool) -> u32 {
        let n = self.alloc(p);
        if carried {
            if self.payloads.len() <= n as usize {
                self.payloads.resize_with(n as usize + 1, Vec::new);
            }
            std::mem::swap(&mut self.payloads[n as usize], &mut self.payload_scratch);
        }
        n
    }

    // ---- ports ----

    fn start_tx(&mut self, port: u32, pkt: u32) {
        let hop = Hop::of(&self.slab[pkt as usize], pkt);
        self.start_tx_hop(port, hop);
    }

    /// [`Self::start_tx`] of a packet taken from an egress queue.
    fn start_tx_hop(&mut self, port: u32, hop: Hop) {
        let (pkt, wire) = (hop.slot, hop.wire as u64);
        let p = &mut self.ports[port as usize];
        p.current = hop;
        if p.last_ser_bytes as u64 != wire {
            p.last_ser_bytes = wire as u32;
            p.last_ser_ps = Duration::for_bytes(wire, p.rate_bps).as_ps();
        }
        let ser = p.last_ser_ps;
        let (capture, node, reverse) = (p.capture, p.node, p.reverse);
        if capture && (self.capture.len() as u64) < self.cfg.capture_max_packets {
            let (a, b) = (node, self.ports[reverse as usize].node);
            self.slab[pkt as usize].write_frame(mac(a), mac(b), &mut self.frame_buf);
            self.capture.push((self.now, self.frame_buf.clone()));
        }
        self.schedule(self.now + ser, EvKind::TxDone, port, 0);
    }

    fn tx_done(&mut self, port: u32) {
        let p = &mut self.ports[port as usize];
        let hop = std::mem::replace(&mut p.current, Hop::IDLE);
        let wire = hop.wire as u64;
        p.c.tx_packets += 1;
        p.c.tx_bytes += wire;
        if p.node < self.topo.num_hosts() as u32 {
            self.totals.host_tx_bytes += wire;
        } else {
            self.totals.switch_tx_bytes += wire;
        }
        let at = self.now + p.delay_ps;
        p.in_flight.push_back((at, hop));
        if p.in_flight.len() == 1 {
            self.schedule(at, EvKind::Arrive, port, 0);
        }
        self.kick(port);
    }

    fn arrive(&mut self, port: u32) {
        let p = &mut self.ports[port as usize];
        let (_, hop) = p
            .in_flight
            .pop_front()
            .expect("arrival with a packet in flight");
        let (pkt, wire) = (hop.slot, hop.wire as u64);
        if let Some(&(t, _)) = p.in_flight.front() {
            self.schedule(t, EvKind::Arrive, port, 0);
        }
        let p = &mut self.ports[port as usize];
        let lost = !p.up || (p.loss > 0.0 && uniform(&mut self.rng) < p.loss);
        if lost {
            p.c.link_drops += 1;
            p.c.link_drop_bytes += wire;
            self.release(pkt);
            return;
        }
        p.c.rx_bytes += wire;
        let to = p.reverse;
        let node = self.ports[to as usize].node;
        let local = self.ports[to as usize].local;
        if (node as usize) < self.topo.num_hosts() {
            self.totals.host_rx_bytes += wire;
            self.host_receive(node, pkt);
        } else {
            self.totals.switch_rx_bytes += wire;
            self.switch_receive(node, local, hop);
        }
    }

    /// Starts the next transmission on `port` if it is idle.
    fn kick(&mut self, port: u32) {
        let p = &self.ports[port as usize];
        if p.busy() || !p.up {
            return;
        }
        if (p.node as usize) < self.topo.num_hosts() {
            self.host_pull(p.node);
            return;
        }
        // The core's egress rule: control first and never paused; then data classes
        // high to low, skipping paused.
        let sw = p.node as usize - self.topo.num_hosts();
        let local = p.local;
        let Some(class) = self.egress[sw].next_class(local, p.paused) else {
            return;
        };
        let hop = self.dequeue(port, class as usize).expect("non-empty");
        // RED at dequeue, against the bytes left behind this packet (ECN-capable only;
        // the queue entry says which, so an unmarked packet's record is not touched).
        let rng = &mut self.rng;
        if hop.ect() && self.egress[sw].red_marks(local, class, || uniform(rng)) {
            self.slab[hop.slot as usize].set_ce();
            self.ports[port as usize].c.ecn_marks += 1;
            self.totals.ecn_marks += 1;
        }
        self.start_tx_hop(port, hop);
    }

    /// Takes the head packet of a switch port's class queue and releases its buffer
    /// (which may resume a paused upstream).
    fn dequeue(&mut self, port: u32, class: usize) -> Option<Hop> {
        let p = &self.ports[port as usize];
        let (node, local) = (p.node, p.local);
        let sw = node as usize - self.topo.num_hosts();
        let d = self.egress[sw].dequeue(local, class as u8)?;
        if let Some(in_port) = d.resume {
            self.send_pfc(node, in_port as usize, class, false);
        }
        Some(d.item)
    }

    /// Counts a packet dropped at the egress of `port` and frees it.
    fn drop_at_queue(&mut self, port: u32, pkt: u32) {
        let wire = self.slab[pkt as usize].wire_len() as u64;
        let p = &mut self.ports[port as usize];
        p.c.queue_drops += 1;
        p.c.queue_drop_bytes += wire;
        self.release(pkt);
    }

    fn send_pfc(&mut self, node: u32, in_local: usize, class: usize, pause: bool) {
        let port = self.node_port_base[node as usize] + in_local as u32;
        let upstream = self.ports[port as usize].reverse;
        let delay = self.ports[port as usize].delay_ps;
        if pause {
            self.ports[port as usize].c.pauses_sent += 1;
            self.totals.pauses += 1;
        }
        // A PFC frame is 64 bytes, sent ahead of data.
        let ser = Duration::for_bytes(64 + 20, self.ports[port as usize].rate_bps).as_ps();
        self.schedule(
            self.now + ser + delay,
            EvKind::Pfc,
            upstream,
            class as u32 | (pause as u32) << 8,
        );
    }

    fn pfc(&mut self, port: u32, arg: u32) {
        let class = (arg & 0xff) as usize;
        let pause = arg >> 8 != 0;
        let now = self.now;
        let p = &mut self.ports[port as usize];
        let bit = 1u8 << class;
        if pause {
            if p.paused & bit == 0 {
                p.paused |= bit;
                p.paused_since[class] = now;
            }
            p.c.pauses_received += 1;
        } else if p.paused & bit != 0 {
            p.paused &= !bit;
            p.c.paused_ps += now - p.paused_since[class];
        }
        if self.cfg.pfc_log {
            // HPCC pfc.txt: time node type(0 host/1 switch) port pause(1)/resume(0), plus class
            let node = p.node;
            let kind = if (node as usize) < self.topo.num_hosts() {
                0
            } else {
                1
            };
            let line = format!(
                "{now_ns} {node} {kind} {} {} {class}",
                p.local,
                pause as u8,
                now_ns = now / 1000
            );
            self.pfc_log.push(line);
        }
        if !pause {
            self.kick(port);
        }
    }

    fn switch_receive(&mut self, node: u32, in_local: u16, hop: Hop) {
        let pkt = hop.slot;
        // The record's headline for the core's pipeline: every record is RoCE over UDP,
        // a labelled copy carries a shim (PEEL's, or Orca's header in its place).
        let headline = PacketHeadline {
            dst: Ipv4Address::from_u32(hop.dst_ip),
            protocol: IP_PROTO_UDP,
            udp_dst_port: Some(if hop.labelled() {
                PEEL_UDP_PORT
            } else {
                ROCEV2_UDP_PORT
            }),
        };
        match pipeline::classify(&headline, &GroupAddressSpace::MULTICAST, true) {
            PacketClass::Peel => return self.labelled_receive(node, in_local, pkt),
            PacketClass::GroupRoce => return self.multicast_receive(node, in_local, pkt),
            PacketClass::Unicast => {
                // The forwarding plug: the fabric's routes, ECMP by the flow's hash.
                let table = SwitchRoutes {
                    topo: &self.topo,
                    routes: &self.routes,
                    node,
                };
                let hash = ecmp_hash(hop.src_ip, hop.dst_ip, hop.sport, 4791, node);
                if let UnicastDecision::Port(out) =
                    pipeline::unicast_port(&table, headline.dst, hash, in_local)
                {
                    return self.switch_enqueue(node, in_local, out, hop);
                }
            }
            // The simulator carries no MRP, IGMP or other multicast as records.
            _ => {}
        }
        self.totals.unroutable += 1;
        self.unroutable_bytes += hop.wire as u64;
        self.release(pkt);
    }

    /// Queues `hop` (arrived on `in_local`) for egress port `out` of switch `node`,
    /// through the MMU's admission and PFC.
    fn switch_enqueue(&mut self, node: u32, in_local: u16, out: u16, hop: Hop) {
        let (pkt, class, wire) = (hop.slot, hop.class, hop.wire as u64);
        let out_port = self.node_port_base[node as usize] + out as u32;
        if !self.ports[out_port as usize].up {
            self.drop_at_queue(out_port, pkt);
            return;
        }
        let ingress = if in_local == SHARED_CELL {
            Ingress::SharedCell
        } else {
            Ingress::Port(in_local)
        };
        let sw = node as usize - self.topo.num_hosts();
        match self.egress[sw].enqueue(ingress, out, class, wire, hop) {
            Err((q, _)) => {
                self.drop_at_queue(out_port, q.slot);
                return;
            }
            Ok(Some(paused)) => self.send_pfc(node, paused as usize, class as usize, true),
            Ok(None) => {}
        }
        self.kick(out_port);
    }

    /// A packet addressed to a McstID: the switch's Cepheus engine decides. Copies
    /// are new slab records (with the payload when carried); the original's slot is
    /// reused for the first.
    fn multicast_receive(&mut self, node: u32, in_local: u16, pkt: u32) {
        let sw = node as usize - self.topo.num_hosts();
        let sp = self.slab[pkt as usize];
        let repr = sp.to_repr();
        // Every McstID-range address is the engine's: an unknown group is counted
        // there and yields no action.
        let now = Instant::from_ps(self.now);
        // Only a CNP can give the engine's CNP filter something to release later.
        let cnp = repr.bth.opcode == rocast_core::wire::Opcode::CNP;
        let engine = &mut self.cepheus[sw];
        engine.handle_packet(now, in_local, &repr);
        let mut copies = std::mem::take(&mut self.copy_scratch);
        copies.clear();
        while let Some(a) = engine.poll_transmit(now) {
            copies.push(match a {
                CepheusAction::Replicate { port, bridge } => {
                    let mut c = sp;
                    if let Some(b) = bridge {
                        b.apply(&mut c);
                    }
                    (port, c)
                }
                CepheusAction::Feedback { port, packet } => {
                    (port, SimPacket::from_repr(&packet.repr(&repr)))
                }
            });
        }
        self.emit_copies(node, in_local, pkt, &copies, false);
        self.copy_scratch = copies;
        if cnp {
            self.arm_switch_timer(node, false);
        }
    }

    /// Schedules switch `node`'s multicast engine's next wake-up, unless one at or
    /// before it is already scheduled.
    fn arm_switch_timer(&mut self, node: u32, after_wake: bool) {
        let sw = node as usize - self.topo.num_hosts();
        let Some(at) = self.cepheus[sw].poll_at() else {
            return;
        };
        // After a wake-up, strictly later: a filter asking again for the time just
        // served cannot spin the clock.
        let at = at.as_ps().max(self.now + after_wake as u64);
        if self.switch_timer[sw].is_none_or(|t| at < t) {
            self.switch_timer[sw] = Some(at);
            self.schedule(at, EvKind::SwitchTimer, node, 0);
        }
    }

    /// Switch `node`'s engine wakes: the CNPs its filter releases now go toward their
    /// sources (the engine builds them on the headers of the CNPs it held).
    fn switch_timer_fired(&mut self, node: u32) {
        let sw = node as usize - self.topo.num_hosts();
        if self.switch_timer[sw] != Some(self.now) {
            return; // superseded by an earlier wake-up, which re-armed
        }
        self.switch_timer[sw] = None;
        let now = Instant::from_ps(self.now);
        self.cepheus[sw].handle_timeout(now);
        let mut out = std::mem::take(&mut self.cepheus_out);
        out.clear();
        out.extend(std::iter::from_fn(|| self.cepheus[sw].poll_transmit(now)));
        for a in &out {
            if let CepheusAction::Feedback { port, packet } = *a {
                if let Some(repr) = self.cepheus[sw].released_repr(&packet) {
                    let slot = self.alloc(SimPacket::from_repr(&repr));
                    let hop = Hop::of(&self.slab[slot as usize], slot);
                    self.switch_enqueue(node, SHARED_CELL, port, hop);
                }
            }
        }
        self.cepheus_out = out;
        self.arm_switch_timer(node, true);
    }

    /// Sends `copies` of switch `node`'s packet `pkt` (arrived on `in_local`): new
    /// slab records (with the payload when carried), the original's slot reused for
    /// the first; no copies frees it.
    /// With `shared_cell`, copies after the first are charged to their egress queues
    /// only (one stored cell; the ingress and PFC see the packet once).
    fn emit_copies(
        &mut self,
        node: u32,
        in_local: u16,
        pkt: u32,
        copies: &[(u16, SimPacket)],
        shared_cell: bool,
    ) {
        let mut original = Some(pkt);
        for (n, &(port, copy)) in copies.iter().enumerate() {
            let ingress = if shared_cell && n > 0 {
                SHARED_CELL
            } else {
                in_local
            };
            let slot = match original.take() {
                Some(p) => {
                    self.slab[p as usize] = copy;
                    p
                }
                None => self.alloc_copy_of(pkt, copy),
            };
            let hop = Hop::of(&self.slab[slot as usize], slot);
            self.switch_enqueue(node, ingress, port, hop);
        }
        if let Some(p) = original {
            self.release(p);
        }
    }

    /// A labelled tree-multicast copy at a switch: `tree_multicast`'s rules 1–4.
    fn labelled_receive(&mut self, node: u32, in_local: u16, pkt: u32) {
        let sp = self.slab[pkt as usize];
        let label = sp.label().unwrap_or(0);
        let mut copies = std::mem::take(&mut self.copy_scratch);
        copies.clear();
        let mut discards = 0;
        match self.tree_by_mcst.get(&sp.dst_ip) {
            None => self.tree_stats.stray_copies += 1,
            Some(&g) => {
                let f = &self.tree_groups[g as usize].forwarding;
                let base = self.node_port_base[node as usize];
                let group = Ipv4Address::from_u32(sp.dst_ip);
                match self.peel.step(f, node, in_local, group, label) {
                    Step::Hops(h) => {
                        for &(port, out) in h {
                            let mut c = sp;
                            c.set_label(out, f.header(out));
                            copies.push((port, c));
                        }
                    }
                    Step::Peel => {
                        for &a in self.peel.actions() {
                            match a {
                                // A static rule's port whose link is down: only an
                                // over-covered rack can sit behind it.
                                PeelAction::Forward(port)
                                    if !self.ports[(base + port as u32) as usize].up =>
                                {
                                    discards += 1
                                }
                                PeelAction::Forward(port) | PeelAction::Deliver(port) => {
                                    copies.push((port, sp))
                                }
                            }
                        }
                    }
                    Step::Discard => discards += 1,
                }
            }
        }
        self.tree_stats.over_cover_discards += discards;
        self.emit_copies(node, in_local, pkt, &copies, true);
        self.copy_scratch = copies;
    }

    // ---- tree multicast at the hosts ----

    /// Registers a tree-multicast group; its source QP's packets to the McstID go
    /// through the group's aggregator and out as labelled copies.
    pub fn install_tree_group(&mut self, spec: TreeGroupSpec) -> Result<(), EngineError> {
        let mcst = Ipv4Address::from_u32(spec.mcst_id);
        if !is_mcst_id(mcst) {
            return Err(EngineError::NotMcstId(mcst));
        }
        if self.tree_by_mcst.contains_key(&spec.mcst_id) {
            return Err(EngineError::GroupExists(mcst));
        }
        let on = |h: u32, q: u32| {
            self.qps
                .get(q as usize)
                .and_then(|s| s.as_ref())
                .is_some_and(|s| s.host == h)
        };
        if !on(spec.source, spec.source_qpn) {
            return Err(EngineError::SourceQpElsewhere {
                qpn: spec.source_qpn,
                host: spec.source,
            });
        }
        let ports =
            u16::try_from(spec.receivers.len() + 1).map_err(|_| EngineError::TooManyReceivers)?;
        let mut aggregator = CepheusSwitch::new(ports, 1, CnpFilterPolicy::ForwardAll.build());
        let host_hop = |h: u32, qpn: u32, region| NextHop::Host {
            ip: Ipv4Address::from_u32(host_ip(h)),
            qpn,
            region,
        };
        aggregator.set_path(mcst, 0, host_hop(spec.source, spec.source_qpn, None), true)?;
        let mut receivers = std::collections::BTreeMap::new();
        for (i, &(h, q)) in spec.receivers.iter().enumerate() {
            if !on(h, q) || h == spec.source {
                return Err(EngineError::ReceiverQpElsewhere { qpn: q, host: h });
            }
            let port = i as u16 + 1;
            if receivers.insert(h, (port, q)).is_some() {
                return Err(EngineError::ReceiverTwice(h));
            }
            aggregator.set_path(mcst, port, host_hop(h, q, Some((0, 1))), false)?;
        }
        let peel = spec.forwarding.labels.iter().any(|l| l.peel.is_some());
        if peel && self.peel.rule_count() == 0 {
            let layout = PrefixLayout::from_topology(&self.topo)?;
            self.peel = PeelFabric::new(&self.topo, &layout)?;
        }
        self.peel.install(&self.topo, mcst, &spec.forwarding);
        if let Some(tree) = &spec.switch_feedback {
            let hosts = self.topo.num_hosts() as u32;
            let hop_of = |n: u32| -> NextHop {
                if n == spec.source {
                    host_hop(n, spec.source_qpn, None)
                } else if let Some(&(_, q)) = receivers.get(&n) {
                    host_hop(n, q, Some((0, 1)))
                } else {
                    NextHop::Switch
                }
            };
            for a in &tree.arcs {
                for (at, toward, source_side) in
                    [(a.parent, a.child, false), (a.child, a.parent, true)]
                {
                    if at < hosts {
                        continue;
                    }
                    let port = self
                        .topo
                        .port_of(at, a.link)
                        .ok_or(EngineError::TreeLinkNotAtNode)?;
                    self.cepheus[(at - hosts) as usize]
                        .set_path(mcst, port, hop_of(toward), source_side)
                        .map_err(|source| EngineError::SwitchPath { switch: at, source })?;
                }
            }
        }
        let g = self.tree_groups.len() as u32;
        self.tree_by_mcst.insert(spec.mcst_id, g);
        self.tree_by_source_qp.insert(spec.source_qpn, g);
        self.tree_groups.push(TreeGroup {
            mcst: spec.mcst_id,
            source: spec.source,
            source_qpn: spec.source_qpn,
            receivers,
            forwarding: spec.forwarding,
            core_from_ps: spec.core_from.map(Instant::as_ps),
            switch_feedback: spec.switch_feedback.is_some(),
            highest_psn: None,
            aggregator,
        });
        Ok(())
    }

    /// Forgets a group (its copies still in flight are then counted as strays).
    pub fn remove_tree_group(&mut self, mcst_id: u32) {
        if let Some(g) = self.tree_by_mcst.remove(&mcst_id) {
            if self.tree_groups[g as usize].switch_feedback {
                let id = Ipv4Address::from_u32(mcst_id);
                for c in &mut self.cepheus {
                    c.remove_group(id);
                }
            }
            let t = &mut self.tree_groups[g as usize];
            self.peel
                .remove(Ipv4Address::from_u32(mcst_id), &t.forwarding);
            self.tree_by_source_qp.remove(&t.source_qpn);
            t.receivers.clear();
            t.forwarding = GroupForwarding::default();
            t.aggregator = CepheusSwitch::new(1, 0, CnpFilterPolicy::ForwardAll.build());
        }
    }

    /// The source's NIC sends packet `sp` of group `g`: to every receiver as labelled
    /// copies, or, for a retransmission some receivers already hold, as unicast
    /// repairs to the others. The first copy starts now; the rest queue.
    fn tree_source_send(&mut self, g: u32, host: u32, sp: SimPacket) {
        let now = self.now;
        let grp = &mut self.tree_groups[g as usize];
        if grp.switch_feedback {
            let newer = grp
                .highest_psn
                .is_none_or(|h| sp.psn != h && (sp.psn.wrapping_sub(h) & 0xff_ffff) < 0x80_0000);
            let port = self.hosts[host as usize].port;
            if !newer {
                // A retransmission: the switches' MFTs send it only down the paths
                // that have not acknowledged it.
                self.tree_stats.cepheus_retransmissions += 1;
                let slot = self.alloc_with_scratch_payload(sp, self.cfg.carry_payload);
                self.start_tx(port, slot);
                return;
            }
            grp.highest_psn = Some(sp.psn);
        }
        let repr = sp.to_repr();
        let mut out = std::mem::take(&mut self.cepheus_out);
        out.clear();
        let grp = &mut self.tree_groups[g as usize];
        let at = Instant::from_ps(now);
        grp.aggregator.handle_packet(at, 0, &repr);
        out.extend(std::iter::from_fn(|| grp.aggregator.poll_transmit(at)));
        let mut copies = std::mem::take(&mut self.copy_scratch);
        copies.clear();
        let replicas = if grp.switch_feedback {
            grp.receivers.len()
        } else {
            out.iter()
                .filter(|a| matches!(a, CepheusAction::Replicate { .. }))
                .count()
        };
        let mut feedback = Vec::new();
        self.tree_stats.source_packets += 1;
        if replicas == grp.receivers.len() {
            let core =
                grp.core_from_ps.is_some_and(|t| now >= t) && !grp.forwarding.core_send.is_empty();
            let send = if core {
                &grp.forwarding.core_send
            } else {
                &grp.forwarding.static_send
            };
            for &l in send {
                let mut c = sp;
                c.set_label(l, grp.forwarding.header(l));
                copies.push((0, c));
            }
            self.tree_stats.full_transmissions += 1;
            self.tree_stats.label_copies += send.len() as u64;
            if core {
                self.tree_stats.core_copies += send.len() as u64;
            }
        }
        for a in out.iter().copied() {
            match a {
                CepheusAction::Replicate {
                    bridge: Some(b), ..
                } if replicas < grp.receivers.len() => {
                    let mut c = sp;
                    b.apply(&mut c);
                    c.src_ip = host_ip(grp.source);
                    copies.push((0, c));
                    self.tree_stats.repair_copies += 1;
                }
                CepheusAction::Feedback { packet, .. } => feedback.push(packet),
                _ => {}
            }
        }
        self.cepheus_out = out;
        let port = self.hosts[host as usize].port;
        for (i, &(_, c)) in copies.iter().enumerate() {
            if self.cfg.carry_payload && i + 1 < copies.len() {
                // The scratch is swapped into each slot; keep a copy for the next.
                let keep = self.payload_scratch.clone();
                let slot = self.alloc_with_scratch_payload(c, true);
                self.payload_scratch = keep;
                self.hosts[host as usize].copies.push_back(slot);
            } else {
                let slot = self.alloc_with_scratch_payload(c, self.cfg.carry_payload);
                self.hosts[host as usize].copies.push_back(slot);
            }
        }
        self.copy_scratch = copies;
        if let Some(pkt) = self.hosts[host as usize].copies.pop_front() {
            self.start_tx(port, pkt);
        }
        for f in feedback {
            self.tree_deliver_feedback(g, &repr, f);
        }
    }

    /// A receiver's ACK, NAK or CNP reached the source of group `g`: into the
    /// aggregator on the receiver's port.
    fn tree_feedback(&mut self, g: u32, mut sp: SimPacket) {
        self.tree_stats.feedback_in += 1;
        // The receivers address the source itself; the aggregator keys on the group.
        sp.dst_ip = self.tree_groups[g as usize].mcst;
        let grp = &mut self.tree_groups[g as usize];
        let Some(&(port, _)) = grp.receivers.get(&host_of_ip(sp.src_ip)) else {
            self.totals.stale_packets += 1;
            return;
        };
        let repr = sp.to_repr();
        let mut out = std::mem::take(&mut self.cepheus_out);
        out.clear();
        let at = Instant::from_ps(self.now);
        grp.aggregator.handle_packet(at, port, &repr);
        out.extend(std::iter::from_fn(|| grp.aggregator.poll_transmit(at)));
        let fb: Vec<_> = out
            .iter()
            .filter_map(|a| match *a {
                CepheusAction::Feedback { packet, .. } => Some(packet),
                CepheusAction::Replicate { .. } => None,
            })
            .collect();
        self.cepheus_out = out;
        for f in fb {
            self.tree_deliver_feedback(g, &repr, f);
        }
    }

    /// Aggregated feedback into the source's QP (inside its NIC: no wire).
    fn tree_deliver_feedback(
        &mut self,
        g: u32,
        template: &rocast_core::wire::RoceRepr<'_>,
        f: rocast_core::fabric::cepheus::FeedbackPacket,
    ) {
        let qpn = self.tree_groups[g as usize].source_qpn;
        let repr = f.repr(template);
        let Some(slot) = self.qps.get_mut(qpn as usize).and_then(|s| s.as_mut()) else {
            return;
        };
        self.tree_stats.feedback_to_source += 1;
        qp_input(&mut slot.qp, self.now, &repr, &mut self.totals);
        self.service_qp(qpn);
    }

    // ---- hosts ----

    fn host_receive(&mut self, host: u32, pkt: u32) {
        let mut sp = self.slab[pkt as usize];
        if let Some(label) = sp.label() {
            self.host_relay(host, pkt, label);
            // The member's NIC: strip the shim and bridge to the member's QP.
            let member = self
                .tree_by_mcst
                .get(&sp.dst_ip)
                .map(|&g| &self.tree_groups[g as usize])
                .and_then(|g| Some((g.source, g.receivers.get(&host)?.1)));
            let Some((source, qpn)) = member else {
                self.tree_stats.stray_copies += 1;
                self.release(pkt);
                return;
            };
            sp.clear_label();
            sp.src_ip = host_ip(source);
            sp.dst_ip = host_ip(host);
            sp.dest_qp = qpn;
            sp.reth_rkey = 1;
            self.slab[pkt as usize] = sp;
        } else if sp.flags_feedback() {
            if let Some(&g) = self.tree_by_source_qp.get(&sp.dest_qp) {
                if self.tree_groups[g as usize].switch_feedback {
                    self.tree_stats.switch_feedback_to_source += 1;
                } else {
                    self.release(pkt);
                    self.tree_feedback(g, sp);
                    return;
                }
            }
        }
        // The slot's payload stays in place until the slot is reused by `alloc`.
        self.release(pkt);
        let qpn = sp.dest_qp;
        let Some(slot) = self.qps.get_mut(qpn as usize).and_then(|s| s.as_mut()) else {
            self.totals.stale_packets += 1;
            return;
        };
        if slot.host != host {
            self.totals.stale_packets += 1;
            return;
        }
        let mut repr = sp.to_repr();
        if self.cfg.carry_payload && sp.is_data() {
            if let Some(d) = self.payloads.get(pkt as usize) {
                if d.len() == repr.payload.len() {
                    repr.payload = d;
                }
            }
        }
        qp_input(&mut slot.qp, self.now, &repr, &mut self.totals);
        self.service_qp(qpn);
    }

    /// A host-side agent (Orca): when the copy's label names this host, its NIC sends
    /// the listed copies back into the fabric, queued behind its own transmissions.
    fn host_relay(&mut self, host: u32, pkt: u32, label: u16) {
        let sp = self.slab[pkt as usize];
        let Some(&g) = self.tree_by_mcst.get(&sp.dst_ip) else {
            return;
        };
        let f = &self.tree_groups[g as usize].forwarding;
        let Some(h) = f.hops_at(host, label) else {
            return;
        };
        let mut copies = std::mem::take(&mut self.copy_scratch);
        copies.clear();
        for &(port, out) in h {
            let mut c = sp;
            c.set_label(out, f.header(out));
            copies.push((port, c));
        }
        // The agent's NIC queue marks ECN as a switch port would (the fabric's RED
        // thresholds, against the copies already waiting): a relay that falls behind
        // slows the source through its receivers' CNPs instead of growing without
        // bound. rocast's assumption; Orca's paper does not say how its agent signals
        // congestion.
        let red = self.egress.first().and_then(|e| e.red().copied());
        let mut queued = self.hosts[host as usize].copies.len() as u64 * sp.wire_len() as u64;
        for &(_, mut c) in &copies {
            if let Some(red) = red {
                // ECT(0) or ECT(1): a copy already marked CE stays as it is.
                let ect = matches!(
                    c.ecn(),
                    rocast_core::wire::Ecn::Ect0 | rocast_core::wire::Ecn::Ect1
                );
                let rng = &mut self.rng;
                if ect && red.should_mark(queued, || uniform(rng)) {
                    c.set_ce();
                    self.totals.ecn_marks += 1;
                }
            }
            queued += c.wire_len() as u64;
            let slot = self.alloc_copy_of(pkt, c);
            self.hosts[host as usize].copies.push_back(slot);
            self.tree_stats.agent_copies += 1;
        }
        self.copy_scratch = copies;
        let port = self.hosts[host as usize].port;
        self.kick(port);
    }

    /// After a QP took input: its bookkeeping, then its host's NIC may send.
    fn service_qp(&mut self, qpn: u32) {
        let Some(host) = self.qps[qpn as usize].as_ref().map(|s| s.host) else {
            return;
        };
        self.after_qp_activity(qpn);
        let port = self.hosts[host as usize].port;
        self.kick(port);
    }

    /// After a QP handled something: queue its feedback, (re)activate it, collect its
    /// events, and re-arm its timer.
    fn after_qp_activity(&mut self, qpn: u32) {
        let Some(slot) = self.qps[qpn as usize].as_mut() else {
            return;
        };
        let host = slot.host as usize;
        if slot.qp.has_feedback() && !slot.in_ctrl {
            slot.in_ctrl = true;
            self.hosts[host].ctrl.push_back(qpn);
        }
        if !slot.in_active && slot.qp.send_queue_len() > 0 {
            slot.in_active = true;
            self.hosts[host].active.push_back(qpn);
        }
        let owner = slot.owner;
        let mut events = std::mem::take(&mut self.event_buf);
        events.extend(std::iter::from_fn(|| slot.qp.poll_event()));
        let finished = match owner {
            QpOwner::Flow(flow) => self.flow_events(flow, &events).map(|ok| (flow, ok)),
            QpOwner::Conn(conn) => {
                self.app_events_of(AppEndpoint::Conn(conn), &events);
                None
            }
            QpOwner::App => {
                self.app_events_of(AppEndpoint::Qp(qpn), &events);
                None
            }
        };
        events.clear();
        self.event_buf = events;
        match finished {
            Some((flow, ok)) => self.finish_flow(flow, ok),
            None => self.arm_timer(qpn),
        }
    }

    /// A flow's QP events: the receiver's completion starts dependent flows; returns
    /// the flow's outcome once the sender's request completed or failed.
    fn flow_events(&mut self, flow: u32, events: &[Event]) -> Option<bool> {
        let mut done = None;
        for ev in events {
            match ev {
                Event::SendComplete { result, .. } => done = Some(result.is_ok()),
                Event::RecvWriteImm { .. } => {
                    let r = &mut self.results[flow as usize];
                    if r.received_ps.is_none() {
                        r.received_ps = Some(self.now);
                        for i in 0..self.dependents[flow as usize].len() {
                            let d = self.dependents[flow as usize][i];
                            let t = self.now + self.flows[d as usize].start_ps;
                            self.results[d as usize].start_ps = t;
                            self.schedule(t, EvKind::FlowStart, d, 0);
                        }
                    }
                }
                Event::QpError(_) => done = Some(false),
                _ => {}
            }
        }
        done
    }

    fn arm_timer(&mut self, qpn: u32) {
        let Some(slot) = self.qps[qpn as usize].as_mut() else {
            return;
        };
        if let Some(t) = slot.qp.poll_timeout() {
            // A due deadline of a QP already in the NIC's round-robin is a pacing
            // deadline the scheduler will meet when the port frees; no timer needed.
            if t.as_ps() <= self.now && slot.in_active {
                return;
            }
            let t = t.as_ps().max(self.now);
            if t < slot.timer_at {
                slot.timer_at = t;
                self.schedule(t, EvKind::QpTimer, qpn, 0);
            }
        }
    }

    fn qp_timer(&mut self, qpn: u32) {
        let now = self.now;
        let Some(slot) = self.qps.get_mut(qpn as usize).and_then(|s| s.as_mut()) else {
            return;
        };
        if slot.timer_at != now {
            return; // superseded by an earlier timer
        }
        slot.timer_at = u64::MAX;
        slot.qp.handle_timeout(Instant::from_ps(now));
        self.service_qp(qpn);
    }

    /// The NIC's transmit scheduler: ACK/NAK/CNP first (strict priority), then data QPs
    /// round-robin, each as its window and rate controller allow.
    fn host_pull(&mut self, host: u32) {
        let port = self.hosts[host as usize].port;
        let now = Instant::from_ps(self.now);
        while let Some(qpn) = self.hosts[host as usize].ctrl.pop_front() {
            let Some(slot) = self.qps[qpn as usize].as_mut() else {
                continue;
            };
            slot.in_ctrl = false;
            if !slot.qp.has_feedback() {
                continue;
            }
            let repr = slot.qp.poll_transmit_repr(now).expect("feedback pending");
            let sp = SimPacket::from_repr(&repr);
            if slot.qp.has_feedback() {
                slot.in_ctrl = true;
                self.hosts[host as usize].ctrl.push_front(qpn);
            }
            let pkt = self.alloc(sp);
            self.start_tx(port, pkt);
            return;
        }
        if self.ports[port as usize].paused & (1 << self.data_class) != 0 {
            return;
        }
        if let Some(pkt) = self.hosts[host as usize].copies.pop_front() {
            self.start_tx(port, pkt);
            return;
        }
        while let Some(qpn) = self.hosts[host as usize].active.pop_front() {
            let Some(slot) = self.qps[qpn as usize].as_mut() else {
                continue;
            };
            match slot.qp.poll_transmit_repr(now) {
                Some(repr) => {
                    let sp = SimPacket::from_repr(&repr);
                    if self.cfg.carry_payload {
                        self.payload_scratch.clear();
                        self.payload_scratch.extend_from_slice(repr.payload);
                    }
                    self.hosts[host as usize].active.push_back(qpn);
                    if is_mcst_id(Ipv4Address::from_u32(sp.dst_ip)) {
                        if let Some(&g) = self.tree_by_source_qp.get(&qpn) {
                            self.tree_source_send(g, host, sp);
                            self.arm_timer(qpn);
                            if self.ports[port as usize].busy() {
                                return;
                            }
                            // Every receiver had it: nothing went out, so the NIC
                            // moves on to the next packet now.
                            continue;
                        }
                    }
                    let pkt = self.alloc_with_scratch_payload(sp, self.cfg.carry_payload);
                    self.start_tx(port, pkt);
                    self.arm_timer(qpn);
                    return;
                }
                None => {
                    slot.in_active = false;
                    self.arm_timer(qpn);
                }
            }
        }
    }

    // ---- flows ----

    fn new_qp(&mut self, cfg: QpConfig, host: u32, owner: QpOwner) -> Result<u32, EngineError> {
        let line = self.ports[self.hosts[host as usize].port as usize].rate_bps;
        let rate: Box<dyn RateController> = match &self.cfg.dcqcn {
            Some(d) => Box::new(Dcqcn::new(DcqcnConfig {
                line_rate_bps: line,
                ..d.clone()
            })),
            None => Box::new(Unlimited::default()),
        };
        let qpn = cfg.local_qpn;
        let qp = RcQueuePair::with_rate_controller(cfg, rate)?;
        let slot = Box::new(QpSlot {
            qp,
            host,
            owner,
            in_ctrl: false,
            in_active: false,
            timer_at: u64::MAX,
        });
        if self.qps.len() <= qpn as usize {
            self.qps.resize_with(qpn as usize + 1, || None);
        }
        self.qps[qpn as usize] = Some(slot);
        Ok(qpn)
    }

    /// Opens the QP pair of a connection from host `src` (QPN `sq`) to host `dst` (QPN
    /// `rq`), configured as the scenario says, with the receiver exposing
    /// `region_bytes` under rkey 1 at VA 0 (real bytes when `real_region`, else a
    /// null region). Returns the requester's UDP source port.
    fn open_qp_pair(
        &mut self,
        (src, sq): (u32, u32),
        (dst, rq): (u32, u32),
        owner: QpOwner,
        region_bytes: u64,
        real_region: bool,
    ) -> Result<u16, EngineError> {
        let (sip, dip) = (host_ip(src), host_ip(dst));
        let (c, r) = (
            self.qp_config(sip, sq, dip, rq),
            self.qp_config(dip, rq, sip, sq),
        );
        let sport = c.udp_src_port;
        self.new_qp(c, src, owner)?;
        self.new_qp(r, dst, owner)?;
        self.register_region(rq, region_bytes, real_region)?;
        Ok(sport)
    }

    /// A QP's connection attributes as the scenario sets them.
    fn qp_config(
        &self,
        local_ip: u32,
        local_qpn: u32,
        remote_ip: u32,
        remote_qpn: u32,
    ) -> QpConfig {
        let cfg = &self.cfg;
        let mut c = QpConfig::new(
            Ipv4Address::from_u32(local_ip),
            local_qpn,
            Ipv4Address::from_u32(remote_ip),
            remote_qpn,
        );
        c.mtu = cfg.mtu;
        c.max_outstanding = cfg.window;
        c.retransmission = cfg.retransmission;
        c.peer_sack = cfg.retransmission == Retransmission::SelectiveRepeat;
        c.retransmit_timeout = cfg.rto;
        c.ack_every = cfg.ack_every;
        c.cnp_interval = cfg.cnp_interval;
        c
    }

    /// Exposes `region_bytes` of QP `qpn`'s memory under rkey 1 at VA 0: real bytes
    /// when `real`, else a null region that accepts writes without storing them.
    fn register_region(
        &mut self,
        qpn: u32,
        region_bytes: u64,
        real: bool,
    ) -> Result<(), EngineError> {
        let qp = &mut self.qps[qpn as usize]
            .as_mut()
            .ok_or(EngineError::NoSuchQp)?
            .qp;
        if real {
            let len = usize::try_from(region_bytes).map_err(|_| EngineError::RegionTooLarge)?;
            qp.register_mr(0, len, 1)
        } else {
            qp.register_null_mr(0, region_bytes, 1)
        }
        .map_err(EngineError::from)
    }

    /// Posts a WRITE with immediate from QP `sq` into rkey 1 of QP `rq`, which first
    /// pre-posts the receive the immediate consumes.
    fn post_write_imm(
        &mut self,
        (sq, rq): (u32, u32),
        wr_id: u64,
        remote_va: u64,
        imm: u32,
        data: Payload,
    ) -> Result<(), EngineError> {
        self.post_recv(rq, wr_id)?;
        let op = SendOp::WriteImm {
            remote_va,
            rkey: 1,
            imm,
        };
        self.post_on(sq, wr_id, op, data)
    }

    /// Posts `op` of `data` on QP `sq` (an app QP's WRITE or SEND with immediate).
    fn post_on(
        &mut self,
        sq: u32,
        wr_id: u64,
        op: SendOp,
        data: Payload,
    ) -> Result<(), EngineError> {
        let sqp = &mut self
            .qps
            .get_mut(sq as usize)
            .and_then(|s| s.as_mut())
            .ok_or(EngineError::QpClosed)?
            .qp;
        sqp.post_send(SendRequest { wr_id, op, data })
            .map_err(EngineError::from)
    }

    fn start_flow(&mut self, i: u32) {
        let f = self.flows[i as usize].clone();
        self.results[i as usize].start_ps = self.now;
        let (sq, rq) = flow_qpns(i);
        if rq > 0xff_ffff {
            self.fail_flow(i);
            return;
        }
        let ok = self
            .open_qp_pair((f.src, sq), (f.dst, rq), QpOwner::Flow(i), f.size, false)
            .and_then(|sport| {
                self.results[i as usize].sport = sport;
                self.post_write_imm((sq, rq), i as u64, 0, i, Payload::Zeros(f.size as usize))
            });
        self.totals.flows_started += 1;
        if ok.is_err() {
            self.fail_flow(i);
            return;
        }
        self.service_qp(sq);
    }

    fn fail_flow(&mut self, i: u32) {
        self.results[i as usize].failed = true;
        self.totals.flows_failed += 1;
    }

    fn finish_flow(&mut self, flow: u32, ok: bool) {
        let (sq, rq) = flow_qpns(flow);
        for q in [sq, rq] {
            self.retire_qp(q);
        }
        if ok {
            self.results[flow as usize].finish_ps = Some(self.now);
            self.totals.flows_finished += 1;
        } else {
            self.fail_flow(flow);
        }
    }

    // ---- connections (for drivers above the engine) ----

    /// Opens a persistent RC connection from host `src` to host `dst` whose receiver
    /// exposes `region_bytes` of memory (rkey 1, VA 0) to the sender's WRITEs: real
    /// bytes when `carry_payload`, else a null region. Returns its index.
    pub fn open_connection(
        &mut self,
        src: u32,
        dst: u32,
        region_bytes: u64,
    ) -> Result<u32, EngineError> {
        let hosts = self.topo.num_hosts() as u32;
        if src >= hosts || dst >= hosts || src == dst {
            return Err(EngineError::NotTwoHosts { src, dst, hosts });
        }
        let (sq, rq) = (self.next_conn_qpn, self.next_conn_qpn + 1);
        if rq > 0xff_ffff {
            return Err(EngineError::OutOfQpns);
        }
        self.next_conn_qpn += 2;
        let id = self.conns.len() as u32;
        let real = self.cfg.carry_payload;
        self.open_qp_pair((src, sq), (dst, rq), QpOwner::Conn(id), region_bytes, real)?;
        self.conns.push(Connection { sq, rq });
        Ok(id)
    }

    /// Bytes all hosts have put on the wire so far (headers and framing included).
    pub fn host_tx_bytes(&self) -> u64 {
        self.totals.host_tx_bytes
    }

    /// Packets retransmitted so far, by finished flows and by live QPs.
    pub fn retransmitted(&self) -> u64 {
        self.totals.retransmitted
            + self
                .qps
                .iter()
                .flatten()
                .map(|s| s.qp.stats().tx_retransmitted)
                .sum::<u64>()
    }

    /// The receiver's memory region of a connection (empty unless `carry_payload`).
    pub fn connection_region(&self, conn: u32) -> Option<&[u8]> {
        let c = self.conns.get(conn as usize)?;
        let slot = self.qps.get(c.rq as usize)?.as_ref()?;
        slot.qp.mr(1).map(|m| m.data.as_slice())
    }

    /// Posts, at time `at` (not before now), an RDMA WRITE with immediate `imm` of
    /// `data` to offset `remote_offset` of the connection's receiver region.
    /// Completion comes back as [`AppEvent::SendDone`] with `wr_id`.
    pub fn post_message(
        &mut self,
        at: Instant,
        conn: u32,
        remote_offset: u64,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        if conn as usize >= self.conns.len() {
            return Err(EngineError::NoConnection(conn));
        }
        self.schedule_post(at, PostTarget::Conn(conn), remote_offset, data, imm, wr_id);
        Ok(())
    }

    fn schedule_post(
        &mut self,
        at: Instant,
        target: PostTarget,
        remote_offset: u64,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) {
        let post = PendingPost {
            target,
            remote_offset,
            data,
            imm,
            wr_id,
        };
        let i = self.posts.insert(post);
        self.app_outstanding += 1;
        self.schedule(at.as_ps().max(self.now), EvKind::Post, i, 0);
    }

    fn do_post(&mut self, i: u32) {
        let Some(p) = self.posts.take(i) else {
            return;
        };
        let (sq, ok) = match p.target {
            PostTarget::Conn(conn) => {
                let c = self.conns[conn as usize];
                let ok = self.post_write_imm((c.sq, c.rq), p.wr_id, p.remote_offset, p.imm, p.data);
                (c.sq, ok)
            }
            PostTarget::Qp { qpn, rkey } => {
                let op = SendOp::WriteImm {
                    remote_va: p.remote_offset,
                    rkey,
                    imm: p.imm,
                };
                (qpn, self.post_on(qpn, p.wr_id, op, p.data))
            }
            PostTarget::QpSend { qpn } => (
                qpn,
                self.post_on(qpn, p.wr_id, SendOp::SendImm(p.imm), p.data),
            ),
        };
        if ok.is_err() {
            self.app_outstanding -= 1;
            let ev = p.target.endpoint().send_done(p.wr_id, false);
            self.app_events.push_back((self.now, ev));
            return;
        }
        self.service_qp(sq);
    }

    /// A connection's or app QP's completions and deliveries, as app events.
    fn app_events_of(&mut self, ep: AppEndpoint, events: &[Event]) {
        for ev in events {
            let app = match *ev {
                Event::SendComplete { wr_id, ref result } => {
                    self.app_outstanding = self.app_outstanding.saturating_sub(1);
                    ep.send_done(wr_id, result.is_ok())
                }
                Event::RecvWriteImm { imm, len, .. } => ep.delivered(imm, len),
                Event::Recv {
                    imm: Some(imm),
                    ref data,
                    ..
                } => ep.received(imm, data),
                _ => continue,
            };
            self.app_events.push_back((self.now, app));
        }
    }

    // ---- app QPs, MRP and the control channel (for Cepheus groups) ----

    /// Opens a QP at `host` connected to (`remote_ip`, `remote_qpn`) — for a Cepheus
    /// group member, the virtual remote (McstID, 1). It exposes `region_bytes` of
    /// memory under rkey 1 at VA 0 (real bytes when `carry_payload`). Returns its QPN.
    pub fn open_qp(
        &mut self,
        host: u32,
        remote_ip: u32,
        remote_qpn: u32,
        region_bytes: u64,
    ) -> Result<u32, EngineError> {
        if host >= self.topo.num_hosts() as u32 {
            return Err(EngineError::NoHost(host));
        }
        let qpn = self.next_conn_qpn;
        if qpn > 0xff_ffff {
            return Err(EngineError::OutOfQpns);
        }
        self.next_conn_qpn += 1;
        let mut c = self.qp_config(host_ip(host), qpn, remote_ip, remote_qpn);
        c.udp_src_port = 49152 + (qpn & 0x3fff) as u16;
        self.new_qp(c, host, QpOwner::App)?;
        self.register_region(qpn, region_bytes, self.cfg.carry_payload)?;
        Ok(qpn)
    }

    /// An app QP (None once closed).
    pub fn qp(&self, qpn: u32) -> Option<&RcQueuePair> {
        self.qps.get(qpn as usize)?.as_ref().map(|s| &s.qp)
    }
    /// Changes an app QP (e.g. its PSNs, for source switching), then lets it act.
    pub fn modify_qp<R>(&mut self, qpn: u32, f: impl FnOnce(&mut RcQueuePair) -> R) -> Option<R> {
        let r = f(&mut self.qps.get_mut(qpn as usize)?.as_mut()?.qp);
        self.service_qp(qpn);
        Some(r)
    }
    /// Changes two app QPs together (multicast source switching), then lets both act.
    pub fn modify_qp_pair<R>(
        &mut self,
        a: u32,
        b: u32,
        f: impl FnOnce(&mut RcQueuePair, &mut RcQueuePair) -> R,
    ) -> Option<R> {
        if a == b {
            return None;
        }
        let mut sa = self.qps.get_mut(a as usize)?.take()?;
        let Some(mut sb) = self.qps.get_mut(b as usize).and_then(Option::take) else {
            self.qps[a as usize] = Some(sa);
            return None;
        };
        let r = f(&mut sa.qp, &mut sb.qp);
        self.qps[a as usize] = Some(sa);
        self.qps[b as usize] = Some(sb);
        self.service_qp(a);
        self.service_qp(b);
        Some(r)
    }
    /// Destroys an app QP: late packets for it are counted as stale, and its
    /// unfinished sends no longer hold the run open.
    pub fn close_qp(&mut self, qpn: u32) {
        if let Some(qp) = self.retire_qp(qpn) {
            let pending = qp.send_queue_len() as u64;
            self.app_outstanding = self.app_outstanding.saturating_sub(pending);
        }
    }

    /// The run's totals with the counters of the QPs still open added (a QP adds its
    /// retransmissions, timeouts and CNPs to `totals` only when it retires, so an
    /// unfinished flow's would otherwise be missing).
    pub fn totals_now(&self) -> Totals {
        let mut t = self.totals.clone();
        for slot in self.qps.iter().flatten() {
            let s = slot.qp.stats();
            t.retransmitted += s.tx_retransmitted;
            t.timeouts += s.timeouts;
            t.cnps += s.tx_cnps;
        }
        t
    }

    /// Removes a QP, adding its counters to the run's totals; returns it.
    fn retire_qp(&mut self, qpn: u32) -> Option<RcQueuePair> {
        let slot = self.qps.get_mut(qpn as usize).and_then(Option::take)?;
        let s = slot.qp.stats();
        self.totals.retransmitted += s.tx_retransmitted;
        self.totals.timeouts += s.timeouts;
        self.totals.cnps += s.tx_cnps;
        Some(slot.qp)
    }
    /// Posts a receive on an app QP (a WRITE with immediate consumes one).
    pub fn post_recv(&mut self, qpn: u32, wr_id: u64) -> Result<(), EngineError> {
        self.post_recv_len(qpn, wr_id, 0)
    }
    /// Posts a receive of up to `max_len` bytes (a SEND's buffer) on app QP `qpn`.
    pub fn post_recv_len(
        &mut self,
        qpn: u32,
        wr_id: u64,
        max_len: usize,
    ) -> Result<(), EngineError> {
        let slot = self
            .qps
            .get_mut(qpn as usize)
            .and_then(|s| s.as_mut())
            .ok_or(EngineError::NoSuchQp)?;
        slot.qp.post_recv(wr_id, max_len).map_err(EngineError::from)
    }
    /// Posts, at `at`, a SEND with immediate of `data` on app QP `qpn` (the receivers
    /// need receives of its length). Completion: [`AppEvent::QpSendDone`].
    pub fn post_qp_send(
        &mut self,
        at: Instant,
        qpn: u32,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        self.post_app(at, PostTarget::QpSend { qpn }, 0, data, imm, wr_id)
    }
    /// Posts, at `at`, an RDMA WRITE with immediate of `data` at `remote_va` under
    /// `rkey` on app QP `qpn`. Completion: [`AppEvent::QpSendDone`].
    #[allow(clippy::too_many_arguments)]
    pub fn post_qp_write(
        &mut self,
        at: Instant,
        qpn: u32,
        remote_va: u64,
        rkey: u32,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        self.post_app(
            at,
            PostTarget::Qp { qpn, rkey },
            remote_va,
            data,
            imm,
            wr_id,
        )
    }

    /// Schedules a post on an app QP that exists.
    fn post_app(
        &mut self,
        at: Instant,
        target: PostTarget,
        remote_va: u64,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        let qpn = match target {
            PostTarget::Qp { qpn, .. } | PostTarget::QpSend { qpn } => qpn,
            PostTarget::Conn(_) => return Err(EngineError::NotAppQp),
        };
        if self.qp(qpn).is_none() {
            return Err(EngineError::NoQp(qpn));
        }
        self.schedule_post(at, target, remote_va, data, imm, wr_id);
        Ok(())
    }
    /// The memory of an app QP's region (empty unless `carry_payload`).
    pub fn qp_region(&self, qpn: u32) -> Option<&[u8]> {
        self.qp(qpn)?.mr(1).map(|m| m.data.as_slice())
    }

    /// Per switch (node id, engine): the Cepheus multicast engines.
    /// How long a control-channel message takes (`EngineConfig::control_latency`).
    pub fn control_latency(&self) -> Duration {
        self.cfg.control_latency
    }

    /// Switch `node` restarts: its Cepheus engine starts empty (no groups, no
    /// feedback state, no held CNPs), as a restarted `rocast switch` daemon does; its
    /// counters go on (the fabric's totals keep what it did before). Frames already in
    /// its egress queues still leave: a restart in the simulator loses tables, not
    /// queued bytes (the group's RC retransmissions cover either). Err if `node` is not
    /// a switch.
    pub fn restart_switch(&mut self, node: u32) -> Result<(), EngineError> {
        let sw = (node as usize)
            .checked_sub(self.topo.num_hosts())
            .filter(|&s| s < self.cepheus.len())
            .ok_or(EngineError::NotSwitch(node))?;
        let stats = self.cepheus[sw].stats.clone();
        self.cepheus[sw] = empty_cepheus_switch(&self.topo, &self.cfg, node);
        self.cepheus[sw].stats = stats;
        self.switch_timer[sw] = None;
        Ok(())
    }

    pub fn cepheus_switches(&self) -> impl Iterator<Item = (u32, &CepheusSwitch)> {
        let h = self.topo.num_hosts() as u32;
        self.cepheus
            .iter()
            .enumerate()
            .map(move |(i, c)| (h + i as u32, c))
    }

    fn push_control(&mut self, at: u64, msg: ControlMsg) {
        let i = self.controls.insert(msg);
        self.app_outstanding += 1;
        self.schedule(at, EvKind::Control, i, 0);
    }

    /// Sends an MRP packet (its UDP payload) out of `node`'s port `port` now: it
    /// arrives at the far end after serialisation and propagation. MRP is
    /// control-plane traffic sent before the group's data, so it is not queued
    /// behind data here.
    fn send_mrp(&mut self, at: u64, node: u32, port: u16, mrp: &MrpRepr) {
        let mut bytes = vec![0; mrp.buffer_len()];
        mrp.emit(&mut bytes);
        self.send_mrp_bytes(at, node, port, bytes);
    }

    /// An MRP datagram (registration, prune or release) out of `node`'s `port`.
    fn send_mrp_bytes(&mut self, at: u64, node: u32, port: u16, bytes: Vec<u8>) {
        let p = &self.ports[(self.node_port_base[node as usize] + port as u32) as usize];
        if !p.up {
            return;
        }
        let wire = bytes.len() as u64 + 20 + 8 + crate::packet::FRAME_OVERHEAD as u64;
        let at = at + Duration::for_bytes(wire, p.rate_bps).as_ps() + p.delay_ps;
        let peer = &self.ports[p.reverse as usize];
        let (node, port) = (peer.node, peer.local);
        self.push_control(at, ControlMsg::Mrp { node, port, bytes });
    }

    /// The leader host `host` sends an MRP packet toward the group (at `at`).
    pub fn inject_mrp(&mut self, at: Instant, host: u32, mrp: &MrpRepr) {
        self.send_mrp(at.as_ps().max(self.now), host, 0, mrp);
    }

    /// The leader host `host` sends an MRP datagram (a registration, a prune or a
    /// release, as `control::session` emits them) toward the group (at `at`).
    pub fn inject_mrp_bytes(&mut self, at: Instant, host: u32, bytes: Vec<u8>) {
        self.send_mrp_bytes(at.as_ps().max(self.now), host, 0, bytes);
    }

    /// Sends `bytes` from host `from` to host `to` over the control channel.
    pub fn send_control(&mut self, at: Instant, from: u32, to: u32, bytes: Vec<u8>) {
        let at = at.as_ps().max(self.now) + self.cfg.control_latency.as_ps();
        self.push_control(at, ControlMsg::App(AppEvent::Control { from, to, bytes }));
    }

    fn control_arrive(&mut self, i: u32) {
        let Some(msg) = self.controls.take(i) else {
            return;
        };
        self.app_outstanding -= 1;
        match msg {
            ControlMsg::App(ev) => self.app_events.push_back((self.now, ev)),
            ControlMsg::Mrp { node, port, bytes } => {
                if (node as usize) < self.topo.num_hosts() {
                    self.app_events
                        .push_back((self.now, AppEvent::Mrp { host: node, bytes }));
                    return;
                }
                let sw = node as usize - self.topo.num_hosts();
                // The same MRP messages, in the same order, and the same handlers as
                // `rocast switch` (`switch::pipeline`, `switch::mrp_agent`); a prune or a
                // release from the group's source direction goes on to the switches
                // downstream.
                let table = SwitchRoutes {
                    topo: &self.topo,
                    routes: &self.routes,
                    node,
                };
                let mrp = match MrpMessage::parse(&bytes) {
                    Some(MrpMessage::Register(mrp)) => mrp,
                    Some(MrpMessage::Prune(prune)) => {
                        match mrp_agent::handle_prune(&mut self.cepheus[sw], port, &prune, &table) {
                            Some(out) => {
                                for (p, next) in out.next {
                                    let mut b = vec![0u8; next.buffer_len()];
                                    next.emit(&mut b);
                                    self.send_mrp_bytes(self.now, node, p, b);
                                }
                            }
                            None => self.mrp_ignored += 1,
                        }
                        return;
                    }
                    Some(MrpMessage::Release(rel)) => {
                        match mrp_agent::handle_release(&mut self.cepheus[sw], port, rel.mcst_id) {
                            Some(next) => {
                                for p in next {
                                    self.send_mrp_bytes(self.now, node, p, bytes.clone());
                                }
                            }
                            None => self.mrp_ignored += 1,
                        }
                        return;
                    }
                    // The simulated fabric has no allocation service: its groups'
                    // addresses are the scenario's.
                    Some(MrpMessage::Allocate(_)) => {
                        self.mrp_ignored += 1;
                        return;
                    }
                    None => {
                        self.mrp_malformed += 1;
                        return;
                    }
                };
                match mrp_agent::handle_mrp(&mut self.cepheus[sw], port, &mrp, &table) {
                    Ok(out) => {
                        for (p, m) in out {
                            self.send_mrp(self.now, node, p, &m);
                        }
                    }
                    Err(reason) => {
                        let report = SwitchReport {
                            switch: node,
                            mcst_id: mrp.mcst_id,
                            reason,
                        };
                        let at = self.now + self.cfg.control_latency.as_ps();
                        self.push_control(at, ControlMsg::App(AppEvent::SwitchReport(report)));
                    }
                }
            }
        }
    }

    // ---- links ----

    fn link_change(&mut self, link: u32, up: bool) {
        self.topo.links[link as usize].failed = !up;
        let l = &self.topo.links[link as usize];
        let a = l.a;
        let pa = self.node_port_base[a as usize] + self.topo.port_of(a, link).unwrap() as u32;
        let pb = self.ports[pa as usize].reverse;
        for p in [pa, pb] {
            self.ports[p as usize].up = up;
        }
        // Re-route around the change (control-plane convergence is taken as instant).
        self.routes = Routes::compute(&self.topo).expect("hosts keep one link");
        if !up {
            // Flush what was queued for the dead ports.
            // (Host ports queue nothing: a NIC pulls from its QPs when it transmits.)
            for p in [pa, pb] {
                if (self.ports[p as usize].node as usize) < self.topo.num_hosts() {
                    continue;
                }
                for class in 0..PRIORITIES {
                    while let Some(hop) = self.dequeue(p, class) {
                        self.drop_at_queue(p, hop.slot);
                    }
                }
            }
        } else {
            self.kick(pa);
            self.kick(pb);
        }
    }

    fn sample(&mut self) {
        let Some(iv) = self.cfg.qlen_interval else {
            return;
        };
        let n_hosts = self.topo.num_hosts();
        for p in &self.ports {
            if (p.node as usize) < n_hosts {
                continue;
            }
            let q = &self.egress[p.node as usize - n_hosts];
            for class in 0..PRIORITIES as u8 {
                let b = q.queue_bytes(p.local, class);
                if b > 0 {
                    self.qlen_log.push(format!(
                        "{} {} {} {} {}",
                        self.now / 1000,
                        p.node,
                        p.local,
                        class,
                        b
                    ));
                }
            }
        }
        self.schedule(self.now + iv.as_ps(), EvKind::Sample, 0, 0);
    }

    // ---- results ----

    pub fn port_counters(&self) -> impl Iterator<Item = (u32, u16, u32, &PortCounters)> {
        self.ports.iter().map(|p| (p.node, p.local, p.link, &p.c))
    }

    /// Sums the per-port drop counters into `totals`, and checks byte conservation:
    /// what hosts sent equals what hosts received plus what was dropped plus what is
    /// still queued or in flight. Returns the imbalance (0 when conserved).
    pub fn finalize(&mut self) -> i128 {
        let mut t = self.totals.clone();
        t.link_drops = 0;
        t.queue_drops = 0;
        let mut dropped = self.unroutable_bytes as i128;
        let mut held = 0i128;
        let n_hosts = self.topo.num_hosts();
        for p in &self.ports {
            if p.node as usize >= n_hosts {
                held += self.egress[p.node as usize - n_hosts].port_bytes(p.local) as i128;
            }
            t.link_drops += p.c.link_drops;
            t.queue_drops += p.c.queue_drops;
            dropped += (p.c.link_drop_bytes + p.c.queue_drop_bytes) as i128;
            for &(_, hop) in &p.in_flight {
                held += hop.wire as i128;
            }
            if p.busy() {
                held += p.current.wire as i128;
            }
        }
        t.drop_bytes = dropped as u64;
        self.totals = t;
        self.totals.host_tx_bytes as i128 - self.totals.host_rx_bytes as i128 - dropped - held
    }

    /// Checks per-link conservation: every port's transmitted bytes equal what the far
    /// end received plus link drops plus what is in flight on it.
    pub fn link_imbalance(&self) -> u64 {
        let mut bad = 0;
        for p in &self.ports {
            let flying: u64 = p.in_flight.iter().map(|&(_, hop)| hop.wire as u64).sum();
            if p.c.tx_bytes != p.c.rx_bytes + p.c.link_drop_bytes + flying {
                bad += 1;
            }
        }
        bad
    }

    /// Bytes queued at `node`'s port `local`, all classes.
    pub fn port_queue_bytes(&self, node: u32, local: u16) -> u64 {
        match (node as usize).checked_sub(self.topo.num_hosts()) {
            Some(sw) => self.egress[sw].port_bytes(local),
            None => 0,
        }
    }

    /// Data bytes flow `i`'s sender has transmitted so far (None before it starts or
    /// after it finished).
    pub fn flow_tx_bytes(&self, i: u32) -> Option<u64> {
        self.qps
            .get(flow_qpns(i).0 as usize)?
            .as_ref()
            .map(|s| s.qp.stats().tx_data_bytes)
    }
}

/// The unicast forwarding table of one switch, as the MRP agent reads it.
struct SwitchRoutes<'a> {
    topo: &'a Topology,
    routes: &'a Routes,
    node: u32,
}

impl UnicastTable for SwitchRoutes<'_> {
    fn route(&self, ip: Ipv4Address) -> UnicastRoute<'_> {
        let ip = ip.to_u32();
        let host = host_of_ip(ip);
        if host as usize >= self.topo.num_hosts() || host_ip(host) != ip {
            return UnicastRoute::Unknown;
        }
        let (sw, port) = self.routes.attachment(host);
        if sw == self.node {
            return UnicastRoute::Attached(port);
        }
        match self.routes.next_hops(self.node, host) {
            [] => UnicastRoute::Unknown,
            ports => UnicastRoute::Via(ports),
        }
    }
}

/// Switch `node`'s Cepheus engine as the run starts it (and a restart leaves it).
fn empty_cepheus_switch(topo: &Topology, cfg: &EngineConfig, node: u32) -> CepheusSwitch {
    let ports = topo.ports(node).len() as u16;
    CepheusSwitch::new(ports, cfg.mft_max_groups, cfg.cnp_filter.build())
}

/// A hint to load the cache line holding `x`.
#[inline(always)]
fn prefetch<T>(x: &T) {
    prefetch_ptr(x as *const T as *const ());
}

/// A hint to load the cache line at address `p` (a null one is skipped; nothing on
/// targets without the instruction).
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_ptr(p: *const ()) {
    #[cfg(target_arch = "x86_64")]
    if !p.is_null() {
        // SAFETY: a prefetch never faults, whatever the address, and reads nothing the
        // program sees; SSE is baseline on x86_64. No safe prefetch exists on stable.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn mac(node: u32) -> [u8; 6] {
    let b = node.to_be_bytes();
    [0x02, 0x00, b[0], b[1], b[2], b[3]]
}

/// The ideal flow completion time on an empty network: the packet train pipelined
/// through every store-and-forward hop of the path at line rate, then the last ACK
/// back. With identical packets of wire size s over hops of rate r_j and delay d_j,
/// the last packet arrives at Σ_j (s/r_j + d_j) + (n−1)·s/min r_j; the first and last
/// packets' header differences (RETH, ImmDt, a short tail) are accounted exactly in
/// the total bytes at the bottleneck.
pub fn standalone_fct(
    topo: &Topology,
    routes: &Routes,
    src: u32,
    dst: u32,
    size: u64,
    mtu: usize,
) -> u64 {
    let c = ideal_message(topo, routes, src, dst, size, mtu);
    c.deliver_ps + c.ack_ps
}

/// The parts of [`standalone_fct`]: how long the message occupies the sender's NIC,
/// post → last byte delivered, and delivery → the ACK back at the sender.
pub fn ideal_message(
    topo: &Topology,
    routes: &Routes,
    src: u32,
    dst: u32,
    size: u64,
    mtu: usize,
) -> MessageCost {
    let zero = MessageCost {
        nic_ps: 0,
        deliver_ps: 0,
        ack_ps: 0,
    };
    let Some(path) = routes.path(topo, src, dst) else {
        return zero;
    };
    let mtu = mtu as u64;
    let n = size.div_ceil(mtu).max(1);
    // Every packet: IPv4, UDP, BTH, ICRC and framing; RETH on the first, ImmDt on the
    // last, and padding to a 4-byte multiple.
    let hdr = (IPV4_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN + ICRC_LEN) as u64
        + crate::packet::FRAME_OVERHEAD as u64;
    let (reth, imm) = (RETH_LEN as u64, IMMDT_LEN as u64);
    let full = mtu + hdr;
    let total_wire = size + n * hdr + reth + imm + (4 - size % 4) % 4;
    let ack = hdr + AETH_LEN as u64;
    let mut t = 0u64;
    let mut r_min = u64::MAX;
    let mut back = 0u64;
    let first = full.min(size + hdr + reth);
    for &l in &path {
        let spec = &topo.links[l as usize];
        r_min = r_min.min(spec.rate_bps);
        t += Duration::for_bytes(first, spec.rate_bps).as_ps() + spec.delay.as_ps();
        back += Duration::for_bytes(ack, spec.rate_bps).as_ps() + spec.delay.as_ps();
    }
    let first_rate = path
        .first()
        .map(|&l| topo.links[l as usize].rate_bps)
        .unwrap_or(r_min);
    MessageCost {
        nic_ps: Duration::for_bytes(total_wire, first_rate).as_ps(),
        deliver_ps: t + Duration::for_bytes(total_wire - first, r_min).as_ps(),
        ack_ps: back,
    }
}

#[cfg(test)]
mod hop_tests {
    use super::{Hop, Port, PortCounters, SimPacket};

    #[test]
    fn a_ports_per_packet_fields_lie_in_its_first_two_cache_lines() {
        // What prefetch_ahead loads: the first two lines of a port.
        let end = |offset: usize, size: usize| offset + size;
        assert_eq!(std::mem::offset_of!(Port, in_flight), 0);
        assert!(end(std::mem::offset_of!(Port, delay_ps), 8) <= 64);
        assert!(end(std::mem::offset_of!(Port, last_ser_ps), 8) <= 128);
        assert!(
            end(
                std::mem::offset_of!(Port, current),
                std::mem::size_of::<Hop>()
            ) <= 128
        );
        let rx = std::mem::offset_of!(Port, c) + std::mem::offset_of!(PortCounters, rx_bytes);
        assert!(end(rx, 8) <= 128, "rx_bytes at {rx}");
    }

    #[test]
    fn a_hop_copies_what_routing_and_queueing_read_from_the_record() {
        assert_eq!(std::mem::size_of::<Hop>(), 20);
        let mut sp = SimPacket::default();
        sp.src_ip = 0x0a00_0001;
        sp.dst_ip = 0x0a00_0203;
        sp.sport = 4711;
        sp.class = 3;
        sp.ip_len = 1000;
        let h = Hop::of(&sp, 9);
        assert_eq!(
            (h.slot, h.wire, h.src_ip, h.dst_ip),
            (9, sp.wire_len(), sp.src_ip, sp.dst_ip)
        );
        assert_eq!(
            (h.sport, h.class, h.ect(), h.labelled()),
            (4711, 3, false, false)
        );
        sp.ecn = 2;
        sp.set_label(5, 0);
        let h = Hop::of(&sp, 9);
        assert!(h.ect() && h.labelled());
    }
}
