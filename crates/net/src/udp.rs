//! A UDP/4791 transport for whole IPv4 RoCEv2 packets, as Linux rxe runs RoCEv2: a UDP
//! socket with DF set and the UDP checksum off.
//!
//! The core's queue pairs emit and accept complete IPv4 packets (IPv4 header, UDP
//! header, BTH … ICRC). A UDP socket sends and receives only the UDP payload, so:
//!
//! - **send** strips the 28-byte IPv4+UDP header the core wrote and sends the rest
//!   (BTH … ICRC) to the header's destination address and UDP port, with the header's
//!   TOS byte (DSCP and ECN) attached as an `IP_TOS` control message. The kernel then
//!   writes the same IPv4/UDP header the core did: identification 0 with DF (Linux
//!   leaves the ident 0 on an *unconnected* UDP socket sending DF datagrams; connecting
//!   the socket would make the kernel number idents and, since the ICRC covers the
//!   ident, break every ICRC on the wire), TTL 64, UDP checksum 0 (`SO_NO_CHECK`).
//!   The core's source address and port must be the socket's (checked per packet).
//! - **receive** reads the payload 28 bytes into a buffer and rebuilds the IPv4+UDP
//!   header in front of it: source = the sender's address and port, destination = our
//!   bound address and port, identification 0, DF, TTL 64, UDP checksum 0, and the TOS
//!   byte the kernel reports through `IP_RECVTOS` (so ECN, CE marks included, arrives
//!   as it was on the wire). The ICRC masks TOS and TTL, and covers everything else we
//!   rebuild, so the core's ICRC check passes exactly when it would on the wire —
//!   provided the sender sent ident 0, as rocast does and as `rocast switch` makes every
//!   bridged copy do (Linux rxe numbers its packets: a packet straight from rxe fails
//!   the check here and is counted as a bad ICRC).
//!
//! Batches go through `sendmmsg`/`recvmmsg`. Every buffer (payloads, iovecs, message
//! headers, addresses, control messages) is allocated once in [`UdpTransport::bind`];
//! nothing is allocated per packet.

use rocast_core::wire::{
    Ecn, Ipv4Repr, UdpRepr, IPV4_HEADER_LEN, IP_PROTO_UDP, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
};
use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// Bytes of IPv4 (no options) and UDP header in front of each RoCEv2 payload.
pub const HEADER_LEN: usize = IPV4_HEADER_LEN + UDP_HEADER_LEN;

/// Bytes of control-message space per received datagram (IP_TOS + SO_RXQ_OVFL fit easily).
const RX_CMSG_SPACE: usize = 64;
/// Bytes of control-message space per sent datagram (one IP_TOS int).
const TX_CMSG_SPACE: usize = 32;

/// How to open a [`UdpTransport`].
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// UDP port to bind (and the destination port peers use). RoCEv2 is 4791.
    pub port: u16,
    /// Largest IPv4 packet (header included) sent or received; use
    /// `RcQueuePair::max_packet_len`. Longer datagrams are dropped and counted.
    pub max_packet_len: usize,
    /// Datagrams per `sendmmsg`/`recvmmsg` call.
    pub batch: usize,
    /// Requested socket send/receive buffer sizes in bytes (`SO_*BUFFORCE` is tried
    /// first, then the plain option, which the kernel caps at `net.core.*mem_max`).
    pub sndbuf: usize,
    pub rcvbuf: usize,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            port: ROCEV2_UDP_PORT,
            max_packet_len: 4200,
            batch: 64,
            sndbuf: 8 << 20,
            rcvbuf: 32 << 20,
        }
    }
}

/// Counters of one transport. Drops are counted with their reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_syscalls: u64,
    /// Datagrams the kernel refused for lack of buffer (ENOBUFS/EAGAIN) and were dropped.
    pub tx_dropped: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_syscalls: u64,
    /// Datagrams longer than `max_packet_len` allows, or shorter than nothing.
    pub rx_truncated: u64,
    /// Datagrams the kernel dropped because our receive buffer was full (`SO_RXQ_OVFL`).
    pub rx_kernel_drops: u64,
}

