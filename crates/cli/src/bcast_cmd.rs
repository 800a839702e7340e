//! `rocast bcast`: an OSU-style broadcast latency benchmark of the application-layer
//! multicast schemes (`rocast_core::overlay`), run in the simulator.
//!
//! For every scheme and size it runs one broadcast on an otherwise idle fabric and
//! prints `# OSU MPI Broadcast Latency Test`-style tables (`# Size  Avg Latency(us)`);
//! `bcast.csv` in `--out` has every figure beside the analytic model's prediction;
//! `--plot` draws latency against size, one line per scheme (matplotlib, through
//! `rocast.plot.bcast`). `--analyze` prints the schedules' properties instead of
//! simulating: steps and RDMC §4.2's average slack per step, beside RDMC's formula
//! 2(1 − (l−1)/(n−2)) for the binomial pipeline. `-f` is OSU's full format (avg, min
//! and max over the receiving ranks), `--json` the CSV's rows as JSON; `--fail` crashes
//! a member (RDMC §4.6's failure semantics) and `--smc` compares RDMC with its
//! small-message protocol on a stream.

use clap::Args;
use rocast_core::overlay::model::critical_path;
use rocast_core::overlay::small_message::SmallMessageConfig;
use rocast_core::overlay::GroupOutcome;
use rocast_core::overlay::Scheme;
use rocast_core::time::Duration;
use rocast_eval::bcast::{
    fabric_scenario, measure, run_one, BcastFabric, BcastSettings, CSV_HEADER,
};
use rocast_sim::engine::Engine;
use rocast_sim::multicast::broadcast::{
    bench_driver_config, BroadcastOutcome, MemberFailure, DEFAULT_OVERHEAD,
};
use rocast_sim::multicast::small_message::{
    run_rdmc_stream, run_ring_stream, MessageStream, StreamTiming,
};
use rocast_sim::scenario::config::{parse_bytes, parse_duration, parse_sizes};
use rocast_sim::scenario::topology::{build_topology, engine_config};
use rocast_sim::Scenario;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct BcastCmd {
    /// Schemes to run, comma-separated: sequential, tree, chain, pipeline, ring.
    #[arg(long, default_value = "sequential,tree,chain,pipeline,ring")]
    schemes: String,
    /// Group size (ranks, root included).
    #[arg(long = "group-size", alias = "group", default_value_t = 8)]
    group: u32,
    /// Message sizes: MIN:MAX (powers of two between, as OSU) or a comma list; K/M/G
    /// suffixes are binary (1K = 1024).
    #[arg(short = 'm', long, default_value = "64:16M")]
    sizes: String,
    /// OSU's full format (-f): average, minimum and maximum over the receiving ranks
    /// of the time each held the whole message, and the iterations (1: the simulator
    /// is deterministic, a repeat gives the same time).
    #[arg(short = 'f', long)]
    full: bool,
    /// OSU's iterations (-i) and warm-up iterations (-x), taken so OSU scripts run
    /// unchanged: the simulator is deterministic, so one run is every iteration (a
    /// repeat gives the same time) and the tables say 1.
    #[arg(
        short = 'i',
        long = "iterations",
        value_name = "N",
        default_value_t = 1
    )]
    iterations: u64,
    #[arg(short = 'x', long = "warmup", value_name = "N", default_value_t = 0)]
    warmup: u64,
    /// Print the results as JSON (the rows of bcast.csv, with avg/min over ranks)
    /// instead of OSU tables.
    #[arg(long)]
    json: bool,
    /// Fabric: "star" (one leaf switch, one 100 Gb/s host per rank: idle and
    /// non-blocking), a preset name (default, permutation-1024, ...) or a scenario
    /// TOML file; ranks are spread evenly over its hosts.
    #[arg(long, default_value = "star")]
    topo: String,
    /// Override a scenario key of the fabric, e.g. --set topology.host_gbps=25.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Block size of chain and pipeline (RDMC's default: 1 MiB).
    #[arg(long, default_value = "1M")]
    block: String,
    /// Slices in flight per ring connection (NCCL_STEPS).
    #[arg(long, default_value_t = 8)]
    ring_slots: u32,
    /// Ring slice size (NCCL's Simple protocol: a 4 MiB channel buffer in
    /// NCCL_STEPS = 8 slots of 512 KiB).
    #[arg(long, default_value = "512K")]
    ring_slice: String,
    /// Software overhead per post at every hop, in microseconds.
    #[arg(long, default_value_t = DEFAULT_OVERHEAD.as_ps() as f64 / 1e6)]
    overhead_us: f64,
    /// Turn off receiver-driven flow control (RDMC's ready-for-block).
    #[arg(long)]
    no_flow_control: bool,
    /// Root rank.
    #[arg(long, default_value_t = 0)]
    root: u32,
    /// Carry real bytes and check every receiver's buffer against the root's
    /// (messages up to 256 MiB).
    #[arg(long)]
    verify: bool,
    /// Output directory for bcast.csv and bcast-ranks.csv (when each rank held the
    /// whole message).
    #[arg(long, default_value = "bcast-out")]
    out: PathBuf,
    /// Write a latency-vs-size plot (PNG) here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Crash a member mid-broadcast, RANK@TIME (e.g. 3@40us): at TIME its host leaves
    /// the fabric. Prints what every survivor concluded (RDMC §4.6: the same failure
    /// at all of them, or delivered when the crash came after the last delivery).
    #[arg(long, value_name = "RANK@TIME")]
    fail: Option<String>,
    /// With --fail: how long a rank waits without progress before it probes the peers
    /// it waits on.
    #[arg(long, default_value = "10ms", value_name = "TIME")]
    suspect_after: String,
    /// Compare, for a stream of small messages, the small-message protocol paired with
    /// RDMC (RDMC §4.6, Derecho's SMC: writes into per-receiver ring buffers) with
    /// RDMC's binomial pipeline one message at a time, over --smc-groups and
    /// --smc-sizes; writes bcast-smc.csv.
    #[arg(long)]
    smc: bool,
    /// With --smc: group sizes (ranks, sender included), comma-separated.
    #[arg(long, default_value = "2,4,8,16,32,64")]
    smc_groups: String,
    /// With --smc: message sizes, comma-separated (K/M suffixes); each ring slot holds
    /// one message of that size.
    #[arg(long, default_value = "64,1K,10K,100K,1M")]
    smc_sizes: String,
    /// With --smc: messages per stream.
    #[arg(long, default_value_t = 100)]
    messages: u32,
    /// With --smc: ring slots per receiver (rocast's assumption; Derecho's window).
    #[arg(long, default_value_t = 8)]
    slots: u32,
    /// Print each scheme's schedule for the largest size instead of simulating: its
    /// steps and RDMC §4.2's average slack per step, with RDMC's closed form for the
    /// binomial pipeline (group sizes up to 4096).
    #[arg(long)]
    analyze: bool,
}

