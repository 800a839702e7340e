//! Multicast congestion control under several congested branches (TMCF §II–IV): the
//! congestion path multiplicity problem (CPMP), run under each CNP policy as
//! `rocast sim --preset tmcf-cpmp`.
//!
//! A multicast from host 0 to receivers 1–6 (one switch, TMCF's Fig 2 shape) starts
//! at 0; from `start_ms`, every `phase_ms` one more unicast flow joins, each sharing
//! one receiver's downlink (1→2, 2→3, 3→1, 4→5, 5→6, 6→4). Once a receiver's
//! downlink is shared, the multicast's max-min fair share is half a link. Policies:
//! `forward-all` (MC-RDMA), `tmcf` (TMCF's slots), `cepheus` (Cepheus' aged
//! counters) and `guard` (forward-all at the switch, PEEL's 50 µs sender guard).
//!
//! Time is scaled down from the paper's (2.1 s, then one flow per 0.1 s) to
//! `start_ms` and `phase_ms`: DCQCN's timers (55 µs rate increase, 50 µs CNP
//! spacing and TMCF slot) are far shorter than a phase either way.

use std::fmt::Write as _;
use std::path::Path;

use rocast_core::time::Duration;

use crate::cepheus::{run_cepheus_with_flows, CepheusSpec};
use crate::cepheus_eval::{parallel, EvalReport};
use crate::config::{parse_bytes, Scenario};
use crate::run::{build_topology, engine_config};
use crate::workload::FlowSpec;

/// TMCF's unicast order: (source receiver, destination receiver).
const UNICASTS: [(u32, u32); 6] = [(1, 2), (2, 3), (3, 1), (4, 5), (5, 6), (6, 4)];

/// One policy's run: the multicast's rate per sample, and each unicast's
/// (destination, start ms, end ms).
struct PolicyRun {
    series: Vec<(f64, f64)>,
    unicasts: Vec<(u32, f64, f64)>,
    /// Per sample, each unicast's rate (Gb/s).
    unicast_gbps: Vec<Vec<f64>>,
}

/// The multicast's sending rate (Gb/s) per sample interval under `policy`, beside
/// `flows` (TMCF's CPMP schedule when `None`).
fn rate_series(
    sc: &Scenario,
    base: &Path,
    policy: &str,
    flows: Option<Vec<FlowSpec>>,
) -> Result<PolicyRun, String> {
    let mut sc = sc.clone();
    match policy {
        "guard" => {
            sc.switch.cnp_filter = "forward-all".into();
            sc.nic.cnp_guard_us = 50;
        }
        "forward-all" | "tmcf" | "cepheus" => sc.switch.cnp_filter = policy.into(),
        other => {
            return Err(format!(
                "multicast.cnp_policies: {other:?} (expected forward-all, tmcf, cepheus or guard)"
            ))
        }
    }
    let topo = build_topology(&sc, base)?;
    if topo.num_hosts() < 7 {
        return Err("tmcf-cpmp needs 7 hosts (a source and 6 receivers)".into());
    }
    let cfg = engine_config(&sc, &topo)?;
    let m = &sc.multicast;
    let rate = topo.links[topo.ports(0)[0].0 as usize].rate_bps;
    let end_ms = m.start_ms + m.phase_ms * (UNICASTS.len() as f64 + 1.0);
    // Every unicast outlasts the run at line rate.
    let uni = (rate as f64 / 8.0 * end_ms / 1e3) as u64;
    // CPMP's series stops when its last phase does; a given schedule runs to the end.
    let cut_ms = if flows.is_some() {
        f64::INFINITY
    } else {
        end_ms
    };
    let flows = flows.unwrap_or_else(|| {
        UNICASTS
            .iter()
            .enumerate()
            .map(|(i, &(s, d))| FlowSpec {
                src: s,
                dst: d,
                size: uni,
                start_ps: ((m.start_ms + m.phase_ms * i as f64) * 1e9) as u64,
                after: None,
            })
            .collect()
    });
    let mut spec = CepheusSpec::new(0, (1..=6).collect(), parse_bytes(&m.message)?);
    let step = Duration::from_us(100);
    spec.sample_interval = Some(step);
    let out = run_cepheus_with_flows(topo, cfg, &spec, flows)?;
    let unicasts = out
        .flows
        .iter()
        .map(|f| {
            let end = f
                .received_ps
                .or(f.finish_ps)
                .map_or(f64::INFINITY, |t| t as f64 / 1e9);
            (f.dst, f.start_ps as f64 / 1e9, end)
        })
        .collect();
    let mut series = Vec::new();
    let mut unicast_gbps = Vec::new();
    let mut prev = 0u64;
    let mut prev_flows = vec![0u64; out.flows.len()];
    let per_step = |bytes: u64| bytes as f64 * 8.0 / (step.as_ps() as f64 / 1e12) / 1e9;
    for (t, src, fl) in &out.samples {
        let ms = *t as f64 / 1e9;
        if ms > cut_ms {
            break;
        }
        series.push((ms, per_step(src.saturating_sub(prev))));
        prev = *src;
        // A finished flow's counter is gone: it has sent its whole size.
        let now: Vec<u64> = fl
            .iter()
            .enumerate()
            .map(|(i, b)| {
                b.unwrap_or(if out.flows[i].start_ps <= *t {
                    out.flows[i].size
                } else {
                    0
                })
            })
            .collect();
        unicast_gbps.push(
            now.iter()
                .zip(&prev_flows)
                .map(|(a, b)| per_step(a.saturating_sub(*b)))
                .collect(),
        );
        prev_flows = now;
    }
    Ok(PolicyRun {
        series,
        unicasts,
        unicast_gbps,
    })
}

