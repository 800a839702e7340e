//! Cepheus multicast groups in the simulator (Cepheus §III): unmodified RC endpoints
//! pointed at a virtual remote, MRP registration through the switches, data through
//! the switches' multicast engines, and the safeguard fallback to application-layer
//! multicast (§V-D).
//!
//! This driver is an adapter: the group's control is `control::session`, the same
//! state machines `rocast mcast` and the C programs run on real packets.
//! What runs where:
//! - Control: a `LeaderSession` at the source and a `MemberSession` per receiver. Their
//!   control frames travel the engine's control channel (`Engine::send_control`, one
//!   `control_latency` each); the leader's MRP packets enter the fabric at the source
//!   and travel hop by hop through the switches' `switch::mrp_agent`, each hop after
//!   the link's serialisation and propagation time; members confirm over the control
//!   channel. Discovery (`Params`/`Join`) and the buffer's `Announce`/`Ready` come
//!   before the first post; `Done` (WRITE) and every member's `Result` verdict after
//!   the last, then the close.
//! - Hosts: one `rnic::RcQueuePair` per member, connected to (McstID, QPN 1). The
//!   source posts RDMA WRITEs with immediate at offsets of the virtual region (VA 0);
//!   every receiver pre-posts the receive the immediate consumes. The whole run is
//!   one session buffer of `messages` × `message_bytes`, `window` messages in flight;
//!   each acknowledged message feeds the session's safeguard (`handle_acked`).
//! - Switches: `fabric::cepheus::CepheusSwitch`, inside the engine's switch model; MRP
//!   registrations, prunes (an evicted member) and releases (the fallback, the close)
//!   go through `switch::mrp_agent`, the handlers `rocast switch` runs.
//! - Fallback: the session decides — a failed registration, the safeguard, or the
//!   source's QP going to error (`handle_path_failed`). Mid-transfer it asks for a
//!   `Reroute`: the driver destroys the group's QPs and cuts at what every member
//!   acknowledged; each member reports the prefix it holds (`Holding`), and the
//!   session's `ResumeTransfer` names them, so the overlay (the session's fallback
//!   plan, RDMC's binomial pipeline) carries each remaining message from its sender
//!   to exactly the members that lack it: none lost, none delivered twice.
//! - Verdicts: with `verify_data` a member reports the SHA-256 of its bytes, else of
//!   the bitmap of messages it holds; `session_ok` is the close every member heard.
//!
//! Memory: the engine's, plus per member one QP and its region (`window` message
//! slots, or every message when verifying data), its session (a control decoder of
//! at most 1,037 B and a few queued messages), plus per message one bit per receiver
//! of delivery state.

use std::sync::Arc;

use rocast_core::control::session::{
    ConnId, LeaderEvent, LeaderSession, LeaderSessionConfig, MemberEvent, MemberPhase,
    MemberSession, MemberSessionConfig, OverlayPlan, OverlayReason, SessionDest, SessionError,
    MAX_TRANSMIT_LEN,
};
use rocast_core::control::source::{synchronise_source_switch, SourceSwitchError};
use rocast_core::control::{FallbackReason, RegistrationConfig, SafeguardConfig};
use rocast_core::fabric::cepheus::GroupAddressSpace;
use rocast_core::fabric::cepheus::{CepheusStats, VIRTUAL_QPN};
use rocast_core::overlay::Scheme;
use rocast_core::payload::sha256;
use rocast_core::plan::Topology;
use rocast_core::rnic::{Payload, RcQueuePair};
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::group_control::Params;
use rocast_core::wire::mrp::{MrpRepr, MRP_MAX_PAYLOAD};
use rocast_core::wire::Ipv4Address;

use crate::engine::FlowSpec;
use crate::engine::{AppEvent, Engine, EngineConfig, EngineError};
use crate::multicast::broadcast::{
    bench_driver_config, broadcast_on, BroadcastError, BroadcastSpec, DEFAULT_OVERHEAD,
};
use crate::packet::host_ip;

/// Why a Cepheus group could not be set up or did not finish.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CepheusError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Broadcast(#[from] BroadcastError),
    #[error("group session: {0}")]
    Session(#[from] SessionError),
    #[error("member {host}: group session: {source}")]
    MemberSession {
        host: u32,
        #[source]
        source: SessionError,
    },
    #[error("group hosts must be distinct hosts below {hosts} (got {host})")]
    BadGroupHost { host: u32, hosts: u32 },
    #[error("a group needs receivers, messages and a window of at least 1")]
    EmptyGroup,
    #[error("a message of {0} bytes exceeds RDMA's 2 GiB message limit")]
    MessageTooLarge(u64),
    #[error("region too large")]
    RegionTooLarge,
    #[error("transfer too large")]
    TransferTooLarge,
    #[error("the fallback's block must be 1 B .. 4 GiB")]
    FallbackBlock,
    #[error("a switch restart needs the leader's refresh (`refresh`)")]
    RestartWithoutRefresh,
    #[error("kill: rank {rank} is not a receiver's (1..={receivers})")]
    KillNotReceiver { rank: u32, receivers: usize },
    #[error("sender {sender}: the group has {members} members")]
    SenderNotMember { sender: u32, members: usize },
    #[error("a SEND group does not switch sources (senders is for WRITE)")]
    SendWithSenders,
    #[error("messages too large to verify")]
    TooLargeToVerify,
    #[error("source switch: QPs gone")]
    SourceSwitchQpsGone,
    #[error("source switch at message {message}: {source}")]
    SourceSwitch {
        message: u32,
        #[source]
        source: SourceSwitchError,
    },
    #[error("the source has no port")]
    SourceWithoutPort,
    #[error("multicast stalled at {at_ns} ns: {done} of {messages} messages complete")]
    Stalled {
        at_ns: u64,
        done: usize,
        messages: u32,
    },
}

