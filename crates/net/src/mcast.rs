//! The multicast API on real sockets (issue 8): a group's leader sends a buffer by
//! SEND or RDMA WRITE to every member through a Cepheus switch (`rocast switch`), each
//! member receives it, and the close reports success or failure to all, as in RDMC.
//!
//! Every protocol piece is the core's: the queue pairs are [`RcQueuePair`]s on
//! [`Endpoint`]s, registration is [`RegistrationController`] / [`MemberAgent`] (Cepheus
//! §III-C), the switch runs [`rocast_core::fabric::FrameSwitch`]. This module only
//! carries their messages:
//!
//! - **Control channel** (TCP, the leader's `control_port`): member discovery, each
//!   buffer's announcement and verdicts, the switch to an overlay, and the close. The
//!   messages and their framing are [`rocast_core::wire::group_control`] (its module
//!   docs have the byte layouts); in order of a group's life:
//!   - leader → member `Params` as soon as a member connects (so it can open its QP
//!     and size its buffers), member → leader `Join` (its IP, QPN, VA, RKey); both
//!     carry the protocol version, and a peer of another version is refused;
//!   - member → leader `Confirm` for each MRP record that lists it;
//!   - leader → member `Overlay` when the group goes through an overlay broadcast
//!     (forced, or the switch refused it), answered by `Ready` once the member's
//!     overlay connections are up;
//!   - per buffer: leader → member `Announce` (sequence, bytes, CRC-32), member →
//!     leader `Ready` (receives posted), the data, leader → member `Done` for WRITE
//!     (WRITEs complete nothing at a member), member → leader `Result` (ok, its
//!     CRC-32, when it held everything on CLOCK_MONOTONIC: one clock for every
//!     process on a machine);
//!   - leader → member `Close` (ok or not).
//!
//!   A malformed frame, an unknown type or a version mismatch ends that connection
//!   with a protocol error naming the peer.
//! - **MRP** (UDP [`MRP_UDP_PORT`]): the leader sends the registration to the McstID;
//!   the switch delivers each member's record to the member's own address; a refusing
//!   switch answers with a [`SwitchReport`].
//! - **Data** (UDP 4791): every member's QP is connected to the group's virtual remote
//!   (McstID, QPN 1) with PSN 0; the leader's too.
//!
//! Memory: the leader holds the buffer once (posted messages share it); a member holds
//! the whole message (its receive buffers or its WRITE region), plus per control
//! connection a few hundred bytes.
//!
//! If the switch refuses the group (or never answers), registration fails and the
//! group falls back to the leader's `fallback` overlay (RDMC's binomial pipeline by
//! default) over the same host runtime: the leader frees the switch's state, sends
//! every member `Overlay`, and the buffers travel over per-peer RC connections;
//! [`LeaderReport::path`] says which way the data went and why.

use crate::endpoint::{Clock, Endpoint};
use crate::qp_set::QpSet;
use crate::udp::{TransportConfig, UdpTransport};
use rocast_core::control::registration::{
    GroupSpec, MemberAgent, RegistrationConfig, RegistrationController, RegistrationEvent,
    SwitchReport,
};
use rocast_core::fabric::cepheus::{GroupAddressSpace, VIRTUAL_QPN};
use rocast_core::overlay::{BroadcastDriver, DriverAction, DriverConfig, Scheme};
use rocast_core::rnic::{Event, Payload, QpConfig, RcQueuePair, SendOp, SendRequest};
use rocast_core::rnic::{FixedRate, RateController, Unlimited};
use rocast_core::time::Duration as CoreDuration;
use rocast_core::wire::group_control::{
    Announce, BufferResult, Close, Done, Join, Message, Overlay, Params, StreamDecoder,
    GROUP_CONTROL_PORT, GROUP_CONTROL_VERSION,
};
use rocast_core::wire::mrp::{MrpMember, MrpRelease, MrpRepr, MRP_UDP_PORT};
use rocast_core::wire::{Error as WireError, Ipv4Address, ROCEV2_UDP_PORT};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

/// The control channel's default TCP port.
pub const CONTROL_PORT: u16 = GROUP_CONTROL_PORT;
/// The WRITE region's VA at every member (any value works; the switch rewrites RETHs).
const MEMBER_VA: u64 = 0x1000_0000;
const MEMBER_RKEY: u32 = 0x5a5a;

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
    /// Give up when nothing progresses for this long.
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
}

impl LeaderReport {
    pub fn goodput_gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.transfer.as_secs_f64().max(1e-9) / 1e9
    }
    pub fn all_ok(&self) -> bool {
        self.members.iter().all(|m| m.1)
    }
}

/// What a member received.
#[derive(Clone, Debug)]
pub struct MemberReport {
    pub data: Vec<u8>,
    pub crc32: u32,
    /// The leader's verdict (its CRC equals ours, and it completed).
    pub ok: bool,
}

