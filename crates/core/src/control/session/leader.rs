//! [`LeaderSession`]: the leader's side of a group session (see the parent module for
//! the lifecycle, Cepheus §III-C registration and §V-D fallback).
//!
//! States:
//!
//! ```text
//! Discovering ──all joined──▶ Registering ──Registered──▶ Idle ◀──────────────┐
//!      │                          │ refused / timed out            │ start_buffer │
//!      │ (overlay configured)     ▼                                ▼              │
//!      └────────────────────▶ OverlaySetup ──all Ready──▶ Idle   Announced        │
//!                                 ▲                              │ all Ready      │
//!                                 │ safeguard decided            ▼                │
//!                                 └──────────────────────── Transferring          │
//!                                                                │ transfer done  │
//!                                                                ▼                │
//!                                                           Collecting ───────────┘
//! any state ──close──▶ Closed          any state ──error──▶ Failed
//! ```
//!
//! **Faults**. While the group is up on the switch, a member whose control
//! connection breaks, that never answers an announcement while others do, or that
//! holds a transfer up — the transfer stalled and the member stopped confirming the
//! registration refreshes while others go on confirming them (alive, perhaps, but
//! unreachable through the switch: each refresh travels the group's tree, so a member
//! behind a dead link misses it) — is *evicted*: an [`MrpPrune`] takes its path off
//! the switch's tree, so its silence no longer holds the aggregated ACK back, every
//! other member hears `Evicted`, and the buffer completes for the rest; its outcome
//! names the evicted member. Through an
//! overlay (whose schedule has a place for every rank) a lost member fails the group,
//! RDMC's semantics. The registration is refreshed every `refresh` (the switch's
//! entries are leased soft state), so a restarted switch relearns the group and a
//! crashed leader's group is reclaimed when its lease runs out.

use super::{transmit_from, ConnId, Outgoing, OverlayPlan, SessionDest, SessionError};
use crate::control::invitation::InvitationKey;
use crate::control::registration::{
    GroupSpec, RegistrationConfig, RegistrationController, RegistrationEvent, RegistrationFailure,
    SwitchReport,
};
use crate::control::safeguard::{FallbackReason, SafeguardConfig, SafeguardMonitor};
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use crate::wire::group_control::{
    Announce, BufferResult, Close, Done, Evicted, Message, Overlay, Params, Resume, StreamDecoder,
    OVERLAY_MAX_RANKS,
};
use crate::wire::mrp::{MrpMember, MrpPrune, MrpRelease};
use crate::wire::GroupAddressSpace;
use crate::wire::Ipv4Address;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What a leader session needs to know.
#[derive(Clone, Debug)]
pub struct LeaderSessionConfig {
    /// The leader's own address and the QPN of its switch QP (its MRP record).
    pub local: Ipv4Address,
    pub local_qpn: u32,
    /// The leader's own WRITE region (VA, RKey) in its MRP record: where the switch
    /// aims WRITEs another member sends (Cepheus §III-E source switching). (0, 0) for
    /// a leader that only sends.
    pub local_region: (u64, u32),
    pub mcst_id: Ipv4Address,
    /// Where McstIDs come from (224.0.0.0/4, or the runtime's unicast block).
    pub group_space: GroupAddressSpace,
    /// Members to wait for, not counting the leader (≥ 1).
    pub members: usize,
    /// What every member is told first.
    pub params: Params,
    /// Use this overlay instead of the switch (the baselines).
    pub overlay: Option<OverlayPlan>,
    /// The overlay to fall back to (Cepheus §V-D; RDMC's binomial pipeline by default).
    pub fallback: OverlayPlan,
    pub registration: RegistrationConfig,
    /// Watch the multicast's throughput while transferring and fall back after the
    /// buffer when it stays low (§V-D); `None`: only a failed registration falls back.
    pub safeguard: Option<SafeguardConfig>,
    /// From the session's start until every member joined.
    pub discovery_timeout: Duration,
    /// From `Overlay` or `Announce` until every member answered `Ready`.
    pub ready_timeout: Duration,
    /// From the end of a transfer until every member's `Result`.
    pub verdict_timeout: Duration,
    /// Resend the registration this often while the group uses the switch (the
    /// switch's entries are soft state with a lease: the refresh keeps them, and a
    /// restarted switch relearns the group from it). `None`: never.
    pub refresh: Option<Duration>,
    /// Admit only members presenting an invitation minted with this key for this
    /// group and their address (`control::invitation`). `None`: anyone may join.
    pub invitations: Option<InvitationKey>,
    /// The largest MRP payload to emit (`MRP_MAX_PAYLOAD`, less the authentication
    /// trailer when the driver seals MRP).
    pub mrp_payload_limit: usize,
}

/// Where a leader session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderPhase {
    Discovering,
    Registering,
    OverlaySetup,
    Idle,
    Announced,
    Transferring,
    Collecting,
    Closed,
    Failed,
}

/// Why the group's data goes through an overlay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlayReason {
    /// The configuration asked for it.
    Configured,
    /// MFT registration failed (a switch refused, or members never confirmed).
    RegistrationFailed(RegistrationFailure),
    /// The safeguard found the multicast too slow (after the buffer it watched).
    Safeguard(FallbackReason),
    /// The switch path failed under the transfer (the source's QP went to error: its
    /// retries ran out), so the rest of the buffer goes through the overlay (Cepheus
    /// §V-D: "switches back to the default AMcast approach when detecting anomalies").
    PathFailed(String),
}

impl OverlayReason {
    /// Words for a report: empty when configured, else why the switch is not used.
    pub fn describe(&self) -> String {
        match self {
            OverlayReason::Configured => String::new(),
            OverlayReason::RegistrationFailed(f) => format!("registration failed: {f:?}"),
            OverlayReason::Safeguard(r) => format!("safeguard: {r:?}"),
            OverlayReason::PathFailed(why) => format!("switch path failed: {why}"),
        }
    }
}

/// One member's verdict on one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberVerdict {
    pub ip: Ipv4Address,
    /// What it reported; `None` if it never did (deadline) or its connection broke.
    pub result: Option<BufferResult>,
    /// It reported ok with the announced SHA-256.
    pub ok: bool,
}

/// The outcome of one buffer, once every member answered or the deadline passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferOutcome {
    pub seq: u32,
    pub sha256: [u8; 32],
    /// In join order (evicted members too, with `ok: false`).
    pub verdicts: Vec<MemberVerdict>,
    /// Members evicted so far (join order): the buffer did not reach them.
    pub evicted: Vec<Ipv4Address>,
    /// Every member still in the group reported it intact.
    pub ok: bool,
}

