//! `rocast bench udp`: the loopback anchor for `rocast perf`. In one run,
//! alternating, it measures
//! - raw UDP: one thread `sendmmsg`s datagrams of `size` bytes (batches of 64) from
//!   127.0.0.2 to 127.0.0.1 flat out while another `recvmmsg`s them; goodput is the
//!   payload bytes *received* per second of the sending window (what the kernel's
//!   loopback can carry for one socket pair on this machine, with no protocol);
//! - `rocast perf`: a client and a server (threads of this process) running RDMA
//!   WRITEs of `message` bytes at MTU `size` over the core's RC queue pair on UDP/4791
//!   sockets, verified by the server; goodput is perftest's average bandwidth.
//!
//! It prints both medians and their ratio (perf / raw).
//!
//! Memory: the raw test holds 64 datagram buffers per side (64 × `size` bytes); perf
//! holds the message buffers its parameters ask for (`tx_depth` × `message`).

use crate::perf::{run_client, ClientConfig, PerfOp, PerfParams, PerfServer};
use crate::switch_bench::median;
use crate::udp::setsockopt_int;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Datagrams per `sendmmsg`/`recvmmsg`, as `rocast perf`'s transport uses.
const BATCH: usize = 64;

/// What `rocast bench udp` is asked for.
#[derive(Clone, Debug)]
pub struct UdpBenchArgs {
    /// Datagram size of the raw test, and `rocast perf`'s MTU.
    pub size: usize,
    /// `rocast perf`'s WRITE size.
    pub message: usize,
    /// `rocast perf`'s messages per run.
    pub iters: u64,
    /// The raw test's sending time per run.
    pub seconds: f64,
    pub reps: usize,
}

/// One rep of each.
#[derive(Clone, Copy, Debug)]
pub struct UdpBenchRep {
    pub raw_gbps: f64,
    /// Datagrams the raw receiver got, of those sent.
    pub raw_delivered: f64,
    pub perf_gbps: f64,
    /// `rocast perf`'s CPU per packet, client and server (ns).
    pub perf_cpu_ns: (u64, u64),
}

