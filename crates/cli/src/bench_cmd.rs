//! `rocast bench …`: benchmarks that print figures (never pass/fail assertions).

use clap::Subcommand;
use rocast_core::plan::{Routes, TierSpec, Topology};
use rocast_core::time::Duration;

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// 3-replica writes on real packets (Cepheus Table I analogue, root): IOPS of
    /// 1-unicast, 3-unicasts and Cepheus multicast in a 4-host `rocast lab`.
    LabIops {
        /// Bytes per write (K/M suffixes).
        #[arg(long, default_value = "8K")]
        io: String,
        /// Writes per run.
        #[arg(long, default_value_t = 2000)]
        ios: u64,
        /// Writes in flight per unicast connection.
        #[arg(long, default_value_t = 16)]
        depth: u8,
        /// Link rate of the lab in bits per second (1gbit, 1Gbps and 1G are the same).
        #[arg(long, default_value = "1gbit")]
        rate: String,
        /// Runs per point; the median is reported.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Print lab-iops.csv's rows as JSON on stdout (the table goes to stderr).
        #[arg(long)]
        json: bool,
        /// Output directory (table, CSV).
        #[arg(long, default_value = "out/lab-iops")]
        out: std::path::PathBuf,
    },
    /// Broadcast latency and goodput on real packets in a `rocast lab` (root): Cepheus
    /// through `rocast switch` against chain, binomial tree and binomial pipeline over
    /// the same host runtime, and optionally Open MPI's MPI_Bcast. OSU-format tables,
    /// CSV and PNG under --out.
    LabBcast {
        /// Group sizes (hosts, leader included), comma-separated; one lab per size.
        #[arg(long = "group-sizes", alias = "hosts", default_value = "4,8")]
        hosts: String,
        /// Message sizes, comma-separated (K, M suffixes) or MIN:MAX (powers of two).
        #[arg(long, default_value = "64,1K,16K,256K,1M,4M,16M,64M")]
        sizes: String,
        /// Schemes, comma-separated: cepheus (through the switch) and the overlays
        /// chain, tree, pipeline.
        #[arg(long, default_value = "cepheus,chain,tree,pipeline", alias = "algo")]
        schemes: String,
        /// Link rate of the lab (tc), e.g. 1gbit.
        #[arg(long, default_value = "1gbit")]
        rate: String,
        /// Runs per point; the median is reported.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Rack switches: 2 or more runs the two-tier lab (hosts split evenly under the
        /// ToRs, one aggregation switch above: shared uplinks).
        #[arg(long, default_value_t = 1)]
        tors: usize,
        /// Also run Open MPI's MPI_Bcast (openmpi-bin, mpi4py) on the same lab, with
        /// Open MPI's own choice of algorithm.
        #[arg(long)]
        mpi: bool,
        /// Also force these Open MPI broadcast algorithms, by coll_tuned number
        /// (1 basic_linear, 2 chain, 3 pipeline, 4 split_binary_tree, 5 binary_tree,
        /// 6 binomial, 7 knomial, 8 scatter_allgather, 9 scatter_allgather_ring; 128 KiB
        /// segments), e.g. 2,3,6. Implies --mpi.
        #[arg(long, value_name = "N,N,...", value_delimiter = ',',
              value_parser = clap::value_parser!(u32).range(1..=9))]
        mpi_algorithms: Vec<u32>,
        /// The lab's switches run `rocast switch --fast-path`.
        #[arg(long)]
        fast_path: bool,
        /// OSU's full format: beside the median of the reps, their minimum, maximum
        /// and count (the plot draws min-max error bars either way).
        #[arg(short = 'f', long)]
        full: bool,
        /// Print lab-bcast.csv's rows as JSON on stdout (the tables go to stderr).
        #[arg(long)]
        json: bool,
        /// Output directory (tables, CSV, PNG).
        #[arg(long, default_value = "out/lab-bcast")]
        out: std::path::PathBuf,
    },
    /// Reliable UD multicast on real packets (root): a `rocast lab` whose
    /// bridge (or `rocast switch`, flooding) is the broadcast medium, h0 sending with
    /// the NACK multicast protocol over a core UD endpoint on an IPv4 multicast group,
    /// the other hosts receiving. Loss is injected on receive in the drivers (seeded).
    /// Exits non-zero unless every receiver got every message exactly once, in order.
    LabUd(crate::ud_bench::LabUdArgs),
    /// One-way latency distributions on real packets (root): per group size
    /// (--receivers) and message size, UD multicast with the NACK protocol, Cepheus RC
    /// multicast through `rocast switch`, and the binomial tree over RC, each from the
    /// sender's post until the last receiver held the message (p50, p99, p99.9, max;
    /// the lab's hosts share one clock). Table and CSV under --out.
    LabLatency {
        /// Receivers per group, e.g. 2,3,7.
        #[arg(long, default_value = "2,3,7")]
        receivers: String,
        /// Message sizes (bytes, K/M suffixes), 8 or more.
        #[arg(long, default_value = "64,4K")]
        sizes: String,
        /// Messages per (group, size, scheme).
        #[arg(long, default_value_t = 1000)]
        samples: usize,
        /// UD multicast's pacing: one message every this many microseconds.
        #[arg(long, default_value_t = 500)]
        interval_us: u64,
        /// Link rate of the lab in bits per second (1gbit, 1Gbps and 1G are the same).
        #[arg(long, default_value = "1gbit")]
        rate: String,
        /// The lab's switch runs `rocast switch --fast-path` (Cepheus copies in the kernel).
        #[arg(long)]
        fast_path: bool,
        /// Print lab-latency.csv's rows as JSON on stdout (the table goes to stderr).
        #[arg(long)]
        json: bool,
        /// Output directory (table, CSV).
        #[arg(long, default_value = "out/lab-latency")]
        out: std::path::PathBuf,
    },
    /// The switch's forwarding rate on real interfaces (root): `rocast
    /// switch` replicating a Cepheus group's RC SEND frames 1->N (bridged to each
    /// member's connection, ICRC recomputed) on unshaped veths, beside the Linux bridge
    /// flooding the same frames on the same veths in the same run. Prints frames per
    /// second and Gbit/s delivered per receiver, and the ratio rocast/bridge.
    Switch {
        /// Receivers per group, comma-separated.
        #[arg(long, default_value = "3,7")]
        receivers: String,
        /// RoCE payload bytes per frame (1024, 1K).
        #[arg(long, default_value = "1024", value_parser = crate::output::parse_size)]
        payload: usize,
        /// Sending time per run.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Runs per medium and group size; the median is printed.
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Print every run as JSON on stdout (the table goes to stderr).
        #[arg(long)]
        json: bool,
    },
    /// Loopback anchor for `rocast perf`: raw sendmmsg/recvmmsg goodput of
    /// --size datagrams beside `rocast perf`'s RDMA WRITE goodput at that MTU, in the
    /// same run, alternating; prints both medians and the ratio.
    Udp {
        /// Datagram bytes (and perf's MTU): 4096, 4K.
        #[arg(long, default_value = "4096", value_parser = crate::output::parse_size)]
        size: usize,
        /// perf's WRITE size.
        #[arg(long, default_value = "1M")]
        message: String,
        /// perf's WRITEs per run.
        #[arg(long, default_value_t = 2000)]
        iters: u64,
        /// The raw test's sending time per run.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Alternating runs of each test; medians are reported.
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Print every run as JSON on stdout (the table goes to stderr).
        #[arg(long)]
        json: bool,
    },
    /// The simulator's speed: runs each preset as a child `rocast sim`
    /// and prints its wall time, events, events per second and peak resident memory.
    /// Presets by name; `k64-permutation` is the 65,536-host k=64 fat-tree permutation
    /// of 1 MB flows (permutation-1024's model on the larger fabric).
    Sim {
        /// Comma-separated runs.
        #[arg(
            long,
            default_value = "permutation-1024,cepheus-fig12,peel-fig5,peel-fig6,peel-approx,ud-loss"
        )]
        runs: String,
        /// Scratch directory for the runs' outputs.
        #[arg(long, default_value = "out/bench-sim")]
        out: std::path::PathBuf,
        /// Extra `--set KEY=VALUE` for every run (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Comma-separated thread counts, each run once per count (`rocast sim
        /// --threads N`), with the speed-up and parallel efficiency against the first
        /// count. Without it each run uses every core.
        #[arg(long, value_name = "N,N,...")]
        threads: Option<String>,
        /// `rocast sim --partitions N` for every run (1: one engine, the sequential
        /// baseline of the speed-ups).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
        partitions: Option<u32>,
        /// Also print the rows (bench-sim.csv in --out) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build a k-ary fat-tree and precompute its ECMP routes; print time and memory.
    FatTree {
        /// The fat-tree's arity (even, 4 to 128).
        #[arg(long, default_value_t = 64)]
        k: u32,
        /// Print one JSON object instead of `key value` lines.
        #[arg(long)]
        json: bool,
    },
    /// PEEL's per-group planning time: a layer-peeling tree and its prefix covers on a
    /// fat-tree with failed links (PEEL §2.3, §3.2). Prints median and worst of --runs
    /// groups (destinations re-drawn per run).
    PeelTree {
        /// The fat-tree's arity (even, 4 to 128).
        #[arg(long, default_value_t = 64)]
        k: u32,
        /// Fraction of switch-to-switch links failed.
        #[arg(long, default_value_t = 0.05)]
        fail: f64,
        /// Destinations per group, drawn at random each run (`rocast tree --dst
        /// random:N` draws the same way).
        #[arg(long = "dst", alias = "dests", default_value_t = 512, value_name = "N")]
        dests: u32,
        /// Groups planned; median and worst are printed.
        #[arg(long, default_value_t = 20)]
        runs: u32,
        /// Seed of the failed links and the destinations.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print one JSON object instead of `key value` lines.
        #[arg(long)]
        json: bool,
    },
}