/// What the leader's driver must do, and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderEvent {
    /// Every member confirmed its MRP record: data goes through the switch's QP.
    Registered { took: Duration },
    /// Data goes through this overlay: the driver drops the switch QP and runs the
    /// schedule as rank 0 over `roster` (leader first, then members in join order).
    UseOverlay {
        plan: OverlayPlan,
        roster: Vec<Ipv4Address>,
        reason: OverlayReason,
    },
    /// The group is ready for [`LeaderSession::start_buffer`].
    Up,
    /// A member was taken out of the group (its connection broke, or it never became
    /// ready): pruned from the switch's tree, every other member told; the group goes
    /// on without it.
    MemberEvicted { ip: Ipv4Address, reason: String },
    /// The safeguard found the switch path too slow while buffer `seq` is in flight:
    /// stop sending through the switch and call
    /// [`LeaderSession::handle_transfer_cut`] with the bytes every member acknowledged.
    Reroute { seq: u32 },
    /// Every member is ready for the rest of buffer `seq` from byte `offset` (the
    /// lowest prefix a member holds): send it through the overlay, then call
    /// [`LeaderSession::handle_transfer_done`]. `holding` names each live member's
    /// prefix (join order, ≥ `offset`), so a driver that can may skip, for each byte,
    /// the members that hold it.
    ResumeTransfer {
        seq: u32,
        offset: u64,
        holding: Vec<(Ipv4Address, u64)>,
    },
    /// Every member is ready for buffer `seq`: send it, then call
    /// [`LeaderSession::handle_transfer_done`].
    Transfer { seq: u32 },
    /// Every member answered buffer `seq` (or its deadline passed).
    BufferDone(BufferOutcome),
    /// The group ended; every member was told `ok`.
    Closed { ok: bool },
    /// The group failed; every member was told `Close { ok: false }`.
    Failed(SessionError),
}

/// Counters; every input that changed nothing is counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderStats {
    pub connections: u64,
    /// Connections past the group's size, answered `Close { ok: false }`.
    pub refused_connections: u64,
    /// `Ready` from a member already ready.
    pub duplicate_ready: u64,
    /// A second `Result` from one member for one buffer.
    pub duplicate_results: u64,
    /// Confirmations outside registration (resends make them normal).
    pub late_confirmations: u64,
    /// Well-formed input the state did not expect (a `Ready` while idle, a `Result`
    /// after the verdicts, bytes for an unknown connection, a driver call out of turn).
    pub unexpected: u64,
    /// Switch reports outside registration.
    pub late_switch_reports: u64,
    /// Outputs the wire refused to emit (never expected).
    pub unemittable: u64,
    /// Joins naming an address other than their connection's: refused, the group
    /// goes on (a host cannot enrol another host, or aim the group's WRITEs at it).
    pub refused_joins: u64,
    /// Registrations resent to keep the switch's lease (or teach a restarted switch).
    pub refreshes: u64,
    /// Members evicted.
    pub evicted: u64,
    /// Confirmations of registration refreshes from members.
    pub refresh_confirmations: u64,
    /// Connections refused for an invitation that did not verify, or a Join without
    /// one when invitations are required.
    pub uninvited: u64,
}

#[derive(Debug)]
struct Conn {
    decoder: StreamDecoder,
    /// Index into `members` once it joined.
    member: Option<usize>,
    /// Past the group's size, or broken: its input is ignored.
    refused: bool,
    /// The address the connection came from (the TCP peer): a Join must name it.
    peer: Ipv4Address,
    /// It presented a valid invitation.
    invited: bool,
}

#[derive(Debug)]
enum State {
    Discovering {
        deadline: Instant,
    },
    Registering {
        ctl: Box<RegistrationController>,
        started: Instant,
    },
    OverlaySetup {
        deadline: Instant,
        ready: BTreeSet<usize>,
        /// Set when the safeguard moved a buffer mid-transfer: what every member
        /// acknowledged (it resumes from there or above).
        resume: Option<u64>,
        /// Members' `Holding` reports (a member that sent none holds `resume`).
        holding: BTreeMap<usize, u64>,
    },
    Idle,
    Announced {
        deadline: Instant,
        ready: BTreeSet<usize>,
        /// A resumed buffer (`Resume` sent instead of `Announce`): from this offset.
        resume: Option<u64>,
    },
    Transferring,
    Collecting {
        deadline: Instant,
        /// Per member index: its report, or `None` when its connection broke.
        results: BTreeMap<usize, Option<BufferResult>>,
    },
    Closed,
    Failed,
}

/// Refreshes a member may leave unconfirmed, while another member confirms the last
/// one and the transfer has made no progress for [`STALLED_AFTER`], before it is
/// evicted as unreachable: refreshed every 250 ms during a transfer (the default 1 s
/// over [`TRANSFER_REFRESH_DIVISOR`]), a member cut off from the switch mid-transfer is
/// evicted about 1.25–1.5 s after its link went down, after a second of silence (four
/// refreshes: a lost MRP datagram or a late confirmation under load does not look like
/// a cut; two did, once, under 5% loss on a machine running twice its cores' load). rocast's
/// assumption, sized against the least RC retry budget of the group's QP (20 ms
/// doubling over 7 retries: 5.1 s without progress; `rocast mcast` gives it enough
/// retries to cover `--timeout`, 20 s by default): the eviction comes first, and the switch, pruned, acknowledges the next retransmission for the
/// members left. The stall condition keeps a lossy but moving transfer (5% loss: a
/// refresh or a confirmation lost now and then) from evicting anyone. A refresh interval
/// in which no member confirmed anything is counted against nobody (a stalled switch
/// or leader, not a member), so the member whose confirmations drain last after a
/// stall is not taken for cut off.
pub const UNREACHABLE_REFRESHES: u32 = 4;
/// While a buffer is in flight through the switch the registration is refreshed this
/// many times as often (every 250 ms with the default 1 s).
pub const TRANSFER_REFRESH_DIVISOR: u64 = 4;
/// How long a transfer through the switch must have made no progress (no message
/// acknowledged) before a member that misses refreshes is held responsible.
pub const STALLED_AFTER: Duration = Duration::from_ms(1_000);

