//! What a run measured ([`RunReport`]), `summary.json` (totals, FCT percentiles and
//! slowdowns, the conservation check) and the short summary `rocast sim` prints.
//!
//! `summary.json` is written with `format!`, not serde: its floats have fixed
//! decimals (`{:.3}`) that serde_json would print in shortest form, and the file's
//! bytes are compared across builds (scripts/preset-diff.py).

use crate::engine::{Engine, FlowResult, Totals};
use crate::output::fct::fct_stats;
use crate::output::stats::{mean, percentile_rounded_rank as percentile};
use crate::scenario::Scenario;
use rocast_core::time::Instant;
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
}

pub(crate) fn summary_json(
    sc: &Scenario,
    e: &Engine,
    hosts: usize,
    switches: usize,
    wall_s: f64,
    setup_s: f64,
    conservation: Option<(i128, u64)>,
) -> String {
    let t = &e.totals_now();
    let (fcts, slow) = fct_stats(&e.results);
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