/// One multicast group's transfer.
#[derive(Clone, Debug)]
pub struct CepheusSpec {
    /// The leader, which is also the source.
    pub source: u32,
    pub receivers: Vec<u32>,
    pub mcst_id: Ipv4Address,
    pub message_bytes: u64,
    pub messages: u32,
    /// Messages the source keeps posted at once.
    pub window: u32,
    /// Host software time per message at the source before it is posted (the
    /// application's and storage stack's cost per IO). The source's CPU is one
    /// resource: posts are serialised, each costing this much.
    pub per_message_overhead: Duration,
    /// Record the source's transmitted bytes and every unicast flow's every interval.
    pub sample_interval: Option<Duration>,
    /// Carry real bytes and compare every receiver's memory with the source's.
    pub verify_data: bool,
    pub seed: u64,
    pub registration: RegistrationConfig,
    /// Watch throughput and fall back below the threshold (registration failure
    /// always falls back).
    pub safeguard: Option<SafeguardConfig>,
    /// Block size of the fallback binomial pipeline.
    pub fallback_block: u64,
    /// Which member sends each message (0: `source`, k: `receivers[k-1]`); empty:
    /// all from `source`. A change of sender waits until the group is drained, then
    /// runs Cepheus §III-E's PSN synchronisation on the two QPs — same MFT, same QPs.
    pub senders: Vec<u32>,
    /// Drop this fraction of the frames toward these hosts (the switch port to each),
    /// from `loss_from` on (zero: from the start).
    pub loss_toward: Vec<(u32, f64)>,
    pub loss_from: Duration,
    /// SEND (with the message number as immediate, into a posted receive per message)
    /// instead of RDMA WRITE with immediate. SEND groups register no memory region
    /// and do not switch sources.
    pub send: bool,
    /// Receiver `rank` (1-based, as `receivers[rank - 1]`) dies once the switches have
    /// taken in this many of the group's data packets: its process ends, so its QP is
    /// gone and its control connection breaks (the leader hears the reset one
    /// `control_latency` later) — the eviction scenario shared with `rocast lab run`.
    pub kill: Option<(u32, u64)>,
    /// The source's switch restarts (`Engine::restart_switch`: its tables lost) once
    /// the switches have taken in this many of the group's data packets — the
    /// switch-restart scenario shared with `rocast lab run`. Needs `refresh`: only the
    /// leader's refresh teaches the new switch the group.
    pub restart_switch_after: Option<u64>,
    /// The leader refreshes its registration this often (a quarter of it while a
    /// buffer goes through the switch), as `rocast mcast` does; None: never (the
    /// simulated switches keep their entries for the run, without a lease).
    pub refresh: Option<Duration>,
}

impl CepheusSpec {
    pub fn new(source: u32, receivers: Vec<u32>, message_bytes: u64) -> Self {
        CepheusSpec {
            source,
            receivers,
            mcst_id: Ipv4Address::new(239, 1, 0, 1),
            message_bytes,
            messages: 1,
            window: 1,
            per_message_overhead: Duration::from_ps(0),
            verify_data: false,
            seed: 1,
            registration: RegistrationConfig::default(),
            safeguard: None,
            fallback_block: 1 << 20,
            senders: Vec::new(),
            loss_toward: Vec::new(),
            loss_from: Duration::from_ps(0),
            send: false,
            kill: None,
            restart_switch_after: None,
            refresh: None,
            sample_interval: None,
        }
    }
}

/// How the switch-over to application-layer multicast went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    pub reason: String,
    /// What decided it: "registration" (refused or timed out), "safeguard", or
    /// "path" (the source's QP failed).
    pub cause: &'static str,
    /// Where the overlay took the buffer over (the session's `ResumeTransfer`
    /// offset); None when the whole transfer went through it.
    pub resumed_at: Option<u64>,
    pub at_ps: u64,
    /// Messages (re)broadcast over the overlay, and to how many receivers in all.
    pub messages: u32,
    pub deliveries: u64,
}

/// The feedback the source's QP saw: it must be ordinary RoCE feedback only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceFeedback {
    pub acks: u64,
    pub naks: u64,
    pub cnps: u64,
    pub stale_acks: u64,
    /// Packets the QP refused (wrong QPN, malformed, not for it).
    pub refused: u64,
}

impl SourceFeedback {
    fn of(qp: &RcQueuePair) -> Self {
        let s = qp.stats();
        SourceFeedback {
            acks: s.rx_acks,
            naks: s.rx_naks,
            cnps: s.rx_cnps,
            stale_acks: s.rx_stale_acks,
            refused: s.drop_malformed
                + s.drop_wrong_qp
                + s.drop_wrong_source
                + s.drop_unexpected_opcode,
        }
    }
}

#[derive(Clone, Debug)]
pub struct CepheusOutcome {
    /// When registration completed (None: it failed).
    pub registered_ps: Option<u64>,
    /// When the application first asked to send (each post then pays the CPU cost).
    pub first_post_ps: u64,
    /// Per message: when the last receiver had it (None: never).
    pub message_done_ps: Vec<Option<u64>>,
    /// Per message: when the source's WRITE completed (None: not over Cepheus).
    pub source_done_ps: Vec<Option<u64>>,
    /// Per member (source first, then receivers): distinct messages it holds,
    /// its own included.
    pub delivered: Vec<u32>,
    /// Source switches performed (PSN synchronisations).
    pub source_switches: u32,
    pub duplicates: u64,
    /// Members (hosts) whose memory differs from what was sent (with `verify_data`).
    pub corrupt_receivers: Vec<u32>,
    /// With `verify_data`: CRC-32 of what each member's application holds, in member
    /// order (the source first), for comparison with a real run of the scenario.
    pub member_crc32: Vec<u32>,
    /// Per member (the source first, empty): the messages in the order its QP
    /// completed them on the Cepheus path (not the fallback's).
    pub member_order: Vec<Vec<u32>>,
    pub fallback: Option<Fallback>,
    /// The group session's close: every member reported the whole transfer intact
    /// (a SHA-256 of its bytes with `verify_data`, else of which messages it holds)
    /// and every member heard `Close { ok: true }`.
    pub session_ok: bool,
    /// Each receiver's verdict on the transfer as the leader collected it
    /// (`CepheusSpec::receivers` order): it reported holding all of it intact.
    pub member_verdicts: Vec<bool>,
    /// Receivers the leader evicted (`CepheusSpec::receivers` order).
    pub member_evicted: Vec<bool>,
    /// Prunes and releases a switch refused (a repeated release finds nothing).
    pub mrp_ignored: u64,
    /// Registration refreshes the leader sent (`CepheusSpec::refresh`).
    pub leader_refreshes: u64,
    /// The switch restarted mid-stream (`CepheusSpec::restart_switch_after`): the
    /// restarted switch carried some of the group's data (what the lab's restarted
    /// daemon counts from 0).
    pub switch_restarted: bool,
    pub source_feedback: SourceFeedback,
    /// All switches' multicast counters, summed.
    pub switches: CepheusStats,
    /// The largest MFT memory of one switch while the group was up (bytes).
    pub max_switch_mft_bytes: usize,
    pub events: u64,
    pub host_tx_bytes: u64,
    pub retransmitted: u64,
    pub mrp_malformed: u64,
    pub qp_rx_drops: u64,
    /// Frames captured on `EngineConfig::capture_links`: (time ps, Ethernet frame).
    pub capture: Vec<(u64, Vec<u8>)>,
    /// With `sample_interval`: one sample per interval.
    pub samples: Vec<RateSample>,
    /// The unicast flows run beside the group (`run_cepheus_with_flows`).
    pub flows: Vec<crate::engine::FlowResult>,
}

