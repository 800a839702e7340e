//! The discrete-event engine: links, switch ports and host NICs driving unmodified
//! `rnic::RcQueuePair` endpoints and the `fabric` switch logic.
//!
//! Design (after htsim): time is integer picoseconds; the event queue holds at most one
//! pending event per port transmitter, one per link direction (the head of its
//! in-flight FIFO), one per QP timer, plus flow starts and link changes. Packets are
//! [`SimPacket`](crate::packet::SimPacket) records in a slab reused through a free
//! list, and queues and links hold a 20-byte `Hop` (the slot plus the fields routing
//! reads), so steady state allocates nothing per packet and a unicast switch hop does
//! not touch the record. Routes are precomputed (`plan::Routes`). Ties in time break
//! by insertion order, so a run is a pure function of scenario and seed.
//!
//! Memory: per port ~300 bytes (8 class queues, in-flight FIFO, counters), per switch
//! 200 bytes per port of MMU state, per active flow two QPs (~1.5 KB), per packet in
//! flight 96 bytes (`SimPacket`), plus 28 bytes per packet in a switch queue (its
//! `Hop`, ingress port and bytes) and 32 per packet on a link (arrival time and `Hop`).
//!
//! The parts, each owning its state (a field of [`Engine`]) and the code of its job:
//! `slab` (packet records and payloads), `fabric` (links, ports, egress queues, PFC),
//! `switching` (unicast forwarding and the switches' Cepheus and PEEL engines),
//! `tree_groups` (tree-multicast groups at their sources and relays), `hosts` (NICs
//! and QPs), `flow` (the scenario's flows), `app` (connections and posts of the
//! layers above), `control` (MRP and the control channel) and `stats` (totals, logs,
//! capture). This file holds the shared types, [`Engine`], its construction and the
//! event loop, which hands each event kind to the part that handles it. A method that
//! needs only its part's state is a method of that part; one that needs several is an
//! `impl Engine` method in its part's file.

mod app;
mod control;
pub mod event_queue;
mod fabric;
mod flow;
pub mod frames;
mod hosts;
pub mod partition;
mod slab;
mod stats;
mod switching;
mod tree_groups;
pub mod tree_multicast;

pub use app::AppEvent;
pub use control::ControlChannel;
pub use event_queue::EventQueue;
pub use fabric::PortCounters;
pub use flow::{ideal_message, standalone_fct, FlowResult, FlowSpec, ScenarioFlows};
pub use partition::{PartitionedEngine, Partitioning};
pub use stats::{Statistics, Totals, TreeMulticastStats};
pub use tree_groups::TreeGroupSpec;

// The engine's parts refer to each other's types through these names.
use app::{App, AppEndpoint};
use fabric::{Fabric, Hop, Port, SHARED_CELL};
use hosts::{qp_input, Hosts, QpOwner};
use partition::Crossing;
use slab::PacketSlab;
use switching::{SwitchNodes, SwitchRoutes};
use tree_groups::TreeGroups;
use tree_multicast::{GroupForwarding, PeelFabric, Step, TreeMulticastError};

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use rocast_core::fabric::cepheus::CnpFilterPolicy;
use rocast_core::fabric::EcnRed;
use rocast_core::plan::Topology;
use rocast_core::rnic::{DcqcnConfig, Retransmission};
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::Ipv4Address;

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
    now: u64,
    /// Time of the last event processed.
    last_event: u64,
    cfg: EngineConfig,
    events: EventQueue<Ev>,
    /// The run's one seeded RNG (link and switch loss, RED marking).
    rng: ChaCha8Rng,
    /// Packet records in flight and their payloads.
    packets: PacketSlab,
    /// Links, ports, routes and the switches' egress queues.
    fabric: Fabric,
    /// The switches' multicast engines.
    switches: SwitchNodes,
    /// Tree-multicast groups (PEEL, Orca, per-group trees).
    trees: TreeGroups,
    /// Host NICs and their QPs.
    hosts: Hosts,
    /// The scenario's flows and their results.
    pub flows: ScenarioFlows,
    /// Connections, posts and events of the layer above.
    app: App,
    /// MRP and the out-of-band control channel.
    pub control: ControlChannel,
    /// Counters, logs and the capture.
    pub stats: Statistics,
    /// This engine's part when the run is cut into partitions (`partition`).
    partition: Option<Box<partition::PartitionState>>,
}