/// The CPMP experiment: a rate table per phase and policy, and the series as CSV.
pub fn cpmp(sc: &Scenario, base: &Path) -> Result<EvalReport, String> {
    let m = &sc.multicast;
    if !(m.start_ms > 0.0 && m.phase_ms > 0.0) {
        return Err("multicast.start_ms and multicast.phase_ms must be positive".into());
    }
    let policies = &m.cnp_policies;
    let series: Vec<Vec<(f64, f64)>> =
        parallel(m.threads, policies, |p| rate_series(sc, base, p, None))?
            .into_iter()
            .map(|r| r.series)
            .collect();
    let topo = build_topology(sc, base)?;
    let line = topo.links[topo.ports(0)[0].0 as usize].rate_bps as f64 / 1e9;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# TMCF CPMP (Figs 3-4): multicast 0 -> 1..6 on {}; from {} ms one unicast every {} ms\n\
         (1->2, 2->3, 3->1, 4->5, 5->6, 6->4); time scaled down from 2.1 s / 0.1 s\n\
         paper: forward-all's multicast rate collapses as congested paths are added; TMCF\n\
         holds the fair share of each bottleneck (about half the link)\n",
        topo.name, m.start_ms, m.phase_ms
    );
    let _ = write!(text, "{:>18}", "congested paths");
    for p in policies {
        let _ = write!(text, " {p:>12}");
    }
    let _ = writeln!(text, " {:>10}", "fair share");
    let mut csv = String::from("ms,policy,gbps\n");
    for (p, s) in policies.iter().zip(&series) {
        for (ms, g) in s {
            let _ = writeln!(csv, "{ms:.3},{p},{g:.3}");
        }
    }
    // Per phase: the mean over its second half (after the policy settled).
    for k in 0..=UNICASTS.len() {
        let (a, b) = if k == 0 {
            (m.start_ms / 2.0, m.start_ms)
        } else {
            let s = m.start_ms + m.phase_ms * (k as f64 - 1.0);
            (s + m.phase_ms / 2.0, s + m.phase_ms)
        };
        let _ = write!(text, "{k:>18}");
        for s in &series {
            let v: Vec<f64> = s
                .iter()
                .filter(|(t, _)| *t > a && *t <= b)
                .map(|x| x.1)
                .collect();
            let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
            let _ = write!(text, " {mean:>12.1}");
        }
        let fair = if k == 0 { line } else { line / 2.0 };
        let _ = writeln!(text, " {fair:>10.1}");
    }
    let _ = writeln!(
        text,
        "\nGb/s of the multicast's sending rate, mean over the second half of each phase"
    );
    Ok(EvalReport {
        text,
        files: vec![("tmcf-cpmp.csv".into(), csv)],
    })
}

