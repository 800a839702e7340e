//! `rocast perf`: perftest-style bandwidth tests of the software RoCE endpoint over real
//! UDP/4791 sockets (`ib_send_bw`/`ib_write_bw` between two rocast processes).
//!
//! Exit status: 0 when the test completed and the server verified the data; 1 on any
//! failure (peer vanished, queue pair error, data mismatch, bad arguments).

use clap::{Args, Subcommand};
use rocast_core::rnic::Retransmission;
use rocast_net::perf::{
    format_report, run_client, ClientConfig, PerfOp, PerfParams, PerfServer, DEFAULT_PORT,
};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum PerfCmd {
    /// Wait for a client, run the test it asks for, verify the data; serve one client
    /// then exit unless --loop.
    Server(ServerArgs),
    /// Run a bandwidth test against a `rocast perf server` and print perftest's table.
    Client(ClientArgs),
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on (TCP control) and to send/receive RoCEv2 from (UDP 4791).
    #[arg(long, default_value = "127.0.0.1")]
    bind: Ipv4Addr,
    /// TCP control port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Keep serving clients one after another.
    #[arg(long = "loop")]
    serve_forever: bool,
    /// Seconds without progress before giving up on a client.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The server (IPv4 address or host name).
    host: String,
    /// TCP control port of the server.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Local address for UDP 4791 [default: 127.0.0.2 if HOST is 127.0.0.1, else the
    /// address the control connection leaves from].
    #[arg(long)]
    bind: Option<Ipv4Addr>,
    /// Bytes per message.
    #[arg(short = 's', long, default_value_t = 65536)]
    size: usize,
    /// Number of messages.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    iters: u64,
    /// send (two-sided) or write (RDMA WRITE into a region the server registers).
    #[arg(long, default_value = "write")]
    op: PerfOp,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(long, default_value_t = 4096)]
    mtu: usize,
    /// Messages in flight (posted, not completed).
    #[arg(short = 't', long, default_value_t = 16)]
    tx_depth: usize,
    /// The QP's window: most unacknowledged packets (at most 256 with --sr).
    #[arg(long, default_value_t = 256)]
    window: u32,
    /// Retransmission timeout's floor in microseconds (before exponential back-off):
    /// past the first measured round trip the timeout is max(floor, SRTT + 4·RTTVAR)
    /// (RFC 6298), as RoCE NICs' adaptive retransmission does, so a queue on a slow
    /// link is not mistaken for loss.
    #[arg(long, default_value_t = 1000)]
    rto_us: u64,
    /// Probability that each side drops a received packet (seeded, before the QP sees it).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Pace the client's sends at this rate (Mbit/s), as an RNIC sends at its port's
    /// rate; 0 for none (perftest's NIC is the link). On a slower shaped link (a
    /// `rocast lab`), match it to the link: unpaced, a window of packets queues there.
    #[arg(long, default_value_t = 0)]
    rate_mbps: u64,
    /// Seed of the data pattern, QPNs/PSNs and injected losses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Selective repeat (IRN-style) instead of go-back-N, on both sides.
    #[arg(long)]
    sr: bool,
    /// Seconds without progress before giving up.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

fn report(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "rocast perf: {msg}");
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_finite() && s > 0.0 {
        s.min(1e6)
    } else {
        10.0
    })
}

pub fn run(cmd: PerfCmd) -> ExitCode {
    match cmd {
        PerfCmd::Server(a) => server(a),
        PerfCmd::Client(a) => client(a),
    }
}

fn server(a: ServerArgs) -> ExitCode {
    let mut srv = match PerfServer::bind(SocketAddr::from((a.bind, a.port))) {
        Ok(s) => s,
        Err(e) => {
            report(e);
            return ExitCode::FAILURE;
        }
    };
    srv.idle_timeout = secs(a.timeout);
    let _ = writeln!(
        std::io::stdout().lock(),
        "waiting for a client on {}:{} (TCP), RoCEv2 on UDP 4791",
        a.bind,
        a.port
    );
    loop {
        let r = srv.serve_one();
        let ok = match &r {
            Ok(s) => {
                let p = &s.params;
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "served {}: {} {} x {} B, data verified; received {} packets, CPU {:.3} s ({} ns/packet)",
                    s.client,
                    p.op.name(),
                    p.iters,
                    p.size,
                    s.side.udp_rx_packets,
                    s.side.cpu.as_secs_f64(),
                    s.side.cpu_per_packet().as_nanos()
                );
                true
            }
            Err(e) => {
                report(e);
                false
            }
        };
        if !a.serve_forever {
            return if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    }
}

fn client(a: ClientArgs) -> ExitCode {
    let server = match (a.host.as_str(), a.port).to_socket_addrs() {
        Ok(mut it) => match it.find(|s| matches!(s.ip(), IpAddr::V4(_))) {
            Some(s) => s,
            None => {
                report(format!("{} has no IPv4 address", a.host));
                return ExitCode::FAILURE;
            }
        },
        Err(e) => {
            report(format!("{}: {e}", a.host));
            return ExitCode::FAILURE;
        }
    };
    let params = PerfParams {
        op: a.op,
        size: a.size,
        iters: a.iters,
        mtu: a.mtu,
        tx_depth: a.tx_depth,
        window: a.window,
        rto: Duration::from_micros(a.rto_us),
        retransmission: if a.sr {
            Retransmission::SelectiveRepeat
        } else {
            Retransmission::GoBackN
        },
        loss: a.loss,
        seed: a.seed,
    };
    let cfg = ClientConfig {
        server,
        bind: a.bind,
        params,
        idle_timeout: secs(a.timeout),
        rate_bps: (a.rate_mbps > 0).then(|| a.rate_mbps.saturating_mul(1_000_000)),
    };
    match run_client(&cfg) {
        Ok(r) => {
            let _ = write!(std::io::stdout().lock(), "{}", format_report(&r));
            ExitCode::SUCCESS
        }
        Err(e) => {
            report(e);
            ExitCode::FAILURE
        }
    }
}
