//! `rocast bench lab-bcast`: broadcast latency and goodput on real packets.
//! For each group size it brings up a `rocast lab` with the switch daemon, then for
//! each message size and scheme runs `rocast mcast lead|join` on the hosts (Cepheus
//! through the switch; chain, binomial tree and binomial pipeline over the same host
//! runtime without switch help) and keeps the median of `--reps` runs. Optionally
//! Open MPI's `MPI_Bcast` (TCP BTL between the namespaces) runs on the same lab.
//!
//! Output: an OSU-style table per scheme (`# Size  Avg Latency(us)`), a summary with
//! goodput and the ratio of the best overlay's latency to Cepheus', a CSV and a PNG.
//! Latency is from the leader's first post until the last member held the whole
//! message, on the machine's one monotonic clock. A benchmark: it prints figures and
//! asserts nothing. Each point is the median of `--reps` sends in one group (registration
//! once, as an application would).

use rocast_core::stats::{nearest_rank, upper_median as median};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const LAB: &str = "bench";

/// `rocast lab run`: the `transfer` scenario on real packets. Brings up lab `name`
/// with `multicast.group` hosts and the switch, writes the scenario's data (the same
/// bytes the simulator sends, `rocast_core::payload`), has h0 send it by WRITE in
/// `message`-sized messages to the others, and prints each member's CRC-32 in the
/// simulator's format.
pub fn lab_run(
    preset: Option<&str>,
    file: Option<&Path>,
    sets: &[String],
    name: &str,
) -> Result<String, String> {
    use rocast_sim::scenario::config::{parse_bytes, Scenario};
    let sc = match (preset, file) {
        (Some(p), _) => rocast_eval::experiments::scenario(p, sets).map_err(|e| e.to_string())?,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            Scenario::from_toml(&text, sets).map_err(|e| e.to_string())?
        }
        (None, None) => return Err("give --preset or --scenario".into()),
    };
    let m = &sc.multicast;
    if m.experiment == "peel-transfer" {
        return lab_run_peel(&sc, name);
    }
    if m.experiment != "transfer" {
        return Err(format!(
            "multicast.experiment is {:?}: `lab run` runs transfer and peel-transfer scenarios",
            m.experiment
        ));
    }
    let n = m.group as usize;
    if !(2..=64).contains(&n) || m.messages == 0 {
        return Err(
            "transfer: multicast.group must be 2..64 and multicast.messages positive".into(),
        );
    }
    let size = parse_bytes(&m.message).map_err(|e| e.to_string())?;
    let data = rocast_core::payload::transfer_data(sc.seed, m.messages, size as usize);
    let dir = std::env::temp_dir().join(format!("rocast-lab-run-{name}"));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("data.bin");
    std::fs::write(&file, &data).map_err(|e| e.to_string())?;
    run_rocast(&["lab", "down", "--name", name])?;
    let hosts = n.to_string();
    let mut up = vec!["lab", "up", "--name", name, "--hosts", &hosts, "--switch"];
    // The simulator drops at the switch port toward `loss_rank`; so does the lab's switch.
    let (loss, rank) = (m.loss.to_string(), m.loss_rank.to_string());
    if m.loss > 0.0 {
        up.extend(["--loss", &loss, "--loss-host", &rank]);
    }
    run_rocast(&up)?;
    let result = (|| -> Result<String, String> {
        let outs: Vec<PathBuf> = (1..n).map(|i| dir.join(format!("h{i}.bin"))).collect();
        let mut extra: Vec<String> = ["--message", &size.to_string(), "--op", &m.op]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if m.conformance {
            // One buffer per message: each member reports each, in completion order.
            extra.extend(["--buffers".to_string(), m.messages.to_string()]);
        }
        // The first of `schemes`, as the simulator reads it: Cepheus, or an overlay.
        let scheme = m.schemes.first().map_or("cepheus", String::as_str);
        let block = parse_bytes(&m.block).map_err(|e| e.to_string())?.max(1);
        // The overlay's blocks, or the fallback's.
        extra.extend(["--block".to_string(), block.to_string()]);
        if scheme != "cepheus" {
            extra.extend(["--overlay".to_string(), scheme.to_string()]);
        }
        if m.safeguard_expected_ratio > 0.0 {
            // The leader watches windows of 10 ms (`SafeguardConfig::new`); a scenario
            // asking for another would not be the same scenario here.
            if m.safeguard_window_ms != 10.0 {
                return Err(format!(
                    "multicast.safeguard_window_ms is {}: the lab's leader watches 10 ms windows",
                    m.safeguard_window_ms
                ));
            }
            // The lab's links run at 1 Gbit/s: expect the ratio of that.
            let expected = (m.safeguard_expected_ratio * 1000.0).round() as u64;
            extra.extend([
                "--safeguard".to_string(),
                m.safeguard_threshold.to_string(),
                "--rate-mbps".to_string(),
                expected.to_string(),
            ]);
        }
        if m.kill_rank as usize >= n {
            return Err(format!(
                "multicast.kill_rank {}: the group's ranks are 1..{n}",
                m.kill_rank
            ));
        }
        if m.refresh_ms > 0 {
            extra.extend(["--refresh-ms".to_string(), m.refresh_ms.to_string()]);
        }
        let fault = match (m.kill_rank, m.restart_switch_after_packets) {
            (0, 0) => None,
            (0, after) => Some((MidStreamFault::RestartSwitch, after)),
            (r, 0) => Some((MidStreamFault::KillRank(r as usize), m.kill_after_packets)),
            _ => {
                return Err(
                    "multicast.kill_rank and restart_switch_after_packets: one fault at a time"
                        .into(),
                )
            }
        };
        let (lead_text, member_texts, mid_stream) =
            run_group_killing(name, n, &file, &extra, Some(&outs), 30, fault)?;
        let mut text = format!(
            "# transfer: {} x {} B from rank 0 to ranks 1..{}, seed {} (lab, real packets: {})\n",
            m.messages,
            size,
            n - 1,
            sc.seed,
            lead_text
                .lines()
                .find(|l| l.starts_with("multicast "))
                .unwrap_or("")
                .trim()
        );
        let outcome = group_outcome_lines(&lead_text, n);
        for (r, out) in outs.iter().enumerate() {
            if outcome.contains(&format!("rank {} verdict EVICTED\n", r + 1)) {
                continue; // killed mid-stream: what it wrote is not the group's outcome
            }
            let got = std::fs::read(out).unwrap_or_default();
            text.push_str(&format!(
                "rank {} bytes {} crc32 {:08x}\n",
                r + 1,
                got.len(),
                rocast_core::payload::crc32(&got)
            ));
        }
        if scheme == "cepheus" {
            text.push_str(&outcome);
        }
        if mid_stream && m.restart_switch_after_packets > 0 {
            // Mid-stream: the new daemon, whose counters start at 0, carried data.
            let stats = rocast_net::switch::query(&rocast_net::lab::switch_socket(name), "stats")
                .map_err(|e| format!("switch stats: {e}"))?;
            if cepheus_stats_of(&stats).data_in > 0 {
                text.push_str(rocast_eval::cepheus::SWITCH_RESTARTED_LINE);
            }
        }
        if m.conformance {
            // The same lines as the simulator's (`rocast_eval::cepheus::conformance_lines`).
            let mut order = vec![Vec::new()];
            order.extend(member_texts.iter().map(|t| buffer_order(t)));
            let stats = rocast_net::switch::query(&rocast_net::lab::switch_socket(name), "stats")
                .map_err(|e| format!("switch stats: {e}"))?;
            text.push_str(&rocast_eval::cepheus::conformance_lines(
                &order,
                &cepheus_stats_of(&stats),
            ));
        }
        Ok(text)
    })();
    run_rocast(&["lab", "down", "--name", name])?;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What the simulator's `transfer` prints after the bytes, from `mcast lead`'s report:
