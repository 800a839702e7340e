//! `rocast switch`: the software multicast switch daemon. It owns N ports
//! and drives the core's [`FrameSwitch`] — IPv4 forwarding, the Cepheus engine, the
//! MRP agent — on real frames; every protocol decision is the core's, this module only
//! moves bytes and keeps time.
//!
//! Port backends:
//! - `afpacket:IFACE`: a raw `AF_PACKET` socket on a Linux interface (a veth of
//!   `rocast lab`), promiscuous, not seeing its own transmissions
//!   (`PACKET_IGNORE_OUTGOING`).
//! - `dgram:LOCAL=REMOTE`: Ethernet frames carried one per UDP datagram over loopback,
//!   the format of QEMU's `-netdev dgram` (and `-netdev socket,udp=`), so a guest's
//!   NIC (with the kernel's Soft-RoCE) plugs straight into a port.
//!
//! Optional per-port egress shaping: a rate limit over the core's egress queues
//! ([`EgressQueues`], the same admission and RED-at-dequeue marking the simulator's
//! switches use), each port bounded to `queue_bytes`; tail drops are counted. Without
//! it, frames leave as soon as they are switched and congestion builds in the kernel's
//! queues instead.
//!
//! Live state: a Unix control socket answers `stats` (ports, pipeline and Cepheus
//! counters, groups with their members, memory per group) and `groups`. The MFT is soft
//! state: a restarted switch has no groups, and leaders re-register (MRP is the only
//! way in), so stopping the daemon loses nothing the controller cannot restore.
//!
//! Captures: with `capture` set, every frame a port receives and every frame it sends
//! is written to `DIR/portN.pcap` (Ethernet, ns timestamps) as a tap on that link
//! would see it, so `rocast pcap check` can verify what real guests put on the wire
//! and what the switch gave them. Injected drops never reach the link and are not
//! captured.
//!
//! Memory: 1 MB of receive slots (64 frames of 16 KB) shared by the ports; per port
//! a send buffer as large as one round's frames for it, plus the egress queue (at most
//! `queue_bytes` when shaping); the tables as [`FrameSwitch::memory_bytes`] says.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rocast_core::fabric::cepheus::CnpFilterPolicy;
use rocast_core::fabric::EcnRed;
use rocast_core::switch::{
    mark_ce, EgressConfig, EgressQueues, FrameSwitch, FrameSwitchConfig, Ingress,
};
use rocast_core::wire::pcap::{PcapWriter, LINKTYPE_ETHERNET};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::endpoint::{Clock, LossInjector};
use crate::fast_path::FastPath;
use crate::udp::setsockopt_int;
use rocast_core::switch::fast_path::{source_data, FastPathGroup, NotCompiled, SourceData};
use rocast_core::wire::Ipv4Address;
use rocast_core::wire::Psn;

/// Largest frame a port reads (jumbo frames of 9000-byte MTU links fit).
const MAX_FRAME: usize = 16 * 1024;
/// Frames read from one port before looking at the others (one `recvmmsg` on a
/// packet socket).
const RX_BURST: usize = 64;
/// Frames per `sendmmsg`.
const TX_BURST: usize = 64;

/// Where one port's frames come from and go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    AfPacket(String),
    Dgram {
        local: SocketAddrV4,
        remote: SocketAddrV4,
    },
}

/// The form `--port` takes (`afpacket:IFACE`, `dgram:LOCAL=REMOTE`), so that a stats
/// line names a port in one word the user recognises.
impl std::fmt::Display for PortSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortSpec::AfPacket(name) => write!(f, "afpacket:{name}"),
            PortSpec::Dgram { local, remote } => write!(f, "dgram:{local}={remote}"),
        }
    }
}

/// Why a `--port` is not a port; `spec` is the text given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortSpecError {
    #[error("port {spec:?}: bad interface name")]
    InterfaceName { spec: String },
    #[error("port {spec:?}: expected dgram:LOCAL=REMOTE")]
    DgramPair { spec: String },
    #[error("port {spec:?}: {addr:?} is not IPv4:port")]
    Address { spec: String, addr: String },
    /// Only loopback may carry the lab's traffic.
    #[error("port {spec:?}: dgram ports are loopback only")]
    NotLoopback { spec: String },
    #[error("port {spec:?}: expected afpacket:IFACE or dgram:LOCAL=REMOTE")]
    Kind { spec: String },
}

impl std::str::FromStr for PortSpec {
    type Err = PortSpecError;
    fn from_str(s: &str) -> Result<Self, PortSpecError> {
        let spec = || s.to_string();
        if let Some(ifname) = s.strip_prefix("afpacket:") {
            let ok = !ifname.is_empty()
                && ifname.len() < libc::IFNAMSIZ
                && ifname
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
            if !ok {
                return Err(PortSpecError::InterfaceName { spec: spec() });
            }
            return Ok(PortSpec::AfPacket(ifname.to_string()));
        }
        if let Some(rest) = s.strip_prefix("dgram:") {
            let (l, r) = rest
                .split_once('=')
                .ok_or_else(|| PortSpecError::DgramPair { spec: spec() })?;
            let parse = |a: &str| {
                a.parse::<SocketAddrV4>()
                    .map_err(|_| PortSpecError::Address {
                        spec: spec(),
                        addr: a.to_string(),
                    })
            };
            let (local, remote) = (parse(l)?, parse(r)?);
            if !local.ip().is_loopback() || !remote.ip().is_loopback() {
                // Only loopback may carry the lab's traffic.
                return Err(PortSpecError::NotLoopback { spec: spec() });
            }
            return Ok(PortSpec::Dgram { local, remote });
        }
        Err(PortSpecError::Kind { spec: spec() })
    }
}

/// Counters of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// The kernel refused a frame (buffer full, too long for the link).
    pub tx_errors: u64,
    /// Tail drops of the egress queue (shaping).
    pub queue_drops: u64,
    /// Frames dropped on purpose (`--loss`): the lossy link of a recovery test.
    pub injected_drops: u64,
    pub ecn_marked: u64,
    /// Datagrams from an address other than the port's remote (dgram).
    pub foreign: u64,
    /// Frames longer than `MAX_FRAME` (truncated on read) dropped.
    pub oversize: u64,
    /// The capture file could not be written (the capture stopped there).
    pub capture_errors: u64,
    /// Receive errors (the interface went down, the peer's socket is gone): counted,
    /// and the port is read again on the next round.
    pub rx_errors: u64,
    /// Frames the kernel dropped before this daemon read them: the socket's receive
    /// buffer was full (`PACKET_STATISTICS` `tp_drops` on an AF_PACKET port). A lab
    /// comparing runs needs to know its infrastructure lost nothing.
    pub kernel_drops: u64,
}

enum Backend {
    AfPacket(OwnedFd),
    Dgram {
        sock: UdpSocket,
        remote: SocketAddrV4,
    },
}

/// Egress shaping of one port: a token bucket at `rate_bps` over a byte-bounded FIFO.
#[derive(Clone, Copy, Debug)]
pub struct Shaping {
    pub rate_bps: u64,
    pub queue_bytes: usize,
    pub ecn: Option<EcnRed>,
}

