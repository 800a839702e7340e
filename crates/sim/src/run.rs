//! Running a scenario: build the topology and routes, generate the workload, run the
//! engine in slices (rewriting `summary.json` and the progress bar between slices), and
//! write the outputs:
//!
//! - `fct.txt`: HPCC format, `sip dip sport dport size start_ns fct_ns standalone_fct_ns`
//!   (addresses in hex), one line per finished flow in completion order;
//! - `summary.json`: totals, FCT percentiles and slowdowns, conservation check;
//! - `ports.csv`: per-port counters;
//! - `pfc.txt` / `qlen.txt` on request; `capture.pcap` for the chosen links.

use crate::config::Scenario;
use crate::engine::{Engine, EngineConfig, FlowResult};
use crate::workload;
use rocast_core::fabric::cepheus::CnpFilterPolicy;
use rocast_core::fabric::EcnRed;
use rocast_core::plan::{TierSpec, Topology};
use rocast_core::rnic::{DcqcnConfig, Retransmission};
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::pcap::{PcapWriter, LINKTYPE_ETHERNET};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Where outputs go; `None` writes nothing (tests, benchmarks).
    pub out_dir: Option<PathBuf>,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub summary_json: String,
    pub fct_txt: String,
    pub results: Vec<FlowResult>,
    pub totals: crate::engine::Totals,
    pub sim_end: Instant,
    pub wall_s: f64,
    pub setup_s: f64,
    pub imbalance_bytes: i128,
    pub links_unbalanced: u64,
    pub hosts: usize,
    pub switches: usize,
}

/// The topology and engine settings of the built-in defaults plus `--set`-style
/// overrides (`"topology.k=4"`), for code and tests that drive an engine directly.
pub fn fabric_with(sets: &[&str]) -> Result<(Topology, EngineConfig), String> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = Scenario::from_toml("", &sets).map_err(|e| e.to_string())?;
    let topo = build_topology(&sc, Path::new("."))?;
    let cfg = engine_config(&sc, &topo)?;
    Ok((topo, cfg))
}

pub fn build_topology(sc: &Scenario, base: &Path) -> Result<Topology, String> {
    let t = &sc.topology;
    let gbps = |g: f64| (g * 1e9).round() as u64;
    let tier = |g: f64, ns: u64| TierSpec::new(gbps(g), Duration::from_ns(ns));
    let mut topo = match t.kind.as_str() {
        "fat-tree" => Topology::fat_tree_with_gpus(
            t.k,
            t.oversubscription,
            t.gpus_per_host,
            tier(t.host_gbps, t.host_delay_ns),
            tier(t.fabric_gbps, t.fabric_delay_ns),
            tier(t.core_gbps, t.core_delay_ns),
            tier(t.gpu_gbps, t.gpu_delay_ns),
        ),
        "leaf-spine" => Topology::leaf_spine(
            t.spines,
            t.leaves,
            t.hosts_per_leaf,
            t.gpus_per_host,
            tier(t.host_gbps, t.host_delay_ns),
            tier(t.fabric_gbps, t.fabric_delay_ns),
            tier(t.gpu_gbps, t.gpu_delay_ns),
        ),
        _ => {
            let path = base.join(&t.file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("topology.file {}: {e}", path.display()))?;
            Topology::from_hpcc_file(&text)
        }
    }
    .map_err(|e| format!("topology: {e}"))?;
    if t.link_loss > 0.0 {
        for l in &mut topo.links {
            l.loss = t.link_loss;
        }
    }
    if t.fail_fraction > 0.0 {
        topo.fail_fraction(t.fail_fraction, sc.seed)
            .map_err(|e| format!("topology.fail_fraction: {e}"))?;
    }
    for &[a, b] in &t.fail_links {
        topo.fail_link(a, b)
            .map_err(|e| format!("topology.fail_links: {e}"))?;
    }
    Ok(topo)
}

/// The link between the two nodes a scenario key names.
fn link_between(topo: &Topology, [a, b]: [u32; 2], key: &str) -> Result<u32, String> {
    topo.find_link(a, b)
        .ok_or_else(|| format!("{key}: no link between nodes {a} and {b}"))
}