/// The leader's group session (see the module docs).
#[derive(Debug)]
pub struct LeaderSession {
    cfg: LeaderSessionConfig,
    state: State,
    conns: BTreeMap<ConnId, Conn>,
    /// Joined members, in join order: their connection and MRP record.
    members: Vec<(ConnId, MrpMember)>,
    /// Indices into `members` of those evicted.
    evicted: BTreeSet<usize>,
    /// Per member (as `members`), the registration refreshes sent since it last
    /// confirmed one.
    unconfirmed_refreshes: Vec<u32>,
    /// Some member confirmed a refresh since the last one went out.
    confirmed_since_refresh: bool,
    /// The transfer's last progress (its start, or the last message acknowledged).
    transfer_progress: Option<Instant>,
    /// When the next registration refresh is due (registered through the switch).
    next_refresh: Option<Instant>,
    /// The data goes through the overlay (decided once registration failed, the
    /// safeguard fired, or configured).
    overlay: bool,
    /// The switch may hold state for the group: release it on close.
    switch_state: bool,
    monitor: Option<SafeguardMonitor>,
    /// The safeguard's decision, acted on after the buffer it watched.
    /// Why the group leaves the switch, once decided (the safeguard, or a failed
    /// path): acted on mid-buffer through `Reroute`, or after the buffer.
    pending_fallback: Option<OverlayReason>,
    /// With a reroute: each live member's `Holding` (its prefix of the buffer), handed
    /// to the driver with `ResumeTransfer`.
    resume_holding: Vec<(Ipv4Address, u64)>,
    seq: u32,
    sha256: [u8; 32],
    /// The current buffer's size.
    buffer_bytes: u64,
    /// Every buffer so far was reported intact by every member.
    all_ok: bool,
    /// Verdicts that arrived while the leader was still sending (a member holds the
    /// buffer before the leader sees its last acknowledgement).
    early_results: BTreeMap<usize, BufferResult>,
    outbox: VecDeque<(SessionDest, Outgoing)>,
    events: VecDeque<LeaderEvent>,
    stats: LeaderStats,
}

impl LeaderSession {
    /// A session that starts discovering members at `now`. Errors for a configuration
    /// no group can run with.
    pub fn new(cfg: LeaderSessionConfig, now: Instant) -> Result<Self, SessionError> {
        if cfg.members == 0 || cfg.params.message_bytes == 0 || cfg.params.capacity == 0 {
            return Err(SessionError::Protocol(
                "need members, a message size and a capacity".into(),
            ));
        }
        for p in cfg.overlay.iter().chain([&cfg.fallback]) {
            if p.block_bytes == 0 || p.window == 0 {
                return Err(SessionError::Protocol(
                    "overlay blocks and window must be at least 1".into(),
                ));
            }
        }
        let monitor = match cfg.safeguard {
            Some(s) => {
                Some(SafeguardMonitor::new(s).map_err(|e| SessionError::Protocol(e.to_string()))?)
            }
            None => None,
        };
        Ok(LeaderSession {
            state: State::Discovering {
                deadline: now + cfg.discovery_timeout,
            },
            cfg,
            conns: BTreeMap::new(),
            members: Vec::new(),
            evicted: BTreeSet::new(),
            unconfirmed_refreshes: Vec::new(),
            confirmed_since_refresh: true,
            transfer_progress: None,
            next_refresh: None,
            overlay: false,
            switch_state: false,
            monitor,
            pending_fallback: None,
            resume_holding: Vec::new(),
            seq: 0,
            sha256: [0; 32],
            buffer_bytes: 0,
            all_ok: true,
            early_results: BTreeMap::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            stats: LeaderStats::default(),
        })
    }

    pub fn config(&self) -> &LeaderSessionConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &LeaderStats {
        &self.stats
    }
    pub fn phase(&self) -> LeaderPhase {
        match self.state {
            State::Discovering { .. } => LeaderPhase::Discovering,
            State::Registering { .. } => LeaderPhase::Registering,
            State::OverlaySetup { .. } => LeaderPhase::OverlaySetup,
            State::Idle => LeaderPhase::Idle,
            State::Announced { .. } => LeaderPhase::Announced,
            State::Transferring => LeaderPhase::Transferring,
            State::Collecting { .. } => LeaderPhase::Collecting,
            State::Closed => LeaderPhase::Closed,
            State::Failed => LeaderPhase::Failed,
        }
    }
    /// Closed or failed: nothing more will happen but draining transmits and events.
    pub fn is_terminal(&self) -> bool {
        matches!(self.state, State::Closed | State::Failed)
    }
    /// Joined members' addresses, in join order (the overlay's ranks 1..).
    pub fn member_ips(&self) -> Vec<Ipv4Address> {
        self.members.iter().map(|(_, m)| m.ip).collect()
    }
    /// The member joined on `conn`, if any.
    pub fn member_of(&self, conn: ConnId) -> Option<Ipv4Address> {
        let i = self.conns.get(&conn)?.member?;
        Some(self.members[i].1.ip)
    }
    /// The data goes through an overlay.
    pub fn uses_overlay(&self) -> bool {
        self.overlay
    }
    /// Every buffer so far was reported intact by every member.
    pub fn all_ok(&self) -> bool {
        self.all_ok
    }

    fn send_to(&mut self, conn: ConnId, m: Message) {
        self.outbox
            .push_back((SessionDest::Member(conn), Outgoing::Control(m)));
    }
    /// Tells `conn` it is not in the group and ignores it from now on (the group goes
    /// on).
    fn refuse(&mut self, conn: ConnId) {
        self.send_to(conn, Message::Close(Close { ok: false }));
        if let Some(c) = self.conns.get_mut(&conn) {
            c.refused = true;
        }
    }