/// What the run looked like at one sampling instant (`CepheusSpec::sample_interval`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateSample {
    pub t_ps: u64,
    /// Data bytes the source's QP has sent so far.
    pub source_tx_bytes: u64,
    /// Each unicast flow's data bytes sent so far; None before it starts or once it
    /// finished.
    pub flow_tx_bytes: Vec<Option<u64>>,
    /// Bytes queued at the switch port facing each receiver (its downlink), in
    /// `CepheusSpec::receivers` order: where a multicast's congestion builds.
    pub receiver_queue_bytes: Vec<u64>,
    /// PFC pause frames sent by all ports so far.
    pub pauses_sent: u64,
    /// CNPs the source's QP has received so far.
    pub source_cnps: u64,
}

impl CepheusOutcome {
    /// First post → the last receiver has the last message.
    pub fn completion_ps(&self) -> Option<u64> {
        let last = self
            .message_done_ps
            .iter()
            .copied()
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()?;
        Some(last - self.first_post_ps)
    }
}

use rocast_core::payload::message_data;

/// Runs one group's transfer on an otherwise idle fabric.
pub fn run_cepheus(
    topo: Topology,
    cfg: EngineConfig,
    spec: &CepheusSpec,
) -> Result<CepheusOutcome, CepheusError> {
    run_cepheus_with_flows(topo, cfg, spec, Vec::new())
}

/// Runs one group's transfer beside unicast `flows` (which start at their own times).
pub fn run_cepheus_with_flows(
    topo: Topology,
    mut cfg: EngineConfig,
    spec: &CepheusSpec,
    flows: Vec<FlowSpec>,
) -> Result<CepheusOutcome, CepheusError> {
    let hosts = topo.num_hosts() as u32;
    let mut seen = std::collections::BTreeSet::new();
    for &h in std::iter::once(&spec.source).chain(&spec.receivers) {
        if h >= hosts || !seen.insert(h) {
            return Err(CepheusError::BadGroupHost { host: h, hosts });
        }
    }
    if spec.receivers.is_empty() || spec.messages == 0 || spec.window == 0 {
        return Err(CepheusError::EmptyGroup);
    }
    cfg.carry_payload = spec.verify_data;
    let mut engine = Engine::new(topo, cfg, flows)?;
    for &(host, p) in &spec.loss_toward {
        if spec.loss_from.as_ps() == 0 {
            engine.set_loss_toward_host(host, p)?;
        } else {
            engine.schedule_loss_toward_host(Instant::from_ps(spec.loss_from.as_ps()), host, p)?;
        }
    }
    let mut run = GroupRun::new(&mut engine, spec)?;
    run.drive(&mut engine)?;
    Ok(run.finish(&mut engine))
}

/// SHA-256 of which messages a member holds (one byte per message, 1 if held): the
/// verdict's digest when the run carries no bytes. It equals the leader's (every
/// message held) only if the member holds all of them.
fn bitmap_digest(held: &[bool]) -> [u8; 32] {
    sha256(&held.iter().map(|&h| h as u8).collect::<Vec<u8>>())
}

/// How far a session deadline lies: no run reaches it unless it stalls, and then the
/// session fails with the deadline's words instead of the run hanging.
const SESSION_DEADLINE: Duration = Duration::from_ms(60_000);

struct GroupRun<'s> {
    spec: &'s CepheusSpec,
    /// Member hosts: the source, then the receivers.
    hosts: Vec<u32>,
    qpns: Vec<u32>,
    /// The group's switch QPs are open (until its data moves to the overlay).
    qps_open: bool,
    /// The member sending now.
    sender: usize,
    source_switches: u32,
    slots: u64,
    /// The group session at the source: discovery, MRP registration (Cepheus §III-C),
    /// the safeguard and the fallback (§V-D), the buffer's verdicts.
    leader: LeaderSession,
    /// One member session per receiver (`hosts[k + 1]`, the leader's `ConnId(k)`).
    members: Vec<MemberSession>,
    /// Members given input since their outputs were last polled (so a run polls only
    /// those, not every member per event), and whether each is listed.
    dirty: Vec<usize>,
    is_dirty: Vec<bool>,
    /// Members' deadlines, earliest first, with each member's current one.
    member_deadlines: std::collections::BTreeSet<(Instant, usize)>,
    member_deadline: Vec<Option<Instant>>,
    /// The buffer's SHA-256 as announced: of its bytes (with `verify_data`), else of the
    /// every-message bitmap a member holding all of them reports.
    sha256: [u8; 32],
    /// The session's buffer number, once announced.
    seq: Option<u32>,
    /// The session said `Transfer` through the switch: the source may post.
    posting: bool,
    /// Per receiver: the rerouted buffer was whole there already (it relays only).
    relaying: Vec<bool>,
    /// The buffer's outcome (every live member reported it intact).
    buffer_ok: Option<bool>,
    /// The session's close (`ok` as every member heard it).
    closed: Option<bool>,
    /// Each receiver's verdict from the buffer's outcome.
    member_verdicts: Vec<bool>,
    /// The largest MFT memory of one switch seen while the group was up (the leader
    /// releases the group at the fallback and the close).
    peak_mft_bytes: usize,
    /// Per member (the source first): its process ended (`CepheusSpec::kill`).
    dead: Vec<bool>,
    /// The kill still to come: (member, data packets in at the switches).
    kill_pending: Option<(usize, u64)>,
    /// The switch restart still to come: data packets in at the switches.
    restart_pending: Option<u64>,
    /// The switches' data packets in when the switch restarted.
    restarted_at_data_in: Option<u64>,
    /// A dead member's control connection reset, reaching the leader then.
    reset_at: Option<(usize, Instant)>,
    member_evicted: Vec<bool>,
    /// Per message: the latest delivery to a member (ps), its completion once a dead
    /// member no longer counts.
    last_delivery_ps: Vec<u64>,
    registered_ps: Option<u64>,
    first_post_ps: Option<u64>,
    next_post: u32,
    outstanding: u32,
    /// delivered[member][message]
    delivered: Vec<Vec<bool>>,
    /// Per member: messages in the order the Cepheus path completed them.
    order: Vec<Vec<u32>>,
    message_done_ps: Vec<Option<u64>>,
    source_done_ps: Vec<Option<u64>>,
    duplicates: u64,
    /// Per member: what the application holds (with `verify_data`).
    app_buffers: Vec<Vec<u8>>,
    fallback: Option<Fallback>,
    /// When the source's CPU is free for the next post.
    cpu_free: u64,
    next_sample: Option<u64>,
    samples: Vec<RateSample>,
    /// (switch, port) facing each receiver, for `RateSample::receiver_queue_bytes`.
    downlinks: Vec<(u32, u16)>,
    /// The source QP's feedback counters, kept when the QP is destroyed.
    source_feedback: Option<SourceFeedback>,
}