/// TMCF Figs 5–6, the moving bottleneck: unicasts from `multicast.unicasts` start
/// (and, being finite, end); per phase between those events the table gives the
/// multicast's rate, its max-min fair share (the line over one plus the most unicasts
/// into any receiver), and which receiver is the bottleneck.
pub fn moving(sc: &Scenario, base: &Path) -> Result<EvalReport, String> {
    let m = &sc.multicast;
    if m.unicasts.is_empty() {
        return Err(
            "tmcf-moving needs multicast.unicasts = [[src, dst, start_ms, MB], ...]".into(),
        );
    }
    let mut flows = Vec::new();
    for (i, &[s, d, start, mb]) in m.unicasts.iter().enumerate() {
        let ok = |v: f64| v.fract() == 0.0 && (1.0..=6.0).contains(&v);
        if !ok(s) || !ok(d) || s == d || !(start >= 0.0) || !(mb > 0.0) {
            return Err(format!(
                "multicast.unicasts[{i}]: need receivers 1-6 (distinct), start >= 0 and MB > 0"
            ));
        }
        flows.push(FlowSpec {
            src: s as u32,
            dst: d as u32,
            size: (mb * 1e6) as u64,
            start_ps: (start * 1e9) as u64,
            after: None,
        });
    }
    let runs = parallel(m.threads, &m.cnp_policies, |p| {
        rate_series(sc, base, p, Some(flows.clone()))
    })?;
    let topo = build_topology(sc, base)?;
    let line = topo.links[topo.ports(0)[0].0 as usize].rate_bps as f64 / 1e9;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# TMCF moving bottleneck (Figs 5-6): multicast 0 -> 1..6 on {}; unicasts {:?}\n\
         ([src, dst, start ms, MB]); time scaled down\n\
         paper: the multicast follows the worst bottleneck as it moves, and back\n",
        topo.name, m.unicasts
    );
    let _ = writeln!(
        text,
        "{:<12} {:>15} {:>11} {:>9} {:>9} {:>9} {:>6}",
        "policy", "phase ms", "bottleneck", "Gb/s", "fair", "rate/fair", "Jain"
    );
    let mut csv = String::from("ms,policy,gbps\n");
    for (p, r) in m.cnp_policies.iter().zip(&runs) {
        for (ms, g) in &r.series {
            let _ = writeln!(csv, "{ms:.3},{p},{g:.3}");
        }
        let end = r.series.last().map_or(0.0, |s| s.0);
        let mut cuts: Vec<f64> = vec![0.0, end];
        for &(_, a, b) in &r.unicasts {
            cuts.extend([a, b].into_iter().filter(|t| *t < end));
        }
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b - a < 0.4 {
                continue; // too short to settle
            }
            let mut into = [0u32; 7];
            for &(d, s, e) in &r.unicasts {
                if s <= a && e >= b {
                    into[d as usize] += 1;
                }
            }
            let (worst, n) = (1..=6)
                .map(|d| (d, into[d]))
                .max_by_key(|&(d, n)| (n, std::cmp::Reverse(d)))
                .unwrap_or((1, 0));
            let fair = line / (1.0 + n as f64);
            let half = (a + b) / 2.0;
            let settled: Vec<usize> = (0..r.series.len())
                .filter(|&i| r.series[i].0 > half && r.series[i].0 <= b)
                .collect();
            let avg = |f: &dyn Fn(usize) -> f64| {
                settled.iter().map(|&i| f(i)).sum::<f64>() / settled.len().max(1) as f64
            };
            let mean = avg(&|i| r.series[i].1);
            // Jain's index at the bottleneck: the multicast and the unicasts into it.
            let mut shares = vec![mean];
            for (k, &(d, s, e)) in r.unicasts.iter().enumerate() {
                if n > 0 && d as usize == worst && s <= a && e >= b {
                    shares.push(avg(&|i| r.unicast_gbps[i].get(k).copied().unwrap_or(0.0)));
                }
            }
            let sum: f64 = shares.iter().sum();
            let sq: f64 = shares.iter().map(|x| x * x).sum();
            let jain = if sq > 0.0 {
                sum * sum / (shares.len() as f64 * sq)
            } else {
                0.0
            };
            let bottleneck = if n == 0 {
                "-".to_string()
            } else {
                format!("receiver {worst}")
            };
            let _ = writeln!(
                text,
                "{p:<12} {:>15} {bottleneck:>11} {mean:>9.1} {fair:>9.1} {:>9.2} {jain:>6.3}",
                format!("{a:.1}-{b:.1}"),
                mean / fair
            );
        }
    }
    let _ = writeln!(
        text,
        "\nrate: the multicast's mean sending rate over the second half of each phase;\n\
         Jain: fairness index of the multicast and the unicasts into the bottleneck receiver"
    );
    Ok(EvalReport {
        text,
        files: vec![("tmcf-moving.csv".into(), csv)],
    })
}
