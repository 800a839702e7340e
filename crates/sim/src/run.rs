//! Running a scenario: build the fabric (`scenario::topology`), generate the
//! workload, run the engine in slices (rewriting `summary.json` and the progress bar
//! between slices), and write the outputs (`output`): `fct.txt`, `summary.json`,
//! `ports.csv`, `pfc.txt` / `qlen.txt` on request and `capture.pcap` for the chosen
//! links.

use crate::engine::partition::{self, PartitionedEngine};
use crate::engine::{Engine, EngineError, Totals};
use crate::output::fct::fct_txt;
use crate::output::files::{capture_pcap, event_log, ports_csv, write_atomic, OutputError};
use crate::output::summary::{summary_json, RunView};
pub use crate::output::summary::{Execution, RunReport, RunSample};
use crate::scenario::topology::{build_topology, engine_config, link_between, TopologyError};
use crate::scenario::workload::WorkloadError;
use crate::scenario::{workload, Scenario};
use rocast_core::time::{Duration, Instant};
use std::path::{Path, PathBuf};

/// Why a scenario run failed: each stage's error, unchanged.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Output(#[from] OutputError),
    /// [`RunOptions::cancel`] was set (Ctrl-C in Python): the run stopped between two
    /// steps and wrote nothing more.
    #[error("cancelled at {0} of simulated time")]
    Cancelled(Instant),
}

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Where outputs go; `None` writes nothing (tests, benchmarks).
    pub out_dir: Option<PathBuf>,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Worker threads for a partitioned run (0: every core). The outputs do not
    /// depend on it.
    pub threads: usize,
    /// The most partitions a flow-level run is cut into (0: up to
    /// [`partition::MAX_PARTITIONS`]; 1: one engine). Outputs depend on it (events at
    /// one instant in different partitions have no order between them, and each
    /// partition draws its own random stream), never on `threads`.
    pub partitions: usize,
    /// Set from another thread to stop the run at its next step (a few hundred
    /// thousand events at most): how Python's Ctrl-C reaches a run it does not hold.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// The simulator a run drives: one engine, or partitions on worker threads.
enum Sim {
    One(Box<Engine>),
    Many(PartitionedEngine),
}

impl Sim {
    fn run_until(&mut self, t: Instant) -> bool {
        match self {
            Sim::One(e) => e.run_until(t),
            Sim::Many(p) => p.run_until(t),
        }
    }
    /// Flows not yet finished: what each step checks (a view copies every flow's
    /// result in a partitioned run; only samples need that).
    fn flows_outstanding(&self) -> u64 {
        match self {
            Sim::One(e) => e.flows_outstanding(),
            Sim::Many(p) => p.flows_outstanding(),
        }
    }
    /// The counters the progress bar shows, and the simulated time.
    fn progress(&self) -> (Totals, Instant) {
        match self {
            Sim::One(e) => (e.totals_now(), e.now()),
            Sim::Many(p) => (p.totals_now(), p.now()),
        }
    }
    fn view(&self) -> RunView<'_> {
        match self {
            Sim::One(e) => RunView::of(e),
            Sim::Many(p) => RunView::of_partitioned(p),
        }
    }
    /// The engine the outputs read, with the conservation checks.
    fn finish(self) -> (Engine, i128, u64) {
        match self {
            Sim::One(mut e) => {
                let imbalance = e.finalize();
                let links = e.link_imbalance();
                (*e, imbalance, links)
            }
            Sim::Many(p) => p.finish(),
        }
    }
}

