//! UD multicast on real packets: one host's [`UdEndpoint`] carrying a
//! [`NackMulticastSender`] or [`NackMulticastReceiver`] over a kernel UDP/4791 socket
//! joined to an IPv4 multicast group.
//!
//! The wire carries real RoCEv2 UD packets: the kernel's IPv4 and UDP headers, then the
//! BTH, DETH, payload and ICRC the core's [`UdEndpoint`] emitted. The driver has no
//! protocol logic of its own:
//!
//! - **send**: [`UdEndpoint::poll_transmit`] yields a whole Ethernet frame; the driver
//!   strips the Ethernet, IPv4 and UDP headers and sends the UDP payload (BTH … ICRC) to
//!   the IPv4 destination the core wrote, port 4791 — the group for multicast, the host
//!   for unicast. The socket is set up so the kernel writes the header the core did:
//!   source = the host's address (IP_MULTICAST_IF, and the only route), source port
//!   4791 (the endpoint is configured with it), DF with identification 0 (an
//!   unconnected socket's DF datagrams), UDP checksum 0 (`SO_NO_CHECK`), TOS = the
//!   core's DSCP. Multicast goes out with TTL 1 and `IP_MULTICAST_LOOP` off, so a host
//!   never hears itself.
//! - **send, PEEL** ([`UdHostConfig::peel`], PEEL §3.2): a frame to the group goes out
//!   once per PEEL header instead, each copy the 8-byte shim then the same UDP payload,
//!   to UDP 4793 ([`UdMcastSocket::send_frame_peel`]). The ICRC is the core's, computed
//!   for port 4791 and the unshimmed lengths: the rack switch that strips the shim
//!   restores exactly those bytes, so the receiver's check passes.
//! - **receive**: the socket is bound to `0.0.0.0:4791` (Linux delivers a group's
//!   datagrams only to sockets bound to the wildcard or the group) and joined to the
//!   group (`IP_ADD_MEMBERSHIP` on the host's interface). Each datagram is rebuilt into
//!   a whole Ethernet frame: destination MAC = the group's (RFC 1112) for a datagram
//!   the kernel reports (`IP_PKTINFO`) as sent to the group, else the host's own;
//!   IPv4+UDP header as [`Ipv4Repr::rocev2`](rocast_core::wire::Ipv4Repr::rocev2) writes it, with the sender's address and
//!   port from `recvmsg`, the header's destination address, and the TOS byte from
//!   `IP_RECVTOS`. [`UdEndpoint::handle_frame`] then checks everything a RoCE NIC
//!   would, the ICRC included (the ICRC masks TOS and TTL and covers the rest, so it
//!   verifies exactly when the bytes on the wire were intact). The source MAC is not
//!   reported by a UDP socket and not covered by the ICRC: it is written as
//!   [`UNKNOWN_MAC`].
//!
//! Loss: the lab's kernel may lack netem, so [`UdHostConfig::loss`] drops arriving
//! datagrams in the driver, before the endpoint sees them, with a seeded
//! [`LossInjector`] per host (DATA, repairs, heartbeats, NACKs and STATUS alike).
//! Losses the kernel causes itself (a full socket buffer: `SO_RXQ_OVFL`) are counted
//! separately.
//!
//! Protocol packets ride one per UD SEND: the sender's DATA, repairs and heartbeats go
//! to the group; a receiver's NACKs go to the group (so other receivers hear and
//! suppress theirs); its STATUS goes unicast to the sender's UD QP: the source IP and
//! QPN the receiver's state machine bound the stream to (its first DATA or heartbeat).
//!
//! Trust: every protocol packet goes to the state machines with the
//! source address and QPN the UD endpoint reported ([`Peer`]), which they check
//! against the stream's sender or the receiver it names; a sender start draws a fresh
//! stream id from the OS CSPRNG ([`crate::entropy::random_stream_id`]), so a restarted sender is a new
//! stream. The group key, if any, is in the state machines' configurations.