/// The socket options that took effect, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketInfo {
    /// Effective SO_SNDBUF / SO_RCVBUF as the kernel reports them (twice what was set).
    pub sndbuf: usize,
    pub rcvbuf: usize,
    /// Whether SO_RCVBUFFORCE/SO_SNDBUFFORCE were accepted (needs CAP_NET_ADMIN).
    pub forced: bool,
}

/// A UDP socket bound to one local IPv4 address, carrying whole IPv4 RoCEv2 packets.
pub struct UdpTransport {
    fd: OwnedFd,
    local: SocketAddrV4,
    info: SocketInfo,
    batch: usize,
    /// Per slot: HEADER_LEN + payload capacity.
    slot_len: usize,
    tx_buf: Vec<u8>,
    tx_len: Vec<usize>,
    tx_addr: Vec<libc::sockaddr_in>,
    tx_cmsg: Vec<u64>,
    tx_iov: Vec<libc::iovec>,
    tx_hdr: Vec<libc::mmsghdr>,
    tx_count: usize,
    rx_buf: Vec<u8>,
    rx_addr: Vec<libc::sockaddr_in>,
    rx_cmsg: Vec<u64>,
    rx_iov: Vec<libc::iovec>,
    rx_hdr: Vec<libc::mmsghdr>,
    last_ovfl: Option<u32>,
    stats: TransportStats,
}

// SAFETY: the raw pointers inside the iovec/mmsghdr arrays only ever point into buffers
// owned by the same struct, and are rewritten before each system call.
unsafe impl Send for UdpTransport {}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("local", &self.local)
            .field("info", &self.info)
            .field("stats", &self.stats)
            .finish()
    }
}

pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `setsockopt(2)` with any plain-old-data option value: for the options rustix has
/// no typed setter for (`SO_NO_CHECK`, `SO_RXQ_OVFL`, `IP_MTU_DISCOVER`, the forced
/// buffer sizes, `PACKET_*`, `SO_ATTACH_BPF`…).
pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> io::Result<()> {
    // SAFETY: a pointer to a live `T` with its exact size; the kernel only reads (copies)
    // that many bytes, and a bad fd or option is an error return, not memory unsafety.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// One `mmsghdr` per iovec, each pointing at it (no address, no control data): the
/// headers of a `sendmmsg`/`recvmmsg` over `iov`. They hold raw pointers into `iov`,
/// which must outlive every call that uses them.
pub(crate) fn mmsg_headers(iov: &mut [libc::iovec]) -> Vec<libc::mmsghdr> {
    iov.iter_mut()
        .map(|v| {
            let mut m = empty_mmsghdr();
            m.msg_hdr.msg_iov = v as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect()
}

/// An `mmsghdr` with no name, no iovec and no control data (all zero).
pub(crate) fn empty_mmsghdr() -> libc::mmsghdr {
    libc::mmsghdr {
        msg_hdr: libc::msghdr {
            msg_name: std::ptr::null_mut(),
            msg_namelen: 0,
            msg_iov: std::ptr::null_mut(),
            msg_iovlen: 0,
            msg_control: std::ptr::null_mut(),
            msg_controllen: 0,
            msg_flags: 0,
        },
        msg_len: 0,
    }
}

/// An iovec over nothing.
pub(crate) fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

/// `CMSG_ALIGN`: a control message's parts are padded to the size of a `long`.
const fn cmsg_align(len: usize) -> usize {
    (len + size_of::<libc::c_long>() - 1) & !(size_of::<libc::c_long>() - 1)
}

/// `CMSG_SPACE(len)`: the room a control message of `len` data bytes takes.
const fn cmsg_space(len: usize) -> usize {
    cmsg_align(size_of::<libc::cmsghdr>()) + cmsg_align(len)
}

pub(crate) fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    setsockopt(fd, level, name, &v)
}

pub(crate) fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// A UDP socket as Linux rxe runs RoCEv2, bound to `local`: `SO_REUSEADDR`, DF
/// (`IP_PMTUDISC_DO`), UDP checksum off (`SO_NO_CHECK`), the TOS byte and the kernel's
/// drop counter reported on receive (`IP_RECVTOS`, `SO_RXQ_OVFL`), and the buffer sizes
/// (forced past `rmem_max`/`wmem_max` where allowed). Returns the socket and whether
/// both sizes were forced.
pub(crate) fn open_rocev2_socket(
    local: SocketAddrV4,
    rcvbuf: usize,
    sndbuf: usize,
) -> io::Result<(OwnedFd, bool)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let raw = fd.as_raw_fd();
    setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    setsockopt_int(
        raw,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )?;
    setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1)?;
    setsockopt_int(raw, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
    setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    let clamp = |v: usize| v.min(i32::MAX as usize / 2) as libc::c_int;
    let mut forced = true;
    for (force, plain, v) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, rcvbuf),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, sndbuf),
    ] {
        if setsockopt_int(raw, libc::SOL_SOCKET, force, clamp(v)).is_err() {
            forced = false;
            setsockopt_int(raw, libc::SOL_SOCKET, plain, clamp(v))?;
        }
    }
    rustix::net::bind(&fd, &local)?;
    Ok((fd, forced))
}

