//! Fig. 12 under every alternative reading (Cepheus §V-C): the
//! `cepheus-fig12` comparison re-run with one reading of `crate::readings` changed to
//! one of its alternatives at a time, then with every earlier rocast reading at once
//! (`earlier`), and on one non-blocking switch (`one-switch`, a diagnostic: no shared
//! links, no ECMP). For each claim it names the variant closest to the paper's figure
//! and the sentence that rules that variant out as the primary reading: "differs, and
//! here is why", never a reading picked because it matches.
//!
//! Every variant is the `cepheus-fig12` preset plus the `--set`s it prints, with this
//! scenario's `multicast.group`, `multicast.sizes` and `seed`: any row can be re-run
//! alone with `rocast sim --preset cepheus-fig12 --set …`.

use crate::error::EvalError;
use std::fmt::Write as _;
use std::path::Path;

use rocast_core::overlay::Scheme;
use rocast_sim::scenario::config::parse_sizes;
use rocast_sim::scenario::topology::{build_topology, engine_config};
use rocast_sim::Scenario;

use crate::cepheus::{fig12_claim, group_hosts, run_name, time_once, Run, SHORT_FLOW_MAX};
use crate::report::{fmt_size, parallel, EvalReport};

/// One variant: a name, what it changes, and its `--set`s on `cepheus-fig12`.
struct Variant {
    name: String,
    what: String,
    sets: Vec<String>,
    /// What rules it out as the primary reading (the readings table's sentence).
    ruled_out: String,
}

fn variants(hosts: u32, buffer_per_port_mb: f64) -> Vec<Variant> {
    let mut out = vec![Variant {
        name: "primary".into(),
        what: "the cepheus-fig12 preset as it is (every primary reading)".into(),
        sets: Vec::new(),
        ruled_out: String::new(),
    }];
    // Every alternative of Fig. 12's readings (crate::readings), one at a time.
    let fig12 = crate::readings::by_preset("cepheus-fig12").expect("fig12 has readings");
    for r in fig12.readings {
        for (i, a) in r
            .alternatives
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.sets.is_empty())
        {
            let key = r.key.split([',', '.']).nth(1).unwrap_or(r.key).trim();
            out.push(Variant {
                name: format!("{key}#{}", i + 1),
                what: a.value.to_string(),
                sets: a.sets.iter().map(|s| s.to_string()).collect(),
                ruled_out: a.ruled_out.to_string(),
            });
        }
    }
    // A diagnostic beyond the readings: one non-blocking switch, where no two
    // transfers share a link. A 1024-port switch with a 64-port switch's buffer would
    // spend it all on PFC headroom: scale it with the ports.
    out.push(Variant {
        name: "one-switch".into(),
        what: "one non-blocking switch instead of the fat-tree (no shared links, no ECMP), with the fat-tree switches' buffer per port".into(),
        sets: vec![
            "topology.kind=\"leaf-spine\"".into(),
            "topology.spines=1".into(),
            "topology.leaves=1".into(),
            format!("topology.hosts_per_leaf={hosts}"),
            format!("switch.buffer_mb={}", buffer_per_port_mb * (hosts + 1) as f64),
        ],
        ruled_out: "not a reading: §V-C's fabric is a 3-layer fat-tree".into(),
    });
    // Every earlier rocast choice at once: where Fig. 12 stood before the readings.
    out.push(Variant {
        name: "earlier".into(),
        what: "rocast's earlier readings together: k=16, 4 KiB MTU, HPCC's DCQCN, 256-packet window, 50 us CNPs, 1 MiB chain blocks, rendezvous always, tree one child at a time".into(),
        sets: [
            "topology.k=16", "topology.pods=0", "topology.edges_per_pod=0", "nic.mtu=4096",
            "nic.dcqcn_preset=\"hpcc\"", "nic.window=256", "nic.cnp_interval_us=50",
            "multicast.chain_slices_per_rank=false", "multicast.chain_slices=0",
            "multicast.chain_min_slice=\"0\"", "multicast.eager_limit=\"0\"",
            "multicast.tree_window=1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        ruled_out: "every sentence that rules out its parts (docs/cepheus/readings.md)".into(),
    });
    out
}

/// Short flows: up to 64 KiB; large: the rest (the ablation's sizes are 64 B, 4 KiB
/// and 16 MiB).
fn is_short(size: u64) -> bool {
    size <= SHORT_FLOW_MAX
}