use crate::endpoint::{Clock, LossInjector};
use crate::udp::{
    emit_rocev2_headers, open_rocev2_socket, parse_rx_cmsgs, rocev2_destination, setsockopt,
    sockaddr, socket_addr, socket_error_kind, wait_readable, RxCmsgs, SocketErrorKind,
};
use rocast_core::nack_multicast::packet::Packet;
use rocast_core::nack_multicast::{
    Destination, NackMulticastReceiver, NackMulticastSender, Peer, ReceiverConfig,
    ReceiverCounters, ReceiverEvent, SenderConfig, SenderCounters,
};
use rocast_core::payload::StreamTally;
use rocast_core::rnic::{ipv4_multicast_mac, UdAddress, UdConfig, UdCounters, UdEndpoint, UdEvent};
use rocast_core::time::Instant;
use rocast_core::wire::peel::{PeelHeader, PEEL_HEADER_LEN, PEEL_UDP_PORT};
use rocast_core::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Ipv4Address, Psn, ETHERNET_HEADER_LEN,
    IPV4_HEADER_LEN, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
};
use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Ethernet + IPv4 + UDP in front of every RoCEv2 payload in a frame.
pub const FRAME_HEADER_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
/// The source MAC of a rebuilt frame (a UDP socket does not report the real one; the
/// ICRC does not cover it and the endpoint does not check it).
pub const UNKNOWN_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0]);

/// Counters of a [`UdMcastSocket`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SocketStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Datagrams the kernel refused for lack of buffer (dropped; the protocol recovers).
    pub tx_dropped: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Datagrams the kernel dropped because our receive buffer was full (`SO_RXQ_OVFL`).
    pub rx_kernel_drops: u64,
    /// Datagrams longer than the receive buffer, dropped.
    pub rx_truncated: u64,
}

/// A UDP/4791 socket joined to one IPv4 multicast group on one interface address,
/// carrying whole RoCEv2 frames (see the module documentation).
pub struct UdMcastSocket {
    fd: OwnedFd,
    /// This host's address and the bound port: the source of everything it sends.
    local: SocketAddrV4,
    group: Ipv4Addr,
    buf: Vec<u8>,
    last_ovfl: u32,
    stats: SocketStats,
}

fn in_addr(a: Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from_ne_bytes(a.octets()),
    }
}

