//! The multicast API on real sockets: a group's leader sends a buffer by
//! SEND or RDMA WRITE to every member through a Cepheus switch (`rocast switch`), each
//! member receives it, and the close reports success or failure to all, as in RDMC.
//!
//! Every protocol decision is the core's: the group's control lifecycle is
//! [`LeaderSession`] / [`MemberSession`] (`rocast_core::control::session`: discovery,
//! MRP registration per Cepheus §III-C, the fallback to an overlay per §V-D, each
//! buffer's announcement and verdicts, the close with the outcome seen by all), the
//! queue pairs are [`RcQueuePair`]s on [`Endpoint`]s, the overlay schedules are
//! [`BroadcastDriver`]s, and the switch runs `rocast_core::switch::FrameSwitch`.
//! This module is their driver and nothing more:
//!
//! - **The driver loop** ([`Leader`]'s and [`Member`]'s `step`): read what the sockets
//!   hold and feed the session (control bytes per connection, MRP packets, switch
//!   reports, closed connections), let its deadlines fire, send its transmits, then
//!   wait until a socket is readable or the session's next deadline (at most 1 ms, so
//!   the QPs answer retransmissions). The callers act on the session's events: accept
//!   the group's path (the switch QP, or an overlay's QPs as rank r), post receives,
//!   run the transfer, report verdicts. Nothing here decides when a group is up, has
//!   failed or is over.
//! - **Control channel** (TCP, the leader's `control_port`): the messages and framing
//!   of [`rocast_core::wire::group_control`] (its module docs have the byte layouts);
//!   the sessions decode and emit them, the driver carries bytes.
//! - **MRP** (UDP [`MRP_UDP_PORT`]): the leader's session emits the registration and the
//!   release toward the McstID; the switch delivers each member's record to the
//!   member's own address; a refusing switch answers with a [`SwitchReport`].
//! - **Data** (UDP 4791): every member's QP is connected to the group's virtual remote
//!   (McstID, QPN 1) with PSN 0; the leader's too. The transfer loops
//!   (`cepheus_send`, the member's receive, `run_overlay`) are the driver's: the
//!   session says when to start and hears how it ended.
//!
//! Memory: the leader holds the buffer once (posted messages share it); a member holds
//! the whole message (its receive buffers or its WRITE region); the sessions add about
//! a kilobyte per control connection (see `control::session`).
//!
//! If the switch refuses the group (or never answers), the session falls back to the
//! leader's `fallback` overlay (RDMC's binomial pipeline by default) over the same
//! host runtime: it frees the switch's state, sends every member `Overlay`, and the
//! buffers travel over per-peer RC connections; [`LeaderReport::path`] says which way
//! the data went and why.

use crate::endpoint::{Clock, Endpoint};
use crate::perf::{CpuMeter, CpuUse};
use crate::qp_set::QpSet;
use crate::udp::{TransportConfig, UdpTransport};
use rocast_core::control::invitation::{InvitationKey, INVITATION_LEN};
use rocast_core::control::registration::{RegistrationConfig, SwitchReport};
use rocast_core::control::safeguard::SafeguardConfig;
use rocast_core::control::session::{
    BufferOutcome, ConnId, LeaderEvent, LeaderPhase, LeaderSession, LeaderSessionConfig,
    MemberEvent as SessionEvent, MemberSession, MemberSessionConfig, OverlayPlan, SessionDest,
    SessionError, MAX_TRANSMIT_LEN,
};
use rocast_core::fabric::cepheus::{GroupAddressSpace, VIRTUAL_QPN};
use rocast_core::overlay::{
    BlockOp, Channel, DriverConfig, GroupOutcome, OverlayRank, OverlayRankConfig, Scheme,
};
use rocast_core::rnic::{Event, Payload, QpConfig, QpStats, RcQueuePair, SendOp, SendRequest};
use rocast_core::rnic::{FixedRate, RateController, Unlimited};
use rocast_core::time::Duration as CoreDuration;
use rocast_core::wire::group_control::{Params, GROUP_CONTROL_PORT};
use rocast_core::wire::mrp::{MrpRepr, MRP_MAX_PAYLOAD, MRP_UDP_PORT};
use rocast_core::wire::mrp_auth::{
    open_if_keyed, seal_if_keyed, FabricKey, MrpCounter, MRP_AUTH_TRAILER_LEN,
};
use rocast_core::wire::{Ipv4Address, ROCEV2_UDP_PORT};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

/// The control channel's default TCP port.
pub const CONTROL_PORT: u16 = GROUP_CONTROL_PORT;
/// The WRITE region's VA at every member (any value works; the switch rewrites RETHs).
const MEMBER_VA: u64 = 0x1000_0000;

/// SEND or RDMA WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McastOp {
    Send,
    Write,
}

/// What went wrong, in words a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum McastError {
    #[error("{0}")]
    Io(String),
    #[error("registration failed: {0}")]
    Registration(String),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("transfer failed: {0}")]
    Transfer(String),
    #[error("timed out: {0}")]
    Timeout(String),
}

fn io(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> McastError {
    move |e| McastError::Io(format!("{what}: {e}"))
}

/// The leader's side.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub local: Ipv4Addr,
    pub mcst_id: Ipv4Addr,
    pub group_space: GroupAddressSpace,
    /// Members to wait for (not counting the leader).
    pub members: usize,
    pub op: McastOp,
    /// The data is cut into messages of at most this many bytes.
    pub message_bytes: usize,
    /// The largest buffer one send may carry: members size their WRITE region (and
    /// check announced sends) by it.
    pub capacity: usize,
    pub control_port: u16,
    pub mtu: usize,
    /// Pace the leader's QP at this rate (an RNIC sends at its line rate; a software
    /// endpoint on a shaped link must pace, or its window sits in the kernel's queue
    /// longer than the retransmission timeout). None: as fast as the window allows.
    pub rate_bps: Option<u64>,
    /// Use this overlay broadcast instead of the switch (the baselines). None: the
    /// switch, falling back to `fallback` if registration fails.
    pub overlay: Option<Scheme>,
    /// The overlay to run when the switch refuses the group (RDMC's binomial pipeline).
    pub fallback: Scheme,
    /// Block size of the overlay schedules.
    pub block_bytes: usize,
    /// Sends an overlay rank keeps in flight (RDMC: 1; more keeps small blocks
    /// flowing), 1..=255.
    pub window: u8,
    /// The fabric key: MRP this leader sends is sealed with it, and switch reports
    /// must carry a valid seal ([`rocast_core::wire::mrp_auth`]). None: plain MRP.
    pub fabric_key: Option<FabricKey>,
    /// Admit only members presenting an invitation minted with this key
    /// ([`rocast_core::control::invitation`]). None: anyone may join.
    pub invitations: Option<InvitationKey>,
    /// Cepheus §V-D's safeguard: fall back to `fallback` when the acknowledged rate
    /// of a buffer stays below this fraction of `rate_bps` (the pacing rate, or 1 Gbit/s
    /// unpaced); the switch of paths happens after the buffer it watched. None: off.
    pub safeguard: Option<f64>,
    /// How often the registration is refreshed while the group is idle (a quarter of
    /// it while a buffer is in flight): what renews the switch's lease, and what a
    /// restarted switch learns the group back from.
    pub refresh: Duration,
    pub timeout: Duration,
}

/// A member's side.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    pub local: Ipv4Addr,
    pub leader: Ipv4Addr,
    pub mcst_id: Ipv4Addr,
    pub group_space: GroupAddressSpace,
    pub control_port: u16,
    pub mtu: usize,
    pub timeout: Duration,
    /// The invitation token to present (when the leader requires invitations).
    pub invitation: Option<[u8; INVITATION_LEN]>,
}

/// How the transfer went, at the leader.
#[derive(Clone, Debug)]
pub struct LeaderReport {
    pub bytes: u64,
    pub crc32: u32,
    pub registration: Duration,
    /// From the first post to the last completion.
    pub transfer: Duration,
    /// Each member's (IP, whether its CRC matched).
    pub members: Vec<(Ipv4Addr, bool)>,
    pub retransmitted: u64,
    /// How the data travelled: "cepheus", or the overlay scheme's name (with
    /// " (fallback: …)" when the switch refused the group).
    pub path: String,
    /// From the first post until the last member held the whole message (members
    /// report their completion on the shared monotonic clock); None if one failed.
    pub latency: Option<Duration>,
    /// Per member (join order): from the first post until it held the whole message,
    /// when it reported on this machine's clock.
    pub held: Vec<(Ipv4Addr, Option<Duration>)>,
    /// Members evicted so far (their connection broke, or they never became ready):
    /// the group went on without them.
    pub evicted: Vec<Ipv4Addr>,
    /// The leader's CPU time (user + system, its thread) during the transfer, and the
    /// datagrams its data socket sent and received meanwhile (data, ACKs, NAKs).
    pub cpu: CpuUse,
}

impl LeaderReport {
    /// Bytes over the time from the first post until the last member held them
    /// ([`latency`](Self::latency)): what the group got, not how fast the leader was
    /// done (an overlay's leader completes when its own peers hold the data, long
    /// before a chain's last member does). None when a member did not report.
    pub fn goodput_gbps(&self) -> Option<f64> {
        let t = self.latency?;
        Some(self.bytes as f64 * 8.0 / t.as_secs_f64().max(1e-9) / 1e9)
    }
    /// Every member still in the group holds the buffer intact.
    pub fn all_ok(&self) -> bool {
        self.members
            .iter()
            .all(|m| m.1 || self.evicted.contains(&m.0))
    }
}

/// What a member received.
#[derive(Clone, Debug)]
pub struct MemberReport {
    /// The buffer's sequence number in the group (1, 2, … in the order the leader
    /// sent them: the `Announce` sequence of `wire::group_control`).
    pub seq: u32,
    pub data: Vec<u8>,
    pub crc32: u32,
    /// The leader's verdict (its CRC equals ours, and it completed).
    pub ok: bool,
    /// The safeguard moved the buffer to the overlay at this byte (the switch
    /// delivered the bytes below it).
    pub rerouted_at: Option<u64>,
    /// This member's CPU time (its thread) while it received the buffer, and the
    /// datagrams its data socket sent and received meanwhile (data, ACKs, relayed
    /// blocks).
    pub cpu: CpuUse,
}

/// Datagrams a data path's socket sent and received so far.
fn path_packets(t: Option<&crate::udp::TransportStats>) -> u64 {
    t.map_or(0, |t| t.tx_packets + t.rx_packets)
}

fn v4(a: Ipv4Addr) -> Ipv4Address {
    Ipv4Address(a.octets())
}

use crate::entropy::{random_psn, random_qpn};
use rocast_core::payload::{crc32, sha256};

impl From<SessionError> for McastError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Protocol(s) => McastError::Protocol(s),
            SessionError::Timeout(s) => McastError::Timeout(s),
            SessionError::Registration(s) => McastError::Registration(s),
            SessionError::Transfer(s) => McastError::Transfer(s),
            SessionError::Connection(s) => McastError::Io(s),
        }
    }
}

/// The longest the driver loop waits between looks at its QPs (they answer
/// retransmissions and late ACKs while the session waits on peers).
const MAX_WAIT: Duration = Duration::from_millis(1);

/// A non-blocking control connection: bytes in and out; the session frames them.
struct Control {
    s: TcpStream,
    peer: Ipv4Addr,
    /// EOF or an error was reported to the session: read no more.
    done: bool,
}

