//! `rocast bench lab-ud`: reliable UD multicast on real packets.
//!
//! Brings up a `rocast lab` whose switch namespace is a broadcast medium (a Linux
//! bridge with multicast snooping off, or `rocast switch`, which floods IPv4 multicast
//! MACs outside its Cepheus group space at layer 2), then runs one thread per host, each
//! moved into its host's namespace (`setns`): h0 a [`NackMulticastSender`], the others
//! [`NackMulticastReceiver`]s, each on a core [`UdEndpoint`] whose RoCEv2 UD frames go
//! out through a UDP/4791 socket joined to an IPv4 multicast group
//! ([`rocast_net::ud_mcast`]). Loss is injected in the drivers on receive (seeded, every
//! host, every packet kind): this lab's kernel has no netem.
//!
//! With `--fabric peel` (PEEL §3.2, on real packets) the lab is two-tier: `--tors` rack
//! switches under one aggregation switch, each a `rocast switch` with its PEEL role
//! (`rocast_net::lab`, the two-tier lab); hosts split evenly under the ToRs, h0 under
//! ToR 0. Every receiver is a PEEL member of the group on its ToR. The sender emits each
//! DATA, repair and heartbeat once per packet of the cover of the receivers' racks
//! other than its own (`TwoTierFabric::source_headers`, ids `⌈log2 tors⌉` bits),
//! shimmed, to UDP 4793; the first copy carries `SOURCE_RACK` when h0's own rack has
//! receivers (its ToR serves them on the way up). The aggregation switch replicates by its static rules, the
//! receivers' ToRs strip the shim, and the receivers' endpoints verify the source's
//! ICRC. NACKs (to the group) and STATUS (unicast) stay plain RoCEv2, switched at
//! layer 2. `--capture DIR` keeps every switch's links as `DIR/<switch>/portN.pcap`.
//!
//! Prints messages, bytes, throughput, per-receiver exactly-once accounting (delivered,
//! duplicates, out of order, corrupt, unrecoverable), injected drops, NACKs sent and
//! suppressed, repairs, heartbeats and the UD endpoints' counters. Fails (non-zero exit)
//! unless every receiver got every message exactly once, in order, intact.
//!
//! [`NackMulticastSender`]: rocast_core::nack_multicast::NackMulticastSender
//! [`NackMulticastReceiver`]: rocast_core::nack_multicast::NackMulticastReceiver
//! [`UdEndpoint`]: rocast_core::rnic::UdEndpoint

use rocast_core::nack_multicast::auth::{GroupKey, AUTH_TAG_LEN};
use rocast_core::nack_multicast::{Peer, ReceiverConfig, SenderConfig};
use rocast_core::payload::{stream_message, StreamTally};
use rocast_core::rnic::UdCounters;
use rocast_core::stats::nearest_rank;
use rocast_core::wire::peel::PeelHeader;
use rocast_eval::peel::transfer::{conformance_lines, PeelCounters};
use rocast_net::endpoint::Clock;
use rocast_net::lab::{self, Lab, LabOptions, LabSpec, Medium};
use rocast_net::ud_mcast::{
    enter_netns, run_receiver, run_sender, ReceiverReport, SenderReport, UdHost, UdHostConfig,
};
use rocast_sim::multicast::ud_transfer::{transfer_receiver_config, transfer_sender_config};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};