impl UdMcastSocket {
    /// Opens `0.0.0.0:port`, joins `group` on the interface holding `local`, and sets
    /// the options listed in the module documentation. `tos` is the TOS byte the core
    /// writes (DSCP << 2 | ECN).
    pub fn open(
        local: Ipv4Addr,
        group: Ipv4Addr,
        port: u16,
        tos: u8,
        bufs: usize,
        max_datagram: usize,
    ) -> io::Result<Self> {
        if !group.is_multicast() || local.is_multicast() || local.is_unspecified() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "need a unicast local address and a multicast group",
            ));
        }
        let (fd, _) =
            open_rocev2_socket(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port), bufs, bufs)?;
        let raw = fd.as_raw_fd();
        let one: libc::c_int = 1;
        let zero: libc::c_int = 0;
        setsockopt(raw, libc::IPPROTO_IP, libc::IP_TOS, &(tos as libc::c_int))?;
        setsockopt(raw, libc::IPPROTO_IP, libc::IP_PKTINFO, &one)?;
        let mreq = libc::ip_mreq {
            imr_multiaddr: in_addr(group),
            imr_interface: in_addr(local),
        };
        setsockopt(raw, libc::IPPROTO_IP, libc::IP_ADD_MEMBERSHIP, &mreq)?;
        setsockopt(
            raw,
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            &in_addr(local),
        )?;
        setsockopt(raw, libc::IPPROTO_IP, libc::IP_MULTICAST_LOOP, &zero)?;
        setsockopt(raw, libc::IPPROTO_IP, libc::IP_MULTICAST_TTL, &one)?;
        Ok(UdMcastSocket {
            fd,
            local: SocketAddrV4::new(local, port),
            group,
            buf: vec![0; FRAME_HEADER_LEN + max_datagram.max(64)],
            last_ovfl: 0,
            stats: SocketStats::default(),
        })
    }

    pub fn stats(&self) -> &SocketStats {
        &self.stats
    }
    pub fn group(&self) -> Ipv4Addr {
        self.group
    }

    /// Sends one Ethernet frame as [`UdEndpoint::poll_transmit`] made it: its UDP
    /// payload to the frame's IPv4 destination, port 4791. Returns false if the kernel
    /// had no buffer (the datagram is dropped and counted). Fails on a frame that is
    /// not IPv4/UDP from this host's address and port 4791 (the kernel would write a
    /// different header, and the ICRC would not verify).
    pub fn send_frame(&mut self, frame: &[u8]) -> io::Result<bool> {
        if frame.len() < FRAME_HEADER_LEN || frame[12..14] != [0x08, 0x00] {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an option-less IPv4/UDP frame",
            ));
        }
        let to = rocev2_destination(&frame[ETHERNET_HEADER_LEN..], self.local)?;
        self.sendto(to, &frame[FRAME_HEADER_LEN..])
    }

    /// Sends `frame` as [`send_frame`](Self::send_frame) does, except that a frame to
    /// the group goes out once per header of `shims`, each copy the PEEL shim then the
    /// frame's UDP payload, to UDP [`PEEL_UDP_PORT`] (PEEL §3.2; see the module docs).
    /// The kernel writes the IPv4 and UDP headers with 8 more bytes and port 4793; the
    /// rack switch that strips the shim restores exactly the header the core's ICRC
    /// covers. Returns false if the kernel dropped any copy.
    pub fn send_frame_peel(&mut self, frame: &[u8], shims: &[PeelHeader]) -> io::Result<bool> {
        if frame.len() < FRAME_HEADER_LEN || frame[12..14] != [0x08, 0x00] {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an option-less IPv4/UDP frame",
            ));
        }
        let dst = rocev2_destination(&frame[ETHERNET_HEADER_LEN..], self.local)?;
        if shims.is_empty() || *dst.ip() != self.group {
            return self.send_frame(frame);
        }
        let sa = SocketAddrV4::new(*dst.ip(), PEEL_UDP_PORT);
        let mut copy = vec![0u8; PEEL_HEADER_LEN + frame.len() - FRAME_HEADER_LEN];
        copy[PEEL_HEADER_LEN..].copy_from_slice(&frame[FRAME_HEADER_LEN..]);
        let mut all = true;
        for h in shims {
            h.emit(&mut copy[..PEEL_HEADER_LEN]);
            all &= self.sendto(sa, &copy)?;
        }
        Ok(all)
    }

    fn sendto(&mut self, to: SocketAddrV4, payload: &[u8]) -> io::Result<bool> {
        loop {
            let r = rustix::net::sendto(&self.fd, payload, rustix::net::SendFlags::empty(), &to);
            let e = match r {
                Ok(_) => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += payload.len() as u64;
                    return Ok(true);
                }
                Err(e) => io::Error::from(e),
            };
            match socket_error_kind(&e) {
                SocketErrorKind::Interrupted => continue,
                SocketErrorKind::Transient => {
                    self.stats.tx_dropped += 1;
                    return Ok(false);
                }
                SocketErrorKind::Fatal => return Err(e),
            }
        }
    }

    /// Receives one datagram without blocking and returns it rebuilt into a whole
    /// Ethernet frame (see the module documentation); `None` if nothing was waiting.
    pub fn recv_frame(&mut self, local_mac: EthernetAddress) -> io::Result<Option<&[u8]>> {
        let mut src = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let mut cmsg = [0u64; 16];
        let cap = self.buf.len() - FRAME_HEADER_LEN;
        let mut iov = libc::iovec {
            iov_base: self.buf[FRAME_HEADER_LEN..].as_mut_ptr() as *mut libc::c_void,
            iov_len: cap,
        };
        let mut h = crate::udp::empty_mmsghdr().msg_hdr;
        h.msg_name = &mut src as *mut _ as *mut libc::c_void;
        h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        h.msg_control = cmsg.as_mut_ptr() as *mut libc::c_void;
        h.msg_controllen = size_of::<[u64; 16]>() as _;
        let len = loop {
            // SAFETY: every pointer in `h` points at a live local or our buffer, with its
            // length. Raw because the control messages (IP_PKTINFO, IP_TOS) are read
            // by parse_rx_cmsgs, which rustix's ancillary buffer cannot carry.
            let r = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut h, libc::MSG_DONTWAIT) };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            match socket_error_kind(&e) {
                SocketErrorKind::Interrupted => continue,
                SocketErrorKind::Transient => return Ok(None),
                SocketErrorKind::Fatal => return Err(e),
            }
        };
        let RxCmsgs { tos, ovfl, dst } = parse_rx_cmsgs(&h);
        if let Some(o) = ovfl {
            self.stats.rx_kernel_drops += o.wrapping_sub(self.last_ovfl) as u64;
            self.last_ovfl = o;
        }
        if h.msg_flags & libc::MSG_TRUNC != 0 || len > cap {
            self.stats.rx_truncated += 1;
            return Ok(Some(&[]));
        }
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += len as u64;
        let dst = SocketAddrV4::new(dst.unwrap_or(*self.local.ip()), self.local.port());
        let dst_mac = ipv4_multicast_mac((*dst.ip()).into()).unwrap_or(local_mac);
        let frame = &mut self.buf[..FRAME_HEADER_LEN + len];
        EthernetRepr {
            src_addr: UNKNOWN_MAC,
            dst_addr: dst_mac,
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(
            &mut frame[..ETHERNET_HEADER_LEN],
        ));
        emit_rocev2_headers(
            &mut frame[ETHERNET_HEADER_LEN..],
            socket_addr(&src),
            dst,
            tos,
            len,
        );
        Ok(Some(&self.buf[..FRAME_HEADER_LEN + len]))
    }
}