/// Why the UDP bench could not run or measure.
#[derive(Debug, thiserror::Error)]
pub enum UdpBenchError {
    #[error("--size {0}: must be a RoCE MTU (256..4096)")]
    Size(usize),
    #[error("--seconds {0}: must be in (0, 600]")]
    Seconds(f64),
    #[error("bind: {0}")]
    Bind(std::io::Error),
    /// Setting up the raw UDP sockets (timeout, address, connect).
    #[error(transparent)]
    Socket(std::io::Error),
    #[error("receiver panicked")]
    ReceiverPanicked,
    #[error(transparent)]
    Perf(#[from] crate::perf::PerfError),
    #[error("perf server panicked")]
    PerfServerPanicked,
}

/// Raw UDP: returns (goodput in Gbit/s, fraction delivered).
fn raw_udp(size: usize, seconds: f64) -> Result<(f64, f64), UdpBenchError> {
    let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(UdpBenchError::Bind)?;
    let _ = setsockopt_int(
        rx.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        8 << 20,
    );
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(UdpBenchError::Socket)?;
    let to = rx.local_addr().map_err(UdpBenchError::Socket)?;
    let tx = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).map_err(UdpBenchError::Bind)?;
    let _ = setsockopt_int(
        tx.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_SNDBUFFORCE,
        8 << 20,
    );
    tx.connect(to).map_err(UdpBenchError::Socket)?;
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || -> u64 {
            let mut bufs = vec![vec![0u8; size]; BATCH];
            let mut iov: Vec<libc::iovec> = bufs
                .iter_mut()
                .map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                })
                .collect();
            let mut bytes = 0u64;
            loop {
                let mut msgs = crate::udp::mmsg_headers(&mut iov);
                // SAFETY: msgs are valid headers whose iovecs point into `bufs`, alive and
                // unmoved for the call; the socket has a read timeout, so a quiet socket
                // returns -1 with EAGAIN. Raw batched calls are what this bench measures.
                let r = unsafe {
                    libc::recvmmsg(
                        rx.as_raw_fd(),
                        msgs.as_mut_ptr(),
                        BATCH as u32,
                        libc::MSG_WAITFORONE,
                        std::ptr::null_mut(),
                    )
                };
                if r > 0 {
                    bytes += msgs[..r as usize]
                        .iter()
                        .map(|m| m.msg_len as u64)
                        .sum::<u64>();
                } else if done.load(Ordering::SeqCst) {
                    return bytes;
                }
            }
        })
    };
    let payload = vec![0x5au8; size];
    let mut iov: Vec<libc::iovec> = (0..BATCH)
        .map(|_| libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: size,
        })
        .collect();
    let mut msgs = crate::udp::mmsg_headers(&mut iov);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut sent = 0u64;
    while Instant::now() < deadline {
        // SAFETY: msgs are valid headers whose iovecs point into `payload`, alive for
        // the loop; the kernel only reads it. Raw batched calls are what this bench
        // measures.
        let r = unsafe { libc::sendmmsg(tx.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, 0) };
        if r > 0 {
            sent += r as u64;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let bytes = receiver
        .join()
        .map_err(|_| UdpBenchError::ReceiverPanicked)?;
    Ok((
        bytes as f64 * 8.0 / elapsed / 1e9,
        bytes as f64 / (sent.max(1) * size as u64) as f64,
    ))
}

/// One `rocast perf` WRITE test between two threads on loopback.
fn perf(args: &UdpBenchArgs) -> Result<(f64, (u64, u64)), UdpBenchError> {
    let server = PerfServer::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    let addr = server.local_addr().map_err(UdpBenchError::Socket)?;
    let serving = std::thread::spawn(move || server.serve_one());
    let params = PerfParams {
        op: PerfOp::Write,
        size: args.message,
        iters: args.iters,
        mtu: args.size,
        ..PerfParams::default()
    };
    let report = run_client(&ClientConfig::new(addr, params));
    let served = serving
        .join()
        .map_err(|_| UdpBenchError::PerfServerPanicked)?;
    let report = report?;
    served?;
    Ok((
        report.bw_avg_gbps,
        (
            report.client.cpu_per_packet().as_nanos() as u64,
            report.server.cpu_per_packet().as_nanos() as u64,
        ),
    ))
}

/// Runs the reps, alternating raw UDP and `rocast perf`.
pub fn run(
    args: &UdpBenchArgs,
    mut progress: impl FnMut(&str),
) -> Result<Vec<UdpBenchRep>, UdpBenchError> {
    if !matches!(args.size, 256 | 512 | 1024 | 2048 | 4096) {
        return Err(UdpBenchError::Size(args.size));
    }
    if !(args.seconds > 0.0 && args.seconds <= 600.0) {
        return Err(UdpBenchError::Seconds(args.seconds));
    }
    let mut reps = Vec::new();
    for rep in 0..args.reps {
        let (raw_gbps, raw_delivered) = raw_udp(args.size, args.seconds)?;
        let (perf_gbps, perf_cpu_ns) = perf(args)?;
        progress(&format!(
            "rep {}: raw UDP {raw_gbps:.2} Gbit/s ({:.1}% delivered), rocast perf {perf_gbps:.2} Gbit/s",
            rep + 1,
            raw_delivered * 100.0
        ));
        reps.push(UdpBenchRep {
            raw_gbps,
            raw_delivered,
            perf_gbps,
            perf_cpu_ns,
        });
    }
    Ok(reps)
}

/// What `rocast bench udp` prints.
pub fn table(reps: &[UdpBenchRep], args: &UdpBenchArgs) -> String {
    let raw = median(reps.iter().map(|r| r.raw_gbps).collect());
    let perf = median(reps.iter().map(|r| r.perf_gbps).collect());
    let cpu_c = median(reps.iter().map(|r| r.perf_cpu_ns.0 as f64).collect());
    let cpu_s = median(reps.iter().map(|r| r.perf_cpu_ns.1 as f64).collect());
    format!(
        "# rocast bench udp: loopback, median of {n}\n\
         # raw: sendmmsg/recvmmsg of {size}-byte datagrams, one socket pair, {secs} s flat out; goodput received\n\
         # perf: rocast perf, {iters} RDMA WRITEs of {msg} bytes at MTU {size}, verified\n\
         raw_udp_gbps {raw:.2}\n\
         rocast_perf_gbps {perf:.2}\n\
         perf_cpu_ns_per_packet client {cpu_c:.0} server {cpu_s:.0}\n\
         ratio_perf_over_raw {:.3}\n",
        if raw > 0.0 { perf / raw } else { 0.0 },
        n = reps.len(),
        size = args.size,
        secs = args.seconds,
        iters = args.iters,
        msg = args.message,
    )
}
