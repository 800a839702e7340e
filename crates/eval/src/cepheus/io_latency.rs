//! Cepheus §V-B, Fig. 10: single IO latency of three-replica writes over IO size,
//! "the end-to-end time between the client submitting the IO write request and
//! receiving the completion notice", Cepheus against 3 unicasts (the client writes every
//! replica over its own RC connection) and the ideal 1-unicast; chain replication
//! (client → replica 1 → 2 → 3, each replica's stack forwarding) is rocast's extra line.
//!
//! The model is `cepheus-iops`' at queue depth 1: the client's storage stack costs
//! `io_stack_us` per copy it sends (3 for 3 unicasts, 1 for Cepheus and 1-unicast), the
//! wire and the switch are simulated, and the latency is the mean over `ios` IOs
//! written one after another. In the chain each hop's post pays `io_stack_us` (its
//! replica's stack), and the latency is until the tail holds the IO: the tail's
//! acknowledgement back to the client (one one-way latency, about 2 µs on one switch)
//! is not modelled.

use crate::error::EvalError;
use std::fmt::Write as _;

use rocast_core::overlay::Scheme;
use rocast_core::plan::Topology;
use rocast_core::time::Duration;
use rocast_sim::engine::EngineConfig;
use rocast_sim::multicast::cepheus::{run_cepheus, CepheusSpec};
use rocast_sim::scenario::config::parse_sizes;
use rocast_sim::Scenario;

use super::{group_hosts, unicast_iops};
use crate::rdmc::{overlay_once, OverlayKnobs};
use crate::report::{fmt_size, parallel, EvalReport};
use crate::verdict::{Verdict, Word};

/// The paper's reductions of Cepheus' IO latency against 3 unicasts (§V-B).
const PAPER_REDUCTION: [(u64, f64); 2] = [(8 << 10, 0.23), (512 << 10, 0.60)];

const SCHEMES: [&str; 4] = ["1-unicast", "3-unicasts", "cepheus", "chain"];

