//! Application-layer broadcast in the simulator: one `overlay::BroadcastDriver` per
//! rank, executed over persistent RC connections of the engine (RDMC §3; Cepheus
//! §II-C's AMcast baselines). Every block is an RDMA WRITE with immediate into the
//! receiver's message buffer at the block's offset; ready-for-block messages, when
//! enabled, are zero-length WRITEs with immediate on a separate connection, so they
//! never queue behind data.
//!
//! Per-hop software overhead: every post costs its rank's CPU `overhead` (posts of one
//! rank are serialised, `overlay::group`), counted from the completion that triggered it. The default,
//! [`DEFAULT_OVERHEAD`], is 2 µs: a user-space relay polling its completion queue,
//! deciding and posting the next work request; RDMC measured 4 µs of local setup per
//! message and ~1% total overhead for 1 MiB blocks (RDMC Table 1).
//!
//! With `verify_data`, the root's buffer is seeded pseudo-random bytes that travel
//! through the fabric packet by packet; each relay forwards from its own buffer, and
//! at the end every rank's buffer is compared with the root's.
//!
//! Member failure (RDMC §4.6): a [`MemberFailure`] takes a member's host off the
//! fabric (its links fail) and silences its driver at the given time. Survivors find
//! out through RC retry errors on connections to it — directly, or through probes
//! sent when a rank has made no progress for `suspect_after` — relay the failure to
//! each other over their control connections and stop; [`BroadcastOutcome::outcomes`]
//! holds what each member concluded.
//!
//! Memory: the engine's, plus per rank its driver (O(blocks)) and, with
//! `verify_data`, one message buffer per rank and one per receiving connection.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rocast_core::overlay::model::MessageCost;
use rocast_core::overlay::{
    BroadcastGroup, Channel, DriverConfig, DriverError, GroupOutcome, OverlayPost, Scheme,
    TimedPost,
};
use rocast_core::plan::{Routes, Topology};
use rocast_core::rnic::Payload;
use rocast_core::time::{Duration, Instant};

use crate::engine::{ideal_message, AppEvent, Engine, EngineConfig, EngineError};

/// Why a broadcast could not run or did not finish.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BroadcastError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error("group hosts must be distinct hosts below {hosts} (got {host})")]
    BadGroupHost { host: u32, hosts: u32 },
    #[error("message too large to verify")]
    TooLargeToVerify,
    #[error("{len} bytes of data for a {message_bytes}-byte broadcast")]
    DataLength { len: usize, message_bytes: u64 },
    #[error("group host {host} is not below {hosts}")]
    HostOutOfRange { host: u32, hosts: u32 },
    #[error("failed member {rank} is not a rank of {n}")]
    FailedMemberNotRank { rank: u32, n: u32 },
    #[error("rank {rank}: a send failed at {at_ns} ns (QP error)")]
    SendFailed { rank: u32, at_ns: u64 },
    #[error("rank {rank}: {source}")]
    Rank {
        rank: u32,
        #[source]
        source: DriverError,
    },
    #[error("broadcast stalled: rank {0} never got the whole message")]
    Stalled(u32),
}

/// Default per-hop software overhead (see the module docs).
pub const DEFAULT_OVERHEAD: Duration = Duration::from_ps(2_000_000);

/// One broadcast to run.
#[derive(Clone, Debug)]
pub struct BroadcastSpec {
    pub scheme: Scheme,
    /// Rank → host.
    pub hosts: Vec<u32>,
    pub root: u32,
    pub driver: DriverConfig,
    pub overhead: Duration,
    pub verify_data: bool,
    /// Seeds the root's data when `verify_data`.
    pub seed: u64,
    /// Members that crash mid-broadcast (empty: none).
    pub failures: Vec<MemberFailure>,
    /// How long a rank waits without progress before it probes the peers it waits
    /// on (only used with `failures`). rocast's assumption: 10 ms, about ten RC
    /// retransmission timeouts of the engine's default, far above any transfer step.
    pub suspect_after: Duration,
}

/// A member that crashes: at `at_ps` its host's links go down and its driver stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberFailure {
    pub rank: u32,
    pub at_ps: u64,
}