impl AsRawFd for UdMcastSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// One host of a UD multicast run.
#[derive(Clone, Debug)]
pub struct UdHostConfig {
    pub local_ip: Ipv4Addr,
    pub local_mac: EthernetAddress,
    pub group: Ipv4Addr,
    /// This host's UD QP number and the Q_Key every QP of the run uses.
    pub qpn: u32,
    pub qkey: u32,
    /// UD path MTU (the largest protocol packet).
    pub mtu: usize,
    /// Receive buffers kept posted to the QP.
    pub recv_buffers: usize,
    /// Socket buffer sizes, bytes.
    pub socket_buffer: usize,
    /// Drop probability of every arriving datagram, in the driver (seeded).
    pub loss: f64,
    pub seed: u64,
    /// Give up (with an error) after this long.
    pub timeout: std::time::Duration,
    /// PEEL: every frame to the group goes out once per header, shimmed, to UDP 4793
    /// ([`UdMcastSocket::send_frame_peel`]); empty: plain multicast to UDP 4791.
    pub peel: Vec<PeelHeader>,
    /// The sender queues message i no earlier than `i × interval` after its first
    /// (a paced stream, for latency); `None`: as fast as the window allows.
    pub send_interval: Option<std::time::Duration>,
}

impl UdHostConfig {
    pub fn new(local_ip: Ipv4Addr, local_mac: EthernetAddress, group: Ipv4Addr, qpn: u32) -> Self {
        UdHostConfig {
            local_ip,
            local_mac,
            group,
            qpn,
            qkey: 0x1111_0000,
            mtu: 4096,
            recv_buffers: 4096,
            socket_buffer: 32 << 20,
            loss: 0.0,
            seed: 1,
            timeout: std::time::Duration::from_secs(60),
            peel: Vec::new(),
            send_interval: None,
        }
    }
}

/// Counters of the driver itself (the endpoint, socket and protocol keep their own).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Datagrams the loss injector dropped before the endpoint saw them.
    pub injected_drops: u64,
    /// Frames the UD endpoint dropped (its counters say why).
    pub ud_rejects: u64,
    /// Times the loop blocked in `ppoll`.
    pub waits: u64,
}

/// A UD endpoint with one QP attached to the group, on a [`UdMcastSocket`].
pub struct UdHost {
    pub cfg: UdHostConfig,
    pub ep: UdEndpoint,
    pub sock: UdMcastSocket,
    pub clock: Clock,
    loss: LossInjector,
    next_wr: u64,
    pub stats: DriverStats,
}

impl UdHost {
    /// Creates the endpoint (UDP source port 4791), its QP, attaches it to the group,
    /// posts the receive buffers and opens the socket. Call it in the host's namespace.
    pub fn new(cfg: UdHostConfig, clock: Clock) -> io::Result<Self> {
        let inv = |e: rocast_core::rnic::UdError| {
            io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
        };
        let mut uc = UdConfig::new(cfg.local_ip.into(), cfg.local_mac);
        uc.mtu = cfg.mtu;
        uc.udp_src_port = ROCEV2_UDP_PORT;
        let tos = uc.dscp << 2;
        let mut ep = UdEndpoint::new(uc).map_err(inv)?;
        ep.create_qp(cfg.qpn, cfg.qkey, Psn::new(0)).map_err(inv)?;
        ep.attach_multicast(cfg.qpn, cfg.group.into())
            .map_err(inv)?;
        for wr in 0..cfg.recv_buffers as u64 {
            ep.post_recv(cfg.qpn, wr, cfg.mtu).map_err(inv)?;
        }
        let sock = UdMcastSocket::open(
            cfg.local_ip,
            cfg.group,
            ROCEV2_UDP_PORT,
            tos,
            cfg.socket_buffer,
            ep.max_frame_len(),
        )?;
        Ok(UdHost {
            loss: LossInjector::new(cfg.loss, cfg.seed),
            next_wr: cfg.recv_buffers as u64,
            cfg,
            ep,
            sock,
            clock,
            stats: DriverStats::default(),
        })
    }

