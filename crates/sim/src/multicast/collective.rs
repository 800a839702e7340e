//! Concurrent Broadcast collectives on one simulated fabric: PEEL §4's workload.
//! Every job is a root, its members and a message; jobs start at their own times
//! and overlap. A scheme says how each job moves its message:
//!
//! - **Multicast** schemes build the job's tree (`symmetric_tree` on a fault-free
//!   Clos, the layer-peeling greedy otherwise) and run it on the engine's tree
//!   multicast (`tree_multicast`), with end-host reliability at the source's NIC:
//!   - `optimal`: per-group state on the optimal tree from the first packet (the
//!     bandwidth-optimal Broadcast);
//!   - `orca`: the same tree, but the job waits for its controller to install the
//!     rules, N(10 ms, 5 ms) truncated at zero;
//!   - `peel`: static prefix rules, one packet per cover from the source;
//!   - `peel-cores`: as `peel` until the controller has programmed the cores after
//!     the same set-up delay (PEEL §3.3), then a single copy through the core
//!     (`core_copy`; the alternative keeps the source pod's prefixes at the source);
//!   - `peel-agg`: PEEL's data plane composed with Cepheus' in-network feedback
//!     aggregation (no paper has it): the tree's switches hold the group's MFT, so
//!     the source sees one aggregated ACK stream and retransmissions are filtered
//!     in the fabric.
//! - **Application-layer** schemes run `overlay`'s schedules over RC connections,
//!   the message cut into `chunks` blocks (PEEL §4 uses 8): `ring` (NCCL's ring
//!   broadcast) and `binary-tree` (NCCL's double binary tree, or one pipelined binary
//!   tree: `binary_tree`).
//!
//! The collective-completion time (CCT) of a job runs from its start until its last
//! member holds the whole message.
//!
//! Memory: the engine's, plus per job its tree (a few KB) and, while it runs, one QP
//! per member (multicast) or two per connection (application layer).

use std::collections::BTreeMap;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rocast_core::fabric::cepheus::VIRTUAL_QPN;
use rocast_core::overlay::{BroadcastGroup, Channel, DriverConfig, DriverError, Scheme, TimedPost};
use rocast_core::plan::multicast_tree::{
    layer_peeling_tree, layer_peeling_tree_via, symmetric_tree_via, MulticastTree, TreeError,
    UplinkChoice,
};
use rocast_core::plan::prefix::{plan_group, CoverPolicy, PrefixError, PrefixLayout};
use rocast_core::plan::Topology;
use rocast_core::rnic::Payload;
use rocast_core::time::{Duration, Instant};

use crate::engine::tree_multicast::{bloom_bytes, CoreCopy, GroupForwarding, TreeMulticastError};
use crate::engine::{
    AppEvent, Engine, EngineConfig, EngineError, TreeGroupSpec, TreeMulticastStats,
};
use crate::multicast::broadcast::connection_for;
use crate::packet::host_ip;
use crate::uniform;

/// Why a collective's setting, job or run failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CollectiveError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    TreeMulticast(#[from] TreeMulticastError),
    #[error(transparent)]
    Prefix(#[from] PrefixError),
    #[error(
        "unknown collective scheme {0:?} (expected peel, peel-cores, peel-agg, ring, binary-tree, orca or optimal)"
    )]
    UnknownScheme(String),
    #[error("expected \"double\" or \"single\", got {0:?}")]
    UnknownTreeAlgorithm(String),
    #[error("a job needs members")]
    NoMembers,
    #[error("tree from {root}: {source}")]
    Tree {
        root: u32,
        #[source]
        source: TreeError,
    },
    #[error(
        "Orca's Bloom filter for a tree of {links} links at fpr {fpr} takes {bytes} bytes; rocast carries at most 255"
    )]
    BloomTooLarge { links: usize, fpr: f64, bytes: u64 },
    #[error("job {job}: needs 2 or more distinct hosts below {hosts}")]
    BadJobHosts { job: usize, hosts: u32 },
    #[error("job {job}: {source}")]
    Job {
        job: usize,
        #[source]
        source: DriverError,
    },
    #[error("job {0}: the source's send failed")]
    SourceSendFailed(usize),
    #[error("job {job}: rank {rank}'s send failed")]
    RankSendFailed { job: usize, rank: u32 },
    #[error("job {0} never completed (the fabric went idle)")]
    Stalled(usize),
    #[error("host {0} sits under no rack")]
    HostWithoutRack(u32),
    #[error(
        "broadcasts of {gpus} among {hosts} hosts at load {load}: need 2 ≤ group ≤ hosts, 0 < load ≤ 1, bytes > 0"
    )]
    BadBroadcasts { gpus: u32, hosts: u32, load: f64 },
    #[error("{0} hosts do not fit the fabric's racks")]
    DoesNotFit(u32),
}