pub fn engine_config(sc: &Scenario, topo: &Topology) -> Result<EngineConfig, String> {
    let n = &sc.nic;
    let s = &sc.switch;
    let capture_links = sc
        .output
        .capture_links
        .iter()
        .map(|&l| link_between(topo, l, "output.capture_links"))
        .collect::<Result<Vec<_>, _>>()?;
    let host_rate = (sc.topology.host_gbps * 1e9) as u64;
    Ok(EngineConfig {
        seed: sc.seed,
        mtu: n.mtu,
        window: n.window,
        retransmission: if n.retransmission == "selective-repeat" {
            Retransmission::SelectiveRepeat
        } else {
            Retransmission::GoBackN
        },
        rto: Duration::from_us(n.rto_us),
        ack_every: n.ack_every,
        cnp_interval: Duration::from_us(n.cnp_interval_us),
        dcqcn: match (n.cc.as_str(), n.dcqcn_preset.as_str()) {
            ("dcqcn", "paper") => Some(DcqcnConfig::paper(host_rate)),
            ("dcqcn", _) => Some(DcqcnConfig::hpcc(host_rate)),
            _ => None,
        }
        .map(|mut d| {
            if n.cnp_guard_us > 0 {
                d.decrease_interval = Duration::from_us(n.cnp_guard_us);
            }
            d
        }),
        lossless: s.lossless,
        buffer_bytes: (s.buffer_mb * 1024.0 * 1024.0) as u64,
        reserve_bytes: s.reserve_bytes,
        resume_offset_bytes: s.resume_offset_bytes,
        headroom_bytes: s.headroom_bytes,
        alpha_shift: s.alpha_shift,
        ecn: s.ecn.then_some(EcnRed {
            kmin_bytes: (s.kmin_kb * 1000.0) as u64,
            kmax_bytes: (s.kmax_kb * 1000.0) as u64,
            pmax: s.pmax,
        }),
        pfc_log: sc.output.pfc_log,
        qlen_interval: (sc.output.qlen_interval_us > 0.0)
            .then(|| Duration::from_ps((sc.output.qlen_interval_us * 1e6) as u64)),
        capture_links,
        capture_max_packets: sc.output.capture_max_packets,
        carry_payload: false,
        mft_max_groups: 1024,
        // Validated with the scenario (`Scenario::validate`).
        cnp_filter: CnpFilterPolicy::from_name(&s.cnp_filter, Duration::from_us(s.cnp_window_us))
            .map_err(|e| format!("switch.cnp_filter: {e}"))?,
        control_latency: Duration::from_us(10),
    })
}