/// each member's verdict (ok only if it reported every buffer intact) and the group's
/// path (the first buffer that left the switch, else the switch).
fn group_outcome_lines(lead_text: &str, n: usize) -> String {
    let mut t = String::new();
    for r in 1..n {
        let tag = format!("  member {}: ", host_ip(r));
        let verdicts: Vec<&str> = lead_text
            .lines()
            .filter_map(|l| l.strip_prefix(tag.as_str()))
            .collect();
        let ok = !verdicts.is_empty() && verdicts.iter().all(|v| v.trim() == "ok");
        let word = if verdicts.iter().any(|v| v.trim() == "EVICTED") {
            "EVICTED"
        } else {
            rocast_eval::cepheus::verdict_word(ok)
        };
        t.push_str(&format!("rank {r} verdict {word}\n"));
    }
    let path = lead_text
        .lines()
        .filter(|l| l.starts_with("multicast "))
        .filter_map(|l| {
            let rest = l.split_once(" via ")?.1;
            let upto = rest.split_once(" members: ")?.0;
            upto.rsplit_once(" to ").map(|p| p.0)
        })
        .map(rocast_eval::cepheus::GroupPath::of_lead_path)
        .find(|p| *p != rocast_eval::cepheus::GroupPath::Cepheus)
        .unwrap_or(rocast_eval::cepheus::GroupPath::Cepheus);
    t.push_str(&path.line());
    t
}

/// `rocast lab run` of a `peel-transfer` scenario: `rocast bench lab-ud --fabric peel`
/// on the two-tier lab the scenario's topology describes, with `--conformance`, so it
/// prints the lines the simulator's run prints.
fn lab_run_peel(sc: &rocast_sim::Scenario, name: &str) -> Result<String, String> {
    let s = rocast_eval::peel::transfer::spec(sc).map_err(|e| e.to_string())?;
    let a = crate::ud_bench::LabUdArgs {
        hosts: s.hosts,
        medium: "switch".into(),
        loss: s.loss,
        loss_at: "switch".into(),
        messages: s.messages,
        size: s.size,
        mtu: s.mtu,
        rate: format!("{}mbit", (s.gbps * 1000.0).round() as u64),
        group: std::net::Ipv4Addr::from(s.group.0),
        seed: s.seed,
        name: name.to_string(),
        timeout_s: 120,
        fabric: "peel".into(),
        tors: s.tors,
        capture: None,
        loss_host: s.loss_host,
        conformance: true,
        interval_us: None,
        latency_out: None,
        strangers: 0,
        restart_after: None,
        group_key: None,
        group_key_file: None,
        existing_lab: false,
    };
    let header = format!(
        "# peel-transfer: {} x {} B from host 0 to hosts 1..{} through {} ToRs under one \
         aggregation switch, PEEL copies per cover, seed {} (lab, real packets)\n",
        s.messages,
        s.size,
        s.hosts - 1,
        s.tors,
        s.seed
    );
    match crate::ud_bench::lab_ud(&a)? {
        Ok(t) => Ok(header + &t),
        Err(t) => Err(header + &t),
    }
}

pub struct LabBcastArgs {
    pub hosts: Vec<usize>,
    /// Rack switches: 1, the one-switch lab; 2 or more, the two-tier lab (the hosts
    /// split evenly under that many ToRs, all under one aggregation switch).
    pub tors: usize,
    pub sizes: Vec<u64>,
    pub schemes: Vec<String>,
    pub rate: String,
    pub reps: usize,
    pub out: PathBuf,
    pub mpi: bool,
    /// Open MPI broadcast algorithms to force, each its own column.
    pub mpi_algorithms: Vec<u32>,
    /// The switches run `--fast-path`.
    pub fast_path: bool,
    /// OSU's full format: min, max and iterations beside the median.
    pub full: bool,
    /// Print lab-bcast.csv's rows as JSON after the tables.
    pub json: bool,
}

fn exe() -> Result<String, String> {
    std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| e.to_string())
}

fn run_rocast(args: &[&str]) -> Result<String, String> {
    let o = Command::new(exe()?)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!(
            "rocast {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn spawn_on(lab: &str, host: usize, args: &[String]) -> Result<Child, String> {
    let h = format!("h{host}");
    let bin = exe()?;
    let mut a: Vec<&str> = vec!["lab", "exec", "--name", lab, &h, "--", &bin];
    a.extend(args.iter().map(String::as_str));
    Command::new(&bin)
        .args(&a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())
}

/// One group transfer in lab `lab`: `mcast join` on h1..h(n-1) (writing `outs[i-1]`
/// when given), then `mcast lead` on h0 sending `file` with `extra` options. Returns
/// the leader's output; a failed transfer is an error.
/// The messages a member completed, in the order it reported them: `mcast join`'s
/// `received buffer S of …` lines, one buffer per message, S counting from 1 (the
/// simulator numbers messages from 0).
fn buffer_order(join_stdout: &str) -> Vec<u32> {
    join_stdout
        .lines()
        .filter_map(|l| l.strip_prefix("received buffer "))
        .filter_map(|l| l.split(' ').next()?.parse::<u32>().ok())
        .map(|seq| seq.saturating_sub(1))
        .collect()
}

/// The Cepheus counters in a `rocast switch` stats reply (`cepheus NAME VALUE` lines).
fn cepheus_stats_of(reply: &str) -> rocast_core::fabric::cepheus::CepheusStats {
    let mut c = rocast_core::fabric::cepheus::CepheusStats::default();
    for (_, k, v) in rocast_net::switch::stat_counters(reply).filter(|c| c.0 == "cepheus") {
        match k {
            "data_in" => c.data_in = v,
            "replicas" => c.replicas = v,
            "bridged" => c.bridged = v,
            "retransmission_filtered" => c.filtered = v,
            "acks_in" => c.acks_in = v,
            "acks_out" => c.acks_out = v,
            "naks_out" => c.naks_out = v,
            _ => {}
        }
    }
    c
}

/// Runs a group from h0 to h1..h(n-1): the leader's output and each member's (h1.., in
/// order).
fn run_group_outputs(
    lab: &str,
    n: usize,
    file: &Path,
    extra: &[String],
    outs: Option<&[PathBuf]>,
) -> Result<(String, Vec<String>), String> {
    run_group_outputs_within(lab, n, file, extra, outs, 30)
}

/// [`run_group_outputs`] with the group's timeout (`--timeout`, seconds) given.
fn run_group_outputs_within(
    lab: &str,
    n: usize,
    file: &Path,
    extra: &[String],
    outs: Option<&[PathBuf]>,
    timeout_s: u64,
) -> Result<(String, Vec<String>), String> {
    run_group_killing(lab, n, file, extra, outs, timeout_s, None).map(|(t, m, _)| (t, m))
}

/// A fault the shared scenarios inject mid-stream, once the lab's switch has taken in
/// a number of the group's data packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MidStreamFault {
    /// Member `rank`'s process is killed (SIGKILL): the leader's exit 3 (done for the
    /// others, one evicted) is then the expected end.
    KillRank(usize),
    /// The switch daemon crashes and starts again (`lab::restart_switch`).
    RestartSwitch,
}