    pub fn counters(&self) -> &UdCounters {
        self.ep.counters()
    }

    /// Reads up to `max` datagrams and feeds each (unless the loss injector drops it) to
    /// the endpoint; calls `on_message(now, src_ip, src_qpn, payload)` for each message
    /// the QP received. Returns how many datagrams arrived.
    pub fn receive(
        &mut self,
        max: usize,
        mut on_message: impl FnMut(Instant, Ipv4Address, u32, &[u8]),
    ) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            let now = self.clock.now();
            let Some(frame) = self.sock.recv_frame(self.cfg.local_mac)? else {
                break;
            };
            n += 1;
            if frame.is_empty() {
                continue;
            }
            if self.loss.drop_next() {
                self.stats.injected_drops += 1;
                continue;
            }
            if self.ep.handle_frame(now, frame).is_err() {
                self.stats.ud_rejects += 1;
            }
            while let Some(ev) = self.ep.poll_event() {
                match ev {
                    UdEvent::Receive {
                        qpn,
                        src_ip,
                        src_qpn,
                        data,
                        ..
                    } => {
                        // Keep the receive queue full: one buffer back per message.
                        let wr = self.next_wr;
                        self.next_wr += 1;
                        let _ = self.ep.post_recv(qpn, wr, self.cfg.mtu);
                        on_message(now, src_ip, src_qpn, &data);
                    }
                    UdEvent::RecvError { qpn, .. } => {
                        let wr = self.next_wr;
                        self.next_wr += 1;
                        let _ = self.ep.post_recv(qpn, wr, self.cfg.mtu);
                    }
                    UdEvent::SendComplete { .. } => {}
                }
            }
        }
        Ok(n)
    }

    /// Posts one UD SEND of `payload` to `dest` and puts the endpoint's frames on the wire.
    pub fn send(&mut self, dest: &UdAddress, payload: &[u8]) -> io::Result<()> {
        let now = self.clock.now();
        self.ep
            .post_send(self.cfg.qpn, 0, dest, payload, None)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut frame = vec![0u8; self.ep.max_frame_len()];
        while let Some(t) = self.ep.poll_transmit(now, &mut frame) {
            self.sock.send_frame_peel(&frame[..t.len], &self.cfg.peel)?;
        }
        // Send completions are of no interest here.
        while let Some(UdEvent::SendComplete { .. }) = self.ep.poll_event() {}
        Ok(())
    }

    /// The group's UD address with this run's Q_Key.
    pub fn group_address(&self) -> UdAddress {
        UdAddress::multicast(self.cfg.group.into(), self.cfg.qkey).expect("group is multicast")
    }

    /// Blocks until the socket is readable, `until` (core time) passes, or 5 ms pass.
    pub fn wait(&mut self, until: Option<Instant>) -> io::Result<()> {
        let now = self.clock.now();
        let max = std::time::Duration::from_millis(5);
        let t = until.map_or(max, |u| self.clock.until(now, u).min(max));
        if t.is_zero() {
            return Ok(());
        }
        self.stats.waits += 1;
        wait_readable([self.sock.as_raw_fd()], Some(t)).map(drop)
    }
}

fn timed_out(
    start: std::time::Instant,
    cfg: &UdHostConfig,
    what: impl FnOnce() -> String,
) -> io::Result<()> {
    if start.elapsed() > cfg.timeout {
        return Err(io::Error::new(io::ErrorKind::TimedOut, what()));
    }
    Ok(())
}

