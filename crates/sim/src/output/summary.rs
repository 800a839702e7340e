//! What a run measured ([`RunReport`]), `summary.json` (totals, FCT percentiles and
//! slowdowns, the conservation check) and the short summary `rocast sim` prints.
//!
//! `summary.json` is serialised by serde from [`SummaryJson`] (its field names are the
//! file's documented keys); floats are rounded to the decimals they carry (µs to 3,
//! slowdowns to 4) so that the file's bytes do not depend on the last bits of a sum.

use crate::engine::{Engine, FlowResult, PartitionedEngine, Totals};
use crate::output::fct::fct_stats;
use crate::output::stats::{mean, percentile_rounded_rank as percentile};
use crate::scenario::Scenario;
use rocast_core::time::Instant;
use std::borrow::Cow;
use std::fmt::Write as _;

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub summary_json: String,
    pub fct_txt: String,
    pub results: Vec<FlowResult>,
    pub totals: Totals,
    pub sim_end: Instant,
    pub wall_s: f64,
    pub setup_s: f64,
    pub imbalance_bytes: i128,
    pub links_unbalanced: u64,
    pub hosts: usize,
    pub switches: usize,
    /// `ports.csv`: every port's counters at the end of the run.
    pub ports_csv: String,
    /// The run's progress, one sample per `output.summary_interval_ms` of simulated
    /// time (and one at the end).
    pub samples: Vec<RunSample>,
    /// Partitions and threads, or why one engine ran it.
    pub execution: Execution,
}

/// How a run was executed: its partitions and worker threads, or why it ran on one
/// engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Execution {
    Partitioned {
        partitions: usize,
        threads: usize,
        lookahead_ps: u64,
    },
    Single(crate::engine::partition::Serial),
}

impl std::fmt::Display for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Execution::Partitioned {
                partitions,
                threads,
                lookahead_ps,
            } => write!(
                f,
                "{partitions} partitions on {threads} thread{}, lookahead {} ns",
                if *threads == 1 { "" } else { "s" },
                *lookahead_ps as f64 / 1000.0
            ),
            Execution::Single(why) => write!(f, "one engine: {why}"),
        }
    }
}

/// One sample of a run's progress: cumulative counters at simulated time `sim_us`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSample {
    pub sim_us: f64,
    pub wall_s: f64,
    pub events: u64,
    pub flows_finished: u64,
    pub flows_outstanding: u64,
    pub host_tx_bytes: u64,
    pub host_rx_bytes: u64,
    pub drops: u64,
    pub ecn_marks: u64,
    pub pauses: u64,
    pub cnps: u64,
}

/// What the summaries read from a run in progress or ended: one engine's state, or a
/// partitioned run's merged.
pub(crate) struct RunView<'a> {
    pub totals: Totals,
    pub results: Cow<'a, [FlowResult]>,
    pub topology: &'a str,
    pub now: Instant,
    pub last_event: Instant,
    pub flows_outstanding: u64,
}

impl<'a> RunView<'a> {
    pub(crate) fn of(e: &'a Engine) -> Self {
        RunView {
            totals: e.totals_now(),
            results: Cow::Borrowed(&e.flows.results),
            topology: &e.topology().name,
            now: e.now(),
            last_event: e.last_event(),
            flows_outstanding: e.flows_outstanding(),
        }
    }

    pub(crate) fn of_partitioned(e: &'a PartitionedEngine) -> Self {
        RunView {
            totals: e.totals_now(),
            results: Cow::Owned(e.results()),
            topology: e.topology_name(),
            now: e.now(),
            last_event: e.last_event(),
            flows_outstanding: e.flows_outstanding(),
        }
    }
}

impl RunSample {
    pub(crate) fn of(v: &RunView, wall_s: f64) -> RunSample {
        let t = &v.totals;
        RunSample {
            sim_us: v.now.as_ps() as f64 / 1e6,
            wall_s,
            events: t.events,
            flows_finished: t.flows_finished,
            flows_outstanding: v.flows_outstanding,
            host_tx_bytes: t.host_tx_bytes,
            host_rx_bytes: t.host_rx_bytes,
            drops: t.link_drops + t.queue_drops,
            ecn_marks: t.ecn_marks,
            pauses: t.pauses,
            cnps: t.cnps,
        }
    }