/// The receive slots of one `recv_batch`: [`RX_BURST`] frames of [`MAX_FRAME`] bytes,
/// with the `recvmmsg` headers over them built once (the daemon polls every port each
/// round, busy or not).
struct RxFrames {
    bytes: Vec<u8>,
    lens: [usize; RX_BURST],
    /// Slot i's iovec; the headers point at these (heap buffers: moving `RxFrames`
    /// moves no pointee).
    _iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl RxFrames {
    fn new() -> Self {
        let mut bytes = vec![0u8; RX_BURST * MAX_FRAME];
        let mut iov: Vec<libc::iovec> = bytes
            .chunks_exact_mut(MAX_FRAME)
            .map(|slot| libc::iovec {
                iov_base: slot.as_mut_ptr() as *mut libc::c_void,
                iov_len: MAX_FRAME,
            })
            .collect();
        let msgs = crate::udp::mmsg_headers(&mut iov);
        RxFrames {
            bytes,
            lens: [0; RX_BURST],
            _iov: iov,
            msgs,
        }
    }

    fn frame(&self, i: usize) -> &[u8] {
        &self.bytes[i * MAX_FRAME..i * MAX_FRAME + self.lens[i]]
    }
}

struct Port {
    spec: PortSpec,
    backend: Backend,
    stats: PortStats,
    /// Frames switched in this round, sent in one `sendmmsg` (one syscall for the
    /// copies a replication makes, instead of one each): their bytes back to back
    /// in one buffer kept across rounds (no allocation per copy), and each one's
    /// (start, length).
    pending_bytes: Vec<u8>,
    pending: Vec<(usize, usize)>,
    /// When the head of the queue may leave (ps on the daemon's clock).
    next_free_ps: u64,
    /// The link's capture, both directions.
    capture: Option<PcapWriter<BufWriter<File>>>,
}

fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// [`os_err`] for an error rustix returned: the same text.
fn errno_err(what: &str, e: rustix::io::Errno) -> io::Error {
    let e = io::Error::from(e);
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A raw AF_PACKET socket bound to `ifname` for every protocol (`flags`: extra
/// `socket(2)` type flags, e.g. `SOCK_NONBLOCK`); returns it and the interface index.
pub(crate) fn bound_packet_socket(ifname: &str, flags: i32) -> io::Result<(OwnedFd, i32)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let proto = (libc::ETH_P_ALL as u16).to_be();
    let owned = rustix::net::socket_with(
        AddressFamily::PACKET,
        SocketType::RAW,
        SocketFlags::CLOEXEC | SocketFlags::from_bits_retain(flags as u32),
        Some(rustix::net::eth::ALL),
    )
    .map_err(|e| errno_err("socket(AF_PACKET)", e))?;
    let fd = owned.as_raw_fd();
    if ifname.contains('\0') {
        return Err(io::Error::other("interface name"));
    }
    let index = rustix::net::netdevice::name_to_index(&owned, ifname)
        .map_err(|e| errno_err(&format!("interface {ifname}"), e))?;
    let sll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: proto,
        sll_ifindex: index as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: sll is a live sockaddr_ll and the length is its size; the kernel only reads
    // it. Raw because neither rustix nor socket2 builds an AF_PACKET address safely.
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(os_err(&format!("bind to {ifname}")));
    }
    Ok((owned, index as i32))
}

/// Receive buffer of an AF_PACKET port (SO_RCVBUFFORCE; the kernel charges each
/// queued frame its skb's true size, about 2.3 KB for a 1 KB RoCE frame off a veth, so
/// 32 MB holds some 14,000 frames). The daemon stands in for a switch's packet buffer
/// and a loaded host deschedules it: with 8 MB, lab-bcast beside two busy simulators
/// lost 6–13 thousand frames per port (TCP control segments among them, which then
/// waited out TCP's back-off). 32 MB alone lost none but made things worse while the
/// RC senders resent whole windows after each spurious timeout (duplicates queued
/// behind the originals for seconds); with their slow restart
/// (`QpConfig::slow_restart`) the queue stays bounded by the windows. Memory: only
/// what is queued is allocated, at most this per port.
const PORT_RX_BUFFER: i32 = 32 << 20;

pub(crate) fn open_afpacket(ifname: &str) -> io::Result<OwnedFd> {
    let (owned, index) = bound_packet_socket(ifname, libc::SOCK_NONBLOCK)?;
    let fd = owned.as_raw_fd();
    // Frames for other MACs are ours to switch.
    let mr = libc::packet_mreq {
        mr_ifindex: index,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    if crate::udp::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).is_err() {
        return Err(os_err("PACKET_ADD_MEMBERSHIP"));
    }
    // Our own transmissions must not come back as arrivals (Linux 4.20+).
    const PACKET_IGNORE_OUTGOING: i32 = 23;
    setsockopt_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        .map_err(|e| io::Error::new(e.kind(), format!("setsockopt: {e}")))?;
    let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, PORT_RX_BUFFER);
    let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20);
    Ok(owned)
}