/// What the sending host did.
#[derive(Clone, Debug, Default)]
pub struct SenderReport {
    pub protocol: SenderCounters,
    pub ud: UdCounters,
    pub socket: SocketStats,
    pub driver: DriverStats,
    /// When the first DATA went out and when every receiver had reported everything.
    pub first_tx: Option<std::time::Instant>,
    pub all_delivered: Option<std::time::Instant>,
}

/// Runs the sender: queues messages `0..count` (`message(i)`) as the window allows,
/// serves NACKs and STATUS, and returns once every expected receiver has reported the
/// whole stream (or `stop` is set, or the timeout passes: an error).
pub fn run_sender(
    host: &mut UdHost,
    scfg: SenderConfig,
    count: u64,
    message: impl Fn(u64) -> Vec<u8>,
    stop: &AtomicBool,
) -> io::Result<SenderReport> {
    let mut s = NackMulticastSender::new(scfg);
    let mut packet = vec![0u8; s.max_packet_len()];
    let group = host.group_address();
    let start = std::time::Instant::now();
    let mut rep = SenderReport::default();
    let mut queued = 0u64;
    let mut pending: Option<Vec<u8>> = None;
    // Pacing: when message `queued` is due (the first when the sender starts).
    let mut first_queued: Option<Instant> = None;
    let interval = host
        .cfg
        .send_interval
        .map(|d| rocast_core::time::Duration::from_ps(d.as_nanos() as u64 * 1000));
    let due = |first: Option<Instant>, i: u64| -> Option<Instant> {
        let iv = interval?;
        first.map(|f| f + rocast_core::time::Duration::from_ps(iv.as_ps() * i))
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        timed_out(start, &host.cfg, || {
            format!(
                "sender: {queued}/{count} messages queued, receivers at {:?}",
                s.receivers().collect::<Vec<_>>()
            )
        })?;
        let mut busy = host.receive(64, |now, ip, qpn, data| {
            s.handle_packet_from(now, Some(Peer { ip, qpn }), data)
        })? > 0;
        let now = host.clock.now();
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        while queued < count {
            if due(first_queued, queued).is_some_and(|d| now < d) {
                break;
            }
            let m = pending.take().unwrap_or_else(|| message(queued));
            match s.send(now, &m) {
                Ok(_) => {
                    first_queued.get_or_insert(now);
                    queued += 1;
                }
                Err(_) => {
                    pending = Some(m);
                    break;
                }
            }
        }
        let mut sent = 0;
        while sent < 64 {
            let Some(t) = s.poll_transmit(now, &mut packet) else {
                break;
            };
            let p = &packet[..t.len];
            if rep.first_tx.is_none() {
                rep.first_tx = Some(std::time::Instant::now());
            }
            host.send(&group, p)?;
            sent += 1;
        }
        busy |= sent > 0;
        if queued == count && s.all_delivered() {
            rep.all_delivered = Some(std::time::Instant::now());
            break;
        }
        if !busy {
            let next = match (
                s.poll_timeout(),
                due(first_queued, queued).filter(|_| queued < count),
            ) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            host.wait(next)?;
        }
    }
    rep.protocol = s.counters().clone();
    rep.ud = host.counters().clone();
    rep.socket = host.sock.stats().clone();
    rep.driver = host.stats.clone();
    Ok(rep)
}

/// What one receiving host got.
#[derive(Clone, Debug, Default)]
pub struct ReceiverReport {
    /// Exactly once, in order, intact: the account of the last stream that began
    /// (a restarted sender's new stream; the only one when the sender never restarted).
    pub stream: StreamTally,
    /// Every stream heard, in the order each began: (stream id, its account). Stream k
    /// is the sender's k-th incarnation.
    pub streams: Vec<(u32, StreamTally)>,
    pub protocol: ReceiverCounters,
    pub ud: UdCounters,
    pub socket: SocketStats,
    pub driver: DriverStats,
    /// When the last expected message was delivered.
    pub done: Option<std::time::Instant>,
}