/// Bytes taken from the socket per read.
const CONTROL_READ_LEN: usize = 512;

/// What one look at a control socket found.
enum ControlRead {
    Bytes(Vec<u8>),
    /// The peer closed or the socket broke: the words for the session.
    Gone(String),
}

impl Control {
    fn new(s: TcpStream) -> io::Result<Self> {
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        let peer = match s.peer_addr()? {
            std::net::SocketAddr::V4(a) => *a.ip(),
            _ => Ipv4Addr::UNSPECIFIED,
        };
        Ok(Control {
            s,
            peer,
            done: false,
        })
    }

    /// Writes one frame. Small frames on a fresh socket: a blocking write is fine and
    /// simpler.
    fn write_frame(&mut self, f: &[u8]) -> io::Result<()> {
        self.s.set_nonblocking(false)?;
        let r = self.s.write_all(f);
        self.s.set_nonblocking(true)?;
        r
    }

    /// Whatever the socket holds now (nothing if it would block).
    fn read_available(&mut self) -> ControlRead {
        let mut got = Vec::new();
        let mut tmp = [0u8; CONTROL_READ_LEN];
        loop {
            match self.s.read(&mut tmp) {
                Ok(0) => {
                    if got.is_empty() {
                        return ControlRead::Gone(format!("{} closed the connection", self.peer));
                    }
                    // Hand over what came first; the EOF is seen on the next read.
                    return ControlRead::Bytes(got);
                }
                Ok(n) => {
                    got.extend_from_slice(&tmp[..n]);
                    if got.len() >= 64 * CONTROL_READ_LEN {
                        return ControlRead::Bytes(got);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ControlRead::Bytes(got),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return ControlRead::Gone(format!("{}: {e}", self.peer)),
            }
        }
    }
}

/// Waits until one of `fds` is readable or `timeout` passes.
fn wait_any(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags};
    let mut p: Vec<PollFd<'_>> = fds
        .iter()
        .map(|&fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
        .collect();
    // Whole milliseconds, rounded up, as poll(2) takes them.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i64;
    let t = rustix::time::Timespec {
        tv_sec: ms / 1000,
        tv_nsec: ms % 1000 * 1_000_000,
    };
    match rustix::event::poll(&mut p, Some(&t)) {
        Err(e) if e != rustix::io::Errno::INTR => Err(e.into()),
        _ => Ok(()),
    }
}

/// The group connection of a leader or member: an RC QP toward the group's virtual
/// remote (the McstID, QPN 1), numbered from the leader's random `start_psn`.
fn endpoint(
    local: Ipv4Addr,
    local_qpn: u32,
    mcst: Ipv4Addr,
    mtu: usize,
    rate_bps: Option<u64>,
    start_psn: u32,
    retry_limit: u8,
) -> Result<Endpoint, McastError> {
    let mut qp = rc_qp(
        local,
        local_qpn,
        mcst,
        VIRTUAL_QPN,
        mtu,
        rate_bps,
        retry_limit,
    )?;
    start_at(&mut qp, start_psn)?;
    let tcfg = TransportConfig {
        max_packet_len: qp.max_packet_len(),
        ..Default::default()
    };
    let t = UdpTransport::bind(local, &tcfg).map_err(io(format!("UDP {local}:4791")))?;
    Endpoint::new(qp, t, None).map_err(io("endpoint"))
}

fn mrp_socket(local: Ipv4Addr) -> Result<UdpSocket, McastError> {
    let s = UdpSocket::bind(SocketAddrV4::new(local, MRP_UDP_PORT))
        .map_err(io(format!("UDP {local}:{MRP_UDP_PORT}")))?;
    s.set_nonblocking(true).map_err(io("MRP socket"))?;
    Ok(s)
}

/// Nanoseconds since the Unix epoch: where MRP counters start, so a restarted sender
/// goes on above what it used before.
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}

/// A group address the switch allocated ([`allocate_group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupAddressGrant {
    pub mcst_id: Ipv4Addr,
    /// How long the switch holds it without a registration by this host.
    pub lease_ms: u32,
}