impl Port {
    /// Adds the kernel's receive drops since the last call (the kernel resets the
    /// counter on each read) to `stats.kernel_drops`.
    fn collect_kernel_drops(&mut self) {
        if let Backend::AfPacket(fd) = &self.backend {
            let mut st = libc::tpacket_stats {
                tp_packets: 0,
                tp_drops: 0,
            };
            let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
            // SAFETY: st and len are live and len is st's size: the kernel writes at most
            // that many bytes into it. No safe wrapper reads PACKET_STATISTICS.
            let r = unsafe {
                libc::getsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_STATISTICS,
                    &mut st as *mut libc::tpacket_stats as *mut libc::c_void,
                    &mut len,
                )
            };
            if r == 0 {
                self.stats.kernel_drops += u64::from(st.tp_drops);
            }
        }
    }

    fn open(spec: &PortSpec) -> io::Result<Port> {
        let backend = match spec {
            PortSpec::AfPacket(ifname) => Backend::AfPacket(open_afpacket(ifname)?),
            PortSpec::Dgram { local, remote } => {
                let sock = UdpSocket::bind(local)
                    .map_err(|e| io::Error::new(e.kind(), format!("bind {local}: {e}")))?;
                sock.set_nonblocking(true)?;
                // A guest's burst (a 1 MB message is 1,000 frames) must not overflow the
                // default ~200 KB socket buffer: rxe would see it as loss.
                let fd = sock.as_raw_fd();
                let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
                let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20);
                Backend::Dgram {
                    sock,
                    remote: *remote,
                }
            }
        };
        Ok(Port {
            spec: spec.clone(),
            backend,
            stats: PortStats::default(),
            pending_bytes: Vec::new(),
            pending: Vec::new(),
            next_free_ps: 0,
            capture: None,
        })
    }

    /// Writes one frame seen on this port's link to its capture, if any. A failed
    /// write (disk full) ends the capture rather than the switch, and is counted.
    fn capture(&mut self, frame: &[u8]) {
        let Some(w) = &mut self.capture else {
            return;
        };
        let ts_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        if w.write_record(ts_ns, frame).is_err() {
            self.stats.capture_errors += 1;
            self.capture = None;
        }
    }

    fn close_capture(&mut self) {
        if let Some(w) = self.capture.take() {
            if w.into_inner().flush().is_err() {
                self.stats.capture_errors += 1;
            }
        }
    }

    fn borrowed_fd(&self) -> BorrowedFd<'_> {
        match &self.backend {
            Backend::AfPacket(fd) => fd.as_fd(),
            Backend::Dgram { sock, .. } => sock.as_fd(),
        }
    }

    /// Reads up to [`RX_BURST`] waiting frames into `rx` (frame i at
    /// `i * MAX_FRAME`, its length in `rx.lens[i]`); returns how many. A packet socket
    /// takes one `recvmmsg` for them all.
    fn recv_batch(&mut self, rx: &mut RxFrames) -> io::Result<usize> {
        let Backend::AfPacket(fd) = &self.backend else {
            let mut n = 0;
            while n < RX_BURST {
                let slot = &mut rx.bytes[n * MAX_FRAME..(n + 1) * MAX_FRAME];
                let Some(len) = self.recv(slot)? else {
                    break;
                };
                rx.lens[n] = len;
                n += 1;
            }
            return Ok(n);
        };
        let fd = fd.as_raw_fd();
        let r = loop {
            // SAFETY: rx.msgs are valid headers over RX_BURST live slots of MAX_FRAME
            // bytes; MSG_TRUNC reports a frame's real length so oversize ones are seen.
            // The forwarding hot path: neither rustix nor socket2 has recvmmsg.
            let r = unsafe {
                libc::recvmmsg(
                    fd,
                    rx.msgs.as_mut_ptr(),
                    RX_BURST as u32,
                    libc::MSG_TRUNC | libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(0),
                // A port whose link is down is an event on that port (see `recv`).
                _ => {
                    self.stats.rx_errors += 1;
                    return Ok(0);
                }
            }
        };
        // Keep the good frames, in order, in the first slots.
        let mut kept = 0;
        for i in 0..r {
            let len = rx.msgs[i].msg_len as usize;
            if len > MAX_FRAME {
                self.stats.oversize += 1;
                continue;
            }
            if kept != i {
                rx.bytes
                    .copy_within(i * MAX_FRAME..i * MAX_FRAME + len, kept * MAX_FRAME);
            }
            rx.lens[kept] = len;
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            kept += 1;
        }
        if self.capture.is_some() {
            for i in 0..kept {
                self.capture(rx.frame(i));
            }
        }
        Ok(kept)
    }

    /// One frame if one is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            let r = match &self.backend {
                Backend::AfPacket(fd) => {
                    // MSG_TRUNC: the frame's real length, so oversize frames are detected.
                    rustix::net::recv(fd, &mut buf[..], rustix::net::RecvFlags::TRUNC)
                        .map(|(_, real_len)| real_len)
                        .map_err(io::Error::from)
                }
                Backend::Dgram { sock, remote } => match sock.recv_from(buf) {
                    Ok((n, from)) if from != std::net::SocketAddr::V4(*remote) => {
                        let _ = n;
                        self.stats.foreign += 1;
                        continue;
                    }
                    Ok((n, _)) => Ok(n),
                    Err(e) => Err(e),
                },
            };
            return match r {
                Ok(n) if n > buf.len() => {
                    self.stats.oversize += 1;
                    continue;
                }
                Ok(n) => {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += n as u64;
                    self.capture(&buf[..n]);
                    Ok(Some(n))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A port whose link is down (ENETDOWN on AF_PACKET) or whose dgram
                // peer is gone (ECONNREFUSED) is an event on that port, never the
                // switch's end: count it and serve the other ports.
                Err(_) => {
                    self.stats.rx_errors += 1;
                    Ok(None)
                }
            };
        }
    }

    /// Queues one frame for this round's `flush`.
    fn push_pending(&mut self, frame: &[u8]) {
        self.pending.push((self.pending_bytes.len(), frame.len()));
        self.pending_bytes.extend_from_slice(frame);
    }

    /// Sends the pending frames: one `sendmmsg` on a packet socket.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let frames = std::mem::take(&mut self.pending);
        let bytes = std::mem::take(&mut self.pending_bytes);
        match &self.backend {
            Backend::AfPacket(fd) => {
                let fd = fd.as_raw_fd();
                let mut done = 0usize;
                while done < frames.len() {
                    let chunk = &frames[done..frames.len().min(done + TX_BURST)];
                    let mut iov = [libc::iovec {
                        iov_base: std::ptr::null_mut(),
                        iov_len: 0,
                    }; TX_BURST];
                    let mut msgs = [crate::udp::empty_mmsghdr(); TX_BURST];
                    for (i, &(at, len)) in chunk.iter().enumerate() {
                        iov[i] = libc::iovec {
                            iov_base: bytes[at..].as_ptr() as *mut libc::c_void,
                            iov_len: len,
                        };
                        msgs[i].msg_hdr.msg_iov = &mut iov[i] as *mut libc::iovec;
                        msgs[i].msg_hdr.msg_iovlen = 1;
                    }
                    // SAFETY: msgs[..chunk.len()] point at iov[..chunk.len()], which point into
                    // `bytes`; both live across the call and the kernel only reads them. The
                    // forwarding hot path, batched: rustix's sendmmsg would rebuild headers.
                    let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), chunk.len() as u32, 0) };
                    if r <= 0 {
                        // The kernel refused the next frame: count it and go on.
                        self.stats.tx_errors += 1;
                        done += 1;
                        continue;
                    }
                    for &(at, len) in &chunk[..r as usize] {
                        self.stats.tx_frames += 1;
                        self.stats.tx_bytes += len as u64;
                        self.capture(&bytes[at..at + len]);
                    }
                    done += r as usize;
                }
            }
            Backend::Dgram { .. } => {
                for &(at, len) in &frames {
                    self.transmit(&bytes[at..at + len]);
                }
            }
        }
        // Keep the buffers' capacity for the next round.
        self.pending = frames;
        self.pending.clear();
        self.pending_bytes = bytes;
        self.pending_bytes.clear();
    }

    fn transmit(&mut self, frame: &[u8]) {
        let ok = match &self.backend {
            Backend::AfPacket(fd) => {
                rustix::net::send(fd, frame, rustix::net::SendFlags::empty()) == Ok(frame.len())
            }
            Backend::Dgram { sock, remote } => sock.send_to(frame, remote).is_ok(),
        };
        if ok {
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += frame.len() as u64;
            self.capture(frame);
        } else {
            self.stats.tx_errors += 1;
        }
    }
}