fn v4(a: Ipv4Addr) -> Ipv4Address {
    Ipv4Address(a.octets())
}

use rocast_core::payload::crc32;

/// A non-blocking control connection carrying [`Message`]s.
struct Control {
    s: TcpStream,
    decoder: StreamDecoder,
    /// Messages decoded from the last read and not handed out yet (at most one read's
    /// worth: reading stops once a message is complete).
    pending: VecDeque<Message>,
    peer: Ipv4Addr,
}

/// Bytes taken from the socket per read.
const CONTROL_READ_LEN: usize = 512;

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
            decoder: StreamDecoder::new(),
            pending: VecDeque::new(),
            peer,
        })
    }

    fn send(&mut self, m: &Message) -> Result<(), McastError> {
        let what = m.message_type().name();
        let f = m
            .to_frame()
            .map_err(|e| McastError::Protocol(format!("cannot send {what}: {e}")))?;
        // Small frames on a fresh socket: a blocking write is fine and simpler.
        let r = self.s.set_nonblocking(false).and_then(|()| {
            let r = self.s.write_all(&f);
            self.s.set_nonblocking(true)?;
            r
        });
        r.map_err(io(format!("send {what} to {}", self.peer)))
    }

    /// The next whole message, if one has arrived. Err on EOF, a broken stream, or a
    /// frame that does not decode (the stream has lost its framing then).
    fn recv(&mut self) -> Result<Option<Message>, McastError> {
        let mut tmp = [0u8; CONTROL_READ_LEN];
        while self.pending.is_empty() {
            match self.s.read(&mut tmp) {
                Ok(0) if self.decoder.buffered() == 0 => {
                    return Err(McastError::Io(format!(
                        "control: {} closed the connection",
                        self.peer
                    )))
                }
                Ok(0) => {
                    return Err(McastError::Protocol(format!(
                        "control: {} closed the connection in the middle of a frame",
                        self.peer
                    )))
                }
                Ok(n) => {
                    let msgs = self.decoder.feed_all(&tmp[..n]).map_err(|e| {
                        let hint = if e == WireError::Unsupported("group control version") {
                            format!(" (this host speaks version {GROUP_CONTROL_VERSION})")
                        } else {
                            String::new()
                        };
                        McastError::Protocol(format!(
                            "control message from {}: {e}{hint}",
                            self.peer
                        ))
                    })?;
                    self.pending.extend(msgs);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(format!("control from {}", self.peer))(e)),
            }
        }
        Ok(self.pending.pop_front())
    }
}