/// Asks the switch for a group address (`rocast mcast allocate`): an [`MrpAllocate`]
/// from `local`'s MRP port to the first address of `space` (the switch answers ARP for
/// the whole space), sealed with `key` when the fabric is keyed, sent up to four times
/// 250 ms apart. The answer must echo the request's nonce and, with a key, carry a
/// valid trailer from the address it allocated; anything else on the port is ignored.
/// A full switch answers `TableFull`: an error saying so.
pub fn allocate_group(
    local: Ipv4Addr,
    space: GroupAddressSpace,
    key: Option<&FabricKey>,
    lease_ms: u32,
) -> Result<GroupAddressGrant, McastError> {
    use rocast_core::wire::mrp::{MrpAllocate, MrpAllocation};
    let sock = mrp_socket(local)?;
    let to = space
        .nth(0)
        .ok_or_else(|| McastError::Registration("the group space is empty".into()))?;
    let nonce = wall_clock_ns() ^ (u64::from(std::process::id()) << 32);
    let req = MrpAllocate { nonce, lease_ms };
    let mut body = [0u8; rocast_core::wire::mrp::MRP_ALLOCATE_LEN];
    req.emit(&mut body);
    let mut counter = MrpCounter::starting_at(wall_clock_ns());
    let mut buf = [0u8; 2048];
    for _attempt in 0..4 {
        let datagram = seal_if_keyed(key, v4(local), &mut counter, &body);
        sock.send_to(
            &datagram,
            SocketAddrV4::new(Ipv4Addr::from(to.0), MRP_UDP_PORT),
        )
        .map_err(io("send the allocation request"))?;
        let deadline = StdInstant::now() + Duration::from_millis(250);
        while StdInstant::now() < deadline {
            let (n, from) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                Err(e) => return Err(io("the allocation answer")(e)),
            };
            let std::net::SocketAddr::V4(from) = from else {
                continue;
            };
            let Some(payload) = open_if_keyed(key, v4(*from.ip()), &buf[..n]) else {
                continue;
            };
            if let Ok(a) = MrpAllocation::parse(payload) {
                if a.answers(nonce, v4(*from.ip())) && space.contains(a.mcst_id) {
                    return Ok(GroupAddressGrant {
                        mcst_id: Ipv4Addr::from(a.mcst_id.0),
                        lease_ms: a.lease_ms,
                    });
                }
            } else if let Ok(r) = SwitchReport::parse(payload) {
                if r.mcst_id == Ipv4Address::UNSPECIFIED {
                    return Err(McastError::Registration(format!(
                        "switch {} has no group address left ({:?})",
                        r.switch, r.reason
                    )));
                }
            }
        }
    }
    Err(McastError::Registration(format!(
        "no allocation answer from the switch (sent to {to}:{MRP_UDP_PORT} four times, 1 s in all){}",
        if key.is_some() { "" } else { "; a keyed switch needs --fabric-key" }
    )))
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine (lab
/// namespaces included), so a member's completion time compares with the leader's
/// start.
pub fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// From the start of the transfer until the last member held everything, if all
/// reported on this machine's clock (a member in a VM has its own: its time is earlier
/// than our start, and no latency is claimed).
fn latency(t0_ns: u64, outcome: &BufferOutcome) -> Option<Duration> {
    let mut last = t0_ns;
    for v in &outcome.verdicts {
        let r = v.result?;
        if !v.ok || r.held_ns < t0_ns {
            return None;
        }
        last = last.max(r.held_ns);
    }
    Some(Duration::from_nanos(last - t0_ns))
}

/// How a group's data travels.
enum LeaderPath {
    /// Through the switch: one RC QP to (McstID, 1).
    Cepheus { ep: Endpoint },
    /// An overlay broadcast: one RC QP per schedule peer, on one socket.
    Overlay {
        set: QpSet,
        roster: Vec<Ipv4Addr>,
        scheme: Scheme,
        /// Why the switch was not used, when it was not configured away.
        why: String,
    },
    /// Between the two: the switch QP closed, the overlay not up yet.
    Detached,
}

impl LeaderPath {
    /// Lets the QPs answer what arrives (retransmissions, late ACKs).
    fn service(&mut self, clock: &Clock) {
        match self {
            LeaderPath::Cepheus { ep } => {
                let _ = ep.poll_once(clock);
            }
            LeaderPath::Overlay { set, .. } => {
                let _ = set.poll_once(clock);
            }
            LeaderPath::Detached => {}
        }
    }
}

/// A group, at its leader: created once (member discovery, registration or the
/// overlay), then any number of [`send`](Self::send)s, then [`close`](Self::close).
/// Dropping it without `close` ends the group as failed for every member.
pub struct Leader {
    cfg: LeaderConfig,
    session: LeaderSession,
    /// Accepts members until the group is up.
    listener: Option<TcpListener>,
    conns: BTreeMap<ConnId, Control>,
    next_conn: u32,
    mrp: UdpSocket,
    clock: Clock,
    path: LeaderPath,
    /// When the first MRP packet left.
    registration_start: Option<StdInstant>,
    registration: Duration,
    /// The counter of the MRP this leader seals (from the wall clock at creation).
    mrp_counter: MrpCounter,
    /// The current buffer went through the switch up to this byte, then the overlay.
    rerouted_at: Option<u64>,
    /// This leader's random QPN and start PSN on the switch connection.
    qpn: u32,
    start_psn: u32,
}

impl Leader {
    /// Waits for `members` to join, registers the group with the switch (MRP), and
    /// falls back to `cfg.fallback` when the switch refuses (or uses `cfg.overlay`).
    pub fn create(cfg: &LeaderConfig) -> Result<Leader, McastError> {
        let message_bytes = u32::try_from(cfg.message_bytes)
            .map_err(|_| McastError::Protocol("messages are at most 4 GiB - 1 bytes".into()))?;
        let block_bytes = u32::try_from(cfg.block_bytes)
            .map_err(|_| McastError::Protocol("blocks are at most 4 GiB - 1 bytes".into()))?;
        let plan = |scheme: Scheme| OverlayPlan {
            scheme,
            block_bytes,
            rate_mbps: (cfg.rate_bps.unwrap_or(0) / 1_000_000) as u32,
            window: cfg.window,
        };
        let clock = Clock::new();
        // Random per leader: what a stranger must guess to inject into the
        // group, and, with the switch's source guard, to forge its feedback.
        let leader_qpn = random_qpn();
        let start_psn = random_psn();
        let session_cfg = LeaderSessionConfig {
            local: v4(cfg.local),
            local_qpn: leader_qpn,
            local_region: (0, 0),
            mcst_id: v4(cfg.mcst_id),
            group_space: cfg.group_space,
            members: cfg.members,
            params: Params {
                write: cfg.op == McastOp::Write,
                capacity: cfg.capacity as u64,
                message_bytes,
                start_psn,
            },
            overlay: cfg.overlay.map(plan),
            fallback: plan(cfg.fallback),
            // A userspace switch and busy hosts answer in milliseconds, not microseconds.
            registration: RegistrationConfig {
                timeout: CoreDuration::from_ms(250),
                retries: 3,
            },
            safeguard: cfg.safeguard.map(|threshold| SafeguardConfig {
                threshold,
                ..SafeguardConfig::new(cfg.rate_bps.unwrap_or(1_000_000_000))
            }),
            discovery_timeout: core_duration(cfg.timeout),
            ready_timeout: core_duration(cfg.timeout),
            verdict_timeout: core_duration(cfg.timeout),
            refresh: Some(core_duration(cfg.refresh)),
            invitations: cfg.invitations.clone(),
            mrp_payload_limit: MRP_MAX_PAYLOAD
                - if cfg.fabric_key.is_some() {
                    MRP_AUTH_TRAILER_LEN
                } else {
                    0
                },
        };
        let session = LeaderSession::new(session_cfg, clock.now())?;
        let listener = TcpListener::bind(SocketAddrV4::new(cfg.local, cfg.control_port))
            .map_err(io(format!("TCP {}:{}", cfg.local, cfg.control_port)))?;
        listener.set_nonblocking(true).map_err(io("listener"))?;
        let mrp = mrp_socket(cfg.local)?;
        // The group's QP retries for the group's --timeout, as the overlay's do: a
        // group the whole machine's load holds back is slowed, not failed (under
        // parallel lab tests the fixed 5.1 s ran out); an unreachable member is
        // evicted long before (`UNREACHABLE_REFRESHES`).
        let ep = endpoint(
            cfg.local,
            leader_qpn,
            cfg.mcst_id,
            cfg.mtu,
            cfg.rate_bps,
            start_psn,
            retry_limit_for(cfg.timeout),
        )?;
        let mut leader = Leader {
            cfg: cfg.clone(),
            session,
            listener: Some(listener),
            conns: BTreeMap::new(),
            next_conn: 0,
            mrp,
            clock,
            path: LeaderPath::Cepheus { ep },
            registration_start: None,
            registration: Duration::ZERO,
            mrp_counter: MrpCounter::starting_at(wall_clock_ns()),
            rerouted_at: None,
            qpn: leader_qpn,
            start_psn,
        };
        loop {
            leader.step()?;
            while let Some(ev) = leader.session.poll_event() {
                match leader.act(ev)? {
                    Some(LeaderEvent::Up) => {
                        leader.listener = None;
                        return Ok(leader);
                    }
                    Some(ev) => return Err(unexpected(&ev)),
                    None => {}
                }
            }
        }
    }

    /// One turn of the driver loop: the control turn, the QPs serviced, then a wait
    /// for a readable socket or the next deadline.
    fn step(&mut self) -> Result<(), McastError> {
        self.control_turn()?;
        self.path.service(&self.clock);
        if self.session.has_event() {
            // What this turn's input decided (a Ready, a verdict) goes on now: waiting
            // first cost up to MAX_WAIT per control message, some 4 ms per buffer.
            return Ok(());
        }
        let wait = match self.session.poll_timeout() {
            Some(t) => MAX_WAIT.min(self.clock.until(self.clock.now(), t)),
            None => MAX_WAIT,
        };
        let mut fds: Vec<BorrowedFd<'_>> = vec![self.mrp.as_fd()];
        fds.extend(self.listener.as_ref().map(|l| l.as_fd()));
        fds.extend(self.conns.values().filter(|c| !c.done).map(|c| c.s.as_fd()));
        wait_any(&fds, wait).map_err(io("poll"))
    }

    /// The control plane's share of a turn, without waiting: sockets → session,
    /// deadlines, session → sockets. Runs between the data path's turns during a
    /// transfer too, so a member's broken connection is noticed (and the member
    /// evicted) while the buffer is in flight, and the registration refreshes go out.
    fn control_turn(&mut self) -> Result<(), McastError> {
        let now = self.clock.now();
        if let Some(l) = &self.listener {
            loop {
                match l.accept() {
                    Ok((s, from)) => {
                        // The group is IPv4: a peer on another family cannot join.
                        let std::net::SocketAddr::V4(from) = from else {
                            continue;
                        };
                        let c = Control::new(s).map_err(io("control"))?;
                        let id = ConnId(self.next_conn);
                        self.next_conn += 1;
                        self.conns.insert(id, c);
                        self.session
                            .handle_connected(now, id, Ipv4Address::from(*from.ip()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(io("accept")(e)),
                }
            }
        }
        for (&id, c) in self.conns.iter_mut() {
            if c.done {
                continue;
            }
            match c.read_available() {
                ControlRead::Bytes(b) => self.session.handle_stream(now, id, &b),
                ControlRead::Gone(why) => {
                    c.done = true;
                    self.session.handle_conn_error(now, id, &why);
                }
            }
        }
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = self.mrp.recv_from(&mut buf) {
            let std::net::SocketAddr::V4(from) = from else {
                continue;
            };
            // With a fabric key only a sealed report counts: a forged refusal would
            // push the group onto the overlay.
            let report = open_if_keyed(self.cfg.fabric_key.as_ref(), v4(*from.ip()), &buf[..n]);
            // Anything else on the MRP port (our own MRP looped back) is not for us.
            if let Some(r) = report.and_then(|b| SwitchReport::parse(b).ok()) {
                self.session.handle_switch_report(now, r);
            }
        }
        if self.session.poll_timeout().is_some_and(|t| t <= now) {
            self.session.handle_timeout(now);
        }
        self.flush();
        Ok(())
    }

    /// Sends everything the session has queued. A connection that fails a write is
    /// reported to the session (which decides what it means for the group).
    fn flush(&mut self) {
        let now = self.clock.now();
        let mut buf = [0u8; MAX_TRANSMIT_LEN];
        while let Some(t) = self.session.poll_transmit(now, &mut buf) {
            let frame = &buf[..t.len];
            match t.dest {
                SessionDest::Member(id) => {
                    let Some(c) = self.conns.get_mut(&id) else {
                        continue;
                    };
                    if c.done {
                        continue;
                    }
                    if let Err(e) = c.write_frame(frame) {
                        c.done = true;
                        let why = format!("send to {}: {e}", c.peer);
                        self.session.handle_conn_error(now, id, &why);
                    }
                }
                SessionDest::Mrp => {
                    self.registration_start.get_or_insert_with(StdInstant::now);
                    let datagram = seal_if_keyed(
                        self.cfg.fabric_key.as_ref(),
                        v4(self.cfg.local),
                        &mut self.mrp_counter,
                        frame,
                    );
                    // UDP: a lost datagram is the registration's resend's business.
                    let _ = self
                        .mrp
                        .send_to(&datagram, SocketAddrV4::new(self.cfg.mcst_id, MRP_UDP_PORT));
                }
                SessionDest::Leader => {}
            }
        }
    }

    /// Acts on a session event that changes the data path; hands back the others.
    fn act(&mut self, ev: LeaderEvent) -> Result<Option<LeaderEvent>, McastError> {
        match ev {
            LeaderEvent::Registered { .. } => {
                self.registration = self
                    .registration_start
                    .map_or(Duration::ZERO, |t| t.elapsed());
                Ok(None)
            }
            LeaderEvent::UseOverlay {
                plan,
                roster,
                reason,
            } => {
                if let Some(t) = self.registration_start {
                    if self.registration == Duration::ZERO {
                        self.registration = t.elapsed();
                    }
                }
                // The switch QP's socket must go before the overlay's binds the port.
                self.path = LeaderPath::Detached;
                let set = match overlay_qps(self.cfg.local, self.cfg.mtu) {
                    Ok(s) => s,
                    Err(e) => {
                        self.fail(e.to_string());
                        return Err(e);
                    }
                };
                self.path = LeaderPath::Overlay {
                    set,
                    roster: roster.iter().map(|a| Ipv4Addr::from(a.0)).collect(),
                    scheme: plan.scheme,
                    why: reason.describe(),
                };
                Ok(None)
            }
            LeaderEvent::Failed(e) => {
                self.flush();
                Err(e.into())
            }
            // The transfer loop watches `rerouting()`; the cut follows there.
            LeaderEvent::Reroute { .. } => Ok(None),
            LeaderEvent::MemberEvicted { ip, reason } => {
                let st = self.session.stats();
                eprintln!(
                    "rocast mcast: member {ip} evicted ({reason}); the group goes on \
                     (refreshes sent {}, confirmed {}, confirmed late {})",
                    st.refreshes, st.refresh_confirmations, st.late_confirmations
                );
                Ok(None)
            }
            ev => Ok(Some(ev)),
        }
    }

    /// The driver gives up: every member hears the failure and the switch is freed.
    fn fail(&mut self, why: String) {
        self.session
            .abort(self.clock.now(), SessionError::Transfer(why));
        self.flush();
    }

    /// This leader's QPN on the switch connection (random per leader).
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The PSN of the group's first data packet (random per leader).
    pub fn start_psn(&self) -> u32 {
        self.start_psn
    }

    /// The switch connection's QP counters (what it dropped from strangers among
    /// them); None once the group went through an overlay.
    pub fn group_qp_stats(&self) -> Option<QpStats> {
        match &self.path {
            LeaderPath::Cepheus { ep } => Some(ep.qp.stats().clone()),
            _ => None,
        }
    }

    /// How the data travels: "cepheus", or the overlay's name (and why).
    pub fn path(&self) -> String {
        match &self.path {
            LeaderPath::Cepheus { .. } => "cepheus".into(),
            LeaderPath::Overlay { scheme, why, .. } if why.is_empty() => scheme.name().into(),
            LeaderPath::Overlay { scheme, why, .. } => {
                format!("{} (fallback: {why})", scheme.name())
            }
            LeaderPath::Detached => "none".into(),
        }
    }

    /// Sends one buffer (at most the group's capacity) to every member and returns
    /// when all have reported it (each with its CRC-32 and completion time).
    pub fn send(&mut self, data: Arc<[u8]>) -> Result<LeaderReport, McastError> {
        // The safeguard may have decided, during the last buffer, that the group goes
        // through the overlay: the switch is released and the members set up the overlay
        // first (every Ready), then this buffer takes the new path.
        while self.session.phase() == LeaderPhase::OverlaySetup {
            self.step()?;
            while let Some(ev) = self.session.poll_event() {
                match self.act(ev)? {
                    Some(LeaderEvent::Up) | None => {}
                    Some(ev) => return Err(unexpected(&ev)),
                }
            }
        }
        let crc = crc32(&data);
        let digest = sha256(&data);
        let seq = self
            .session
            .start_buffer(self.clock.now(), data.len() as u64, digest)?;
        // Announce to all; wait for every Ready.
        loop {
            self.step()?;
            match self.session.poll_event() {
                Some(ev) => match self.act(ev)? {
                    Some(LeaderEvent::Transfer { seq: s }) if s == seq => break,
                    Some(LeaderEvent::Up) | None => {}
                    Some(ev) => return Err(unexpected(&ev)),
                },
                None => continue,
            }
        }
        let t0 = StdInstant::now();
        let t0_ns = mono_ns();
        let retransmitted_before = self.retransmitted();
        let meter = CpuMeter::start(path_packets(self.transport_stats()));
        let sent = self.transfer(&data);
        let cpu = meter.stop(path_packets(self.transport_stats()));
        let now = self.clock.now();
        self.session.handle_transfer_done(
            now,
            sent.as_ref()
                .map(|_| ())
                .map_err(|e| SessionError::Transfer(e.to_string())),
        );
        if let Err(e) = sent {
            self.flush();
            return Err(e);
        }
        let transfer = t0.elapsed();
        // Done (WRITE) to all; wait for every verdict or the deadline.
        loop {
            self.step()?;
            while let Some(ev) = self.session.poll_event() {
                match self.act(ev)? {
                    Some(LeaderEvent::BufferDone(o)) if o.seq == seq => {
                        let members = o
                            .verdicts
                            .iter()
                            .map(|v| (Ipv4Addr::from(v.ip.0), v.ok))
                            .collect();
                        return Ok(LeaderReport {
                            bytes: data.len() as u64,
                            crc32: crc,
                            registration: self.registration,
                            transfer,
                            members,
                            latency: latency(t0_ns, &o),
                            held: o
                                .verdicts
                                .iter()
                                .map(|v| {
                                    let at = v
                                        .result
                                        .filter(|r| v.ok && r.held_ns >= t0_ns)
                                        .map(|r| Duration::from_nanos(r.held_ns - t0_ns));
                                    (Ipv4Addr::from(v.ip.0), at)
                                })
                                .collect(),
                            retransmitted: self
                                .retransmitted()
                                .saturating_sub(retransmitted_before),
                            cpu,
                            path: match self.rerouted_at {
                                Some(at) => format!("cepheus to byte {at}, then {}", self.path()),
                                None => self.path(),
                            },
                            evicted: o.evicted.iter().map(|a| Ipv4Addr::from(a.0)).collect(),
                        });
                    }
                    Some(LeaderEvent::Up) | None => {}
                    Some(ev) => return Err(unexpected(&ev)),
                }
            }
        }
    }

    /// Runs the transfer on the group's path (the driver's loops).
    fn transfer(&mut self, data: &Arc<[u8]>) -> Result<(), McastError> {
        self.rerouted_at = None;
        if let LeaderPath::Cepheus { .. } = &self.path {
            // The QP leaves `self` for the transfer so the control turns between its
            // steps can borrow the rest.
            let LeaderPath::Cepheus { mut ep } =
                std::mem::replace(&mut self.path, LeaderPath::Detached)
            else {
                unreachable!("matched above")
            };
            return match self.cepheus_send(data, &mut ep) {
                Ok(SwitchSend::All) => {
                    self.path = LeaderPath::Cepheus { ep };
                    Ok(())
                }
                Ok(SwitchSend::Cut { acked }) => {
                    // The switch QP's socket goes before the overlay binds its port.
                    drop(ep);
                    self.resume_on_overlay(data, acked)
                }
                Err(e) => {
                    self.path = LeaderPath::Cepheus { ep };
                    Err(e)
                }
            };
        }
        self.overlay_send(data)
    }

    /// The safeguard's reroute: the session releases the switch and sets the members
    /// up on the overlay; then the rest of the buffer, from the first byte not every
    /// member acknowledged, goes through it.
    fn resume_on_overlay(&mut self, data: &[u8], acked: u64) -> Result<(), McastError> {
        self.session.handle_transfer_cut(self.clock.now(), acked)?;
        self.flush();
        let offset = loop {
            self.step()?;
            match self.session.poll_event() {
                Some(ev) => match self.act(ev)? {
                    Some(LeaderEvent::ResumeTransfer { offset, .. }) => break offset,
                    Some(LeaderEvent::Up) | None => {}
                    Some(ev) => return Err(unexpected(&ev)),
                },
                None => continue,
            }
        };
        let from = usize::try_from(offset)
            .ok()
            .filter(|&o| o <= data.len())
            .ok_or_else(|| McastError::Protocol(format!("resume at {offset}")))?;
        self.rerouted_at = Some(offset);
        if from == data.len() {
            return Ok(());
        }
        self.overlay_send(&data[from..])
    }

    /// Sends `data` as rank 0 of the overlay.
    fn overlay_send(&mut self, data: &[u8]) -> Result<(), McastError> {
        let cfg = self.cfg.clone();
        let start_psn = self.start_psn;
        match &mut self.path {
            LeaderPath::Cepheus { .. } => Err(McastError::Protocol(
                "the group is on the switch path".into(),
            )),
            LeaderPath::Overlay {
                set,
                roster,
                scheme,
                ..
            } => {
                let driver_cfg = DriverConfig {
                    message_bytes: data.len() as u64,
                    block_bytes: cfg.block_bytes as u64,
                    window: cfg.window.max(1) as u32,
                    ready_for_block: false,
                };
                ensure_overlay_peers(
                    set,
                    cfg.local,
                    0,
                    roster,
                    *scheme,
                    &driver_cfg,
                    cfg.mtu,
                    cfg.rate_bps,
                    start_psn,
                    cfg.timeout,
                )?;
                let mut own = data.to_vec();
                run_overlay(
                    &self.clock,
                    set,
                    0,
                    roster,
                    *scheme,
                    driver_cfg,
                    &mut own,
                    cfg.timeout,
                )
                .map(|_| ())
            }
            LeaderPath::Detached => Err(McastError::Protocol("the group has no data path".into())),
        }
    }

    /// The data path's socket counters, if a path is up.
    fn transport_stats(&self) -> Option<&crate::udp::TransportStats> {
        match &self.path {
            LeaderPath::Cepheus { ep } => Some(ep.transport.stats()),
            LeaderPath::Overlay { set, .. } => Some(set.transport_stats()),
            LeaderPath::Detached => None,
        }
    }

    fn retransmitted(&self) -> u64 {
        match &self.path {
            LeaderPath::Cepheus { ep } => ep.qp.stats().tx_retransmitted,
            LeaderPath::Overlay { set, .. } => set
                .qpns()
                .filter_map(|q| set.qp(q).map(|qp| qp.stats().tx_retransmitted))
                .sum(),
            LeaderPath::Detached => 0,
        }
    }

    /// Ends the group: every member hears the outcome (`Close`: `ok` only if every
    /// member reported every buffer intact, RDMC's outcome seen by all), and the switch
    /// frees the group's tables.
    pub fn close(mut self, ok: bool) {
        let _ = self.session.close(self.clock.now(), ok);
        self.flush();
        // Drop lingers, as for a group that failed.
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        // A leader that fails or is dropped still frees the switch and tells everyone.
        if !self.session.is_terminal() {
            self.session.abort(
                self.clock.now(),
                SessionError::Protocol("the leader went away".into()),
            );
        }
        self.flush();
        self.linger();
    }
}

impl Leader {
    /// Closes the control connections gracefully: the write side first, then what
    /// members still send (a confirmation of the last refresh) is read and dropped
    /// until they close too, for at most [`LINGER`]. Closing a socket with unread bytes
    /// makes the kernel send a reset, which can reach a member before it read the
    /// `Close` that preceded it.
    fn linger(&mut self) {
        let deadline = StdInstant::now() + LINGER;
        for c in self.conns.values_mut().filter(|c| !c.done) {
            let _ = c.s.shutdown(std::net::Shutdown::Write);
        }
        while StdInstant::now() < deadline {
            for c in self.conns.values_mut().filter(|c| !c.done) {
                if let ControlRead::Gone(_) = c.read_available() {
                    c.done = true;
                }
            }
            let open: Vec<BorrowedFd<'_>> = self
                .conns
                .values()
                .filter(|c| !c.done)
                .map(|c| c.s.as_fd())
                .collect();
            if open.is_empty() {
                break;
            }
            let _ = wait_any(&open, MAX_WAIT.max(Duration::from_millis(10)));
        }
    }
}

/// How long a closing leader waits for its members to close their control
/// connections (they do as soon as they read `Close`).
const LINGER: Duration = Duration::from_millis(500);

/// How a send through the switch ended.
enum SwitchSend {
    /// Every message acknowledged by every member.
    All,
    /// The safeguard asked for a reroute: every member acknowledged the first `acked`
    /// bytes (whole messages, in order), the rest goes through the overlay.
    Cut { acked: u64 },
}

impl Leader {
    /// Posts `data` on the group's QP in `message_bytes` messages and waits until every
    /// one is acknowledged (by every member still in the group: the switch aggregates
    /// the ACKs), feeding each acknowledged message to the session's safeguard. Control
    /// turns run between the QP's (at most every millisecond): a member whose connection
    /// breaks is evicted and pruned from the switch while the buffer is in flight.
    fn cepheus_send(
        &mut self,
        data: &Arc<[u8]>,
        ep: &mut Endpoint,
    ) -> Result<SwitchSend, McastError> {
        let cfg = &self.cfg.clone();
        let clock = &self.clock.clone();
        let n_msgs = data.len().div_ceil(cfg.message_bytes).max(1);
        for i in 0..n_msgs {
            let a = i * cfg.message_bytes;
            let b = (a + cfg.message_bytes).min(data.len());
            let op = match cfg.op {
                McastOp::Send => SendOp::Send,
                McastOp::Write => SendOp::Write {
                    remote_va: a as u64,
                    rkey: 0,
                },
            };
            ep.qp
                .post_send(SendRequest {
                    wr_id: i as u64,
                    op,
                    data: Payload::Bytes(data[a..b].into()),
                })
                .map_err(|e| McastError::Transfer(e.to_string()))?;
        }
        let mut done = 0usize;
        let mut last_progress = StdInstant::now();
        let mut last_control = StdInstant::now();
        let mut evicted = self.session.stats().evicted;
        while done < n_msgs {
            if last_control.elapsed() >= MAX_WAIT {
                last_control = StdInstant::now();
                self.control_turn()?;
                if self.session.is_terminal() {
                    // Say why: the session's failure, and whom it evicted first.
                    let mut why = Vec::new();
                    while let Some(ev) = self.session.poll_event() {
                        match ev {
                            LeaderEvent::Failed(e) => why.push(e.to_string()),
                            LeaderEvent::MemberEvicted { ip, reason } => {
                                why.push(format!("{ip} evicted ({reason})"))
                            }
                            _ => {}
                        }
                    }
                    return Err(McastError::Transfer(format!(
                        "the group failed during the transfer: {}",
                        why.join("; ")
                    )));
                }
                // A member was evicted and the prune is out: the switch answers the
                // next retransmission from the members left, so it goes now rather
                // than after the back-off (by which the QP could have given up).
                if self.session.stats().evicted > evicted {
                    evicted = self.session.stats().evicted;
                    ep.qp.retry_now(clock.now());
                }
            }
            let session = &mut self.session;
            let act = ep.poll_once(clock).map_err(io("endpoint"))?;
            while let Some(ev) = ep.qp.poll_event() {
                match ev {
                    Event::SendComplete {
                        result: Ok(()),
                        wr_id,
                    } => {
                        done += 1;
                        last_progress = StdInstant::now();
                        let a = wr_id as usize * cfg.message_bytes;
                        let len = cfg.message_bytes.min(data.len().saturating_sub(a));
                        session.handle_acked(clock.now(), len as u64);
                    }
                    Event::SendComplete { result: Err(e), .. } | Event::QpError(e) => {
                        let s = ep.qp.stats();
                        return Err(McastError::Transfer(format!(
                            "{e} ({done} of {n_msgs} messages acknowledged; the QP sent {} packets, {} again, heard {} ACKs ({} stale) and {} NAKs, {} timeouts; {} members evicted, {} refreshes, {} confirmed)",
                            s.tx_data_packets, s.tx_retransmitted, s.rx_acks, s.rx_stale_acks, s.rx_naks, s.timeouts, evicted,
                            self.session.stats().refreshes, self.session.stats().refresh_confirmations
                        )));
                    }
                    _ => {}
                }
            }
            if act.is_idle() {
                if last_progress.elapsed() > cfg.timeout {
                    return Err(McastError::Timeout(format!(
                        "{done} of {n_msgs} messages acknowledged"
                    )));
                }
                ep.wait(clock, None, Duration::from_millis(1))
                    .map_err(io("wait"))?;
            }
            if self.session.rerouting() && done < n_msgs {
                let acked = (done * cfg.message_bytes).min(data.len()) as u64;
                return Ok(SwitchSend::Cut { acked });
            }
        }
        Ok(SwitchSend::All)
    }
}

fn core_duration(d: Duration) -> CoreDuration {
    CoreDuration::from_ns(d.as_nanos().min(u64::MAX as u128) as u64)
}

fn unexpected(ev: &impl std::fmt::Debug) -> McastError {
    McastError::Protocol(format!("unexpected group event {ev:?}"))
}

/// How a receive through the switch ended.
enum SwitchReceive {
    /// The whole buffer.
    All { data: Vec<u8>, held_ns: u64 },
    /// The leader moved the buffer to the overlay: what the switch delivered so far,
    /// in place in a buffer of the whole size, and this member's overlay role.
    Rerouted {
        data: Vec<u8>,
        role: rocast_core::control::session::OverlayRole,
        /// The buffer's first bytes this member holds in order (SEND: whole messages
        /// from the first; WRITE completes nothing here, so 0): its `Holding`.
        held: u64,
    },
}

/// A member's view of the group.
enum MemberPath {
    Cepheus {
        ep: Endpoint,
    },
    Overlay {
        set: QpSet,
        rank: usize,
        roster: Vec<Ipv4Addr>,
        scheme: Scheme,
        block: u64,
        window: u32,
        rate_bps: Option<u64>,
    },
    /// Before the QP opens, and between the two: the switch QP closed, the overlay not
    /// up yet.
    Detached,
}

/// What [`Member::next`] reports.
#[derive(Clone, Debug)]
pub enum MemberEvent {
    /// A buffer arrived: its bytes, their CRC-32, and whether it matched the leader's.
    Received(MemberReport),
    /// The leader closed the group, successfully or not.
    Closed { ok: bool },
}

/// A group, at a member: [`join`](Self::join), then [`next`](Self::next) until
/// `Closed`.
pub struct Member {
    cfg: MemberConfig,
    c: Control,
    mrp: UdpSocket,
    clock: Clock,
    session: MemberSession,
    path: MemberPath,
    write: bool,
    msg: usize,
    qpn: u32,
    /// The PSN of the group's first data packet (the leader's random start, from `Params`).
    start_psn: u32,
    /// The WRITE region's RKey: random, like the QPN, so a stranger cannot
    /// aim a WRITE at the region either.
    rkey: u32,
    /// Other members the leader evicted, in the order it said so.
    evicted_peers: Vec<Ipv4Addr>,
    /// The last buffer went through the switch up to this byte, then the overlay.
    rerouted_at: Option<u64>,
}

/// The session's next event for the member's driver; an eviction of another member
/// is recorded on the way (it changes nothing this member does).
fn member_event(session: &mut MemberSession, evicted: &mut Vec<Ipv4Addr>) -> Option<SessionEvent> {
    loop {
        match session.poll_event()? {
            SessionEvent::PeerEvicted { ip } => {
                eprintln!("rocast mcast: the leader evicted member {ip}; the group goes on");
                evicted.push(Ipv4Addr::from(ip.0));
            }
            ev => return Some(ev),
        }
    }
}

/// One turn of a member's control loop: the leader's bytes and MRP packets into the
/// session, its deadlines, its transmits out.
fn member_pump(c: &mut Control, mrp: &UdpSocket, session: &mut MemberSession, clock: &Clock) {
    let now = clock.now();
    if !c.done {
        match c.read_available() {
            ControlRead::Bytes(b) => session.handle_stream(now, &b),
            ControlRead::Gone(why) => {
                c.done = true;
                session.handle_conn_error(now, &why);
            }
        }
    }
    let mut buf = [0u8; 1500];
    while let Ok((n, from)) = mrp.recv_from(&mut buf) {
        // The switch delivers a member's record from the leader's address; anything
        // else on the port is not the group's: counted and dropped.
        if from.ip() != std::net::IpAddr::V4(c.peer) {
            session.note_foreign_mrp();
            continue;
        }
        if let Ok(m) = MrpRepr::parse(&buf[..n]) {
            session.handle_mrp(now, &m);
        }
    }
    if session.poll_timeout().is_some_and(|t| t <= now) {
        session.handle_timeout(now);
    }
    let mut out = [0u8; MAX_TRANSMIT_LEN];
    while let Some(t) = session.poll_transmit(now, &mut out) {
        if c.done {
            continue;
        }
        if let Err(e) = c.write_frame(&out[..t.len]) {
            c.done = true;
            session.handle_conn_error(now, &format!("send to the leader: {e}"));
        }
    }
}

/// A TCP connection to `remote` from address `local` (any port), within `timeout`.
fn connect_from(local: Ipv4Addr, remote: SocketAddrV4, timeout: Duration) -> io::Result<TcpStream> {
    use rustix::event::{PollFd, PollFlags};
    use rustix::io::Errno;
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::bind(&fd, &SocketAddrV4::new(local, 0))?;
    match rustix::net::connect(&fd, &remote) {
        Ok(()) => {}
        Err(Errno::INPROGRESS) => {
            let mut p = [PollFd::new(&fd, PollFlags::OUT)];
            let ms = timeout.as_millis().min(i32::MAX as u128) as i64;
            let t = rustix::time::Timespec {
                tv_sec: ms / 1000,
                tv_nsec: ms % 1000 * 1_000_000,
            };
            if rustix::event::poll(&mut p, Some(&t))? == 0 {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
            }
            rustix::net::sockopt::socket_error(&fd)??;
        }
        Err(e) => return Err(e.into()),
    }
    let s = TcpStream::from(fd);
    s.set_nonblocking(false)?;
    Ok(s)
}

impl Member {
    /// Connects to the leader, opens the QP (and WRITE region) the group's capacity
    /// needs, and sends the Join.
    pub fn join(cfg: &MemberConfig) -> Result<Member, McastError> {
        let clock = Clock::new();
        let mrp = mrp_socket(cfg.local)?;
        let deadline = StdInstant::now() + cfg.timeout;
        // Connection establishment is the driver's: the leader may not listen yet.
        let s = loop {
            // From the member's own address: the leader accepts a Join only from the
            // address it names.
            match connect_from(
                cfg.local,
                SocketAddrV4::new(cfg.leader, cfg.control_port),
                Duration::from_secs(1),
            ) {
                Ok(s) => break s,
                Err(_) if StdInstant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => return Err(io("connect to the leader")(e)),
            }
        };
        let c = Control::new(s).map_err(io("control"))?;
        let session = MemberSession::new(
            MemberSessionConfig {
                local: v4(cfg.local),
                mcst_id: v4(cfg.mcst_id),
                group_space: cfg.group_space,
                max_capacity: 4 << 30,
                params_timeout: core_duration(cfg.timeout),
                idle_timeout: core_duration(cfg.timeout),
                invitation: cfg.invitation,
            },
            clock.now(),
        );
        // Random: a QPN derived from the address let any host aim at it.
        let qpn = random_qpn();
        let mut m = Member {
            cfg: cfg.clone(),
            c,
            mrp,
            clock,
            session,
            path: MemberPath::Detached,
            write: false,
            msg: 0,
            qpn,
            start_psn: 0,
            rkey: u32::from_be_bytes(crate::entropy::random_bytes()),
            evicted_peers: Vec::new(),
            rerouted_at: None,
        };
        loop {
            m.step(true)?;
            match m.session.poll_event() {
                Some(SessionEvent::OpenQp(p)) => {
                    m.write = p.write;
                    m.start_psn = p.start_psn;
                    m.msg = p.message_bytes as usize;
                    // A member's QP only answers (it never retries).
                    let mut ep = endpoint(
                        cfg.local,
                        qpn,
                        cfg.mcst_id,
                        cfg.mtu,
                        None,
                        p.start_psn,
                        VERBS_RETRY_COUNT,
                    )?;
                    if p.write {
                        ep.qp
                            .register_mr(MEMBER_VA, p.capacity as usize, m.rkey)
                            .map_err(|e| McastError::Protocol(e.to_string()))?;
                    }
                    m.path = MemberPath::Cepheus { ep };
                    m.session
                        .handle_qp_ready(m.clock.now(), qpn, MEMBER_VA, m.rkey);
                    m.step(false)?;
                    return Ok(m);
                }
                Some(SessionEvent::Failed(e)) => return Err(e.into()),
                Some(ev) => return Err(unexpected(&ev)),
                None => {}
            }
        }
    }

    /// One turn of the driver loop; with `wait`, then waits for the leader's bytes, a
    /// packet, or the next deadline (at most 1 ms).
    fn step(&mut self, wait: bool) -> Result<(), McastError> {
        member_pump(&mut self.c, &self.mrp, &mut self.session, &self.clock);
        // What the pump decided (an announced buffer, a verdict due) goes on now.
        let wait = wait && !self.session.has_event();
        let fd = self.c.s.as_raw_fd();
        let max = match self.session.poll_timeout() {
            Some(t) => MAX_WAIT.min(self.clock.until(self.clock.now(), t)),
            None => MAX_WAIT,
        };
        match &mut self.path {
            MemberPath::Cepheus { ep } => {
                let act = ep.poll_once(&self.clock).map_err(io("endpoint"))?;
                if wait && act.is_idle() {
                    ep.wait(&self.clock, Some(fd), max).map_err(io("wait"))?;
                }
            }
            MemberPath::Overlay { set, .. } => {
                let busy = set.poll_once(&self.clock).map_err(io("overlay"))?;
                if wait && !busy {
                    set.wait(&self.clock, Some(fd), max).map_err(io("wait"))?;
                }
            }
            MemberPath::Detached => {
                if wait {
                    wait_any(&[self.c.s.as_fd(), self.mrp.as_fd()], max).map_err(io("poll"))?;
                }
            }
        }
        Ok(())
    }

    /// The next thing that happens to the group: a buffer arrived, or the leader
    /// closed it. Errors (a failed QP, a vanished leader, a timeout) end the group.
    pub fn next(&mut self) -> Result<MemberEvent, McastError> {
        loop {
            self.step(true)?;
            while let Some(ev) = member_event(&mut self.session, &mut self.evicted_peers) {
                match ev {
                    SessionEvent::UseOverlay(role) => {
                        if let Err(e) = self.use_overlay(role) {
                            self.session
                                .abort(self.clock.now(), SessionError::Transfer(e.to_string()));
                            return Err(e);
                        }
                        self.session.handle_overlay_ready(self.clock.now());
                    }
                    SessionEvent::PostReceives { seq, bytes, .. } => {
                        return match self.receive(seq, bytes as usize) {
                            Ok(r) => Ok(MemberEvent::Received(r)),
                            Err(e) => {
                                self.session
                                    .abort(self.clock.now(), SessionError::Transfer(e.to_string()));
                                Err(e)
                            }
                        };
                    }
                    // A reroute that crossed this member's verdict: relay the rest
                    // for the others; the application already has the buffer.
                    SessionEvent::ResumeReceive {
                        offset,
                        bytes,
                        held: true,
                        ..
                    } => {
                        let rest = bytes.saturating_sub(offset) as usize;
                        let mut scratch = vec![0u8; rest];
                        if let Err(e) = self.overlay_receive(&mut scratch) {
                            self.session
                                .abort(self.clock.now(), SessionError::Transfer(e.to_string()));
                            return Err(e);
                        }
                        self.session.handle_relayed(self.clock.now());
                    }
                    SessionEvent::Closed { ok } => return Ok(MemberEvent::Closed { ok }),
                    SessionEvent::Failed(e) => return Err(e.into()),
                    ev => return Err(unexpected(&ev)),
                }
            }
        }
    }

    /// The group goes through an overlay: this host's rank, and its connections.
    fn use_overlay(
        &mut self,
        role: rocast_core::control::session::OverlayRole,
    ) -> Result<(), McastError> {
        let mbps = role.plan.rate_mbps as u64;
        // The switch QP's socket goes first: the overlay binds the same port.
        self.path = MemberPath::Detached;
        let set = overlay_qps(self.cfg.local, self.cfg.mtu)?;
        self.path = MemberPath::Overlay {
            set,
            rank: role.rank,
            roster: role.roster.iter().map(|a| Ipv4Addr::from(a.0)).collect(),
            scheme: role.plan.scheme,
            block: role.plan.block_bytes as u64,
            window: role.plan.window as u32,
            rate_bps: (mbps > 0).then_some(mbps * 1_000_000),
        };
        Ok(())
    }

    /// The data socket's counters, if a path is up.
    fn transport_stats(&self) -> Option<&crate::udp::TransportStats> {
        match &self.path {
            MemberPath::Cepheus { ep } => Some(ep.transport.stats()),
            MemberPath::Overlay { set, .. } => Some(set.transport_stats()),
            MemberPath::Detached => None,
        }
    }

    /// Receives buffer `seq` of `bytes` bytes: posts the receives, says `Ready`, runs
    /// the data path, and reports the verdict (the session compares the CRC-32).
    fn receive(&mut self, seq: u32, bytes: usize) -> Result<MemberReport, McastError> {
        let meter = CpuMeter::start(path_packets(self.transport_stats()));
        let n_msgs = bytes.div_ceil(self.msg.max(1)).max(1);
        let (data, held_ns) = match &mut self.path {
            MemberPath::Overlay { .. } => {
                let mut data = vec![0u8; bytes];
                let held = self.overlay_receive(&mut data)?;
                (data, held)
            }
            MemberPath::Cepheus { ep } => {
                if !self.write {
                    for i in 0..n_msgs {
                        let len = self.msg.min(bytes - i * self.msg);
                        // The whole message's room up front: no regrowth (a copy and
                        // fresh pages each time) as its packets arrive.
                        ep.qp
                            .post_recv_buffer(
                                (seq as u64) << 32 | i as u64,
                                Vec::with_capacity(len),
                                len,
                            )
                            .map_err(|e| McastError::Protocol(e.to_string()))?;
                    }
                }
                self.session.handle_receives_posted(self.clock.now());
                match self.cepheus_receive(seq, bytes, n_msgs)? {
                    SwitchReceive::All { data, held_ns } => (data, held_ns),
                    SwitchReceive::Rerouted {
                        mut data,
                        role,
                        held,
                    } => {
                        let held = self.resume(seq, role, held, &mut data)?;
                        (data, held)
                    }
                }
            }
            MemberPath::Detached => {
                return Err(McastError::Protocol("the group has no data path".into()))
            }
        };
        let cpu = meter.stop(path_packets(self.transport_stats()));
        let ours = crc32(&data);
        self.session
            .handle_received(self.clock.now(), sha256(&data), held_ns);
        member_pump(&mut self.c, &self.mrp, &mut self.session, &self.clock);
        let ok = match member_event(&mut self.session, &mut self.evicted_peers) {
            Some(SessionEvent::Received { seq: s, ok, .. }) if s == seq => ok,
            Some(SessionEvent::Failed(e)) => return Err(e.into()),
            Some(ev) => return Err(unexpected(&ev)),
            None => return Err(McastError::Protocol("no verdict for the buffer".into())),
        };
        Ok(MemberReport {
            seq,
            data,
            crc32: ours,
            ok,
            rerouted_at: self.rerouted_at.take(),
            cpu,
        })
    }

    /// Receives `into` (the whole buffer, or the rest of it after a reroute) as this
    /// member's rank of the overlay: posts the receives, says `Ready`, runs the
    /// schedule. Returns when the member held it (CLOCK_MONOTONIC ns).
    fn overlay_receive(&mut self, into: &mut [u8]) -> Result<u64, McastError> {
        let start_psn = self.start_psn;
        let MemberPath::Overlay {
            set,
            rank,
            roster,
            scheme,
            block,
            window,
            rate_bps,
        } = &mut self.path
        else {
            return Err(McastError::Protocol("no overlay".into()));
        };
        let driver_cfg = DriverConfig {
            message_bytes: into.len() as u64,
            block_bytes: *block,
            window: *window,
            ready_for_block: false,
        };
        let sched = ensure_overlay_peers(
            set,
            self.cfg.local,
            *rank,
            roster,
            *scheme,
            &driver_cfg,
            self.cfg.mtu,
            *rate_bps,
            start_psn,
            self.cfg.timeout,
        )?;
        post_overlay_receives(set, *rank, &sched, *block)?;
        self.session.handle_receives_posted(self.clock.now());
        member_pump(&mut self.c, &self.mrp, &mut self.session, &self.clock);
        let (r, s) = (*rank, *scheme);
        run_overlay(
            &self.clock,
            set,
            r,
            roster,
            s,
            driver_cfg,
            into,
            self.cfg.timeout,
        )
    }

    /// The safeguard moved buffer `seq` to the overlay while it was arriving: set the
    /// overlay up, learn from `Resume` where the switch's delivery ended, and receive
    /// the rest into `data` from there. The bytes below come from the switch (every
    /// member acknowledged them); none arrives twice.
    fn resume(
        &mut self,
        seq: u32,
        role: rocast_core::control::session::OverlayRole,
        held: u64,
        data: &mut [u8],
    ) -> Result<u64, McastError> {
        self.use_overlay(role)?;
        self.session
            .handle_overlay_ready_holding(self.clock.now(), held);
        let offset = loop {
            self.step(true)?;
            match member_event(&mut self.session, &mut self.evicted_peers) {
                Some(SessionEvent::ResumeReceive {
                    seq: s,
                    offset,
                    held: false,
                    ..
                }) if s == seq => break offset,
                Some(SessionEvent::Failed(e)) => return Err(e.into()),
                Some(ev) => return Err(unexpected(&ev)),
                None => {}
            }
        };
        let from = usize::try_from(offset)
            .ok()
            .filter(|&o| o <= data.len())
            .ok_or_else(|| McastError::Protocol(format!("resume at byte {offset}")))?;
        self.rerouted_at = Some(offset);
        if from == data.len() {
            self.session.handle_receives_posted(self.clock.now());
            member_pump(&mut self.c, &self.mrp, &mut self.session, &self.clock);
            return Ok(mono_ns());
        }
        self.overlay_receive(&mut data[from..])
    }

    /// The Cepheus path's receive: SEND completes per message; WRITE completes nothing
    /// here, so the leader's `Done` (the session's `WriteDone`) says the region holds it.
    fn cepheus_receive(
        &mut self,
        seq: u32,
        bytes: usize,
        n_msgs: usize,
    ) -> Result<SwitchReceive, McastError> {
        let mut parts: Vec<Option<Vec<u8>>> = vec![None; if self.write { 0 } else { n_msgs }];
        let mut held = 0usize;
        let mut held_ns = 0u64;
        let mut last = StdInstant::now();
        loop {
            member_pump(&mut self.c, &self.mrp, &mut self.session, &self.clock);
            let fd = self.c.s.as_raw_fd();
            let MemberPath::Cepheus { ep } = &mut self.path else {
                return Err(McastError::Protocol("no switch QP".into()));
            };
            let act = ep.poll_once(&self.clock).map_err(io("endpoint"))?;
            if act.received > 0 {
                last = StdInstant::now();
                if self.write {
                    held_ns = mono_ns();
                }
            }
            while let Some(ev) = ep.qp.poll_event() {
                match ev {
                    Event::Recv { wr_id, data, .. } if (wr_id >> 32) as u32 == seq => {
                        if let Some(p) = parts.get_mut((wr_id & 0xffff_ffff) as usize) {
                            if p.is_none() {
                                held += 1;
                                if held == n_msgs {
                                    held_ns = mono_ns();
                                }
                            }
                            *p = Some(data);
                        }
                    }
                    Event::RecvError { error, .. } | Event::QpError(error) => {
                        return Err(McastError::Transfer(error.to_string()))
                    }
                    _ => {}
                }
            }
            match member_event(&mut self.session, &mut self.evicted_peers) {
                Some(SessionEvent::WriteDone { seq: s }) if s == seq => {
                    let data = ep
                        .qp
                        .mr(self.rkey)
                        .map(|m| m.data[..bytes].to_vec())
                        .unwrap_or_default();
                    return Ok(SwitchReceive::All { data, held_ns });
                }
                // The safeguard's reroute: what arrived so far, in place; the overlay
                // brings the rest (from the offset `Resume` names).
                Some(SessionEvent::UseOverlay(role)) => {
                    let mut data = vec![0u8; bytes];
                    if self.write {
                        if let Some(m) = ep.qp.mr(self.rkey) {
                            data.copy_from_slice(&m.data[..bytes]);
                        }
                    } else {
                        for (i, p) in parts.iter().enumerate() {
                            if let Some(p) = p {
                                let at = i * self.msg;
                                let end = (at + p.len()).min(bytes);
                                data[at..end].copy_from_slice(&p[..end - at]);
                            }
                        }
                    }
                    let held = if self.write {
                        0
                    } else {
                        let whole = parts.iter().take_while(|p| p.is_some()).count();
                        (whole * self.msg).min(bytes) as u64
                    };
                    return Ok(SwitchReceive::Rerouted { data, role, held });
                }
                Some(SessionEvent::Closed { .. }) => {
                    return Err(McastError::Transfer(
                        "the leader closed mid-transfer".into(),
                    ))
                }
                Some(SessionEvent::Failed(e)) => return Err(e.into()),
                Some(ev) => return Err(unexpected(&ev)),
                None => {}
            }
            // Checked after the session's events: a reroute that arrived with the last
            // message still takes this member through the overlay (it relays for the
            // others; its bytes below the cut are the switch's, the rest rewritten
            // identical).
            if !self.write && held == n_msgs {
                // One copy per message (a byte-wise flatten cost a member more CPU
                // than receiving the buffer did).
                let mut data = Vec::with_capacity(bytes);
                for p in parts.into_iter().flatten() {
                    data.extend_from_slice(&p);
                }
                return Ok(SwitchReceive::All { data, held_ns });
            }
            if act.is_idle() {
                if last.elapsed() > self.cfg.timeout {
                    return Err(McastError::Timeout("no data from the leader".into()));
                }
                ep.wait(&self.clock, Some(fd), MAX_WAIT)
                    .map_err(io("wait"))?;
            }
        }
    }

    /// This member's QPN on the group's switch connection.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The PSN the group's data starts at (the leader's, from `Params`).
    pub fn start_psn(&self) -> u32 {
        self.start_psn
    }

    /// The switch connection's QP counters (what it dropped from strangers among
    /// them); None once the group went through an overlay.
    pub fn group_qp_stats(&self) -> Option<QpStats> {
        match &self.path {
            MemberPath::Cepheus { ep } => Some(ep.qp.stats().clone()),
            _ => None,
        }
    }

    /// The group session's counters (refresh confirmations sent, MRP ignored…).
    pub fn session_stats(&self) -> &rocast_core::control::session::MemberStats {
        self.session.stats()
    }

    /// Other members the leader evicted so far.
    pub fn evicted_peers(&self) -> &[Ipv4Addr] {
        &self.evicted_peers
    }

    /// Whether the group's data comes through the switch (false once the group fell
    /// back to an overlay): what `mcast join --require-multicast` checks.
    pub fn through_switch(&self) -> bool {
        matches!(self.path, MemberPath::Cepheus { .. })
    }
}

/// One overlay connection: rank `rank`'s QP toward rank `peer`, numbered from the
/// group's random start PSN (`Params`): the overlay's QPNs name ranks, so
/// the PSN and the peer's address are what a stranger cannot match.
fn overlay_qp(
    local: Ipv4Addr,
    rank: usize,
    peer: usize,
    peer_ip: Ipv4Addr,
    mtu: usize,
    rate_bps: Option<u64>,
    start_psn: u32,
    retry_limit: u8,
) -> Result<RcQueuePair, McastError> {
    let mut qp = rc_qp(
        local,
        overlay_qpn(rank, peer),
        peer_ip,
        overlay_qpn(peer, rank),
        mtu,
        rate_bps,
        retry_limit,
    )?;
    start_at(&mut qp, start_psn)?;
    Ok(qp)
}

/// Numbers a fresh QP's sends and receives from `start_psn` (both ends of a group
/// connection start at the leader's random PSN).
fn start_at(qp: &mut RcQueuePair, start_psn: u32) -> Result<(), McastError> {
    let psn = rocast_core::wire::Psn::new(start_psn);
    qp.set_send_psn(psn)
        .and_then(|()| qp.set_recv_psn(psn))
        .map_err(|e| McastError::Protocol(e.to_string()))
}

/// An RC QP as every rocast host here runs one: UDP source port 4791 (one socket per
/// host), PSNs 0 (callers move them to the group's start with [`start_at`]), the given
/// MTU, a pacer at `rate_bps` if set, and `retry_limit` timeouts without progress
/// before the QP fails.
fn rc_qp(
    local: Ipv4Addr,
    local_qpn: u32,
    remote: Ipv4Addr,
    remote_qpn: u32,
    mtu: usize,
    rate_bps: Option<u64>,
    retry_limit: u8,
) -> Result<RcQueuePair, McastError> {
    let mut c = QpConfig::new(v4(local), local_qpn, v4(remote), remote_qpn);
    c.retry_limit = retry_limit;
    c.udp_src_port = ROCEV2_UDP_PORT;
    c.mtu = mtu;
    // Userspace hops (switch, endpoints) add milliseconds under load; a timeout below
    // that retransmits what is merely queued. 20 ms is the floor; past the first
    // measured round trip the timeout follows SRTT + 4·RTTVAR (16 members on
    // two cores took round trips past any fixed floor).
    c.retransmit_timeout = RTO_FLOOR;
    c.adaptive_rto = true;
    // The lab's fabric is lossy (no PFC) and its switch is a process that may be
    // descheduled past any timeout: after a timeout, one packet, not the window.
    c.slow_restart = true;
    let rate: Box<dyn RateController> = match rate_bps {
        // 64 KB of burst: a late wakeup catches up instead of losing the rate.
        Some(r) => Box::new(FixedRate::with_burst(r, 64 << 10)),
        None => Box::new(Unlimited::default()),
    };
    RcQueuePair::with_rate_controller(c, rate).map_err(|e| McastError::Protocol(e.to_string()))
}

/// The retransmission timeout's floor on every QP here (see [`rc_qp`]).
const RTO_FLOOR: CoreDuration = CoreDuration::from_ms(20);
/// verbs' `retry_cnt` maximum (20 ms doubling over 7 retries: 5.1 s of silence): the
/// least budget any QP here gets.
const VERBS_RETRY_COUNT: u8 = 7;

/// The retry budget of the group's QP and of an overlay connection: enough timeouts,
/// each twice the last from the [`RTO_FLOOR`], to cover `silence` (the user's
/// `--timeout`), so that a peer that is merely slow — descheduled, loaded — holds its
/// sender back for as long as the group allows instead of failing it after the fixed
/// 5.1 s of verbs' seven retries. At least those seven; at most 16 (the
/// back-off's cap).
fn retry_limit_for(silence: Duration) -> u8 {
    let floor = RTO_FLOOR.as_ps() as u128;
    let want = silence.as_nanos() * 1000;
    // k retries wait floor·(2^(k+1) − 1) in all before the QP fails.
    (VERBS_RETRY_COUNT..16)
        .find(|&k| floor * ((1u128 << (k + 1)) - 1) >= want)
        .unwrap_or(16)
}

/// The socket of `rank`'s overlay connections (QPs are added per buffer by
/// [`ensure_overlay_peers`]: which peers a rank talks to depends on the block count).
fn overlay_qps(local: Ipv4Addr, mtu: usize) -> Result<QpSet, McastError> {
    let probe = overlay_qp(local, 0, 1, local, mtu, None, 0, VERBS_RETRY_COUNT)?;
    QpSet::bind(local, probe.max_packet_len()).map_err(io(format!("UDP {local}:4791")))
}

/// Adds the QPs toward every peer `rank` has in one broadcast of `driver_cfg` that
/// are not there yet (both ends compute the same schedule, so both add the pair), and
/// once per group a control QP toward every other rank (RDMC §4.6 relays a failure to
/// every member; probes and readies go to schedule peers) with
/// [`CONTROL_RECEIVES`] zero-length receives posted.
#[allow(clippy::too_many_arguments)]
fn ensure_overlay_peers(
    set: &mut QpSet,
    local: Ipv4Addr,
    rank: usize,
    roster: &[Ipv4Addr],
    scheme: Scheme,
    driver_cfg: &DriverConfig,
    mtu: usize,
    rate_bps: Option<u64>,
    start_psn: u32,
    silence: Duration,
) -> Result<rocast_core::overlay::Schedule, McastError> {
    let retries = retry_limit_for(silence);
    let sched =
        rocast_core::overlay::Schedule::new(scheme, roster.len() as u32, 0, driver_cfg.blocks())
            .map_err(|e| McastError::Protocol(e.to_string()))?;
    for peer in sched.peers_of(rank as u32) {
        let p = peer as usize;
        if set.qp(overlay_qpn(rank, p)).is_none() {
            let qp = overlay_qp(local, rank, p, roster[p], mtu, rate_bps, start_psn, retries)?;
            set.add(qp).map_err(io("QP"))?;
        }
    }
    for (p, &peer_ip) in roster.iter().enumerate() {
        if p == rank || set.qp(control_qpn(rank, p)).is_some() {
            continue;
        }
        let mut qp = rc_qp(
            local,
            control_qpn(rank, p),
            peer_ip,
            control_qpn(p, rank),
            mtu,
            None,
            retries,
        )?;
        start_at(&mut qp, start_psn)?;
        for i in 0..CONTROL_RECEIVES {
            qp.post_recv(i, 0)
                .map_err(|e| McastError::Protocol(e.to_string()))?;
        }
        set.add(qp).map_err(io("QP"))?;
    }
    Ok(sched)
}

/// Zero-length receives each control QP keeps posted (one is reposted per control
/// message): failure notices and probes are few; past this a sender meets RNR and
/// retries (rnr_retry 7: for ever), so nothing is lost.
const CONTROL_RECEIVES: u64 = 8;

/// Posts a receive for every block this rank gets in one broadcast of `sched`.
fn post_overlay_receives(
    set: &mut QpSet,
    rank: usize,
    sched: &rocast_core::overlay::Schedule,
    block_bytes: u64,
) -> Result<(), McastError> {
    for (i, (_, t)) in sched.receives_of(rank as u32).iter().enumerate() {
        let qp = set
            .qp_mut(overlay_qpn(rank, t.peer as usize))
            .ok_or_else(|| McastError::Protocol(format!("no QP to rank {}", t.peer)))?;
        qp.post_recv(i as u64, block_bytes as usize)
            .map_err(|e| McastError::Protocol(e.to_string()))?;
    }
    Ok(())
}

/// The QPN rank `from` uses for its connection to rank `to` in an overlay broadcast
/// (both ends compute it, so no exchange is needed; ranks < 256).
fn overlay_qpn(from: usize, to: usize) -> u32 {
    0x10000 | ((from as u32) << 8) | to as u32
}

/// The QPN of rank `from`'s control connection to rank `to` (ready, failure notice,
/// probe: `overlay::rank`'s control channel).
fn control_qpn(from: usize, to: usize) -> u32 {
    0x20000 | ((from as u32) << 8) | to as u32
}

/// Runs `rank`'s part of an overlay broadcast until it holds the whole message and
/// every send it owes completed. `buf` holds the message (the root's is full).
///
/// The rank is `overlay::OverlayRank`, the object the simulator drives too: this
/// loop only posts what it asks for (blocks as SEND with immediate into the receives
/// posted per block, control on the control QPs) and reports what the QPs complete.
/// A rank that hears nothing for a quarter of `timeout` probes whom it waits on (a
/// dead peer is then found by the probe's RC retry error); one that hears nothing
/// for `timeout` suspects them. Either failure is relayed to every member before
/// this returns, so all survivors report the same failed members (RDMC §4.6).
#[allow(clippy::too_many_arguments)]
fn run_overlay(
    clock: &Clock,
    set: &mut QpSet,
    rank: usize,
    roster: &[Ipv4Addr],
    scheme: Scheme,
    driver_cfg: DriverConfig,
    buf: &mut [u8],
    timeout: Duration,
) -> Result<u64, McastError> {
    let n = roster.len();
    // The caller's clock: the QPs' timers and pacer hold instants of it, so a fresh
    // clock per broadcast would put them in the future and stall every later send.
    let mut held_ns = None;
    let timeout = core_duration(timeout);
    let mut me = OverlayRank::new(
        OverlayRankConfig {
            scheme,
            group_size: n as u32,
            root: 0,
            rank: rank as u32,
            driver: driver_cfg,
            block_op: BlockOp::SendImm,
            suspect_after: Some(CoreDuration::from_ps(timeout.as_ps() / 4)),
            fail_after: Some(timeout),
        },
        clock.now(),
    )
    .map_err(|e| McastError::Protocol(e.to_string()))?;
    let protocol = |e: rocast_core::overlay::DriverError| McastError::Protocol(e.to_string());
    // Every QP of this rank with its peer and channel.
    let qps: Vec<(u32, u32, Channel)> = (0..n)
        .filter(|&p| p != rank)
        .flat_map(|p| {
            [
                (overlay_qpn(rank, p), p as u32, Channel::Data),
                (control_qpn(rank, p), p as u32, Channel::Control),
            ]
        })
        .filter(|&(q, ..)| set.qp(q).is_some())
        .collect();
    // Control sends posted and not yet complete: a failure is relayed before return.
    let mut control_in_flight = 0usize;
    let mut failed_at: Option<StdInstant> = None;
    loop {
        if held_ns.is_none() && me.has_message() {
            held_ns = Some(mono_ns());
        }
        while let Some(p) = me.poll_post() {
            let to = p.to as usize;
            let (qpn, data) = match p.channel {
                Channel::Data => {
                    let (off, len) = (p.offset as usize, p.len as usize);
                    (
                        overlay_qpn(rank, to),
                        Payload::Bytes(buf[off..off + len].into()),
                    )
                }
                Channel::Control => {
                    control_in_flight += 1;
                    (control_qpn(rank, to), Payload::Zeros(0))
                }
            };
            let qp = set
                .qp_mut(qpn)
                .ok_or_else(|| McastError::Protocol(format!("no QP to rank {to}")))?;
            let posted = qp.post_send(SendRequest {
                wr_id: p.wr_id,
                op: SendOp::SendImm(p.imm),
                data,
            });
            if posted.is_err() {
                // A QP already in error: its peer is gone.
                if p.is_control() {
                    control_in_flight -= 1;
                }
                me.handle_peer_failure(clock.now(), p.to)
                    .map_err(protocol)?;
            }
        }
        match me.outcome() {
            GroupOutcome::Delivered => break,
            GroupOutcome::Failed { failed } => {
                // Relayed to every member it could reach (or give the relays one
                // retransmission budget), then report.
                let since = *failed_at.get_or_insert_with(StdInstant::now);
                if control_in_flight == 0 || since.elapsed() > Duration::from_secs(10) {
                    let names: Vec<String> = failed
                        .iter()
                        .map(|&r| format!("{} (rank {r})", roster[r as usize]))
                        .collect();
                    return Err(McastError::Transfer(format!(
                        "overlay: {} failed (relayed to every member)",
                        names.join(", ")
                    )));
                }
            }
            GroupOutcome::InProgress => {}
        }
        let busy = set.poll_once(clock).map_err(io("overlay"))?;
        for &(qpn, peer, channel) in &qps {
            let qp = set.qp_mut(qpn).expect("listed");
            let mut events = Vec::new();
            while let Some(ev) = qp.poll_event() {
                events.push(ev);
            }
            for ev in events {
                let now = clock.now();
                match (channel, ev) {
                    (
                        Channel::Data,
                        Event::SendComplete {
                            wr_id,
                            result: Ok(()),
                        },
                    ) => me.handle_send_complete(now, wr_id).map_err(protocol)?,
                    (Channel::Control, Event::SendComplete { result: Ok(()), .. }) => {
                        control_in_flight = control_in_flight.saturating_sub(1);
                        me.handle_control_sent(now);
                    }
                    (
                        Channel::Data,
                        Event::Recv {
                            data,
                            imm: Some(block),
                            ..
                        },
                    ) => {
                        let (off, len) = driver_cfg.block_range(block);
                        if data.len() as u64 != len || off + len > buf.len() as u64 {
                            return Err(McastError::Protocol(format!(
                                "block {block} of {} bytes",
                                data.len()
                            )));
                        }
                        buf[off as usize..(off + len) as usize].copy_from_slice(&data);
                        me.handle_block(now, peer, block).map_err(protocol)?;
                    }
                    (Channel::Control, Event::Recv { imm: Some(imm), .. }) => {
                        let qp = set.qp_mut(qpn).expect("listed");
                        // Keep the control receives posted.
                        let _ = qp.post_recv(0, 0);
                        me.handle_control(now, peer, imm).map_err(protocol)?;
                    }
                    (Channel::Control, Event::SendComplete { result: Err(_), .. }) => {
                        control_in_flight = control_in_flight.saturating_sub(1);
                        me.handle_peer_failure(now, peer).map_err(protocol)?;
                    }
                    (
                        _,
                        Event::SendComplete { result: Err(_), .. }
                        | Event::RecvError { .. }
                        | Event::QpError(_),
                    ) => me.handle_peer_failure(now, peer).map_err(protocol)?,
                    // Every overlay message carries an immediate (the block, or the
                    // control word): a peer's SEND without one broke the protocol.
                    (_, Event::Recv { imm: None, .. }) => {
                        return Err(McastError::Protocol(format!(
                            "rank {peer} sent a message without an immediate on the {} channel",
                            if channel == Channel::Data {
                                "data"
                            } else {
                                "control"
                            }
                        )))
                    }
                    _ => {}
                }
            }
        }
        let now = clock.now();
        if me.poll_timeout().is_some_and(|t| t <= now) {
            me.handle_timeout(now);
            continue;
        }
        if !busy {
            let until = me
                .poll_timeout()
                .map_or(Duration::from_millis(1), |t| clock.until(now, t))
                .min(Duration::from_millis(1));
            set.wait(clock, None, until).map_err(io("wait"))?;
        }
    }
    Ok(held_ns.unwrap_or_else(mono_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_core::wire::group_control::{Message, GROUP_CONTROL_VERSION};

    fn member_cfg(local: Ipv4Addr, port: u16) -> MemberConfig {
        MemberConfig {
            local,
            leader: Ipv4Addr::new(127, 0, 0, 31),
            mcst_id: Ipv4Addr::new(10, 77, 0, 200),
            group_space: GroupAddressSpace::parse("10.77.0.128/25").unwrap(),
            control_port: port,
            mtu: 1024,
            timeout: Duration::from_secs(10),
            invitation: None,
        }
    }

    /// An overlay connection's retry budget covers the group's `--timeout` from the
    /// 20 ms floor, doubling: never below verbs' seven (5.1 s), capped at the back-off's
    /// sixteen.
    #[test]
    fn overlay_retries_cover_the_timeout() {
        let total = |k: u8| 20u64 * ((1u64 << (k + 1)) - 1);
        for (secs, want) in [
            (1, 7),
            (5, 7),
            (6, 8),
            (10, 8),
            (20, 9),
            (60, 11),
            (1_000_000, 16),
        ] {
            let k = retry_limit_for(Duration::from_secs(secs));
            assert_eq!(k, want, "{secs} s");
            if k < 16 {
                assert!(
                    total(k) >= secs * 1000,
                    "{secs} s: {k} retries wait {} ms",
                    total(k)
                );
            }
            if k > 7 {
                assert!(total(k - 1) < secs * 1000, "{secs} s: {k} is not the least");
            }
        }
    }

    /// A member of this build facing a leader of the unversioned layout (its 13-byte
    /// `Params` begins with the op byte) refuses it with an error naming the version,
    /// before opening anything.
    #[test]
    fn a_member_refuses_a_leader_of_another_version() {
        let port = 47_932;
        let leader = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 31), port)).unwrap();
        let old_leader = std::thread::spawn(move || {
            let (mut s, _) = leader.accept().unwrap();
            // type 1, length 13: WRITE, capacity 1 MiB, messages of 64 KiB.
            let old_params = [1u8, 0, 13, 1, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0];
            s.write_all(&old_params).unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            rest
        });
        let err = Member::join(&member_cfg(Ipv4Addr::new(127, 0, 0, 35), port))
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(matches!(err, McastError::Protocol(_)), "{text}");
        assert!(text.contains("unsupported group control version"), "{text}");
        assert!(
            text.contains(&format!("speaks version {GROUP_CONTROL_VERSION}")),
            "{text}"
        );
        assert_eq!(old_leader.join().unwrap(), b"", "no Join was sent");
    }

    /// A leader facing a member that sends the unversioned 20-byte `Join` fails the
    /// group with a protocol error instead of registering a garbled member.
    #[test]
    fn a_leader_refuses_a_member_of_another_version() {
        let port = 47_933;
        let local = Ipv4Addr::new(127, 0, 0, 36);
        let member = std::thread::spawn(move || {
            let deadline = StdInstant::now() + Duration::from_secs(10);
            let mut s = loop {
                match TcpStream::connect((local, port)) {
                    Ok(s) => break s,
                    Err(e) if StdInstant::now() > deadline => panic!("{e}"),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            let mut params = [0u8; 21];
            s.read_exact(&mut params).unwrap();
            let mut old_join = vec![2u8, 0, 20];
            old_join.extend_from_slice(&[127, 0, 0, 37, 0, 0, 1, 37]);
            old_join.extend_from_slice(&[0; 12]);
            s.write_all(&old_join).unwrap();
            params
        });
        let cfg = LeaderConfig {
            refresh: Duration::from_millis(rocast_core::control::session::DEFAULT_REFRESH_MS),
            local,
            mcst_id: Ipv4Addr::new(10, 77, 0, 200),
            group_space: GroupAddressSpace::parse("10.77.0.128/25").unwrap(),
            members: 1,
            op: McastOp::Send,
            message_bytes: 4096,
            capacity: 8192,
            control_port: port,
            mtu: 1024,
            rate_bps: None,
            overlay: None,
            fallback: Scheme::BinomialPipeline,
            block_bytes: 4096,
            window: 1,
            safeguard: None,
            fabric_key: None,
            invitations: None,
            timeout: Duration::from_secs(10),
        };
        let err = Leader::create(&cfg).err().expect("refused");
        let text = err.to_string();
        assert!(matches!(err, McastError::Protocol(_)), "{text}");
        assert!(text.contains("unsupported group control version"), "{text}");
        // What the leader sent first is this build's Params (its start PSN random).
        let params = member.join().unwrap();
        let parsed = rocast_core::wire::group_control::parse_frame(&params);
        let Ok((Message::Params(p), 21)) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(
            p,
            Params {
                write: false,
                capacity: 8192,
                message_bytes: 4096,
                start_psn: p.start_psn,
            }
        );
        assert!(p.start_psn <= 0xff_ffff);
    }

    /// The session API over loopback (an overlay needs no switch): one group, three
    /// buffers of different sizes, then the close; each member sees each buffer once,
    /// in order, byte-identical, then `Closed { ok: true }`.
    #[test]
    fn a_group_carries_several_buffers_then_closes() {
        let port = 47_931;
        let members: Vec<Ipv4Addr> = (32..34).map(|d| Ipv4Addr::new(127, 0, 0, d)).collect();
        let buffers: Vec<Vec<u8>> = [70_000usize, 3, 200_000]
            .iter()
            .enumerate()
            .map(|(i, &n)| rocast_core::payload::message_data(9, i as u32, n))
            .collect();
        let handles: Vec<_> = members
            .iter()
            .map(|&ip| {
                std::thread::spawn(move || {
                    let mut m = Member::join(&member_cfg(ip, port)).unwrap();
                    let mut got = Vec::new();
                    loop {
                        match m.next().unwrap() {
                            MemberEvent::Received(r) => {
                                assert!(r.ok);
                                got.push(r.data);
                            }
                            MemberEvent::Closed { ok } => return (got, ok),
                        }
                    }
                })
            })
            .collect();
        let cfg = LeaderConfig {
            refresh: Duration::from_millis(rocast_core::control::session::DEFAULT_REFRESH_MS),
            local: Ipv4Addr::new(127, 0, 0, 31),
            mcst_id: Ipv4Addr::new(10, 77, 0, 200),
            group_space: GroupAddressSpace::parse("10.77.0.128/25").unwrap(),
            members: 2,
            op: McastOp::Send,
            message_bytes: 64 << 10,
            capacity: 256 << 10,
            control_port: port,
            mtu: 1024,
            rate_bps: None,
            overlay: Some(Scheme::Chain),
            fallback: Scheme::BinomialPipeline,
            block_bytes: 16 << 10,
            window: 2,
            safeguard: None,
            fabric_key: None,
            invitations: None,
            timeout: Duration::from_secs(10),
        };
        let mut leader = Leader::create(&cfg).unwrap();
        assert_eq!(leader.path(), "chain");
        for b in &buffers {
            let r = leader.send(Arc::from(b.clone())).unwrap();
            assert!(r.all_ok(), "{r:?}");
            assert!(r.latency.is_some());
        }
        // Over the capacity: refused before anything is announced.
        assert!(leader.send(Arc::from(vec![0u8; 300 << 10])).is_err());
        leader.close(true);
        for h in handles {
            let (got, ok) = h.join().unwrap();
            assert!(ok);
            assert_eq!(got, buffers);
        }
    }
}