/// `rocast bench lab-ud`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct LabUdArgs {
    /// Hosts in the lab: h0 sends, the others receive.
    #[arg(long, default_value_t = 4)]
    pub hosts: usize,
    /// bridge (Linux bridge, snooping off) or switch (`rocast switch`, flooding).
    #[arg(long, default_value = "bridge")]
    pub medium: String,
    /// Drop probability per arriving datagram, every host (injected in the driver).
    #[arg(long, default_value_t = 0.001)]
    pub loss: f64,
    /// Where --loss drops: driver (on receive at every host) or switch (the
    /// `rocast switch` daemon's egress on every port; needs --medium switch).
    #[arg(long, default_value = "driver")]
    pub loss_at: String,
    /// Messages to send.
    #[arg(long, default_value_t = 20_000)]
    pub messages: u64,
    /// Message size in bytes, e.g. 4000 or 4K (fragmented into UD-MTU packets by the
    /// protocol).
    #[arg(long, default_value = "4000", value_parser = crate::output::parse_size)]
    pub size: usize,
    /// UD path MTU.
    #[arg(long, default_value_t = 4096)]
    pub mtu: usize,
    /// Link rate of the lab (tc).
    #[arg(long, default_value = "10gbit")]
    pub rate: String,
    /// The IPv4 multicast group address the receivers join.
    #[arg(long = "group-addr", alias = "group", default_value = "239.77.0.1")]
    pub group: Ipv4Addr,
    /// Seed of the payload and of the injected losses.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Lab name (namespaces rocast-NAME-*).
    #[arg(long, default_value = "udbench")]
    pub name: String,
    /// Give up after this long (120, 120s, 90.5s; a bare number is seconds).
    #[arg(long = "timeout", value_name = "TIMEOUT", default_value = "120", value_parser = whole_seconds)]
    pub timeout_s: u64,
    /// flat (one switch or bridge, the group flooded) or peel (a two-tier lab of
    /// `rocast switch` daemons, the sender's copies PEEL-shimmed per prefix cover;
    /// needs --medium switch).
    #[arg(long, default_value = "flat")]
    pub fabric: String,
    /// --fabric peel: rack switches (ToRs) under the aggregation switch.
    #[arg(long, default_value_t = 2)]
    pub tors: usize,
    /// Every switch daemon writes its links to DIR/<switch>/portN.pcap (--medium switch).
    #[arg(long, value_name = "DIR")]
    pub capture: Option<std::path::PathBuf>,
    /// With --loss-at switch: drop only on the switch port toward this host (its
    /// ToR's, in a two-tier lab).
    #[arg(long)]
    pub loss_host: Option<usize>,
    /// Also print the lines `rocast sim --preset peel-transfer` prints (per receiver
    /// its bytes, CRC-32 and exactly-once accounting; per switch its PEEL counters per
    /// packet the sender sent to the group): the sim/lab conformance test compares them.
    #[arg(long)]
    pub conformance: bool,
    /// Latency mode: the sender queues one message every this many microseconds
    /// (an unloaded, paced stream), each stamped with its queueing time on the
    /// machine's one clock (CLOCK_MONOTONIC: the lab's hosts are namespaces of one
    /// kernel); the report adds one-way latency percentiles, per delivery and per
    /// message until its last receiver. Needs --size of 8 bytes or more.
    #[arg(long, value_name = "US")]
    pub interval_us: Option<u64>,
    /// With --interval-us: also write every delivery's one-way latency to FILE
    /// (`receiver,message,latency_ns` lines, in order).
    #[arg(long, value_name = "FILE", requires = "interval_us")]
    pub latency_out: Option<std::path::PathBuf>,
    /// Hosts added to the lab after the run's (h<hosts>.., on their own ports) that take
    /// no part in it: strangers, for the attack tests to inject from.
    #[arg(long, default_value_t = 0)]
    pub strangers: usize,
    /// Restart the sender once: a first incarnation sends this many messages (each
    /// message's bytes differ per incarnation), then a new sender on the same host and
    /// QP sends the whole stream; receivers must tell the two streams apart and deliver
    /// the second exactly once.
    #[arg(long, value_name = "M")]
    pub restart_after: Option<u64>,
    /// The group key (64 hexadecimal digits, 32 bytes): every DATA, heartbeat, NACK and
    /// STATUS carries an HMAC-SHA256 tag, and packets without a valid one are dropped
    /// (counted as auth_failures). Without it the wire is unauthenticated.
    #[arg(long, value_name = "HEX", conflicts_with = "group_key_file")]
    pub group_key: Option<String>,
    /// Run on lab --name as `rocast lab up --name NAME --hosts N --bridge` brought it up
    /// (N at least --hosts plus --strangers), and leave it up: the attack tests keep the
    /// lab alive around the run so that their injections never race its teardown.
    #[arg(long)]
    pub existing_lab: bool,
    /// The group key from a file (64 hexadecimal digits).
    #[arg(long, value_name = "FILE")]
    pub group_key_file: Option<std::path::PathBuf>,
}

/// The group key --group-key or --group-key-file gives, if any.
fn group_key(a: &LabUdArgs) -> Result<Option<GroupKey>, String> {
    let text = match (&a.group_key, &a.group_key_file) {
        (Some(hex), _) => hex.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?
        }
        (None, None) => return Ok(None),
    };
    GroupKey::from_hex(&text)
        .map(Some)
        .map_err(|e| format!("--group-key: {e}"))
}

/// Message `m` of the sender's incarnation `k`: each incarnation's bytes differ, so a
/// receiver that mixes a restarted sender's stream with the old one is caught.
fn incarnation_message(seed: u64, k: usize, m: u64, size: usize) -> Vec<u8> {
    stream_message(seed.wrapping_add(k as u64), m, size)
}

/// Messages each incarnation of the sender sends (one entry unless --restart-after).
fn incarnation_counts(a: &LabUdArgs) -> Vec<u64> {
    match a.restart_after {
        Some(m) => vec![m, a.messages],
        None => vec![a.messages],
    }
}

/// Host `i`'s settings; `peel` is the sender's PEEL headers (empty: plain multicast).
fn host_config(
    a: &LabUdArgs,
    subnet: &str,
    i: usize,
    peel: &[PeelHeader],
) -> Result<UdHostConfig, String> {
    let ip: Ipv4Addr = lab::host_ip(subnet, i)
        .parse()
        .map_err(|e| format!("host address: {e}"))?;
    let mut c = UdHostConfig::new(
        ip,
        crate::switch_cmd::parse_mac(&lab::host_mac(i))?,
        a.group,
        0x100 + i as u32,
    );
    c.mtu = a.mtu;
    c.loss = if a.loss_at == "driver" { a.loss } else { 0.0 };
    c.seed = a.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i as u64 + 1);
    c.timeout = std::time::Duration::from_secs(a.timeout_s);
    c.send_interval = a.interval_us.map(std::time::Duration::from_micros);
    if i == 0 {
        c.peel = peel.to_vec();
    }
    Ok(c)
}