/// How a job moves its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CollectiveScheme {
    Optimal,
    Orca,
    Peel,
    PeelCores,
    /// PEEL's data plane with Cepheus' in-network feedback aggregation.
    PeelAgg,
    Ring,
    BinaryTree,
}

impl CollectiveScheme {
    pub const ALL: [CollectiveScheme; 7] = [
        CollectiveScheme::Peel,
        CollectiveScheme::PeelCores,
        CollectiveScheme::PeelAgg,
        CollectiveScheme::Ring,
        CollectiveScheme::BinaryTree,
        CollectiveScheme::Orca,
        CollectiveScheme::Optimal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CollectiveScheme::Optimal => "optimal",
            CollectiveScheme::Orca => "orca",
            CollectiveScheme::Peel => "peel",
            CollectiveScheme::PeelCores => "peel-cores",
            CollectiveScheme::PeelAgg => "peel-agg",
            CollectiveScheme::Ring => "ring",
            CollectiveScheme::BinaryTree => "binary-tree",
        }
    }

    pub fn parse(s: &str) -> Result<Self, CollectiveError> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| CollectiveError::UnknownScheme(s.to_string()))
    }

    /// Whether the fabric replicates the message (every scheme but ring and tree).
    pub fn is_multicast(self) -> bool {
        self.overlay().is_none()
    }

    fn overlay(self) -> Option<Scheme> {
        match self {
            CollectiveScheme::Ring => Some(Scheme::Ring),
            CollectiveScheme::BinaryTree => Some(Scheme::BinaryTree),
            _ => None,
        }
    }
}

/// One Broadcast: `members[0]` is the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BroadcastJob {
    pub start_ps: u64,
    pub members: Vec<u32>,
    pub bytes: u64,
}

/// The schedule PEEL's "Binary Tree" runs by name (the caller's setting, e.g. the PEEL
/// figures' `tree_algorithm`; it reaches [`run_collectives`] as
/// [`CollectiveSettings::binary_tree`]): "double" (NCCL's double binary tree) or
/// "single" (one pipelined binary tree).
pub fn tree_scheme(name: &str) -> Result<Scheme, CollectiveError> {
    match name {
        "double" => Ok(Scheme::DoubleBinaryTree),
        "single" => Ok(Scheme::BinaryTree),
        other => Err(CollectiveError::UnknownTreeAlgorithm(other.to_string())),
    }
}

/// The false-positive ratio Orca's Bloom filter is sized for unless configured: the
/// smallest of PEEL Fig 3's (1 %), the cheapest header in bytes of the three.
pub const ORCA_DEFAULT_FPR: f64 = 0.01;

/// Knobs shared by all jobs of a run.
#[derive(Clone, Copy, Debug)]
pub struct CollectiveSettings {
    pub cover: CoverPolicy,
    /// Controller set-up delay: normal, truncated at zero.
    pub setup_mean: Duration,
    pub setup_sd: Duration,
    /// Blocks per message for the application-layer schemes.
    pub chunks: u32,
    /// Per-post software overhead of the application-layer schemes.
    pub overhead: Duration,
    /// Orca's Bloom-filter header: false-positive ratio it is sized for; and whether
    /// host-side agents do each rack's last-hop fan-out.
    pub orca_fpr: f64,
    pub orca_agent: bool,
    /// What `peel-cores` sends once the cores hold the group's rule.
    pub core_copy: CoreCopy,
    /// The schedule `binary-tree` runs: `Scheme::DoubleBinaryTree` (NCCL's tree) or
    /// `Scheme::BinaryTree` (one pipelined binary tree).
    pub binary_tree: Scheme,
    /// Whether fault-free trees climb by ECMP's hash (salted per job) or through the
    /// lowest-numbered switches.
    pub ecmp_upward: bool,
    /// Seeds the set-up delays (job i's draw depends on this and i only, so every
    /// scheme sees the same delays).
    pub seed: u64,
}