/// Worker threads for `requested` (0: every core).
pub fn threads_for(requested: usize) -> usize {
    if requested > 0 {
        requested
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Runs `sc`; relative file names in it resolve against `base`.
pub fn run_scenario(sc: &Scenario, base: &Path, opts: &RunOptions) -> Result<RunReport, RunError> {
    let t0 = std::time::Instant::now();
    let topo = build_topology(sc, base)?;
    let cfg = engine_config(sc, &topo)?;
    let host_rate = (sc.topology.host_gbps * 1e9) as u64;
    let read = |p: &str| std::fs::read_to_string(base.join(p));
    let flows = workload::generate(
        &sc.workload,
        topo.num_hosts() as u32,
        host_rate,
        sc.seed,
        &read,
    )?;
    let (hosts, switches) = (topo.num_hosts(), topo.num_switches());
    let mut link_events = Vec::new();
    for ev in &sc.link_events {
        let l = link_between(&topo, ev.link, "link_events")?;
        link_events.push((Instant::from_ps((ev.at_us * 1e6) as u64), l, ev.up));
    }
    let threads = threads_for(opts.threads);
    let flow_bytes: u64 = flows.iter().map(|f| f.size).sum();
    let (mut engine, execution) = match partition::plan(&topo, &cfg, &flows, opts.partitions) {
        Ok(plan) => {
            let execution = Execution::Partitioned {
                partitions: plan.parts,
                threads: threads.min(plan.parts),
                lookahead_ps: plan.lookahead_ps,
            };
            let p = PartitionedEngine::new(topo, cfg, flows, plan, threads)?;
            (Sim::Many(p), execution)
        }
        Err(why) => (
            Sim::One(Box::new(Engine::new(topo, cfg, flows)?)),
            Execution::Single(why),
        ),
    };
    for (at, l, up) in link_events {
        match &mut engine {
            Sim::One(e) => e.schedule_link_change(at, l, up),
            Sim::Many(p) => p.schedule_link_change(at, l, up),
        }
    }
    let setup_s = t0.elapsed().as_secs_f64();
    if let Some(dir) = &opts.out_dir {
        std::fs::create_dir_all(dir).map_err(OutputError::io(dir))?;
    }
    let stop = Instant::from_ps((sc.stop_ms * 1e9) as u64);
    let slice = Duration::from_ps(((sc.output.summary_interval_ms.max(0.001)) * 1e9) as u64);
    // The bar measures work: bytes the hosts have received against the flows' bytes
    // (headers and ACKs count too, so it may near the end early; it stops at 99 %
    // until the last flow is done). Simulated time has no known end: `stop_ms` is a
    // cap, and a run usually ends long before it.
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(flow_bytes.max(1));
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} sim [{bar:30}] {percent:>3}% of {total_bytes} received, wall {elapsed}, eta {eta} {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Some(b)
    } else {
        None
    };
    // The run advances in steps short enough for the bar to move (a few hundred
    // thousand events each on a busy fabric); samples and summary.json follow
    // `summary_interval_ms` as before. Steps move no event (engines run by time, and
    // a partitioned run's barriers do not depend on them).
    let step = Duration::from_ps(slice.as_ps().min(20_000_000));
    let run_start = std::time::Instant::now();
    let mut next = Instant::ZERO;
    let mut next_sample = Instant::ZERO + slice;
    let mut samples = Vec::new();
    loop {
        // Never past a sample's time, so samples fall where they always did.
        next = [next + step, next_sample, stop]
            .into_iter()
            .min()
            .expect("three times");
        let more = engine.run_until(next);
        if opts
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        {
            if let Some(b) = &bar {
                b.abandon();
            }
            return Err(RunError::Cancelled(next));
        }
        let wall = run_start.elapsed().as_secs_f64();
        let outstanding = engine.flows_outstanding();
        let done = !more || outstanding == 0 || next >= stop;
        if let Some(b) = &bar {
            let (totals, now) = engine.progress();
            let got = totals.host_rx_bytes.min(flow_bytes);
            b.set_position(if done {
                flow_bytes
            } else {
                got.min(flow_bytes * 99 / 100)
            });
            b.set_message(format!(
                "| t {:.1} µs, {} flows left, {:.1} M events/s",
                now.as_ps() as f64 / 1e6,
                outstanding,
                totals.events as f64 / wall.max(1e-9) / 1e6
            ));
        }
        if next < next_sample && !done {
            continue;
        }
        let view = engine.view();
        next_sample = next_sample + slice;
        samples.push(RunSample::of(&view, wall));
        if let Some(dir) = &opts.out_dir {
            if !done {
                let s = summary_json(sc, &view, hosts, switches, wall, setup_s, None);
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
    let (mut engine, imbalance, links_unbalanced) = engine.finish();
    let summary = summary_json(
        sc,
        &RunView::of(&engine),
        hosts,
        switches,
        wall_s,
        setup_s,
        Some((imbalance, links_unbalanced)),
    );
    let fct = fct_txt(&engine.flows.results);
    let ports = ports_csv(&engine);
    if let Some(dir) = &opts.out_dir {
        write_atomic(&dir.join("summary.json"), &summary)?;
        if sc.output.fct {
            write_atomic(&dir.join("fct.txt"), &fct)?;
        }
        write_atomic(&dir.join("ports.csv"), &ports)?;
        if sc.output.pfc_log {
            let head = "# time_ns node node_type(0 host,1 switch) port pause(1)/resume(0) class\n";
            write_atomic(
                &dir.join("pfc.txt"),
                &event_log(head, &engine.stats.pfc_log),
            )?;
        }
        if sc.output.qlen_interval_us > 0.0 {
            let head = "# time_ns switch port class bytes (non-empty queues only)\n";
            write_atomic(
                &dir.join("qlen.txt"),
                &event_log(head, &engine.stats.qlen_log),
            )?;
        }
        if !sc.output.capture_links.is_empty() {
            capture_pcap(&dir.join("capture.pcap"), &engine.stats.capture)?;
        }
    }
    Ok(RunReport {
        summary_json: summary,
        fct_txt: fct,
        results: std::mem::take(&mut engine.flows.results),
        totals: engine.totals_now(),
        sim_end: engine.last_event(),
        wall_s,
        setup_s,
        imbalance_bytes: imbalance,
        links_unbalanced,
        hosts,
        switches,
        ports_csv: ports,
        samples,
        execution,
    })
}