/// One sender incarnation's settings: the simulator's, with a fresh random stream id,
/// the receivers' addresses (STATUS and NACKs are taken only from them) and the key.
fn sender_config(
    a: &LabUdArgs,
    subnet: &str,
    key: Option<GroupKey>,
) -> Result<SenderConfig, String> {
    let mut c = transfer_sender_config(a.hosts, a.mtu);
    c.session = rocast_net::entropy::random_stream_id().map_err(|e| format!("stream id: {e}"))?;
    for i in 1..a.hosts {
        let ip: Ipv4Addr = lab::host_ip(subnet, i)
            .parse()
            .map_err(|e| format!("host address: {e}"))?;
        let qpn = 0x100 + i as u32;
        c.receiver_addresses
            .insert(i as u32, Peer { ip: ip.into(), qpn });
    }
    if key.is_some() {
        // The tag rides in the same UD MTU.
        c.max_payload -= AUTH_TAG_LEN;
    }
    c.group_key = key;
    Ok(c)
}

fn receiver_config(a: &LabUdArgs, i: usize, key: Option<GroupKey>) -> ReceiverConfig {
    let mut c = transfer_receiver_config(a.hosts, i, a.seed);
    c.group_key = key;
    // 8 rounds of the 10 ms hold-off: a stream with no DATA for 80 ms of NACKing has no
    // live sender (the stream cap and this bound the NACKs a stranger's heartbeats cost).
    c.max_fruitless_nack_rounds = 8;
    c
}

fn ud_drops(u: &UdCounters) -> String {
    let mut s = String::new();
    for (k, v) in [
        ("not_roce", u.drop_not_roce),
        ("malformed", u.drop_malformed),
        ("bad_icrc", u.drop_bad_icrc),
        ("not_for_us", u.drop_not_for_us),
        ("wrong_transport", u.drop_wrong_transport),
        ("pkey", u.drop_pkey_mismatch),
        ("mcast_mismatch", u.drop_multicast_mismatch),
        ("unknown_qpn", u.drop_unknown_qpn),
        ("unknown_group", u.drop_unknown_group),
        ("qkey", u.drop_qkey_mismatch),
        ("no_recv_buffer", u.drop_no_recv_buffer),
        ("too_long", u.drop_too_long),
    ] {
        let _ = write!(s, " {k}={v}");
    }
    s
}