pub(crate) fn fig12_ablation(sc: &Scenario) -> Result<EvalReport, EvalError> {
    let m = &sc.multicast;
    let sizes = parse_sizes(&m.sizes)?;
    let base = crate::experiments::scenario("cepheus-fig12", &[])?;
    let base_topo = build_topology(&base, Path::new(""))?;
    let fabric_hosts = base_topo.num_hosts() as u32;
    // The fat-tree's switches all have k ports.
    let ports = base.topology.k.max(1) as f64;
    let vars = variants(fabric_hosts, base.switch.buffer_mb / ports);
    // Each variant's scenario, fabric and members.
    let mut built = Vec::new();
    for v in &vars {
        let mut sets = v.sets.clone();
        sets.push(format!("multicast.group={}", m.group));
        sets.push(format!("multicast.sizes=\"{}\"", m.sizes));
        sets.push(format!("seed={}", sc.seed));
        sets.push(format!("multicast.threads={}", m.threads));
        let vsc = crate::experiments::scenario("cepheus-fig12", &sets)
            .map_err(|e| format!("variant {}: {e}", v.name))?;
        let topo = build_topology(&vsc, Path::new(""))?;
        let cfg = engine_config(&vsc, &topo)?;
        let hosts = group_hosts(&vsc, &topo, "multicast.group", m.group)?;
        built.push((vsc, topo, cfg, hosts));
    }
    let runs = [
        Run::Cepheus,
        Run::Overlay(Scheme::BinomialTree),
        Run::Overlay(Scheme::Chain),
    ];
    let mut jobs = Vec::new();
    for vi in 0..vars.len() {
        for &size in &sizes {
            for &r in &runs {
                jobs.push((vi, size, r));
            }
        }
    }
    // Largest first, so the long runs start early.
    jobs.sort_by_key(|&(vi, size, r)| (std::cmp::Reverse(size), vi, r));
    let t0 = std::time::Instant::now();
    let results = parallel(m.threads, &jobs, |&(vi, size, r)| {
        let (vsc, topo, cfg, hosts) = &built[vi];
        time_once(vsc, topo, cfg, hosts, size, r, false)
    })?;
    let wall = t0.elapsed().as_secs_f64();
    let mut by = std::collections::BTreeMap::new();
    for (&(vi, size, r), t) in jobs.iter().zip(&results) {
        by.insert((vi, size, r), t.ps as f64);
    }
    let ratio = |vi: usize, size: u64, s: Scheme| {
        by[&(vi, size, Run::Overlay(s))] / by[&(vi, size, Run::Cepheus)]
    };

    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Fig. 12 ablation: group of {} on the cepheus-fig12 fabric; ratio = scheme time / Cepheus time",
        m.group
    );
    let _ = writeln!(
        text,
        "# each variant is `rocast sim --preset cepheus-fig12` plus its --sets (below the table)"
    );
    let _ = write!(text, "{:<24}", "variant");
    for label in ["tree", "chain"] {
        for &size in &sizes {
            let _ = write!(text, " {:>11}", format!("{label} {}", fmt_size(size)));
        }
    }
    let _ = writeln!(text, " {:>11} {:>11}", "ceph small", "ceph large");
    let _ = write!(text, "{:<24}", "paper");
    for s in [Scheme::BinomialTree, Scheme::Chain] {
        for &size in &sizes {
            let p = fig12_claim(s, is_short(size)).paper;
            let _ = write!(text, " {:>10}x", format!("<={p}"));
        }
    }
    let _ = writeln!(text);
    let mut csv = String::from("variant,sets,size_bytes,scheme,latency_us,ratio_to_cepheus\n");
    for (vi, v) in vars.iter().enumerate() {
        let _ = write!(text, "{:<24}", v.name);
        for s in [Scheme::BinomialTree, Scheme::Chain] {
            for &size in &sizes {
                let _ = write!(text, " {:>10.2}x", ratio(vi, size, s));
            }
        }
        let (small, large) = (sizes[0], *sizes.last().expect("sizes"));
        let _ = writeln!(
            text,
            " {:>9.2}us {:>9.0}us",
            by[&(vi, small, Run::Cepheus)] / 1e6,
            by[&(vi, large, Run::Cepheus)] / 1e6
        );
        for &size in &sizes {
            for &r in &runs {
                let t = by[&(vi, size, r)];
                let x = match r {
                    Run::Cepheus => 1.0,
                    Run::Overlay(s) => ratio(vi, size, s),
                };
                let _ = writeln!(
                    csv,
                    "{},{},{size},{},{:.3},{x:.4}",
                    v.name,
                    v.sets.join(" ").replace(',', ";"),
                    run_name(r),
                    t / 1e6
                );
            }
        }
    }
    let _ = writeln!(
        text,
        "\nvariants (one alternative reading each, then two diagnostics):"
    );
    for v in &vars {
        let sets: Vec<String> = v.sets.iter().map(|s| format!("--set '{s}'")).collect();
        let _ = writeln!(text, "  {:<24} {}", v.name, v.what);
        if !sets.is_empty() {
            let _ = writeln!(text, "  {:<24} {}", "", sets.join(" "));
        }
    }
    // What moves each claim most: the variant whose ratio lies closest to the paper's,
    // for the largest short size and the largest size.
    let _ = writeln!(
        text,
        "\nclosest variant per claim (paper's \"up to\" figure):"
    );
    for (s, short) in [
        (Scheme::BinomialTree, true),
        (Scheme::BinomialTree, false),
        (Scheme::Chain, true),
        (Scheme::Chain, false),
    ] {
        let paper = fig12_claim(s, short).paper;
        let label = format!("{} {}", s, if short { "short" } else { "large" });
        let Some(&size) = sizes.iter().rev().find(|&&z| is_short(z) == short) else {
            continue;
        };
        let mut best = (f64::INFINITY, 0usize);
        for vi in 0..vars.len() {
            let d = (ratio(vi, size, s) / paper).ln().abs();
            if d < best.0 {
                best = (d, vi);
            }
        }
        let _ = writeln!(
            text,
            "  {label:<11} at {:>4}: paper {paper}x; rocast preset {:.2}x; closest {} {:.2}x{}",
            fmt_size(size),
            ratio(0, size, s),
            vars[best.1].name,
            ratio(best.1, size, s),
            if best.1 == 0 {
                String::new()
            } else {
                format!("; ruled out as the primary: {}", vars[best.1].ruled_out)
            }
        );
    }
    let _ = writeln!(text, "  runs: {} in {wall:.1} s wall", results.len());
    Ok(EvalReport {
        text,
        files: vec![("fig12-ablation.csv".into(), csv)],
        capture: Vec::new(),
        verdicts: Vec::new(),
    })
}