/// Runs `sc`; relative file names in it resolve against `base`.
pub fn run_scenario(sc: &Scenario, base: &Path, opts: &RunOptions) -> Result<RunReport, String> {
    let t0 = std::time::Instant::now();
    let topo = build_topology(sc, base)?;
    let cfg = engine_config(sc, &topo)?;
    let host_rate = (sc.topology.host_gbps * 1e9) as u64;
    let read = |p: &str| std::fs::read_to_string(base.join(p)).map_err(|e| e.to_string());
    let flows = workload::generate(
        &sc.workload,
        topo.num_hosts() as u32,
        host_rate,
        sc.seed,
        &read,
    )
    .map_err(|e| e.to_string())?;
    let (hosts, switches) = (topo.num_hosts(), topo.num_switches());
    let mut link_events = Vec::new();
    for ev in &sc.link_events {
        let l = link_between(&topo, ev.link, "link_events")?;
        link_events.push((Instant::from_ps((ev.at_us * 1e6) as u64), l, ev.up));
    }
    let mut engine = Engine::new(topo, cfg, flows)?;
    for (at, l, up) in link_events {
        engine.schedule_link_change(at, l, up);
    }
    let setup_s = t0.elapsed().as_secs_f64();
    if let Some(dir) = &opts.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let stop = Instant::from_ps((sc.stop_ms * 1e9) as u64);
    let slice = Duration::from_ps(((sc.output.summary_interval_ms.max(0.001)) * 1e9) as u64);
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(stop.as_ps() / 1_000_000);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} sim {pos}/{len} µs [{bar:30}] wall {elapsed} {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Some(b)
    } else {
        None
    };
    let run_start = std::time::Instant::now();
    let mut next = Instant::ZERO;
    loop {
        next = if next + slice > stop {
            stop
        } else {
            next + slice
        };
        let more = engine.run_until(next);
        let wall = run_start.elapsed().as_secs_f64();
        if let Some(b) = &bar {
            b.set_position(engine.now().as_ps() / 1_000_000);
            b.set_message(format!(
                "{:.1} M events/s, {} flows left",
                engine.totals.events as f64 / wall.max(1e-9) / 1e6,
                engine.flows_outstanding()
            ));
        }
        let done = !more || engine.flows_outstanding() == 0 || next >= stop;
        if let Some(dir) = &opts.out_dir {
            if !done {
                let s = summary_json(sc, &engine, hosts, switches, wall, setup_s, None);
                write_atomic(&dir.join("summary.json"), &s)?;
            }
        }
        if done {
            break;
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let wall_s = run_start.elapsed().as_secs_f64();
    let imbalance = engine.finalize();
    let links_unbalanced = engine.link_imbalance();
    let summary = summary_json(
        sc,
        &engine,
        hosts,
        switches,
        wall_s,
        setup_s,
        Some((imbalance, links_unbalanced)),
    );
    let fct = fct_txt(&engine.results);
    if let Some(dir) = &opts.out_dir {
        write_atomic(&dir.join("summary.json"), &summary)?;
        if sc.output.fct {
            write_atomic(&dir.join("fct.txt"), &fct)?;
        }
        let mut csv = String::from("node,port,link,tx_packets,tx_bytes,rx_bytes,link_drops,queue_drops,ecn_marks,pauses_sent,pauses_received,paused_ns\n");
        for (node, port, link, c) in engine.port_counters() {
            let _ = writeln!(
                csv,
                "{node},{port},{link},{},{},{},{},{},{},{},{},{}",
                c.tx_packets,
                c.tx_bytes,
                c.rx_bytes,
                c.link_drops,
                c.queue_drops,
                c.ecn_marks,
                c.pauses_sent,
                c.pauses_received,
                c.paused_ps / 1000
            );
        }
        write_atomic(&dir.join("ports.csv"), &csv)?;
        if sc.output.pfc_log {
            let mut s = String::from(
                "# time_ns node node_type(0 host,1 switch) port pause(1)/resume(0) class\n",
            );
            for l in &engine.pfc_log {
                s.push_str(l);
                s.push('\n');
            }
            write_atomic(&dir.join("pfc.txt"), &s)?;
        }
        if sc.output.qlen_interval_us > 0.0 {
            let mut s = String::from("# time_ns switch port class bytes (non-empty queues only)\n");
            for l in &engine.qlen_log {
                s.push_str(l);
                s.push('\n');
            }
            write_atomic(&dir.join("qlen.txt"), &s)?;
        }
        if !sc.output.capture_links.is_empty() {
            let path = dir.join("capture.pcap");
            let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut w = PcapWriter::new(std::io::BufWriter::new(f), LINKTYPE_ETHERNET)
                .map_err(|e| e.to_string())?;
            for (t, frame) in &engine.capture {
                w.write_record(t / 1000, frame).map_err(|e| e.to_string())?;
            }
            use std::io::Write as _;
            w.into_inner().flush().map_err(|e| e.to_string())?;
        }
    }
    Ok(RunReport {
        summary_json: summary,
        fct_txt: fct,
        results: std::mem::take(&mut engine.results),
        totals: engine.totals.clone(),
        sim_end: engine.last_event(),
        wall_s,
        setup_s,
        imbalance_bytes: imbalance,
        links_unbalanced,
        hosts,
        switches,
    })
}

fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// HPCC `fct.txt`: finished flows in completion order (ties by flow index).
pub fn fct_txt(results: &[FlowResult]) -> String {
    let mut done: Vec<(u64, usize)> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.finish_ps.map(|t| (t, i)))
        .collect();
    done.sort_unstable();
    let mut s = String::with_capacity(done.len() * 64);
    for (_, i) in done {
        let r = &results[i];
        let fin = r.finish_ps.expect("finished");
        let _ = writeln!(
            s,
            "{:08x} {:08x} {} 4791 {} {} {} {}",
            crate::packet::host_ip(r.src),
            crate::packet::host_ip(r.dst),
            r.sport,
            r.size,
            r.start_ps / 1000,
            (fin - r.start_ps) / 1000,
            r.standalone_ps / 1000
        );
    }
    s
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i]
}

/// Finished flows' FCTs in µs and their slowdowns (FCT / standalone FCT, at least 1),
/// each sorted ascending.
fn fct_stats(results: &[FlowResult]) -> (Vec<f64>, Vec<f64>) {
    let mut fcts = Vec::new();
    let mut slow = Vec::new();
    for r in results {
        if let Some(f) = r.finish_ps {
            let fct = (f - r.start_ps) as f64;
            fcts.push(fct / 1e6);
            if r.standalone_ps > 0 {
                slow.push((fct / r.standalone_ps as f64).max(1.0));
            }
        }
    }
    fcts.sort_by(|a, b| a.total_cmp(b));
    slow.sort_by(|a, b| a.total_cmp(b));
    (fcts, slow)
}

