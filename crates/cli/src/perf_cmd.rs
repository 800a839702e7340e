//! `rocast perf`: perftest's tests on the software RoCE endpoint over real UDP/4791
//! sockets between two rocast processes — bandwidth (`ib_write_bw`/`ib_send_bw`) and
//! latency (`ib_write_lat`/`ib_send_lat`), one size or the `-a` sweep, perftest's
//! tables or `--json` — and `--mcast N`, the 1→N test through `rocast switch` in a lab
//! of its own (`lab_bench::perf_mcast`).
//!
//! Exit status: 0 when the test completed and the server verified the data; 1 on any
//! failure (peer vanished, queue pair error, data mismatch, a size below
//! `--min-gbps`); 2 on bad arguments.

use clap::{Args, Subcommand};
use rocast_core::rnic::Retransmission;
use rocast_net::perf::{run_client, ClientConfig, PerfOp, PerfParams, PerfServer, DEFAULT_PORT};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_required = false)]
pub struct PerfArgs {
    #[command(subcommand)]
    cmd: Option<PerfCmd>,
    /// Multicast mode: build a namespace lab (needs root) with a `rocast switch` and
    /// N receivers, send -n messages of -s bytes to them as one Cepheus group, and
    /// print per-receiver and aggregate figures (perftest's most-asked feature, 1→N).
    #[arg(long, value_name = "N")]
    mcast: Option<u32>,
    /// With --mcast: bytes per message (K/M suffixes).
    #[arg(short = 's', long, default_value = "1M", value_parser = crate::output::parse_size)]
    size: usize,
    /// With --mcast: messages.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    iters: u64,
    /// With --mcast: the lab's link rate in bits per second (1gbit, 1Gbps, 500M); the sender paces
    /// at it, as an RNIC at its port's rate.
    #[arg(long, default_value = "1gbit")]
    rate: String,
    /// With --mcast: the switch forwards in its fast path (`rocast switch --fast-path`).
    #[arg(long)]
    fast_path: bool,
    /// With --mcast: JSON instead of the table.
    #[arg(long)]
    json: bool,
}

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
    /// How long without progress before giving up on a client (10s, 500ms; a bare
    /// number is seconds).
    #[arg(long, default_value = "10s", value_parser = crate::output::parse_seconds)]
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
    /// Bytes per message (K/M/G suffixes are binary: 64K = 65536).
    #[arg(short = 's', long, default_value = "64K", value_parser = crate::output::parse_size)]
    size: usize,
    /// Every size from 2 B to 8 MiB in powers of two, as perftest's -a (the server
    /// must run with --loop: each size is its own connection).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// bw: messages in flight, bandwidth and message rate (ib_write_bw/ib_send_bw);
    /// lat: one message at a time, each one's post-to-completion time halved, with
    /// perftest's latency columns (ib_write_lat/ib_send_lat).
    #[arg(long, default_value = "bw")]
    test: PerfTest,
    /// Number of messages.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    iters: u64,
    /// Print the results as JSON (one object; fields documented in the README) instead
    /// of perftest's tables.
    #[arg(long)]
    json: bool,
    /// Bandwidth in Gb/sec (10^9 bits) instead of perftest's default MB/sec (2^20
    /// bytes), as perftest's --report_gbits.
    #[arg(long = "report_gbits", visible_alias = "report-gbits")]
    report_gbits: bool,
    /// Connection type, as perftest's -c: RC only (rocast's perf runs the RC
    /// requester and responder; its UD multicast has its own benchmark, `rocast bench
    /// lab-ud`).
    #[arg(short = 'c', long = "connection", default_value = "RC", value_parser = ["RC"])]
    connection: String,
    /// Exit with status 1 when a size's average bandwidth is below this (Gbit/s): a
    /// pass/fail threshold for scripts (bw test).
    #[arg(long, value_name = "GBPS")]
    min_gbps: Option<f64>,
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
    /// How long without progress before giving up (10s, 500ms; a bare number is
    /// seconds).
    #[arg(long, default_value = "10s", value_parser = crate::output::parse_seconds)]
    timeout: f64,
}

/// Which perftest family to mimic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PerfTest {
    Bw,
    Lat,
}

