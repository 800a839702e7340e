//! The multicast API on real sockets (issue 8): a group's leader sends a buffer by
//! SEND or RDMA WRITE to every member through a Cepheus switch (`rocast switch`), each
//! member receives it, and the close reports success or failure to all, as in RDMC.
//!
//! Every protocol piece is the core's: the queue pairs are [`RcQueuePair`]s on
//! [`Endpoint`]s, registration is [`RegistrationController`] / [`MemberAgent`] (Cepheus
//! §III-C), the switch runs [`rocast_core::fabric::FrameSwitch`]. This module only
//! carries their messages:
//!
//! - **Control channel** (TCP, the leader's `control_port`): member discovery and the
//!   close. Frames are `type (1) | length (2, big-endian) | body`:
//!   1. leader → member `Params`: op (0 SEND, 1 WRITE), total bytes (8), message bytes
//!      (4) — sent as soon as a member connects, so it can post its buffers;
//!   2. member → leader `Join`: IP (4), QPN (4), VA (8), RKey (4);
//!   3. member → leader `Confirm`: a [`Confirmation`] (12);
//!   4. leader → member `Done`: ok (1), bytes (8), CRC-32 of the data (4);
//!   5. member → leader `Result`: ok (1), CRC-32 of what it holds (4), when it held
//!      all of it (8, CLOCK_MONOTONIC ns: one clock for every process on a machine);
//!   6. leader → member `Overlay`: the scheme, block size, pacing and roster, when the
//!      group goes through an overlay broadcast (forced, or the switch refused it);
//!   7. member → leader `Ready` (its overlay connections are up); 8. leader → member
//!      `Go`.
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
//! transfer fails with that reason; falling back to an overlay (the binomial pipeline
//! over the same host runtime) is the next step and not built yet.

use crate::endpoint::{Clock, Endpoint};
use crate::qp_set::QpSet;
use crate::udp::{TransportConfig, UdpTransport};
use rocast_core::control::registration::{
    Confirmation, GroupSpec, MemberAgent, RegistrationConfig, RegistrationController,
    RegistrationEvent, SwitchReport, CONFIRMATION_LEN,
};
use rocast_core::fabric::cepheus::{GroupAddressSpace, VIRTUAL_QPN};
use rocast_core::overlay::{BroadcastDriver, DriverAction, DriverConfig, Scheme};
use rocast_core::rnic::{Event, Payload, QpConfig, RcQueuePair, SendOp, SendRequest};
use rocast_core::rnic::{FixedRate, RateController, Unlimited};
use rocast_core::time::Duration as CoreDuration;
use rocast_core::wire::mrp::{MrpMember, MrpRelease, MrpRepr, MRP_UDP_PORT};
use rocast_core::wire::{Ipv4Address, Psn, ROCEV2_UDP_PORT};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

/// The control channel's default TCP port (after RoCE's 4791 and MRP's 4792).
pub const CONTROL_PORT: u16 = 4793;
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

/// A framed, non-blocking control connection.
struct Control {
    s: TcpStream,
    inbuf: Vec<u8>,
    peer: Ipv4Addr,
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
            inbuf: Vec::new(),
            peer,
        })
    }
    fn send(&mut self, ty: u8, body: &[u8]) -> io::Result<()> {
        let mut f = vec![ty];
        f.extend_from_slice(&(body.len() as u16).to_be_bytes());
        f.extend_from_slice(body);
        // Small frames on a fresh socket: a blocking write is fine and simpler.
        self.s.set_nonblocking(false)?;
        let r = self.s.write_all(&f);
        self.s.set_nonblocking(true)?;
        r
    }
    /// The next whole frame, if one has arrived. Err on EOF or a broken stream.
    fn recv(&mut self) -> io::Result<Option<(u8, Vec<u8>)>> {
        let mut tmp = [0u8; 512];
        loop {
            match self.s.read(&mut tmp) {
                Ok(0) => {
                    if self.inbuf.is_empty() {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "peer closed the control connection",
                        ));
                    }
                    break;
                }
                Ok(n) => self.inbuf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.inbuf.len() < 3 {
            return Ok(None);
        }
        let len = u16::from_be_bytes([self.inbuf[1], self.inbuf[2]]) as usize;
        if self.inbuf.len() < 3 + len {
            return Ok(None);
        }
        let ty = self.inbuf[0];
        let body = self.inbuf[3..3 + len].to_vec();
        self.inbuf.drain(..3 + len);
        Ok(Some((ty, body)))
    }
}