    /// Members still in the group (not evicted), as indices in join order.
    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.members.len()).filter(|i| !self.evicted.contains(i))
    }
    /// Members evicted so far, in join order.
    pub fn evicted_ips(&self) -> Vec<Ipv4Address> {
        self.evicted.iter().map(|&i| self.members[i].1.ip).collect()
    }

    fn send_to_members(&mut self, m: &Message) {
        let conns: Vec<ConnId> = self.live().map(|i| self.members[i].0).collect();
        for c in conns {
            self.send_to(c, m.clone());
        }
    }
    /// Tells every connection still open (joined or not) how the group ended.
    fn close_all(&mut self, ok: bool) {
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.refused)
            .map(|(id, _)| *id)
            .collect();
        for c in conns {
            self.send_to(c, Message::Close(Close { ok }));
        }
    }
    /// Frees the switch's state for the group (two copies: it is one UDP datagram and
    /// nobody acknowledges it; a second release is a no-op at the switch).
    fn release_switch(&mut self) {
        self.next_refresh = None;
        if std::mem::take(&mut self.switch_state) {
            let r = MrpRelease {
                mcst_id: self.cfg.mcst_id,
            };
            for _ in 0..2 {
                self.outbox
                    .push_back((SessionDest::Mrp, Outgoing::Release(r)));
            }
        }
    }

    fn fail(&mut self, e: SessionError) {
        if self.is_terminal() {
            return;
        }
        self.close_all(false);
        self.release_switch();
        self.state = State::Failed;
        self.events.push_back(LeaderEvent::Failed(e));
    }

    /// The driver gives up on the group (its data path or sockets failed): every member
    /// hears `Close { ok: false }` and the switch is released.
    pub fn abort(&mut self, _now: Instant, e: SessionError) {
        self.fail(e);
    }

    /// A member's control connection from `peer` was accepted: it gets `Params` (or,
    /// past the group's size or after discovery, `Close { ok: false }`). Its Join must
    /// name `peer`.
    pub fn handle_connected(&mut self, _now: Instant, conn: ConnId, peer: Ipv4Address) {
        if self.conns.contains_key(&conn) || self.is_terminal() {
            self.stats.unexpected += 1;
            return;
        }
        self.stats.connections += 1;
        let discovering = matches!(self.state, State::Discovering { .. });
        self.conns.insert(
            conn,
            Conn {
                decoder: StreamDecoder::new(),
                member: None,
                refused: false,
                peer,
                invited: false,
            },
        );
        if discovering {
            self.send_to(conn, Message::Params(self.cfg.params));
        } else {
            self.stats.refused_connections += 1;
            self.refuse(conn);
        }
    }

    /// Bytes arrived on `conn`'s stream: decoded into messages and handled in order. A
    /// frame that does not decode fails the session (the stream has lost its framing).
    pub fn handle_stream(&mut self, now: Instant, conn: ConnId, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let terminal = self.is_terminal();
            let Some(c) = self.conns.get_mut(&conn) else {
                self.stats.unexpected += 1;
                return;
            };
            if c.refused || terminal {
                return;
            }
            match c.decoder.feed(bytes) {
                Ok((n, m)) => {
                    bytes = &bytes[n..];
                    if let Some(m) = m {
                        self.handle_message(now, conn, m);
                    }
                }
                Err(e) => {
                    let who = self.peer_name(conn);
                    self.fail(SessionError::Protocol(format!(
                        "control message from {who}: {e}"
                    )));
                    return;
                }
            }
        }
    }

    fn peer_name(&self, conn: ConnId) -> String {
        match self.member_of(conn) {
            Some(ip) => format!("member {ip}"),
            None => format!("connection {}", conn.0),
        }
    }

    /// `conn` closed or broke. While collecting verdicts this is that member's failed
    /// verdict; a refused connection is forgotten; otherwise the group fails.
    pub fn handle_conn_error(&mut self, now: Instant, conn: ConnId, reason: &str) {
        let terminal = self.is_terminal();
        let Some(c) = self.conns.get_mut(&conn) else {
            self.stats.unexpected += 1;
            return;
        };
        if c.refused || terminal {
            c.refused = true;
            return;
        }
        c.refused = true;
        let member = c.member;
        if let (Some(i), true) = (member, self.can_evict()) {
            return self.evict(now, i, format!("control connection: {reason}"));
        }
        if let (State::Collecting { results, .. }, Some(i)) = (&mut self.state, member) {
            results.entry(i).or_insert(None);
            self.check_verdicts(now);
            return;
        }
        let who = self.peer_name(conn);
        self.fail(SessionError::Connection(format!(
            "control: {who}: {reason}"
        )));
    }

    /// A member can be evicted while the group is up on the switch: the prune takes
    /// its path off the tree and the others go on. An overlay's schedule has a place
    /// for every rank, so there a lost member fails the group (RDMC's semantics).
    fn can_evict(&self) -> bool {
        !self.overlay
            && matches!(
                self.state,
                State::Idle
                    | State::Announced { .. }
                    | State::Transferring
                    | State::Collecting { .. }
            )
    }

    /// Evicts member `i` whose connection is still open: it is told the group ended
    /// for it (`Close { ok: false }`), should it still be listening.
    fn evict_alive(&mut self, now: Instant, i: usize, reason: String) {
        let conn = self.members[i].0;
        self.send_to(conn, Message::Close(Close { ok: false }));
        self.evict(now, i, reason);
    }

    /// Takes member `i` out of the group: its path is pruned from the switch (twice:
    /// one unacknowledged datagram each, and a repeat prunes nothing), every other
    /// member hears `Evicted`, and what the group waits for no longer includes it.
    fn evict(&mut self, now: Instant, i: usize, reason: String) {
        if !self.evicted.insert(i) {
            return;
        }
        self.stats.evicted += 1;
        let (conn, record) = self.members[i];
        if let Some(c) = self.conns.get_mut(&conn) {
            c.refused = true;
        }
        if self.switch_state {
            let prune = MrpPrune {
                mcst_id: self.cfg.mcst_id,
                members: vec![record.ip],
            };
            for _ in 0..2 {
                self.outbox
                    .push_back((SessionDest::Mrp, Outgoing::Prune(prune.clone())));
            }
        }
        self.early_results.remove(&i);
        self.events.push_back(LeaderEvent::MemberEvicted {
            ip: record.ip,
            reason,
        });
        if self.live().next().is_none() {
            return self.fail(SessionError::Connection("every member was evicted".into()));
        }
        self.send_to_members(&Message::Evicted(Evicted { ip: record.ip }));
        match &mut self.state {
            State::Announced { .. } => self.check_ready(now),
            State::Collecting { results, .. } => {
                results.entry(i).or_insert(None);
                self.check_verdicts(now);
            }
            _ => {}
        }
    }

    /// A whole control message from `conn`.
    pub fn handle_message(&mut self, now: Instant, conn: ConnId, msg: Message) {
        let Some(c) = self.conns.get(&conn) else {
            self.stats.unexpected += 1;
            return;
        };
        if c.refused || self.is_terminal() {
            return;
        }
        let member = c.member;
        match msg {
            Message::Join(j) => self.on_join(now, conn, member, j),
            Message::Invitation(token) => {
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                let valid = self
                    .cfg
                    .invitations
                    .as_ref()
                    .is_none_or(|k| k.admits(self.cfg.mcst_id, c.peer, &token));
                if member.is_some() || !valid {
                    self.stats.uninvited += 1;
                    self.refuse(conn);
                } else {
                    c.invited = true;
                }
            }
            Message::Confirm(conf) => match &mut self.state {
                State::Registering { ctl, .. } if member.is_some() => {
                    ctl.handle_confirmation(now, &conf);
                    self.pump_registration(now);
                }
                // A refresh's confirmation: the member is reachable through the tree.
                _ => match member {
                    Some(i)
                        if conf.mcst_id == self.cfg.mcst_id
                            && conf.ip == self.members[i].1.ip
                            && conf.qpn == self.members[i].1.qpn =>
                    {
                        self.unconfirmed_refreshes[i] = 0;
                        self.confirmed_since_refresh = true;
                        self.stats.refresh_confirmations += 1;
                    }
                    _ => self.stats.late_confirmations += 1,
                },
            },
            Message::Ready => {
                let Some(i) = member else {
                    return self.fail(SessionError::Protocol(format!(
                        "{} sent Ready before Join",
                        self.peer_name(conn)
                    )));
                };
                match &mut self.state {
                    State::OverlaySetup { ready, .. } | State::Announced { ready, .. } => {
                        if !ready.insert(i) {
                            self.stats.duplicate_ready += 1;
                        }
                        self.check_ready(now);
                    }
                    _ => self.stats.unexpected += 1,
                }
            }
            Message::Holding(h) => {
                let Some(i) = member else {
                    return self.fail(SessionError::Protocol(format!(
                        "{} sent Holding before Join",
                        self.peer_name(conn)
                    )));
                };
                let (seq, bytes) = (self.seq, self.buffer_bytes);
                match &mut self.state {
                    State::OverlaySetup {
                        resume: Some(_),
                        holding,
                        ..
                    } if h.seq == seq => {
                        if h.bytes > bytes {
                            let who = self.peer_name(conn);
                            return self.fail(SessionError::Protocol(format!(
                                "{who} holds {} bytes of a {bytes}-byte buffer",
                                h.bytes
                            )));
                        }
                        holding.insert(i, h.bytes);
                    }
                    _ => self.stats.unexpected += 1,
                }
            }
            Message::Result(r) => {
                let Some(i) = member else {
                    return self.fail(SessionError::Protocol(format!(
                        "{} sent Result before Join",
                        self.peer_name(conn)
                    )));
                };
                match &mut self.state {
                    State::Collecting { results, .. } => {
                        if let Entry::Vacant(slot) = results.entry(i) {
                            slot.insert(Some(r));
                            self.check_verdicts(now);
                        } else {
                            self.stats.duplicate_results += 1;
                        }
                    }
                    // A member that holds the buffer before the leader saw its own
                    // transfer complete (SEND completes at the member first), or,
                    // after a reroute where every member held the whole buffer
                    // (`Holding`), one that answers right after its `Ready`.
                    State::Transferring
                    | State::Announced {
                        resume: Some(_), ..
                    } => {
                        if let Entry::Vacant(slot) = self.early_results.entry(i) {
                            slot.insert(r);
                        } else {
                            self.stats.duplicate_results += 1;
                        }
                    }
                    _ => self.stats.unexpected += 1,
                }
            }
            Message::Params(_)
            | Message::Done(_)
            | Message::Overlay(_)
            | Message::Announce(_)
            | Message::Close(_)
            | Message::Evicted(_)
            | Message::Resume(_) => {
                let name = msg.message_type().name();
                self.fail(SessionError::Protocol(format!(
                    "{} sent {name}, which only a leader sends",
                    self.peer_name(conn)
                )));
            }
        }
    }

    fn on_join(
        &mut self,
        now: Instant,
        conn: ConnId,
        member: Option<usize>,
        j: crate::wire::group_control::Join,
    ) {
        if member.is_some() {
            return self.fail(SessionError::Protocol(format!(
                "{} joined twice",
                self.peer_name(conn)
            )));
        }
        if !matches!(self.state, State::Discovering { .. }) {
            self.stats.unexpected += 1;
            return;
        }
        // The Join's address goes into MRP as the member's, where the switch sends
        // its copies: it must be the address the connection came from.
        if self.conns.get(&conn).map(|c| c.peer) != Some(j.ip) {
            self.stats.refused_joins += 1;
            return self.refuse(conn);
        }
        if self.cfg.invitations.is_some() && !self.conns.get(&conn).is_some_and(|c| c.invited) {
            self.stats.uninvited += 1;
            return self.refuse(conn);
        }
        if j.ip == self.cfg.local || self.members.iter().any(|(_, m)| m.ip == j.ip) {
            return self.fail(SessionError::Protocol(format!(
                "member {} joined twice (or claims the leader's address)",
                j.ip
            )));
        }
        let record = MrpMember {
            ip: j.ip,
            qpn: j.qpn,
            region: self.cfg.params.write.then_some((j.va, j.rkey)),
        };
        let i = self.members.len();
        self.members.push((conn, record));
        self.unconfirmed_refreshes.push(0);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.member = Some(i);
        }
        if self.members.len() == self.cfg.members {
            self.discovered(now);
        }
    }

    /// Every member joined: connections that did not join are refused, then the group
    /// registers with the switch or goes to the configured overlay.
    fn discovered(&mut self, now: Instant) {
        let stragglers: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.member.is_none() && !c.refused)
            .map(|(id, _)| *id)
            .collect();
        for id in stragglers {
            self.stats.refused_connections += 1;
            self.refuse(id);
        }
        if let Some(plan) = self.cfg.overlay {
            return self.use_overlay(now, plan, OverlayReason::Configured);
        }
        let me = MrpMember {
            ip: self.cfg.local,
            qpn: self.cfg.local_qpn,
            region: self.cfg.params.write.then_some(self.cfg.local_region),
        };
        let members = self.members.iter().map(|(_, m)| *m).collect();
        let spec = match GroupSpec::in_space(self.cfg.group_space, self.cfg.mcst_id, me, members) {
            Ok(s) => s,
            Err(e) => return self.fail(SessionError::Registration(e.to_string())),
        };
        let mut ctl = Box::new(
            RegistrationController::new(spec, self.cfg.registration)
                .with_payload_limit(self.cfg.mrp_payload_limit),
        );
        ctl.start(now);
        self.switch_state = true;
        self.state = State::Registering { ctl, started: now };
        self.pump_registration(now);
    }

    /// Moves the controller's MRP packets to the outbox and acts on its outcome.
    fn pump_registration(&mut self, now: Instant) {
        let State::Registering { ctl, started } = &mut self.state else {
            return;
        };
        let started = *started;
        while let Some(p) = ctl.poll_mrp() {
            self.outbox.push_back((SessionDest::Mrp, Outgoing::Mrp(p)));
        }
        match ctl.poll_event() {
            None => {}
            Some(RegistrationEvent::Registered { at }) => {
                self.events.push_back(LeaderEvent::Registered {
                    took: at.saturating_since(started),
                });
                self.next_refresh = self.cfg.refresh.map(|r| now + r);
                self.unconfirmed_refreshes.fill(0);
                self.confirmed_since_refresh = true;
                self.go_idle();
            }
            Some(RegistrationEvent::Failed(f)) => {
                self.release_switch();
                let plan = self.cfg.fallback;
                self.use_overlay(now, plan, OverlayReason::RegistrationFailed(f));
            }
        }
    }

    fn go_idle(&mut self) {
        self.state = State::Idle;
        self.events.push_back(LeaderEvent::Up);
    }

    fn use_overlay(&mut self, now: Instant, plan: OverlayPlan, reason: OverlayReason) {
        let mut roster = vec![self.cfg.local];
        roster.extend(self.live().map(|i| self.members[i].1.ip));
        if roster.len() > OVERLAY_MAX_RANKS {
            return self.fail(SessionError::Protocol(format!(
                "overlay groups hold at most {OVERLAY_MAX_RANKS} ranks"
            )));
        }
        self.overlay = true;
        self.send_to_members(&Message::Overlay(Overlay {
            scheme: plan.scheme.code(),
            block_bytes: plan.block_bytes,
            rate_mbps: plan.rate_mbps,
            window: plan.window,
            roster: roster.clone(),
        }));
        self.events.push_back(LeaderEvent::UseOverlay {
            plan,
            roster,
            reason,
        });
        self.state = State::OverlaySetup {
            deadline: now + self.cfg.ready_timeout,
            ready: BTreeSet::new(),
            resume: None,
            holding: BTreeMap::new(),
        };
    }

    fn check_ready(&mut self, now: Instant) {
        let all_ready = |ready: &BTreeSet<usize>| self.live().all(|i| ready.contains(&i));
        match &self.state {
            State::OverlaySetup {
                ready,
                resume: Some(acked),
                holding,
                ..
            } if all_ready(ready) => {
                // The overlay is up mid-buffer: the members post receives for the rest,
                // from the lowest prefix any member holds (the switch may have
                // delivered more than the aggregated ACK said when the path was cut).
                let held = |i: usize| holding.get(&i).copied().unwrap_or(*acked).max(*acked);
                self.resume_holding = self
                    .live()
                    .map(|i| (self.members[i].1.ip, held(i)))
                    .collect();
                let offset = self
                    .resume_holding
                    .iter()
                    .map(|&(_, h)| h)
                    .min()
                    .unwrap_or(*acked);
                self.send_to_members(&Message::Resume(Resume {
                    seq: self.seq,
                    offset,
                }));
                self.state = State::Announced {
                    deadline: now + self.cfg.ready_timeout,
                    ready: BTreeSet::new(),
                    resume: Some(offset),
                };
            }
            State::OverlaySetup { ready, .. } if all_ready(ready) => self.go_idle(),
            State::Announced { ready, resume, .. } if all_ready(ready) => {
                let resume = *resume;
                self.state = State::Transferring;
                self.transfer_progress = Some(now);
                // Refresh at the transfer's pace from now on.
                if let (Some(next), Some(r)) = (self.next_refresh, self.refresh_period()) {
                    self.next_refresh = Some(next.min(now + r));
                }
                if let (Some(m), false) = (self.monitor.as_mut(), self.overlay) {
                    m.handle_busy(now);
                }
                self.events.push_back(match resume {
                    None => LeaderEvent::Transfer { seq: self.seq },
                    Some(offset) => LeaderEvent::ResumeTransfer {
                        seq: self.seq,
                        offset,
                        holding: std::mem::take(&mut self.resume_holding),
                    },
                });
            }
            _ => {}
        }
    }

    /// Announces the next buffer (`bytes` long, SHA-256 `sha256`) to every member.
    /// Returns its sequence number; errors, changing nothing, unless the group is idle
    /// and the size is within `1..=capacity`.
    pub fn start_buffer(
        &mut self,
        now: Instant,
        bytes: u64,
        sha256: [u8; 32],
    ) -> Result<u32, SessionError> {
        if !matches!(self.state, State::Idle) {
            return Err(SessionError::Protocol(format!(
                "a buffer cannot start while the group is {:?}",
                self.phase()
            )));
        }
        if bytes == 0 || bytes > self.cfg.params.capacity {
            return Err(SessionError::Protocol(format!(
                "a buffer of {bytes} bytes: the group carries 1..={} per send",
                self.cfg.params.capacity
            )));
        }
        self.seq += 1;
        self.sha256 = sha256;
        self.buffer_bytes = bytes;
        self.early_results.clear();
        self.send_to_members(&Message::Announce(Announce {
            seq: self.seq,
            bytes,
            sha256,
        }));
        self.state = State::Announced {
            deadline: now + self.cfg.ready_timeout,
            ready: BTreeSet::new(),
            resume: None,
        };
        Ok(self.seq)
    }

    /// Payload of the current buffer acknowledged by every member (the switch
    /// aggregates ACKs): fed to the safeguard.
    pub fn handle_acked(&mut self, now: Instant, bytes: u64) {
        if !matches!(self.state, State::Transferring) {
            self.stats.unexpected += 1;
            return;
        }
        self.transfer_progress = Some(now);
        if let (Some(m), false) = (self.monitor.as_mut(), self.overlay) {
            m.handle_acked(now, bytes);
            self.take_safeguard_decision();
        }
    }

    /// A decision while the buffer is in flight through the switch moves the rest of
    /// it to the overlay (`Reroute`); one taken as it completes applies to the next.
    fn take_safeguard_decision(&mut self) {
        if let Some(d) = self.monitor.as_mut().and_then(|m| m.poll_event()) {
            self.decide_fallback(OverlayReason::Safeguard(d));
        }
    }

    /// The group leaves the switch for `reason`: mid-buffer through `Reroute`, or
    /// after the buffer (the first reason decided is the one reported).
    fn decide_fallback(&mut self, reason: OverlayReason) {
        if self.pending_fallback.is_none()
            && matches!(self.state, State::Transferring)
            && !self.overlay
        {
            self.events
                .push_back(LeaderEvent::Reroute { seq: self.seq });
        }
        self.pending_fallback.get_or_insert(reason);
    }

    /// The switch path failed under the buffer in flight (the source's QP went to
    /// error, its retries spent): like a safeguard decision, the rest of the buffer
    /// moves to the overlay (`Reroute`, then [`Self::handle_transfer_cut`]). Counted
    /// as unexpected, changing nothing, unless a buffer is in flight through the
    /// switch.
    pub fn handle_path_failed(&mut self, _now: Instant, why: String) {
        if !matches!(self.state, State::Transferring) || self.overlay {
            self.stats.unexpected += 1;
            return;
        }
        self.decide_fallback(OverlayReason::PathFailed(why));
    }

    /// The safeguard asked for a reroute and is waiting for the driver's cut.
    pub fn rerouting(&self) -> bool {
        matches!(self.state, State::Transferring)
            && !self.overlay
            && self.pending_fallback.is_some()
    }

    /// After `Reroute`: the driver stopped sending through the switch, and every
    /// member acknowledged the buffer's first `acked` bytes (a whole number of
    /// messages: RC completes in order). The switch is released, the members set up
    /// the overlay, say how much of the buffer they hold (`Holding`; a member may hold
    /// more than every member acknowledged) and hear `Resume { offset }` from the
    /// lowest of those holdings (at least `acked`), and once every one is ready
    /// again `ResumeTransfer` hands the rest to the driver. The buffer's verdicts
    /// then cover all of it. Errors, changing nothing, when no reroute is pending or
    /// `acked` is not below the buffer's size.
    pub fn handle_transfer_cut(&mut self, now: Instant, acked: u64) -> Result<(), SessionError> {
        if !self.rerouting() {
            return Err(SessionError::Protocol("no reroute is pending".into()));
        }
        if acked >= self.buffer_bytes {
            return Err(SessionError::Protocol(format!(
                "a cut at {acked} of a {}-byte buffer leaves nothing to resume",
                self.buffer_bytes
            )));
        }
        if let Some(m) = self.monitor.as_mut() {
            m.handle_idle(now);
        }
        let reason = self.pending_fallback.take().expect("rerouting");
        self.early_results.clear();
        self.release_switch();
        let plan = self.cfg.fallback;
        self.use_overlay(now, plan, reason);
        if let State::OverlaySetup { resume, .. } = &mut self.state {
            *resume = Some(acked);
        }
        Ok(())
    }

    /// The driver finished sending the current buffer: `Ok` when every message
    /// completed, `Err(why)` (a [`SessionError::Transfer`]) when the data path failed
    /// (the group fails with it).
    pub fn handle_transfer_done(&mut self, now: Instant, result: Result<(), SessionError>) {
        if !matches!(self.state, State::Transferring) {
            self.stats.unexpected += 1;
            return;
        }
        if let (Some(m), false) = (self.monitor.as_mut(), self.overlay) {
            m.handle_idle(now);
            self.take_safeguard_decision();
        }
        if let Err(why) = result {
            return self.fail(why);
        }
        if self.cfg.params.write && !self.overlay {
            // WRITEs complete nothing at a member: tell them the region holds it.
            self.send_to_members(&Message::Done(Done { seq: self.seq }));
        }
        let results = std::mem::take(&mut self.early_results)
            .into_iter()
            .map(|(i, r)| (i, Some(r)))
            .collect();
        self.state = State::Collecting {
            deadline: now + self.cfg.verdict_timeout,
            results,
        };
        self.check_verdicts(now);
    }

    fn check_verdicts(&mut self, now: Instant) {
        let State::Collecting { results, .. } = &self.state else {
            return;
        };
        if self.live().all(|i| results.contains_key(&i)) {
            self.finish_buffer(now);
        }
    }

    /// Every member answered or the deadline passed: the buffer's outcome, then the
    /// safeguard's fallback if it fired, else idle.
    fn finish_buffer(&mut self, now: Instant) {
        let State::Collecting { results, .. } = std::mem::replace(&mut self.state, State::Idle)
        else {
            return;
        };
        let verdicts: Vec<MemberVerdict> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, (_, m))| {
                let result = results.get(&i).copied().flatten();
                MemberVerdict {
                    ip: m.ip,
                    result,
                    ok: !self.evicted.contains(&i)
                        && result.is_some_and(|r| r.ok && r.sha256 == self.sha256),
                }
            })
            .collect();
        let ok = verdicts
            .iter()
            .enumerate()
            .all(|(i, v)| v.ok || self.evicted.contains(&i));
        self.all_ok &= ok;
        self.events
            .push_back(LeaderEvent::BufferDone(BufferOutcome {
                seq: self.seq,
                sha256: self.sha256,
                verdicts,
                evicted: self.evicted_ips(),
                ok,
            }));
        match self.pending_fallback.take() {
            Some(reason) if !self.overlay => {
                self.release_switch();
                let plan = self.cfg.fallback;
                self.use_overlay(now, plan, reason);
            }
            _ => self.go_idle(),
        }
    }

    /// A switch refused the group (its report arrived on the MRP port).
    pub fn handle_switch_report(&mut self, now: Instant, report: SwitchReport) {
        match &mut self.state {
            State::Registering { ctl, .. } => {
                ctl.handle_switch_report(now, report);
                self.pump_registration(now);
            }
            _ => self.stats.late_switch_reports += 1,
        }
    }

    /// Ends the group: every member hears `Close { ok }` with `ok` only if the
    /// application says so and every buffer was intact at every member (the outcome
    /// seen by all), and the switch frees the group. Returns that outcome. From any
    /// state but `Idle`, and with a buffer in flight, the close says `ok: false`.
    pub fn close(&mut self, _now: Instant, ok: bool) -> Result<bool, SessionError> {
        if self.is_terminal() {
            return Err(SessionError::Protocol("the group has already ended".into()));
        }
        let ok = ok && self.all_ok && matches!(self.state, State::Idle);
        self.close_all(ok);
        self.release_switch();
        self.state = State::Closed;
        self.events.push_back(LeaderEvent::Closed { ok });
        Ok(ok)
    }

    /// The next deadline: discovery, the registration's resend, members' `Ready`,
    /// verdicts, or the safeguard's next check while transferring.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let state = self.state_timeout();
        match (state, self.refresh_due_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How often the registration is refreshed now: `refresh`, or a quarter of it
    /// while a buffer is in flight through the switch, so that a member cut off
    /// mid-transfer misses [`UNREACHABLE_REFRESHES`] of them well within the QP's retry
    /// budget (four MRP packets a second with the default).
    fn refresh_period(&self) -> Option<Duration> {
        let r = self.cfg.refresh?;
        Some(match self.state {
            State::Transferring if !self.overlay => {
                Duration::from_ps((r.as_ps() / TRANSFER_REFRESH_DIVISOR).max(1))
            }
            _ => r,
        })
    }

    /// The next registration refresh, while the group is registered with the switch.
    fn refresh_due_at(&self) -> Option<Instant> {
        if self.overlay || self.is_terminal() || !self.switch_state {
            return None;
        }
        match self.state {
            State::Discovering { .. } | State::Registering { .. } => None,
            _ => self.next_refresh,
        }
    }

    /// Resends the registration of the members still in the group (idempotent at a
    /// switch that holds it; a restarted switch learns the group from it).
    ///
    /// First, while a transfer through the switch has stalled for [`STALLED_AFTER`],
    /// members that left the last [`UNREACHABLE_REFRESHES`] refreshes unconfirmed are
    /// evicted as unreachable, provided another member confirmed at least two
    /// refreshes more recently (so the refreshes do reach the tree: after a switch
    /// restart, or with the leader's own link down, nobody confirms and nobody is
    /// evicted).
    fn refresh(&mut self, now: Instant) {
        self.next_refresh = self.refresh_period().map(|r| now + r);
        let live: Vec<usize> = self.live().collect();
        let stalled = matches!(self.state, State::Transferring)
            && self
                .transfer_progress
                .is_some_and(|t| now.saturating_since(t) >= STALLED_AFTER);
        if stalled {
            for &i in &live {
                let missed = self.unconfirmed_refreshes[i];
                // Two refreshes of slack: on a busy host a confirmation may come a
                // refresh or two late.
                let fresher = live
                    .iter()
                    .any(|&j| j != i && self.unconfirmed_refreshes[j] + 2 <= missed);
                if missed >= UNREACHABLE_REFRESHES && fresher {
                    let why = format!(
                        "unreachable: the last {missed} registration refreshes unconfirmed"
                    );
                    self.evict_alive(now, i, why);
                }
            }
            if self.is_terminal() {
                return;
            }
        }
        // A refresh interval in which nobody confirmed anything counts against nobody:
        // the switch, the leader's link or the leader's host stalled, not a member.
        // Without this, a switch descheduled for seconds left every member several
        // refreshes behind, and whichever member's backlog of confirmations drained
        // last was evicted by the first refresh after it resumed (measured in the
        // lab beside two busy simulators: 2–4 of 7 members evicted, none cut off).
        if std::mem::replace(&mut self.confirmed_since_refresh, false) {
            for i in self.live().collect::<Vec<_>>() {
                self.unconfirmed_refreshes[i] = self.unconfirmed_refreshes[i].saturating_add(1);
            }
        }
        let me = MrpMember {
            ip: self.cfg.local,
            qpn: self.cfg.local_qpn,
            region: self.cfg.params.write.then_some(self.cfg.local_region),
        };
        let members = self.live().map(|i| self.members[i].1).collect();
        let Ok(spec) = GroupSpec::in_space(self.cfg.group_space, self.cfg.mcst_id, me, members)
        else {
            return;
        };
        self.stats.refreshes += 1;
        for p in spec.mrp_packets_within(self.cfg.mrp_payload_limit) {
            self.outbox.push_back((SessionDest::Mrp, Outgoing::Mrp(p)));
        }
    }

    fn state_timeout(&self) -> Option<Instant> {
        match &self.state {
            State::Discovering { deadline }
            | State::OverlaySetup { deadline, .. }
            | State::Announced { deadline, .. }
            | State::Collecting { deadline, .. } => Some(*deadline),
            State::Registering { ctl, .. } => ctl.poll_timeout(),
            State::Transferring if !self.overlay => {
                self.monitor.as_ref().and_then(|m| m.poll_timeout())
            }
            _ => None,
        }
    }

    /// Lets the deadlines fire. Each moves the session on, so it fires once.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.refresh_due_at().is_some_and(|t| now >= t) {
            self.refresh(now);
        }
        match &mut self.state {
            State::Discovering { deadline } if now >= *deadline => {
                let joined = self.members.len();
                let want = self.cfg.members;
                self.fail(SessionError::Timeout(format!(
                    "{joined} of {want} members joined"
                )));
            }
            State::Registering { ctl, .. } => {
                let _ = ctl.handle_timeout(now);
                self.pump_registration(now);
            }
            // Through the switch, members that never answered are evicted when
            // others did (a member that hangs must not hold the group).
            State::Announced {
                deadline, ready, ..
            } if now >= *deadline && !self.overlay && !ready.is_empty() => {
                let ready = ready.clone();
                let late: Vec<usize> = self.live().filter(|i| !ready.contains(i)).collect();
                for i in late {
                    self.evict_alive(now, i, "never became ready".into());
                }
            }
            State::OverlaySetup { deadline, .. } | State::Announced { deadline, .. }
                if now >= *deadline =>
            {
                self.fail(SessionError::Timeout("members never became ready".into()));
            }
            State::Collecting { deadline, .. } if now >= *deadline => self.finish_buffer(now),
            State::Transferring if !self.overlay => {
                if let Some(m) = self.monitor.as_mut() {
                    m.handle_timeout(now);
                }
                self.take_safeguard_decision();
            }
            _ => {}
        }
    }

    /// The next output: a control frame for a member, or an MRP packet or release for
    /// the switch (`buf` should hold [`MAX_TRANSMIT_LEN`](super::MAX_TRANSMIT_LEN)).
    pub fn poll_transmit(
        &mut self,
        _now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit<SessionDest>> {
        transmit_from(&mut self.outbox, buf, &mut self.stats.unemittable)
    }

    pub fn poll_event(&mut self) -> Option<LeaderEvent> {
        self.events.pop_front()
    }

    /// Whether [`Self::poll_event`] has something: a driver skips its wait for input
    /// then (what the last input decided is acted on at once, not after the wait).
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }
}
