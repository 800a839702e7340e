//! `perf`: a perftest-style bandwidth test (`ib_send_bw`/`ib_write_bw`) between two
//! [`Endpoint`]s — the core's RC queue pair on real UDP/4791 sockets.
//!
//! A TCP control connection (port 18515 by default, as perftest) carries one text line
//! per message, `KIND key=value ...` (a `msg=` key, if any, takes the rest of the line):
//!
//! 1. client → server `HELLO`: the test parameters (op, size, iterations, MTU, tx
//!    depth, window, RTO, retransmission mode, loss rate, seed) and the client's QPN,
//!    first PSN and UDP address;
//! 2. server → client `READY`: its QPN, first PSN, UDP address and, for WRITE, the
//!    registered region's VA and rkey — or `ERROR msg=...`;
//! 3. data phase over UDP/4791, one [`RcQueuePair`] per side;
//! 4. client → server `DONE` once every send completed (or `ABORT msg=...`);
//! 5. server → client `RESULT ok=0|1 ...`: its verdict on the data (every SEND's bytes,
//!    or the WRITE region's final content, equals the pattern both sides derive from
//!    the seed) and its counters.
//!
//! The data pattern, QPNs, PSNs, rkey and the injected losses all derive from the seed,
//! so a run is reproducible up to timing.

use crate::endpoint::{Clock, Endpoint, LossInjector};
use crate::udp::{wait_readable, TransportConfig, UdpTransport};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rocast_core::rnic::{
    Event, FixedRate, QpConfig, RateController, RcQueuePair, Retransmission, SendOp, SendRequest,
    Unlimited, SACK_WINDOW,
};
use rocast_core::time::Duration as CoreDuration;
use rocast_core::wire::{Psn, ROCEV2_UDP_PORT};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// perftest's default control port.
pub const DEFAULT_PORT: u16 = 18515;
const PROTOCOL_VERSION: u32 = 1;
/// Datagrams per sendmmsg/recvmmsg.
const BATCH: usize = 64;
/// The longest the event loop sleeps without looking at the clock and the control channel.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// The longest control line either side accepts (a HELLO is about 150 bytes).
pub const MAX_CONTROL_LINE: usize = 4096;
/// The most buffer memory one session may ask the server for (its message buffers
/// and the expected pattern), so that one HELLO cannot exhaust the server.
pub const MAX_SESSION_BYTES: u64 = 1 << 30;
/// How long the server waits for a connected client's HELLO.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const CLIENT_SALT: u64 = 0xc11e_47c1_1e47;
const SERVER_SALT: u64 = 0x5e7e_e75e_7e7e;
const PATTERN_SALT: u64 = 0x7061_7474_6572_6e21;

/// Which verb the test exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerfOp {
    Send,
    Write,
}

impl PerfOp {
    pub fn name(self) -> &'static str {
        match self {
            PerfOp::Send => "send",
            PerfOp::Write => "write",
        }
    }
}

/// Why a `--op` names no operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PerfOpError {
    #[error("unknown op {0:?} (send or write)")]
    Unknown(String),
}

impl std::str::FromStr for PerfOp {
    type Err = PerfOpError;
    fn from_str(s: &str) -> Result<Self, PerfOpError> {
        match s {
            "send" => Ok(PerfOp::Send),
            "write" => Ok(PerfOp::Write),
            _ => Err(PerfOpError::Unknown(s.to_string())),
        }
    }
}

/// The test, as the client asks for it; the server takes all of it from `HELLO`.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfParams {
    pub op: PerfOp,
    /// Bytes per message (at least 1).
    pub size: usize,
    pub iters: u64,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    pub mtu: usize,
    /// Messages posted and not yet completed, at most (perftest's `--tx-depth`).
    pub tx_depth: usize,
    /// The QP's window: most PSNs unacknowledged (`QpConfig::max_outstanding`).
    pub window: u32,
    /// The QP's retransmission timeout before back-off: the floor of the adaptive
    /// timeout (SRTT + 4·RTTVAR past the first measured round trip).
    pub rto: Duration,
    pub retransmission: Retransmission,
    /// Probability that each endpoint drops a received packet before its QP sees it.
    pub loss: f64,
    pub seed: u64,
}

impl Default for PerfParams {
    fn default() -> Self {
        PerfParams {
            op: PerfOp::Write,
            size: 65536,
            iters: 1000,
            mtu: 4096,
            tx_depth: 16,
            window: 256,
            rto: Duration::from_millis(1),
            retransmission: Retransmission::GoBackN,
            loss: 0.0,
            seed: 1,
        }
    }
}

impl PerfParams {
    pub fn validate(&self) -> Result<(), PerfError> {
        let bad = |m: String| Err(PerfError::Config(m));
        if !matches!(self.mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return bad(format!(
                "MTU {} is not one of 256, 512, 1024, 2048, 4096",
                self.mtu
            ));
        }
        if self.size == 0 || self.size > i32::MAX as usize {
            return bad(format!(
                "message size {} out of range (1 to 2^31-1)",
                self.size
            ));
        }
        if self.iters == 0 || self.iters > 100_000_000 {
            return bad(format!(
                "iterations {} out of range (1 to 10^8)",
                self.iters
            ));
        }
        if self.tx_depth == 0 || self.tx_depth > 8192 {
            return bad(format!(
                "tx depth {} out of range (1 to 8192)",
                self.tx_depth
            ));
        }
        let max_window = if self.retransmission == Retransmission::SelectiveRepeat {
            SACK_WINDOW as u32
        } else {
            Psn::HALF - 1
        };
        if self.window == 0 || self.window > max_window {
            return bad(format!(
                "window {} out of range (1 to {max_window})",
                self.window
            ));
        }
        if !(0.0..1.0).contains(&self.loss) {
            return bad(format!("loss rate {} out of range [0, 1)", self.loss));
        }
        if self.rto.is_zero() || self.rto > Duration::from_secs(10) {
            return bad("RTO out of range (1 ns to 10 s)".into());
        }
        Ok(())
    }