fn endpoint(
    local: Ipv4Addr,
    local_qpn: u32,
    mcst: Ipv4Addr,
    mtu: usize,
    rate_bps: Option<u64>,
) -> Result<Endpoint, McastError> {
    let mut c = QpConfig::new(v4(local), local_qpn, v4(mcst), VIRTUAL_QPN);
    c.udp_src_port = ROCEV2_UDP_PORT;
    c.mtu = mtu;
    c.send_psn = Psn::new(0);
    c.recv_psn = Psn::new(0);
    // Userspace hops (switch, endpoints) add milliseconds under load; a timeout below
    // that retransmits what is merely queued.
    c.retransmit_timeout = CoreDuration::from_ms(20);
    let rate: Box<dyn RateController> = match rate_bps {
        // 64 KB of burst: a late wakeup catches up instead of losing the rate.
        Some(r) => Box::new(FixedRate::with_burst(r, 64 << 10)),
        None => Box::new(Unlimited::default()),
    };
    let qp = RcQueuePair::with_rate_controller(c, rate)
        .map_err(|e| McastError::Protocol(e.to_string()))?;
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

/// Control message 5, `Result`: ok (1), CRC-32 (4), completion time (8, CLOCK_MONOTONIC ns).
fn result_message(ok: bool, crc: u32, done_ns: u64) -> Vec<u8> {
    let mut m = vec![ok as u8];
    m.extend_from_slice(&crc.to_be_bytes());
    m.extend_from_slice(&done_ns.to_be_bytes());
    m
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
                Ok(Some((5, b))) if b.len() == 13 => {
                    let theirs = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
                    *v = Some(Verdict {
                        ok: b[0] == 1 && theirs == crc,
                        done_ns: u64::from_be_bytes(b[5..13].try_into().expect("8 bytes")),
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
/// reported.
fn latency(t0_ns: u64, verdicts: &[Option<Verdict>]) -> Option<Duration> {
    let mut last = t0_ns;
    for v in verdicts {
        let v = (*v)?;
        if !v.ok {
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

/// Runs the leader: waits for `members` to join, registers the group, sends `data`,
/// and collects every member's verdict.
pub fn lead(cfg: &LeaderConfig, data: Arc<[u8]>) -> Result<LeaderReport, McastError> {
    if cfg.members == 0 || cfg.message_bytes == 0 {
        return Err(McastError::Protocol(
            "need members and a message size".into(),
        ));
    }
    let listener = TcpListener::bind(SocketAddrV4::new(cfg.local, cfg.control_port))
        .map_err(io(format!("TCP {}:{}", cfg.local, cfg.control_port)))?;
    listener.set_nonblocking(true).map_err(io("listener"))?;
    let mrp = mrp_socket(cfg.local)?;
    let clock = Clock::new();
    let mut ep = endpoint(cfg.local, 0x11, cfg.mcst_id, cfg.mtu, cfg.rate_bps)?;
    let total = data.len() as u64;
    let mut params = vec![(cfg.op == McastOp::Write) as u8];
    params.extend_from_slice(&total.to_be_bytes());
    params.extend_from_slice(&(cfg.message_bytes as u32).to_be_bytes());

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
                c.send(1, &params).map_err(io("send params"))?;
                conns.push(c);
                joins.push(None);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(io("accept")(e)),
        }
        for (c, j) in conns.iter_mut().zip(joins.iter_mut()) {
            if let Some((2, b)) = c.recv().map_err(io("control"))? {
                if b.len() != 20 {
                    return Err(McastError::Protocol("bad Join".into()));
                }
                let w = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                let va = u64::from_be_bytes(b[8..16].try_into().expect("8 bytes"));
                *j = Some(MrpMember {
                    ip: Ipv4Address::from_u32(w(0)),
                    qpn: w(4),
                    region: (cfg.op == McastOp::Write).then_some((va, w(16))),
                });
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }

    let member_ips: Vec<Ipv4Addr> = joins
        .iter()
        .flatten()
        .map(|m| Ipv4Addr::from(m.ip.0))
        .collect();
    if let Some(scheme) = cfg.overlay {
        drop(ep);
        return lead_overlay(cfg, &data, &mut conns, &member_ips, scheme, String::new());
    }

    // 2. Registration (Cepheus §III-C).
    let reg_start = StdInstant::now();
    let leader = MrpMember {
        ip: v4(cfg.local),
        qpn: 0x11,
        region: (cfg.op == McastOp::Write).then_some((0, 0)),
    };
    let members: Vec<MrpMember> = joins.iter().flatten().copied().collect();
    let spec = GroupSpec::in_space(cfg.group_space, v4(cfg.mcst_id), leader, members)
        .map_err(|e| McastError::Registration(e.to_string()))?;
    // A userspace switch and busy hosts answer in milliseconds, not microseconds.
    let reg_cfg = RegistrationConfig {
        timeout: CoreDuration::from_ms(250),
        retries: 3,
    };
    let mut ctl = RegistrationController::new(spec, reg_cfg);
    let send_mrp = |pkts: Vec<MrpRepr>| -> Result<(), McastError> {
        for m in pkts {
            let mut b = vec![0u8; m.buffer_len()];
            m.emit(&mut b);
            mrp.send_to(&b, SocketAddrV4::new(cfg.mcst_id, MRP_UDP_PORT))
                .map_err(io("send MRP"))?;
        }
        Ok(())
    };
    send_mrp(ctl.start(clock.now()))?;
    let registered = loop {
        let now = clock.now();
        if ctl.poll_timeout().is_some_and(|t| t <= now) {
            send_mrp(ctl.handle_timeout(now))?;
        }
        for c in conns.iter_mut() {
            if let Some((3, b)) = c.recv().map_err(io("control"))? {
                let conf =
                    Confirmation::parse(&b).map_err(|e| McastError::Protocol(e.to_string()))?;
                ctl.handle_confirmation(clock.now(), &conf);
            }
        }
        let mut buf = [0u8; 1500];
        while let Ok((n, _)) = mrp.recv_from(&mut buf) {
            if let Ok(r) = SwitchReport::parse(&buf[..n]) {
                ctl.handle_switch_report(clock.now(), r);
            }
        }
        if let Some(ev) = ctl.poll_event() {
            break ev;
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    if let RegistrationEvent::Failed(f) = registered {
        // The same transfer goes through the overlay (Cepheus §V-D, RDMC).
        drop(ep);
        let why = format!("registration failed: {f:?}");
        return lead_overlay(cfg, &data, &mut conns, &member_ips, cfg.fallback, why);
    }
    let registration = reg_start.elapsed();
    let result = transfer_and_close(cfg, &data, &mut ep, &clock, &mut conns);
    release(&mrp, cfg.mcst_id);
    if result.is_err() {
        // Failure is reported to all, as success is.
        for c in conns.iter_mut() {
            let _ = c.send(4, &[0u8; 13]);
        }
    }
    let (transfer, t0_ns, crc, verdicts) = result?;
    Ok(LeaderReport {
        bytes: total,
        crc32: crc,
        registration,
        transfer,
        members: report_members(&conns, &verdicts),
        latency: latency(t0_ns, &verdicts),
        retransmitted: ep.qp.stats().tx_retransmitted,
        path: "cepheus".into(),
    })
}

/// The QPN rank `from` uses for its connection to rank `to` in an overlay broadcast
/// (both ends compute it, so no exchange is needed; ranks < 256).
fn overlay_qpn(from: usize, to: usize) -> u32 {
    0x10000 | ((from as u32) << 8) | to as u32
}

/// The QPs of `rank`'s overlay connections, receives posted for every block it will
/// get, on one socket.
fn overlay_qps(
    local: Ipv4Addr,
    rank: usize,
    roster: &[Ipv4Addr],
    driver_cfg: &DriverConfig,
    scheme: Scheme,
    mtu: usize,
    rate_bps: Option<u64>,
) -> Result<QpSet, McastError> {
    let sched =
        rocast_core::overlay::Schedule::new(scheme, roster.len() as u32, 0, driver_cfg.blocks())
            .map_err(|e| McastError::Protocol(e.to_string()))?;
    let mut set: Option<QpSet> = None;
    for peer in sched.peers_of(rank as u32) {
        let p = peer as usize;
        let mut c = QpConfig::new(
            v4(local),
            overlay_qpn(rank, p),
            v4(roster[p]),
            overlay_qpn(p, rank),
        );
        c.udp_src_port = ROCEV2_UDP_PORT;
        c.mtu = mtu;
        c.retransmit_timeout = CoreDuration::from_ms(20);
        let rate: Box<dyn RateController> = match rate_bps {
            Some(r) => Box::new(FixedRate::with_burst(r, 64 << 10)),
            None => Box::new(Unlimited::default()),
        };
        let mut qp = RcQueuePair::with_rate_controller(c, rate)
            .map_err(|e| McastError::Protocol(e.to_string()))?;
        let expected = sched
            .receives_of(rank as u32)
            .iter()
            .filter(|(_, t)| t.peer == peer)
            .count();
        for i in 0..expected {
            qp.post_recv(i as u64, driver_cfg.block_bytes as usize)
                .map_err(|e| McastError::Protocol(e.to_string()))?;
        }
        if set.is_none() {
            set = Some(
                QpSet::bind(local, qp.max_packet_len()).map_err(io(format!("UDP {local}:4791")))?,
            );
        }
        set.as_mut().expect("bound").add(qp).map_err(io("QP"))?;
    }
    set.map_or_else(
        || QpSet::bind(local, 8192).map_err(io(format!("UDP {local}:4791"))),
        Ok,
    )
}

/// Runs `rank`'s part of an overlay broadcast until it holds the whole message and
/// every send it owes completed. `buf` holds the message (the root's is full).
fn run_overlay(
    set: &mut QpSet,
    rank: usize,
    n: usize,
    scheme: Scheme,
    driver_cfg: DriverConfig,
    buf: &mut [u8],
    timeout: Duration,
) -> Result<u64, McastError> {
    let clock = Clock::new();
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
        let busy = set.poll_once(&clock).map_err(io("overlay"))?;
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
            set.wait(&clock, None, Duration::from_millis(1))
                .map_err(io("wait"))?;
        }
    }
    Ok(held_ns.unwrap_or_else(mono_ns))
}

/// Control message 6, `Overlay`: scheme (1: its index in `Scheme::ALL`), block bytes
/// (4), pacing rate in Mbit/s (4, 0 for none), window (1), then the roster of IPv4 addresses in
/// rank order (the leader is rank 0).
fn overlay_message(
    scheme: Scheme,
    block: usize,
    rate_bps: Option<u64>,
    window: u8,
    roster: &[Ipv4Addr],
) -> Vec<u8> {
    let code = Scheme::ALL.iter().position(|&x| x == scheme).unwrap_or(0) as u8;
    let mut m = vec![code];
    m.extend_from_slice(&(block as u32).to_be_bytes());
    m.extend_from_slice(&((rate_bps.unwrap_or(0) / 1_000_000) as u32).to_be_bytes());
    m.push(window);
    for ip in roster {
        m.extend_from_slice(&ip.octets());
    }
    m
}

/// The leader's overlay broadcast: tells every member the roster, waits until all
/// have their connections up (message 7), says go (8) with the close (4), runs rank 0
/// and collects the verdicts.
fn lead_overlay(
    cfg: &LeaderConfig,
    data: &Arc<[u8]>,
    conns: &mut [Control],
    members: &[Ipv4Addr],
    scheme: Scheme,
    why: String,
) -> Result<LeaderReport, McastError> {
    let mut roster = vec![cfg.local];
    roster.extend_from_slice(members);
    if roster.len() > 256 {
        return Err(McastError::Protocol(
            "overlay groups hold at most 256 ranks".into(),
        ));
    }
    let driver_cfg = DriverConfig {
        message_bytes: data.len() as u64,
        block_bytes: cfg.block_bytes as u64,
        window: cfg.window.max(1) as u32,
        ready_for_block: false,
    };
    let msg = overlay_message(scheme, cfg.block_bytes, cfg.rate_bps, cfg.window, &roster);
    // Members learn their rank from their position in the roster.
    for c in conns.iter_mut() {
        c.send(6, &msg).map_err(io("send Overlay"))?;
    }
    let mut set = overlay_qps(
        cfg.local,
        0,
        &roster,
        &driver_cfg,
        scheme,
        cfg.mtu,
        cfg.rate_bps,
    )?;
    let mut ready = vec![false; conns.len()];
    let deadline = StdInstant::now() + cfg.timeout;
    while ready.iter().any(|r| !r) {
        for (c, r) in conns.iter_mut().zip(ready.iter_mut()) {
            if let Some((7, _)) = c.recv().map_err(io("control"))? {
                *r = true;
            }
        }
        if StdInstant::now() > deadline {
            return Err(McastError::Timeout(
                "members never set up the overlay".into(),
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let crc = crc32(data);
    let mut done = vec![1u8];
    done.extend_from_slice(&(data.len() as u64).to_be_bytes());
    done.extend_from_slice(&crc.to_be_bytes());
    for c in conns.iter_mut() {
        c.send(8, &[]).map_err(io("send Go"))?;
        c.send(4, &done).map_err(io("send Done"))?;
    }
    let t0 = StdInstant::now();
    let t0_ns = mono_ns();
    let mut own = data.to_vec();
    run_overlay(
        &mut set,
        0,
        roster.len(),
        scheme,
        driver_cfg,
        &mut own,
        cfg.timeout,
    )?;
    // Every member reports when it holds everything; the root keeps answering
    // retransmissions meanwhile.
    let clock = Clock::new();
    let verdicts = collect_verdicts(conns, crc, cfg.timeout, || {
        let _ = set.poll_once(&clock);
    });
    let transfer = t0.elapsed();
    let retransmitted = set
        .qpns()
        .filter_map(|q| set.qp(q).map(|qp| qp.stats().tx_retransmitted))
        .sum();
    Ok(LeaderReport {
        bytes: data.len() as u64,
        crc32: crc,
        registration: Duration::ZERO,
        transfer,
        members: report_members(conns, &verdicts),
        latency: latency(t0_ns, &verdicts),
        retransmitted,
        path: if why.is_empty() {
            scheme.name().to_string()
        } else {
            format!("{} (fallback: {why})", scheme.name())
        },
    })
}

/// Sends the data, then the close, and collects the members' verdicts.
fn transfer_and_close(
    cfg: &LeaderConfig,
    data: &Arc<[u8]>,
    ep: &mut Endpoint,
    clock: &Clock,
    conns: &mut [Control],
) -> Result<(Duration, u64, u32, Vec<Option<Verdict>>), McastError> {
    let total = data.len() as u64;
    // 3. Transfer.
    let t0 = StdInstant::now();
    let t0_ns = mono_ns();
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
    let transfer = t0.elapsed();

    // 4. Close: tell everyone, collect every verdict.
    let crc = crc32(data);
    let mut msg = vec![1u8];
    msg.extend_from_slice(&total.to_be_bytes());
    msg.extend_from_slice(&crc.to_be_bytes());
    for c in conns.iter_mut() {
        c.send(4, &msg).map_err(io("send Done"))?;
    }
    let verdicts = collect_verdicts(conns, crc, cfg.timeout, || {
        // Keep answering retransmissions while members finish.
        let _ = ep.poll_once(clock);
    });
    Ok((transfer, t0_ns, crc, verdicts))
}

/// A member's overlay broadcast, after the leader's `Overlay` message `msg`.
fn join_overlay(
    cfg: &MemberConfig,
    c: &mut Control,
    msg: &[u8],
    total: usize,
) -> Result<MemberReport, McastError> {
    if msg.len() < 10 || (msg.len() - 10) % 4 != 0 || msg[9] == 0 {
        return Err(McastError::Protocol("bad Overlay".into()));
    }
    let scheme = *Scheme::ALL
        .get(msg[0] as usize)
        .ok_or_else(|| McastError::Protocol("unknown overlay scheme".into()))?;
    let block = u32::from_be_bytes([msg[1], msg[2], msg[3], msg[4]]) as u64;
    let mbps = u32::from_be_bytes([msg[5], msg[6], msg[7], msg[8]]) as u64;
    let rate_bps = (mbps > 0).then_some(mbps * 1_000_000);
    let window = msg[9] as u32;
    let roster: Vec<Ipv4Addr> = msg[10..]
        .chunks(4)
        .map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        .collect();
    let rank = roster
        .iter()
        .position(|&ip| ip == cfg.local)
        .filter(|&r| r > 0)
        .ok_or_else(|| McastError::Protocol("this host is not in the roster".into()))?;
    if block == 0 || roster.len() > 256 {
        return Err(McastError::Protocol("bad Overlay".into()));
    }
    let driver_cfg = DriverConfig {
        message_bytes: total as u64,
        block_bytes: block,
        window,
        ready_for_block: false,
    };
    let mut set = overlay_qps(
        cfg.local,
        rank,
        &roster,
        &driver_cfg,
        scheme,
        cfg.mtu,
        rate_bps,
    )?;
    c.send(7, &[]).map_err(io("send Ready"))?;
    // Go (8) then the leader's Done (4, with its CRC).
    let deadline = StdInstant::now() + cfg.timeout;
    let mut go = false;
    let mut leader = None;
    while leader.is_none() {
        match c.recv().map_err(io("control"))? {
            Some((8, _)) => go = true,
            Some((4, b)) if b.len() == 13 => {
                leader = Some((b[0] == 1, u32::from_be_bytes([b[9], b[10], b[11], b[12]])))
            }
            _ => {}
        }
        if StdInstant::now() > deadline {
            return Err(McastError::Timeout("no go from the leader".into()));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let (leader_ok, leader_crc) = leader.expect("set");
    let _ = go;
    let mut data = vec![0u8; total];
    let r = run_overlay(
        &mut set,
        rank,
        roster.len(),
        scheme,
        driver_cfg,
        &mut data,
        cfg.timeout,
    );
    let ours = crc32(&data);
    let ok = r.is_ok() && leader_ok && ours == leader_crc;
    let held = *r.as_ref().unwrap_or(&0);
    let _ = c.send(5, &result_message(ok, ours, held));
    // Stay a moment so peers still retransmitting to us get their ACKs.
    let clock = Clock::new();
    let until = StdInstant::now() + Duration::from_millis(100);
    while StdInstant::now() < until {
        let _ = set.poll_once(&clock);
        std::thread::sleep(Duration::from_micros(200));
    }
    r?;
    Ok(MemberReport {
        data,
        crc32: ours,
        ok,
    })
}

/// Runs a member: joins the leader's group, receives the data, reports its CRC.
pub fn join(cfg: &MemberConfig) -> Result<MemberReport, McastError> {
    let clock = Clock::new();
    let mrp = mrp_socket(cfg.local)?;
    let mut agent = MemberAgent::new(v4(cfg.local)).with_group_space(cfg.group_space);
    let deadline = StdInstant::now() + cfg.timeout;
    let s = loop {
        match TcpStream::connect_timeout(
            &SocketAddrV4::new(cfg.leader, cfg.control_port).into(),
            Duration::from_secs(1),
        ) {
            Ok(s) => break s,
            Err(_) if StdInstant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(io("connect to the leader")(e)),
        }
    };
    let mut c = Control::new(s).map_err(io("control"))?;
    let params = loop {
        if let Some((1, b)) = c.recv().map_err(io("control"))? {
            break b;
        }
        if StdInstant::now() > deadline {
            return Err(McastError::Timeout("no parameters from the leader".into()));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    if params.len() != 13 {
        return Err(McastError::Protocol("bad Params".into()));
    }
    let write = params[0] == 1;
    let total = u64::from_be_bytes(params[1..9].try_into().expect("8 bytes"));
    let msg = u32::from_be_bytes(params[9..13].try_into().expect("4 bytes")) as usize;
    let total_usize = usize::try_from(total).map_err(|_| McastError::Protocol("size".into()))?;
    if msg == 0 || total > (4u64 << 30) {
        return Err(McastError::Protocol("message size out of range".into()));
    }
    let qpn = 0x100 | (cfg.local.octets()[3] as u32);
    let mut ep = endpoint(cfg.local, qpn, cfg.mcst_id, cfg.mtu, None)?;
    let n_msgs = total_usize.div_ceil(msg).max(1);
    if write {
        ep.qp
            .register_mr(MEMBER_VA, total_usize, MEMBER_RKEY)
            .map_err(|e| McastError::Protocol(e.to_string()))?;
    } else {
        for i in 0..n_msgs {
            ep.qp
                .post_recv(i as u64, msg)
                .map_err(|e| McastError::Protocol(e.to_string()))?;
        }
    }
    let mut join = Vec::with_capacity(20);
    join.extend_from_slice(&cfg.local.octets());
    join.extend_from_slice(&qpn.to_be_bytes());
    join.extend_from_slice(&MEMBER_VA.to_be_bytes());
    join.extend_from_slice(&MEMBER_RKEY.to_be_bytes());
    c.send(2, &join).map_err(io("send Join"))?;

    let mut parts: Vec<Option<Vec<u8>>> = vec![None; if write { 0 } else { n_msgs }];
    let mut parts_held = 0usize;
    // When the whole message was here: the last part (SEND), or the last data
    // packet (WRITE, which completes nothing at the receiver).
    let mut held_ns = 0u64;
    let mut last_progress = StdInstant::now();
    let verdict = loop {
        let act = ep.poll_once(&clock).map_err(io("endpoint"))?;
        while let Some(ev) = ep.qp.poll_event() {
            match ev {
                Event::Recv { wr_id, data, .. } => {
                    if let Some(p) = parts.get_mut(wr_id as usize) {
                        if p.is_none() {
                            parts_held += 1;
                            if parts_held == n_msgs {
                                held_ns = mono_ns();
                            }
                        }
                        *p = Some(data);
                    }
                    last_progress = StdInstant::now();
                }
                Event::RecvError { error, .. } | Event::QpError(error) => {
                    return Err(McastError::Transfer(error.to_string()))
                }
                _ => {}
            }
        }
        let mut buf = [0u8; 1500];
        while let Ok((n, _)) = mrp.recv_from(&mut buf) {
            if let Ok(m) = MrpRepr::parse(&buf[..n]) {
                if let Some(conf) = agent.handle_mrp(&m) {
                    let mut b = [0u8; CONFIRMATION_LEN];
                    if conf.emit(&mut b).is_ok() {
                        c.send(3, &b).map_err(io("send Confirm"))?;
                    }
                }
            }
        }
        match c.recv().map_err(io("control"))? {
            Some((4, b)) => {
                if b.len() != 13 {
                    return Err(McastError::Protocol("bad Done".into()));
                }
                break (b[0] == 1, u32::from_be_bytes([b[9], b[10], b[11], b[12]]));
            }
            Some((6, b)) => {
                // The group goes through the overlay: this QP is not used.
                drop(ep);
                return join_overlay(cfg, &mut c, &b, total_usize);
            }
            _ => {}
        }
        if act.received > 0 {
            last_progress = StdInstant::now();
            if write {
                held_ns = mono_ns();
            }
        }
        if act.is_idle() {
            if last_progress.elapsed() > cfg.timeout {
                return Err(McastError::Timeout(
                    "no data and no close from the leader".into(),
                ));
            }
            ep.wait(
                &clock,
                Some(std::os::fd::AsRawFd::as_raw_fd(&c.s)),
                Duration::from_millis(1),
            )
            .map_err(io("wait"))?;
        }
    };
    let (leader_ok, leader_crc) = verdict;
    // The leader closes after every message is acknowledged by all, so everything is
    // here; still, anything missing is a failure, never a silent hole.
    let data = if write {
        ep.qp
            .mr(MEMBER_RKEY)
            .map(|m| m.data.clone())
            .unwrap_or_default()
    } else {
        let mut d = Vec::with_capacity(total_usize);
        for p in &parts {
            match p {
                Some(x) => d.extend_from_slice(x),
                None => break,
            }
        }
        d
    };
    let ours = crc32(&data);
    let ok = leader_ok && data.len() == total_usize && ours == leader_crc;
    let _ = c.send(5, &result_message(ok, ours, held_ns));
    // Let the leader read it before the socket closes.
    std::thread::sleep(Duration::from_millis(20));
    Ok(MemberReport {
        data,
        crc32: ours,
        ok,
    })
}