/// The default of [`BroadcastSpec::suspect_after`].
pub const DEFAULT_SUSPECT_AFTER: Duration = Duration::from_ps(10_000_000_000);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BroadcastOutcome {
    /// From the call at the root until the last rank has the whole message.
    pub latency_ps: u64,
    pub rank_done_ps: Vec<u64>,
    /// Messages posted (blocks and ready messages).
    pub messages: u64,
    /// Bytes the hosts put on the wire (headers included).
    pub host_tx_bytes: u64,
    pub events: u64,
    pub retransmitted: u64,
    /// Ranks whose buffer differs from the root's (only with `verify_data`).
    pub corrupt_ranks: Vec<u32>,
    /// Per rank, what it concluded once nothing was left in flight; `None` for a
    /// member that crashed.
    pub outcomes: Vec<Option<GroupOutcome>>,
}

/// The engine connection `from` → `post.to` of the post's channel, opened on first
/// use (a data connection exposes `size` bytes at the receiver); true when new.
pub(crate) fn connection_for(
    post: &OverlayPost,
    engine: &mut Engine,
    conns: &mut BTreeMap<(u32, u32, Channel), u32>,
    hosts: &[u32],
    from: u32,
    size: u64,
) -> Result<(u32, bool), EngineError> {
    if let Some(&c) = conns.get(&(from, post.to, post.channel)) {
        return Ok((c, false));
    }
    let region = if post.is_control() { 0 } else { size };
    let c = engine.open_connection(hosts[from as usize], hosts[post.to as usize], region)?;
    conns.insert((from, post.to, post.channel), c);
    Ok((c, true))
}

/// Runs one broadcast on an otherwise idle fabric.
pub fn run_broadcast(
    topo: Topology,
    mut cfg: EngineConfig,
    spec: &BroadcastSpec,
) -> Result<BroadcastOutcome, BroadcastError> {
    let n = spec.hosts.len() as u32;
    let hosts = topo.num_hosts() as u32;
    let mut seen = std::collections::BTreeSet::new();
    for &h in &spec.hosts {
        if h >= hosts || !seen.insert(h) {
            return Err(BroadcastError::BadGroupHost { host: h, hosts });
        }
    }
    cfg.carry_payload = spec.verify_data;
    let root_data = if spec.verify_data {
        let len = usize::try_from(spec.driver.message_bytes)
            .map_err(|_| BroadcastError::TooLargeToVerify)?;
        let mut b = vec![0u8; len];
        ChaCha8Rng::seed_from_u64(spec.seed).fill_bytes(&mut b);
        Some(b)
    } else {
        None
    };
    let mut engine = Engine::new(topo, cfg, Vec::new())?;
    let (mut outcome, buffers) = broadcast_on(&mut engine, spec, 0, root_data)?;
    if spec.verify_data {
        let root = &buffers[spec.root as usize];
        outcome.corrupt_ranks = (0..n).filter(|&r| &buffers[r as usize] != root).collect();
    }
    Ok(outcome)
}

/// Runs one broadcast of `root_data` (the root's buffer, `spec.driver.message_bytes`
/// long) on an otherwise idle fabric, carrying the bytes packet by packet; returns the
/// outcome and every rank's buffer (what the sim/lab `transfer` scenario compares).
pub fn run_broadcast_with_data(
    topo: Topology,
    mut cfg: EngineConfig,
    spec: &BroadcastSpec,
    root_data: Vec<u8>,
) -> Result<(BroadcastOutcome, Vec<Vec<u8>>), BroadcastError> {
    if root_data.len() as u64 != spec.driver.message_bytes {
        return Err(BroadcastError::DataLength {
            len: root_data.len(),
            message_bytes: spec.driver.message_bytes,
        });
    }
    let hosts = topo.num_hosts() as u32;
    if let Some(&h) = spec.hosts.iter().find(|&&h| h >= hosts) {
        return Err(BroadcastError::HostOutOfRange { host: h, hosts });
    }
    cfg.carry_payload = true;
    let mut engine = Engine::new(topo, cfg, Vec::new())?;
    broadcast_on(&mut engine, spec, 0, Some(root_data))
}