pub(crate) fn io_latency(
    sc: &Scenario,
    topo: &Topology,
    cfg: &EngineConfig,
    ic: &super::config::IoLatencyConfig,
) -> Result<EvalReport, EvalError> {
    let m = &sc.multicast;
    let sizes = parse_sizes(&m.sizes)?;
    if ic.ios == 0 {
        return Err(EvalError::Setting(
            "cepheus-fig10: experiment.ios must be positive".into(),
        ));
    }
    let stack = Duration::from_ps((ic.io_stack_us * 1e6) as u64);
    let hosts = group_hosts(sc, topo, "multicast.group", m.group)?;
    let (client, replicas) = (hosts[0], hosts[1..].to_vec());
    let mut jobs = Vec::new();
    for &size in &sizes {
        for k in 0..SCHEMES.len() {
            jobs.push((size, k));
        }
    }
    let lat = parallel(m.threads, &jobs, |&(size, k)| -> Result<f64, EvalError> {
        Ok(match k {
            0 | 1 => {
                let servers = if k == 0 {
                    &replicas[..1]
                } else {
                    &replicas[..]
                };
                1e12 / unicast_iops(topo, cfg, client, servers, size, ic.ios, 1, stack)?
            }
            2 => {
                let mut spec = CepheusSpec::new(client, replicas.clone(), size);
                spec.messages = ic.ios;
                spec.window = 1;
                spec.per_message_overhead = stack;
                let out = run_cepheus(topo.clone(), cfg.clone(), &spec)?;
                if let Some(f) = &out.fallback {
                    return Err(EvalError::Setting(format!(
                        "cepheus fell back: {}",
                        f.reason
                    )));
                }
                out.completion_ps().ok_or("cepheus: incomplete")? as f64 / ic.ios as f64
            }
            _ => {
                let knobs = OverlayKnobs {
                    flow_control: false,
                    eager_limit: 0,
                    tree_window: 1,
                    verify_data: false,
                };
                overlay_once(topo, cfg, Scheme::Chain, &hosts, size, size, stack, knobs)?.ps as f64
            }
        })
    })?;
    let at = |size: u64, k: usize| lat[jobs.iter().position(|&j| j == (size, k)).expect("job")];
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Fig. 10: single IO latency (us, mean of {} IOs at queue depth 1), client + {} replicas on one switch, storage stack {} us per copy",
        ic.ios,
        replicas.len(),
        ic.io_stack_us
    );
    let _ = writeln!(
        text,
        "{:>6} {:>10} {:>11} {:>9} {:>9} {:>22} {:>18}",
        "size", "1-unicast", "3-unicasts", "cepheus", "chain", "cepheus vs 3-unicasts", "paper"
    );
    let mut csv = String::from("size_bytes,scheme,latency_us\n");
    let mut structured: Vec<Verdict> = Vec::new();
    let mut verdicts = Vec::new();
    for &size in &sizes {
        let v: Vec<f64> = (0..SCHEMES.len()).map(|k| at(size, k) / 1e6).collect();
        let cut = 1.0 - v[2] / v[1];
        let paper = PAPER_REDUCTION.iter().find(|p| p.0 == size).map(|p| p.1);
        let _ = writeln!(
            text,
            "{:>6} {:>10.2} {:>11.2} {:>9.2} {:>9.2} {:>21.0}% {:>18}",
            fmt_size(size),
            v[0],
            v[1],
            v[2],
            v[3],
            cut * 100.0,
            paper.map_or(String::new(), |p| format!("-{:.0}%", p * 100.0))
        );
        for (k, name) in SCHEMES.iter().enumerate() {
            let _ = writeln!(csv, "{size},{name},{:.3}", v[k]);
        }
        if let Some(p) = paper {
            let q = cut / p;
            let v = Verdict::new(
                format!("{} latency cut vs 3 unicasts", fmt_size(size)),
                format!("-{:.0}%", p * 100.0),
                format!("-{:.0}%", cut * 100.0),
                if size <= CALIBRATED_UP_TO {
                    Word::Calibrated
                } else {
                    Word::of_ratio(q)
                },
            );
            structured.push(if size <= CALIBRATED_UP_TO {
                v.because("at 8 KB the cut is the host stack's: each of the 3 copies passes io_stack_us = 1/1.188 M (Table I's own 1-unicast rate) and the wire adds little, so the cut is (3-1)/3 of the stack's share, set by the calibrated constant")
            } else if crate::report::reproduced(q) {
                v
            } else {
                v.because("rocast's client stack is one calibrated constant per copy and the wire is 100 Gb/s on one switch; the paper's latency includes its storage protocol's request and completion path")
            });
            verdicts.push(format!(
                "  {}: paper -{:.0}%, rocast -{:.0}% ({q:.2}x): {}",
                fmt_size(size),
                p * 100.0,
                cut * 100.0,
                if crate::report::reproduced(q) {
                    "reproduced"
                } else {
                    "differs"
                }
            ));
        }
    }
    let _ = writeln!(
        text,
        "\npaper vs rocast (Cepheus' latency reduction against 3 unicasts):"
    );
    for l in &verdicts {
        let _ = writeln!(text, "{l}");
    }
    if verdicts.iter().any(|l| l.ends_with("differs")) {
        let _ = writeln!(
            text,
            "  why it can differ: rocast's client stack is one calibrated constant per copy (io_stack_us = 1/1.188 M IOPS, Table I) and the wire is 100 Gb/s on one switch; the paper's latency includes its storage protocol's request and completion path, which rocast does not model"
        );
    }
    let _ = writeln!(
        text,
        "  the paper: Cepheus' latency is comparable to the ideal 1-unicast; rocast: {}",
        sizes
            .iter()
            .map(|&s| format!("{} {:.2}x", fmt_size(s), at(s, 2) / at(s, 0)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(EvalReport {
        text,
        files: vec![("fig10.csv".into(), csv)],
        capture: Vec::new(),
        verdicts: structured,
    })
}

/// IO sizes whose latency cut follows from the calibrated host stack (`io_stack_us`)
/// rather than from the simulated wire: Fig. 10's 8 KB point.
const CALIBRATED_UP_TO: u64 = 8 << 10;