/// A comma-separated list of counts.
fn parse_list(s: &str, what: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|h| {
            h.trim()
                .parse::<usize>()
                .map_err(|_| format!("{what} {h:?}: not a count"))
        })
        .collect()
}

fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn run(cmd: BenchCmd) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    let r = run_inner(cmd);
    if r.is_ok() {
        eprintln!(
            "rocast bench: wall time {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    r
}

fn run_inner(cmd: BenchCmd) -> Result<(), String> {
    match cmd {
        BenchCmd::LabIops {
            io,
            ios,
            depth,
            rate,
            reps,
            json,
            out,
        } => crate::lab_bench::lab_iops(
            &rate,
            rocast_sim::scenario::config::parse_bytes(&io).map_err(|e| e.to_string())?,
            ios,
            depth.max(1),
            reps,
            &out,
            json,
        ),
        BenchCmd::LabBcast {
            hosts,
            sizes,
            schemes,
            rate,
            reps,
            tors,
            mpi,
            mpi_algorithms,
            fast_path,
            full,
            json,
            out,
        } => {
            let hosts = parse_list(&hosts, "--group-sizes")?;
            let sizes =
                rocast_sim::scenario::config::parse_sizes(&sizes).map_err(|e| e.to_string())?;
            let schemes: Vec<String> = schemes.split(',').map(|s| s.trim().to_string()).collect();
            for s in &schemes {
                if s != "cepheus" {
                    s.parse::<rocast_core::overlay::Scheme>()
                        .map_err(|e| e.to_string())?;
                }
            }
            crate::lab_bench::lab_bcast(&crate::lab_bench::LabBcastArgs {
                hosts,
                tors: tors.max(1),
                sizes,
                schemes,
                rate,
                reps,
                out,
                mpi,
                mpi_algorithms,
                fast_path,
                full,
                json,
            })
        }
        BenchCmd::LabLatency {
            receivers,
            sizes,
            samples,
            interval_us,
            rate,
            fast_path,
            json,
            out,
        } => crate::lab_bench::lab_latency(&crate::lab_bench::LabLatencyArgs {
            receivers: parse_list(&receivers, "--receivers")?,
            sizes: rocast_sim::scenario::config::parse_sizes(&sizes).map_err(|e| e.to_string())?,
            samples,
            interval_us: interval_us.max(1),
            rate,
            fast_path,
            json,
            out,
        }),
        BenchCmd::LabUd(args) => {
            let r = crate::ud_bench::lab_ud(&args);
            match r? {
                Ok(text) => {
                    print!("{text}");
                    Ok(())
                }
                Err(text) => {
                    print!("{text}");
                    Err("lab-ud: not every message was delivered exactly once (see above)".into())
                }
            }
        }
        BenchCmd::PeelTree {
            k,
            fail,
            dests,
            runs,
            seed,
            json,
        } => peel_tree(k, fail, dests, runs, seed, json),
        BenchCmd::Sim {
            runs,
            out,
            sets,
            threads,
            partitions,
            json,
        } => bench_sim(&runs, &out, &sets, threads.as_deref(), partitions, json),
        BenchCmd::Udp {
            size,
            message,
            iters,
            seconds,
            reps,
            json,
        } => {
            let args = rocast_net::udp_bench::UdpBenchArgs {
                size,
                message: rocast_sim::scenario::config::parse_bytes(&message)
                    .map_err(|e| e.to_string())? as usize,
                iters,
                seconds,
                reps: reps.max(1),
            };
            let r = rocast_net::udp_bench::run(&args, |line| eprintln!("{line}"))
                .map_err(|e| e.to_string())?;
            let table = rocast_net::udp_bench::table(&r, &args);
            let j = json.then(|| {
                let runs: Vec<serde_json::Value> = r
                    .iter()
                    .map(|x| {
                        serde_json::json!({
                            "raw_gbps": x.raw_gbps,
                            "raw_delivered": x.raw_delivered,
                            "perf_gbps": x.perf_gbps,
                            "perf_client_cpu_ns_per_packet": x.perf_cpu_ns.0,
                            "perf_server_cpu_ns_per_packet": x.perf_cpu_ns.1,
                        })
                    })
                    .collect();
                serde_json::Value::Array(runs)
            });
            crate::output::print_table_or_json(&table, j.as_ref());
            Ok(())
        }
        BenchCmd::Switch {
            receivers,
            payload,
            seconds,
            reps,
            json,
        } => {
            let args = rocast_net::switch_bench::SwitchBenchArgs {
                receivers: parse_list(&receivers, "--receivers")?,
                payload,
                seconds,
                reps: reps.max(1),
                exe: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
            };
            let rows = rocast_net::switch_bench::run(&args, |line| eprintln!("{line}"))
                .map_err(|e| e.to_string())?;
            let table = rocast_net::switch_bench::table(&rows, &args);
            let j = json.then(|| {
                let run = |m: &rocast_net::switch_bench::MediumRun| {
                    serde_json::json!({
                        "flat_out_pps": m.flat_out_pps,
                        "offered_pps": m.offered_pps,
                        "loss": m.loss,
                        "min_pps": m.min_pps,
                        "max_pps": m.max_pps,
                    })
                };
                let j: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "receivers": r.receivers,
                            "bridge": r.bridge.iter().map(run).collect::<Vec<_>>(),
                            "rocast": r.rocast.iter().map(run).collect::<Vec<_>>(),
                            "rocast_fast_path": r.fast.iter().map(run).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                serde_json::Value::Array(j)
            });
            crate::output::print_table_or_json(&table, j.as_ref());
            Ok(())
        }
        BenchCmd::FatTree { k, json } => {
            let tier = TierSpec::new(100_000_000_000, Duration::from_ns(1000));
            let t0 = std::time::Instant::now();
            let topo = Topology::fat_tree(k, 1, tier, tier, tier).map_err(|e| e.to_string())?;
            let build = t0.elapsed().as_secs_f64();
            let t1 = std::time::Instant::now();
            let routes = Routes::compute(&topo).map_err(|e| e.to_string())?;
            let route = t1.elapsed().as_secs_f64();
            let mut j = serde_json::json!({
                "k": k,
                "hosts": topo.num_hosts(),
                "switches": topo.num_switches(),
                "links": topo.links.len(),
                "build_s": build,
                "route_s": route,
                "total_s": build + route,
                "topology_mb": topo.memory_bytes() as f64 / 1e6,
                "routes_mb": routes.memory_bytes() as f64 / 1e6,
                "next_hop_groups": routes.num_groups(),
            });
            if let Some(kb) = peak_rss_kb() {
                j["peak_rss_mb"] = serde_json::json!(kb as f64 / 1024.0);
            }
            if json {
                print!("{}", crate::output::pretty(&j));
                return Ok(());
            }
            println!(
                "# fat-tree k={k}: {} hosts, {} switches, {} links",
                topo.num_hosts(),
                topo.num_switches(),
                topo.links.len()
            );
            println!("build_s {build:.3}");
            println!("route_s {route:.3}");
            println!("total_s {:.3}", build + route);
            println!("topology_mb {:.1}", topo.memory_bytes() as f64 / 1e6);
            println!(
                "routes_mb {:.1}  ({} next-hop groups)",
                routes.memory_bytes() as f64 / 1e6,
                routes.num_groups()
            );
            if let Some(kb) = peak_rss_kb() {
                println!("peak_rss_mb {:.1}", kb as f64 / 1024.0);
            }
            Ok(())
        }
    }
}

fn peel_tree(
    k: u32,
    fail: f64,
    dests: u32,
    runs: u32,
    seed: u64,
    json: bool,
) -> Result<(), String> {
    use rocast_core::plan::multicast_tree::layer_peeling_tree;
    use rocast_core::plan::prefix::{plan_group, CoverPolicy, PrefixLayout};
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let topo = crate::tree_cmd::topology_from_spec(&format!("fat-tree:k={k}"), fail, seed)
        .map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    let layout = PrefixLayout::from_topology(&topo).map_err(|e| e.to_string())?;
    let layout_s = t0.elapsed().as_secs_f64();
    let hosts = topo.num_hosts() as u32;
    if dests == 0 || dests >= hosts {
        return Err(format!("--dst must be 1..{}", hosts - 1));
    }
    let mut tree_ms = Vec::new();
    let mut cover_ms = Vec::new();
    let mut links = 0;
    let mut packets = 0;
    for r in 0..runs as u64 {
        let src = (r * 7919 % hosts as u64) as u32;
        let dst = rocast_sim::scenario::workload::sample_hosts(hosts, src, dests, seed + r);
        let t = std::time::Instant::now();
        let tree = layer_peeling_tree(&topo, src, &dst).map_err(|e| e.to_string())?;
        tree_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = std::time::Instant::now();
        let plan =
            plan_group(&topo, &layout, &tree, CoverPolicy::Exact).map_err(|e| e.to_string())?;
        cover_ms.push(t.elapsed().as_secs_f64() * 1e3);
        links += tree.arcs.len();
        packets += plan.packets.len();
    }
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() - 1])
    };
    let mut total: Vec<f64> = tree_ms.iter().zip(&cover_ms).map(|(a, b)| a + b).collect();
    let (tm, tw) = stat(&mut tree_ms);
    let (cm, cw) = stat(&mut cover_ms);
    let (am, aw) = stat(&mut total);
    if json {
        let j = serde_json::json!({
            "topology": topo.name,
            "hosts": hosts,
            "links": topo.links.len(),
            "failed_links": topo.links.iter().filter(|l| l.failed).count(),
            "destinations": dests,
            "groups": runs,
            "layout_ms": layout_s * 1e3,
            "tree_ms": {"median": tm, "worst": tw},
            "covers_ms": {"median": cm, "worst": cw},
            "tree_plus_covers_ms": {"median": am, "worst": aw},
            "mean_tree_links": links as f64 / runs as f64,
            "mean_packets_per_message": packets as f64 / runs as f64,
        });
        print!("{}", crate::output::pretty(&j));
        return Ok(());
    }
    println!(
        "# {}: {} hosts, {} links ({} failed), {dests} destinations, {runs} groups",
        topo.name,
        hosts,
        topo.links.len(),
        topo.links.iter().filter(|l| l.failed).count()
    );
    println!(
        "layout_ms {:.2}  (once per fabric: pods, rack ids, rules)",
        layout_s * 1e3
    );
    println!("tree_ms median {tm:.2} worst {tw:.2}");
    println!("covers_ms median {cm:.2} worst {cw:.2}");
    println!("tree_plus_covers_ms median {am:.2} worst {aw:.2}  (target < 10)");
    println!(
        "mean tree links {:.1}, mean packets per message {:.1}",
        links as f64 / runs as f64,
        packets as f64 / runs as f64
    );
    Ok(())
}