/// Runs one broadcast on `engine` from `start_ps` until every rank has the message
/// (the engine must carry payload when `root_data` is given). Returns the outcome,
/// with latency counted from `start_ps`, and each rank's buffer (empty without
/// `root_data`). The engine may hold other QPs; only this broadcast's connections'
/// events are consumed, and it must be the only thing with events outstanding.
pub(crate) fn broadcast_on(
    engine: &mut Engine,
    spec: &BroadcastSpec,
    start_ps: u64,
    root_data: Option<Vec<u8>>,
) -> Result<(BroadcastOutcome, Vec<Vec<u8>>), BroadcastError> {
    let n = spec.hosts.len() as u32;
    let (events0, tx0, retx0) = (
        engine.stats.totals.events,
        engine.host_tx_bytes(),
        engine.retransmitted(),
    );
    let watchdog = !spec.failures.is_empty();
    let mut group = BroadcastGroup::with_suspect_after(
        spec.scheme,
        n,
        spec.root,
        spec.driver,
        spec.overhead.as_ps(),
        watchdog.then_some(Duration::from_ps(spec.suspect_after.as_ps().max(1))),
    )?;
    let size = spec.driver.message_bytes;
    let verify = root_data.is_some();
    let mut buffers: Vec<Vec<u8>> = Vec::new();
    if let Some(root) = root_data {
        buffers = vec![vec![0u8; root.len()]; n as usize];
        buffers[spec.root as usize] = root;
    }
    let mut conns: BTreeMap<(u32, u32, Channel), u32> = BTreeMap::new();
    let mut conn_info: BTreeMap<u32, (u32, u32, Channel)> = BTreeMap::new();
    let mut messages = 0u64;
    let mut posts = Vec::new();
    let mut now = start_ps;
    // Crashes: the member's host leaves the fabric (every link of it fails).
    let mut crashed_at = vec![u64::MAX; n as usize];
    for f in &spec.failures {
        let host = *spec
            .hosts
            .get(f.rank as usize)
            .ok_or(BroadcastError::FailedMemberNotRank { rank: f.rank, n })?;
        crashed_at[f.rank as usize] = crashed_at[f.rank as usize].min(f.at_ps);
        // A member scheduled to crash crashes rather than suspects.
        group.disable_watchdog(f.rank);
        let links: Vec<u32> = engine.topology().ports(host).iter().map(|p| p.0).collect();
        for l in links {
            engine.schedule_link_change(Instant::from_ps(f.at_ps), l, false);
        }
    }
    let alive = |r: u32, t: u64, crashed_at: &[u64]| t < crashed_at[r as usize];
    loop {
        group.drain_posts(now, &mut posts);
        for TimedPost {
            rank: r,
            at_ps,
            post: p,
        } in posts.drain(..)
        {
            if !alive(r, at_ps, &crashed_at) {
                continue; // a crashed member posts nothing
            }
            let (conn, new) = connection_for(&p, engine, &mut conns, &spec.hosts, r, size)?;
            if new {
                conn_info.insert(conn, (r, p.to, p.channel));
            }
            let data = if verify && !p.is_control() {
                let b = &buffers[r as usize][p.offset as usize..(p.offset + p.len) as usize];
                Payload::Bytes(Arc::from(b))
            } else {
                Payload::Zeros(p.len as usize)
            };
            engine.post_message(
                Instant::from_ps(at_ps),
                conn,
                p.offset,
                data,
                p.imm,
                p.wr_id,
            )?;
            messages += 1;
        }
        // The next watchdog deadline: the earliest live, unfinished rank that has
        // neither progressed nor probed for `suspect_after`.
        let deadline = group.poll_timeout();
        let horizon = deadline.unwrap_or(u64::MAX / 2);
        let more = engine.run_until_app_event(Instant::from_ps(horizon));
        let mut any = false;
        while let Some((t, ev)) = engine.poll_app_event() {
            any = true;
            now = t.as_ps();
            let info = |conn: u32| conn_info[&conn];
            match ev {
                AppEvent::SendDone { conn, wr_id, ok } if conn_info.contains_key(&conn) => {
                    let (from, to, channel) = info(conn);
                    if !alive(from, now, &crashed_at) {
                        continue;
                    }
                    let r = if !ok {
                        if !watchdog {
                            return Err(BroadcastError::SendFailed {
                                rank: from,
                                at_ns: now / 1000,
                            });
                        }
                        group.handle_peer_failure(now, from, to)
                    } else if channel == Channel::Data {
                        group.handle_send_complete(now, from, wr_id)
                    } else {
                        group.handle_control_sent(now, from)
                    };
                    r.map_err(|source| BroadcastError::Rank { rank: from, source })?;
                }
                AppEvent::Delivered { conn, imm, .. } if conn_info.contains_key(&conn) => {
                    let (from, to, channel) = info(conn);
                    if !alive(to, now, &crashed_at) {
                        continue;
                    }
                    let r = if channel == Channel::Control {
                        group.handle_control(now, to, from, imm)
                    } else {
                        if verify {
                            let (off, len) = spec.driver.block_range(imm);
                            let region = engine.connection_region(conn).unwrap_or(&[]);
                            let (a, b) = (off as usize, (off + len) as usize);
                            if b <= region.len() {
                                buffers[to as usize][a..b].copy_from_slice(&region[a..b]);
                            }
                        }
                        group.handle_block(now, to, from, imm)
                    };
                    r.map_err(|source| BroadcastError::Rank { rank: to, source })?;
                }
                _ => {}
            }
        }
        if !any {
            if let Some(d) = deadline {
                // Nothing happened before the deadline: those ranks probe.
                now = now.max(d);
                group.handle_timeout(now);
                continue;
            }
            if !more {
                break;
            }
        }
    }
    let outcomes: Vec<Option<GroupOutcome>> = (0..n)
        .map(|r| (crashed_at[r as usize] == u64::MAX).then(|| group.outcome(r)))
        .collect();
    if !watchdog {
        if let Some(r) = group.first_incomplete() {
            return Err(BroadcastError::Stalled(r));
        }
    }
    let outcome = BroadcastOutcome {
        latency_ps: group.latency_ps().saturating_sub(start_ps),
        rank_done_ps: group.rank_done_ps(),
        messages,
        host_tx_bytes: engine.host_tx_bytes() - tx0,
        events: engine.stats.totals.events - events0,
        retransmitted: engine.retransmitted() - retx0,
        corrupt_ranks: Vec::new(),
        outcomes,
    };
    Ok((outcome, buffers))
}