/// perftest's -a sizes: 2 B to 8 MiB.
const SWEEP: std::ops::RangeInclusive<u32> = 1..=23;

/// One size's result, as `--json` writes it (field names are stable; README).
#[derive(serde::Serialize)]
struct JsonResult {
    bytes: usize,
    iterations: u64,
    bw_peak_gbps: f64,
    bw_avg_gbps: f64,
    msg_rate_mpps: f64,
    /// Latency columns (µs, one way: post-to-completion halved); with --test lat.
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_us: Option<JsonLatency>,
    retransmitted_packets: u64,
    timeouts: u64,
    client_cpu_ns_per_packet: u128,
    server_cpu_ns_per_packet: u128,
    below_min_gbps: bool,
}

#[derive(serde::Serialize)]
struct JsonLatency {
    min: f64,
    max: f64,
    typical: f64,
    avg: f64,
    stdev: f64,
    p99: f64,
    p999: f64,
}

#[derive(serde::Serialize)]
struct JsonRun<'a> {
    tool: &'static str,
    test: &'a str,
    op: &'a str,
    server: String,
    mtu: usize,
    tx_depth: usize,
    /// Both ends of the (first) connection: the client's QP and the server's.
    local: Option<JsonAddress>,
    remote: Option<JsonAddress>,
    results: Vec<JsonResult>,
}

#[derive(serde::Serialize)]
struct JsonAddress {
    ip: String,
    qpn: u32,
    psn: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    rkey: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    va: Option<u64>,
}