impl Default for CollectiveSettings {
    fn default() -> Self {
        CollectiveSettings {
            cover: CoverPolicy::Exact,
            setup_mean: Duration::from_ms(10),
            setup_sd: Duration::from_ms(5),
            chunks: 8,
            ecmp_upward: true,
            orca_fpr: ORCA_DEFAULT_FPR,
            orca_agent: false,
            core_copy: CoreCopy::Single,
            binary_tree: Scheme::BinaryTree,
            overhead: crate::multicast::broadcast::DEFAULT_OVERHEAD,
            seed: 1,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollectiveOutcome {
    /// Per job, its CCT.
    pub cct_ps: Vec<u64>,
    /// Per job, the controller set-up delay it drew (used by orca and peel-cores).
    pub setup_ps: Vec<u64>,
    /// PEEL packets per message, summed over jobs (multicast schemes).
    pub packets_per_message: u64,
    pub tree: TreeMulticastStats,
    pub host_tx_bytes: u64,
    pub switch_tx_bytes: u64,
    pub retransmitted: u64,
    pub drops: u64,
    pub events: u64,
}

/// Job `i`'s set-up delay: N(mean, sd) by Box–Muller, truncated at zero.
pub fn setup_delay(s: &CollectiveSettings, i: usize) -> u64 {
    let mut rng =
        ChaCha8Rng::seed_from_u64(s.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let u1 = uniform(&mut rng).max(f64::MIN_POSITIVE);
    let u2 = uniform(&mut rng);
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let d = s.setup_mean.as_ps() as f64 + z * s.setup_sd.as_ps() as f64;
    d.max(0.0) as u64
}

/// The job's tree: optimal on a fault-free Clos, the greedy otherwise. `upward`: the
/// fault-free tree's chain of uplinks (ECMP's hash, or the lowest-numbered).
pub fn job_tree(
    topo: &Topology,
    members: &[u32],
    upward: UplinkChoice,
) -> Result<MulticastTree, CollectiveError> {
    let (root, dests) = members.split_first().ok_or(CollectiveError::NoMembers)?;
    let failed = topo.links.iter().any(|l| l.failed);
    let t = if failed {
        layer_peeling_tree_via(topo, *root, dests, upward)
    } else {
        symmetric_tree_via(topo, *root, dests, upward)
            .or_else(|_| layer_peeling_tree(topo, *root, dests))
    };
    t.map_err(|source| CollectiveError::Tree {
        root: *root,
        source,
    })
}

/// Orca's header for `tree`: a Bloom filter of the tree's switch-to-next-hop links
/// (with agents, one link per rack: the ToR's to its agent) at `s.orca_fpr`.
pub fn orca_header_bytes(
    topo: &Topology,
    tree: &MulticastTree,
    s: &CollectiveSettings,
) -> Result<u8, CollectiveError> {
    let mut racks = std::collections::BTreeSet::new();
    let mut links = 0;
    for a in tree.arcs.iter().filter(|a| !topo.is_host(a.parent)) {
        if topo.is_host(a.child) && s.orca_agent {
            racks.insert(a.parent);
        } else {
            links += 1;
        }
    }
    let bytes = bloom_bytes(links + racks.len(), s.orca_fpr);
    u8::try_from(bytes).map_err(|_| CollectiveError::BloomTooLarge {
        links: links + racks.len(),
        fpr: s.orca_fpr,
        bytes,
    })
}

/// Job `i`'s uplink choice under `s`: ECMP hashes the job (its flow), salted by the
/// run's seed so that the same jobs climb the same way under every scheme.
pub fn job_upward(s: &CollectiveSettings, i: usize) -> UplinkChoice {
    if s.ecmp_upward {
        UplinkChoice::Hashed(s.seed ^ (i as u64).wrapping_mul(0xd6e8_feb8_6659_fd93))
    } else {
        UplinkChoice::Lowest
    }
}

enum JobState {
    /// Member QPs (index 0: the source); receivers done so far.
    Multicast {
        qpns: Vec<u32>,
        got: usize,
        sent: bool,
        mcst: u32,
    },
    /// Created when the job starts.
    Overlay(Option<OverlayJob>),
}

struct OverlayJob {
    group: BroadcastGroup,
    /// (from rank, to rank, ready?) → connection.
    conns: BTreeMap<(u32, u32, Channel), u32>,
}

/// Runs `jobs` with `scheme` on a fresh engine; every job must finish.
pub fn run_collectives(
    topo: Topology,
    cfg: EngineConfig,
    jobs: &[BroadcastJob],
    scheme: CollectiveScheme,
    s: &CollectiveSettings,
) -> Result<CollectiveOutcome, CollectiveError> {
    let hosts = topo.num_hosts() as u32;
    for (i, j) in jobs.iter().enumerate() {
        let mut seen = std::collections::BTreeSet::new();
        if j.members.len() < 2 || j.members.iter().any(|&h| h >= hosts || !seen.insert(h)) {
            return Err(CollectiveError::BadJobHosts { job: i, hosts });
        }
    }
    let layout = match scheme {
        CollectiveScheme::Peel | CollectiveScheme::PeelCores | CollectiveScheme::PeelAgg => {
            Some(PrefixLayout::from_topology(&topo)?)
        }
        _ => None,
    };
    let mut out = CollectiveOutcome {
        setup_ps: (0..jobs.len()).map(|i| setup_delay(s, i)).collect(),
        ..Default::default()
    };
    let mut engine = Engine::new(topo.clone(), cfg, Vec::new())?;
    let mut states = Vec::with_capacity(jobs.len());
    // QPN → (job, member) for multicast; connection → (job, from, to, ready).
    let mut by_qpn: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let mut by_conn: BTreeMap<u32, (usize, u32, u32, Channel)> = BTreeMap::new();
    for (i, j) in jobs.iter().enumerate() {
        if scheme.overlay().is_some() {
            states.push(JobState::Overlay(None));
            continue;
        }
        let tree = job_tree(&topo, &j.members, job_upward(s, i))?;
        let forwarding = match &layout {
            Some(layout) => {
                let plan = plan_group(&topo, layout, &tree, s.cover)?;
                out.packets_per_message += plan.packets.len().max(1) as u64;
                GroupForwarding::peel(
                    &topo,
                    layout,
                    &tree,
                    &plan,
                    (scheme == CollectiveScheme::PeelCores).then_some(s.core_copy),
                )?
            }
            None if scheme == CollectiveScheme::Orca => {
                out.packets_per_message += 1;
                let header = orca_header_bytes(&topo, &tree, s)?;
                GroupForwarding::orca(&topo, &tree, header, s.orca_agent)?
            }
            None => {
                out.packets_per_message += 1;
                GroupForwarding::group_tree(&topo, &tree)?
            }
        };
        let mcst = 0xef00_0000 + i as u32 + 1;
        let source = j.members[0];
        let src_qpn = engine.open_qp(source, mcst, VIRTUAL_QPN, j.bytes)?;
        let mut qpns = vec![src_qpn];
        let mut receivers = Vec::new();
        let agg = scheme == CollectiveScheme::PeelAgg;
        for &h in &j.members[1..] {
            // Host aggregation: receivers answer the source itself; switch aggregation:
            // the group's virtual remote, as Cepheus members do.
            let q = if agg {
                engine.open_qp(h, mcst, VIRTUAL_QPN, j.bytes)?
            } else {
                engine.open_qp(h, host_ip(source), src_qpn, j.bytes)?
            };
            engine.post_recv(q, i as u64)?;
            receivers.push((h, q));
            qpns.push(q);
        }
        for (m, &q) in qpns.iter().enumerate() {
            by_qpn.insert(q, (i, m));
        }
        let setup = out.setup_ps[i];
        engine.install_tree_group(TreeGroupSpec {
            mcst_id: mcst,
            source,
            source_qpn: src_qpn,
            receivers,
            forwarding,
            core_from: (scheme == CollectiveScheme::PeelCores)
                .then(|| Instant::from_ps(j.start_ps + setup)),
            switch_feedback: agg.then_some(tree),
        })?;
        let at = j.start_ps
            + if scheme == CollectiveScheme::Orca {
                setup
            } else {
                0
            };
        engine.post_qp_write(
            Instant::from_ps(at),
            src_qpn,
            0,
            0,
            Payload::Zeros(j.bytes as usize),
            0,
            i as u64,
        )?;
        states.push(JobState::Multicast {
            qpns,
            got: 0,
            sent: false,
            mcst,
        });
    }
    let mut done: Vec<Option<u64>> = vec![None; jobs.len()];
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].start_ps, i));
    let mut next_start = 0;
    let mut posts = Vec::new();
    let horizon = u64::MAX / 2;
    // The engine's clock stops at its last event; ours also moves to a wake-up time
    // reached with nothing happening.
    let mut clock = 0u64;
    loop {
        // Start the application-layer jobs that are due.
        let now = engine.now().as_ps().max(clock);
        while let Some(&i) = order.get(next_start) {
            if scheme.overlay().is_none() || jobs[i].start_ps > now {
                break;
            }
            next_start += 1;
            let j = &jobs[i];
            let n = j.members.len() as u32;
            let driver = DriverConfig {
                message_bytes: j.bytes,
                block_bytes: j.bytes.div_ceil(s.chunks.max(1) as u64).max(1),
                window: 1,
                ready_for_block: false,
            };
            let overlay = match scheme.overlay().expect("overlay") {
                Scheme::BinaryTree => s.binary_tree,
                other => other,
            };
            let group = BroadcastGroup::new(overlay, n, 0, driver, s.overhead.as_ps())
                .map_err(|source| CollectiveError::Job { job: i, source })?;
            states[i] = JobState::Overlay(Some(OverlayJob {
                group,
                conns: BTreeMap::new(),
            }));
        }
        // Posts of the running application-layer jobs.
        for (i, st) in states.iter_mut().enumerate() {
            let JobState::Overlay(Some(job)) = st else {
                continue;
            };
            job.group.drain_posts(now.max(jobs[i].start_ps), &mut posts);
            for TimedPost {
                rank,
                at_ps,
                post: p,
            } in posts.drain(..)
            {
                let (conn, new) = connection_for(
                    &p,
                    &mut engine,
                    &mut job.conns,
                    &jobs[i].members,
                    rank,
                    jobs[i].bytes,
                )?;
                if new {
                    by_conn.insert(conn, (i, rank, p.to, p.channel));
                }
                engine.post_message(
                    Instant::from_ps(at_ps),
                    conn,
                    p.offset,
                    Payload::Zeros(p.len as usize),
                    p.imm,
                    p.wr_id,
                )?;
            }
        }
        if done.iter().all(Option::is_some) {
            break;
        }
        let wake = order
            .get(next_start)
            .filter(|_| scheme.overlay().is_some())
            .map_or(horizon, |&i| jobs[i].start_ps);
        let more = engine.run_until_app_event(Instant::from_ps(wake));
        let mut any = false;
        while let Some((t, ev)) = engine.poll_app_event() {
            any = true;
            let now = t.as_ps();
            match ev {
                AppEvent::QpDelivered { qpn, .. } => {
                    let Some(&(i, m)) = by_qpn.get(&qpn) else {
                        continue;
                    };
                    if let JobState::Multicast { got, .. } = &mut states[i] {
                        if m > 0 {
                            *got += 1;
                            if *got == jobs[i].members.len() - 1 {
                                done[i] = Some(now - jobs[i].start_ps);
                            }
                        }
                    }
                }
                AppEvent::QpSendDone { qpn, ok, .. } => {
                    let Some(&(i, _)) = by_qpn.get(&qpn) else {
                        continue;
                    };
                    if !ok {
                        return Err(CollectiveError::SourceSendFailed(i));
                    }
                    if let JobState::Multicast { sent, .. } = &mut states[i] {
                        *sent = true;
                    }
                }
                AppEvent::SendDone { conn, wr_id, ok } => {
                    let Some(&(i, from, _, channel)) = by_conn.get(&conn) else {
                        continue;
                    };
                    if !ok {
                        return Err(CollectiveError::RankSendFailed { job: i, rank: from });
                    }
                    if let JobState::Overlay(Some(job)) = &mut states[i] {
                        let r = if channel == Channel::Data {
                            job.group.handle_send_complete(now, from, wr_id)
                        } else {
                            job.group.handle_control_sent(now, from)
                        };
                        r.map_err(|source| CollectiveError::Job { job: i, source })?;
                    }
                }
                AppEvent::Delivered { conn, imm, .. } => {
                    let Some(&(i, from, to, channel)) = by_conn.get(&conn) else {
                        continue;
                    };
                    if let JobState::Overlay(Some(job)) = &mut states[i] {
                        let r = if channel == Channel::Control {
                            job.group.handle_control(now, to, from, imm)
                        } else {
                            job.group.handle_block(now, to, from, imm)
                        };
                        r.map_err(|source| CollectiveError::Job { job: i, source })?;
                        if job.group.first_incomplete().is_none() && done[i].is_none() {
                            done[i] = Some(now - jobs[i].start_ps);
                        }
                    }
                }
                _ => {}
            }
        }
        if !any && wake < horizon {
            clock = clock.max(wake); // nothing happened before the next job's start
        }
        // Free finished multicast jobs' QPs and group state.
        for (i, st) in states.iter_mut().enumerate() {
            if let JobState::Multicast {
                qpns,
                sent: true,
                mcst,
                ..
            } = st
            {
                if done[i].is_some() && !qpns.is_empty() {
                    engine.remove_tree_group(*mcst);
                    for q in qpns.drain(..) {
                        engine.close_qp(q);
                    }
                }
            }
        }
        if !more && !any && next_start >= order.len() {
            let stuck = done.iter().position(Option::is_none).unwrap_or(0);
            return Err(CollectiveError::Stalled(stuck));
        }
    }
    engine.finalize();
    out.cct_ps = done.into_iter().map(|d| d.unwrap_or(0)).collect();
    out.tree = engine.stats.tree.clone();
    out.host_tx_bytes = engine.stats.totals.host_tx_bytes;
    out.switch_tx_bytes = engine.stats.totals.switch_tx_bytes;
    out.retransmitted = engine.retransmitted();
    out.drops = engine.stats.totals.link_drops + engine.stats.totals.queue_drops;
    out.events = engine.stats.totals.events;
    Ok(out)
}

/// Where a job's members sit. PEEL §3.2 rests on "job locality" ("AI collectives
/// are bin-packed, i.e., job placements are localized", citing NCCL's documentation),
/// without naming a scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobPlacement {
    /// A block of consecutive hosts from a random server, wrapping around the host
    /// numbering: local, but blind to rack and pod boundaries (rocast's first model).
    Consecutive,
    /// The fewest racks, and above a pod the fewest pods: a random window of whole
    /// racks inside one pod, or of whole pods, among those that hold the job
    /// (rocast's reading of "bin-packed"; a window start is uniform over the
    /// positions that achieve the minimum, not aligned to a power of two).
    BinPacked(RackMap),
    /// As `BinPacked`, but a window starts only at a multiple of its length rounded up
    /// to a power of two (a buddy allocator's blocks): the placement most favourable
    /// to prefix covers (rocast's assumption, for the ablation only).
    Aligned(RackMap),
}

