//! `fct.txt` in the HPCC format, `sip dip sport dport size start_ns fct_ns
//! standalone_fct_ns` (addresses in hex), one line per finished flow in completion
//! order, and the FCTs and slowdowns the summaries are computed from.

use crate::engine::FlowResult;
use crate::packet::host_ip;
use std::fmt::Write as _;

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
            host_ip(r.src),
            host_ip(r.dst),
            r.sport,
            r.size,
            r.start_ps / 1000,
            (fin - r.start_ps) / 1000,
            r.standalone_ps / 1000
        );
    }
    s
}

/// Finished flows' FCTs in µs and their slowdowns (FCT / standalone FCT, at least 1),
/// each sorted ascending.
pub(crate) fn fct_stats(results: &[FlowResult]) -> (Vec<f64>, Vec<f64>) {
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