/// Runs the benchmark. `Err` if it could not run (arguments, lab); else the report,
/// `Ok` when every receiver got everything exactly once and `Err` otherwise (the
/// caller prints it either way).
pub fn lab_ud(a: &LabUdArgs) -> Result<Result<String, String>, String> {
    let key = group_key(a)?;
    require_root("lab-ud")?;
    if !(2..=lab::MAX_HOSTS).contains(&a.hosts) {
        return Err(format!("--hosts must be 2..={}", lab::MAX_HOSTS));
    }
    if !(0.0..1.0).contains(&a.loss) {
        return Err("--loss must be in [0, 1)".into());
    }
    if !matches!(a.mtu, 256 | 512 | 1024 | 2048 | 4096) {
        return Err("--mtu must be 256, 512, 1024, 2048 or 4096".into());
    }
    if a.interval_us.is_some() && a.size < 8 {
        return Err("--interval-us stamps each message: --size must be 8 or more".into());
    }
    if a.messages == 0 || a.messages > u32::MAX as u64 {
        return Err("--messages must be 1..2^32".into());
    }
    if a.hosts + a.strangers > lab::MAX_HOSTS {
        return Err(format!(
            "--hosts plus --strangers must be at most {}",
            lab::MAX_HOSTS
        ));
    }
    if a.restart_after.is_some_and(|m| m == 0 || m >= a.messages) {
        return Err("--restart-after must be 1..--messages".into());
    }
    if a.restart_after.is_some() && (a.interval_us.is_some() || a.conformance) {
        return Err("--restart-after goes without --interval-us and --conformance".into());
    }
    if !a.group.is_multicast() {
        return Err(format!(
            "--group {} is not an IPv4 multicast address",
            a.group
        ));
    }
    let medium = match a.medium.as_str() {
        "bridge" => Medium::Bridge,
        "switch" => Medium::Switch {
            exe: std::env::current_exe().map_err(|e| e.to_string())?,
        },
        m => return Err(format!("--medium {m:?}: bridge or switch")),
    };
    let fabric_loss = match (a.loss_at.as_str(), &medium) {
        ("driver", _) => None,
        ("switch", Medium::Switch { .. }) => Some(a.loss).filter(|&p| p > 0.0),
        ("switch", _) => {
            return Err("--loss-at switch needs --medium switch (this kernel has no netem for the bridge's ports)".into())
        }
        (w, _) => return Err(format!("--loss-at {w:?}: driver or switch")),
    };
    let (tors, peel_groups) = match a.fabric.as_str() {
        "flat" => (1, Vec::new()),
        "peel" => {
            if !matches!(medium, Medium::Switch { .. }) {
                return Err(
                    "--fabric peel needs --medium switch (PEEL runs in rocast switch)".into(),
                );
            }
            if a.tors < 2 || !a.hosts.is_multiple_of(a.tors) {
                return Err(format!(
                    "--fabric peel needs --tors 2 or more dividing --hosts ({} hosts, {} ToRs)",
                    a.hosts, a.tors
                ));
            }
            (a.tors, vec![(a.group, (1..a.hosts).collect())])
        }
        f => return Err(format!("--fabric {f:?}: flat or peel")),
    };
    if let Some(h) = a.loss_host {
        if fabric_loss.is_none() || h == 0 || h >= a.hosts {
            return Err(format!(
                "--loss-host {h}: needs --loss-at switch, a positive --loss and a receiver (1..{})",
                a.hosts
            ));
        }
    }
    let opts = LabOptions {
        name: a.name.clone(),
        hosts: a.hosts + a.strangers,
        rate: a.rate.clone(),
        medium,
        loss: fabric_loss,
        loss_host: a.loss_host,
        tors,
        peel_groups,
        capture: a.capture.clone(),
        ..LabOptions::default()
    };
    let subnet = opts.subnet.clone();
    // The sender's headers: the cover of its group on the fabric the lab's switches
    // are set up from.
    let peel = match opts.peel_groups.first() {
        Some((_, members)) => lab::two_tier_fabric(&opts)
            .map_err(|e| e.to_string())?
            .source_headers(0, members),
        None => Vec::new(),
    };
    let spec = LabSpec::new(opts).map_err(|e| e.to_string())?;
    let up = if a.existing_lab {
        if a.medium != "bridge" || a.fabric != "flat" || fabric_loss.is_some() {
            return Err("--existing-lab runs on a flat bridge lab, loss in the drivers".into());
        }
        Lab {
            spec: spec.clone(),
            shaper: lab::Shaper::Tbf,
            namespaces: Vec::new(),
            switch_pid: None,
            daemon_pids: Vec::new(),
            warnings: vec![format!(
                "running on lab {} as its owner brought it up (its links' shaping is theirs)",
                a.name
            )],
        }
    } else {
        lab::down(&a.name).map_err(|e| e.to_string())?;
        Lab::up(&spec).map_err(|e| e.to_string())?
    };
    let result = run(a, &subnet, &peel, &up, key);
    // Each switch daemon's counters, once the fabric is quiet: (label, name, stats reply).
    let stats = settled_switch_stats(&spec, &a.name, up.switch_pid.is_some(), tors);
    let result = result.and_then(|(mut r, tallies)| {
        if let (Ok(t) | Err(t), Some((tallies, packets))) = (&mut r, tallies) {
            let switches: Vec<PeelCounters> = stats
                .iter()
                .map(|(_, short, text)| peel_counters(short, text))
                .collect::<Result<_, _>>()?;
            t.push_str(&conformance_lines(&tallies, packets, &switches));
        }
        // What the switches did with the group's frames.
        let (Ok(t) | Err(t)) = &mut r;
        for (label, _, text) in &stats {
            t.push_str(&switch_stats_line(label, text));
        }
        Ok(r)
    });
    // Frames the lab's own kernel lost (full backlogs and socket buffers on a busy
    // machine): a comparison with the simulator holds only when this is 0.
    let result = result.map(|mut r| {
        let (Ok(t) | Err(t)) = &mut r;
        t.push_str(&match lab::link_drops(&a.name) {
            Ok(d) => format!(
                "lab link drops: interfaces {} qdiscs {}\n",
                d.interfaces, d.qdiscs
            ),
            Err(e) => format!("lab link drops: unknown ({e})\n"),
        });
        r
    });
    if a.existing_lab {
        return result;
    }
    let down = lab::down(&a.name);
    let report = result?;
    down.map_err(|e| format!("lab down: {e}"))?;
    Ok(report)
}