/// Runs a receiver until `stop` is set (it keeps answering after its last delivery, so
/// the sender learns it) or the timeout passes (an error). The sender's k-th
/// incarnation (a restart is a new stream) sends `counts[k]` messages;
/// `verify(k, i, bytes)` checks message `i` of stream k. `on_bound(stream, source)` is
/// called when the receiver binds a stream to its sender's address (the first 64
/// streams only: a flood of made-up ones must not make it a log).
pub fn run_receiver(
    host: &mut UdHost,
    rcfg: ReceiverConfig,
    counts: &[u64],
    verify: impl Fn(usize, u64, &[u8]) -> bool,
    mut on_bound: impl FnMut(u32, Peer),
    stop: &AtomicBool,
) -> io::Result<ReceiverReport> {
    let mut r = NackMulticastReceiver::new(rcfg);
    let mut packet = vec![0u8; r.max_packet_len()];
    let start = std::time::Instant::now();
    let mut rep = ReceiverReport::default();
    let count = *counts.last().expect("at least one stream");
    let last = counts.len() - 1;
    // Streams reported to `on_bound`.
    let mut bound: Vec<u32> = Vec::new();
    // Stream k's index in `rep.streams`, created on its first event.
    let stream_index = |streams: &mut Vec<(u32, StreamTally)>, session: u32| -> usize {
        match streams.iter().position(|(s, _)| *s == session) {
            Some(k) => k,
            None => {
                let k = streams.len();
                let n = counts[k.min(last)];
                streams.push((session, StreamTally::new(n)));
                k
            }
        }
    };
    let group = host.group_address();
    let qkey = host.cfg.qkey;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        timed_out(start, &host.cfg, || {
            format!(
                "receiver {}: {}/{count} delivered of stream {} of {}",
                host.cfg.local_ip,
                rep.streams.get(last).map_or(0, |s| s.1.delivered),
                rep.streams.len().min(counts.len()),
                counts.len()
            )
        })?;
        let mut busy = host.receive(64, |now, ip, qpn, data| {
            r.handle_packet_from(now, Some(Peer { ip, qpn }), data);
            if bound.len() < 64 {
                let session = Packet::parse(data).ok().map(|p| p.session);
                if let Some(session) = session.filter(|s| !bound.contains(s)) {
                    if let Some(from) = r.stream_sender(session) {
                        bound.push(session);
                        on_bound(session, from);
                    }
                }
            }
        })? > 0;
        let now = host.clock.now();
        if r.poll_timeout().is_some_and(|t| t <= now) {
            r.handle_timeout(now);
        }
        while let Some(ev) = r.poll_event() {
            match ev {
                ReceiverEvent::Message {
                    session,
                    msg_seq,
                    data,
                } => {
                    let k = stream_index(&mut rep.streams, session);
                    let tally = &mut rep.streams[k].1;
                    tally.record(msg_seq, &data, verify(k, msg_seq, &data));
                    if k == last && tally.delivered == count && rep.done.is_none() {
                        rep.done = Some(std::time::Instant::now());
                    }
                }
                ReceiverEvent::Unrecoverable { session, messages } => {
                    let k = stream_index(&mut rep.streams, session);
                    rep.streams[k].1.lost(messages.end - messages.start);
                }
            }
        }
        while let Some(t) = r.poll_transmit(now, &mut packet) {
            let dest = match t.dest {
                Destination::Group => group,
                // The stream's bound sender (each stream its own: a restarted sender
                // is another stream, possibly elsewhere).
                Destination::Sender => {
                    let to = Packet::parse(&packet[..t.len])
                        .ok()
                        .and_then(|p| r.stream_sender(p.session));
                    match to {
                        Some(p) => UdAddress::unicast(p.ip, UNKNOWN_MAC, p.qpn, qkey),
                        None => continue,
                    }
                }
            };
            host.send(&dest, &packet[..t.len])?;
            busy = true;
        }
        if !busy {
            host.wait(r.poll_timeout())?;
        }
    }
    // The account that counts is the last incarnation's: empty (nothing delivered)
    // when its stream was never told apart from an earlier one.
    rep.stream = match rep.streams.get(last) {
        Some((_, t)) => t.clone(),
        None => StreamTally::new(count),
    };
    rep.protocol = r.counters().clone();
    rep.ud = host.counters().clone();
    rep.socket = host.sock.stats().clone();
    rep.driver = host.stats.clone();
    Ok(rep)
}

/// Moves the calling thread into network namespace `ns` (`/run/netns/<ns>`, as
/// `ip netns` names it). Sockets it opens afterwards live there. Needs CAP_SYS_ADMIN.
pub fn enter_netns(ns: &str) -> io::Result<()> {
    let f = std::fs::File::open(std::path::Path::new("/run/netns").join(ns))?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&f),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(io::Error::from)
}