/// Everything `rocast switch` is started with.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    pub ports: Vec<PortSpec>,
    pub pipeline: FrameSwitchConfig,
    pub cnp_filter: CnpFilterPolicy,
    /// Pinned hosts: (IP, port, MAC).
    pub hosts: Vec<(
        rocast_core::wire::Ipv4Address,
        u16,
        rocast_core::wire::EthernetAddress,
    )>,
    /// PEEL group members at a rack switch: (group, port), as IGMP snooping would
    /// learn them (needs `pipeline.peel` = a rack role).
    pub peel_members: Vec<(rocast_core::wire::Ipv4Address, u16)>,
    pub shaping: Option<Shaping>,
    /// Drop each frame leaving these ports with this probability (seeded).
    pub loss: Option<(Vec<u16>, f64)>,
    pub control: Option<PathBuf>,
    /// Write each port's link to `DIR/portN.pcap`.
    pub capture: Option<PathBuf>,
    /// Replicate armed groups' new data in the kernel ([`crate::fast_path`]).
    pub fast_path: bool,
    pub seed: u64,
}

/// The running daemon.
pub struct SwitchDaemon {
    sw: FrameSwitch,
    ports: Vec<Port>,
    shaping: Option<Shaping>,
    /// The shaped ports' queues (with `shaping`).
    egress: Option<EgressQueues<Vec<u8>>>,
    /// Per port, whether its egress is lossy, and the one seeded injector they share.
    lossy: Vec<bool>,
    loss: LossInjector,
    /// The configuration's seed (a loss set at run time is seeded from it too).
    seed: u64,
    rng: ChaCha8Rng,
    control: Option<(UnixListener, PathBuf)>,
    /// Control clients whose request line is still arriving (non-blocking, each with
    /// its deadline), so that a silent client never stalls forwarding.
    control_clients: Vec<ControlClient>,
    clock: Clock,
    fast: Option<FastPathDriver>,
}

/// The daemon's side of the fast path: when to arm a group, and keeping armed groups
/// in step with the pipeline's tables.
struct FastPathDriver {
    fast: FastPath,
    /// Per group: the highest PSN of new data the daemon itself forwarded.
    daemon_high: std::collections::BTreeMap<u32, Psn>,
    /// Groups to arm once this round's frames are sent (see `arm_pending`).
    to_arm: Vec<(FastPathGroup, Psn)>,
    last_check: std::time::Instant,
}

impl FastPathDriver {
    /// After the pipeline handled `frame` from `in_port`: a group's new data that the
    /// daemon forwarded itself, with its port's queue drained (`drained`), arms the
    /// group from that PSN on, once the round's frames are sent (`arm_pending`).
    /// Arming later would let the kernel overtake frames still queued for the daemon;
    /// arming before the daemon's copies are sent would let the kernel's copies of
    /// the next PSN leave first. Frames that reach the daemon's socket between its
    /// read and the arming are safe too: the kernel forwards only the PSN right after
    /// the highest, so the first of them suspends the group again.
    fn after_frame(&mut self, sw: &FrameSwitch, frame: &[u8], drained: bool) {
        let Some(SourceData {
            group,
            src_ip,
            dest_qp,
            psn,
            ..
        }) = source_data(frame)
        else {
            return;
        };
        if !sw.config().group_space.contains(group) {
            return;
        }
        // Data from another sender than the group's registered source was dropped by
        // the pipeline: its PSNs must not count as forwarded.
        if sw
            .group_source(group)
            .is_none_or(|(source, _)| source != src_ip)
        {
            return;
        }
        let key = group.to_u32();
        // The highest forwarded by anyone: the daemon, or the kernel before a suspend.
        let high = self
            .daemon_high
            .get(&key)
            .copied()
            .max(self.fast.high_psn(group));
        if high.is_some_and(|h| psn <= h) {
            return;
        }
        self.daemon_high.insert(key, psn);
        if !drained || self.fast.armed(group) {
            return;
        }
        if let Ok(g) = sw.fast_path_group(group, src_ip, dest_qp) {
            self.to_arm.retain(|(t, _)| t.mcst_id != group);
            self.to_arm.push((g, psn));
        }
    }

    /// Arms the groups `after_frame` chose, now that the daemon's copies are queued.
    fn arm_pending(&mut self) {
        for (g, psn) in self.to_arm.drain(..) {
            // A full table leaves the group with the daemon.
            let _ = self.fast.arm(&g, psn);
        }
    }

    /// Re-compiles the held groups (at most every millisecond): a changed tree is
    /// re-armed, a group the pipeline no longer compiles is disarmed.
    fn check(&mut self, sw: &FrameSwitch) {
        if self.last_check.elapsed() < std::time::Duration::from_millis(1) {
            return;
        }
        self.last_check = std::time::Instant::now();
        // A released group's PSNs end with it: the next group at that McstID starts
        // its own (kept, they would stop it from arming until its PSNs passed them).
        self.daemon_high
            .retain(|&k, _| sw.cepheus().group(Ipv4Address::from_u32(k)).is_some());
        for group in self.fast.groups() {
            let Some(held) = self.fast.held(group).cloned() else {
                continue;
            };
            match sw.fast_path_group(group, held.src_ip, held.group_qp) {
                Ok(g) if g == held => {}
                Ok(g) => {
                    let _ = self.fast.update(&g);
                }
                Err(NotCompiled::NoGroup) => {
                    let _ = self.fast.disarm(group);
                }
                Err(_) => {
                    // The daemon goes on from the kernel's highest PSN.
                    if let Some(k) = self.fast.high_psn(group) {
                        let d = self.daemon_high.entry(group.to_u32()).or_insert(k);
                        *d = (*d).max(k);
                    }
                    let _ = self.fast.disarm(group);
                }
            }
        }
    }
}

/// A control-socket client: its request so far and when it is dropped.
struct ControlClient {
    stream: std::os::unix::net::UnixStream,
    request: Vec<u8>,
    deadline: std::time::Instant,
}

/// How long a control client may take to send its request line.
const CONTROL_DEADLINE: std::time::Duration = std::time::Duration::from_millis(200);
/// The most control clients served at once; more wait in the listen backlog.
const MAX_CONTROL_CLIENTS: usize = 8;
/// The longest control request (`stats`, `groups`, `loss P [PORT…]`).
pub const MAX_CONTROL_REQUEST: usize = 64;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: i32) {
    STOP.store(true, Ordering::SeqCst);
}

/// Why a switch daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error("a switch needs 1 to 65535 ports")]
    PortCount,
    /// The forwarding tables refused a `--host` or `--peel-member` (the core's words).
    #[error("{0}")]
    Table(String),
    #[error("port {spec:?}: {source}")]
    Port { spec: PortSpec, source: io::Error },
    /// A capture folder or file, or the control socket's folder.
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: io::Error },
    #[error("control socket {}: {source}", path.display())]
    ControlSocket { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("loss {0}: must be in [0, 1)")]
    LossRate(f64),
    #[error("loss on port {0}: no such port")]
    LossPort(u16),
    #[error("--fast-path forwards in the kernel: it cannot shape, drop or capture (those are the daemon's); leave them out")]
    FastPathOptions,
    #[error("--fast-path needs afpacket ports")]
    FastPathPorts,
    #[error("--fast-path: {0}")]
    FastPath(io::Error),
}