impl<'s> GroupRun<'s> {
    fn new(engine: &mut Engine, spec: &'s CepheusSpec) -> Result<Self, CepheusError> {
        let mcst = spec.mcst_id.to_u32();
        let message_bytes = u32::try_from(spec.message_bytes)
            .ok()
            .filter(|&b| b as u64 <= rocast_core::rnic::MAX_MESSAGE_BYTES as u64)
            .ok_or(CepheusError::MessageTooLarge(spec.message_bytes))?;
        let slots = if spec.verify_data {
            spec.messages as u64
        } else {
            spec.window as u64
        };
        let region = spec
            .message_bytes
            .checked_mul(slots)
            .ok_or(CepheusError::RegionTooLarge)?;
        let total = spec
            .message_bytes
            .checked_mul(spec.messages as u64)
            .ok_or(CepheusError::TransferTooLarge)?;
        let fallback_block = u32::try_from(spec.fallback_block)
            .ok()
            .filter(|&b| b > 0)
            .ok_or(CepheusError::FallbackBlock)?;
        if spec.restart_switch_after.is_some() && spec.refresh.is_none() {
            return Err(CepheusError::RestartWithoutRefresh);
        }
        let mut hosts = vec![spec.source];
        hosts.extend(&spec.receivers);
        if let Some((r, _)) = spec
            .kill
            .filter(|&(r, _)| r == 0 || r as usize >= hosts.len())
        {
            return Err(CepheusError::KillNotReceiver {
                rank: r,
                receivers: spec.receivers.len(),
            });
        }
        if let Some(&s) = spec.senders.iter().find(|&&s| s as usize >= hosts.len()) {
            return Err(CepheusError::SenderNotMember {
                sender: s,
                members: hosts.len(),
            });
        }
        if spec.send && !spec.senders.is_empty() {
            return Err(CepheusError::SendWithSenders);
        }
        let qpns = hosts
            .iter()
            .map(|&h| engine.open_qp(h, mcst, VIRTUAL_QPN, region))
            .collect::<Result<Vec<_>, _>>()?;
        let ip = |h: u32| Ipv4Address::from_u32(host_ip(h));
        let leader = LeaderSession::new(
            LeaderSessionConfig {
                local: ip(spec.source),
                local_qpn: qpns[0],
                // Members that take over as source WRITE into the leader's region too.
                local_region: (0, 1),
                mcst_id: spec.mcst_id,
                group_space: GroupAddressSpace::MULTICAST,
                members: spec.receivers.len(),
                params: Params {
                    write: !spec.send,
                    capacity: total,
                    message_bytes,
                    start_psn: 0,
                },
                overlay: None,
                fallback: OverlayPlan {
                    scheme: Scheme::BinomialPipeline,
                    block_bytes: fallback_block,
                    rate_mbps: 0,
                    window: 8,
                },
                registration: spec.registration,
                safeguard: spec.safeguard,
                discovery_timeout: SESSION_DEADLINE,
                ready_timeout: SESSION_DEADLINE,
                verdict_timeout: SESSION_DEADLINE,
                // Without a refresh the simulated switches hold their entries for the
                // run (they have no lease).
                refresh: spec.refresh,
                invitations: None,
                mrp_payload_limit: MRP_MAX_PAYLOAD,
            },
            engine.now(),
        )?;
        let members: Vec<MemberSession> = spec
            .receivers
            .iter()
            .map(|&h| {
                MemberSession::new(
                    MemberSessionConfig {
                        local: ip(h),
                        mcst_id: spec.mcst_id,
                        group_space: GroupAddressSpace::MULTICAST,
                        max_capacity: total,
                        params_timeout: SESSION_DEADLINE,
                        idle_timeout: SESSION_DEADLINE,
                        invitation: None,
                    },
                    engine.now(),
                )
            })
            .collect();
        let n = hosts.len();
        let m = spec.messages as usize;
        let (app_buffers, sha256) = if spec.verify_data {
            let len = usize::try_from(total).map_err(|_| CepheusError::TooLargeToVerify)?;
            let want = rocast_core::payload::transfer_data(
                spec.seed,
                spec.messages,
                spec.message_bytes as usize,
            );
            (vec![vec![0u8; len]; n], sha256(&want))
        } else {
            (Vec::new(), bitmap_digest(&vec![true; m]))
        };
        Ok(GroupRun {
            spec,
            sender: spec.senders.first().copied().unwrap_or(0) as usize,
            hosts,
            qpns,
            qps_open: true,
            source_switches: 0,
            slots,
            leader,
            dirty: (0..members.len()).collect(),
            is_dirty: vec![true; members.len()],
            member_deadlines: std::collections::BTreeSet::new(),
            member_deadline: vec![None; members.len()],
            members,
            sha256,
            seq: None,
            posting: false,
            relaying: vec![false; spec.receivers.len()],
            buffer_ok: None,
            closed: None,
            member_verdicts: vec![false; spec.receivers.len()],
            peak_mft_bytes: 0,
            dead: vec![false; spec.receivers.len() + 1],
            kill_pending: spec.kill.map(|(r, n)| (r as usize, n)),
            restart_pending: spec.restart_switch_after,
            restarted_at_data_in: None,
            reset_at: None,
            member_evicted: vec![false; spec.receivers.len()],
            last_delivery_ps: vec![0; spec.messages as usize],
            registered_ps: None,
            first_post_ps: None,
            next_post: 0,
            outstanding: 0,
            delivered: vec![vec![false; m]; n],
            order: vec![Vec::new(); n],
            message_done_ps: vec![None; m],
            source_done_ps: vec![None; m],
            duplicates: 0,
            app_buffers,
            fallback: None,
            cpu_free: 0,
            next_sample: spec.sample_interval.map(|d| d.as_ps()),
            samples: Vec::new(),
            downlinks: spec
                .receivers
                .iter()
                .filter_map(|&h| {
                    let &(link, peer) = engine.topology().ports(h).first()?;
                    Some((peer, engine.topology().port_of(peer, link)?))
                })
                .collect(),
            source_feedback: None,
        })
    }

    fn sender_of(&self, i: u32) -> usize {
        self.spec.senders.get(i as usize).copied().unwrap_or(0) as usize
    }