fn endpoint(
    local: Ipv4Addr,
    local_qpn: u32,
    mcst: Ipv4Addr,
    mtu: usize,
    rate_bps: Option<u64>,
) -> Result<Endpoint, McastError> {
    let qp = rc_qp(local, local_qpn, mcst, VIRTUAL_QPN, mtu, rate_bps)?;
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

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine (lab
/// namespaces included), so a member's completion time compares with the leader's
/// start.
pub fn mono_ns() -> u64 {
    // SAFETY: clock_gettime writes the timespec it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A member's verdict: whether its data matched, and when it held all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Verdict {
    ok: bool,
    done_ns: u64,
}

/// Collects every member's `Result` until all answered or `timeout` passes, calling
/// `keep_alive` between polls (the leader's QPs still answer retransmissions).
fn collect_verdicts(
    conns: &mut [Control],
    crc: u32,
    timeout: Duration,
    mut keep_alive: impl FnMut(),
) -> Vec<Option<Verdict>> {
    let mut verdicts: Vec<Option<Verdict>> = vec![None; conns.len()];
    let deadline = StdInstant::now() + timeout;
    while verdicts.iter().any(|v| v.is_none()) && StdInstant::now() < deadline {
        keep_alive();
        for (c, v) in conns.iter_mut().zip(verdicts.iter_mut()) {
            if v.is_some() {
                continue;
            }
            match c.recv() {
                Ok(Some(Message::Result(r))) => {
                    *v = Some(Verdict {
                        ok: r.ok && r.crc32 == crc,
                        done_ns: r.held_ns,
                    });
                }
                Ok(_) => {}
                Err(_) => {
                    *v = Some(Verdict {
                        ok: false,
                        done_ns: 0,
                    })
                }
            }
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    verdicts
}

/// From the start of the transfer until the last member held everything, if all
/// reported on this machine's clock (a member in a VM has its own: its time is earlier
/// than our start, and no latency is claimed).
fn latency(t0_ns: u64, verdicts: &[Option<Verdict>]) -> Option<Duration> {
    let mut last = t0_ns;
    for v in verdicts {
        let v = (*v)?;
        if !v.ok || v.done_ns < t0_ns {
            return None;
        }
        last = last.max(v.done_ns);
    }
    Some(Duration::from_nanos(last - t0_ns))
}

fn report_members(conns: &[Control], verdicts: &[Option<Verdict>]) -> Vec<(Ipv4Addr, bool)> {
    conns
        .iter()
        .zip(verdicts)
        .map(|(c, v)| (c.peer, v.is_some_and(|v| v.ok)))
        .collect()
}

/// Frees the group's switch state (sent twice: it is one UDP datagram).
fn release(mrp: &UdpSocket, mcst: Ipv4Addr) {
    let mut b = [0u8; 8];
    MrpRelease { mcst_id: v4(mcst) }.emit(&mut b);
    for _ in 0..2 {
        let _ = mrp.send_to(&b, SocketAddrV4::new(mcst, MRP_UDP_PORT));
    }
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
        /// Why the switch was not used, when it refused.
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
pub struct Leader {
    cfg: LeaderConfig,
    conns: Vec<Control>,
    mrp: UdpSocket,
    clock: Clock,
    path: LeaderPath,
    registration: Duration,
    seq: u32,
    released: bool,
}

impl Leader {
    /// Waits for `members` to join, registers the group with the switch (MRP), and
    /// falls back to `cfg.fallback` when the switch refuses (or uses `cfg.overlay`).
    pub fn create(cfg: &LeaderConfig) -> Result<Leader, McastError> {
        if cfg.members == 0 || cfg.message_bytes == 0 || cfg.capacity == 0 {
            return Err(McastError::Protocol(
                "need members, a message size and a capacity".into(),
            ));
        }
        let listener = TcpListener::bind(SocketAddrV4::new(cfg.local, cfg.control_port))
            .map_err(io(format!("TCP {}:{}", cfg.local, cfg.control_port)))?;
        listener.set_nonblocking(true).map_err(io("listener"))?;
        let mrp = mrp_socket(cfg.local)?;
        let clock = Clock::new();
        let ep = endpoint(cfg.local, 0x11, cfg.mcst_id, cfg.mtu, cfg.rate_bps)?;
        let params = Message::Params(Params {
            write: cfg.op == McastOp::Write,
            capacity: cfg.capacity as u64,
            message_bytes: u32::try_from(cfg.message_bytes)
                .map_err(|_| McastError::Protocol("messages are at most 4 GiB - 1 bytes".into()))?,
        });

        // 1. Member discovery.
        let mut conns: Vec<Control> = Vec::new();
        let mut joins: Vec<Option<MrpMember>> = Vec::new();
        let deadline = StdInstant::now() + cfg.timeout;
        while joins.iter().filter(|j| j.is_some()).count() < cfg.members {
            if StdInstant::now() > deadline {
                return Err(McastError::Timeout(format!(
                    "{} of {} members joined",
                    joins.iter().flatten().count(),
                    cfg.members
                )));
            }
            match listener.accept() {
                Ok((s, _)) => {
                    let mut c = Control::new(s).map_err(io("control"))?;
                    c.send(&params)?;
                    conns.push(c);
                    joins.push(None);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(io("accept")(e)),
            }
            for (c, j) in conns.iter_mut().zip(joins.iter_mut()) {
                if let Some(Message::Join(join)) = c.recv()? {
                    *j = Some(MrpMember {
                        ip: join.ip,
                        qpn: join.qpn,
                        region: (cfg.op == McastOp::Write).then_some((join.va, join.rkey)),
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let members: Vec<MrpMember> = joins.iter().flatten().copied().collect();
        let mut leader = Leader {
            cfg: cfg.clone(),
            conns,
            mrp,
            clock,
            path: LeaderPath::Cepheus { ep },
            registration: Duration::ZERO,
            seq: 0,
            released: true,
        };
        if let Some(scheme) = cfg.overlay {
            leader.use_overlay(&members, scheme, String::new())?;
            return Ok(leader);
        }

        // 2. Registration (Cepheus §III-C).
        let reg_start = StdInstant::now();
        let me = MrpMember {
            ip: v4(cfg.local),
            qpn: 0x11,
            region: (cfg.op == McastOp::Write).then_some((0, 0)),
        };
        let spec = GroupSpec::in_space(cfg.group_space, v4(cfg.mcst_id), me, members.clone())
            .map_err(|e| McastError::Registration(e.to_string()))?;
        // A userspace switch and busy hosts answer in milliseconds, not microseconds.
        let reg_cfg = RegistrationConfig {
            timeout: CoreDuration::from_ms(250),
            retries: 3,
        };
        let mut ctl = RegistrationController::new(spec, reg_cfg);
        let send_mrp = |mrp: &UdpSocket, pkts: Vec<MrpRepr>| -> Result<(), McastError> {
            for m in pkts {
                let mut b = vec![0u8; m.buffer_len()];
                m.emit(&mut b);
                mrp.send_to(&b, SocketAddrV4::new(cfg.mcst_id, MRP_UDP_PORT))
                    .map_err(io("send MRP"))?;
            }
            Ok(())
        };
        leader.released = false;
        send_mrp(&leader.mrp, ctl.start(leader.clock.now()).collect())?;
        let registered = loop {
            let now = leader.clock.now();
            if ctl.poll_timeout().is_some_and(|t| t <= now) {
                send_mrp(&leader.mrp, ctl.handle_timeout(now).collect())?;
            }
            for c in leader.conns.iter_mut() {
                if let Some(Message::Confirm(conf)) = c.recv()? {
                    ctl.handle_confirmation(leader.clock.now(), &conf);
                }
            }
            let mut buf = [0u8; 1500];
            while let Ok((n, _)) = leader.mrp.recv_from(&mut buf) {
                if let Ok(r) = SwitchReport::parse(&buf[..n]) {
                    ctl.handle_switch_report(leader.clock.now(), r);
                }
            }
            if let Some(ev) = ctl.poll_event() {
                break ev;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        leader.registration = reg_start.elapsed();
        if let RegistrationEvent::Failed(f) = registered {
            // The group goes through the overlay (Cepheus §V-D, RDMC).
            leader.release();
            leader.use_overlay(
                &members,
                cfg.fallback,
                format!("registration failed: {f:?}"),
            )?;
        }
        Ok(leader)
    }

    /// Switches the group to an overlay broadcast: tells every member the roster and
    /// waits until all have their connections up.
    fn use_overlay(
        &mut self,
        members: &[MrpMember],
        scheme: Scheme,
        why: String,
    ) -> Result<(), McastError> {
        let mut roster = vec![self.cfg.local];
        roster.extend(members.iter().map(|m| Ipv4Addr::from(m.ip.0)));
        if roster.len() > 256 {
            return Err(McastError::Protocol(
                "overlay groups hold at most 256 ranks".into(),
            ));
        }
        // The switch QP's socket must go before the overlay's binds the same port.
        self.path = LeaderPath::Detached;
        let msg = Message::Overlay(Overlay {
            scheme: scheme.code(),
            block_bytes: u32::try_from(self.cfg.block_bytes)
                .map_err(|_| McastError::Protocol("blocks are at most 4 GiB - 1 bytes".into()))?,
            rate_mbps: (self.cfg.rate_bps.unwrap_or(0) / 1_000_000) as u32,
            window: self.cfg.window,
            roster: roster.iter().map(|&ip| v4(ip)).collect(),
        });
        for c in self.conns.iter_mut() {
            c.send(&msg)?;
        }
        let set = overlay_qps(self.cfg.local, self.cfg.mtu)?;
        self.path = LeaderPath::Overlay {
            set,
            roster,
            scheme,
            why,
        };
        self.wait_ready()
    }

    /// Waits for `Ready` from every member, keeping the QPs serviced.
    fn wait_ready(&mut self) -> Result<(), McastError> {
        let mut ready = vec![false; self.conns.len()];
        let deadline = StdInstant::now() + self.cfg.timeout;
        while ready.iter().any(|r| !r) {
            self.service();
            for (c, r) in self.conns.iter_mut().zip(ready.iter_mut()) {
                if let Some(Message::Ready) = c.recv()? {
                    *r = true;
                }
            }
            if StdInstant::now() > deadline {
                return Err(McastError::Timeout("members never became ready".into()));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// Lets the QPs answer what arrives (retransmissions, late ACKs).
    fn service(&mut self) {
        self.path.service(&self.clock);
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
        if data.is_empty() || data.len() > self.cfg.capacity {
            return Err(McastError::Protocol(format!(
                "a buffer of {} bytes: the group carries 1..={} per send",
                data.len(),
                self.cfg.capacity
            )));
        }
        self.seq += 1;
        let crc = crc32(&data);
        let announce = Message::Announce(Announce {
            seq: self.seq,
            bytes: data.len() as u64,
            crc32: crc,
        });
        for c in self.conns.iter_mut() {
            c.send(&announce)?;
        }
        self.wait_ready()?;
        let t0 = StdInstant::now();
        let t0_ns = mono_ns();
        let cfg = self.cfg.clone();
        let retransmitted_before = self.retransmitted();
        match &mut self.path {
            LeaderPath::Cepheus { ep } => {
                cepheus_send(&cfg, &data, ep, &self.clock)?;
                if cfg.op == McastOp::Write {
                    // WRITEs complete nothing at a member: tell them it is all there.
                    for c in self.conns.iter_mut() {
                        c.send(&Message::Done(Done { seq: self.seq }))?;
                    }
                }
            }
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
                )?;
                let mut own = data.to_vec();
                run_overlay(
                    &self.clock,
                    set,
                    0,
                    roster.len(),
                    *scheme,
                    driver_cfg,
                    &mut own,
                    cfg.timeout,
                )?;
            }
            LeaderPath::Detached => {
                return Err(McastError::Protocol("the group has no data path".into()))
            }
        }
        let transfer = t0.elapsed();
        let (conns, path, clock) = (&mut self.conns, &mut self.path, &self.clock);
        let verdicts = collect_verdicts(conns, crc, cfg.timeout, || path.service(clock));
        Ok(LeaderReport {
            bytes: data.len() as u64,
            crc32: crc,
            registration: self.registration,
            transfer,
            members: report_members(&self.conns, &verdicts),
            latency: latency(t0_ns, &verdicts),
            retransmitted: self.retransmitted() - retransmitted_before,
            path: self.path(),
        })
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

    fn release(&mut self) {
        if !self.released {
            release(&self.mrp, self.cfg.mcst_id);
            self.released = true;
        }
    }

    /// Ends the group: every member hears `ok` (`Close`), and the switch frees the
    /// group's tables.
    pub fn close(mut self, ok: bool) {
        for c in self.conns.iter_mut() {
            let _ = c.send(&Message::Close(Close { ok }));
        }
        self.release();
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        // A leader that fails or is dropped still frees the switch and tells everyone.
        if !self.released {
            for c in self.conns.iter_mut() {
                let _ = c.send(&Message::Close(Close { ok: false }));
            }
        }
        self.release();
    }
}

/// Posts `data` on the group's QP in `message_bytes` messages and waits until every
/// one is acknowledged (by every member: the switch aggregates the ACKs).
fn cepheus_send(
    cfg: &LeaderConfig,
    data: &Arc<[u8]>,
    ep: &mut Endpoint,
    clock: &Clock,
) -> Result<(), McastError> {
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
    while done < n_msgs {
        let act = ep.poll_once(clock).map_err(io("endpoint"))?;
        while let Some(ev) = ep.qp.poll_event() {
            match ev {
                Event::SendComplete { result: Ok(()), .. } => {
                    done += 1;
                    last_progress = StdInstant::now();
                }
                Event::SendComplete { result: Err(e), .. } | Event::QpError(e) => {
                    return Err(McastError::Transfer(e.to_string()))
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
    }
    Ok(())
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
    /// Between the two: the switch QP closed, the overlay not up yet.
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
    agent: MemberAgent,
    clock: Clock,
    path: MemberPath,
    write: bool,
    capacity: usize,
    msg: usize,
    qpn: u32,
}

impl Member {
    /// Connects to the leader, opens the QP (and WRITE region) the group's capacity
    /// needs, and sends the Join.
    pub fn join(cfg: &MemberConfig) -> Result<Member, McastError> {
        let clock = Clock::new();
        let mrp = mrp_socket(cfg.local)?;
        let agent = MemberAgent::new(v4(cfg.local)).with_group_space(cfg.group_space);
        let deadline = StdInstant::now() + cfg.timeout;
        let s = loop {
            match TcpStream::connect_timeout(
                &SocketAddrV4::new(cfg.leader, cfg.control_port).into(),
                Duration::from_secs(1),
            ) {
                Ok(s) => break s,
                Err(_) if StdInstant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => return Err(io("connect to the leader")(e)),
            }
        };
        let mut c = Control::new(s).map_err(io("control"))?;
        let params = loop {
            if let Some(Message::Params(p)) = c.recv()? {
                break p;
            }
            if StdInstant::now() > deadline {
                return Err(McastError::Timeout("no parameters from the leader".into()));
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let write = params.write;
        let capacity = params.capacity;
        let msg = params.message_bytes as usize;
        if msg == 0 || capacity == 0 || capacity > (4u64 << 30) {
            return Err(McastError::Protocol("sizes out of range".into()));
        }
        let capacity = capacity as usize;
        let qpn = 0x100 | (cfg.local.octets()[3] as u32);
        let mut ep = endpoint(cfg.local, qpn, cfg.mcst_id, cfg.mtu, None)?;
        if write {
            ep.qp
                .register_mr(MEMBER_VA, capacity, MEMBER_RKEY)
                .map_err(|e| McastError::Protocol(e.to_string()))?;
        }
        c.send(&Message::Join(Join {
            ip: v4(cfg.local),
            qpn,
            va: MEMBER_VA,
            rkey: MEMBER_RKEY,
        }))?;
        Ok(Member {
            cfg: cfg.clone(),
            c,
            mrp,
            agent,
            clock,
            path: MemberPath::Cepheus { ep },
            write,
            capacity,
            msg,
            qpn,
        })
    }

    /// Answers MRP packets that list this host (Cepheus §III-C step 3).
    fn answer_mrp(&mut self) -> Result<(), McastError> {
        let mut buf = [0u8; 1500];
        while let Ok((n, _)) = self.mrp.recv_from(&mut buf) {
            if let Ok(m) = MrpRepr::parse(&buf[..n]) {
                if let Some(conf) = self.agent.handle_mrp(&m) {
                    self.c.send(&Message::Confirm(conf))?;
                }
            }
        }
        Ok(())
    }

    /// Services the QPs and the MRP socket; waits briefly when idle.
    fn service(&mut self, wait: bool) -> Result<(), McastError> {
        self.answer_mrp()?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.c.s);
        match &mut self.path {
            MemberPath::Cepheus { ep } => {
                let act = ep.poll_once(&self.clock).map_err(io("endpoint"))?;
                if wait && act.is_idle() {
                    ep.wait(&self.clock, Some(fd), Duration::from_millis(1))
                        .map_err(io("wait"))?;
                }
            }
            MemberPath::Overlay { set, .. } => {
                let busy = set.poll_once(&self.clock).map_err(io("overlay"))?;
                if wait && !busy {
                    set.wait(&self.clock, Some(fd), Duration::from_millis(1))
                        .map_err(io("wait"))?;
                }
            }
            MemberPath::Detached => std::thread::sleep(Duration::from_micros(200)),
        }
        Ok(())
    }

    /// The next thing that happens to the group: a buffer arrived, or the leader
    /// closed it. Errors (a failed QP, a vanished leader, a timeout) end the group.
    pub fn next(&mut self) -> Result<MemberEvent, McastError> {
        let mut last = StdInstant::now();
        loop {
            self.service(true)?;
            match self.c.recv()? {
                Some(Message::Overlay(o)) => {
                    self.use_overlay(o)?;
                    last = StdInstant::now();
                }
                Some(Message::Announce(a)) => {
                    if a.bytes == 0 || a.bytes > self.capacity as u64 {
                        return Err(McastError::Protocol("a buffer over the capacity".into()));
                    }
                    return self
                        .receive(a.seq, a.bytes as usize, a.crc32)
                        .map(MemberEvent::Received);
                }
                Some(Message::Close(c)) => return Ok(MemberEvent::Closed { ok: c.ok }),
                Some(_) => return Err(McastError::Protocol("unexpected control message".into())),
                None => {}
            }
            if last.elapsed() > self.cfg.timeout {
                return Err(McastError::Timeout("nothing from the leader".into()));
            }
        }
    }

    /// The group goes through an overlay: this host's rank, and its connections.
    /// (The wire parser has checked the block size, window and roster length.)
    fn use_overlay(&mut self, msg: Overlay) -> Result<(), McastError> {
        let scheme = Scheme::from_code(msg.scheme).ok_or_else(|| {
            McastError::Protocol(format!("unknown overlay scheme code {}", msg.scheme))
        })?;
        let block = msg.block_bytes as u64;
        let mbps = msg.rate_mbps as u64;
        let rate_bps = (mbps > 0).then_some(mbps * 1_000_000);
        let window = msg.window as u32;
        let roster: Vec<Ipv4Addr> = msg.roster.iter().map(|a| Ipv4Addr::from(a.0)).collect();
        let rank = roster
            .iter()
            .position(|&ip| ip == self.cfg.local)
            .filter(|&r| r > 0)
            .ok_or_else(|| McastError::Protocol("this host is not in the roster".into()))?;
        // The switch QP's socket goes first: the overlay binds the same port.
        self.path = MemberPath::Detached;
        let set = overlay_qps(self.cfg.local, self.cfg.mtu)?;
        self.path = MemberPath::Overlay {
            set,
            rank,
            roster,
            scheme,
            block,
            window,
            rate_bps,
        };
        self.c.send(&Message::Ready)
    }

    /// Receives buffer `seq` of `bytes` bytes whose CRC-32 is `want`.
    fn receive(&mut self, seq: u32, bytes: usize, want: u32) -> Result<MemberReport, McastError> {
        let n_msgs = bytes.div_ceil(self.msg).max(1);
        let (data, held_ns) = match &mut self.path {
            MemberPath::Overlay {
                set,
                rank,
                roster,
                scheme,
                block,
                window,
                rate_bps,
            } => {
                let driver_cfg = DriverConfig {
                    message_bytes: bytes as u64,
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
                )?;
                post_overlay_receives(set, *rank, &sched, *block)?;
                self.c.send(&Message::Ready)?;
                let mut data = vec![0u8; bytes];
                let (r, n, s) = (*rank, roster.len(), *scheme);
                let held = run_overlay(
                    &self.clock,
                    set,
                    r,
                    n,
                    s,
                    driver_cfg,
                    &mut data,
                    self.cfg.timeout,
                )?;
                (data, held)
            }
            MemberPath::Cepheus { ep } => {
                if !self.write {
                    for i in 0..n_msgs {
                        let len = self.msg.min(bytes - i * self.msg);
                        ep.qp
                            .post_recv((seq as u64) << 32 | i as u64, len)
                            .map_err(|e| McastError::Protocol(e.to_string()))?;
                    }
                }
                self.c.send(&Message::Ready)?;
                self.cepheus_receive(seq, bytes, n_msgs)?
            }
            MemberPath::Detached => {
                return Err(McastError::Protocol("the group has no data path".into()))
            }
        };
        let ours = crc32(&data);
        let ok = ours == want;
        self.c.send(&Message::Result(BufferResult {
            ok,
            crc32: ours,
            held_ns,
        }))?;
        Ok(MemberReport {
            data,
            crc32: ours,
            ok,
        })
    }

    /// The Cepheus path's receive: SEND completes per message; WRITE completes nothing
    /// here, so the leader's `Done` says the region holds it all.
    fn cepheus_receive(
        &mut self,
        seq: u32,
        bytes: usize,
        n_msgs: usize,
    ) -> Result<(Vec<u8>, u64), McastError> {
        let mut parts: Vec<Option<Vec<u8>>> = vec![None; if self.write { 0 } else { n_msgs }];
        let mut held = 0usize;
        let mut held_ns = 0u64;
        let mut last = StdInstant::now();
        loop {
            self.answer_mrp()?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&self.c.s);
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
            if !self.write && held == n_msgs {
                return Ok((parts.into_iter().flatten().flatten().collect(), held_ns));
            }
            match self.c.recv()? {
                Some(Message::Done(d)) if self.write && d.seq == seq => {
                    let data = ep
                        .qp
                        .mr(MEMBER_RKEY)
                        .map(|m| m.data[..bytes].to_vec())
                        .unwrap_or_default();
                    return Ok((data, held_ns));
                }
                Some(Message::Close(_)) => {
                    return Err(McastError::Transfer(
                        "the leader closed mid-transfer".into(),
                    ))
                }
                Some(_) => return Err(McastError::Protocol("unexpected control message".into())),
                None => {}
            }
            if act.is_idle() {
                if last.elapsed() > self.cfg.timeout {
                    return Err(McastError::Timeout("no data from the leader".into()));
                }
                ep.wait(&self.clock, Some(fd), Duration::from_millis(1))
                    .map_err(io("wait"))?;
            }
        }
    }

    /// This member's QPN on the group's switch connection.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
}

/// One overlay connection: rank `rank`'s QP toward rank `peer`.
fn overlay_qp(
    local: Ipv4Addr,
    rank: usize,
    peer: usize,
    peer_ip: Ipv4Addr,
    mtu: usize,
    rate_bps: Option<u64>,
) -> Result<RcQueuePair, McastError> {
    rc_qp(
        local,
        overlay_qpn(rank, peer),
        peer_ip,
        overlay_qpn(peer, rank),
        mtu,
        rate_bps,
    )
}

/// An RC QP as every rocast host here runs one: UDP source port 4791 (one socket per
/// host), PSNs 0, the given MTU, and a pacer at `rate_bps` if set.
fn rc_qp(
    local: Ipv4Addr,
    local_qpn: u32,
    remote: Ipv4Addr,
    remote_qpn: u32,
    mtu: usize,
    rate_bps: Option<u64>,
) -> Result<RcQueuePair, McastError> {
    let mut c = QpConfig::new(v4(local), local_qpn, v4(remote), remote_qpn);
    c.udp_src_port = ROCEV2_UDP_PORT;
    c.mtu = mtu;
    // Userspace hops (switch, endpoints) add milliseconds under load; a timeout below
    // that retransmits what is merely queued.
    c.retransmit_timeout = CoreDuration::from_ms(20);
    let rate: Box<dyn RateController> = match rate_bps {
        // 64 KB of burst: a late wakeup catches up instead of losing the rate.
        Some(r) => Box::new(FixedRate::with_burst(r, 64 << 10)),
        None => Box::new(Unlimited::default()),
    };
    RcQueuePair::with_rate_controller(c, rate).map_err(|e| McastError::Protocol(e.to_string()))
}

/// The socket of `rank`'s overlay connections (QPs are added per buffer by
/// [`ensure_overlay_peers`]: which peers a rank talks to depends on the block count).
fn overlay_qps(local: Ipv4Addr, mtu: usize) -> Result<QpSet, McastError> {
    let probe = overlay_qp(local, 0, 1, local, mtu, None)?;
    QpSet::bind(local, probe.max_packet_len()).map_err(io(format!("UDP {local}:4791")))
}

/// Adds the QPs toward every peer `rank` has in one broadcast of `driver_cfg` that
/// are not there yet (both ends compute the same schedule, so both add the pair).
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
) -> Result<rocast_core::overlay::Schedule, McastError> {
    let sched =
        rocast_core::overlay::Schedule::new(scheme, roster.len() as u32, 0, driver_cfg.blocks())
            .map_err(|e| McastError::Protocol(e.to_string()))?;
    for peer in sched.peers_of(rank as u32) {
        let p = peer as usize;
        if set.qp(overlay_qpn(rank, p)).is_none() {
            let qp = overlay_qp(local, rank, p, roster[p], mtu, rate_bps)?;
            set.add(qp).map_err(io("QP"))?;
        }
    }
    Ok(sched)
}

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

/// Runs `rank`'s part of an overlay broadcast until it holds the whole message and
/// every send it owes completed. `buf` holds the message (the root's is full).
#[allow(clippy::too_many_arguments)]
fn run_overlay(
    clock: &Clock,
    set: &mut QpSet,
    rank: usize,
    n: usize,
    scheme: Scheme,
    driver_cfg: DriverConfig,
    buf: &mut [u8],
    timeout: Duration,
) -> Result<u64, McastError> {
    // The caller's clock: the QPs' timers and pacer hold instants of it, so a fresh
    // clock per broadcast would put them in the future and stall every later send.
    let mut held_ns = None;
    let mut driver = BroadcastDriver::new(scheme, n as u32, 0, rank as u32, driver_cfg)
        .map_err(|e| McastError::Protocol(e.to_string()))?;
    let peers: Vec<(usize, u32)> = set.qpns().map(|q| (((q & 0xff) as usize), q)).collect();
    let mut last = StdInstant::now();
    while !driver.is_complete() {
        if held_ns.is_none() && driver.has_message() {
            held_ns = Some(mono_ns());
        }
        while let Some(a) = driver.poll_action() {
            if let DriverAction::SendBlock { id, to, block, .. } = a {
                let (off, len) = driver_cfg.block_range(block);
                let qp = set
                    .qp_mut(overlay_qpn(rank, to as usize))
                    .ok_or_else(|| McastError::Protocol(format!("no QP to rank {to}")))?;
                qp.post_send(SendRequest {
                    wr_id: id as u64,
                    op: SendOp::SendImm(block),
                    data: Payload::Bytes(buf[off as usize..(off + len) as usize].into()),
                })
                .map_err(|e| McastError::Transfer(e.to_string()))?;
            }
        }
        let busy = set.poll_once(clock).map_err(io("overlay"))?;
        for &(peer, qpn) in &peers {
            let qp = set.qp_mut(qpn).expect("listed");
            while let Some(ev) = qp.poll_event() {
                last = StdInstant::now();
                match ev {
                    Event::SendComplete {
                        wr_id,
                        result: Ok(()),
                    } => driver
                        .on_send_complete(wr_id as u32)
                        .map_err(|e| McastError::Protocol(e.to_string()))?,
                    Event::Recv {
                        data,
                        imm: Some(block),
                        ..
                    } => {
                        let (off, len) = driver_cfg.block_range(block);
                        if data.len() as u64 != len || off + len > buf.len() as u64 {
                            return Err(McastError::Protocol(format!(
                                "block {block} of {} bytes",
                                data.len()
                            )));
                        }
                        buf[off as usize..(off + len) as usize].copy_from_slice(&data);
                        driver
                            .on_block(peer as u32, block)
                            .map_err(|e| McastError::Protocol(e.to_string()))?;
                    }
                    Event::SendComplete { result: Err(e), .. }
                    | Event::RecvError { error: e, .. }
                    | Event::QpError(e) => return Err(McastError::Transfer(e.to_string())),
                    _ => {}
                }
            }
        }
        if !busy {
            if last.elapsed() > timeout {
                return Err(McastError::Timeout("overlay broadcast stalled".into()));
            }
            set.wait(clock, None, Duration::from_millis(1))
                .map_err(io("wait"))?;
        }
    }
    Ok(held_ns.unwrap_or_else(mono_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member_cfg(local: Ipv4Addr, port: u16) -> MemberConfig {
        MemberConfig {
            local,
            leader: Ipv4Addr::new(127, 0, 0, 31),
            mcst_id: Ipv4Addr::new(10, 77, 0, 200),
            group_space: GroupAddressSpace::parse("10.77.0.128/25").unwrap(),
            control_port: port,
            mtu: 1024,
            timeout: Duration::from_secs(10),
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
            let mut params = [0u8; 17];
            s.read_exact(&mut params).unwrap();
            let mut old_join = vec![2u8, 0, 20];
            old_join.extend_from_slice(&[127, 0, 0, 37, 0, 0, 1, 37]);
            old_join.extend_from_slice(&[0; 12]);
            s.write_all(&old_join).unwrap();
            params
        });
        let cfg = LeaderConfig {
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
            timeout: Duration::from_secs(10),
        };
        let err = Leader::create(&cfg).err().expect("refused");
        let text = err.to_string();
        assert!(matches!(err, McastError::Protocol(_)), "{text}");
        assert!(text.contains("unsupported group control version"), "{text}");
        // What the leader sent first is this build's Params.
        let params = member.join().unwrap();
        assert_eq!(
            rocast_core::wire::group_control::parse_frame(&params),
            Ok((
                Message::Params(Params {
                    write: false,
                    capacity: 8192,
                    message_bytes: 4096
                }),
                17
            ))
        );
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