/// [`run_group_outputs_within`], and with `fault = Some((fault, packets))` that fault
/// once the lab's switch has taken in `packets` data packets; the flag says whether
/// the fault came while the leader still ran (mid-stream).
fn run_group_killing(
    lab: &str,
    n: usize,
    file: &Path,
    extra: &[String],
    outs: Option<&[PathBuf]>,
    timeout_s: u64,
    fault: Option<(MidStreamFault, u64)>,
) -> Result<(String, Vec<String>, bool), String> {
    let timeout = timeout_s.to_string();
    let joins = (1..n)
        .map(|i| {
            let mut args: Vec<String> = ["mcast", "join", "--bind", &host_ip(i), "--leader"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend([host_ip(0), "--timeout".into(), timeout.clone()]);
            if let Some(o) = outs {
                args.extend(["--out".into(), o[i - 1].to_string_lossy().into_owned()]);
            }
            spawn_on(lab, i, &args)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pids: Vec<u32> = joins.iter().map(Child::id).collect();
    // Each member's output is read while it runs: a member printing a line per buffer
    // would otherwise fill its pipe (64 KiB, some 750 lines) and block, and the group
    // with it (measured: `--repeat 1000` stopped at send 754).
    // Each thread returns the member's stdout and stderr.
    let joins: Vec<std::thread::JoinHandle<(String, String)>> = joins
        .into_iter()
        .map(|j| {
            std::thread::spawn(move || {
                j.wait_with_output()
                    .map(|o| {
                        (
                            String::from_utf8_lossy(&o.stdout).into_owned(),
                            String::from_utf8_lossy(&o.stderr).into_owned(),
                        )
                    })
                    .unwrap_or_default()
            })
        })
        .collect();
    let mut args: Vec<String> = [
        "mcast",
        "lead",
        "--bind",
        &host_ip(0),
        "--members",
        &(n - 1).to_string(),
        "--file",
        &file.to_string_lossy(),
        "--timeout",
        &timeout,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend_from_slice(extra);
    let mut leader = spawn_on(lab, 0, &args)?;
    let mut mid_stream = false;
    if let Some((fault, packets)) = fault {
        let socket = rocast_net::lab::switch_socket(lab);
        let end = std::time::Instant::now() + std::time::Duration::from_secs(timeout_s);
        loop {
            let data_in = rocast_net::switch::query(&socket, "stats")
                .map(|r| cepheus_stats_of(&r).data_in)
                .unwrap_or(0);
            let done = leader.try_wait().map_err(|e| e.to_string())?.is_some();
            if data_in >= packets || done || std::time::Instant::now() > end {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        mid_stream = leader.try_wait().map_err(|e| e.to_string())?.is_none();
        match fault {
            // `lab exec` and `ip netns exec` exec in place: the pid is the member's.
            MidStreamFault::KillRank(rank) => {
                if let Some(pid) = rustix::process::Pid::from_raw(pids[rank - 1] as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            MidStreamFault::RestartSwitch => {
                if let Err(e) = rocast_net::lab::restart_switch(lab, &[]) {
                    let _ = leader.kill();
                    return Err(format!("restart the switch: {e}"));
                }
            }
        }
    }
    let lead = leader.wait_with_output().map_err(|e| e.to_string())?;
    let (members, member_stderr): (Vec<String>, Vec<String>) = joins
        .into_iter()
        .map(|j| j.join().unwrap_or_default())
        .unzip();
    let text = String::from_utf8_lossy(&lead.stdout).into_owned();
    let evicted_end =
        matches!(fault, Some((MidStreamFault::KillRank(_), _))) && lead.status.code() == Some(3);
    if !lead.status.success() && !evicted_end {
        // The leader names a failed member; the member's own words say why.
        // (`mcast join` prints its failure on stdout, diagnostics on stderr.)
        let said: String = members
            .iter()
            .zip(&member_stderr)
            .enumerate()
            .flat_map(|(i, (out, err))| {
                out.lines()
                    .filter(|l| l.contains("failed") || l.starts_with("evicted"))
                    .chain(err.lines())
                    .map(move |l| format!("  {} said: {}\n", host_ip(i + 1), l.trim()))
            })
            .collect();
        return Err(format!(
            "{extra:?}: {text}{}{said}",
            String::from_utf8_lossy(&lead.stderr)
        ));
    }
    Ok((text, members, mid_stream))
}

fn host_ip(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}

/// `reps` sends of `file` from h0 to h1..h(n-1) by `scheme` in one group; the median
/// latency in µs.
fn one_run(
    n: usize,
    file: &Path,
    size: u64,
    scheme: &str,
    reps: usize,
    rate_mbps: u64,
) -> Result<Point, String> {
    // Overlay blocks: an eighth of the message, 16 KB to 1 MB (RDMC's default is 1 MB).
    let block = (size / 8).clamp(16 << 10, 1 << 20);
    let extra: Vec<String> = if scheme == "cepheus" {
        Vec::new()
    } else {
        vec![
            "--overlay".into(),
            scheme.into(),
            "--block".into(),
            block.to_string(),
        ]
    };
    transfer_latency(n, file, &extra, reps, rate_mbps)
}

/// A fresh lab `name` of `hosts` hosts on `rocast switch` (leftovers of an earlier run
/// removed first), its links shaped at `rate`, the switch in its fast path if asked;
/// `extra` goes to `lab up` as is.
fn fresh_switch_lab(
    name: &str,
    hosts: usize,
    rate: &str,
    fast_path: bool,
    extra: &[&str],
) -> Result<(), String> {
    run_rocast(&["lab", "down", "--name", name])?;
    let hs = hosts.to_string();
    let mut up = vec![
        "lab", "up", "--name", name, "--hosts", &hs, "--switch", "--rate", rate,
    ];
    up.extend_from_slice(extra);
    if fast_path {
        up.push("--fast-path");
    }
    run_rocast(&up).map(|_| ())
}

/// The lab's link rate (`--rate`, bits per second) in Mbit/s: what every sender's pacer is
/// set to, as an RNIC paces at its line rate.
fn rate_mbps(rate: &str) -> Result<u64, String> {
    let bps = rocast_net::lab::parse_rate(rate).map_err(|e| e.to_string())?;
    Ok((bps / 1_000_000).max(1))
}

/// The machine's busy CPU time so far (every CPU's time not idle or waiting on I/O,
/// `/proc/stat`), in seconds: every process of the lab and the kernel's softirq work
/// on their packets, which no one process is charged with.
fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let busy: u64 = v
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
    busy as f64 / hz
}

/// One scheme's point: the median latency (µs), the machine's CPU-seconds over the
/// whole run (the group's set-up included) per gigabyte delivered to members, and the
/// median CPU per packet the leader and the members report (their threads' user+sys,
/// as `rocast perf` reports it).
struct Point {
    latency_us: f64,
    /// The fastest and slowest of the reps (OSU's -f; the plot's error bars).
    latency_min_us: f64,
    latency_max_us: f64,
    cpu_s_per_gb: f64,
    leader_us_per_packet: Option<f64>,
    member_us_per_packet: Option<f64>,
}

/// A summary table's title line and its header up to the schemes' columns.
fn table_head(text: &mut String, title: &str, schemes: &[String], width: usize) {
    let _ = write!(text, "{title}\n{:>10}", "size");
    for s in schemes {
        let _ = write!(text, " {s:>width$}");
    }
}

/// CPU per packet (µs) of a group's leader and its median member.
type LeaderMember = (Option<f64>, Option<f64>);

/// Every "(X us per packet)" in a `mcast` output, in order.
fn us_per_packet(text: &str) -> Vec<f64> {
    text.match_indices(" us per packet)")
        .filter_map(|(at, _)| {
            let head = &text[..at];
            let open = head.rfind('(')?;
            head[open + 1..].trim().parse().ok()
        })
        .collect()
}

/// Runs `mcast lead` (with `extra` options) from h0 to h1..h(n-1), sending `reps`
/// times in one group (registration once, as an application would).
fn transfer_latency(
    n: usize,
    file: &Path,
    extra: &[String],
    reps: usize,
    rate_mbps: u64,
) -> Result<Point, String> {
    let mut extra = extra.to_vec();
    extra.extend([
        "--repeat".to_string(),
        reps.to_string(),
        "--rate-mbps".to_string(),
        rate_mbps.to_string(),
    ]);
    let busy_before = machine_busy_s();
    let (text, members) = run_group_outputs(LAB, n, file, &extra, None)?;
    let cpu_s = machine_busy_s() - busy_before;
    // "summary: N sends, latency median X us, min Y us, max Z us"
    let field = |key: &str| -> Option<f64> {
        let at = text.find(key)? + key.len();
        text[at..].split_whitespace().next()?.parse::<f64>().ok()
    };
    let (latency_us, latency_min_us, latency_max_us) = match (
        field("latency median "),
        field(" us, min "),
        field(" us, max "),
    ) {
        (Some(m), Some(lo), Some(hi)) => (m, lo, hi),
        _ => return Err(format!("no latency summary in {text:?}")),
    };
    let bytes = std::fs::metadata(file).map_err(|e| e.to_string())?.len();
    let delivered_gb = (bytes * (n as u64 - 1) * reps as u64) as f64 / 1e9;
    Ok(Point {
        latency_us,
        latency_min_us,
        latency_max_us,
        cpu_s_per_gb: cpu_s / delivered_gb.max(1e-12),
        leader_us_per_packet: median(us_per_packet(&text)),
        member_us_per_packet: median(members.iter().flat_map(|m| us_per_packet(m)).collect()),
    })
}

/// `rocast perf` in the same lab, the hosts' anchor: h0 WRITEs 64 × 1 MiB to h1
/// (one unicast receiver), paced at the link rate like every `mcast` sender.
struct PerfAnchor {
    client_us: f64,
    server_us: f64,
    cpu_s_per_gb: f64,
}

fn perf_anchor(rate_mbps: u64) -> Result<PerfAnchor, String> {
    const ITERS: u64 = 64;
    let server = spawn_on(
        LAB,
        1,
        &["perf", "server", "--bind", &host_ip(1), "--timeout", "30"].map(String::from),
    )?;
    // The server listens once its sockets are bound; the client retries for a while.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let busy_before = machine_busy_s();
    let client = spawn_on(
        LAB,
        0,
        &[
            "perf",
            "client",
            &host_ip(1),
            "--bind",
            &host_ip(0),
            "-s",
            "1048576",
            "-n",
            &ITERS.to_string(),
            "--op",
            "write",
            "--rate-mbps",
            &rate_mbps.to_string(),
        ]
        .map(|s| s.to_string()),
    )?
    .wait_with_output()
    .map_err(|e| e.to_string())?;
    let cpu_s = machine_busy_s() - busy_before;
    let _ = server.wait_with_output();
    let text = String::from_utf8_lossy(&client.stdout).into_owned();
    // " CPU per packet  : client 8968 ns, server 9607 ns (...)"
    let ns = |who: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.contains("CPU per packet"))?;
        let at = line.find(who)? + who.len();
        line[at..].split_whitespace().next()?.parse::<f64>().ok()
    };
    match (client.status.success(), ns("client "), ns("server ")) {
        (true, Some(c), Some(s)) => Ok(PerfAnchor {
            client_us: c / 1e3,
            server_us: s / 1e3,
            cpu_s_per_gb: cpu_s / (ITERS as f64 * 1048576.0 / 1e9),
        }),
        _ => Err(format!(
            "rocast perf in the lab: {text}{}",
            String::from_utf8_lossy(&client.stderr)
        )),
    }
}

/// Seeded bytes (the content does not matter for timing; members verify it anyway).
fn payload(len: u64) -> Vec<u8> {
    rocast_core::payload::message_data(0x2545_f491, 0, len as usize)
}

/// One size of Open MPI's MPI_Bcast (`python/mpi_bcast.py`): the median time from the
/// root's call until the last rank held the message (rocast's latency), and
/// osu_bcast's average time per call over the ranks.
struct MpiPoint {
    size: u64,
    latency_us: f64,
    osu_us: f64,
}

/// Open MPI 4.1's `coll_tuned` broadcast algorithms by number (`ompi_info --all`).
pub const MPI_BCAST_ALGORITHMS: [(u32, &str); 9] = [
    (1, "basic_linear"),
    (2, "chain"),
    (3, "pipeline"),
    (4, "split_binary_tree"),
    (5, "binary_tree"),
    (6, "binomial"),
    (7, "knomial"),
    (8, "scatter_allgather"),
    (9, "scatter_allgather_ring"),
];

/// The segment size given to a forced algorithm (rocast's assumption: 128 KiB, the
/// order of Open MPI's own choices for large messages; the default decision picks
/// its own).
const MPI_SEGMENT: u64 = 128 << 10;

/// Open MPI's MPI_Bcast over TCP between the lab's namespaces: mpirun in h0, its
/// daemons started in the other namespaces by an rsh agent that enters them (the
/// namespaces share the hostname, so ORTE's routing tree is told to route directly).
/// `algorithm`: force one of [`MPI_BCAST_ALGORITHMS`]; `None`: Open MPI's decision.
///
/// The ranks yield when idle (`mpi_yield_when_idle`): each rank is alone on its
/// "node", so Open MPI would busy-poll, and 4 to 8 polling ranks on this machine's 2
/// cores starve one another (64 B: 7.9 ms with polling, 173 µs yielding, 4 hosts).
fn mpi_run(
    n: usize,
    sizes: &[u64],
    out: &Path,
    algorithm: Option<u32>,
) -> Result<Vec<MpiPoint>, String> {
    let repo = crate::plot::resource_root().map_err(|e| e.to_string())?;
    let script = repo.join("python/mpi_bcast.py");
    let python = repo.join(".venv/bin/python");
    if !script.exists() || !python.exists() {
        return Err(format!(
            "needs {} and {} (bash scripts/install-deps.sh)",
            script.display(),
            python.display()
        ));
    }
    // Open MPI starts each host's daemon through the lab's agent (it enters the host's
    // namespace, with a session directory of its own).
    let agent = repo.join("scripts/lab-rsh-agent.sh");
    let hostfile = out.join("lab-hosts.txt");
    let hosts: String = (0..n)
        .map(|i| format!("{} slots=1\n", host_ip(i)))
        .collect();
    std::fs::write(&hostfile, hosts).map_err(|e| e.to_string())?;
    let mut a: Vec<String> = vec![
        "h0".into(),
        "--".into(),
        "env".into(),
        "OMPI_ALLOW_RUN_AS_ROOT=1".into(),
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1".into(),
        format!("ROCAST_LAB_NAME={LAB}"),
        "mpirun".into(),
        "-np".into(),
        n.to_string(),
        "--hostfile".into(),
        hostfile.to_string_lossy().into_owned(),
        "--mca".into(),
        "plm_rsh_agent".into(),
        agent.to_string_lossy().into_owned(),
        "--mca".into(),
        "btl".into(),
        "tcp,self".into(),
        "--mca".into(),
        "btl_tcp_if_include".into(),
        "eth0".into(),
        "--mca".into(),
        "oob_tcp_if_include".into(),
        "eth0".into(),
        "--mca".into(),
        "routed".into(),
        "direct".into(),
        "--mca".into(),
        "mpi_yield_when_idle".into(),
        "1".into(),
        // Eight orteds on one machine race writing hwloc's shared topology (an orted
        // segfaulted in hwloc_shmem_topology_write, measured): that module is off.
        "--mca".into(),
        "rtc".into(),
        "^hwloc".into(),
    ];
    if let Some(alg) = algorithm {
        for (k, v) in [
            ("coll_tuned_use_dynamic_rules", "1".to_string()),
            ("coll_tuned_bcast_algorithm", alg.to_string()),
            (
                "coll_tuned_bcast_algorithm_segmentsize",
                MPI_SEGMENT.to_string(),
            ),
        ] {
            a.extend(["--mca".into(), k.into(), v]);
        }
    }
    a.extend([
        python.to_string_lossy().into_owned(),
        script.to_string_lossy().into_owned(),
    ]);
    a.extend(sizes.iter().map(|s| s.to_string()));
    let mut full = vec![
        "lab".to_string(),
        "exec".into(),
        "--name".into(),
        LAB.into(),
    ];
    full.extend(a);
    // Starting eight daemons in eight namespaces at once fails now and then (a daemon
    // that cannot connect back in time): a failed launch is retried, twice at most,
    // and said so on stderr.
    let mut attempt = 0;
    let o = loop {
        attempt += 1;
        let o = Command::new(exe()?)
            .args(&full)
            .output()
            .map_err(|e| e.to_string())?;
        if o.status.success() || attempt == 3 {
            break o;
        }
        eprintln!("lab-bcast: mpirun failed (attempt {attempt} of 3), retrying");
    };
    // The daemons' session directories (the agent's): nothing of the run stays in /tmp.
    for i in 1..=n {
        let _ = std::fs::remove_dir_all(format!("/tmp/rocast-ompi-h{i}"));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        return Err(format!(
            "mpirun failed: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [s, lat, osu] => Some(MpiPoint {
                    size: s.parse().ok()?,
                    latency_us: lat.parse().ok()?,
                    osu_us: osu.parse().ok()?,
                }),
                _ => None,
            }
        })
        .collect())
}

pub fn lab_bcast(a: &LabBcastArgs) -> Result<(), String> {
    crate::ud_bench::require_root("lab-bcast")?;
    if a.reps == 0 || a.hosts.iter().any(|&n| !(2..=64).contains(&n)) {
        return Err("--reps must be positive and --hosts between 2 and 64".into());
    }
    let mbps = rate_mbps(&a.rate)?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let mut csv = String::from(
        "hosts,size,scheme,latency_us,goodput_gbps,cpu_s_per_gb,leader_us_per_packet,member_us_per_packet,latency_min_us,latency_max_us,reps\n",
    );
    let mut text = String::new();
    for &n in &a.hosts {
        let tors = a.tors.to_string();
        let shape = if a.tors > 1 {
            format!("{n} hosts under {} ToRs", a.tors)
        } else {
            format!("{n} hosts")
        };
        fresh_switch_lab(LAB, n, &a.rate, a.fast_path, &["--tors", &tors])?;
        let result = (|| -> Result<(), String> {
            let mut rows: Vec<(u64, Vec<f64>)> = Vec::new();
            // Per size, per scheme: (min, max) over the reps.
            let mut spreads: Vec<Vec<(f64, f64)>> = Vec::new();
            let mut cpu_rows: Vec<(u64, Vec<f64>)> = Vec::new();
            let mut per_packet: Vec<(u64, Vec<LeaderMember>)> = Vec::new();
            let anchor = perf_anchor(mbps);
            for &size in &a.sizes {
                let file = a.out.join(format!("payload-{size}.bin"));
                std::fs::write(&file, payload(size)).map_err(|e| e.to_string())?;
                let mut lat = Vec::new();
                let mut spread = Vec::new();
                let mut cpu = Vec::new();
                let mut pkt = Vec::new();
                for scheme in &a.schemes {
                    let p = one_run(n, &file, size, scheme, a.reps, mbps)?;
                    let us = p.latency_us;
                    let gbps = size as f64 * 8.0 / (us * 1e3);
                    let opt = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_default();
                    let _ = writeln!(
                        csv,
                        "{n},{size},{scheme},{us:.1},{gbps:.4},{:.3},{},{},{:.1},{:.1},{}",
                        p.cpu_s_per_gb,
                        opt(p.leader_us_per_packet),
                        opt(p.member_us_per_packet),
                        p.latency_min_us,
                        p.latency_max_us,
                        a.reps
                    );
                    spread.push((p.latency_min_us, p.latency_max_us));
                    lat.push(us);
                    cpu.push(p.cpu_s_per_gb);
                    pkt.push((p.leader_us_per_packet, p.member_us_per_packet));
                }
                let _ = std::fs::remove_file(&file);
                eprintln!("lab-bcast: {n} hosts, {size} B done");
                rows.push((size, lat));
                spreads.push(spread);
                cpu_rows.push((size, cpu));
                per_packet.push((size, pkt));
            }
            // Open MPI: its own decision, then each forced algorithm asked for.
            let mut mpi: Vec<(String, Vec<MpiPoint>)> = Vec::new();
            let variants: Vec<(String, Option<u32>)> = if a.mpi || !a.mpi_algorithms.is_empty() {
                std::iter::once(("open-mpi".to_string(), None))
                    .chain(a.mpi_algorithms.iter().map(|&alg| {
                        let name = MPI_BCAST_ALGORITHMS
                            .iter()
                            .find(|x| x.0 == alg)
                            .map_or("?", |x| x.1);
                        (format!("ompi-{name}"), Some(alg))
                    }))
                    .collect()
            } else {
                Vec::new()
            };
            for (name, alg) in variants {
                match mpi_run(n, &a.sizes, &a.out, alg) {
                    Ok(v) => mpi.push((name.clone(), v)),
                    Err(e) => {
                        let _ = writeln!(text, "# {name}: not measured: {e}");
                    }
                }
                eprintln!("lab-bcast: {n} hosts, {name} done");
            }
            // OSU-style tables, one per scheme.
            for (k, scheme) in a.schemes.iter().enumerate() {
                let _ = writeln!(
                    text,
                    "# OSU MPI Broadcast Latency Test (rocast lab, real packets): {scheme}, {shape}, links {}\n# Size       Avg Latency(us){}",
                    a.rate,
                    if a.full {
                        "   Min Latency(us)   Max Latency(us)  Iterations"
                    } else {
                        ""
                    }
                );
                for ((size, lat), sp) in rows.iter().zip(&spreads) {
                    if a.full {
                        // "Avg" is the median of the reps, as without -f; min and max
                        // over the reps (each rep: until the last member held it).
                        let _ = writeln!(
                            text,
                            "{size:<12}{:>16.2}{:>18.2}{:>18.2}{:>12}",
                            lat[k], sp[k].0, sp[k].1, a.reps
                        );
                    } else {
                        let _ = writeln!(text, "{size:<12}{:>16.2}", lat[k]);
                    }
                }
                let _ = writeln!(text);
            }
            for (name, m) in &mpi {
                let _ = writeln!(
                    text,
                    "# OSU MPI Broadcast Latency Test ({name}: Open MPI MPI_Bcast, TCP BTL): {shape}, links {}\n# (first: root's call until the last rank holds the data, median, as for the schemes above; second: osu_bcast's average per call over ranks)\n# Size       Avg Latency(us)   OSU Avg Latency(us)",
                    a.rate
                );
                for p in m {
                    let (size, us) = (p.size, p.latency_us);
                    let _ = writeln!(text, "{size:<12}{us:>16.2}{:>22.2}", p.osu_us);
                    let gbps = size as f64 * 8.0 / (us * 1e3);
                    let _ = writeln!(csv, "{n},{size},{name},{us:.1},{gbps:.4},,,,,,");
                }
                let _ = writeln!(text);
            }
            // Summary: goodput and Cepheus against the best overlay.
            table_head(
                &mut text,
                &format!("# {shape}: goodput (Gbit/s)"),
                &a.schemes,
                10,
            );
            for (name, _) in &mpi {
                let _ = write!(text, " {name:>10}");
            }
            let _ = writeln!(text, " {:>14}", "best/cepheus");
            for (size, lat) in &rows {
                let _ = write!(text, "{size:>10}");
                for us in lat {
                    let _ = write!(text, " {:>10.3}", *size as f64 * 8.0 / (us * 1e3));
                }
                let mpi_us: Vec<f64> = mpi
                    .iter()
                    .filter_map(|(_, m)| {
                        let us = m.iter().find(|x| x.size == *size).map(|x| x.latency_us);
                        let _ = match us {
                            Some(us) => write!(text, " {:>10.3}", *size as f64 * 8.0 / (us * 1e3)),
                            None => write!(text, " {:>10}", "-"),
                        };
                        us
                    })
                    .collect();
                let cep = a
                    .schemes
                    .iter()
                    .position(|s| s == "cepheus")
                    .map(|i| lat[i]);
                let best = a
                    .schemes
                    .iter()
                    .zip(lat)
                    .filter(|(s, _)| *s != "cepheus")
                    .map(|(_, &l)| l)
                    .chain(mpi_us)
                    .fold(f64::INFINITY, f64::min);
                match cep {
                    Some(c) if best.is_finite() => {
                        let _ = writeln!(text, " {:>14.2}", best / c);
                    }
                    _ => {
                        let _ = writeln!(text, " {:>14}", "-");
                    }
                }
            }
            let _ = writeln!(
                text,
                "best/cepheus: the fastest other scheme's latency over Cepheus' (above 1: Cepheus is faster)\n"
            );
            // CPU: the machine's busy CPU-seconds per gigabyte the members received.
            table_head(
                &mut text,
                &format!("# {shape}: CPU-seconds per delivered GB (all processes and the kernel)"),
                &a.schemes,
                10,
            );
            let _ = writeln!(text, " {:>14}", "cepheus/chain");
            for (size, cpu) in &cpu_rows {
                let _ = write!(text, "{size:>10}");
                for c in cpu {
                    let _ = write!(text, " {c:>10.2}");
                }
                let at = |name: &str| a.schemes.iter().position(|s| s == name).map(|i| cpu[i]);
                match (at("cepheus"), at("chain")) {
                    (Some(c), Some(ch)) if ch > 0.0 => {
                        let _ = writeln!(text, " {:>14.2}", c / ch);
                    }
                    _ => {
                        let _ = writeln!(text, " {:>14}", "-");
                    }
                }
            }
            let _ = writeln!(
                text,
                "(the whole `mcast lead` run, group set-up included, over --reps sends; goal: cepheus/chain <= 0.5)"
            );
            match &anchor {
                Ok(p) => {
                    let _ = writeln!(
                        text,
                        "rocast perf h0 -> h1 in this lab (one unicast receiver, 64 x 1 MiB WRITE at the link rate): {:.2} CPU-s per delivered GB\n",
                        p.cpu_s_per_gb
                    );
                }
                Err(e) => {
                    let _ = writeln!(text, "rocast perf in this lab: not measured: {e}\n");
                }
            }
            // Goal 2: each host's CPU per packet against `rocast perf`'s in this lab.
            table_head(
                &mut text,
                &format!("# {shape}: CPU per packet (us, thread user+sys): leader / median member"),
                &a.schemes,
                15,
            );
            let _ = writeln!(text);
            for (size, pkt) in &per_packet {
                let _ = write!(text, "{size:>10}");
                for (l, m) in pkt {
                    let f = |v: &Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or("-".into());
                    let _ = write!(text, " {:>15}", format!("{} / {}", f(l), f(m)));
                }
                let _ = writeln!(text);
            }
            match &anchor {
                Ok(p) => {
                    let _ = writeln!(
                        text,
                        "rocast perf in this lab: client {:.1} / server {:.1} us per packet (goal: hosts <= perf). A thread is also charged the kernel's work it sets off: with --fast-path the leader's sends carry the switch's copies through tc and the veths.\n",
                        p.client_us, p.server_us
                    );
                }
                Err(_) => {
                    let _ = writeln!(text);
                }
            }
            Ok(())
        })();
        run_rocast(&["lab", "down", "--name", LAB])?;
        result?;
    }
    // With --json, stdout is the JSON alone; the tables go to stderr (and the file).
    let say = |s: &str| {
        if a.json {
            eprint!("{s}");
        } else {
            print!("{s}");
        }
    };
    say(&text);
    std::fs::write(a.out.join("lab-bcast.txt"), &text).map_err(|e| e.to_string())?;
    let csv_path = a.out.join("lab-bcast.csv");
    std::fs::write(&csv_path, &csv).map_err(|e| e.to_string())?;
    let png = a.out.join("lab-bcast.png");
    crate::plot::run_plot(
        "lab_bcast",
        &csv_path,
        &png,
        &format!("broadcast on real packets, links {}", a.rate),
    )
    .map_err(|e| format!("plot: {e}"))?;
    say(&format!(
        "plot: {}\noutputs in {}\n",
        png.display(),
        a.out.display()
    ));
    if a.json {
        print!(
            "{}",
            crate::output::pretty(&crate::output::csv_to_json(&csv)?)
        );
    }
    Ok(())
}

/// The 3-replica write benchmark (Cepheus Table I's analogue): `ios` messages of
/// `io_bytes` from h0 — to one replica by RC unicast, to three by three unicasts (the
/// overlay's sequential scheme: the source sends each message to each replica), and to
/// three by Cepheus multicast through the switch. Prints IOPS per case and the ratio
/// of multicast to 1-unicast.
#[allow(clippy::too_many_arguments)]
pub fn lab_iops(
    rate: &str,
    io_bytes: u64,
    ios: u64,
    depth: u8,
    reps: usize,
    out: &Path,
    json: bool,
) -> Result<(), String> {
    crate::ud_bench::require_root("lab-iops")?;
    if io_bytes == 0 || ios == 0 || reps == 0 {
        return Err("--io, --ios and --reps must be positive".into());
    }
    let mbps = rate_mbps(rate)?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let file = out.join("iops-payload.bin");
    std::fs::write(&file, payload(io_bytes * ios)).map_err(|e| e.to_string())?;
    run_rocast(&["lab", "down", "--name", LAB])?;
    run_rocast(&[
        "lab", "up", "--name", LAB, "--hosts", "4", "--switch", "--rate", rate,
    ])?;
    let io = io_bytes.to_string();
    let d = depth.to_string();
    let unicast: Vec<String> = ["--overlay", "sequential", "--block", &io, "--window", &d]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let multicast: Vec<String> = ["--message", &io, "--op", "write"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cases: [(&str, usize, &Vec<String>); 3] = [
        ("1-unicast", 2, &unicast),
        ("3-unicasts", 4, &unicast),
        ("multicast", 4, &multicast),
    ];
    let mut csv = String::from("case,replicas,io_bytes,ios,iops,latency_ms,reps\n");
    let result = (|| -> Result<String, String> {
        let mut text = format!(
            "# 3-replica writes of {io_bytes} B x {ios} from h0, links {rate} (Cepheus Table I analogue)\n{:<12} {:>10} {:>12}\n",
            "case", "IOPS", "latency ms"
        );
        let mut iops = Vec::new();
        for (name, n, extra) in cases {
            let us = transfer_latency(n, &file, extra, reps, mbps)?.latency_us;
            let rate = ios as f64 / (us / 1e6);
            iops.push(rate);
            text.push_str(&format!("{name:<12} {rate:>10.0} {:>12.2}\n", us / 1e3));
            let _ = writeln!(
                csv,
                "{name},{},{io_bytes},{ios},{rate:.0},{:.3},{reps}",
                n - 1,
                us / 1e3
            );
        }
        text.push_str(&format!(
            "multicast / 1-unicast = {:.2}; multicast / 3-unicasts = {:.2}\n\
             (unicast cases: {depth} writes in flight per connection; multicast: the QP's \
             256-packet window)\n",
            iops[2] / iops[0],
            iops[2] / iops[1]
        ));
        Ok(text)
    })();
    run_rocast(&["lab", "down", "--name", LAB])?;
    let _ = std::fs::remove_file(&file);
    let text = result?;
    std::fs::write(out.join("lab-iops.txt"), &text).map_err(|e| e.to_string())?;
    std::fs::write(out.join("lab-iops.csv"), &csv).map_err(|e| e.to_string())?;
    let j = json.then(|| crate::output::csv_to_json(&csv)).transpose()?;
    crate::output::print_table_or_json(&text, j.as_ref());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_labs_rate_is_what_every_pacer_gets() {
        assert_eq!(rate_mbps("10gbit").unwrap(), 10_000);
        assert_eq!(rate_mbps("1gbit").unwrap(), 1_000);
        assert_eq!(rate_mbps("500mbit").unwrap(), 500);
        assert!(rate_mbps("fast").is_err());
    }
}

/// `rocast bench lab-latency`: one-way latency distributions on
/// real packets in the namespace lab, every host on the machine's one clock.
pub struct LabLatencyArgs {
    /// Receivers per group (the lab has one more host, the sender).
    pub receivers: Vec<usize>,
    pub sizes: Vec<u64>,
    /// Messages per (group, size, scheme).
    pub samples: usize,
    /// UD multicast's pacing: one message per this many microseconds.
    pub interval_us: u64,
    pub rate: String,
    pub fast_path: bool,
    /// Print lab-latency.csv's rows as JSON after the table.
    pub json: bool,
    pub out: PathBuf,
}

/// Every per-send latency (ns) in a `mcast lead` output (its "latency X us" fields).
fn send_latencies_ns(text: &str) -> Vec<u64> {
    text.lines()
        .filter(|l| l.starts_with("multicast "))
        .filter_map(|l| {
            let at = l.find(", latency ")? + ", latency ".len();
            let us: f64 = l[at..].split_whitespace().next()?.parse().ok()?;
            Some((us * 1e3).round() as u64)
        })
        .collect()
}

/// The four figures a `percentiles_us` line holds: (samples, p50, p99, p99.9, max).
fn parse_percentiles(line: &str) -> Option<(usize, [f64; 4])> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let get = |k: &str| -> Option<f64> {
        let i = f.iter().position(|w| *w == k)?;
        f.get(i + 1)?.parse().ok()
    };
    Some((
        get("samples")? as usize,
        [get("p50")?, get("p99")?, get("p99.9")?, get("max")?],
    ))
}

pub fn lab_latency(a: &LabLatencyArgs) -> Result<(), String> {
    crate::ud_bench::require_root("lab-latency")?;
    if a.samples == 0 || a.receivers.iter().any(|&n| !(1..=63).contains(&n)) {
        return Err("--samples must be positive and --receivers between 1 and 63".into());
    }
    if a.sizes.iter().any(|&s| s < 8) {
        return Err("--sizes: UD messages carry an 8-byte timestamp, so 8 bytes or more".into());
    }
    let mbps = rate_mbps(&a.rate)?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    // (receivers, size, scheme, samples, [p50, p99, p99.9, max] in µs)
    let mut rows: Vec<(usize, u64, String, usize, [f64; 4])> = Vec::new();
    for &n in &a.receivers {
        let hosts = n + 1;
        // Cepheus and the binomial tree over RC: `mcast lead --repeat`, each send's
        // latency from the first post until the last member held it.
        fresh_switch_lab(LAB, hosts, &a.rate, a.fast_path, &[])?;
        let hs = hosts.to_string();
        let rc = (|| -> Result<(), String> {
            for &size in &a.sizes {
                let file = a.out.join(format!("payload-{size}.bin"));
                std::fs::write(&file, payload(size)).map_err(|e| e.to_string())?;
                for scheme in ["cepheus", "tree"] {
                    let mut extra: Vec<String> = vec![
                        "--repeat".into(),
                        a.samples.to_string(),
                        "--rate-mbps".into(),
                        mbps.to_string(),
                    ];
                    if scheme == "tree" {
                        extra.extend([
                            "--overlay".into(),
                            "tree".into(),
                            "--block".into(),
                            size.to_string(),
                        ]);
                    }
                    // A send with its confirmations takes some 40 ms here: room for all.
                    let timeout = 30 + a.samples as u64 / 10;
                    let (text, _) =
                        run_group_outputs_within(LAB, hosts, &file, &extra, None, timeout)?;
                    let v = send_latencies_ns(&text);
                    let line = crate::ud_bench::percentiles_us(v);
                    let (k, p) =
                        parse_percentiles(&line).ok_or_else(|| format!("{scheme}: {line}"))?;
                    rows.push((n, size, scheme.to_string(), k, p));
                    eprintln!("lab-latency: {n} receivers, {size} B, {scheme}: {line}");
                }
                let _ = std::fs::remove_file(&file);
            }
            Ok(())
        })();
        run_rocast(&["lab", "down", "--name", LAB])?;
        rc?;
        // UD multicast with the NACK protocol: `bench lab-ud` in latency mode (its own
        // lab, same switch and links), no injected loss.
        for &size in &a.sizes {
            let mut args: Vec<String> = [
                "bench", "lab-ud", "--name", LAB, "--medium", "switch", "--hosts", &hs, "--loss",
                "0", "--rate", &a.rate, "--mtu", "4096",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend([
                "--messages".into(),
                a.samples.to_string(),
                "--size".into(),
                size.to_string(),
                "--interval-us".into(),
                a.interval_us.to_string(),
            ]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let text = run_rocast(&args)?;
            let line = text
                .lines()
                .find(|l| l.starts_with("latency one-way until the last receiver"))
                .ok_or_else(|| format!("lab-ud printed no latency: {text}"))?;
            let (k, p) = parse_percentiles(line).ok_or_else(|| format!("ud: {line}"))?;
            rows.push((n, size, "ud-multicast".into(), k, p));
            eprintln!("lab-latency: {n} receivers, {size} B, ud-multicast: {line}");
        }
    }
    let mut text = format!(
        "# One-way latency on real packets (rocast lab, links {}{}): from the sender's post\n\
         # (UD: the message queued to the protocol) until the LAST receiver held the message,\n\
         # every host on the machine's one CLOCK_MONOTONIC; {} messages per row; UD paced at\n\
         # one message per {} us, Cepheus and the tree send by `mcast lead --repeat` (one\n\
         # buffer after the other, each confirmed).\n",
        a.rate,
        if a.fast_path {
            ", switch --fast-path"
        } else {
            ""
        },
        a.samples,
        a.interval_us
    );
    let _ = writeln!(
        text,
        "{:>9} {:>6} {:>13} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "receivers", "size", "scheme", "samples", "p50_us", "p99_us", "p99.9_us", "max_us"
    );
    let mut csv = String::from("receivers,size,scheme,samples,p50_us,p99_us,p999_us,max_us\n");
    for (n, size, scheme, k, p) in &rows {
        let _ = writeln!(
            text,
            "{n:>9} {size:>6} {scheme:>13} {k:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            p[0], p[1], p[2], p[3]
        );
        let _ = writeln!(
            csv,
            "{n},{size},{scheme},{k},{:.1},{:.1},{:.1},{:.1}",
            p[0], p[1], p[2], p[3]
        );
    }
    std::fs::write(a.out.join("lab-latency.csv"), &csv).map_err(|e| e.to_string())?;
    std::fs::write(a.out.join("lab-latency.txt"), &text).map_err(|e| e.to_string())?;
    let j = a
        .json
        .then(|| crate::output::csv_to_json(&csv))
        .transpose()?;
    crate::output::print_table_or_json(&text, j.as_ref());
    Ok(())
}

#[cfg(test)]
mod latency_tests {
    use super::*;

    #[test]
    fn send_latencies_and_percentile_lines_parse() {
        let lead = "multicast 64 bytes (crc32 1) via cepheus to 2 members: registration 1.0 ms, transfer 0.1 ms, latency 99.5 us, - Gbit/s goodput\n  member 10.77.0.2: ok\nmulticast 64 bytes (crc32 1) via cepheus to 2 members: registration 1.0 ms, transfer 0.1 ms, latency - us, -\n";
        assert_eq!(send_latencies_ns(lead), vec![99_500]);
        let line = crate::ud_bench::percentiles_us((1..=1000).map(|x| x * 1000).collect());
        assert_eq!(
            line,
            "samples 1000 p50 500.0 p99 990.0 p99.9 999.0 max 1000.0 us"
        );
        assert_eq!(
            parse_percentiles(&line),
            Some((1000, [500.0, 990.0, 999.0, 1000.0]))
        );
        assert_eq!(crate::ud_bench::percentiles_us(Vec::new()), "samples 0");
    }
}

/// `rocast perf --mcast N`: what the command was asked.
pub struct PerfMcastArgs {
    pub receivers: u32,
    pub size: u64,
    pub iters: u64,
    pub rate: String,
    pub fast_path: bool,
    pub json: bool,
}

/// The lab of `rocast perf --mcast` (its own, so that it never meets a bench's).
const PERF_LAB: &str = "perfmc";

/// One receiver's figures over the run.
#[derive(serde::Serialize)]
struct ReceiverFigures {
    receiver: String,
    messages: usize,
    /// From the sender's first post until this receiver held the message, µs.
    latency_median_us: f64,
    latency_p99_us: f64,
    latency_max_us: f64,
    /// Message bits over the median latency.
    goodput_gbps: f64,
}

#[derive(serde::Serialize)]
struct PerfMcastJson {
    tool: &'static str,
    test: &'static str,
    receivers: u32,
    bytes: u64,
    iterations: u64,
    link_rate: String,
    path: String,
    per_receiver: Vec<ReceiverFigures>,
    /// Until the last receiver held the message, µs (median over messages).
    group_latency_median_us: f64,
    /// Bits delivered to all receivers per second of group latency (median).
    aggregate_goodput_gbps: f64,
    /// Packets the sender retransmitted, summed over messages.
    retransmitted_packets: u64,
}

/// The per-message `held after (us)` lines of `mcast lead` into per-receiver
/// latencies, µs; also every send's group latency and retransmissions, and the path.
fn parse_held(text: &str) -> (Vec<(String, Vec<f64>)>, Vec<f64>, u64, String) {
    let mut per: Vec<(String, Vec<f64>)> = Vec::new();
    let mut group = Vec::new();
    let mut retx = 0;
    let mut path = String::new();
    for l in text.lines() {
        if let Some(rest) = l.trim_start().strip_prefix("held after (us): ") {
            for item in rest.split(", ") {
                let mut w = item.split_whitespace();
                let (Some(ip), Some(t)) = (w.next(), w.next()) else {
                    continue;
                };
                let Ok(us) = t.parse::<f64>() else { continue };
                match per.iter_mut().find(|(i, _)| i == ip) {
                    Some((_, v)) => v.push(us),
                    None => per.push((ip.to_string(), vec![us])),
                }
            }
        } else if l.starts_with("multicast ") {
            let field = |key: &str| -> Option<&str> {
                let at = l.find(key)? + key.len();
                l[at..].split_whitespace().next()
            };
            if let Some(us) = field("latency ").and_then(|v| v.parse::<f64>().ok()) {
                group.push(us);
            }
            if let Some(p) = field(" via ") {
                path = p.to_string();
            }
            let n = l
                .find(" packets retransmitted")
                .and_then(|at| l[..at].rsplit(' ').next()?.parse::<u64>().ok());
            retx += n.unwrap_or(0);
        }
    }
    (per, group, retx, path)
}

/// Runs the 1→N multicast test and returns its table (or JSON).
pub fn perf_mcast(a: &PerfMcastArgs) -> Result<String, String> {
    let t0 = std::time::Instant::now();
    if !rustix::process::geteuid().is_root() {
        return Err("--mcast builds a namespace lab: run it as root".into());
    }
    if !(1..=32).contains(&a.receivers) {
        return Err("--mcast takes 1 to 32 receivers".into());
    }
    if a.size == 0 || a.size > 256 << 20 || a.iters == 0 || a.iters > 10_000 {
        return Err("--mcast: -s must be 1 B to 256M and -n 1 to 10000".into());
    }
    let mbps = rate_mbps(&a.rate)?;
    let n = a.receivers as usize + 1;
    let dir = std::env::temp_dir().join(format!("rocast-perf-mcast-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("payload.bin");
    std::fs::write(&file, payload(a.size)).map_err(|e| e.to_string())?;
    fresh_switch_lab(PERF_LAB, n, &a.rate, a.fast_path, &[])?;
    let extra = vec![
        "--repeat".to_string(),
        a.iters.to_string(),
        "--rate-mbps".to_string(),
        mbps.to_string(),
    ];
    let run = run_group_outputs(PERF_LAB, n, &file, &extra, None);
    let _ = run_rocast(&["lab", "down", "--name", PERF_LAB]);
    let _ = std::fs::remove_dir_all(&dir);
    let (text, _members) = run?;
    let (mut per, mut group, retx, path) = parse_held(&text);
    per.sort_by_key(|(ip, _)| ip.parse::<std::net::Ipv4Addr>().ok());
    if per.len() != a.receivers as usize || group.len() as u64 != a.iters {
        return Err(format!(
            "expected {} receivers and {} sends in the leader's report:\n{text}",
            a.receivers, a.iters
        ));
    }
    let bits = a.size as f64 * 8.0;
    let per_receiver: Vec<ReceiverFigures> = per
        .into_iter()
        .map(|(ip, mut v)| {
            v.sort_by(f64::total_cmp);
            let at = |q| nearest_rank(&v, q).unwrap_or(0.0);
            let median = at(0.5);
            ReceiverFigures {
                receiver: ip,
                messages: v.len(),
                latency_median_us: median,
                latency_p99_us: at(0.99),
                latency_max_us: at(1.0),
                goodput_gbps: bits / (median * 1e3),
            }
        })
        .collect();
    group.sort_by(f64::total_cmp);
    let group_median = nearest_rank(&group, 0.5).unwrap_or(0.0);
    let j = PerfMcastJson {
        tool: "rocast perf",
        test: "mcast",
        receivers: a.receivers,
        bytes: a.size,
        iterations: a.iters,
        link_rate: a.rate.clone(),
        path,
        per_receiver,
        group_latency_median_us: group_median,
        aggregate_goodput_gbps: bits * a.receivers as f64 / (group_median * 1e3),
        retransmitted_packets: retx,
    };
    if a.json {
        return serde_json::to_string_pretty(&j)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string());
    }
    let rule = "-".repeat(87);
    let mut s = format!(
        "{rule}\n                    Multicast Test (rocast perf --mcast)\n 1 sender -> {} receivers through rocast switch{}, one group ({})\n Links           : {}, sender paced at {} Mbit/s\n Message         : {} B x {}\n{rule}\n",
        a.receivers,
        if a.fast_path { " (fast path)" } else { "" },
        j.path,
        a.rate,
        mbps,
        a.size,
        a.iters
    );
    let _ = writeln!(
        s,
        " {:<15} {:<8} {:<11} {:<18} {:<15} {:<15} {}",
        "receiver",
        "#bytes",
        "#iterations",
        "t_median[usec]",
        "t_p99[usec]",
        "t_max[usec]",
        "BW[Gb/sec]"
    );
    for r in &j.per_receiver {
        let _ = writeln!(
            s,
            " {:<15} {:<8} {:<11} {:<18.1} {:<15.1} {:<15.1} {:.3}",
            r.receiver,
            a.size,
            r.messages,
            r.latency_median_us,
            r.latency_p99_us,
            r.latency_max_us,
            r.goodput_gbps
        );
    }
    let _ = writeln!(
        s,
        " {:<15} {:<8} {:<11} {:<18.1} {:<15} {:<15} {:.3}   (all {} receivers held it; BW = bits delivered to all of them)",
        "aggregate",
        a.size,
        a.iters,
        j.group_latency_median_us,
        "",
        "",
        j.aggregate_goodput_gbps,
        a.receivers
    );
    let _ = writeln!(s, " retransmitted   : {} packets", j.retransmitted_packets);
    let _ = writeln!(
        s,
        " wall time       : {:.1} s (lab set-up included)",
        t0.elapsed().as_secs_f64()
    );
    Ok(s)
}
