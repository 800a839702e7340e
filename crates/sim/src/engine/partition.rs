//! One run on every core: conservative parallel simulation of a flow-level scenario.
//!
//! The fabric is cut into partitions (a fat-tree's pods with their hosts, the top
//! tier's switches dealt round-robin among them); each partition is an [`Engine`]
//! that owns its nodes' ports, queues, NICs, QPs, packet slab and RNG stream, and
//! runs on a worker thread. A packet put on a link whose far end is another
//! partition's, and a PFC frame toward another partition's port, leave through the
//! partition's outbox. The partitions advance in windows as long as the smallest
//! delay of a cut link (the lookahead of conservative synchronisation: Chandy–Misra–
//! Bryant, as ns-3's distributed simulator and OMNeT++ run it with a barrier per
//! window): nothing sent during a window can arrive before the next one starts, so
//! at each barrier the outboxes are handed over, in partition order, and every
//! partition goes on without waiting for any other.
//!
//! Determinism: the partitioning depends on the topology only, never on the thread
//! count, and each partition's window depends only on its own state and what it was
//! handed, in a fixed order. So a seed gives byte-identical outputs with 1 thread or
//! N (`tests::one_thread_and_many_agree`). The partitioned schedule is not the
//! single-queue engine's: events at the same picosecond in different partitions have
//! no order between them, and each partition draws from its own ChaCha stream (the
//! stream number is the partition's index; partition 0's is the single engine's).
//!
//! What runs partitioned: flow-level scenarios (the workload's flows on a fabric).
//! Runs that need one global order stay on one engine (`plan` says why): flows that
//! start after other flows (`after`, which has no lookahead), packet capture, queue
//! sampling, carried payloads, and every experiment of `rocast-eval` (its layers
//! above the fabric post and poll through one engine; their figures' points already
//! run in parallel, one engine per point).
//!
//! Memory: the topology and its routes are one copy, shared until a link changes;
//! each partition holds the whole fabric's port and queue arrays (only its own are
//! touched), so P partitions cost P times ports × ~300 B and switch ports × 200 B;
//! packets, QPs and flows are held once, by the partition that owns them, plus an
//! inert copy of each cut flow's far QP (~1.5 KB). `plan` caps P at
//! [`MAX_PARTITIONS`].

use super::{Engine, EngineConfig, EngineError, EvKind, Fabric, FlowResult, FlowSpec, Hop, Totals};
use crate::packet::SimPacket;
use rayon::prelude::*;
use rocast_core::plan::{NodeRole, Routes, Topology};
use rocast_core::time::Instant;
use std::sync::Arc;

/// The most partitions one run is cut into: enough for a 16-core machine, few enough
/// that the per-partition copies of the fabric's arrays stay small.
pub const MAX_PARTITIONS: usize = 16;

/// How a run is cut: the partition owning each node, and the lookahead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partitioning {
    /// Per node (hosts, then switches), its partition.
    pub owner: Vec<u16>,
    pub parts: usize,
    /// The smallest delay of a link between two partitions, in picoseconds.
    pub lookahead_ps: u64,
}

/// Why a run stays on one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serial {
    /// A flow starts after another finishes: that start has no lookahead.
    DependentFlows,
    /// Captured frames are kept in one global order.
    Capture,
    /// Queue samples read every switch at one instant.
    QueueSamples,
    /// Payload bytes travel with packets (not on flow-level runs).
    Payloads,
    /// The fabric has no cut with a positive delay (one pod, or zero-delay links).
    NoCut,
    /// One partition was asked for (`--partitions 1`).
    Asked,
}

impl std::fmt::Display for Serial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Serial::DependentFlows => "flows start after other flows (workload `after`)",
            Serial::Capture => "packets are captured (output.capture_links)",
            Serial::QueueSamples => "queues are sampled (output.qlen_interval_us)",
            Serial::Payloads => "payloads are carried",
            Serial::NoCut => "the fabric has no cut with a positive link delay",
            Serial::Asked => "one partition asked for (--partitions 1)",
        })
    }
}