impl SwitchDaemon {
    pub fn new(cfg: SwitchConfig) -> Result<Self, SwitchError> {
        if cfg.ports.is_empty() || cfg.ports.len() > u16::MAX as usize {
            return Err(SwitchError::PortCount);
        }
        let mut pipeline = cfg.pipeline.clone();
        pipeline.ports = cfg.ports.len() as u16;
        let mut sw = FrameSwitch::new(pipeline, cfg.cnp_filter.build());
        for &(ip, port, mac) in &cfg.hosts {
            sw.add_host(ip, port, mac)
                .map_err(|e| SwitchError::Table(e.to_string()))?;
        }
        for &(group, port) in &cfg.peel_members {
            sw.add_peel_member(group, port)
                .map_err(|e| SwitchError::Table(e.to_string()))?;
        }
        let mut ports = cfg
            .ports
            .iter()
            .map(|p| {
                Port::open(p).map_err(|source| SwitchError::Port {
                    spec: p.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(dir) = &cfg.capture {
            std::fs::create_dir_all(dir).map_err(|source| SwitchError::File {
                path: dir.clone(),
                source,
            })?;
            for (i, port) in ports.iter_mut().enumerate() {
                let path = dir.join(format!("port{i}.pcap"));
                let f = File::create(&path).map_err(|source| SwitchError::File {
                    path: path.clone(),
                    source,
                })?;
                port.capture = Some(
                    PcapWriter::new(BufWriter::with_capacity(1 << 20, f), LINKTYPE_ETHERNET)
                        .map_err(|source| SwitchError::File {
                            path: path.clone(),
                            source,
                        })?,
                );
            }
        }
        let control = match &cfg.control {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|source| SwitchError::File {
                        path: dir.to_path_buf(),
                        source,
                    })?;
                }
                // A stale socket from a crashed daemon is ours to replace.
                let _ = std::fs::remove_file(path);
                let l = UnixListener::bind(path).map_err(|source| SwitchError::ControlSocket {
                    path: path.clone(),
                    source,
                })?;
                l.set_nonblocking(true)?;
                Some((l, path.clone()))
            }
            None => None,
        };
        let mut lossy = vec![false; ports.len()];
        let mut loss_p = 0.0;
        if let Some((ports, p)) = &cfg.loss {
            if !(0.0..1.0).contains(p) {
                return Err(SwitchError::LossRate(*p));
            }
            loss_p = *p;
            for &port in ports {
                *lossy
                    .get_mut(port as usize)
                    .ok_or(SwitchError::LossPort(port))? = true;
            }
        }
        let egress = cfg.shaping.map(|sh| {
            EgressQueues::new(EgressConfig::per_port_limit(
                ports.len() as u16,
                sh.queue_bytes as u64,
                sh.ecn,
            ))
        });
        // Counters of the MRP this switch seals start at the wall clock: a restarted
        // switch goes on above what its neighbours accepted from it before.
        sw.set_mrp_counter(crate::mcast::wall_clock_ns());
        let fast = if cfg.fast_path {
            if cfg.shaping.is_some() || cfg.loss.is_some() || cfg.capture.is_some() {
                return Err(SwitchError::FastPathOptions);
            }
            let mut attach = Vec::new();
            for p in &ports {
                let (Backend::AfPacket(fd), PortSpec::AfPacket(name)) = (&p.backend, &p.spec)
                else {
                    return Err(SwitchError::FastPathPorts);
                };
                // An unknown name is index 0, as if_nametoindex(3) answers; attaching then
                // fails with the kernel's word for it.
                let index = rustix::net::netdevice::name_to_index(fd, name).unwrap_or(0);
                attach.push((fd.as_raw_fd(), index));
            }
            let fast = FastPath::attach(&attach).map_err(SwitchError::FastPath)?;
            Some(FastPathDriver {
                fast,
                daemon_high: Default::default(),
                to_arm: Vec::new(),
                last_check: std::time::Instant::now(),
            })
        } else {
            None
        };
        Ok(SwitchDaemon {
            sw,
            egress,
            ports,
            lossy,
            loss: LossInjector::new(loss_p, cfg.seed ^ 0x6c6f_7373),
            shaping: cfg.shaping,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            control,
            control_clients: Vec::new(),
            clock: Clock::new(),
            seed: cfg.seed,
            fast,
        })
    }

    /// The control socket's `loss P [PORT…]`: from now on drop each frame leaving
    /// those ports (all when none are named) with probability P, seeded as `--loss`
    /// is; `loss 0` stops it. The fault-injection suite starts loss mid-run with it.
    fn set_loss(&mut self, rate: f64, ports: &[usize]) -> String {
        let mut lossy = vec![ports.is_empty(); self.ports.len()];
        for &i in ports {
            lossy[i] = true;
        }
        self.lossy = lossy;
        self.loss = LossInjector::new(rate, self.seed ^ 0x6c6f_7373);
        format!(
            "loss {rate} on {} ports\n",
            self.lossy.iter().filter(|&&l| l).count()
        )
    }

    pub fn pipeline(&self) -> &FrameSwitch {
        &self.sw
    }

    /// Switches until SIGINT or SIGTERM (or `max_time` passes), then returns.
    pub fn run(&mut self, max_time: Option<std::time::Duration>) -> io::Result<()> {
        // SAFETY: installs an async-signal-safe handler that only stores to an atomic.
        // Neither std nor rustix installs a signal handler safely.
        unsafe {
            libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
            libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        }
        let started = std::time::Instant::now();
        let mut rx = RxFrames::new();
        // No frame the pipeline makes is longer than one it was given.
        let mut tx = vec![0u8; MAX_FRAME];
        while !STOP.load(Ordering::SeqCst) {
            if max_time.is_some_and(|m| started.elapsed() >= m) {
                break;
            }
            let mut busy = false;
            for p in 0..self.ports.len() {
                let n = self.ports[p].recv_batch(&mut rx)?;
                busy |= n > 0;
                for i in 0..n {
                    let now = self.clock.now();
                    self.sw.handle_frame(now, p as u16, rx.frame(i));
                    while let Some(t) = self.sw.poll_transmit(now, &mut tx) {
                        self.enqueue(p as u16, t.port, &tx[..t.len]);
                    }
                    if let Some(f) = &mut self.fast {
                        f.after_frame(&self.sw, rx.frame(i), n < RX_BURST && i + 1 == n);
                    }
                }
            }
            // Group leases (soft state): a crashed leader's group is freed here; IGMP
            // queries and membership ends too. What that makes (queries) goes out
            // with the round's frames.
            let now = self.clock.now();
            self.sw.handle_timeout(now);
            while let Some(t) = self.sw.poll_transmit(now, &mut tx) {
                self.enqueue(t.port, t.port, &tx[..t.len]);
            }
            for p in &mut self.ports {
                p.flush();
            }
            if let Some(f) = &mut self.fast {
                f.arm_pending();
            }
            let next_departure = self.drain_queues();
            if let Some(f) = &mut self.fast {
                f.check(&self.sw);
            }
            self.serve_control();
            if !busy {
                self.wait(next_departure)?;
            }
        }
        for p in &mut self.ports {
            p.close_capture();
        }
        Ok(())
    }

    fn enqueue(&mut self, in_port: u16, out: u16, frame: &[u8]) {
        if self.lossy[out as usize] && self.loss.drop_next() {
            self.ports[out as usize].stats.injected_drops += 1;
            return;
        }
        let Some(egress) = &mut self.egress else {
            self.ports[out as usize].push_pending(frame);
            return;
        };
        let len = frame.len() as u64;
        if egress
            .enqueue(Ingress::Port(in_port), out, 0, len, frame.to_vec())
            .is_err()
        {
            self.ports[out as usize].stats.queue_drops += 1;
        }
    }

    /// Sends what the token buckets allow; returns when the next frame may leave.
    fn drain_queues(&mut self) -> Option<u64> {
        let sh = self.shaping?;
        let egress = self.egress.as_mut()?;
        let now = self.clock.now().as_ps();
        let mut next: Option<u64> = None;
        for (i, port) in self.ports.iter_mut().enumerate() {
            let out = i as u16;
            while egress.port_len(out) > 0 {
                let start = port.next_free_ps.max(now.saturating_sub(1_000_000_000));
                if start > now {
                    next = Some(next.map_or(start, |n| n.min(start)));
                    break;
                }
                let Some(d) = egress.dequeue(out, 0) else {
                    break;
                };
                let mut frame = d.item;
                // RED at dequeue, against the bytes left behind (the core's rule).
                let rng = &mut self.rng;
                let draw = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                if egress.red_marks(out, 0, draw) && mark_ce(&mut frame) {
                    port.stats.ecn_marked += 1;
                }
                port.transmit(&frame);
                // Serialisation time at the shaped rate (Ethernet overhead ignored).
                port.next_free_ps =
                    start + frame.len() as u64 * 8 * 1_000_000_000_000 / sh.rate_bps;
            }
        }
        next
    }

    fn wait(&mut self, next_departure: Option<u64>) -> io::Result<()> {
        let now = self.clock.now().as_ps();
        let timeout_ms = match next_departure {
            Some(t) if t <= now => 0,
            Some(t) => ((t - now) / 1_000_000_000).clamp(0, 100) as i32,
            None => 100,
        };
        use rustix::event::{PollFd, PollFlags};
        let mut fds: Vec<PollFd<'_>> = self
            .ports
            .iter()
            .map(|p| PollFd::from_borrowed_fd(p.borrowed_fd(), PollFlags::IN))
            .collect();
        if let Some((l, _)) = &self.control {
            fds.push(PollFd::new(l, PollFlags::IN));
        }
        for c in &self.control_clients {
            fds.push(PollFd::new(&c.stream, PollFlags::IN));
        }
        let timeout = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(timeout_ms) * 1_000_000,
        };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Err(e) if e != rustix::io::Errno::INTR => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Serves the control socket without blocking: accepts waiting clients (up to
    /// [`MAX_CONTROL_CLIENTS`]), reads what each has sent, answers every complete
    /// request, and drops clients past their [`CONTROL_DEADLINE`].
    fn serve_control(&mut self) {
        let Some((l, _)) = &self.control else {
            return;
        };
        while self.control_clients.len() < MAX_CONTROL_CLIENTS {
            let Ok((stream, _)) = l.accept() else {
                break;
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            self.control_clients.push(ControlClient {
                stream,
                request: Vec::new(),
                deadline: std::time::Instant::now() + CONTROL_DEADLINE,
            });
        }
        let now = std::time::Instant::now();
        let mut i = 0;
        while i < self.control_clients.len() {
            let c = &mut self.control_clients[i];
            let whole = |r: &[u8]| r.len() >= MAX_CONTROL_REQUEST || r.contains(&b'\n');
            let mut buf = [0u8; MAX_CONTROL_REQUEST];
            let mut closed = false;
            while !whole(&c.request) {
                match c.stream.read(&mut buf) {
                    Ok(0) => closed = true,
                    Ok(k) => {
                        c.request.extend_from_slice(&buf[..k]);
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {}
                }
                break;
            }
            let complete = closed || whole(&c.request);
            if !complete && now < c.deadline {
                i += 1;
                continue;
            }
            let c = self.control_clients.swap_remove(i);
            let reply = if !complete {
                "timed out waiting for a request (stats or groups)\n".to_string()
            } else {
                match ControlRequest::parse(&c.request, self.ports.len()) {
                    Ok(ControlRequest::Stats) => self.stats_text(),
                    Ok(ControlRequest::Groups) => self.groups_text(),
                    Ok(ControlRequest::Loss { rate, ports }) => self.set_loss(rate, &ports),
                    Err(why) => why.to_string(),
                }
            };
            // The reply is a few KB, under a socket buffer: written in one go, with a
            // short deadline should the client not read.
            let mut stream = c.stream;
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_write_timeout(Some(std::time::Duration::from_millis(50)));
            let _ = stream.write_all(reply.as_bytes());
        }
    }

    /// The groups this switch holds, one line each: McstID, its source (address and
    /// port), members (port IP QPN).
    pub fn groups_text(&self) -> String {
        let mut t = String::new();
        let c = self.sw.cepheus();
        let per_group = if c.num_groups() > 0 {
            c.memory_bytes() / c.num_groups()
        } else {
            0
        };
        let _ = writeln!(
            t,
            "groups {} (group space {}, {} B of tables per group)",
            c.num_groups(),
            c.group_space(),
            per_group
        );
        for id in c.group_ids() {
            let members: Vec<String> = self
                .sw
                .group_members(id)
                .iter()
                .map(|(p, ip, q)| format!("port{p}={ip}/qpn{q:#x}"))
                .collect();
            let entries = c.group(id).map_or(0, |g| g.entries().len());
            // The only sender whose data the group takes (its registration's).
            let source = self
                .sw
                .group_source(id)
                .map_or("none".to_string(), |(ip, p)| format!("{ip}@port{p}"));
            let _ = writeln!(
                t,
                "group {id} mft_entries {entries} source {source} members {}",
                members.join(" ")
            );
            if let Some(k) = self.fast.as_ref().and_then(|f| f.fast.counters(id)) {
                let state = if self.fast.as_ref().is_some_and(|f| f.fast.armed(id)) {
                    "armed"
                } else {
                    "suspended"
                };
                let _ = writeln!(
                    t,
                    "group {id} fast_path {state} frames {} copies {} deferred {}",
                    k.frames, k.copies, k.deferred
                );
            }
        }
        // IPv4 multicast groups by IGMP snooping: group, then its member ports.
        for (g, ports) in self.sw.igmp().groups() {
            let ports: Vec<String> = ports.map(|p| format!("port{p}")).collect();
            let _ = writeln!(t, "igmp {g} members {}", ports.join(" "));
        }
        t
    }

    /// Every counter, as `name value` lines (stable names for scripts and tests).
    pub fn stats_text(&mut self) -> String {
        let mut t = String::new();
        for p in &mut self.ports {
            p.collect_kernel_drops();
        }
        for (i, p) in self.ports.iter().enumerate() {
            let s = &p.stats;
            let _ = writeln!(
                t,
                "port {i} {} rx_frames {} rx_bytes {} tx_frames {} tx_bytes {} tx_errors {} queue_drops {} injected_drops {} ecn_marked {} foreign {} oversize {} capture_errors {} rx_errors {} kernel_drops {}",
                p.spec, s.rx_frames, s.rx_bytes, s.tx_frames, s.tx_bytes, s.tx_errors, s.queue_drops, s.injected_drops, s.ecn_marked, s.foreign, s.oversize, s.capture_errors, s.rx_errors, s.kernel_drops
            );
        }
        let f = self.sw.stats();
        for (k, v) in [
            ("rx_frames", f.rx_frames),
            ("rx_bytes", f.rx_bytes),
            ("tx_frames", f.tx_frames),
            ("tx_bytes", f.tx_bytes),
            ("drop_malformed", f.malformed),
            ("arp_proxied", f.arp_proxied),
            ("flooded", f.flooded),
            ("forwarded", f.forwarded),
            ("drop_hairpin", f.hairpin_drops),
            ("drop_roce_malformed", f.roce_malformed),
            ("drop_bad_icrc", f.bad_icrc),
            ("drop_no_mac", f.no_mac),
            ("mrp_in", f.mrp_in),
            ("mrp_out", f.mrp_out),
            ("mrp_malformed", f.mrp_malformed),
            ("mrp_refused", f.mrp_refused),
            ("mrp_released", f.mrp_released),
            ("mrp_stale_release", f.mrp_stale_release),
            ("mrp_pruned", f.mrp_pruned),
            ("mrp_prune_ignored", f.mrp_prune_ignored),
            ("lease_expired", f.lease_expired),
            ("mrp_unauthenticated", f.mrp_unauthenticated),
            ("mrp_replayed", f.mrp_replayed),
            ("allocated", f.allocated),
            ("allocation_full", f.allocation_full),
            ("allocation_expired", f.allocation_expired),
            ("replicated_bytes", f.replicated_bytes),
            ("igmp_reports", f.igmp_reports),
            ("drop_igmp_malformed", f.igmp_malformed),
            ("igmp_queries_sent", f.igmp_queries_sent),
            ("igmp_expired", f.igmp_expired),
            ("mcast_forwarded", f.mcast_forwarded),
            ("mcast_unregistered", f.mcast_unregistered),
            ("drop_source_guard", f.source_guard_drops),
            ("drop_arp_spoof", f.arp_spoof_drops),
            ("drop_group_source", f.group_source_drops),
            ("mrp_new_incarnations", f.mrp_new_incarnations),
            ("refused_host_move", f.host_move_refused),
            ("refused_mac_move", f.mac_move_refused),
            ("refused_mac_table_full", f.mac_table_full),
            ("refused_host_table_full", f.host_table_full),
            ("refused_igmp_table_full", f.igmp_table_full),
            ("mac_expired", f.mac_expired),
            ("host_expired", f.host_expired),
        ] {
            let _ = writeln!(t, "switch {k} {v}");
        }
        let c = &self.sw.cepheus().stats;
        for (k, v) in [
            ("data_in", c.data_in),
            ("replicas", c.replicas),
            ("bridged", c.bridged),
            ("retransmission_filtered", c.filtered),
            ("acks_in", c.acks_in),
            ("naks_in", c.naks_in),
            ("cnps_in", c.cnps_in),
            ("acks_out", c.acks_out),
            ("naks_out", c.naks_out),
            ("cnps_out", c.cnps_out),
            ("cnps_filtered", c.cnps_filtered),
            ("reacks", c.reacks),
            ("source_switches", c.source_switches),
            ("drop_unknown_group", c.unknown_group),
            ("drop_not_in_tree", c.not_in_tree),
            ("drop_stray_feedback", c.stray_feedback),
            ("drop_unsupported", c.unsupported),
        ] {
            let _ = writeln!(t, "cepheus {k} {v}");
        }
        if let Some(p) = self.sw.peel() {
            let s = &p.stats;
            for (k, v) in [
                ("in", f.peel_in),
                ("drop_malformed", f.peel_malformed),
                ("forwarded", f.peel_forwarded),
                ("delivered", f.peel_delivered),
                ("dropped", f.peel_dropped),
                ("drop_over_covered", s.over_covered),
                ("drop_no_rule", s.no_rule),
                ("drop_misrouted", s.misrouted),
                ("drop_no_uplink", s.no_uplink),
            ] {
                let _ = writeln!(t, "peel {k} {v}");
            }
            for g in p.groups() {
                let m: Vec<String> = p.members(g).iter().map(u16::to_string).collect();
                let _ = writeln!(t, "peel group {g} member_ports {}", m.join(","));
            }
        }
        // The tables' own accounting beside what the process really holds: a table
        // the accounting misses shows as a gap between the two.
        let (rss, hwm) = process_memory();
        let _ = writeln!(
            t,
            "memory tables_bytes {} vm_rss_bytes {} vm_hwm_bytes {} learned_macs {} hosts {} igmp_memberships {} cnp_filter {}",
            self.sw.memory_bytes(),
            rss,
            hwm,
            self.sw.learned_macs(),
            self.sw.hosts().count(),
            self.sw.igmp().len(),
            self.sw.cepheus().cnp_filter_name()
        );
        t.push_str(&self.groups_text());
        t
    }
}

impl Drop for SwitchDaemon {
    fn drop(&mut self) {
        if let Some((_, path)) = &self.control {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// This process's resident memory and its peak (VmRSS, VmHWM of
/// `/proc/self/status`), in bytes; 0 where the kernel does not say.
pub fn process_memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |k| k * 1024)
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

/// The `KIND KEY VALUE` counter lines of a `stats` reply (`switch rx_frames 12`,
/// `cepheus replicas 30`, `peel delivered 4`), as (kind, key, value).
pub fn stat_counters(reply: &str) -> impl Iterator<Item = (&str, &str, u64)> {
    reply.lines().filter_map(|l| {
        let mut w = l.split_whitespace();
        let (kind, key, value) = (w.next()?, w.next()?, w.next()?);
        if w.next().is_some() {
            return None;
        }
        Some((kind, key, value.parse().ok()?))
    })
}

/// Asks a running switch for `command` over its control socket.
pub fn query(control: &std::path::Path, command: &str) -> io::Result<String> {
    let mut s = UnixStream::connect(control)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", control.display())))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    // A switch that answered before reading the request has closed its side; its
    // reply is still ours to read.
    let _ = s.write_all(format!("{command}\n").as_bytes());
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    Ok(reply)
}

/// Why a control request is refused. The text, newline included, is the reply line
/// the client gets.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ControlRequestError {
    #[error("loss: expected `loss P [PORT...]` with P in [0, 1)\n")]
    LossUsage,
    #[error("loss {0}: must be in [0, 1)\n")]
    LossRate(f64),
    #[error("loss: no port {0:?}\n")]
    NoPort(String),
    #[error("unknown command {0:?}: expected stats, groups or loss P [PORT...]\n")]
    Unknown(String),
}

/// A request on the switch's control socket (`rocast switch --control S …`): at most
/// [`MAX_CONTROL_REQUEST`] bytes, one line.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlRequest {
    /// `stats` (or an empty line): every counter.
    Stats,
    /// `groups`: the groups held, with their members.
    Groups,
    /// `loss P [PORT…]`: seeded loss with probability P on the named ports (all when
    /// none is named); P in [0, 1).
    Loss { rate: f64, ports: Vec<usize> },
}

impl ControlRequest {
    /// Parses a request for a switch of `ports` ports: only the first
    /// [`MAX_CONTROL_REQUEST`] bytes count; the error is the line the client gets.
    pub fn parse(request: &[u8], ports: usize) -> Result<ControlRequest, ControlRequestError> {
        let end = request.len().min(MAX_CONTROL_REQUEST);
        let text = String::from_utf8_lossy(&request[..end]);
        let cmd = text.trim();
        match cmd {
            "stats" | "" => Ok(ControlRequest::Stats),
            "groups" => Ok(ControlRequest::Groups),
            c if c.starts_with("loss ") => {
                let mut words = c[5..].split_whitespace();
                let Some(rate) = words.next().and_then(|w| w.parse::<f64>().ok()) else {
                    return Err(ControlRequestError::LossUsage);
                };
                if !(0.0..1.0).contains(&rate) {
                    return Err(ControlRequestError::LossRate(rate));
                }
                let mut named = Vec::new();
                for w in words {
                    match w.parse::<usize>().ok().filter(|&i| i < ports) {
                        Some(i) => named.push(i),
                        None => return Err(ControlRequestError::NoPort(w.to_string())),
                    }
                }
                Ok(ControlRequest::Loss { rate, ports: named })
            }
            other => Err(ControlRequestError::Unknown(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs_parse_and_refuse_what_is_not_loopback() {
        assert_eq!(
            "afpacket:p0".parse::<PortSpec>(),
            Ok(PortSpec::AfPacket("p0".into()))
        );
        assert_eq!(
            "dgram:127.0.0.1:7000=127.0.0.1:7001".parse::<PortSpec>(),
            Ok(PortSpec::Dgram {
                local: "127.0.0.1:7000".parse().unwrap(),
                remote: "127.0.0.1:7001".parse().unwrap()
            })
        );
        for bad in [
            "afpacket:",
            "afpacket:a b",
            "afpacket:waytoolonginterfacename",
            "dgram:127.0.0.1:7000",
            "dgram:10.0.0.1:7000=127.0.0.1:7001",
            "dgram:127.0.0.1=127.0.0.1:1",
            "tap:x",
        ] {
            assert!(bad.parse::<PortSpec>().is_err(), "{bad}");
        }
    }

    /// A two-port dgram switch (ports local0→remote0, local1→remote1), no control
    /// socket, no capture.
    fn two_port_config(
        local0: SocketAddrV4,
        remote0: SocketAddrV4,
        local1: SocketAddrV4,
        remote1: SocketAddrV4,
    ) -> SwitchConfig {
        SwitchConfig {
            ports: vec![
                PortSpec::Dgram {
                    local: local0,
                    remote: remote0,
                },
                PortSpec::Dgram {
                    local: local1,
                    remote: remote1,
                },
            ],
            pipeline: FrameSwitchConfig {
                max_groups: 4,
                switch_id: 1,
                group_lease: None,
                ..FrameSwitchConfig::new(2)
            },
            cnp_filter: CnpFilterPolicy::Counter(rocast_core::time::Duration::from_us(50)),
            hosts: Vec::new(),
            peel_members: Vec::new(),
            shaping: None,
            loss: None,
            control: None,
            capture: None,
            fast_path: false,
            seed: 1,
        }
    }

    /// A control client that connects and sends nothing no longer stalls
    /// the switch: another client is answered while it waits, and it is dropped at
    /// its deadline with a message.
    #[test]
    fn a_silent_control_client_does_not_stall_the_switch() {
        use std::io::{Read, Write};
        use std::os::unix::net::UnixStream;
        let path = std::env::temp_dir().join(format!("rocast-ctl-{}.sock", std::process::id()));
        let addr = |p: u16| SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, p);
        let free = || match UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
        {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let mut cfg = two_port_config(free(), addr(9), free(), addr(9));
        cfg.control = Some(path.clone());
        let mut d = SwitchDaemon::new(cfg).unwrap();
        let p = path.clone();
        let clients = std::thread::spawn(move || {
            let mut silent = UnixStream::connect(&p).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let t0 = std::time::Instant::now();
            let mut asker = UnixStream::connect(&p).unwrap();
            asker.write_all(b"stats\n").unwrap();
            let mut reply = String::new();
            asker.read_to_string(&mut reply).unwrap();
            let waited = t0.elapsed();
            let mut late = String::new();
            silent.read_to_string(&mut late).unwrap();
            (waited, reply, late)
        });
        d.run(Some(std::time::Duration::from_millis(600))).unwrap();
        let (waited, reply, late) = clients.join().unwrap();
        assert!(reply.contains("rx_frames"), "{reply}");
        // The old server read the silent client for its whole 200 ms first.
        assert!(waited < std::time::Duration::from_millis(150), "{waited:?}");
        assert!(late.contains("timed out"), "{late}");
        drop(d);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn dgram_ports_switch_frames_between_loopback_peers() {
        use rocast_core::wire::pcap::PcapReader;
        use rocast_core::wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
        let dir =
            std::env::temp_dir().join(format!("rocast-switch-capture-{}", std::process::id()));
        // Two "guests" on loopback UDP, one switch with a port for each.
        let g0 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let g1 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let s0 = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let s1 = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let v4 = |a: std::net::SocketAddr| match a {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let mut cfg = two_port_config(
            v4(s0),
            v4(g0.local_addr().unwrap()),
            v4(s1),
            v4(g1.local_addr().unwrap()),
        );
        cfg.capture = Some(dir.clone());
        let mut d = SwitchDaemon::new(cfg).unwrap();
        // A broadcast frame from guest 0 is flooded to guest 1, byte for byte.
        let mut f = vec![0u8; 60];
        EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::Unknown(0x88b5),
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f[20] = 0xab;
        g0.send_to(&f, s0).unwrap();
        // A datagram from a stranger to the same port is counted, not switched.
        let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
        stranger.send_to(&f, s0).unwrap();
        d.run(Some(std::time::Duration::from_millis(300))).unwrap();
        g1.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut got = [0u8; 100];
        let (n, from) = g1.recv_from(&mut got).unwrap();
        assert_eq!(from, s1);
        assert_eq!(&got[..n], &f[..]);
        let st = d.stats_text();
        assert!(st.contains("switch flooded 1"), "{st}");
        assert!(st.contains("foreign 1"), "{st}");
        // Each link's capture holds the frame once: received on port 0, sent on
        // port 1; the stranger's datagram never entered the switch.
        drop(d);
        for port in 0..2 {
            let bytes = std::fs::read(dir.join(format!("port{port}.pcap"))).unwrap();
            let recs: Vec<Vec<u8>> = PcapReader::new(&bytes)
                .unwrap()
                .map(|r| r.unwrap().data.to_vec())
                .collect();
            assert_eq!(recs, vec![f.clone()], "port {port}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