/// Hosts per rack, racks per pod, in the prefix layout's pod and rack-id order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RackMap {
    pub pods: Vec<Vec<Vec<u32>>>,
}

impl RackMap {
    /// Groups every host under its rack (its attach switch, or that switch's single
    /// uplink for a GPU server's NIC) as `PrefixLayout` names them.
    pub fn of(topo: &Topology) -> Result<Self, CollectiveError> {
        let layout = PrefixLayout::from_topology(topo)?;
        let mut pods: Vec<Vec<Vec<u32>>> = layout
            .pods
            .iter()
            .map(|p| vec![Vec::new(); p.racks.len()])
            .collect();
        for h in 0..topo.num_hosts() as u32 {
            let (pod, id) = layout
                .host_rack(topo, h)
                .ok_or(CollectiveError::HostWithoutRack(h))?;
            pods[pod as usize][id as usize].push(h);
        }
        Ok(RackMap { pods })
    }

    /// `n` hosts in the fewest racks (inside one pod) or else the fewest whole pods,
    /// the window drawn uniformly among those achieving that minimum.
    fn place(&self, n: u32, aligned: bool, rng: &mut ChaCha8Rng) -> Option<Vec<u32>> {
        let n = n as usize;
        let mut pick =
            |windows: &[(usize, usize)]| windows[rng.next_u32() as usize % windows.len()];
        // Inside one pod: the fewest consecutive racks that hold n, over every pod.
        let mut best = (usize::MAX, Vec::new());
        for (p, racks) in self.pods.iter().enumerate() {
            let sizes: Vec<usize> = racks.iter().map(Vec::len).collect();
            let (len, starts) = fewest_holding(&sizes, n, aligned);
            if len < best.0 {
                best = (len, Vec::new());
            }
            if len == best.0 {
                best.1.extend(starts.into_iter().map(|s| (p, s)));
            }
        }
        let (len, windows) = best;
        let hosts = |racks: &mut dyn Iterator<Item = &Vec<u32>>| -> Vec<u32> {
            racks.flatten().copied().take(n).collect()
        };
        if !windows.is_empty() {
            let (p, start) = pick(&windows);
            return Some(hosts(&mut self.pods[p][start..start + len].iter()));
        }
        // Whole pods: the fewest consecutive pods that hold n.
        let sizes: Vec<usize> = self
            .pods
            .iter()
            .map(|p| p.iter().map(Vec::len).sum())
            .collect();
        let (len, starts) = fewest_holding(&sizes, n, aligned);
        let windows: Vec<(usize, usize)> = starts.into_iter().map(|s| (0, s)).collect();
        if windows.is_empty() {
            return None;
        }
        let (_, start) = pick(&windows);
        Some(hosts(&mut self.pods[start..start + len].iter().flatten()))
    }
}