/// Cuts `topo` for a flow-level run, or says why the run stays on one engine.
///
/// Hosts and every switch below the top tier fall into the connected components
/// that remain when the top tier is removed (a fat-tree's pods, a leaf-spine's
/// leaves with their hosts); consecutive components are grouped into at most
/// [`MAX_PARTITIONS`] partitions and the top tier's switches are dealt round-robin.
pub fn plan(
    topo: &Topology,
    cfg: &EngineConfig,
    flows: &[FlowSpec],
    max_parts: usize,
) -> Result<Partitioning, Serial> {
    if max_parts == 1 {
        return Err(Serial::Asked);
    }
    if flows.iter().any(|f| f.after.is_some()) {
        return Err(Serial::DependentFlows);
    }
    if !cfg.capture_links.is_empty() {
        return Err(Serial::Capture);
    }
    if cfg.qlen_interval.is_some() {
        return Err(Serial::QueueSamples);
    }
    if cfg.carry_payload {
        return Err(Serial::Payloads);
    }
    let n = topo.num_nodes();
    let tier = |v: usize| match topo.roles[v] {
        NodeRole::Switch { tier } => Some(tier),
        _ => None,
    };
    let top = (0..n).filter_map(tier).max().ok_or(Serial::NoCut)?;
    let is_top = |v: usize| tier(v) == Some(top);
    // Components of the fabric without its top tier (union-find, smallest id as root
    // so that components are numbered in node order).
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut v: usize) -> usize {
        while root[v] != v {
            root[v] = root[root[v]];
            v = root[v];
        }
        v
    }
    for l in &topo.links {
        let (a, b) = (l.a as usize, l.b as usize);
        if is_top(a) || is_top(b) {
            continue;
        }
        let (ra, rb) = (find(&mut root, a), find(&mut root, b));
        if ra != rb {
            root[ra.max(rb)] = ra.min(rb);
        }
    }
    let mut component = vec![usize::MAX; n];
    let mut count = 0usize;
    let mut index_of_root = vec![usize::MAX; n];
    for v in 0..n {
        if is_top(v) {
            continue;
        }
        let r = find(&mut root, v);
        if index_of_root[r] == usize::MAX {
            index_of_root[r] = count;
            count += 1;
        }
        component[v] = index_of_root[r];
    }
    if count < 2 {
        return Err(Serial::NoCut);
    }
    let parts = count.min(if max_parts == 0 {
        MAX_PARTITIONS
    } else {
        max_parts
    });
    let mut owner = vec![0u16; n];
    let mut next_top = 0usize;
    for v in 0..n {
        owner[v] = if is_top(v) {
            next_top += 1;
            ((next_top - 1) % parts) as u16
        } else {
            (component[v] * parts / count) as u16
        };
    }
    let lookahead_ps = topo
        .links
        .iter()
        .filter(|l| owner[l.a as usize] != owner[l.b as usize])
        .map(|l| l.delay.as_ps())
        .min()
        .ok_or(Serial::NoCut)?;
    if lookahead_ps == 0 {
        return Err(Serial::NoCut);
    }
    Ok(Partitioning {
        owner,
        parts,
        lookahead_ps,
    })
}

/// What crosses from one partition to another at a barrier.
#[derive(Clone, Copy, Debug)]
pub(super) enum Crossing {
    /// A packet put on a cut link: it reaches the far end of `port` at `at`.
    Packet {
        port: u32,
        at: u64,
        record: SimPacket,
        hop: Hop,
    },
    /// A PFC frame for `port` (the far partition's), taking effect at `at`.
    Pfc { port: u32, at: u64, arg: u32 },
    /// The sender saw a flow finish: its receiving QP, in the far partition, retires.
    Retire { qpn: u32 },
}