pub fn run(cmd: BcastCmd) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    if cmd.iterations != 1 || cmd.warmup != 0 {
        eprintln!(
            "rocast bcast: -i {} -x {} taken as OSU's; the simulator is deterministic, so one run \
             gives every iteration's time",
            cmd.iterations, cmd.warmup
        );
    }
    let r = run_inner(cmd);
    if r.is_ok() {
        eprintln!(
            "rocast bcast: wall time {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    r
}

fn run_inner(cmd: BcastCmd) -> Result<(), String> {
    let schemes = cmd
        .schemes
        .split(',')
        .map(str::parse::<Scheme>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let sizes = parse_sizes(&cmd.sizes).map_err(|e| e.to_string())?;
    let block = parse_bytes(&cmd.block).map_err(|e| e.to_string())?;
    let ring_slice = parse_bytes(&cmd.ring_slice).map_err(|e| e.to_string())?;
    if !(cmd.overhead_us.is_finite() && cmd.overhead_us >= 0.0) {
        return Err("--overhead-us must be a non-negative number".into());
    }
    let failure = match &cmd.fail {
        None => None,
        Some(f) => {
            let (rank, at) = f
                .split_once('@')
                .ok_or_else(|| format!("--fail {f:?}: expected RANK@TIME, e.g. 3@40us"))?;
            let rank: u32 = rank
                .parse()
                .map_err(|_| format!("--fail {f:?}: {rank:?} is not a rank"))?;
            if rank >= cmd.group {
                return Err(format!(
                    "--fail {f:?}: no rank {rank} in a group of {}",
                    cmd.group
                ));
            }
            Some(MemberFailure {
                rank,
                at_ps: parse_duration(at).map_err(|e| format!("--fail: {e}"))?,
            })
        }
    };
    let settings = BcastSettings {
        group: cmd.group,
        root: cmd.root,
        block,
        ring_slice,
        ring_slots: cmd.ring_slots,
        overhead: overhead_of(&cmd),
        flow_control: !cmd.no_flow_control,
        verify: cmd.verify,
        failure,
        suspect_after: Duration::from_ps(
            parse_duration(&cmd.suspect_after).map_err(|e| format!("--suspect-after: {e}"))?,
        ),
    };
    settings.validate(&sizes).map_err(|e| e.to_string())?;
    if cmd.smc {
        return smc(&cmd, block, settings.overhead);
    }
    if cmd.analyze {
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let (text, verdicts) = analyze(&schemes, cmd.group, cmd.root, largest, block)?;
        print!("{text}{}", rocast_eval::verdict::render(&verdicts));
        // The structured verdicts, which `rocast repro` counts.
        std::fs::create_dir_all(&cmd.out).map_err(|e| format!("{}: {e}", cmd.out.display()))?;
        let path = cmd.out.join("verdicts.json");
        std::fs::write(&path, rocast_eval::verdict::to_json_text(&verdicts))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(());
    }
    let (sc, base) = fabric_scenario(&cmd.topo, cmd.group, &cmd.sets).map_err(|e| e.to_string())?;
    let fabric = BcastFabric::new(sc, &base, cmd.group).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cmd.out).map_err(|e| format!("{}: {e}", cmd.out.display()))?;
    let mut csv = String::from(CSV_HEADER);
    // When each rank held the whole message: the per-hop timeline of a scheme.
    let mut ranks_csv = String::from("scheme,size_bytes,rank,host,done_us\n");
    for &scheme in &schemes {
        let show = !cmd.json;
        if show {
            println!(
                "# OSU MPI Broadcast Latency Test (rocast bcast, simulated): {scheme}, {} ranks, block {} B, topo {}, overhead {} us{}",
                cmd.group,
                block,
                cmd.topo,
                cmd.overhead_us,
                if cmd.no_flow_control { ", no flow control" } else { "" }
            );
            if cmd.full {
                println!(
                    "# {:<10}{:>18}{:>18}{:>18}{:>12}",
                    "Size", "Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations"
                );
            } else {
                println!("# {:<10}{:>18}", "Size", "Avg Latency(us)");
            }
        }
        for &size in &sizes {
            if let Some(f) = failure {
                // A crash: what every survivor concluded, not a latency.
                let (_, out) =
                    run_one(&fabric, &settings, scheme, size).map_err(|e| e.to_string())?;
                println!("{}", failure_line(&out, f, &size.to_string()));
                continue;
            }
            let p = measure(&fabric, &settings, scheme, size).map_err(|e| e.to_string())?;
            if show && cmd.full {
                println!(
                    "{:<10}{:>18.2}{:>18.2}{:>18.2}{:>12}",
                    size, p.avg_rank_us, p.min_rank_us, p.latency_us, 1
                );
            } else if show {
                println!("{:<10}{:>18.2}", size, p.latency_us);
            }
            for (rank, t) in p.outcome.rank_done_ps.iter().enumerate() {
                let _ = writeln!(
                    ranks_csv,
                    "{scheme},{size},{rank},{},{:.3}",
                    fabric.hosts[rank],
                    *t as f64 / 1e6
                );
            }
            csv.push_str(&p.csv_row(cmd.group));
        }
        if show {
            println!();
        }
    }
    if cmd.json {
        print!(
            "{}",
            crate::output::pretty(&crate::output::csv_to_json(&csv)?)
        );
    }
    let csv_path = cmd.out.join("bcast.csv");
    std::fs::write(&csv_path, &csv).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    eprintln!("wrote {}", csv_path.display());
    let ranks_path = cmd.out.join("bcast-ranks.csv");
    std::fs::write(&ranks_path, &ranks_csv)
        .map_err(|e| format!("{}: {e}", ranks_path.display()))?;
    eprintln!("wrote {}", ranks_path.display());
    if let Some(png) = &cmd.plot {
        plot(
            &csv_path,
            png,
            &format!("{} ranks, {}", cmd.group, cmd.topo),
        )?;
        eprintln!("wrote {}", png.display());
    }
    Ok(())
}

fn overhead_of(cmd: &BcastCmd) -> Duration {
    Duration::from_ps((cmd.overhead_us * 1e6).round() as u64)
}

/// `--smc`: the small-message protocol against RDMC on a star of the largest group.
fn smc(cmd: &BcastCmd, block: u64, overhead: Duration) -> Result<(), String> {
    let groups = cmd
        .smc_groups
        .split(',')
        .map(|g| match g.trim().parse::<u32>() {
            Ok(n) if (2..=1024).contains(&n) => Ok(n),
            _ => Err(format!(
                "--smc-groups: {g:?} is not a group size of 2 to 1024"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sizes = cmd
        .smc_sizes
        .split(',')
        .map(parse_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if sizes.iter().any(|&s| s == 0 || s > 64 << 20) {
        return Err("--smc-sizes: each size must be 1 B to 64M (one ring slot each)".into());
    }
    if cmd.messages == 0 || cmd.messages > 100_000 {
        return Err("--messages must be 1 to 100000".into());
    }
    let largest = groups.iter().copied().max().unwrap_or(2);
    let mut sets = vec![
        "topology.kind=\"leaf-spine\"".to_string(),
        "topology.spines=1".into(),
        "topology.leaves=1".into(),
        format!("topology.hosts_per_leaf={largest}"),
    ];
    sets.extend(cmd.sets.iter().cloned());
    let sc = Scenario::from_toml("", &sets).map_err(|e| e.to_string())?;
    let topo = build_topology(&sc, Path::new("")).map_err(|e| e.to_string())?;
    let cfg = engine_config(&sc, &topo).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cmd.out).map_err(|e| format!("{}: {e}", cmd.out.display()))?;
    println!(
        "# Small messages (RDMC §4.6): ring-buffer writes (SMC) vs RDMC's binomial pipeline, one star switch, {} messages per stream, {} slots per ring, block {} B, overhead {} us per post",
        cmd.messages, cmd.slots, block, cmd.overhead_us
    );
    println!(
        "# {:>5} {:>9} {:>13} {:>13} {:>9} {:>14} {:>14}",
        "group", "size", "smc_us/msg", "rdmc_us/msg", "speed-up", "smc_first_us", "rdmc_first_us"
    );
    let mut csv = String::from(
        "group,size_bytes,messages,slots,smc_total_us,rdmc_total_us,smc_first_us,rdmc_first_us,speedup\n",
    );
    for &n in &groups {
        for &size in &sizes {
            let stream = MessageStream {
                hosts: (0..n).collect(),
                messages: cmd.messages,
                size,
                overhead,
            };
            let ring_cfg = SmallMessageConfig::new(cmd.slots, size.max(1) as u32)
                .map_err(|e| format!("--slots: {e}"))?;
            let mut e =
                Engine::new(topo.clone(), cfg.clone(), Vec::new()).map_err(|e| e.to_string())?;
            let ring = run_ring_stream(&mut e, &stream, ring_cfg).map_err(|e| e.to_string())?;
            let mut e =
                Engine::new(topo.clone(), cfg.clone(), Vec::new()).map_err(|e| e.to_string())?;
            let rdmc = run_rdmc_stream(&mut e, &stream, block).map_err(|e| e.to_string())?;
            let per = |t: &StreamTiming| t.total_ps as f64 / 1e6 / cmd.messages as f64;
            let speedup = rdmc.total_ps as f64 / ring.total_ps.max(1) as f64;
            println!(
                "  {:>5} {:>9} {:>13.3} {:>13.3} {:>8.2}x {:>14.3} {:>14.3}",
                n,
                size,
                per(&ring),
                per(&rdmc),
                speedup,
                ring.first_ps as f64 / 1e6,
                rdmc.first_ps as f64 / 1e6
            );
            let _ = writeln!(
                csv,
                "{n},{size},{},{},{:.3},{:.3},{:.3},{:.3},{speedup:.3}",
                cmd.messages,
                cmd.slots,
                ring.total_ps as f64 / 1e6,
                rdmc.total_ps as f64 / 1e6,
                ring.first_ps as f64 / 1e6,
                rdmc.first_ps as f64 / 1e6
            );
        }
    }
    let path = cmd.out.join("bcast-smc.csv");
    std::fs::write(&path, csv).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// What the survivors of a crash concluded, in one line: the outcome they share (or
/// each one's, should they disagree) and how many held the whole message.
fn failure_line(out: &BroadcastOutcome, f: MemberFailure, size: &str) -> String {
    let survivors: Vec<(usize, &GroupOutcome)> = out
        .outcomes
        .iter()
        .enumerate()
        .filter_map(|(r, o)| o.as_ref().map(|o| (r, o)))
        .collect();
    let held = survivors
        .iter()
        .filter(|(r, _)| out.rank_done_ps[*r] != u64::MAX)
        .count();
    let show = |o: &GroupOutcome| match o {
        GroupOutcome::Delivered => "delivered".to_string(),
        GroupOutcome::InProgress => "still waiting".to_string(),
        GroupOutcome::Failed { failed } => format!("group failed, members {failed:?}"),
    };
    let agreed = survivors.windows(2).all(|w| w[0].1 == w[1].1);
    let verdict = match survivors.first() {
        Some((_, o)) if agreed => format!("all {} survivors: {}", survivors.len(), show(o)),
        _ => survivors
            .iter()
            .map(|(r, o)| format!("rank {r}: {}", show(o)))
            .collect::<Vec<_>>()
            .join("; "),
    };
    format!(
        "{:<10} rank {} crashed at {:.3} us: {verdict}; {held} of {} survivors held the message",
        size,
        f.rank,
        f.at_ps as f64 / 1e6,
        survivors.len()
    )
}

/// The `--analyze` report: per scheme, its steps for a message of `size` bytes in
/// `block`-byte blocks, and the average slack per step (RDMC §4.2).
fn analyze(
    schemes: &[Scheme],
    n: u32,
    root: u32,
    size: u64,
    block: u64,
) -> Result<(String, Vec<rocast_eval::verdict::Verdict>), String> {
    use rocast_core::overlay::schedule::{ceil_log2, Schedule};
    if n > 4096 {
        return Err("--analyze walks every rank's schedule: --group-size up to 4096".into());
    }
    let blocks = size.div_ceil(block).max(1);
    let blocks = u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= 1 << 16)
        .ok_or("--analyze: at most 65,536 blocks (raise --block)")?;
    let mut out = format!(
        "# rocast bcast --analyze: {n} ranks, root {root}, {size} B in {blocks} blocks of {block} B\n"
    );
    for &scheme in schemes {
        if scheme == Scheme::Ring {
            let _ = writeln!(
                out,
                "{scheme}: no block schedule (NCCL-style slices, flow-controlled per connection)"
            );
            continue;
        }
        let s = Schedule::new(scheme, n, root, blocks).map_err(|e| e.to_string())?;
        let per_step = s.average_slack_per_step();
        // Steady: from step ⌈log2 n⌉ − 1 on (the binomial pipeline's hypercube is full).
        let from = (ceil_log2(n) as usize).saturating_sub(1);
        let steady: Vec<f64> = per_step.iter().skip(from).flatten().copied().collect();
        let (lo, hi) = steady
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        let mean = steady.iter().sum::<f64>() / steady.len().max(1) as f64;
        let _ = write!(
            out,
            "{scheme}: {} steps; average slack per step from step {from}: ",
            s.total_steps()
        );
        if steady.is_empty() {
            let _ = writeln!(out, "no relay sends (only the root)");
        } else {
            let _ = writeln!(out, "mean {mean:.4}, min {lo:.4}, max {hi:.4}");
        }
        if scheme == Scheme::BinomialPipeline {
            let l = f64::from(ceil_log2(n));
            let formula = 2.0 * (1.0 - (l - 1.0) / (f64::from(n) - 2.0).max(1.0));
            let _ = writeln!(
                out,
                "  RDMC §4.2: 2(1 - (l-1)/(n-2)) = {formula:.4} with l = log2 n = {l}{}",
                if n.is_power_of_two() {
                    ""
                } else {
                    " (RDMC states it for n a power of two; here l = ceil(log2 n))"
                }
            );
        }
        let shown: Vec<String> = per_step
            .iter()
            .take(12)
            .map(|a| a.map_or("-".into(), |x| format!("{x:.3}")))
            .collect();
        let _ = writeln!(
            out,
            "  per step: {}{}",
            shown.join(" "),
            if per_step.len() > 12 { " ..." } else { "" }
        );
    }
    let (slow, verdicts) = half_speed_link(schemes, n, root, size, block)?;
    out.push_str(&slow);
    Ok((out, verdicts))
}

/// RDMC §4.2's slow-link argument: with one link at half speed, the binomial pipeline
/// keeps most of the bandwidth (the paper: 85.6 % at n = 64), where a chain, which
/// sends every block over every link, drops to the slow link's rate. Measured on the
/// analytic model ([`critical_path`]: the real drivers on an ideal network), two
/// ways: the link between ranks n − 2 and n − 1 at half rate (one pair: the
/// pipeline's hypercube uses it in one step of every log2 n, the chain for every
/// block), and rank n − 1's whole NIC at half rate (every step of the pipeline
/// involves it). The fraction is the completion with every link equal over the
/// completion with the slow one. The cost model is rocast's assumption: 100 Gbit/s
/// links, 1 µs one way, no per-post overhead (so the fraction is the schedule's, not
/// the host's).
fn half_speed_link(
    schemes: &[Scheme],
    n: u32,
    root: u32,
    size: u64,
    block: u64,
) -> Result<(String, Vec<rocast_eval::verdict::Verdict>), String> {
    use rocast_core::overlay::model::MessageCost;
    if n < 3 {
        return Ok((String::new(), Vec::new()));
    }
    let (sa, sb) = (n - 2, n - 1);
    // 0: every link equal; 1: the link sa–sb at half rate; 2: sb's NIC at half rate.
    let cost = |case: u8| {
        move |a: u32, b: u32, bytes: u64| {
            let slow = match case {
                1 => (a == sa && b == sb) || (a == sb && b == sa),
                2 => a == sb || b == sb,
                _ => false,
            };
            let rate_bits_per_ps = if slow { 0.05 } else { 0.1 };
            let nic = ((bytes.max(64) * 8) as f64 / rate_bits_per_ps).round() as u64;
            MessageCost {
                nic_ps: nic,
                deliver_ps: nic + 1_000_000,
                ack_ps: 1_000_000,
            }
        }
    };
    let mut out = format!(
        "# one half-speed link (RDMC §4.2; the paper: the binomial pipeline keeps 85.6 % of the bandwidth at n = 64, a chain the slow link's rate): the link {sa}-{sb}, then rank {sb}'s whole NIC, at half rate; analytic model, 100 Gbit/s, 1 us one way, no overhead; kept = equal / slow completion\n{:>10} {:>12} {:>12} {:>10} {:>12} {:>10}\n",
        "scheme", "equal_us", "link_us", "kept", "nic_us", "kept"
    );
    let mut headline = None;
    for &scheme in schemes {
        if scheme == Scheme::Ring {
            continue;
        }
        let driver = bench_driver_config(scheme, n, size, block, 1, true);
        let t = |case: u8| -> Result<f64, String> {
            let c = cost(case);
            critical_path(scheme, n, root, driver, 0, &c)
                .map(|p| p.latency_ps as f64 / 1e6)
                .map_err(|e| e.to_string())
        };
        let (eq, link, nic) = (t(0)?, t(1)?, t(2)?);
        let _ = writeln!(
            out,
            "{:>10} {eq:>12.1} {link:>12.1} {:>9.1}% {nic:>12.1} {:>9.1}%",
            scheme.to_string(),
            100.0 * eq / link,
            100.0 * eq / nic
        );
        if scheme == Scheme::BinomialPipeline && n == 64 {
            headline = Some(eq / link);
        }
    }
    let mut verdicts = Vec::new();
    if let Some(kept) = headline {
        let ratio = kept / 0.856;
        verdicts.push(rocast_eval::verdict::Verdict::new(
            "binomial pipeline's bandwidth kept with one half-speed link, n = 64",
            "85.6%",
            format!("{:.1}%", 100.0 * kept),
            rocast_eval::verdict::Word::of_ratio(ratio),
        ));
        let _ = writeln!(
            out,
            "headline: the pipeline keeps 85.6% of its bandwidth with one half-speed link at n = 64 (paper); rocast {:.1}% ({ratio:.2}x): {}",
            100.0 * kept,
            rocast_eval::report::verdict_word(ratio)
        );
    }
    Ok((out, verdicts))
}

fn plot(csv: &Path, png: &Path, title: &str) -> Result<(), String> {
    crate::plot::run_plot("bcast", csv, png, title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_parser_never_panics() {
        // A deterministic sweep of awkward inputs (the CLI crate has no proptest).
        let pieces = [
            "",
            ":",
            ",",
            "0",
            "1",
            "K",
            "M",
            "G",
            "18446744073709551615",
            "-1",
            " ",
            "ü",
            "1G:1K",
        ];
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let _ = parse_sizes(&format!("{a}{b}{c}"));
                }
            }
        }
    }

    #[test]
    fn sizes_parse_like_osu() {
        assert_eq!(parse_sizes("64:512").unwrap(), vec![64, 128, 256, 512]);
        assert_eq!(parse_sizes("1K,1M").unwrap(), vec![1024, 1 << 20]);
        assert_eq!(parse_sizes("64:1G").unwrap().len(), 25);
        for bad in ["", "0:8", "8:4", "x", "1Q", "64:2T", "99999999999999999999"] {
            assert!(parse_sizes(bad).is_err(), "{bad}");
        }
    }
}