/// Every switch daemon's `stats` reply, (label, short name, reply), read when the
/// fabric has gone quiet: the sender's last frames (a heartbeat) can still be on a
/// switch-to-switch link when the hosts return, and a switch read before they arrive
/// would undercount them. Reads every switch until two rounds 20 ms apart agree, for at
/// most 2 s (then the last round, which a caller comparing counts will reject).
fn settled_switch_stats(
    spec: &LabSpec,
    name: &str,
    has_switch: bool,
    tors: usize,
) -> Vec<(String, String, Result<String, String>)> {
    let round = || -> Vec<(String, String, Result<String, String>)> {
        if !has_switch {
            Vec::new()
        } else if tors > 1 {
            lab::switch_daemons(spec)
                .into_iter()
                .map(|d| {
                    let text = query_stats(&d.control);
                    (format!("switch {}:", d.short), d.short, text)
                })
                .collect()
        } else {
            let text = query_stats(&lab::switch_socket(name));
            vec![("switch:".to_string(), "switch".to_string(), text)]
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut last = round();
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let next = round();
        if next == last {
            break;
        }
        last = next;
    }
    last
}

/// Waits (at most 2 s) until the switch at `control` has snooped `hosts` member ports
/// of `group`: every host's socket has joined once the barrier passes, but its IGMP
/// report can still be on its way, and frames sent before it arrives are flooded as
/// unregistered rather than forwarded by membership.
fn wait_for_memberships(control: &std::path::Path, group: Ipv4Addr, hosts: usize) {
    let prefix = format!("igmp {group} members ");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        let joined = rocast_net::switch::query(control, "groups").is_ok_and(|t| {
            t.lines().any(|l| {
                l.strip_prefix(&prefix)
                    .is_some_and(|m| m.split_whitespace().count() >= hosts)
            })
        });
        if joined {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A switch daemon's `stats` reply.
fn query_stats(control: &std::path::Path) -> Result<String, String> {
    rocast_net::switch::query(control, "stats").map_err(|e| e.to_string())
}

/// One switch daemon's PEEL counters (in, forwarded, delivered, dropped) from its
/// stats reply.
fn peel_counters(short: &str, text: &Result<String, String>) -> Result<PeelCounters, String> {
    let text = text
        .as_ref()
        .map_err(|e| format!("switch {short} stats: {e}"))?;
    let mut c = (short.to_string(), 0, 0, 0, 0);
    for (kind, k, v) in rocast_net::switch::stat_counters(text) {
        match (kind, k) {
            ("peel", "in") => c.1 = v,
            ("peel", "forwarded") => c.2 = v,
            ("peel", "delivered") => c.3 = v,
            ("peel", "dropped") => c.4 = v,
            _ => {}
        }
    }
    Ok(c)
}

/// One switch daemon's frame (and PEEL) counters from its stats reply, one `<label> …`
/// line.
fn switch_stats_line(label: &str, text: &Result<String, String>) -> String {
    match text {
        Ok(text) => {
            let mut line = String::from(label);
            // Summed over the ports: `port N SPEC … key value …` lines.
            let port_sum = |key: &str| -> u64 {
                text.lines()
                    .filter(|l| l.starts_with("port "))
                    .filter_map(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        let i = f.iter().position(|w| *w == key)?;
                        f.get(i + 1)?.parse::<u64>().ok()
                    })
                    .sum()
            };
            let (port_drops, kernel_drops, tx_errors) = (
                port_sum("injected_drops"),
                port_sum("kernel_drops"),
                port_sum("tx_errors"),
            );
            for (kind, k, v) in rocast_net::switch::stat_counters(&text) {
                match kind {
                    "switch"
                        if matches!(
                            k,
                            "rx_frames"
                                | "tx_frames"
                                | "flooded"
                                | "forwarded"
                                | "drop_bad_icrc"
                                | "drop_malformed"
                                | "drop_roce_malformed"
                                | "igmp_reports"
                                | "mcast_forwarded"
                                | "mcast_unregistered"
                        ) =>
                    {
                        let _ = write!(line, " {k} {v}");
                    }
                    "peel" => {
                        let _ = write!(line, " peel_{k} {v}");
                    }
                    _ => {}
                }
            }
            let _ = writeln!(
                line,
                " port_injected_drops {port_drops} port_kernel_drops {kernel_drops} port_tx_errors {tx_errors}"
            );
            line
        }
        Err(e) => format!("{label} stats query failed: {e}\n"),
    }
}

/// What `--conformance` needs from the hosts: each receiver's tally and the packets the
/// sender sent to the group (when every host finished).
type Tallies = Option<(Vec<StreamTally>, u64)>;

fn run(
    a: &LabUdArgs,
    subnet: &str,
    peel: &[PeelHeader],
    up: &Lab,
    key: Option<GroupKey>,
) -> Result<(Result<String, String>, Tallies), String> {
    let n = a.hosts;
    let clock = Clock::new();
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(n));
    // Latency mode: per receiver, each message's one-way latency (ns), by sequence.
    let latencies: Arc<Mutex<Vec<Vec<u64>>>> = Arc::new(Mutex::new(vec![Vec::new(); n]));
    let stamped = a.interval_us.is_some();
    let mut receivers = Vec::new();
    for i in 1..n {
        let (a2, stop, ready) = (a.clone(), stop.clone(), ready.clone());
        let lat = latencies.clone();
        let rcfg = receiver_config(a, i, key.clone());
        let cfg = host_config(a, subnet, i, peel)?;
        let ns = lab::ns_host(&a.name, i);
        receivers.push(std::thread::spawn(
            move || -> Result<ReceiverReport, String> {
                let host = enter_netns(&ns)
                    .and_then(|_| UdHost::new(cfg, clock))
                    .map_err(|e| format!("h{i}: {e}"));
                ready.wait();
                let mut host = host?;
                let (seed, size) = (a2.seed, a2.size);
                run_receiver(
                    &mut host,
                    rcfg,
                    &incarnation_counts(&a2),
                    |k, m, d| {
                        let want = incarnation_message(seed, k, m, size);
                        if !stamped {
                            return d == want.as_slice();
                        }
                        if d.len() != size || d[8..] != want[8..] {
                            return false;
                        }
                        let sent = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
                        let mut l = lat.lock().expect("latency table");
                        let v = &mut l[i];
                        if v.len() <= m as usize {
                            v.resize(m as usize + 1, u64::MAX);
                        }
                        v[m as usize] = rocast_net::mcast::mono_ns().saturating_sub(sent);
                        true
                    },
                    // On stderr at once: the attack tests inject only into bound streams.
                    |stream, from| {
                        eprintln!(
                            "# h{i} bound stream {stream:#010x} to {} qpn {:#x}",
                            Ipv4Addr::from(from.ip.0),
                            from.qpn
                        )
                    },
                    &stop,
                )
                .map_err(|e| format!("h{i}: {e}"))
            },
        ));
    }
    // One rocast switch snoops the joins: the sender waits until it holds them all.
    let snooping =
        (up.switch_pid.is_some() && a.fabric == "flat").then(|| lab::switch_socket(&a.name));
    let sender = {
        let (a2, stop, ready) = (a.clone(), stop.clone(), ready.clone());
        let cfg = host_config(a, subnet, 0, peel)?;
        let (subnet, key) = (subnet.to_string(), key.clone());
        let ns = lab::ns_host(&a.name, 0);
        std::thread::spawn(move || -> Result<SenderReport, String> {
            let host = enter_netns(&ns)
                .and_then(|_| UdHost::new(cfg, clock))
                .map_err(|e| format!("h0: {e}"));
            ready.wait();
            if let Some(control) = &snooping {
                wait_for_memberships(control, a2.group, n);
            }
            let r = host.and_then(|mut host| {
                let (seed, size) = (a2.seed, a2.size);
                let mut last = Err("no sender incarnation ran".to_string());
                for (k, count) in incarnation_counts(&a2).into_iter().enumerate() {
                    let cfg = match sender_config(&a2, &subnet, key.clone()) {
                        Ok(c) => c,
                        Err(e) => {
                            last = Err(format!("h0: {e}"));
                            break;
                        }
                    };
                    // On stderr at once: the attack tests (an on-path observer would
                    // read it off the wire) wait for it.
                    eprintln!("# stream {:#010x} sender incarnation {k}", cfg.session);
                    last = run_sender(
                        &mut host,
                        cfg,
                        count,
                        |m| {
                            let mut v = incarnation_message(seed, k, m, size);
                            if stamped {
                                v[..8].copy_from_slice(&rocast_net::mcast::mono_ns().to_le_bytes());
                            }
                            v
                        },
                        &stop,
                    )
                    .map_err(|e| format!("h0 incarnation {k}: {e}"));
                    if last.is_err() {
                        break;
                    }
                }
                last
            });
            // Done (or failed): the receivers have nothing more to wait for.
            stop.store(true, Ordering::Relaxed);
            r
        })
    };
    let s = sender
        .join()
        .map_err(|_| "the sender thread panicked".to_string())?;
    let rs: Vec<Result<ReceiverReport, String>> = receivers
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("a receiver thread panicked".into()))
        })
        .collect();
    let tallies = match (&s, a.conformance) {
        (Ok(s), true) => rs
            .iter()
            .map(|r| r.as_ref().ok().map(|r| r.stream.clone()))
            .collect::<Option<Vec<_>>>()
            .map(|t| {
                let p = &s.protocol;
                (t, p.data_packets + p.repair_packets + p.heartbeats)
            }),
        _ => None,
    };
    let mut r = report(a, up, s, rs);
    if stamped {
        let table = latencies.lock().expect("latency table");
        let (Ok(t) | Err(t)) = &mut r;
        t.push_str(&latency_lines(&table[1..]));
        if let Some(path) = &a.latency_out {
            let mut out = String::from("receiver,message,latency_ns\n");
            for (i, v) in table.iter().enumerate().skip(1) {
                for (m, &ns) in v.iter().enumerate().filter(|x| *x.1 != u64::MAX) {
                    let _ = writeln!(out, "{i},{m},{ns}");
                }
            }
            std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok((r, tallies))
}

/// A benchmark that builds network namespaces needs root: `what` names it in the error
/// (the lab benchmarks of `lab_bench` share it).
pub(crate) fn require_root(what: &str) -> Result<(), String> {
    if rustix::process::geteuid().is_root() {
        Ok(())
    } else {
        Err(format!("{what} builds network namespaces: run it as root"))
    }
}

/// p50/p99/p99.9/max of `v` (ns) in µs, and how many.
pub fn percentiles_us(mut v: Vec<u64>) -> String {
    if v.is_empty() {
        return "samples 0".into();
    }
    v.sort_unstable();
    let at = |q: f64| nearest_rank(&v, q).unwrap_or(0) as f64 / 1e3;
    format!(
        "samples {} p50 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} us",
        v.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        v[v.len() - 1] as f64 / 1e3
    )
}

/// The latency mode's report lines: every delivery, and each message until its last
/// receiver had it (a message some receiver never got is left out of the second).
fn latency_lines(per_receiver: &[Vec<u64>]) -> String {
    let all: Vec<u64> = per_receiver
        .iter()
        .flatten()
        .copied()
        .filter(|&x| x != u64::MAX)
        .collect();
    let len = per_receiver.iter().map(Vec::len).min().unwrap_or(0);
    let last: Vec<u64> = (0..len)
        .map(|m| per_receiver.iter().map(|v| v[m]).max().unwrap_or(u64::MAX))
        .filter(|&x| x != u64::MAX)
        .collect();
    format!(
        "latency one-way (queued at the sender to delivered, one clock), every delivery: {}\nlatency one-way until the last receiver, per message: {}\n",
        percentiles_us(all),
        percentiles_us(last)
    )
}

fn report(
    a: &LabUdArgs,
    up: &Lab,
    s: Result<SenderReport, String>,
    rs: Vec<Result<ReceiverReport, String>>,
) -> Result<String, String> {
    let mut t = String::new();
    let n = a.hosts;
    let _ = writeln!(
        t,
        "# rocast bench lab-ud: NACK-reliable UD multicast on real RoCEv2 packets"
    );
    let _ = writeln!(
        t,
        "# lab: {n} hosts (h0 sends, h1..h{} receive), medium {}, links {} ({}), group {} (UDP/4791), UD MTU {}",
        n - 1,
        a.medium,
        a.rate,
        match up.shaper {
            lab::Shaper::Netem => "netem",
            lab::Shaper::Tbf => "tbf",
        },
        a.group,
        a.mtu
    );
    for w in &up.warnings {
        let _ = writeln!(t, "# lab warning: {w}");
    }
    if a.loss_at == "driver" {
        let _ = writeln!(
            t,
            "# loss: {} per datagram, injected on receive in each host's driver (seeded ChaCha8, \
             seed {}; every packet kind: DATA, repairs, heartbeats, NACKs, STATUS) — the kernel \
             has no netem; losses the kernel adds are counted as kernel_drops",
            a.loss, a.seed
        );
    } else if let Some(h) = a.loss_host {
        let _ = writeln!(
            t,
            "# loss: {} per frame leaving the `rocast switch` port toward h{h} (the daemon's seeded \
             --loss; every frame kind), counted in the switch line as port_injected_drops",
            a.loss
        );
    } else {
        let _ = writeln!(
            t,
            "# loss: {} per frame leaving each `rocast switch` port (the daemon's seeded --loss; \
             every frame kind), counted in the switch line as port_injected_drops",
            a.loss
        );
    }
    let bytes = a.messages * a.size as u64;
    let _ = writeln!(
        t,
        "messages {}  size {} B  bytes {}",
        a.messages, a.size, bytes
    );
    let mut failures = Vec::new();
    let sender = match s {
        Ok(s) => Some(s),
        Err(e) => {
            failures.push(e);
            None
        }
    };
    let last_done = rs
        .iter()
        .filter_map(|r| r.as_ref().ok().and_then(|r| r.done))
        .max();
    if let Some(s) = &sender {
        if let (Some(t0), Some(t1)) = (s.first_tx, last_done) {
            let secs = t1.duration_since(t0).as_secs_f64().max(1e-9);
            let _ = writeln!(
                t,
                "elapsed_s {secs:.3}  throughput_mbps {:.1}  messages_per_s {:.0}  \
                 (first DATA sent to the last message delivered at the last receiver; payload bytes)",
                bytes as f64 * 8.0 / secs / 1e6,
                a.messages as f64 / secs
            );
        }
        if let (Some(t0), Some(t1)) = (s.first_tx, s.all_delivered) {
            let _ = writeln!(
                t,
                "sender_complete_s {:.3}  (until every receiver's STATUS covered the stream)",
                t1.duration_since(t0).as_secs_f64()
            );
        }
        let p = &s.protocol;
        let _ = writeln!(
            t,
            "sender h0: data_packets {} repairs {} heartbeats {} nacks_in {} (lingering {}, queued {}, \
             capped {}, unavailable {}, bogus {}) status_in {} injected_drops {} kernel_drops {} tx_dropped {}",
            p.data_packets,
            p.repair_packets,
            p.heartbeats,
            p.nacks_in,
            p.nacked_lingering,
            p.nacked_queued,
            p.repairs_capped,
            p.nacked_unavailable,
            p.nacks_bogus,
            p.status_in,
            s.driver.injected_drops,
            s.socket.rx_kernel_drops,
            s.socket.tx_dropped
        );
        let _ = writeln!(
            t,
            "guard h0: status_refused {} nacks_refused {} other_stream {} auth_failures {} malformed {}",
            p.status_refused, p.nacks_refused, p.other_stream, p.auth_failures, p.malformed
        );
    }
    let _ = writeln!(
        t,
        "{:<4} {:>9} {:>4} {:>6} {:>7} {:>5} {:>10} {:>11} {:>10} {:>7} {:>8} {:>9} {:>8} {:>8} {:>7}",
        "host",
        "delivered",
        "dup",
        "order",
        "corrupt",
        "lost",
        "nacks_sent",
        "nack_ranges",
        "suppressed",
        "heard",
        "repairs",
        "pkt_dups",
        "injected",
        "kern_drp",
        "status"
    );
    let mut tot = (0u64, 0u64, 0u64, 0u64);
    for (k, r) in rs.iter().enumerate() {
        let i = k + 1;
        match r {
            Ok(r) => {
                let p = &r.protocol;
                tot.0 += p.nacks_sent;
                tot.1 += p.nacks_suppressed;
                tot.2 += r.driver.injected_drops;
                tot.3 += p.repair_packets;
                let _ = writeln!(
                    t,
                    "h{i:<3} {:>9} {:>4} {:>6} {:>7} {:>5} {:>10} {:>11} {:>10} {:>7} {:>8} {:>9} {:>8} {:>8} {:>7}",
                    r.stream.delivered,
                    r.stream.duplicates,
                    r.stream.out_of_order,
                    r.stream.corrupt,
                    r.stream.unrecoverable,
                    p.nacks_sent,
                    p.nack_ranges_sent,
                    p.nacks_suppressed,
                    p.nacks_heard,
                    p.repair_packets,
                    p.duplicates,
                    r.driver.injected_drops,
                    r.socket.rx_kernel_drops,
                    p.status_sent
                );
                let _ = writeln!(
                    t,
                    "guard h{i}: wrong_source {} auth_failures {} streams_refused {} \
                     streams_evicted {} nack_rounds_withheld {} nack_ranges_sent {} malformed {}",
                    p.wrong_source,
                    p.auth_failures,
                    p.streams_refused,
                    p.streams_evicted,
                    p.nack_rounds_withheld,
                    p.nack_ranges_sent,
                    p.malformed
                );
                if a.restart_after.is_some() {
                    let mut line = format!("streams h{i}: {}", r.streams.len());
                    for (id, t) in &r.streams {
                        let _ = write!(
                            line,
                            " ({id:#010x} delivered {} dup {} order {} corrupt {} lost {})",
                            t.delivered, t.duplicates, t.out_of_order, t.corrupt, t.unrecoverable
                        );
                    }
                    let _ = writeln!(t, "{line}");
                }
                if !r.stream.exactly_once() {
                    failures.push(format!(
                        "h{i}: delivered {}/{} (duplicates {}, out of order {}, corrupt {}, unrecoverable {})",
                        r.stream.delivered,
                        a.messages,
                        r.stream.duplicates,
                        r.stream.out_of_order,
                        r.stream.corrupt,
                        r.stream.unrecoverable
                    ));
                }
            }
            Err(e) => {
                let _ = writeln!(t, "h{i:<3} failed: {e}");
                failures.push(e.clone());
            }
        }
    }
    let sender_inj = sender.as_ref().map_or(0, |s| s.driver.injected_drops);
    let _ = writeln!(
        t,
        "totals: nacks_sent {} nacks_suppressed {} repairs_sent {} repairs_received {} \
         heartbeats {} injected_drops {} (receivers {} + sender {})",
        tot.0,
        tot.1,
        sender.as_ref().map_or(0, |s| s.protocol.repair_packets),
        tot.3,
        sender.as_ref().map_or(0, |s| s.protocol.heartbeats),
        tot.2 + sender_inj,
        tot.2,
        sender_inj
    );
    let _ = writeln!(
        t,
        "# UD endpoint counters (frames the endpoint saw, after injected loss)"
    );
    let mut ud_rows: Vec<(String, &UdCounters, u64)> = Vec::new();
    if let Some(s) = &sender {
        ud_rows.push(("h0".into(), &s.ud, s.driver.ud_rejects));
    }
    for (k, r) in rs.iter().enumerate() {
        if let Ok(r) = r {
            ud_rows.push((format!("h{}", k + 1), &r.ud, r.driver.ud_rejects));
        }
    }
    for (h, u, _) in &ud_rows {
        let _ = writeln!(
            t,
            "{h}: tx {} (mcast {}) rx {} (mcast {}) delivered {} psn_gaps {} ({} packets) psn_late {} psn_dup {} drops{}",
            u.tx_packets,
            u.tx_multicast_packets,
            u.rx_packets,
            u.rx_multicast_packets,
            u.rx_deliveries,
            u.psn_gaps,
            u.psn_gap_packets,
            u.psn_late,
            u.psn_duplicates,
            ud_drops(u)
        );
    }
    if failures.is_empty() {
        let _ = writeln!(
            t,
            "result: PASS — {} receivers got all {} messages exactly once, in order, content verified",
            n - 1,
            a.messages
        );
        Ok(t)
    } else {
        let _ = writeln!(t, "result: FAIL — {}", failures.join("; "));
        Err(t)
    }
}

/// `--timeout`: [`crate::output::parse_seconds`], rounded up to whole seconds.
fn whole_seconds(s: &str) -> Result<u64, String> {
    crate::output::parse_seconds(s).map(|v| v.ceil() as u64)
}