/// The UDP destination of a whole IPv4 RoCEv2 packet (at least `HEADER_LEN` bytes)
/// that a socket bound to `local` is to send. Refuses a packet with IPv4 options, not
/// UDP, or from another address or port: the kernel would write a different header
/// than the core did, and the ICRC would not match the wire.
pub(crate) fn rocev2_destination(p: &[u8], local: SocketAddrV4) -> io::Result<SocketAddrV4> {
    let bad = |m: &'static str| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
    if p.len() < HEADER_LEN || p[0] != 0x45 || p[9] != IP_PROTO_UDP {
        return bad("not an option-less IPv4/UDP packet");
    }
    if p[12..16] != local.ip().octets() || u16::from_be_bytes([p[20], p[21]]) != local.port() {
        return bad(
            "packet's source address/port is not the socket's: the ICRC would not match the wire",
        );
    }
    Ok(SocketAddrV4::new(
        Ipv4Addr::new(p[16], p[17], p[18], p[19]),
        u16::from_be_bytes([p[22], p[23]]),
    ))
}

/// What the control messages of one received datagram said.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RxCmsgs {
    /// The TOS byte (0 if the kernel sent none).
    pub tos: u8,
    /// The kernel's cumulative drop counter (`SO_RXQ_OVFL`), if present.
    pub ovfl: Option<u32>,
    /// The datagram's destination address (`IP_PKTINFO`), if enabled.
    pub dst: Option<Ipv4Addr>,
}

/// Writes the IPv4 and UDP headers a UDP socket strips (ident 0, DF, TTL 64, UDP
/// checksum 0, the received TOS) into `out[..HEADER_LEN]` in front of `payload_len`
/// bytes of RoCEv2 payload.
pub(crate) fn emit_rocev2_headers(
    out: &mut [u8],
    src: SocketAddrV4,
    dst: SocketAddrV4,
    tos: u8,
    payload_len: usize,
) {
    Ipv4Repr::rocev2(
        (*src.ip()).into(),
        (*dst.ip()).into(),
        tos >> 2,
        Ecn::from_bits(tos),
        UDP_HEADER_LEN + payload_len,
    )
    .emit(&mut out[..IPV4_HEADER_LEN]);
    UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        checksum: 0,
        payload_len,
    }
    .emit(&mut out[IPV4_HEADER_LEN..HEADER_LEN]);
}