    fn post_next(&mut self, engine: &mut Engine, at: u64) -> Result<(), CepheusError> {
        while self.posting
            && self.next_post < self.spec.messages
            && self.outstanding < self.spec.window
        {
            let i = self.next_post;
            let s = self.sender_of(i);
            if s != self.sender {
                if self.outstanding > 0 {
                    return Ok(()); // the group drains first
                }
                let (old, new) = (self.qpns[self.sender], self.qpns[s]);
                engine
                    .modify_qp_pair(old, new, synchronise_source_switch)
                    .ok_or(CepheusError::SourceSwitchQpsGone)?
                    .map_err(|source| CepheusError::SourceSwitch { message: i, source })?;
                self.sender = s;
                self.source_switches += 1;
            }
            self.next_post += 1;
            self.outstanding += 1;
            self.first_post_ps.get_or_insert(at);
            let at = at.max(self.cpu_free) + self.spec.per_message_overhead.as_ps();
            self.cpu_free = at;
            let offset = (i as u64 % self.slots) * self.spec.message_bytes;
            let recv_len = if self.spec.send {
                self.spec.message_bytes as usize
            } else {
                0
            };
            for (m, &q) in self.qpns.iter().enumerate() {
                if m != s && !self.dead[m] {
                    engine.post_recv_len(q, i as u64, recv_len)?;
                }
            }
            let data = match self.hold_own(s, i) {
                Some(d) => Payload::Bytes(Arc::from(d)),
                None => Payload::Zeros(self.spec.message_bytes as usize),
            };
            if self.spec.send {
                engine.post_qp_send(Instant::from_ps(at), self.qpns[s], data, i, i as u64)?;
            } else {
                engine.post_qp_write(
                    Instant::from_ps(at),
                    self.qpns[s],
                    offset,
                    0,
                    data,
                    i,
                    i as u64,
                )?;
            }
        }
        Ok(())
    }

    /// Member `s` sends message `i`, so it holds it: marks it and, when verifying,
    /// puts the bytes in its buffer and returns them.
    fn hold_own(&mut self, s: usize, i: u32) -> Option<Vec<u8>> {
        self.delivered[s][i as usize] = true;
        let d = self
            .spec
            .verify_data
            .then(|| message_data(self.spec.seed, i, self.spec.message_bytes as usize))?;
        let at = i as usize * d.len();
        self.app_buffers[s][at..at + d.len()].copy_from_slice(&d);
        Some(d)
    }

    /// Member `r` holds message `i`: in its QP's region (WRITE), or in `sent` (SEND).
    fn delivered(&mut self, engine: &Engine, r: usize, i: u32, now: u64, sent: Option<&[u8]>) {
        let Some(slot) = self.delivered[r].get_mut(i as usize) else {
            self.duplicates += 1; // an immediate that names no message
            return;
        };
        if *slot {
            self.duplicates += 1;
            return;
        }
        *slot = true;
        self.order[r].push(i);
        if self.spec.verify_data {
            let len = self.spec.message_bytes as usize;
            let off = (i as u64 % self.slots) as usize * len;
            let at = i as usize * len;
            let held = match sent {
                Some(d) => Some(d),
                None => engine
                    .qp_region(self.qpns[r])
                    .and_then(|m| m.get(off..off + len)),
            };
            if let Some(src) = held.filter(|d| d.len() == len) {
                self.app_buffers[r][at..at + len].copy_from_slice(src);
            }
        }
        let last = &mut self.last_delivery_ps[i as usize];
        *last = (*last).max(now);
        self.check_done(i);
    }

    /// Message `i` is complete once every live member holds it (a dead member's
    /// absence does not hold it back): at its latest delivery.
    fn check_done(&mut self, i: u32) {
        let i = i as usize;
        if self.message_done_ps[i].is_none()
            && self
                .delivered
                .iter()
                .zip(&self.dead)
                .all(|(d, &dead)| dead || d[i])
        {
            self.message_done_ps[i] = Some(self.last_delivery_ps[i]);
        }
    }

    /// Member `r`'s process ends (`CepheusSpec::kill`): its QP goes, its session stops,
    /// and the reset of its control connection reaches the leader a control latency
    /// later.
    fn kill(&mut self, engine: &mut Engine, r: usize, now: Instant) {
        self.dead[r] = true;
        if self.qps_open {
            engine.close_qp(self.qpns[r]);
        }
        self.reset_at = Some((r, now + engine.control_latency()));
    }

    /// Messages member `r` holds from the first on, without a gap (RC completes in
    /// order, so on the switch path this is everything it holds).
    fn held_prefix(&self, r: usize) -> u64 {
        self.delivered[r].iter().take_while(|&&d| d).count() as u64
    }

    /// What member `r` reports holding: SHA-256 of its bytes (with `verify_data`), else
    /// of the bitmap of the messages it holds. Equal to the announced digest only if
    /// it holds every message (intact).
    fn member_digest(&self, r: usize) -> [u8; 32] {
        if self.spec.verify_data {
            sha256(&self.app_buffers[r])
        } else {
            bitmap_digest(&self.delivered[r])
        }
    }

    fn drive(&mut self, engine: &mut Engine) -> Result<(), CepheusError> {
        let t0 = engine.now();
        // Every receiver's control connection to the leader is up at the start.
        for (k, &h) in self.spec.receivers.iter().enumerate() {
            self.leader
                .handle_connected(t0, ConnId(k as u32), Ipv4Address::from_u32(host_ip(h)));
        }
        let mut now = t0;
        loop {
            self.pump(engine, now)?;
            if self.closed.is_some() {
                return Ok(());
            }
            let deadline = [
                self.leader.poll_timeout(),
                self.member_deadlines.first().map(|&(t, _)| t),
                self.reset_at.map(|(_, t)| t),
            ]
            .into_iter()
            .flatten()
            .min();
            let wake = deadline
                .into_iter()
                .chain(self.next_sample.map(Instant::from_ps))
                .min()
                .unwrap_or(Instant::from_ps(u64::MAX / 2));
            let more = engine.run_until_app_event(wake);
            let mut any = false;
            while let Some((t, ev)) = engine.poll_app_event() {
                any = true;
                now = now.max(t);
                self.on_event(engine, t, ev)?;
                self.pump(engine, t)?;
                if self.kill_pending.is_some() || self.restart_pending.is_some() {
                    let data_in: u64 = engine
                        .cepheus_switches()
                        .map(|(_, s)| s.stats.data_in)
                        .sum();
                    if let Some((r, _)) = self.kill_pending.filter(|&(_, n)| data_in >= n) {
                        self.kill_pending = None;
                        self.kill(engine, r, t);
                    }
                    if self.restart_pending.is_some_and(|n| data_in >= n) {
                        self.restart_pending = None;
                        let &(_, tor) = engine
                            .topology()
                            .ports(self.spec.source)
                            .first()
                            .ok_or(CepheusError::SourceWithoutPort)?;
                        engine.restart_switch(tor)?;
                        self.restarted_at_data_in = Some(data_in);
                    }
                }
            }
            now = now.max(engine.now());
            self.sample(engine, now);
            if !more && !any {
                // The fabric is idle: only a session deadline can move the group on.
                match deadline {
                    Some(t) => now = now.max(t),
                    None => {
                        return Err(CepheusError::Stalled {
                            at_ns: now.as_ns(),
                            done: self.message_done_ps.iter().filter(|d| d.is_some()).count(),
                            messages: self.spec.messages,
                        })
                    }
                }
            }
            if let Some((r, _)) = self.reset_at.filter(|&(_, t)| t <= now) {
                self.reset_at = None;
                self.leader.handle_conn_error(
                    now,
                    ConnId(r as u32 - 1),
                    "connection reset (the member's process ended)",
                );
            }
            if self.leader.poll_timeout().is_some_and(|t| t <= now) {
                self.leader.handle_timeout(now);
            }
            while let Some(&(t, k)) = self.member_deadlines.first() {
                if t > now {
                    break;
                }
                self.set_member_deadline(k, None);
                self.member(k).handle_timeout(now);
            }
        }
    }

