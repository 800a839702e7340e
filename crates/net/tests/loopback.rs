//! End-to-end tests of `rocast perf` over real UDP/4791 sockets on the loopback device.
//!
//! Each test uses its own pair of loopback addresses (UDP 4791 is bound per address)
//! and its own TCP control port, so tests run in parallel without clashing.

use rocast_core::rnic::Retransmission;
use rocast_core::wire::pcap::{PcapReader, PcapWriter, LINKTYPE_ETHERNET};
use rocast_core::wire::{classify_frame, FrameClass, Opcode};
use rocast_net::perf::{
    run_client, ClientConfig, PerfError, PerfOp, PerfParams, PerfReport, PerfServer, ServerReport,
};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

fn lo(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

fn params(op: PerfOp, sr: bool, loss: f64, seed: u64) -> PerfParams {
    PerfParams {
        op,
        size: 64 * 1024,
        iters: 20,
        mtu: 4096,
        retransmission: if sr {
            Retransmission::SelectiveRepeat
        } else {
            Retransmission::GoBackN
        },
        loss,
        seed,
        // Generous, so that a busy CI machine does not exhaust the retry count.
        rto: Duration::from_millis(4),
        ..Default::default()
    }
}

/// Runs a server on `server_ip:port` in a thread and a client from `client_ip`.
fn run_pair(
    server_ip: Ipv4Addr,
    client_ip: Ipv4Addr,
    port: u16,
    p: PerfParams,
) -> (
    Result<PerfReport, PerfError>,
    Result<ServerReport, PerfError>,
) {
    let mut srv = PerfServer::bind(SocketAddr::from((server_ip, port))).expect("bind control port");
    srv.idle_timeout = Duration::from_secs(5);
    let h = thread::spawn(move || srv.serve_one());
    let mut cfg = ClientConfig::new(SocketAddr::from((server_ip, port)), p);
    cfg.bind = Some(client_ip);
    cfg.idle_timeout = Duration::from_secs(5);
    let c = run_client(&cfg);
    (c, h.join().expect("server thread"))
}

fn check(server_ip: u8, client_ip: u8, port: u16, p: PerfParams) -> PerfReport {
    let t0 = std::time::Instant::now();
    let loss = p.loss;
    let (c, s) = run_pair(lo(server_ip), lo(client_ip), port, p.clone());
    let r = c.unwrap_or_else(|e| panic!("client failed: {e}"));
    let s = s.unwrap_or_else(|e| panic!("server failed: {e}"));
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(s.params, p);
    assert_eq!(s.side.messages, p.iters, "server saw every message");
    assert_eq!(r.client.messages, p.iters);
    assert!(r.bw_avg_gbps > 0.0 && r.bw_peak_gbps >= r.bw_avg_gbps * 0.999);
    // No frame was refused by a QP: every ICRC we rebuilt verified.
    assert_eq!((r.client.qp_rejects, r.server.qp_rejects), (0, 0));
    if loss > 0.0 {
        assert!(
            r.client.injected_drops + r.server.injected_drops > 0,
            "loss was injected"
        );
        assert!(
            r.client.tx_retransmitted > 0,
            "losses were repaired by retransmission"
        );
    } else {
        assert_eq!(r.client.injected_drops + r.server.injected_drops, 0);
    }
    r
}

#[test]
fn write_gbn_no_loss() {
    let r = check(3, 4, 18601, params(PerfOp::Write, false, 0.0, 1));
    assert_eq!(r.server.rx_out_of_order, 0);
}

#[test]
fn write_gbn_loss_5pct() {
    check(5, 6, 18602, params(PerfOp::Write, false, 0.05, 2));
}

#[test]
fn write_sr_no_loss() {
    check(7, 8, 18603, params(PerfOp::Write, true, 0.0, 3));
}

#[test]
fn write_sr_loss_5pct() {
    let mut p = params(PerfOp::Write, true, 0.05, 4);
    p.mtu = 1024; // more packets per message, more holes to fill selectively
    check(9, 10, 18604, p);
}

#[test]
fn send_gbn_no_loss() {
    check(11, 12, 18605, params(PerfOp::Send, false, 0.0, 5));
}

#[test]
fn send_gbn_loss_5pct() {
    check(13, 14, 18606, params(PerfOp::Send, false, 0.05, 6));
}

#[test]
fn send_sr_no_loss() {
    check(15, 16, 18607, params(PerfOp::Send, true, 0.0, 7));
}

#[test]
fn send_sr_loss_5pct() {
    let mut p = params(PerfOp::Send, true, 0.05, 8);
    p.mtu = 2048;
    p.size = 64 * 1024 + 3; // a short, padded last packet
    check(17, 18, 18608, p);
}

/// A server that answers HELLO and then never sends a packet: the client's QP must
/// give up (retry count exceeded) well within the idle timeout, not hang.
#[test]
fn client_fails_when_peer_vanishes() {
    let port = 18609;
    let l = TcpListener::bind((lo(19), port)).unwrap();
    let h = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HELLO "), "{line}");
        // A QP at 127.0.0.19 that nobody runs.
        (&s).write_all(b"READY qpn=77 psn=5 ip=127.0.0.19 va=4096 rkey=9\n")
            .unwrap();
        line.clear();
        let _ = r.read_line(&mut line); // ABORT (or EOF)
        line
    });
    let mut p = params(PerfOp::Write, false, 0.0, 9);
    p.rto = Duration::from_millis(1);
    let mut cfg = ClientConfig::new(SocketAddr::from((lo(19), port)), p);
    cfg.bind = Some(lo(20));
    cfg.idle_timeout = Duration::from_secs(5);
    let t0 = std::time::Instant::now();
    let e = run_client(&cfg).expect_err("nobody answers");
    assert!(matches!(e, PerfError::Qp(_)), "{e}");
    assert!(e.to_string().contains("retry count exceeded"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let aborted = h.join().unwrap();
    assert!(aborted.starts_with("ABORT "), "{aborted}");
}

/// A client that says HELLO and disappears: the server reports the closed connection.
#[test]
fn server_fails_when_client_vanishes() {
    let port = 18610;
    let mut srv = PerfServer::bind(SocketAddr::from((lo(21), port))).unwrap();
    srv.idle_timeout = Duration::from_secs(2);
    let h = thread::spawn(move || srv.serve_one());
    {
        let s = std::net::TcpStream::connect((lo(21), port)).unwrap();
        let hello = "HELLO v=1 op=write size=1000 iters=10 mtu=1024 tx_depth=4 window=64 rto_ns=1000000 sr=0 loss=0 seed=1 qpn=300 psn=0 ip=127.0.0.22\n";
        (&s).write_all(hello.as_bytes()).unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        assert!(line.starts_with("READY "), "{line}");
    } // dropped: the connection closes
    let t0 = std::time::Instant::now();
    let e = h.join().unwrap().expect_err("client vanished");
    assert!(matches!(e, PerfError::Protocol(_)), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(3));
}

/// Bounded input: a control line without a newline is refused at 4 KiB,
/// a HELLO asking for more buffer memory than a session may hold is refused before
/// anything is allocated, and a connection made while a session runs is told the
/// server is busy instead of waiting behind it.
#[test]
fn server_bounds_lines_memory_and_extra_clients() {
    let port = 18640;
    let srv = std::sync::Arc::new(PerfServer::bind(SocketAddr::from((lo(40), port))).unwrap());
    let line_of = |s: &std::net::TcpStream| {
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line
    };
    // 1 MB with no newline: a protocol error after 4 KiB, not 1 MB of memory.
    let srv1 = srv.clone();
    let h = thread::spawn(move || srv1.serve_one());
    let s = std::net::TcpStream::connect((lo(40), port)).unwrap();
    let _ = (&s).write_all(&vec![b'x'; 1 << 20]);
    let e = h.join().unwrap().expect_err("an endless line");
    assert!(e.to_string().contains("longer than 4096 bytes"), "{e}");
    drop(s);
    // SEND of 2^31-1 bytes with tx depth 8192: refused up front.
    let srv2 = srv.clone();
    let h = thread::spawn(move || srv2.serve_one());
    let s = std::net::TcpStream::connect((lo(40), port)).unwrap();
    let hello = "HELLO v=1 op=send size=2147483647 iters=100000 mtu=1024 tx_depth=8192 window=64 rto_ns=1000000 sr=0 loss=0 seed=1 qpn=500 psn=0 ip=127.0.0.41\n";
    (&s).write_all(hello.as_bytes()).unwrap();
    let e = h.join().unwrap().expect_err("too much memory");
    assert!(e.to_string().contains("server allows"), "{e}");
    assert!(line_of(&s).starts_with("ERROR "), "the client is told");
    drop(s);
    // A client holding a session open; a second one is answered "busy" at once.
    let srv3 = srv.clone();
    let h = thread::spawn(move || srv3.serve_one());
    let first = std::net::TcpStream::connect((lo(40), port)).unwrap();
    thread::sleep(Duration::from_millis(100));
    let t0 = std::time::Instant::now();
    let second = std::net::TcpStream::connect((lo(40), port)).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let busy = line_of(&second);
    assert!(busy.starts_with("ERROR msg=busy"), "{busy}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // The idle first client is dropped after the HELLO deadline (5 s), not held.
    let e = h.join().unwrap().expect_err("no HELLO");
    assert!(e.to_string().contains("timed out"), "{e}");
    drop(first);
}

/// A client that writes the wrong bytes (it claims seed 11, sends seed 12's pattern):
/// the server's verification must catch it and the client must see the failure.
#[test]
fn server_detects_corrupt_data() {
    use rocast_core::rnic::{Event, QpConfig, RcQueuePair, SendOp, SendRequest};
    use rocast_core::wire::Psn;
    use rocast_net::{Clock, Endpoint, TransportConfig, UdpTransport};
    let port = 18611;
    let mut srv = PerfServer::bind(SocketAddr::from((lo(23), port))).unwrap();
    srv.idle_timeout = Duration::from_secs(5);
    let h = thread::spawn(move || srv.serve_one());
    let s = std::net::TcpStream::connect((lo(23), port)).unwrap();
    let size = 5000;
    let hello = format!("HELLO v=1 op=write size={size} iters=1 mtu=1024 tx_depth=1 window=64 rto_ns=1000000 sr=0 loss=0 seed=11 qpn=400 psn=16777214 ip=127.0.0.24\n");
    (&s).write_all(hello.as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let kv = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|t| t.strip_prefix(&format!("{k}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut c = QpConfig::new(lo(24).into(), 400, lo(23).into(), kv("qpn") as u32);
    c.udp_src_port = 4791;
    c.mtu = 1024;
    c.send_psn = Psn::new(16777214); // wraps within the message
    c.recv_psn = Psn::new(kv("psn") as u32);
    let qp = RcQueuePair::new(c).unwrap();
    let t = UdpTransport::bind(
        lo(24),
        &TransportConfig {
            max_packet_len: qp.max_packet_len(),
            ..Default::default()
        },
    )
    .unwrap();
    let mut ep = Endpoint::new(qp, t, None).unwrap();
    let wrong = rocast_net::perf::pattern(12, size);
    let op = SendOp::Write {
        remote_va: kv("va"),
        rkey: kv("rkey") as u32,
    };
    ep.qp
        .post_send(SendRequest {
            wr_id: 1,
            op,
            data: wrong.into(),
        })
        .unwrap();
    let clock = Clock::new();
    let t0 = std::time::Instant::now();
    'run: loop {
        ep.poll_once(&clock).unwrap();
        if let Some(ev) = ep.qp.poll_event() {
            assert_eq!(
                ev,
                Event::SendComplete {
                    wr_id: 1,
                    result: Ok(())
                }
            );
            break 'run;
        }
        ep.wait(&clock, None, Duration::from_millis(5)).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
    (&s).write_all(b"DONE\n").unwrap();
    line.clear();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("RESULT ok=0 "), "{line}");
    assert!(
        line.contains("WRITE region differs from the pattern at byte"),
        "{line}"
    );
    let e = h.join().unwrap().expect_err("mismatch");
    assert!(matches!(e, PerfError::DataMismatch(_)), "{e}");
}

// ---------------------------------------------------------------------------------------
// Wire capture

/// An AF_PACKET socket on `lo` receiving every frame (ETH_P_ALL).
struct Capture {
    fd: std::os::fd::OwnedFd,
}

impl Capture {
    fn open_lo() -> Capture {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        use std::os::fd::AsRawFd;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        let fd = rustix::net::socket_with(
            AddressFamily::PACKET,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(rustix::net::eth::ALL),
        )
        .unwrap_or_else(|e| {
            panic!(
                "cannot open an AF_PACKET socket ({}); this test needs root or CAP_NET_RAW to capture \
                 on lo and check the ICRC of the frames on the wire",
                std::io::Error::from(e)
            )
        });
        let ifindex = rustix::net::netdevice::name_to_index(&fd, "lo").expect("no lo interface");
        let sll = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: proto,
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: sll is a live sockaddr_ll and the length is its size; the kernel only
        // reads it. Raw because rustix has no AF_PACKET address type.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            r,
            0,
            "bind AF_PACKET to lo: {}",
            std::io::Error::last_os_error()
        );
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, 64 << 20);
        Capture { fd }
    }
    /// One frame, or None after `timeout`. Outgoing copies are skipped (lo shows each
    /// packet twice: once leaving, once arriving).
    fn next(&self, buf: &mut [u8], timeout: Duration) -> Option<usize> {
        use rustix::event::{PollFd, PollFlags};
        use std::os::fd::AsRawFd;
        let ms = timeout.as_millis() as i64;
        let t = rustix::time::Timespec {
            tv_sec: ms / 1000,
            tv_nsec: ms % 1000 * 1_000_000,
        };
        loop {
            let mut p = [PollFd::new(&self.fd, PollFlags::IN)];
            if !matches!(rustix::event::poll(&mut p, Some(&t)), Ok(n) if n > 0) {
                return None;
            }
            let mut sll = libc::sockaddr_ll {
                sll_family: 0,
                sll_protocol: 0,
                sll_ifindex: 0,
                sll_hatype: 0,
                sll_pkttype: 0,
                sll_halen: 0,
                sll_addr: [0; 8],
            };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: buf and sll are live and writable for the lengths given; the kernel
            // writes at most that much. Raw because the packet type (outgoing or not) is
            // in the AF_PACKET source address, which rustix cannot decode.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                    &mut sll as *mut _ as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(n as usize);
        }
    }
}

/// Captures a small transfer on `lo`, writes it as a pcap, reads the pcap back and
/// checks every RoCEv2 frame between our two addresses: ICRC valid (the kernel put the
/// header on the wire that the core computed the ICRC over), identification 0, DF,
/// TTL 64, UDP checksum 0, the core's DSCP/ECN on data packets.
#[test]
fn wire_capture_icrc_verifies() {
    let (sip, cip, port) = (lo(25), lo(26), 18612);
    let cap = Capture::open_lo();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let path = std::env::temp_dir().join(format!("rocast-loopback-{}.pcap", std::process::id()));
    let path2 = path.clone();
    let capturer = thread::spawn(move || {
        let mut w = PcapWriter::new(
            std::io::BufWriter::new(std::fs::File::create(&path2).unwrap()),
            LINKTYPE_ETHERNET,
        )
        .unwrap();
        let mut buf = vec![0u8; 65536 + 64];
        let t0 = std::time::Instant::now();
        loop {
            match cap.next(&mut buf, Duration::from_millis(50)) {
                Some(n) => w
                    .write_record(t0.elapsed().as_nanos() as u64, &buf[..n])
                    .unwrap(),
                None if stop2.load(Ordering::Acquire) => break,
                None => {}
            }
        }
        w.into_inner().flush().unwrap();
    });
    let mut p = params(PerfOp::Write, false, 0.0, 10);
    p.iters = 4;
    p.size = 10_000;
    p.mtu = 1024;
    let (c, s) = run_pair(sip, cip, port, p.clone());
    c.unwrap();
    s.unwrap();
    let mut sp = params(PerfOp::Send, false, 0.0, 11);
    sp.iters = 3;
    sp.size = 3001;
    sp.mtu = 1024;
    let (c, s) = run_pair(sip, cip, port + 100, sp);
    c.unwrap();
    s.unwrap();
    thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Release);
    capturer.join().unwrap();

    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let (mut data, mut acks, mut ours) = (0, 0, 0);
    for rec in PcapReader::new(&bytes).unwrap() {
        let rec = rec.unwrap();
        let FrameClass::Roce { frame, icrc_ok } = classify_frame(rec.data) else {
            continue;
        };
        let ip = frame.roce.ip;
        let pair: [Ipv4Addr; 2] = [ip.src_addr.into(), ip.dst_addr.into()];
        if !(pair == [sip, cip] || pair == [cip, sip]) {
            continue; // another test's traffic
        }
        ours += 1;
        assert!(icrc_ok, "bad ICRC on the wire: {:?}", frame.roce.bth);
        assert_eq!((ip.ident, ip.dont_frag, ip.ttl), (0, true, 64), "{ip:?}");
        assert_eq!(frame.roce.udp.checksum, 0, "UDP checksum off (SO_NO_CHECK)");
        assert_eq!(
            (frame.roce.udp.src_port, frame.roce.udp.dst_port),
            (4791, 4791)
        );
        if frame.roce.bth.opcode == Opcode::RC_ACKNOWLEDGE {
            acks += 1;
        } else {
            data += 1;
            assert_eq!(
                (ip.dscp, ip.ecn),
                (26, rocast_core::wire::Ecn::Ect0),
                "TOS from the core, via IP_TOS cmsg"
            );
        }
    }
    // 4 WRITEs of 10 pkts + 3 SENDs of 3 pkts, plus ACKs (coalesced: at least one per run).
    assert!(
        data >= 4 * 10 + 3 * 3,
        "captured {data} data frames of {ours}"
    );
    assert!(acks >= 2, "captured {acks} ACKs");
}