fn summary_json(
    sc: &Scenario,
    e: &Engine,
    hosts: usize,
    switches: usize,
    wall_s: f64,
    setup_s: f64,
    conservation: Option<(i128, u64)>,
) -> String {
    let t = &e.totals;
    let (fcts, slow) = fct_stats(&e.results);
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\n  \"scenario\": {:?},\n  \"seed\": {},\n  \"topology\": {:?},\n  \"hosts\": {hosts},\n  \"switches\": {switches},\n  \"finished\": {},\n",
        sc.name,
        sc.seed,
        e.topo.name,
        conservation.is_some()
    );
    let _ = write!(
        s,
        "  \"sim_time_us\": {:.3},\n  \"wall_s\": {wall_s:.3},\n  \"setup_s\": {setup_s:.3},\n  \"events\": {},\n  \"events_per_s\": {:.0},\n",
        e.last_event().as_ps() as f64 / 1e6,
        t.events,
        t.events as f64 / wall_s.max(1e-9)
    );
    let _ = write!(
        s,
        "  \"flows\": {{\"total\": {}, \"started\": {}, \"finished\": {}, \"failed\": {}}},\n",
        e.results.len(),
        t.flows_started,
        t.flows_finished,
        t.flows_failed
    );
    let _ = write!(
        s,
        "  \"fct_us\": {{\"mean\": {:.3}, \"p50\": {:.3}, \"p99\": {:.3}, \"max\": {:.3}}},\n  \"slowdown\": {{\"mean\": {:.4}, \"p50\": {:.4}, \"p99\": {:.4}}},\n",
        mean(&fcts),
        percentile(&fcts, 50.0),
        percentile(&fcts, 99.0),
        fcts.last().copied().unwrap_or(0.0),
        mean(&slow),
        percentile(&slow, 50.0),
        percentile(&slow, 99.0)
    );
    let _ = write!(
        s,
        "  \"bytes\": {{\"host_tx\": {}, \"host_rx\": {}, \"dropped\": {}}},\n  \"drops\": {{\"link\": {}, \"queue\": {}, \"unroutable\": {}}},\n",
        t.host_tx_bytes, t.host_rx_bytes, t.drop_bytes, t.link_drops, t.queue_drops, t.unroutable
    );
    let _ = write!(
        s,
        "  \"ecn_marks\": {},\n  \"pfc_pauses\": {},\n  \"cnps\": {},\n  \"retransmitted_packets\": {},\n  \"timeouts\": {},\n  \"stale_packets\": {},\n  \"peak_packet_records\": {}",
        t.ecn_marks, t.pauses, t.cnps, t.retransmitted, t.timeouts, t.stale_packets, t.peak_packets
    );
    if let Some((imb, links)) = conservation {
        let _ = write!(
            s,
            ",\n  \"conservation\": {{\"end_to_end_imbalance_bytes\": {imb}, \"links_unbalanced\": {links}}}"
        );
    }
    s.push_str("\n}\n");
    s
}

/// A short human-readable summary of a report.
pub fn render_summary(r: &RunReport) -> String {
    let (fcts, slow) = fct_stats(&r.results);
    let t = &r.totals;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hosts {}  switches {}  flows {} finished, {} failed, {} total",
        r.hosts,
        r.switches,
        t.flows_finished,
        t.flows_failed,
        r.results.len()
    );
    let _ = writeln!(
        s,
        "simulated {:.1} µs in {:.2} s wall (+{:.2} s setup): {} events, {:.2} M events/s",
        r.sim_end.as_ps() as f64 / 1e6,
        r.wall_s,
        r.setup_s,
        t.events,
        t.events as f64 / r.wall_s.max(1e-9) / 1e6
    );
    let _ = writeln!(
        s,
        "FCT µs      p50 {:>10.1}  p99 {:>10.1}  max {:>10.1}",
        percentile(&fcts, 50.0),
        percentile(&fcts, 99.0),
        fcts.last().copied().unwrap_or(0.0)
    );
    let _ = writeln!(
        s,
        "slowdown    p50 {:>10.3}  p99 {:>10.3}",
        percentile(&slow, 50.0),
        percentile(&slow, 99.0)
    );
    let _ = writeln!(s, "ECN marks {}  CNPs {}  PFC pauses {}  drops: link {} queue {} unroutable {}  retransmitted {}  timeouts {}", t.ecn_marks, t.cnps, t.pauses, t.link_drops, t.queue_drops, t.unroutable, t.retransmitted, t.timeouts);
    let _ = writeln!(
        s,
        "bytes: hosts sent {} = received {} + dropped {} (imbalance {})",
        t.host_tx_bytes, t.host_rx_bytes, t.drop_bytes, r.imbalance_bytes
    );
    s
}