    fn sample(&mut self, engine: &Engine, now: Instant) {
        let (Some(t), Some(iv)) = (self.next_sample, self.spec.sample_interval) else {
            return;
        };
        if t > now.as_ps() {
            return;
        }
        let (src, src_cnps) = engine
            .qp(self.qpns[0])
            .map_or((0, 0), |q| (q.stats().tx_data_bytes, q.stats().rx_cnps));
        let flows = (0..engine.flows.results.len() as u32)
            .map(|i| engine.flow_tx_bytes(i))
            .collect();
        self.samples.push(RateSample {
            t_ps: t,
            source_tx_bytes: src,
            flow_tx_bytes: flows,
            receiver_queue_bytes: self
                .downlinks
                .iter()
                .map(|&(n, p)| engine.port_queue_bytes(n, p))
                .collect(),
            pauses_sent: engine.port_counters().map(|c| c.3.pauses_sent).sum(),
            source_cnps: src_cnps,
        });
        self.next_sample = Some(t + iv.as_ps());
    }

    /// Carries the sessions' outputs (control frames over the engine's control
    /// channel, MRP into the fabric at the source) and acts on their events, until
    /// neither has anything more.
    fn pump(&mut self, engine: &mut Engine, now: Instant) -> Result<(), CepheusError> {
        let mut buf = [0u8; MAX_TRANSMIT_LEN];
        let source = self.spec.source;
        loop {
            let mut progressed = false;
            while let Some(tx) = self.leader.poll_transmit(now, &mut buf) {
                progressed = true;
                let bytes = &buf[..tx.len];
                match tx.dest {
                    SessionDest::Member(ConnId(k)) => {
                        let to = self.spec.receivers[k as usize];
                        engine.send_control(now, source, to, bytes.to_vec());
                    }
                    SessionDest::Mrp => engine.inject_mrp_bytes(now, source, bytes.to_vec()),
                    SessionDest::Leader => {}
                }
            }
            while let Some(ev) = self.leader.poll_event() {
                progressed = true;
                self.on_leader_event(engine, now, ev)?;
            }
            while let Some(k) = self.dirty.pop() {
                progressed = true;
                self.is_dirty[k] = false;
                if self.dead[k + 1] {
                    self.set_member_deadline(k, None);
                    continue;
                }
                while let Some(tx) = self.members[k].poll_transmit(now, &mut buf) {
                    let from = self.spec.receivers[k];
                    engine.send_control(now, from, source, buf[..tx.len].to_vec());
                }
                while let Some(ev) = self.members[k].poll_event() {
                    self.on_member_event(now, k, ev)?;
                }
                let d = self.members[k].poll_timeout();
                self.set_member_deadline(k, d);
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// Member `k`'s session, listed for the next poll of its outputs.
    fn member(&mut self, k: usize) -> &mut MemberSession {
        if !std::mem::replace(&mut self.is_dirty[k], true) {
            self.dirty.push(k);
        }
        &mut self.members[k]
    }

    fn set_member_deadline(&mut self, k: usize, d: Option<Instant>) {
        if let Some(old) = std::mem::replace(&mut self.member_deadline[k], d) {
            self.member_deadlines.remove(&(old, k));
        }
        if let Some(d) = d {
            self.member_deadlines.insert((d, k));
        }
    }

    fn on_leader_event(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        ev: LeaderEvent,
    ) -> Result<(), CepheusError> {
        if matches!(
            ev,
            LeaderEvent::BufferDone(_)
                | LeaderEvent::Reroute { .. }
                | LeaderEvent::UseOverlay { .. }
        ) {
            // Before the session's release reaches the switches.
            for (_, sw) in engine.cepheus_switches() {
                self.peak_mft_bytes = self.peak_mft_bytes.max(sw.memory_bytes());
            }
        }
        let bytes = self.spec.message_bytes * self.spec.messages as u64;
        match ev {
            LeaderEvent::Registered { .. } => self.registered_ps = Some(now.as_ps()),
            LeaderEvent::Up if self.buffer_ok.is_some() => {
                let ok = self.buffer_ok == Some(true);
                self.leader.close(now, ok)?;
            }
            LeaderEvent::Up if self.seq.is_none() => {
                let seq = self.leader.start_buffer(now, bytes, self.sha256)?;
                self.seq = Some(seq);
            }
            LeaderEvent::Up => {}
            LeaderEvent::UseOverlay { reason, .. } => {
                if self.buffer_ok.is_none() && self.fallback.is_none() {
                    self.fallback = Some(Fallback {
                        reason: self.describe(&reason),
                        cause: match reason {
                            OverlayReason::Safeguard(_) => "safeguard",
                            OverlayReason::PathFailed(_) => "path",
                            _ => "registration",
                        },
                        resumed_at: None,
                        at_ps: now.as_ps(),
                        messages: 0,
                        deliveries: 0,
                    });
                }
                self.close_qps(engine);
            }
            LeaderEvent::Reroute { .. } if self.leader.rerouting() => {
                // Stop the switch path after what every member acknowledged (RC
                // completes in order: a prefix of the messages).
                self.posting = false;
                self.close_qps(engine);
                let acked = self
                    .source_done_ps
                    .iter()
                    .take_while(|d| d.is_some())
                    .count();
                self.leader
                    .handle_transfer_cut(now, acked as u64 * self.spec.message_bytes)?;
            }
            LeaderEvent::Reroute { .. } => {}
            LeaderEvent::Transfer { .. } if self.leader.uses_overlay() => {
                self.overlay_transfer(engine, 0, &[])?;
            }
            LeaderEvent::Transfer { .. } => {
                self.posting = true;
                self.post_next(engine, now.as_ps())?;
            }
            LeaderEvent::ResumeTransfer {
                offset, holding, ..
            } => {
                if let Some(fb) = self.fallback.as_mut() {
                    fb.resumed_at = Some(offset);
                }
                self.overlay_transfer(engine, offset, &holding)?
            }
            LeaderEvent::BufferDone(o) => {
                for (k, &h) in self.spec.receivers.iter().enumerate() {
                    let ip = Ipv4Address::from_u32(host_ip(h));
                    self.member_verdicts[k] = o.verdicts.iter().any(|v| v.ip == ip && v.ok);
                }
                self.buffer_ok = Some(o.ok);
            }
            LeaderEvent::MemberEvicted { ip, .. } => {
                if let Some(k) = self
                    .spec
                    .receivers
                    .iter()
                    .position(|&h| Ipv4Address::from_u32(host_ip(h)) == ip)
                {
                    self.member_evicted[k] = true;
                    // Whatever it does not hold no longer holds a message back.
                    self.dead[k + 1] = true;
                    for i in 0..self.spec.messages {
                        self.check_done(i);
                    }
                }
            }
            LeaderEvent::Closed { ok } => self.closed = Some(ok),
            LeaderEvent::Failed(e) => return Err(CepheusError::Session(e)),
        }
        Ok(())
    }

    fn on_member_event(
        &mut self,
        now: Instant,
        k: usize,
        ev: MemberEvent,
    ) -> Result<(), CepheusError> {
        let r = k + 1;
        match ev {
            MemberEvent::OpenQp(_) => {
                // The QP and its region (VA 0) were opened with the group.
                let qpn = self.qpns[r];
                self.member(k).handle_qp_ready(now, qpn, 0, 1)
            }
            MemberEvent::UseOverlay(_) => {
                let held = self.held_prefix(r) * self.spec.message_bytes;
                self.member(k).handle_overlay_ready_holding(now, held);
            }
            // Receives are posted message by message as the source posts (the driver's
            // business; the region is the QP's).
            MemberEvent::PostReceives { .. } => self.member(k).handle_receives_posted(now),
            MemberEvent::ResumeReceive { held, .. } => {
                self.relaying[k] = held;
                self.member(k).handle_receives_posted(now);
            }
            MemberEvent::WriteDone { .. } => self.report_held(now, r),
            MemberEvent::Received { .. }
            | MemberEvent::PeerEvicted { .. }
            | MemberEvent::Closed { .. } => {}
            MemberEvent::Failed(e) => {
                return Err(CepheusError::MemberSession {
                    host: self.hosts[r],
                    source: e,
                })
            }
        }
        Ok(())
    }

    /// Receiver `r` gives its verdict: the digest of what it holds.
    fn report_held(&mut self, now: Instant, r: usize) {
        let digest = self.member_digest(r);
        self.member(r - 1).handle_received(now, digest, now.as_ns());
    }

    /// The group's data leaves the switch: its QPs are destroyed (what is still in
    /// flight to them is dropped as stale).
    fn close_qps(&mut self, engine: &mut Engine) {
        if !std::mem::take(&mut self.qps_open) {
            return;
        }
        self.posting = false;
        self.source_feedback = engine.qp(self.qpns[0]).map(SourceFeedback::of);
        for &q in &self.qpns {
            engine.close_qp(q);
        }
    }

    fn describe(&self, reason: &OverlayReason) -> String {
        match reason {
            OverlayReason::Safeguard(FallbackReason::LowThroughput {
                measured_bps,
                expected_bps,
            }) => format!(
                "throughput {:.2} Gbps below {:.0}% of {:.2} Gbps",
                *measured_bps as f64 / 1e9,
                self.spec.safeguard.map_or(0.0, |s| s.threshold) * 100.0,
                *expected_bps as f64 / 1e9
            ),
            OverlayReason::PathFailed(why) => why.clone(),
            r => r.describe(),
        }
    }

    /// The session's `Transfer` through the overlay (from `offset` 0) or its
    /// `ResumeTransfer` after a reroute: every message from `offset` on goes from its
    /// sender to exactly the members that lack it, by the prefixes the members
    /// reported (`holding`) and the source's own; runs of consecutive messages with
    /// the same sender and the same members missing them go as one overlay transfer
    /// of their concatenation, so the pipeline's blocks flow across message
    /// boundaries. Then every member gives its verdict and the leader hears the
    /// transfer is done.
    fn overlay_transfer(
        &mut self,
        engine: &mut Engine,
        offset: u64,
        holding: &[(Ipv4Address, u64)],
    ) -> Result<(), CepheusError> {
        let plan = self.leader.config().fallback;
        let mb = self.spec.message_bytes;
        let first = (offset / mb) as u32;
        // Messages each member holds from the first on, by its report (the source
        // knows its own).
        let held: Vec<u64> = (0..self.hosts.len())
            .map(|r| {
                if r == 0 {
                    return 0;
                }
                let ip = Ipv4Address::from_u32(host_ip(self.hosts[r]));
                holding
                    .iter()
                    .find(|(a, _)| *a == ip)
                    .map_or(first as u64, |&(_, h)| h / mb)
            })
            .collect();
        let holds = |run: &Self, r: usize, i: u32| {
            if r == 0 {
                run.delivered[0][i as usize]
            } else {
                (i as u64) < held[r]
            }
        };
        let mut runs: Vec<(usize, Vec<usize>, Vec<u32>)> = Vec::new();
        for i in first..self.spec.messages {
            let s = self.sender_of(i);
            let missing: Vec<usize> = (0..self.hosts.len())
                .filter(|&r| r != s && !self.dead[r] && !holds(self, r, i))
                .collect();
            if missing.is_empty() {
                continue;
            }
            match runs.last_mut() {
                Some((rs, rm, msgs))
                    if *rs == s && *rm == missing && msgs.last().is_some_and(|&l| l + 1 == i) =>
                {
                    msgs.push(i)
                }
                _ => runs.push((s, missing, vec![i])),
            }
        }
        let start_ps = engine.now().as_ps();
        self.first_post_ps.get_or_insert(start_ps);
        let len = mb as usize;
        let (mut messages, mut deliveries) = (0u32, 0u64);
        for (s, missing, msgs) in runs {
            // Posted or not, the sender holds its messages (and their bytes are the
            // overlay root's data).
            let mut data: Option<Vec<u8>> = None;
            for &i in &msgs {
                if let Some(d) = self.hold_own(s, i) {
                    data.get_or_insert_with(|| Vec::with_capacity(len * msgs.len()))
                        .extend_from_slice(&d);
                }
            }
            let mut hosts = vec![self.hosts[s]];
            hosts.extend(missing.iter().map(|&r| self.hosts[r]));
            let n = hosts.len() as u32;
            let total = mb * msgs.len() as u64;
            let bspec = BroadcastSpec {
                scheme: plan.scheme,
                hosts,
                root: 0,
                driver: bench_driver_config(
                    plan.scheme,
                    n,
                    total,
                    plan.block_bytes as u64,
                    plan.window as u32,
                    true,
                ),
                overhead: DEFAULT_OVERHEAD,
                verify_data: self.spec.verify_data,
                seed: self.spec.seed,
                failures: Vec::new(),
                suspect_after: super::broadcast::DEFAULT_SUSPECT_AFTER,
            };
            let start = engine.now().as_ps();
            let (out, buffers) = broadcast_on(engine, &bspec, start, data)?;
            // A message of the run counts as delivered when the whole run is.
            let done = start + out.latency_ps;
            for (k, &r) in missing.iter().enumerate() {
                for (j, &i) in msgs.iter().enumerate() {
                    if self.spec.verify_data {
                        let at = i as usize * len;
                        self.app_buffers[r][at..at + len]
                            .copy_from_slice(&buffers[k + 1][j * len..(j + 1) * len]);
                    }
                    // A member sent a message it held is a duplicate (the session's
                    // holdings should rule that out).
                    if std::mem::replace(&mut self.delivered[r][i as usize], true) {
                        self.duplicates += 1;
                    }
                    deliveries += 1;
                }
            }
            for &i in &msgs {
                self.last_delivery_ps[i as usize] = done;
                self.message_done_ps[i as usize] = Some(done);
                messages += 1;
            }
        }
        if let Some(fb) = self.fallback.as_mut() {
            fb.messages += messages;
            fb.deliveries += deliveries;
        }
        let now = engine.now();
        for k in 0..self.members.len() {
            if self.dead[k + 1] {
                continue;
            }
            if std::mem::take(&mut self.relaying[k]) {
                self.member(k).handle_relayed(now);
            } else {
                self.report_held(now, k + 1);
            }
        }
        self.leader.handle_transfer_done(now, Ok(()));
        Ok(())
    }

    fn on_event(
        &mut self,
        engine: &mut Engine,
        t: Instant,
        ev: AppEvent,
    ) -> Result<(), CepheusError> {
        let now = t.as_ps();
        match ev {
            AppEvent::Mrp { host, bytes } => {
                let Some(k) = self.spec.receivers.iter().position(|&h| h == host) else {
                    return Ok(()); // the source's own copy: the leader needs none
                };
                if self.dead[k + 1] {
                    return Ok(());
                }
                match MrpRepr::parse(&bytes) {
                    Ok(mrp) => self.member(k).handle_mrp(t, &mrp),
                    Err(_) => self.member(k).note_foreign_mrp(),
                }
            }
            AppEvent::Control { from, to, bytes } => {
                if to == self.spec.source {
                    if let Some(k) = self.spec.receivers.iter().position(|&h| h == from) {
                        self.leader.handle_stream(t, ConnId(k as u32), &bytes);
                    }
                } else if from == self.spec.source {
                    if let Some(k) = self.spec.receivers.iter().position(|&h| h == to) {
                        if !self.dead[k + 1] {
                            self.member(k).handle_stream(t, &bytes);
                        }
                    }
                }
            }
            AppEvent::SwitchReport(r) if r.mcst_id == self.spec.mcst_id => {
                self.leader.handle_switch_report(t, r);
            }
            AppEvent::QpSendDone { qpn, wr_id, ok }
                if self.qps_open && qpn == self.qpns[self.sender] =>
            {
                if !ok {
                    self.leader.handle_path_failed(
                        t,
                        format!("the source's QP failed at message {wr_id}"),
                    );
                    return Ok(());
                }
                self.outstanding -= 1;
                if let Some(d) = self.source_done_ps.get_mut(wr_id as usize) {
                    *d = Some(now);
                }
                self.leader.handle_acked(t, self.spec.message_bytes);
                if self.source_done_ps.iter().all(Option::is_some) {
                    self.posting = false;
                    self.leader.handle_transfer_done(t, Ok(()));
                } else {
                    self.post_next(engine, now)?;
                }
            }
            AppEvent::QpDelivered { qpn, imm, .. } if self.qps_open => {
                if let Some(r) = self.qpns.iter().position(|&q| q == qpn) {
                    self.delivered(engine, r, imm, now, None);
                }
            }
            AppEvent::QpReceived { qpn, imm, data } if self.qps_open => {
                if let Some(r) = self.qpns.iter().position(|&q| q == qpn) {
                    self.delivered(engine, r, imm, now, Some(&data));
                    // SEND: a receiver holding every message gives its verdict.
                    if r > 0
                        && self.delivered[r].iter().all(|&d| d)
                        && self.members[r - 1].phase() == MemberPhase::Receiving
                    {
                        self.report_held(t, r);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self, engine: &mut Engine) -> CepheusOutcome {
        let mut switches = CepheusStats::default();
        let mut max_mft = 0;
        for (_, sw) in engine.cepheus_switches() {
            switches += &sw.stats;
            max_mft = max_mft.max(sw.memory_bytes());
        }
        max_mft = max_mft.max(self.peak_mft_bytes);
        let source_feedback = engine
            .qp(self.qpns[0])
            .map(SourceFeedback::of)
            .or(self.source_feedback)
            .unwrap_or_default();
        let member_crc32 = if self.spec.verify_data {
            self.app_buffers
                .iter()
                .map(|b| rocast_core::payload::crc32(b))
                .collect()
        } else {
            Vec::new()
        };
        let corrupt_receivers = if self.spec.verify_data {
            let len = self.spec.message_bytes as usize;
            let mut want = Vec::with_capacity(len * self.spec.messages as usize);
            for i in 0..self.spec.messages {
                want.extend(message_data(self.spec.seed, i, len));
            }
            (0..self.hosts.len())
                .filter(|&r| self.app_buffers[r] != want)
                .map(|r| self.hosts[r])
                .collect()
        } else {
            Vec::new()
        };
        CepheusOutcome {
            registered_ps: self.registered_ps,
            first_post_ps: self.first_post_ps.unwrap_or(0),
            message_done_ps: self.message_done_ps,
            source_done_ps: self.source_done_ps,
            delivered: self
                .delivered
                .iter()
                .map(|d| d.iter().filter(|&&x| x).count() as u32)
                .collect(),
            duplicates: self.duplicates,
            source_switches: self.source_switches,
            corrupt_receivers,
            member_crc32,
            member_order: self.order,
            fallback: self.fallback,
            session_ok: self.closed == Some(true),
            member_verdicts: self.member_verdicts,
            member_evicted: self.member_evicted,
            mrp_ignored: engine.control.mrp_ignored,
            leader_refreshes: self.leader.stats().refreshes,
            switch_restarted: self
                .restarted_at_data_in
                .is_some_and(|at| switches.data_in > at),
            source_feedback,
            switches,
            max_switch_mft_bytes: max_mft,
            events: engine.stats.totals.events,
            host_tx_bytes: engine.host_tx_bytes(),
            retransmitted: engine.retransmitted(),
            mrp_malformed: engine.control.mrp_malformed,
            qp_rx_drops: engine.stats.totals.qp_rx_drops,
            capture: std::mem::take(&mut engine.stats.capture),
            samples: self.samples,
            flows: engine.flows.results.clone(),
        }
    }
}