impl UdpTransport {
    /// Opens a UDP socket bound to `local:cfg.port` with the rxe-like options listed in
    /// the module documentation. `SO_REUSEADDR` is set so that endpoints bound to
    /// different loopback addresses (127.0.0.1, 127.0.0.2, …) coexist on one host — it
    /// also lets two sockets bind the *same* address and port, which then share its
    /// traffic unpredictably: give each endpoint its own address.
    pub fn bind(local: Ipv4Addr, cfg: &TransportConfig) -> io::Result<Self> {
        if local.is_unspecified() || local.is_multicast() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bind to a unicast IPv4 address (the rebuilt headers need it)",
            ));
        }
        if cfg.batch == 0 || cfg.batch > 1024 || cfg.max_packet_len <= HEADER_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "batch must be 1..=1024 and max_packet_len > 28",
            ));
        }
        let local = SocketAddrV4::new(local, cfg.port);
        let (fd, forced) = open_rocev2_socket(local, cfg.rcvbuf, cfg.sndbuf)?;
        let info = SocketInfo {
            sndbuf: rustix::net::sockopt::socket_send_buffer_size(&fd)?,
            rcvbuf: rustix::net::sockopt::socket_recv_buffer_size(&fd)?,
            forced,
        };
        let n = cfg.batch;
        // Slots are a whole number of cache lines.
        let slot_len = cfg.max_packet_len.div_ceil(64) * 64;
        let z_iov = empty_iovec();
        let z_hdr = empty_mmsghdr();
        let z_sa = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let mut t = UdpTransport {
            fd,
            local,
            info,
            batch: n,
            slot_len,
            tx_buf: vec![0; n * slot_len],
            tx_len: vec![0; n],
            tx_addr: vec![z_sa; n],
            tx_cmsg: vec![0; n * TX_CMSG_SPACE / 8],
            tx_iov: vec![z_iov; n],
            tx_hdr: vec![z_hdr; n],
            tx_count: 0,
            rx_buf: vec![0; n * slot_len],
            rx_addr: vec![z_sa; n],
            rx_cmsg: vec![0; n * RX_CMSG_SPACE / 8],
            rx_iov: vec![z_iov; n],
            rx_hdr: vec![z_hdr; n],
            last_ovfl: None,
            stats: TransportStats::default(),
        };
        t.init_headers();
        Ok(t)
    }

    /// Points every iovec and message header at its slot, address and control buffer.
    /// The buffers are heap allocations that never grow, so this holds for the
    /// transport's whole life, wherever the struct itself moves.
    fn init_headers(&mut self) {
        for i in 0..self.batch {
            let base = i * self.slot_len + HEADER_LEN;
            self.tx_iov[i] = libc::iovec {
                iov_base: self.tx_buf[base..].as_mut_ptr() as *mut libc::c_void,
                iov_len: 0,
            };
            self.rx_iov[i] = libc::iovec {
                iov_base: self.rx_buf[base..].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.slot_len - HEADER_LEN,
            };
            let h = &mut self.tx_hdr[i].msg_hdr;
            h.msg_name = &mut self.tx_addr[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
            h.msg_iov = &mut self.tx_iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.tx_cmsg[i * TX_CMSG_SPACE / 8..].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = cmsg_space(size_of::<libc::c_int>()) as _;
            let h = &mut self.rx_hdr[i].msg_hdr;
            h.msg_name = &mut self.rx_addr[i] as *mut _ as *mut libc::c_void;
            h.msg_iov = &mut self.rx_iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.rx_cmsg[i * RX_CMSG_SPACE / 8..].as_mut_ptr() as *mut libc::c_void;
            self.reset_rx_header(i);
        }
    }

    /// Restores the fields `recvmmsg` overwrites.
    fn reset_rx_header(&mut self, i: usize) {
        let h = &mut self.rx_hdr[i].msg_hdr;
        h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        h.msg_controllen = RX_CMSG_SPACE as _;
        h.msg_flags = 0;
        self.rx_hdr[i].msg_len = 0;
    }

    /// The bound address and port; emitted packets must carry it as their source.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }
    pub fn socket_info(&self) -> SocketInfo {
        self.info
    }
    pub fn stats(&self) -> &TransportStats {
        &self.stats
    }
    /// Datagrams per `sendmmsg`/`recvmmsg`.
    pub fn batch_size(&self) -> usize {
        self.batch
    }
    /// The largest IPv4 packet this transport carries.
    pub fn max_packet_len(&self) -> usize {
        self.slot_len
    }

    /// Fills transmit slots by calling `fill` with an empty buffer of
    /// [`max_packet_len`](Self::max_packet_len) bytes until it returns `None`, sending
    /// each full batch with one `sendmmsg`. `fill` writes a whole IPv4 RoCEv2 packet
    /// (as `RcQueuePair::poll_transmit` does) and returns its length. Returns how many
    /// packets were handed to the kernel or dropped for lack of kernel buffer.
    ///
    /// Fails (InvalidInput) if a packet does not start with an option-less IPv4/UDP
    /// header from our own address and port: the kernel would put a different header
    /// on the wire and the peer's ICRC check would fail.
    pub fn send_with(
        &mut self,
        mut fill: impl FnMut(&mut [u8]) -> Option<usize>,
    ) -> io::Result<usize> {
        let mut total = 0;
        loop {
            let n = self.send_batch_with(&mut fill)?;
            total += n;
            if n < self.batch {
                return Ok(total);
            }
        }
    }

    /// Like [`send_with`](Self::send_with), but stops after one batch (one `sendmmsg`),
    /// so a driver can look at arriving packets between batches.
    pub fn send_batch_with(
        &mut self,
        mut fill: impl FnMut(&mut [u8]) -> Option<usize>,
    ) -> io::Result<usize> {
        while self.tx_count < self.batch {
            let i = self.tx_count;
            let slot = &mut self.tx_buf[i * self.slot_len..(i + 1) * self.slot_len];
            let Some(len) = fill(slot) else { break };
            if let Err(e) = self.stage(i, len) {
                self.flush()?;
                return Err(e);
            }
            self.tx_count += 1;
        }
        let n = self.tx_count;
        self.flush()?;
        Ok(n)
    }

    /// Sends one IPv4 RoCEv2 packet (copied into a transmit slot).
    pub fn send_packet(&mut self, ip_packet: &[u8]) -> io::Result<()> {
        let mut once = Some(ip_packet);
        self.send_with(|buf| {
            let p = once.take()?;
            buf.get_mut(..p.len())?.copy_from_slice(p);
            Some(p.len())
        })
        .and_then(|n| {
            if n == 1 {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "packet too long",
                ))
            }
        })
    }

    /// Checks slot `i`'s header and records its destination and TOS.
    fn stage(&mut self, i: usize, len: usize) -> io::Result<()> {
        let bad = |m: &'static str| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        let p = &self.tx_buf[i * self.slot_len..i * self.slot_len + len.min(self.slot_len)];
        if len > self.slot_len || len < HEADER_LEN {
            return bad("packet length out of range");
        }
        self.tx_addr[i] = sockaddr(rocev2_destination(p, self.local)?);
        self.tx_len[i] = len;
        // One IP_TOS control message carrying the header's TOS byte (DSCP + ECN).
        let c = &mut self.tx_cmsg[i * TX_CMSG_SPACE / 8..(i + 1) * TX_CMSG_SPACE / 8];
        let cm = c.as_mut_ptr() as *mut libc::cmsghdr;
        // SAFETY: `c` is 8-byte aligned (u64s) and TX_CMSG_SPACE >= CMSG_SPACE(sizeof(int)),
        // so the header and its int are inside `c`. No safe builder writes an IP_TOS
        // message (rustix's ancillary buffers carry only SCM_RIGHTS and credentials), and
        // this runs per packet.
        unsafe {
            (*cm).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
            (*cm).cmsg_level = libc::IPPROTO_IP;
            (*cm).cmsg_type = libc::IP_TOS;
            std::ptr::write_unaligned(libc::CMSG_DATA(cm) as *mut libc::c_int, p[1] as libc::c_int);
        }
        Ok(())
    }

    /// Sends the staged slots. Datagrams the kernel refuses for lack of buffer are
    /// dropped and counted (the protocol above recovers, as it would from a full queue).
    fn flush(&mut self) -> io::Result<()> {
        let n = self.tx_count;
        self.tx_count = 0;
        if n == 0 {
            return Ok(());
        }
        for i in 0..n {
            self.tx_iov[i].iov_len = self.tx_len[i] - HEADER_LEN;
        }
        let mut sent = 0;
        while sent < n {
            // SAFETY: every header points into this struct's heap buffers (init_headers),
            // which never move or shrink, with the lengths set above; the kernel reads
            // only within them. Kept raw: rustix's sendmmsg would rebuild the headers on
            // every batch of the data path.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    self.tx_hdr.as_mut_ptr().add(sent),
                    (n - sent) as u32,
                    0,
                )
            };
            self.stats.tx_syscalls += 1;
            if r < 0 {
                let e = io::Error::last_os_error();
                match socket_error_kind(&e) {
                    SocketErrorKind::Interrupted => continue,
                    SocketErrorKind::Transient => {
                        // The first datagram of the rest failed: drop it and go on.
                        self.stats.tx_dropped += 1;
                        sent += 1;
                        continue;
                    }
                    SocketErrorKind::Fatal => return Err(e),
                }
            }
            for i in sent..sent + r as usize {
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += (self.tx_len[i] - HEADER_LEN) as u64;
            }
            sent += r as usize;
        }
        Ok(())
    }

    /// Receives one batch without blocking and calls `handle` with each datagram
    /// rebuilt into a whole IPv4 packet (see the module documentation). Returns the
    /// number of datagrams received (0 if none was waiting).
    pub fn recv_with(&mut self, mut handle: impl FnMut(&[u8])) -> io::Result<usize> {
        let n = self.batch;
        let cap = self.slot_len - HEADER_LEN;
        let r = loop {
            // SAFETY: every header points into this struct's heap buffers (init_headers),
            // reset after use to their full sizes; the kernel writes only within them.
            // Neither rustix nor socket2 has recvmmsg.
            let r = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    self.rx_hdr.as_mut_ptr(),
                    n as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            self.stats.rx_syscalls += 1;
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            match socket_error_kind(&e) {
                SocketErrorKind::Interrupted => continue,
                // Nothing waiting, or an ICMP error queued on the socket: not ours to act on.
                SocketErrorKind::Transient => return Ok(0),
                SocketErrorKind::Fatal => return Err(e),
            }
        };
        for i in 0..r {
            let len = self.rx_hdr[i].msg_len as usize;
            let h = &self.rx_hdr[i].msg_hdr;
            let RxCmsgs { tos, ovfl, .. } = parse_rx_cmsgs(h);
            let truncated = h.msg_flags & libc::MSG_TRUNC != 0 || len > cap;
            self.reset_rx_header(i);
            if let Some(o) = ovfl {
                let prev = self.last_ovfl.unwrap_or(0);
                self.stats.rx_kernel_drops += o.wrapping_sub(prev) as u64;
                self.last_ovfl = Some(o);
            }
            if truncated {
                self.stats.rx_truncated += 1;
                continue;
            }
            let src = socket_addr(&self.rx_addr[i]);
            let slot = &mut self.rx_buf[i * self.slot_len..i * self.slot_len + HEADER_LEN + len];
            emit_rocev2_headers(slot, src, self.local, tos, len);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            handle(slot);
        }
        Ok(r)
    }
}