/// The analytic cost of a message between two ranks (placed on `hosts`) on the idle
/// fabric, for `overlay::model::critical_path`.
pub fn message_cost<'a>(
    topo: &'a Topology,
    routes: &'a Routes,
    mtu: usize,
    hosts: &'a [u32],
) -> impl Fn(u32, u32, u64) -> MessageCost + 'a {
    move |a, b, bytes| {
        ideal_message(
            topo,
            routes,
            hosts[a as usize],
            hosts[b as usize],
            bytes,
            mtu,
        )
    }
}

/// Hosts for a group of `n`: evenly spread over the fabric's hosts (rank 0 on host 0).
pub fn spread_hosts(num_hosts: u32, n: u32) -> Vec<u32> {
    let stride = (num_hosts / n.max(1)).max(1);
    (0..n).map(|r| r * stride).collect()
}

/// How `rocast bcast` runs each scheme — the way its users run it:
/// - sequential: N unicasts of the whole message, all posted at once (window n − 1);
/// - binomial tree: the whole message per hop, children in turn (MPI's binomial
///   `MPI_Bcast` without segmentation);
/// - chain, binomial pipeline and binary tree: `block`-sized blocks, one
///   outstanding send per rank (RDMC; NCCL's tree pipelines the same way);
/// - ring: `block`-sized slices with `ring_slots` in flight per connection (NCCL's
///   `NCCL_STEPS` = 8).
///
/// With `flow_control`, every transfer waits for the receiver's buffer (RDMC's
/// ready-for-block; MPI's rendezvous handshake plays the same part for large
/// messages).
pub fn bench_driver_config(
    scheme: Scheme,
    group: u32,
    size: u64,
    block: u64,
    ring_slots: u32,
    flow_control: bool,
) -> DriverConfig {
    let whole = size.max(1);
    let (block_bytes, window) = match scheme {
        Scheme::Sequential => (whole, group.saturating_sub(1).max(1)),
        Scheme::BinomialTree => (whole, 1),
        Scheme::Chain
        | Scheme::BinomialPipeline
        | Scheme::BinaryTree
        | Scheme::DoubleBinaryTree => (block, 1),
        Scheme::Ring => (block, ring_slots.max(1)),
    };
    DriverConfig {
        message_bytes: size,
        block_bytes,
        window,
        ready_for_block: flow_control,
    }
}