impl JsonAddress {
    fn of(a: &rocast_net::perf::QpAddress) -> Self {
        JsonAddress {
            ip: a.ip.to_string(),
            qpn: a.qpn,
            psn: a.psn,
            rkey: a.region.map(|r| r.0),
            va: a.region.map(|r| r.1),
        }
    }
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

pub fn run(a: PerfArgs) -> ExitCode {
    match (a.cmd, a.mcast) {
        (Some(PerfCmd::Server(s)), _) => server(s),
        (Some(PerfCmd::Client(c)), _) => client(c),
        (None, Some(n)) => {
            let m = crate::lab_bench::PerfMcastArgs {
                receivers: n,
                size: a.size as u64,
                iters: a.iters,
                rate: a.rate,
                fast_path: a.fast_path,
                json: a.json,
            };
            match crate::lab_bench::perf_mcast(&m) {
                Ok(text) => {
                    let _ = write!(std::io::stdout().lock(), "{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    report(e);
                    ExitCode::FAILURE
                }
            }
        }
        (None, None) => {
            report("give a subcommand (server, client) or --mcast N; see rocast perf --help");
            ExitCode::from(2)
        }
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
    let lat = a.test == PerfTest::Lat;
    let params = PerfParams {
        op: a.op,
        size: a.size,
        iters: a.iters,
        mtu: a.mtu,
        // The latency test keeps one message outstanding, as perftest's *_lat do.
        tx_depth: if lat { 1 } else { a.tx_depth },
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
    // Parameters the run cannot take are a usage error (2), as clap's own, before any
    // connection is tried; what fails after that is the run's (1).
    if let Err(e) = params.validate() {
        report(e);
        return ExitCode::from(2);
    }
    let sizes: Vec<usize> = if a.all {
        SWEEP.map(|k| 1usize << k).collect()
    } else {
        vec![a.size]
    };
    let test = if lat { "lat" } else { "bw" };
    let unit = if a.report_gbits {
        rocast_net::perf::BwUnit::GigabitsPerSec
    } else {
        rocast_net::perf::BwUnit::MegabytesPerSec
    };
    let mut out = std::io::stdout().lock();
    if !a.json {
        let kind = match (a.op, lat) {
            (PerfOp::Write, false) => "RDMA_Write BW Test",
            (PerfOp::Send, false) => "Send BW Test",
            (PerfOp::Write, true) => "RDMA_Write Latency Test",
            (PerfOp::Send, true) => "Send Latency Test",
        };
        let rule = "-".repeat(87);
        let _ = writeln!(
            out,
            "{rule}\n                    {kind}\n Device          : rocast (software RoCEv2 over UDP/4791)\n Connection type : {}\t\tRetransmission : {}\n TX depth        : {}\n Mtu             : {}[B]\n Server          : {server}\n{rule}",
            a.connection,
            if a.sr { "selective repeat" } else { "go-back-N" },
            params.tx_depth,
            a.mtu,
        );
    }
    // perftest prints both ends' addresses once connected, then the table's header.
    let table_header = |r: &rocast_net::perf::PerfReport| {
        format!(
            "{}\n{}\n{}\n{}",
            r.local.perftest_lines("local"),
            r.remote.perftest_lines("remote"),
            "-".repeat(87),
            if lat {
                rocast_net::perf::LAT_HEADER.to_string()
            } else {
                rocast_net::perf::bw_header(unit)
            }
        )
    };
    let mut addresses = None;
    let mut results = Vec::new();
    let mut failed = false;
    for (k, &size) in sizes.iter().enumerate() {
        let cfg = ClientConfig {
            server,
            bind: a.bind,
            params: PerfParams {
                size,
                ..params.clone()
            },
            idle_timeout: secs(a.timeout),
            rate_bps: (a.rate_mbps > 0).then(|| a.rate_mbps.saturating_mul(1_000_000)),
        };
        if k > 0 {
            // The server takes the next connection once it has reported the last.
            std::thread::sleep(Duration::from_millis(50));
        }
        let r = match run_client(&cfg) {
            Ok(r) => r,
            Err(e) => {
                let hint = if k > 0 {
                    " (with -a, run the server with --loop)"
                } else {
                    ""
                };
                report(format!("{size} B: {e}{hint}"));
                return ExitCode::FAILURE;
            }
        };
        let below = !lat && a.min_gbps.is_some_and(|m| r.bw_avg_gbps < m);
        failed |= below;
        let l = rocast_net::perf::LatencySummary::of(&r.message_ns);
        if addresses.is_none() {
            if !a.json {
                let _ = writeln!(out, "{}", table_header(&r));
            }
            addresses = Some((r.local, r.remote));
        }
        if !a.json {
            let row = match (&l, lat) {
                (Some(l), true) => rocast_net::perf::format_lat_row(size, r.params.iters, l),
                _ => rocast_net::perf::format_bw_row(&r, unit),
            };
            let _ = writeln!(out, "{row}{}", if below { "   < --min-gbps" } else { "" });
            if !a.all {
                let _ = write!(out, "{}", rocast_net::perf::format_counters(&r));
            }
        }
        results.push(JsonResult {
            bytes: size,
            iterations: r.params.iters,
            bw_peak_gbps: r.bw_peak_gbps,
            bw_avg_gbps: r.bw_avg_gbps,
            msg_rate_mpps: r.msg_rate_mpps,
            latency_us: l.filter(|_| lat).map(|l| JsonLatency {
                min: l.min_us,
                max: l.max_us,
                typical: l.typical_us,
                avg: l.avg_us,
                stdev: l.stdev_us,
                p99: l.p99_us,
                p999: l.p999_us,
            }),
            retransmitted_packets: r.client.tx_retransmitted,
            timeouts: r.client.timeouts,
            client_cpu_ns_per_packet: r.client.cpu_per_packet().as_nanos(),
            server_cpu_ns_per_packet: r.server.cpu_per_packet().as_nanos(),
            below_min_gbps: below,
        });
    }
    if a.json {
        let run = JsonRun {
            tool: "rocast perf",
            test,
            op: a.op.name(),
            server: server.to_string(),
            mtu: a.mtu,
            tx_depth: params.tx_depth,
            local: addresses.map(|(l, _)| JsonAddress::of(&l)),
            remote: addresses.map(|(_, r)| JsonAddress::of(&r)),
            results,
        };
        match serde_json::to_string_pretty(&run) {
            Ok(j) => {
                let _ = writeln!(out, "{j}");
            }
            Err(e) => {
                report(e);
                return ExitCode::FAILURE;
            }
        }
    }
    if failed {
        report(format!(
            "average bandwidth below --min-gbps {}",
            a.min_gbps.unwrap_or(0.0)
        ));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