    /// The sample as (column, value) pairs, in a fixed order: the one list of its
    /// columns (every count fits f64's 53-bit mantissa).
    pub fn columns(&self) -> [(&'static str, f64); 11] {
        [
            ("sim_us", self.sim_us),
            ("wall_s", self.wall_s),
            ("events", self.events as f64),
            ("flows_finished", self.flows_finished as f64),
            ("flows_outstanding", self.flows_outstanding as f64),
            ("host_tx_bytes", self.host_tx_bytes as f64),
            ("host_rx_bytes", self.host_rx_bytes as f64),
            ("drops", self.drops as f64),
            ("ecn_marks", self.ecn_marks as f64),
            ("pauses", self.pauses as f64),
            ("cnps", self.cnps as f64),
        ]
    }
}

/// `summary.json`'s shape.
#[derive(serde::Serialize)]
struct SummaryJson<'a> {
    /// [`Scenario::title`]: the name, and the overrides when there are any.
    scenario: String,
    /// The `--set` overrides, one `KEY=VALUE` each (empty: the scenario as written).
    overrides: &'a [String],
    seed: u64,
    topology: &'a str,
    hosts: usize,
    switches: usize,
    finished: bool,
    sim_time_us: f64,
    wall_s: f64,
    setup_s: f64,
    events: u64,
    events_per_s: u64,
    flows: FlowCounts,
    fct_us: Quantiles,
    slowdown: Quantiles,
    bytes: ByteCounts,
    drops: DropCounts,
    ecn_marks: u64,
    pfc_pauses: u64,
    cnps: u64,
    retransmitted_packets: u64,
    timeouts: u64,
    stale_packets: u64,
    peak_packet_records: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    conservation: Option<Conservation>,
}

#[derive(serde::Serialize)]
struct FlowCounts {
    total: usize,
    started: u64,
    finished: u64,
    failed: u64,
}

#[derive(serde::Serialize)]
struct Quantiles {
    mean: f64,
    p50: f64,
    p99: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<f64>,
}

#[derive(serde::Serialize)]
struct ByteCounts {
    host_tx: u64,
    host_rx: u64,
    dropped: u64,
}

#[derive(serde::Serialize)]
struct DropCounts {
    link: u64,
    queue: u64,
    unroutable: u64,
}

#[derive(serde::Serialize)]
struct Conservation {
    end_to_end_imbalance_bytes: i128,
    links_unbalanced: u64,
}

/// `x` rounded to `d` decimals.
fn round(x: f64, d: i32) -> f64 {
    let m = 10f64.powi(d);
    (x * m).round() / m
}

pub(crate) fn summary_json(
    sc: &Scenario,
    e: &RunView,
    hosts: usize,
    switches: usize,
    wall_s: f64,
    setup_s: f64,
    conservation: Option<(i128, u64)>,
) -> String {
    let t = &e.totals;
    let (fcts, slow) = fct_stats(&e.results);
    let j = SummaryJson {
        scenario: sc.title(),
        overrides: &sc.overrides,
        seed: sc.seed,
        topology: e.topology,
        hosts,
        switches,
        finished: conservation.is_some(),
        sim_time_us: round(e.last_event.as_ps() as f64 / 1e6, 3),
        wall_s: round(wall_s, 3),
        setup_s: round(setup_s, 3),
        events: t.events,
        events_per_s: (t.events as f64 / wall_s.max(1e-9)).round() as u64,
        flows: FlowCounts {
            total: e.results.len(),
            started: t.flows_started,
            finished: t.flows_finished,
            failed: t.flows_failed,
        },
        fct_us: Quantiles {
            mean: round(mean(&fcts), 3),
            p50: round(percentile(&fcts, 50.0), 3),
            p99: round(percentile(&fcts, 99.0), 3),
            max: Some(round(fcts.last().copied().unwrap_or(0.0), 3)),
        },
        slowdown: Quantiles {
            mean: round(mean(&slow), 4),
            p50: round(percentile(&slow, 50.0), 4),
            p99: round(percentile(&slow, 99.0), 4),
            max: None,
        },
        bytes: ByteCounts {
            host_tx: t.host_tx_bytes,
            host_rx: t.host_rx_bytes,
            dropped: t.drop_bytes,
        },
        drops: DropCounts {
            link: t.link_drops,
            queue: t.queue_drops,
            unroutable: t.unroutable,
        },
        ecn_marks: t.ecn_marks,
        pfc_pauses: t.pauses,
        cnps: t.cnps,
        retransmitted_packets: t.retransmitted,
        timeouts: t.timeouts,
        stale_packets: t.stale_packets,
        peak_packet_records: t.peak_packets,
        conservation: conservation.map(|(imb, links)| Conservation {
            end_to_end_imbalance_bytes: imb,
            links_unbalanced: links,
        }),
    };
    serde_json::to_string_pretty(&j).expect("plain data serialises") + "\n"
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
    let _ = writeln!(s, "run         {}", r.execution);
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