/// Reads the TOS, `SO_RXQ_OVFL` and `IP_PKTINFO` control messages of a received datagram.
pub(crate) fn parse_rx_cmsgs(h: &libc::msghdr) -> RxCmsgs {
    let mut out = RxCmsgs::default();
    // SAFETY: the kernel filled msg_control up to msg_controllen with well-formed cmsgs;
    // the CMSG_* macros stay within it, and the reads are unaligned-safe. rustix's
    // ancillary parser knows only SCM_RIGHTS and credentials, not IP_TOS, IP_PKTINFO or
    // SO_RXQ_OVFL.
    unsafe {
        let mut cm = libc::CMSG_FIRSTHDR(h);
        while !cm.is_null() {
            let c = &*cm;
            if c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_TOS {
                out.tos = *libc::CMSG_DATA(cm);
            } else if c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_PKTINFO {
                let pi: libc::in_pktinfo =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cm) as *const libc::in_pktinfo);
                out.dst = Some(Ipv4Addr::from(pi.ipi_addr.s_addr.to_ne_bytes()));
            } else if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == libc::SO_RXQ_OVFL {
                out.ovfl = Some(std::ptr::read_unaligned(libc::CMSG_DATA(cm) as *const u32));
            }
            cm = libc::CMSG_NXTHDR(h, cm);
        }
    }
    out
}