/// The `--set`s of a named run beyond the presets.
fn bench_run_args(run: &str) -> Vec<String> {
    match run {
        "k64-permutation" => vec![
            "--preset".into(),
            "permutation-1024".into(),
            "--set".into(),
            "topology.k=64".into(),
            "--set".into(),
            "workload.size_bytes=1000000".into(),
        ],
        preset => vec!["--preset".into(), preset.into()],
    }
}

/// The thread counts of `--threads` (`None`: one run on every core).
fn thread_counts(list: Option<&str>) -> Result<Vec<Option<u32>>, String> {
    let Some(list) = list else {
        return Ok(vec![None]);
    };
    let counts: Result<Vec<Option<u32>>, String> = list
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| match t.parse::<u32>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "--threads: {t:?} is not a thread count from 1 to 1024"
            )),
        })
        .collect();
    let counts = counts?;
    if counts.is_empty() {
        return Err("--threads: no thread count given".into());
    }
    Ok(counts)
}

/// `rocast bench sim` (see [`BenchCmd::Sim`]).
fn bench_sim(
    runs: &str,
    out: &std::path::Path,
    sets: &[String],
    threads: Option<&str>,
    partitions: Option<u32>,
    json: bool,
) -> Result<(), String> {
    use std::fmt::Write as _;
    let counts = thread_counts(threads)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut csv = String::from(
        "run,threads,wall_s,events,mevents_per_s,speedup,efficiency,peak_rss_mb,exit_status\n",
    );
    println!(
        "# rocast bench sim: one child `rocast sim` per run, one at a time, on {} ({} cores)",
        std::env::consts::ARCH,
        rocast_sim::run::threads_for(0)
    );
    println!(
        "{:<18} {:>7} {:>9} {:>14} {:>10} {:>8} {:>6} {:>12}  status",
        "run", "threads", "wall_s", "events", "Mevents/s", "speedup", "eff", "peak_rss_mb"
    );
    for run in runs.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        // (threads, wall) of the run's first count: the base of its speed-ups.
        let mut base: Option<(f64, f64)> = None;
        for &count in &counts {
            let dir = out.join(match count {
                Some(n) => format!("{run}-t{n}"),
                None => run.to_string(),
            });
            let mut cmd = std::process::Command::new(&exe);
            cmd.arg("sim")
                .args(bench_run_args(run))
                .arg("--quiet")
                .arg("--no-plot")
                .arg("--out")
                .arg(&dir)
                .env("ROCAST_BENCH_EVENTS", "1")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            if let Some(n) = count {
                cmd.arg("--threads").arg(n.to_string());
            }
            if let Some(p) = partitions {
                cmd.arg("--partitions").arg(p.to_string());
            }
            for s in sets {
                cmd.arg("--set").arg(s);
            }
            let t0 = std::time::Instant::now();
            let child = cmd.spawn().map_err(|e| format!("{run}: {e}"))?;
            let (status, rss_kb, stderr) = wait_with_rusage(child)?;
            let wall = t0.elapsed().as_secs_f64();
            let events: Option<u64> = stderr.lines().find_map(|l| {
                l.strip_prefix("rocast-bench events ")
                    .and_then(|v| v.trim().parse().ok())
            });
            let n = rocast_sim::run::threads_for(count.unwrap_or(0) as usize) as f64;
            let (base_n, base_wall) = *base.get_or_insert((n, wall));
            let speedup = base_wall / wall.max(1e-9);
            let efficiency = speedup / (n / base_n);
            let ev = events.map_or("-".to_string(), |e| e.to_string());
            let rate = events.map_or("-".to_string(), |e| format!("{:.2}", e as f64 / wall / 1e6));
            let ok = if status == 0 {
                "ok".to_string()
            } else {
                let last = stderr.lines().last().unwrap_or("").to_string();
                format!("exit {status}: {last}")
            };
            let shown = count.map_or("all".to_string(), |n| n.to_string());
            println!(
                "{run:<18} {shown:>7} {wall:>9.1} {ev:>14} {rate:>10} {speedup:>8.2} {:>5.0}% {:>12.1}  {ok}",
                efficiency * 100.0,
                rss_kb as f64 / 1024.0
            );
            let _ = writeln!(
                csv,
                "{run},{n},{wall:.2},{},{},{speedup:.3},{efficiency:.3},{:.1},{status}",
                events.map_or(String::new(), |e| e.to_string()),
                events.map_or(String::new(), |e| format!("{:.3}", e as f64 / wall / 1e6)),
                rss_kb as f64 / 1024.0
            );
        }
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let path = out.join("bench-sim.csv");
    std::fs::write(&path, &csv).map_err(|e| format!("{}: {e}", path.display()))?;
    if json {
        print!(
            "{}",
            crate::output::pretty(&crate::output::csv_to_json(&csv)?)
        );
    }
    Ok(())
}

/// Waits for `child`, reading its stderr; its exit code, peak RSS (KiB) and stderr.
fn wait_with_rusage(mut child: std::process::Child) -> Result<(i32, i64, String), String> {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid (integers only); `pid` is our child, not yet
    // waited for, and wait4 writes only into `status` and `ru`. Raw because no safe
    // wrapper (std, rustix) returns a child's rusage with its status.
    let (r, ru) = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        (libc::wait4(pid, &mut status, 0, &mut ru), ru)
    };
    if r != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((code, ru.ru_maxrss, err))
}