    fn to_kv(&self) -> String {
        format!(
            "op={} size={} iters={} mtu={} tx_depth={} window={} rto_ns={} sr={} loss={} seed={}",
            self.op.name(),
            self.size,
            self.iters,
            self.mtu,
            self.tx_depth,
            self.window,
            self.rto.as_nanos(),
            (self.retransmission == Retransmission::SelectiveRepeat) as u8,
            self.loss,
            self.seed
        )
    }

    fn from_msg(m: &Msg) -> Result<Self, PerfError> {
        Ok(PerfParams {
            op: m
                .get::<String>("op")?
                .parse()
                .map_err(|e: PerfOpError| PerfError::Protocol(e.to_string()))?,
            size: m.get("size")?,
            iters: m.get("iters")?,
            mtu: m.get("mtu")?,
            tx_depth: m.get("tx_depth")?,
            window: m.get("window")?,
            rto: Duration::from_nanos(m.get("rto_ns")?),
            retransmission: if m.get::<u8>("sr")? != 0 {
                Retransmission::SelectiveRepeat
            } else {
                Retransmission::GoBackN
            },
            loss: m.get("loss")?,
            seed: m.get("seed")?,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error("{context}: {source}")]
    Io { context: String, source: io::Error },
    #[error("control protocol: {0}")]
    Protocol(String),
    #[error("peer reported an error: {0}")]
    Peer(String),
    #[error("no progress for {0:?}: the peer seems to have vanished")]
    Timeout(Duration),
    #[error("queue pair failed: {0}")]
    Qp(String),
    #[error("data mismatch: {0}")]
    DataMismatch(String),
    #[error("invalid parameters: {0}")]
    Config(String),
}

/// Data-phase pacing shared by server and client: when idle, sleep until a packet, a
/// QP timer or a control message; when busy, look at the control socket every 256 turns.
/// Returns whether the control socket is readable.
fn wait_or_check_ctrl(
    ep: &mut Endpoint,
    clock: &Clock,
    ctrl: &Ctrl,
    idle: bool,
    spins: &mut u32,
) -> Result<bool, PerfError> {
    if idle {
        return ep
            .wait(clock, Some(ctrl.fd()), MAX_WAIT)
            .map_err(io_err("poll"));
    }
    *spins += 1;
    if spins.is_multiple_of(256) {
        return ctrl.readable();
    }
    Ok(false)
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> PerfError {
    let context = context.into();
    move |source| PerfError::Io { context, source }
}

// ---------------------------------------------------------------------------------------
// Control channel

/// One control line: `KIND k=v k=v ... [msg=free text]`.
#[derive(Debug, Default)]
struct Msg {
    kind: String,
    kv: BTreeMap<String, String>,
}

impl Msg {
    fn parse(line: &str) -> Msg {
        let line = line.trim_end_matches(['\r', '\n']);
        let (head, msg) = match line.find(" msg=") {
            Some(i) => (&line[..i], Some(&line[i + 5..])),
            None => (line, None),
        };
        let mut it = head.split(' ').filter(|s| !s.is_empty());
        let kind = it.next().unwrap_or("").to_string();
        let mut kv: BTreeMap<String, String> = it
            .filter_map(|t| t.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(m) = msg {
            kv.insert("msg".into(), m.to_string());
        }
        Msg { kind, kv }
    }
    fn get<T: std::str::FromStr>(&self, k: &str) -> Result<T, PerfError> {
        let v = self
            .kv
            .get(k)
            .ok_or_else(|| PerfError::Protocol(format!("{} lacks {k}=", self.kind)))?;
        v.parse()
            .map_err(|_| PerfError::Protocol(format!("{} has a bad {k}={v}", self.kind)))
    }
    fn text(&self) -> String {
        self.kv
            .get("msg")
            .cloned()
            .unwrap_or_else(|| "(no reason given)".into())
    }
}

/// A client's HELLO, checked before the server commits anything: the protocol
/// version, every parameter within [`PerfParams::validate`]'s limits, and the server
/// memory the session needs within [`MAX_SESSION_BYTES`].
#[derive(Debug)]
pub struct Hello {
    pub params: PerfParams,
    /// Server buffers of `params.size` bytes: WRITE one registered region; SEND a
    /// receive buffer per posted receive (2 × tx depth), each plus the pattern.
    pub buffers: u64,
    pub qpn: u32,
    pub psn: u32,
    pub ip: Ipv4Addr,
}

impl Hello {
    /// Parses and checks one control line (at most [`MAX_CONTROL_LINE`] bytes, which
    /// the line reader enforces before this).
    pub fn parse(line: &str) -> Result<Hello, PerfError> {
        Hello::check(&Msg::parse(line))
    }

    fn check(hello: &Msg) -> Result<Hello, PerfError> {
        if hello.kind != "HELLO" {
            return Err(PerfError::Protocol(format!(
                "expected HELLO, got {:?}",
                hello.kind
            )));
        }
        if hello.get::<u32>("v")? != PROTOCOL_VERSION {
            return Err(PerfError::Protocol(format!(
                "protocol version {} (we speak {PROTOCOL_VERSION})",
                hello.text()
            )));
        }
        let p = PerfParams::from_msg(hello)?;
        p.validate()?;
        let buffers = match p.op {
            PerfOp::Write => 1,
            PerfOp::Send => (p.tx_depth as u64 * 2).min(p.iters).max(1),
        };
        let wanted = (buffers + 1).saturating_mul(p.size as u64);
        if wanted > MAX_SESSION_BYTES {
            return Err(PerfError::Config(format!(
                "{} B messages with {buffers} buffers need {wanted} B of server memory; the server allows {MAX_SESSION_BYTES} B per session",
                p.size
            )));
        }
        Ok(Hello {
            params: p,
            buffers,
            qpn: hello.get("qpn")?,
            psn: hello.get("psn")?,
            ip: hello.get("ip")?,
        })
    }
}

struct Ctrl {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// While a session runs: accepts every other connection on the server's listener,
/// answers `ERROR msg=busy` and closes it. Stops (and joins) when dropped.
struct BusyResponder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BusyResponder {
    fn start(listener: &TcpListener) -> Result<Self, PerfError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let l = listener.try_clone().map_err(io_err("listener"))?;
        l.set_nonblocking(true).map_err(io_err("listener"))?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
                        let _ =
                            s.write_all(b"ERROR msg=busy: the server is serving another client\n");
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            // The listener is shared: hand it back blocking for the next accept.
            let _ = l.set_nonblocking(false);
        });
        Ok(BusyResponder {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for BusyResponder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Ctrl {
    fn new(s: TcpStream, timeout: Duration) -> Result<Ctrl, PerfError> {
        s.set_nodelay(true).map_err(io_err("control socket"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(io_err("control socket"))?;
        s.set_write_timeout(Some(timeout))
            .map_err(io_err("control socket"))?;
        let writer = s.try_clone().map_err(io_err("control socket"))?;
        Ok(Ctrl {
            reader: BufReader::new(s),
            writer,
        })
    }
    /// The read deadline of each later line (the socket's, shared by both halves).
    fn set_timeout(&mut self, timeout: Duration) -> Result<(), PerfError> {
        self.writer
            .set_read_timeout(Some(timeout))
            .map_err(io_err("control socket"))
    }
    fn send(&mut self, line: &str) -> Result<(), PerfError> {
        let mut l = line.replace('\n', " ");
        l.push('\n');
        self.writer
            .write_all(l.as_bytes())
            .map_err(io_err("control connection (send)"))
    }
    fn recv(&mut self) -> Result<Msg, PerfError> {
        let mut line = String::new();
        // At most one line of MAX_CONTROL_LINE bytes is buffered, whatever the peer
        // sends: a longer one is a protocol error, not memory.
        let limit = MAX_CONTROL_LINE as u64 + 1;
        match (&mut self.reader).take(limit).read_line(&mut line) {
            Ok(0) => Err(PerfError::Protocol(
                "the peer closed the control connection".into(),
            )),
            Ok(n) if n as u64 == limit && !line.ends_with('\n') => Err(PerfError::Protocol(
                format!("a control line longer than {MAX_CONTROL_LINE} bytes"),
            )),
            Ok(_) => Ok(Msg::parse(&line)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(PerfError::Protocol(
                    "timed out waiting on the control connection".into(),
                ))
            }
            Err(e) => Err(io_err("control connection (receive)")(e)),
        }
    }
    /// Whether a line (or EOF) can be read without blocking.
    fn readable(&self) -> Result<bool, PerfError> {
        if !self.reader.buffer().is_empty() {
            return Ok(true);
        }
        Ok(
            wait_readable([self.writer.as_raw_fd()], Some(Duration::ZERO))
                .map_err(io_err("poll"))?[0],
        )
    }
    fn fd(&self) -> i32 {
        self.writer.as_raw_fd()
    }
}

// ---------------------------------------------------------------------------------------
// Shared pieces

/// The message content both sides expect: ChaCha bytes from the seed.
pub fn pattern(seed: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    ChaCha8Rng::seed_from_u64(seed ^ PATTERN_SALT).fill_bytes(&mut v);
    v
}

fn qp_config(
    local: Ipv4Addr,
    lqpn: u32,
    lpsn: u32,
    remote: Ipv4Addr,
    rqpn: u32,
    rpsn: u32,
    p: &PerfParams,
) -> QpConfig {
    let mut c = QpConfig::new(local.into(), lqpn, remote.into(), rqpn);
    c.udp_src_port = ROCEV2_UDP_PORT;
    c.mtu = p.mtu;
    c.send_psn = Psn::new(lpsn);
    c.recv_psn = Psn::new(rpsn);
    c.max_outstanding = p.window;
    c.retransmit_timeout = CoreDuration::from_ns(p.rto.as_nanos() as u64);
    // Adaptive, as RoCE NICs' retransmission is: on a 1 Gbit/s lab link a full window
    // (256 × 4 KB, 8 ms) queues longer than any fixed millisecond timeout.
    c.adaptive_rto = true;
    c.retransmission = p.retransmission;
    c.peer_sack = p.retransmission == Retransmission::SelectiveRepeat;
    c
}

/// (QPN, PSN) from a seeded stream: QPN in 2..2^24 (0 and 1 are special), PSN 24 bits.
fn qpn_psn(rng: &mut ChaCha8Rng) -> (u32, u32) {
    (
        (rng.next_u32() & 0xff_ffff).max(2),
        rng.next_u32() & 0xff_ffff,
    )
}

fn make_endpoint(
    ip: Ipv4Addr,
    cfg: QpConfig,
    loss: f64,
    loss_seed: u64,
    rate_bps: Option<u64>,
) -> Result<Endpoint, PerfError> {
    let rate: Box<dyn RateController> = match rate_bps {
        // 64 KB of burst: a late wakeup catches up instead of losing the rate.
        Some(r) => Box::new(FixedRate::with_burst(r, 64 << 10)),
        None => Box::new(Unlimited::default()),
    };
    let qp = RcQueuePair::with_rate_controller(cfg, rate)
        .map_err(|e| PerfError::Config(e.to_string()))?;
    let tcfg = TransportConfig {
        max_packet_len: qp.max_packet_len(),
        batch: BATCH,
        ..Default::default()
    };
    let t = UdpTransport::bind(ip, &tcfg)
        .map_err(io_err(format!("binding UDP {ip}:{ROCEV2_UDP_PORT}")))?;
    let loss = (loss > 0.0).then(|| LossInjector::new(loss, loss_seed));
    Endpoint::new(qp, t, loss).map_err(io_err("endpoint"))
}

/// A thread's CPU time over a span of work and the datagrams its socket moved
/// meanwhile: the CPU per packet `rocast perf` and `rocast mcast` report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuUse {
    pub cpu: Duration,
    pub packets: u64,
}

impl CpuUse {
    pub fn per_packet(&self) -> Duration {
        Duration::from_nanos((self.cpu.as_nanos() / self.packets.max(1) as u128) as u64)
    }
}

/// The calling thread's CPU time and a socket's datagram count at the start of some
/// work; [`stop`](Self::stop) gives the work's [`CpuUse`].
pub(crate) struct CpuMeter {
    cpu: Duration,
    packets: u64,
}

impl CpuMeter {
    pub(crate) fn start(packets: u64) -> Self {
        CpuMeter {
            cpu: thread_cpu(),
            packets,
        }
    }

    /// `packets`: the count now. A count below the start's means the socket was
    /// replaced mid-work (a reroute): the new socket's whole count is then the figure.
    pub(crate) fn stop(&self, packets: u64) -> CpuUse {
        CpuUse {
            cpu: thread_cpu().saturating_sub(self.cpu),
            packets: packets.checked_sub(self.packets).unwrap_or(packets),
        }
    }
}

/// User+system CPU time of the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: an all-zero rusage is valid (integers only), and getrusage writes only into
    // the struct it is given. Neither rustix nor std has getrusage.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One side's counters for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideReport {
    /// Datagrams sent and received on the UDP socket.
    pub udp_tx_packets: u64,
    pub udp_rx_packets: u64,
    pub tx_data_packets: u64,
    pub tx_retransmitted: u64,
    pub tx_acks: u64,
    pub tx_naks: u64,
    pub rx_data_packets: u64,
    pub rx_acks: u64,
    pub rx_naks: u64,
    pub rx_duplicates: u64,
    pub rx_out_of_order: u64,
    pub timeouts: u64,
    pub messages: u64,
    /// Received packets dropped by `--loss`.
    pub injected_drops: u64,
    /// Datagrams the kernel dropped on a full receive buffer.
    pub kernel_drops: u64,
    /// Packets the QP refused (bad ICRC and the like).
    pub qp_rejects: u64,
    /// Thread CPU time (user+sys) of the data phase.
    pub cpu: Duration,
    /// Longest silence while packets were unacknowledged (see `EndpointStats`).
    pub max_ack_gap: Duration,
}

impl SideReport {
    fn of(ep: &Endpoint, cpu: Duration, messages: u64) -> Self {
        let (q, t, e) = (ep.qp.stats(), ep.transport.stats(), ep.stats());
        SideReport {
            udp_tx_packets: t.tx_packets,
            udp_rx_packets: t.rx_packets,
            tx_data_packets: q.tx_data_packets,
            tx_retransmitted: q.tx_retransmitted,
            tx_acks: q.tx_acks,
            tx_naks: q.tx_naks + q.tx_rnr_naks,
            rx_data_packets: q.rx_data_packets,
            rx_acks: q.rx_acks,
            rx_naks: q.rx_naks,
            rx_duplicates: q.rx_duplicates,
            rx_out_of_order: q.rx_out_of_order,
            timeouts: q.timeouts,
            messages,
            injected_drops: e.injected_drops,
            kernel_drops: t.rx_kernel_drops,
            qp_rejects: e.qp_rejects,
            cpu,
            max_ack_gap: Duration::from_nanos(e.max_ack_gap.as_ns()),
        }
    }
    /// CPU time per datagram sent or received.
    pub fn cpu_per_packet(&self) -> Duration {
        CpuUse {
            cpu: self.cpu,
            packets: self.udp_tx_packets + self.udp_rx_packets,
        }
        .per_packet()
    }
    fn to_kv(&self) -> String {
        format!(
            "udp_tx={} udp_rx={} tx_data={} tx_retx={} tx_acks={} tx_naks={} rx_data={} rx_acks={} rx_naks={} rx_dup={} rx_ooo={} timeouts={} messages={} injected_drops={} kernel_drops={} qp_rejects={} cpu_ns={} max_ack_gap_ns={}",
            self.udp_tx_packets, self.udp_rx_packets, self.tx_data_packets, self.tx_retransmitted, self.tx_acks,
            self.tx_naks, self.rx_data_packets, self.rx_acks, self.rx_naks, self.rx_duplicates, self.rx_out_of_order,
            self.timeouts, self.messages, self.injected_drops, self.kernel_drops, self.qp_rejects, self.cpu.as_nanos(), self.max_ack_gap.as_nanos()
        )
    }
    fn from_msg(m: &Msg) -> Result<Self, PerfError> {
        Ok(SideReport {
            udp_tx_packets: m.get("udp_tx")?,
            udp_rx_packets: m.get("udp_rx")?,
            tx_data_packets: m.get("tx_data")?,
            tx_retransmitted: m.get("tx_retx")?,
            tx_acks: m.get("tx_acks")?,
            tx_naks: m.get("tx_naks")?,
            rx_data_packets: m.get("rx_data")?,
            rx_acks: m.get("rx_acks")?,
            rx_naks: m.get("rx_naks")?,
            rx_duplicates: m.get("rx_dup")?,
            rx_out_of_order: m.get("rx_ooo")?,
            timeouts: m.get("timeouts")?,
            messages: m.get("messages")?,
            injected_drops: m.get("injected_drops")?,
            kernel_drops: m.get("kernel_drops")?,
            qp_rejects: m.get("qp_rejects")?,
            cpu: Duration::from_nanos(m.get("cpu_ns")?),
            max_ack_gap: Duration::from_nanos(m.get("max_ack_gap_ns")?),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Server

/// A `perf server`: a listening control socket.
#[derive(Debug)]
pub struct PerfServer {
    listener: TcpListener,
    /// Give up when no packet arrives and nothing completes for this long.
    pub idle_timeout: Duration,
}

/// What the server saw in one session.
#[derive(Clone, Debug)]
pub struct ServerReport {
    pub client: SocketAddr,
    pub params: PerfParams,
    pub side: SideReport,
}

impl PerfServer {
    /// Listens on `addr` (e.g. 127.0.0.1:18515). The UDP endpoint of each session binds
    /// the address the client reached us on.
    pub fn bind(addr: SocketAddr) -> Result<Self, PerfError> {
        let listener = TcpListener::bind(addr).map_err(io_err(format!("listening on {addr}")))?;
        Ok(PerfServer {
            listener,
            idle_timeout: Duration::from_secs(10),
        })
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves one client: waits for it, runs the test, verifies the data. A client
    /// must send its HELLO within [`HELLO_TIMEOUT`]; clients that connect while a
    /// session runs are answered `ERROR msg=busy` and closed, so idle connections
    /// cannot lock real clients out.
    pub fn serve_one(&self) -> Result<ServerReport, PerfError> {
        let (stream, peer) = self
            .listener
            .accept()
            .map_err(io_err("accepting a control connection"))?;
        let local = stream.local_addr().map_err(io_err("control socket"))?;
        let mut ctrl = Ctrl::new(stream, HELLO_TIMEOUT.min(self.idle_timeout))?;
        let busy = BusyResponder::start(&self.listener)?;
        let r = self.session(&mut ctrl, local, peer);
        drop(busy);
        if let Err(e) = &r {
            if !matches!(e, PerfError::Peer(_)) {
                let _ = ctrl.send(&format!("ERROR msg={e}"));
            }
        }
        r
    }

    fn session(
        &self,
        ctrl: &mut Ctrl,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Result<ServerReport, PerfError> {
        let Hello {
            params: p,
            buffers,
            qpn: cqpn,
            psn: cpsn,
            ip: cip,
        } = Hello::check(&ctrl.recv()?)?;
        ctrl.set_timeout(self.idle_timeout)?;
        let IpAddr::V4(ip) = local.ip() else {
            return Err(PerfError::Config(
                "the control connection is not IPv4".into(),
            ));
        };
        let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ SERVER_SALT);
        let (qpn, psn) = qpn_psn(&mut rng);
        let cfg = qp_config(ip, qpn, psn, cip, cqpn, cpsn, &p);
        let mut ep = make_endpoint(ip, cfg, p.loss, p.seed ^ SERVER_SALT, None)?;
        let expected = pattern(p.seed, p.size);
        let (va, rkey) = (
            0x7f00_0000_0000 | (rng.next_u64() & 0xff_ffff_f000),
            rng.next_u32(),
        );
        match p.op {
            PerfOp::Write => ep
                .qp
                .register_mr(va, p.size, rkey)
                .map_err(|e| PerfError::Qp(e.to_string()))?,
            PerfOp::Send => {
                for i in 0..buffers {
                    ep.qp
                        .post_recv_buffer(i, Vec::with_capacity(p.size), p.size)
                        .map_err(|e| PerfError::Qp(e.to_string()))?;
                }
            }
        }
        ctrl.send(&format!(
            "READY qpn={qpn} psn={psn} ip={ip} va={va} rkey={rkey}"
        ))?;

        // Data phase: run the QP until the client says DONE.
        let clock = Clock::new();
        let cpu0 = thread_cpu();
        let mut last_progress = clock.now();
        let (mut received, mut mismatches, mut first_bad, mut errors) =
            (0u64, 0u64, None, Vec::<String>::new());
        let mut spins = 0u32;
        loop {
            let act = ep.poll_once(&clock).map_err(io_err("UDP"))?;
            // Completions are stamped when we see them, after the round that produced them.
            let now = clock.now();
            let mut events = 0;
            while let Some(ev) = ep.qp.poll_event() {
                events += 1;
                match ev {
                    Event::Recv { wr_id, data, .. } => {
                        if data != expected {
                            mismatches += 1;
                            first_bad.get_or_insert(received);
                        }
                        received += 1;
                        let _ = ep.qp.post_recv_buffer(wr_id, data, p.size);
                    }
                    Event::RecvError { wr_id, error } => {
                        errors.push(format!("receive {wr_id}: {error}"))
                    }
                    Event::QpError(e) => return Err(PerfError::Qp(e.to_string())),
                    _ => {}
                }
            }
            if act.received > 0 || events > 0 {
                last_progress = now;
            }
            let ctrl_ready = wait_or_check_ctrl(
                &mut ep,
                &clock,
                &ctrl,
                act.is_idle() && events == 0,
                &mut spins,
            )?;
            if ctrl_ready || !ctrl.reader.buffer().is_empty() {
                let m = ctrl.recv()?;
                match m.kind.as_str() {
                    "DONE" => break,
                    "ABORT" => return Err(PerfError::Peer(m.text())),
                    k => {
                        return Err(PerfError::Protocol(format!(
                            "unexpected {k} during the data phase"
                        )))
                    }
                }
            }
            if clock.now().saturating_since(last_progress).as_ns()
                > self.idle_timeout.as_nanos() as u64
            {
                return Err(PerfError::Timeout(self.idle_timeout));
            }
        }
        let cpu = thread_cpu().saturating_sub(cpu0);

        // Verdict.
        let msgs = match p.op {
            PerfOp::Send => received,
            PerfOp::Write => ep.qp.stats().messages_received,
        };
        let mut problem = None;
        if let Some(e) = errors.first() {
            problem = Some(format!("{} receive errors, first: {e}", errors.len()));
        } else if msgs != p.iters {
            problem = Some(format!("{msgs} messages arrived, {} expected", p.iters));
        } else if mismatches > 0 {
            problem = Some(format!(
                "{mismatches} SEND messages differ from the pattern (first: #{})",
                first_bad.unwrap_or(0)
            ));
        } else if p.op == PerfOp::Write {
            let mr = ep.qp.mr(rkey).expect("registered");
            if let Some(i) = mr.data.iter().zip(&expected).position(|(a, b)| a != b) {
                problem = Some(format!("WRITE region differs from the pattern at byte {i}"));
            }
        }
        let side = SideReport::of(&ep, cpu, msgs);
        let ok = problem.is_none() as u8;
        let mut line = format!("RESULT ok={ok} {}", side.to_kv());
        if let Some(pm) = &problem {
            let _ = write!(line, " msg={pm}");
        }
        ctrl.send(&line)?;
        match problem {
            Some(pm) => Err(PerfError::DataMismatch(pm)),
            None => Ok(ServerReport {
                client: peer,
                params: p,
                side,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Client

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The server's control address (e.g. 127.0.0.1:18515).
    pub server: SocketAddr,
    /// Local address of our UDP endpoint. Default: 127.0.0.2 when the server is
    /// 127.0.0.1 (both ends need their own address for UDP 4791), else the address
    /// the control connection leaves from.
    pub bind: Option<Ipv4Addr>,
    pub params: PerfParams,
    /// Give up when nothing arrives and nothing completes for this long.
    pub idle_timeout: Duration,
    /// Pace the client's QP at this many bits/s, as an RNIC sends at its port's rate
    /// (perftest has no such option: its NIC is the link). `None`: unpaced.
    pub rate_bps: Option<u64>,
}

impl ClientConfig {
    pub fn new(server: SocketAddr, params: PerfParams) -> Self {
        ClientConfig {
            server,
            bind: None,
            params,
            idle_timeout: Duration::from_secs(10),
            rate_bps: None,
        }
    }
}

/// One side of the connection as the handshake set it up: what perftest prints as
/// `local address:` and `remote address:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAddress {
    pub ip: Ipv4Addr,
    pub qpn: u32,
    /// The first PSN this side sends.
    pub psn: u32,
    /// The region the peer writes into (`rkey`, `va`): the server's, for WRITE. A side
    /// that registered no region for its peer has none.
    pub region: Option<(u32, u64)>,
}

impl QpAddress {
    /// perftest's two lines for this side (`local`/`remote`): `LID` (none on RoCE:
    /// 0000), QPN, PSN, and RKey and VAddr where a region was registered, then the GID
    /// (RoCEv2: the IPv4-mapped IPv6 address, each byte in decimal as perftest prints
    /// it).
    pub fn perftest_lines(&self, side: &str) -> String {
        let mut s = format!(
            " {side} address: LID 0000 QPN {:#06x} PSN {:#08x}",
            self.qpn, self.psn
        );
        if let Some((rkey, va)) = self.region {
            let _ = write!(s, " RKey {rkey:#08x} VAddr {va:#016x}");
        }
        let o = self.ip.octets();
        let _ = write!(
            s,
            "\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:{:02}:{:02}:{:02}:{:02}",
            o[0], o[1], o[2], o[3]
        );
        s
    }
}

/// The client's result: perftest's figures and both sides' counters.
#[derive(Clone, Debug)]
pub struct PerfReport {
    pub params: PerfParams,
    /// The client's QP (`local address`) and the server's (`remote address`).
    pub local: QpAddress,
    pub remote: QpAddress,
    /// First post to last completion.
    pub elapsed: Duration,
    pub bw_peak_gbps: f64,
    pub bw_avg_gbps: f64,
    pub msg_rate_mpps: f64,
    /// Each message's time from post to completion (its data delivered and
    /// acknowledged), ns, in posting order: 8 bytes per message.
    pub message_ns: Vec<u64>,
    pub client: SideReport,
    pub server: SideReport,
}

/// Runs the client side of one test against a `perf server`.
pub fn run_client(cfg: &ClientConfig) -> Result<PerfReport, PerfError> {
    let p = &cfg.params;
    p.validate()?;
    let stream = TcpStream::connect_timeout(&cfg.server, cfg.idle_timeout).map_err(io_err(
        format!("connecting to the perf server at {}", cfg.server),
    ))?;
    let IpAddr::V4(server_ip) = cfg.server.ip() else {
        return Err(PerfError::Config("the server address must be IPv4".into()));
    };
    let ip = match cfg.bind {
        Some(ip) => ip,
        None if server_ip == Ipv4Addr::LOCALHOST => Ipv4Addr::new(127, 0, 0, 2),
        None => match stream.local_addr().map_err(io_err("control socket"))?.ip() {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => {
                return Err(PerfError::Config(
                    "the control connection is not IPv4".into(),
                ))
            }
        },
    };
    let mut ctrl = Ctrl::new(stream, cfg.idle_timeout)?;
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ CLIENT_SALT);
    let (qpn, psn) = qpn_psn(&mut rng);
    ctrl.send(&format!(
        "HELLO v={PROTOCOL_VERSION} {} qpn={qpn} psn={psn} ip={ip}",
        p.to_kv()
    ))?;
    let ready = ctrl.recv()?;
    match ready.kind.as_str() {
        "READY" => {}
        "ERROR" => return Err(PerfError::Peer(ready.text())),
        k => return Err(PerfError::Protocol(format!("expected READY, got {k:?}"))),
    }
    let (sqpn, spsn, sip, va, rkey): (u32, u32, Ipv4Addr, u64, u32) = (
        ready.get("qpn")?,
        ready.get("psn")?,
        ready.get("ip")?,
        ready.get("va")?,
        ready.get("rkey")?,
    );
    let qcfg = qp_config(ip, qpn, psn, sip, sqpn, spsn, p);
    let mut ep = match make_endpoint(ip, qcfg, p.loss, p.seed ^ CLIENT_SALT, cfg.rate_bps) {
        Ok(ep) => ep,
        Err(e) => {
            let _ = ctrl.send(&format!("ABORT msg=client: {e}"));
            return Err(e);
        }
    };
    let r = client_data_phase(cfg, &mut ctrl, &mut ep, va, rkey);
    let (tposted, tcompleted, cpu) = match r {
        Ok(v) => v,
        Err(e) => {
            let _ = ctrl.send(&format!("ABORT msg=client: {e}"));
            return Err(e);
        }
    };
    ctrl.send("DONE")?;
    let res = ctrl.recv()?;
    match res.kind.as_str() {
        "RESULT" => {}
        "ERROR" => return Err(PerfError::Peer(res.text())),
        k => return Err(PerfError::Protocol(format!("expected RESULT, got {k:?}"))),
    }
    if res.get::<u8>("ok")? != 1 {
        return Err(PerfError::DataMismatch(format!("server: {}", res.text())));
    }
    let server = SideReport::from_msg(&res)?;
    let client = SideReport::of(&ep, cpu, tcompleted.len() as u64);
    let n = tcompleted.len();
    let elapsed_ps = tcompleted[n - 1].saturating_sub(tposted[0]).max(1);
    let elapsed = Duration::from_nanos(elapsed_ps / 1000);
    let secs = elapsed_ps as f64 * 1e-12;
    Ok(PerfReport {
        params: p.clone(),
        local: QpAddress {
            ip,
            qpn,
            psn,
            region: None,
        },
        remote: QpAddress {
            ip: sip,
            qpn: sqpn,
            psn: spsn,
            region: (p.op == PerfOp::Write).then_some((rkey, va)),
        },
        elapsed,
        bw_peak_gbps: peak_gbps(&tposted, &tcompleted, p.size),
        bw_avg_gbps: (p.size as f64 * n as f64 * 8.0) / secs / 1e9,
        msg_rate_mpps: n as f64 / secs / 1e6,
        message_ns: tposted
            .iter()
            .zip(&tcompleted)
            .map(|(p, c)| c.saturating_sub(*p) / 1000)
            .collect(),
        client,
        server,
    })
}

/// Posts messages in a window of `tx_depth` until all completed. Returns per-message
/// post and completion times (ps) and the thread CPU time spent.
fn client_data_phase(
    cfg: &ClientConfig,
    ctrl: &mut Ctrl,
    ep: &mut Endpoint,
    va: u64,
    rkey: u32,
) -> Result<(Vec<u64>, Vec<u64>, Duration), PerfError> {
    let p = &cfg.params;
    let n = p.iters as usize;
    let data: Arc<[u8]> = pattern(p.seed, p.size).into();
    let op = match p.op {
        PerfOp::Send => SendOp::Send,
        PerfOp::Write => SendOp::Write {
            remote_va: va,
            rkey,
        },
    };
    let mut tposted = vec![0u64; n];
    let mut tcompleted = vec![0u64; n];
    let clock = Clock::new();
    let cpu0 = thread_cpu();
    let (mut posted, mut completed) = (0usize, 0usize);
    let post =
        |ep: &mut Endpoint, i: usize, now: u64, tposted: &mut [u64]| -> Result<(), PerfError> {
            tposted[i] = now;
            ep.qp
                .post_send(SendRequest {
                    wr_id: i as u64,
                    op,
                    data: data.clone().into(),
                })
                .map_err(|e| PerfError::Qp(e.to_string()))
        };
    let now = clock.now();
    while posted < n.min(p.tx_depth) {
        post(ep, posted, now.as_ps(), &mut tposted)?;
        posted += 1;
    }
    let mut last_progress = now;
    let mut spins = 0u32;
    while completed < n {
        let act = ep.poll_once(&clock).map_err(io_err("UDP"))?;
        // Completions are stamped when we see them, after the round that produced them.
        let now = clock.now();
        let mut events = 0;
        while let Some(ev) = ep.qp.poll_event() {
            events += 1;
            match ev {
                Event::SendComplete {
                    wr_id,
                    result: Ok(()),
                } => {
                    tcompleted[wr_id as usize] = now.as_ps();
                    completed += 1;
                    if posted < n {
                        post(ep, posted, now.as_ps(), &mut tposted)?;
                        posted += 1;
                    }
                }
                Event::SendComplete {
                    wr_id,
                    result: Err(e),
                } => {
                    return Err(PerfError::Qp(format!("message {wr_id}: {e}")));
                }
                Event::QpError(e) => return Err(PerfError::Qp(e.to_string())),
                _ => {}
            }
        }
        if act.received > 0 || events > 0 {
            last_progress = now;
        }
        let ctrl_ready =
            wait_or_check_ctrl(ep, &clock, &ctrl, act.is_idle() && events == 0, &mut spins)?;
        if ctrl_ready {
            // The server has nothing to say during the data phase except trouble.
            let m = ctrl.recv()?;
            return Err(match m.kind.as_str() {
                "ERROR" => PerfError::Peer(m.text()),
                k => PerfError::Protocol(format!("unexpected {k} during the data phase")),
            });
        }
        if clock.now().saturating_since(last_progress).as_ns() > cfg.idle_timeout.as_nanos() as u64
        {
            return Err(PerfError::Timeout(cfg.idle_timeout));
        }
    }
    let cpu = thread_cpu().saturating_sub(cpu0);
    Ok((tposted, tcompleted, cpu))
}

/// perftest's peak: the best rate over any run of consecutive messages `i..=j`, timed
/// from the post of `i` to the completion of `j`. Exact up to 4000 messages; beyond,
/// the runs start and end on a grid of about 4000 points.
fn peak_gbps(tposted: &[u64], tcompleted: &[u64], size: usize) -> f64 {
    let n = tposted.len();
    let step = n.div_ceil(4000).max(1);
    let mut best = f64::INFINITY; // ps per message
    for i in (0..n).step_by(step) {
        let mut j = i;
        while j < n {
            let t = tcompleted[j].saturating_sub(tposted[i]).max(1) as f64 / (j - i + 1) as f64;
            best = best.min(t);
            j += step;
        }
    }
    size as f64 * 8.0 / (best * 1e-12) / 1e9
}

/// perftest's latency columns over a run, µs: each message's post-to-completion time
/// halved (data one way, the responder's acknowledgement back: a round trip, which
/// perftest's `*_lat` tests halve too). Percentiles by nearest rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySummary {
    pub min_us: f64,
    pub max_us: f64,
    /// The median (perftest's "typical").
    pub typical_us: f64,
    pub avg_us: f64,
    pub stdev_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl LatencySummary {
    /// `None` for no messages.
    pub fn of(message_ns: &[u64]) -> Option<Self> {
        if message_ns.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = message_ns.iter().map(|&ns| ns as f64 / 2e3).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let rank = |q: f64| v[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        let avg = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
        Some(LatencySummary {
            min_us: v[0],
            max_us: v[n - 1],
            typical_us: rank(0.5),
            avg_us: avg,
            stdev_us: var.sqrt(),
            p99_us: rank(0.99),
            p999_us: rank(0.999),
        })
    }
}

/// perftest's latency table header.
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

/// One row of perftest's latency table.
pub fn format_lat_row(size: usize, iters: u64, l: &LatencySummary) -> String {
    format!(
        " {:<6} {:<10}     {:<10.2}     {:<10.2}   {:<10.2}        {:<10.2}     {:<10.2}        {:<10.2}             {:<10.2}",
        size, iters, l.min_us, l.max_us, l.typical_us, l.avg_us, l.stdev_us, l.p99_us, l.p999_us
    )
}

/// perftest's bandwidth table header.
/// How the bandwidth columns are reported, as perftest's `report_fmt`: MB/sec by
/// default, Gb/sec with `--report_gbits`. perftest divides bytes per second by
/// `format_factor = (report_fmt == MBS) ? 0x100000 : 125000000`
/// (perftest_resources.c, print_report_bw): its "MB" is 2^20 bytes, its "Gb" 10^9 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BwUnit {
    #[default]
    MegabytesPerSec,
    GigabitsPerSec,
}

impl BwUnit {
    /// Bytes per second in this unit.
    fn per_second(self) -> f64 {
        match self {
            BwUnit::MegabytesPerSec => 1048576.0,
            BwUnit::GigabitsPerSec => 125e6,
        }
    }
    fn label(self) -> &'static str {
        match self {
            BwUnit::MegabytesPerSec => "MB/sec",
            BwUnit::GigabitsPerSec => "Gb/sec",
        }
    }
}

/// perftest's bandwidth table header.
pub fn bw_header(unit: BwUnit) -> String {
    let u = unit.label();
    format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]")
}

/// One row of perftest's bandwidth table.
pub fn format_bw_row(r: &PerfReport, unit: BwUnit) -> String {
    // The report's rates are Gbit/s: bytes per second are Gbit/s x 125e6.
    let k = 125e6 / unit.per_second();
    format!(
        " {:<7}    {:<10}       {:<7.2}            {:<7.2}            {:<7.6}",
        r.params.size,
        r.params.iters,
        r.bw_peak_gbps * k,
        r.bw_avg_gbps * k,
        r.msg_rate_mpps
    )
}

/// The perftest-style table and, after it, the counters.
pub fn format_report(r: &PerfReport, unit: BwUnit) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", bw_header(unit));
    let _ = writeln!(s, "{}", format_bw_row(r, unit));
    let _ = write!(s, "{}", format_counters(r));
    s
}

/// The counters below perftest's table: retransmissions, packets, drops, CPU.
pub fn format_counters(r: &PerfReport) -> String {
    let mut s = String::new();
    let (c, v) = (&r.client, &r.server);
    let _ = writeln!(
        s,
        " retransmissions : {} packets, {} timeouts (RTO floor {} us, longest ACK wait {} us), {} NAKs received (server sent {} NAKs, saw {} duplicates, {} out of order)",
        c.tx_retransmitted,
        c.timeouts,
        r.params.rto.as_micros(),
        c.max_ack_gap.as_micros(),
        c.rx_naks,
        v.tx_naks,
        v.rx_duplicates,
        v.rx_out_of_order
    );
    let _ = writeln!(
        s,
        " packets         : client sent {} ({} data) received {}; server sent {} received {}",
        c.udp_tx_packets, c.tx_data_packets, c.udp_rx_packets, v.udp_tx_packets, v.udp_rx_packets
    );
    let _ = writeln!(
        s,
        " drops           : injected {} (client) + {} (server) at loss {}; kernel {} + {}; rejected by QP {} + {}",
        c.injected_drops, v.injected_drops, r.params.loss, c.kernel_drops, v.kernel_drops, c.qp_rejects, v.qp_rejects
    );
    let _ = writeln!(
        s,
        " CPU per packet  : client {} ns, server {} ns (thread user+sys {:.3} s / {:.3} s over packets sent+received)",
        c.cpu_per_packet().as_nanos(),
        v.cpu_per_packet().as_nanos(),
        c.cpu.as_secs_f64(),
        v.cpu.as_secs_f64()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_parse_and_params_round_trip() {
        let p = PerfParams {
            retransmission: Retransmission::SelectiveRepeat,
            loss: 0.05,
            ..Default::default()
        };
        let m = Msg::parse(&format!(
            "HELLO v=1 {} msg=free text with = signs\n",
            p.to_kv()
        ));
        assert_eq!(m.kind, "HELLO");
        assert_eq!(PerfParams::from_msg(&m).unwrap(), p);
        assert_eq!(m.text(), "free text with = signs");
        let s = SideReport {
            udp_tx_packets: 3,
            cpu: Duration::from_nanos(77),
            ..Default::default()
        };
        assert_eq!(
            SideReport::from_msg(&Msg::parse(&format!("RESULT ok=1 {}", s.to_kv()))).unwrap(),
            s
        );
    }

    #[test]
    fn latency_summary_halves_and_ranks() {
        // 1..=1000 µs round trips: one-way 0.5..=500 µs.
        let ns: Vec<u64> = (1..=1000).rev().map(|us| us * 1000).collect();
        let l = LatencySummary::of(&ns).unwrap();
        assert_eq!(l.min_us, 0.5);
        assert_eq!(l.max_us, 500.0);
        assert_eq!(l.typical_us, 250.0);
        assert_eq!(l.p99_us, 495.0);
        assert_eq!(l.p999_us, 499.5);
        assert!((l.avg_us - 250.25).abs() < 1e-9);
        assert!(LatencySummary::of(&[]).is_none());
    }

    #[test]
    fn peak_is_at_least_average() {
        let tp: Vec<u64> = (0..100).map(|i| i * 1_000_000).collect();
        let tc: Vec<u64> = (0..100).map(|i| i * 1_000_000 + 5_000_000).collect();
        let peak = peak_gbps(&tp, &tc, 1000);
        // Best run: all 100 messages over 104 µs.
        assert!(
            (peak - 1000.0 * 8.0 * 100.0 / 104e-6 / 1e9).abs() < 1e-6,
            "{peak}"
        );
    }
}