/// The address in a `sockaddr_in` the kernel filled.
pub(crate) fn socket_addr(sa: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(sa.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(sa.sin_port),
    )
}

impl AsRawFd for UdpTransport {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
impl AsFd for UdpTransport {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// How a failed datagram send or receive should be treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketErrorKind {
    /// A signal interrupted the call: retry it.
    Interrupted,
    /// Nothing to do now: no buffer space or nothing waiting (`ENOBUFS`, `EAGAIN`), or
    /// an ICMP error an earlier datagram left queued on the socket. A send's datagram
    /// is lost as on a congested or unreachable link: count it and go on.
    Transient,
    /// Anything else is a real error for the caller.
    Fatal,
}

pub(crate) fn socket_error_kind(e: &io::Error) -> SocketErrorKind {
    match e.raw_os_error() {
        Some(libc::EINTR) => SocketErrorKind::Interrupted,
        Some(
            libc::ENOBUFS
            | libc::EAGAIN
            | libc::ECONNREFUSED
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH,
        ) => SocketErrorKind::Transient,
        _ => SocketErrorKind::Fatal,
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (`None`: forever), with
/// nanosecond resolution (`ppoll`). Returns which were readable (or hung up / failed).
pub fn wait_readable<const N: usize>(
    fds: [RawFd; N],
    timeout: Option<std::time::Duration>,
) -> io::Result<[bool; N]> {
    let mut p = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    loop {
        // SAFETY: `p` is an array of N pollfds; `tsp` is null or points at a live timespec.
        // Raw because callers pass -1 for "no second descriptor" (poll(2) skips it),
        // which rustix's PollFd (a BorrowedFd) cannot hold.
        let r = unsafe { libc::ppoll(p.as_mut_ptr(), N as libc::nfds_t, tsp, std::ptr::null()) };
        if r >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    Ok(p.map(|x| x.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmsg_space_is_libcs() {
        for len in [0, 1, 4, 8, 12, 16] {
            // SAFETY: CMSG_SPACE is arithmetic on its argument.
            let libc_space = unsafe { libc::CMSG_SPACE(len as u32) } as usize;
            assert_eq!(cmsg_space(len), libc_space, "{len}");
        }
    }

    #[test]
    fn rejects_foreign_source_and_round_trips_header() {
        let cfg = TransportConfig {
            port: 47910,
            ..Default::default()
        };
        let a = Ipv4Addr::new(127, 0, 0, 61);
        let b = Ipv4Addr::new(127, 0, 0, 62);
        let mut ta = UdpTransport::bind(a, &cfg).unwrap();
        let mut tb = UdpTransport::bind(b, &cfg).unwrap();
        // A hand-made IPv4/UDP packet from a to b with a 16-byte payload and TOS 0x6a.
        let mut p = vec![0u8; HEADER_LEN + 16];
        Ipv4Repr::rocev2(a.into(), b.into(), 26, Ecn::Ect0, UDP_HEADER_LEN + 16).emit(&mut p);
        UdpRepr {
            src_port: 47910,
            dst_port: 47910,
            checksum: 0,
            payload_len: 16,
        }
        .emit(&mut p[20..]);
        p[28..].copy_from_slice(b"0123456789abcdef");
        ta.send_packet(&p).unwrap();
        let mut got = Vec::new();
        for _ in 0..100 {
            if tb.recv_with(|q| got = q.to_vec()).unwrap() > 0 {
                break;
            }
            wait_readable([tb.as_raw_fd()], Some(std::time::Duration::from_millis(10))).unwrap();
        }
        assert_eq!(
            got, p,
            "rebuilt header equals the sent one (TOS via IP_RECVTOS)"
        );
        // Wrong source port: refused before it reaches the kernel.
        p[21] ^= 1;
        assert_eq!(
            ta.send_packet(&p).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