/// The fewest consecutive `sizes` that add up to `n` or more, and every start of such
/// a window (with `aligned`, only starts at a multiple of the length rounded up to a
/// power of two); `usize::MAX` and none if no window holds `n`.
fn fewest_holding(sizes: &[usize], n: usize, aligned: bool) -> (usize, Vec<usize>) {
    let mut best = usize::MAX;
    let mut starts = Vec::new();
    for start in 0..sizes.len() {
        let mut held = 0;
        for (i, s) in sizes[start..].iter().enumerate() {
            held += s;
            if held >= n {
                let len = i + 1;
                if len < best {
                    best = len;
                    starts.clear();
                }
                if len == best && (!aligned || start % len.next_power_of_two() == 0) {
                    starts.push(start);
                }
                break;
            }
        }
    }
    (best, starts)
}

/// Poisson arrivals of `count` Broadcasts of `bytes` among `gpus` hosts placed by
/// `placement` (`Consecutive`: a block of whole servers from a random server,
/// wrapping), at the rate that makes their payload `load` of the servers' NIC
/// capacity: λ = load × servers × rate / (bytes × receiving servers). The root is a
/// uniformly drawn member, moved to the front.
#[allow(clippy::too_many_arguments)]
pub fn poisson_broadcasts(
    hosts: u32,
    hosts_per_server: u32,
    gpus: u32,
    bytes: u64,
    count: u32,
    load: f64,
    nic_bps: u64,
    seed: u64,
    placement: &JobPlacement,
) -> Result<Vec<BroadcastJob>, CollectiveError> {
    let per = hosts_per_server.max(1);
    if gpus < 2 || gpus > hosts || !(0.0..=1.0).contains(&load) || load == 0.0 || bytes == 0 {
        return Err(CollectiveError::BadBroadcasts { gpus, hosts, load });
    }
    let servers = hosts / per;
    let job_servers = gpus.div_ceil(per);
    let receiving = (job_servers.max(2) - 1) as f64;
    let rate = load * servers as f64 * nic_bps as f64 / 8.0 / (bytes as f64 * receiving);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0f64;
    let mut jobs = Vec::with_capacity(count as usize);
    for _ in 0..count {
        t += -uniform(&mut rng).max(f64::MIN_POSITIVE).ln() / rate;
        let mut members: Vec<u32> = match placement {
            JobPlacement::Consecutive => {
                let first = (rng.next_u32() % servers) * per;
                Some((0..gpus).map(|g| (first + g) % hosts).collect())
            }
            JobPlacement::BinPacked(map) => map.place(gpus, false, &mut rng),
            JobPlacement::Aligned(map) => map.place(gpus, true, &mut rng),
        }
        .ok_or(CollectiveError::DoesNotFit(gpus))?;
        // The root is any member: a job's GPUs take turns broadcasting (a fixed
        // first-member root would pile every job of a window onto one NIC).
        let root = (rng.next_u32() % members.len() as u32) as usize;
        members.swap(0, root);
        jobs.push(BroadcastJob {
            start_ps: (t * 1e12) as u64,
            members,
            bytes,
        });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests;