/// An engine's part in a partitioned run.
pub(super) struct PartitionState {
    pub(super) me: u16,
    /// Per node, its partition.
    owner: Arc<[u16]>,
    /// Per port, the partition of the node at its far end.
    far: Vec<u16>,
    /// What leaves this partition at the next barrier, by destination partition
    /// (each in the order sent), so the destinations take theirs in parallel.
    outbox: Vec<Vec<Crossing>>,
    /// When a flow this partition sends last finished or failed: the run's end when
    /// the last flow is done (the single engine stops at that event).
    pub(super) last_flow_change: u64,
}

impl PartitionState {
    pub(super) fn owns(&self, node: u32) -> bool {
        self.owner[node as usize] == self.me
    }
    /// The partition at the far end of `port`, if not this one.
    #[inline]
    pub(super) fn remote_far(&self, port: u32) -> Option<u16> {
        let f = self.far[port as usize];
        (f != self.me).then_some(f)
    }
    pub(super) fn owner_of(&self, node: u32) -> u16 {
        self.owner[node as usize]
    }
    /// Queues `c` for partition `to` at the next barrier.
    #[inline]
    pub(super) fn send(&mut self, to: u16, c: Crossing) {
        self.outbox[to as usize].push(c);
    }
}

impl Engine {
    /// Whether this engine runs `node` (always, unpartitioned).
    pub(super) fn owns(&self, node: u32) -> bool {
        self.partition.as_ref().is_none_or(|p| p.owns(node))
    }

    /// Takes in what another partition sent across a barrier.
    pub(super) fn take_crossing(&mut self, c: Crossing) {
        match c {
            Crossing::Packet {
                port,
                at,
                record,
                mut hop,
            } => {
                hop.slot = self.alloc(record);
                let p = &mut self.fabric.ports[port as usize];
                p.in_flight.push_back((at, hop));
                if p.in_flight.len() == 1 {
                    self.schedule(at, EvKind::Arrive, port, 0);
                }
            }
            Crossing::Pfc { port, at, arg } => self.schedule(at, EvKind::Pfc, port, arg),
            Crossing::Retire { qpn } => {
                self.retire_qp(qpn);
            }
        }
    }
}

/// A run cut into partitions, each an [`Engine`], advanced window by window on a
/// pool of worker threads.
pub struct PartitionedEngine {
    parts: Vec<Engine>,
    lookahead_ps: u64,
    /// The start of the current window (a multiple of the lookahead).
    window_start: u64,
    /// The partitions have run every event before this time.
    ran_to: u64,
    /// Set once every flow is done.
    finished: bool,
    /// Windows run so far (the empty ones skipped are not counted).
    windows: u64,
    pool: Option<rayon::ThreadPool>,
}