impl Engine {
    pub fn new(
        topo: Topology,
        cfg: EngineConfig,
        flows: Vec<FlowSpec>,
    ) -> Result<Self, EngineError> {
        let fabric = Fabric::new(topo, &cfg)?;
        Ok(Self::build(fabric, cfg, flows, |_| true))
    }

    /// [`Engine::new`], scheduling the start of the flows `starts` accepts (a
    /// partition starts those it sends or receives).
    fn build(
        fabric: Fabric,
        cfg: EngineConfig,
        flows: Vec<FlowSpec>,
        starts: impl Fn(&FlowSpec) -> bool,
    ) -> Self {
        // The parts are built in the order the single struct's fields were, so that the
        // heap is laid out as before (a large fabric's run waits on memory).
        let hosts = Hosts::new(&fabric, 2 * flows.len() as u32 + 2);
        let flows = ScenarioFlows::new(&fabric.topo, &fabric.routes, &cfg, flows);
        let switches = SwitchNodes::new(&fabric.topo, &cfg);
        let mut e = Engine {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            now: 0,
            last_event: 0,
            events: EventQueue::new(),
            packets: PacketSlab::default(),
            switches,
            trees: TreeGroups::default(),
            hosts,
            flows,
            app: App::default(),
            control: ControlChannel::default(),
            stats: Statistics::default(),
            partition: None,
            fabric,
            cfg,
        };
        for i in 0..e.flows.specs.len() {
            if e.flows.specs[i].after.is_none() && starts(&e.flows.specs[i]) {
                let t = e.flows.specs[i].start_ps;
                e.schedule(t, EvKind::FlowStart, i as u32, 0);
            }
        }
        if let Some(iv) = e.cfg.qlen_interval {
            e.schedule(iv.as_ps(), EvKind::Sample, 0, 0);
        }
        e
    }

    pub fn now(&self) -> Instant {
        Instant::from_ps(self.now)
    }
    /// Time of the last event processed.
    pub fn last_event(&self) -> Instant {
        Instant::from_ps(self.last_event)
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

    fn run(&mut self, until: u64, stop_on_app: bool) -> bool {
        while let Some(time) = self.events.peek_time() {
            if stop_on_app && !self.app.events.is_empty() {
                return true;
            }
            if time > until {
                self.now = until;
                return true;
            }
            // (A partition runs its window out: others' flows still cross it.)
            if self.partition.is_none()
                && self.flows_outstanding() == 0
                && self.app.outstanding == 0
            {
                // Everything finished: what is left are stale timers and samples.
                return false;
            }
            let (_, ev) = self.events.pop().expect("peeked");
            self.prefetch_ahead();
            self.now = time;
            self.last_event = self.now;
            self.stats.totals.events += 1;
            let (a, b) = (ev.a(), ev.b());
            // Each kind to the part that handles it: `flow` (FlowStart), `fabric`
            // (TxDone, Arrive, Pfc, LinkChange, LossChange), `hosts` (QpTimer), `stats`
            // (Sample), `app` (Post), `control` (Control), `switching` (SwitchTimer).
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
                    let (port, p) = self.fabric.loss_changes[a as usize];
                    self.fabric.ports[port as usize].loss = p;
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
        let n_hosts = self.fabric.topo.num_hosts();
        // The port of an Arrive or TxDone event.
        let port_at = |ahead: usize| {
            let ev = self.events.peek_ahead(ahead)?;
            match ev.kind() {
                EvKind::Arrive | EvKind::TxDone => {
                    Some((ev.kind(), self.fabric.ports.get(ev.a() as usize)?))
                }
                _ => None,
            }
        };
        // The egress queue a switch port sends from next: (its header, its head).
        let queue_of = |p: &Port| {
            let sw = (p.node as usize).checked_sub(n_hosts)?;
            self.fabric
                .egress
                .get(sw)?
                .next_queue_hint(p.local, p.paused)
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
                if let Some(h) = self.hosts.nics.get(p.node as usize) {
                    prefetch(h);
                }
            }
            None => {}
        }
        match port_at(1) {
            Some((EvKind::Arrive, p)) => {
                if let Some(far) = self.fabric.ports.get(p.reverse as usize) {
                    prefetch(far);
                }
                let record = p
                    .in_flight
                    .front()
                    .and_then(|(_, h)| self.packets.records.get(h.slot as usize));
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
                    .nics
                    .get(p.node as usize)
                    .and_then(|h| h.active.front());
                if let Some(Some(slot)) = qpn.and_then(|&q| self.hosts.qps.get(q as usize)) {
                    prefetch(&**slot);
                }
            }
            None => {}
        }
    }
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