impl PartitionedEngine {
    /// Builds one engine per partition of `plan`, run on `threads` worker threads.
    pub fn new(
        topo: Topology,
        cfg: EngineConfig,
        flows: Vec<FlowSpec>,
        plan: Partitioning,
        threads: usize,
    ) -> Result<Self, EngineError> {
        let owner: Arc<[u16]> = plan.owner.into();
        let pool = (threads > 1)
            .then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("rocast-sim-{i}"))
                    .build()
                    .ok()
            })
            .flatten();
        // One topology and one set of routes for all (each partition copies them only
        // if a link changes).
        let routes = Arc::new(Routes::compute(&topo)?);
        let topo = Arc::new(topo);
        let build = |me: usize| -> Engine {
            let me = me as u16;
            let fabric = Fabric::with_routes(topo.clone(), routes.clone(), &cfg);
            let mut e = Engine::build(fabric, cfg.clone(), flows.clone(), |f| {
                owner[f.src as usize] == me || owner[f.dst as usize] == me
            });
            e.rng.set_stream(me as u64);
            let far = e
                .fabric
                .ports
                .iter()
                .map(|p| owner[e.fabric.ports[p.reverse as usize].node as usize])
                .collect();
            e.partition = Some(Box::new(PartitionState {
                me,
                owner: owner.clone(),
                far,
                outbox: (0..plan.parts).map(|_| Vec::new()).collect(),
                last_flow_change: 0,
            }));
            e
        };
        let parts: Vec<Engine> = match &pool {
            Some(pool) => pool.install(|| (0..plan.parts).into_par_iter().map(build).collect()),
            None => (0..plan.parts).map(build).collect(),
        };
        Ok(PartitionedEngine {
            parts,
            lookahead_ps: plan.lookahead_ps,
            window_start: 0,
            ran_to: 0,
            finished: false,
            windows: 0,
            pool,
        })
    }

    /// Schedules a link going down or up in every partition (each flips its own
    /// copies of the link's two ports and re-routes).
    pub fn schedule_link_change(&mut self, at: Instant, link: u32, up: bool) {
        for e in &mut self.parts {
            e.schedule_link_change(at, link, up);
        }
    }

    pub fn topology_name(&self) -> &str {
        &self.parts[0].fabric.topo.name
    }

    pub fn partitions(&self) -> usize {
        self.parts.len()
    }

    /// Windows run so far: one barrier each.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    pub fn lookahead(&self) -> rocast_core::time::Duration {
        rocast_core::time::Duration::from_ps(self.lookahead_ps)
    }

    /// Runs windows until simulated time `until` (inclusive). Returns false when
    /// nothing is left to do (every flow done, or no event pending anywhere).
    ///
    /// Windows are fixed multiples of the lookahead from time 0, whatever `until` is:
    /// a call that ends inside a window leaves its barrier to the call that finishes
    /// it, so how a caller slices the run (progress, summaries) never moves a barrier
    /// and never changes an output.
    pub fn run_until(&mut self, until: Instant) -> bool {
        let until = until.as_ps();
        while !self.finished {
            if self.ran_to > until {
                return true;
            }
            let end = self.window_start + self.lookahead_ps - 1;
            let last = end.min(until);
            self.each_part(Vec::new(), |e, ()| {
                e.run(last, false);
            });
            self.ran_to = last + 1;
            if last < end {
                return true;
            }
            self.exchange();
            self.windows += 1;
            self.window_start = end + 1;
            if self.flows_outstanding() == 0 {
                self.finished = true;
                continue;
            }
            // Windows in which no partition has an event are skipped: with the
            // outboxes empty nothing can happen in them. The jump is by whole windows,
            // so the barriers stay where running the empty windows puts them and the
            // outputs are the same. It stops in the window of `until`, where the
            // caller may schedule more.
            match self
                .parts
                .iter_mut()
                .filter_map(|e| e.events.peek_time())
                .min()
            {
                None => return false,
                Some(next) => {
                    let target = next.min(until.saturating_add(1));
                    let idle = target.saturating_sub(self.window_start);
                    self.window_start += idle / self.lookahead_ps * self.lookahead_ps;
                    self.ran_to = self.window_start;
                }
            }
        }
        false
    }

    /// Hands every outbox to its destinations: each destination takes its crossings
    /// sources in partition order, each source's in the order sent. The destinations
    /// take theirs in parallel (a crossing touches only its destination's ports, slab
    /// and queue), so the result does not depend on the threads.
    fn exchange(&mut self) {
        let n = self.parts.len();
        let mut inbox: Vec<Vec<Vec<Crossing>>> = (0..n).map(|_| Vec::new()).collect();
        for e in &mut self.parts {
            if let Some(p) = e.partition.as_deref_mut() {
                for (to, out) in p.outbox.iter_mut().enumerate() {
                    if !out.is_empty() {
                        inbox[to].push(std::mem::take(out));
                    }
                }
            }
        }
        self.each_part(inbox, |e, boxes| {
            for c in boxes.into_iter().flatten() {
                e.take_crossing(c);
            }
        });
    }

    /// Runs `f` on every partition with its item of `items` (none: `()` each), on the
    /// pool's workers when there is one.
    fn each_part<T: Send>(&mut self, items: Vec<T>, f: impl Fn(&mut Engine, T) + Sync + Send)
    where
        T: Default,
    {
        let mut items = items;
        items.resize_with(self.parts.len(), T::default);
        match &self.pool {
            Some(pool) => pool.install(|| {
                self.parts
                    .par_iter_mut()
                    .zip(items.into_par_iter())
                    .for_each(|(e, t)| f(e, t))
            }),
            None => self.parts.iter_mut().zip(items).for_each(|(e, t)| f(e, t)),
        }
    }

    pub fn flows_outstanding(&self) -> u64 {
        let t = self.totals_parts();
        self.parts[0].flows.specs.len() as u64 - t.flows_finished - t.flows_failed
    }

    /// The partitions' totals summed (open QPs not included).
    fn totals_parts(&self) -> Totals {
        let mut t = Totals::default();
        for e in &self.parts {
            t.absorb(&e.stats.totals);
        }
        t
    }

    /// The run's totals so far, the QPs still open included.
    pub fn totals_now(&self) -> Totals {
        let mut t = Totals::default();
        for e in &self.parts {
            t.absorb(&e.totals_now());
        }
        t
    }

    /// The latest simulated time any partition has reached.
    pub fn now(&self) -> Instant {
        Instant::from_ps(self.parts.iter().map(|e| e.now).max().unwrap_or(0))
    }

    /// The time of the run's last event: that of the last flow to finish once every
    /// flow is done, as a single engine stops there.
    pub fn last_event(&self) -> Instant {
        let t = if self.finished {
            self.parts
                .iter()
                .filter_map(|e| e.partition.as_ref().map(|p| p.last_flow_change))
                .max()
                .unwrap_or(0)
        } else {
            self.parts.iter().map(|e| e.last_event).max().unwrap_or(0)
        };
        Instant::from_ps(t)
    }

    /// The flows' results: each flow's sending partition says when it started and
    /// finished, its receiving partition when the data arrived.
    pub fn results(&self) -> Vec<FlowResult> {
        let mut results = self.parts[0].flows.results.clone();
        if let Some(p0) = self.parts[0].partition.as_ref() {
            for (i, r) in results.iter_mut().enumerate() {
                let (src, dst) = (r.src, r.dst);
                let s = &self.parts[p0.owner_of(src) as usize].flows.results[i];
                let d = &self.parts[p0.owner_of(dst) as usize].flows.results[i];
                r.start_ps = s.start_ps;
                r.sport = s.sport;
                r.finish_ps = s.finish_ps;
                r.failed = s.failed;
                r.received_ps = d.received_ps;
            }
        }
        results
    }

    /// Ends the run: checks conservation across the partitions and folds them into
    /// one engine (summed counters and totals, merged results and logs) that the
    /// outputs read. Returns it with the end-to-end imbalance in bytes and the number
    /// of unbalanced links, as [`Engine::finalize`] and [`Engine::link_imbalance`].
    pub fn finish(mut self) -> (Engine, i128, u64) {
        let results = self.results();
        let last_event = self.last_event().as_ps();
        let imbalance: i128 = self.parts.iter_mut().map(|e| e.finalize()).sum();
        let n_ports = self.parts[0].fabric.ports.len();
        let mut links_unbalanced = 0;
        for i in 0..n_ports {
            let (mut tx, mut rx, mut dropped, mut flying) = (0u64, 0u64, 0u64, 0u64);
            for e in &self.parts {
                let p = &e.fabric.ports[i];
                tx += p.c.tx_bytes;
                rx += p.c.rx_bytes;
                dropped += p.c.link_drop_bytes;
                flying += p.in_flight.iter().map(|&(_, h)| h.wire as u64).sum::<u64>();
            }
            if tx != rx + dropped + flying {
                links_unbalanced += 1;
            }
        }
        let now = self.now().as_ps();
        let mut rest = self.parts.split_off(1);
        let mut merged = self.parts.pop().expect("one partition at least");
        let mut logs: Vec<(u64, usize, String)> = Vec::new();
        let take_log = |e: &mut Engine, logs: &mut Vec<(u64, usize, String)>| {
            for line in std::mem::take(&mut e.stats.pfc_log) {
                let t = line
                    .split(' ')
                    .next()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0);
                let seq = logs.len();
                logs.push((t, seq, line));
            }
        };
        take_log(&mut merged, &mut logs);
        for e in &mut rest {
            for (m, p) in merged.fabric.ports.iter_mut().zip(&e.fabric.ports) {
                m.c.absorb(&p.c);
            }
            // Its open QPs' counters too: they go with the partition.
            merged.stats.totals.absorb(&e.totals_now());
            merged.stats.unroutable_bytes += e.stats.unroutable_bytes;
            take_log(e, &mut logs);
        }
        logs.sort_by_key(|&(t, seq, _)| (t, seq));
        merged.stats.pfc_log = logs.into_iter().map(|(_, _, l)| l).collect();
        merged.flows.results = results;
        merged.last_event = last_event;
        merged.now = now;
        merged.partition = None;
        (merged, imbalance, links_unbalanced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::topology::{build_topology, engine_config};
    use crate::scenario::Scenario;

    fn setup(sets: &[&str]) -> (Topology, EngineConfig) {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let sc = Scenario::preset("default", &sets).unwrap();
        let topo = build_topology(&sc, std::path::Path::new(".")).unwrap();
        let cfg = engine_config(&sc, &topo).unwrap();
        (topo, cfg)
    }

    fn flow(src: u32, dst: u32, size: u64) -> FlowSpec {
        FlowSpec {
            src,
            dst,
            size,
            start_ps: 0,
            after: None,
        }
    }

    #[test]
    fn a_fat_tree_is_cut_by_pod_with_the_core_dealt_round_robin() {
        let (topo, cfg) = setup(&["topology.k=4"]);
        let p = plan(&topo, &cfg, &[flow(0, 15, 1000)], 0).unwrap();
        assert_eq!(p.parts, 4);
        // Hosts 0-15 four to a pod; edges and aggregations two per pod; four cores.
        let hosts: Vec<u16> = (0..16).map(|h| h / 4).collect();
        assert_eq!(&p.owner[..16], &hosts[..]);
        assert_eq!(&p.owner[32..], &[0, 1, 2, 3]);
        assert_eq!(p.lookahead_ps, topo.links[0].delay.as_ps());
    }

    #[test]
    fn runs_that_need_one_order_stay_on_one_engine() {
        let (topo, cfg) = setup(&["topology.k=4"]);
        let mut after = flow(1, 2, 10);
        after.after = Some(0);
        let flows = [flow(0, 15, 10), after];
        assert_eq!(plan(&topo, &cfg, &flows, 0), Err(Serial::DependentFlows));
        let mut capture = cfg.clone();
        capture.capture_links = vec![0];
        assert_eq!(plan(&topo, &capture, &flows[..1], 0), Err(Serial::Capture));
        let (one_pod, cfg) = setup(&[
            "topology.kind=\"leaf-spine\"",
            "topology.spines=1",
            "topology.leaves=1",
        ]);
        assert_eq!(plan(&one_pod, &cfg, &flows[..1], 0), Err(Serial::NoCut));
    }

    /// A lone flow sees no contention, so its times do not depend on how events at
    /// one instant are ordered: across partitions it finishes exactly when it does
    /// on one engine (the crossings keep every delay).
    #[test]
    fn a_lone_flow_across_pods_keeps_the_single_engines_times() {
        let (topo, cfg) = setup(&["topology.k=4"]);
        let flows = vec![flow(0, 15, 300_000)];
        let plan = plan(&topo, &cfg, &flows, 0).unwrap();
        let mut one = Engine::new(topo.clone(), cfg.clone(), flows.clone()).unwrap();
        assert!(!one.run_until(Instant::from_ps(u64::MAX / 2)));
        let mut many = PartitionedEngine::new(topo, cfg, flows, plan, 2).unwrap();
        assert!(!many.run_until(Instant::from_ps(u64::MAX / 2)));
        let (a, b) = (&one.flows.results[0], &many.results()[0]);
        assert!(a.finish_ps.is_some());
        assert_eq!((a.finish_ps, a.received_ps), (b.finish_ps, b.received_ps));
        assert_eq!(one.last_event(), many.last_event());
        let (merged, imbalance, links) = many.finish();
        assert_eq!((imbalance, links), (0, 0));
        assert_eq!(
            merged.totals_now().host_tx_bytes,
            one.totals_now().host_tx_bytes
        );
    }

    /// Two flows 2 ms apart: the idle windows between them are skipped (far fewer
    /// barriers than the run's length over the lookahead), and the second flow still
    /// finishes at the one engine's picosecond.
    #[test]
    fn idle_windows_are_skipped_without_moving_any_event() {
        let (topo, cfg) = setup(&["topology.k=4"]);
        let mut late = flow(4, 12, 100_000);
        late.start_ps = 2_000_000_000;
        let flows = vec![flow(0, 15, 100_000), late];
        let plan = plan(&topo, &cfg, &flows, 0).unwrap();
        let lookahead = plan.lookahead_ps;
        let mut one = Engine::new(topo.clone(), cfg.clone(), flows.clone()).unwrap();
        assert!(!one.run_until(Instant::from_ps(u64::MAX / 2)));
        let mut many = PartitionedEngine::new(topo, cfg, flows, plan, 1).unwrap();
        assert!(!many.run_until(Instant::from_ps(u64::MAX / 2)));
        for (a, b) in one.flows.results.iter().zip(many.results()) {
            assert!(a.finish_ps.is_some());
            assert_eq!((a.finish_ps, a.received_ps), (b.finish_ps, b.received_ps));
        }
        let span = many.last_event().as_ps() / lookahead;
        assert!(span > 2000, "the run spans {span} windows");
        assert!(
            many.windows() < span / 4,
            "{} windows run of {span}",
            many.windows()
        );
    }

    /// How the caller slices the run (progress bars, summaries) moves no barrier: a
    /// contended run stepped 777 ns at a time ends exactly as one call does.
    #[test]
    fn slicing_the_run_changes_no_output() {
        let (topo, cfg) = setup(&["topology.k=4"]);
        let flows: Vec<FlowSpec> = (0..16).map(|h| flow(h, (h * 5 + 3) % 16, 60_000)).collect();
        let run = |step: Option<u64>| {
            let plan = plan(&topo, &cfg, &flows, 0).unwrap();
            let mut e =
                PartitionedEngine::new(topo.clone(), cfg.clone(), flows.clone(), plan, 2).unwrap();
            match step {
                None => while e.run_until(Instant::from_ps(u64::MAX / 2)) {},
                Some(step) => {
                    let mut t = 0;
                    while e.run_until(Instant::from_ps(t)) {
                        t += step;
                    }
                }
            }
            let end = e.last_event();
            let r: Vec<_> = e
                .results()
                .iter()
                .map(|r| (r.finish_ps, r.received_ps))
                .collect();
            let (merged, ..) = e.finish();
            (r, end, merged.totals_now())
        };
        let whole = run(None);
        assert!(whole.0.iter().all(|(f, _)| f.is_some()));
        assert_eq!(run(Some(777_000)), whole);
    }
}
