//! Workloads: the flows a run starts. Every generator is seeded and yields flows in a
//! deterministic order: permutation, incast, all-to-all, Poisson arrivals with a size
//! CDF (the HPCC `traffic_gen.py` method), an HPCC flow file, or an explicit list
//! with dependencies (a flow starts when another has been received — the overlay
//! multicast schedules are built from these).
//!
//! Memory: 40 bytes per flow.

pub use crate::engine::FlowSpec;
use crate::scenario::config::WorkloadConfig;
use crate::uniform;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkloadError {
    #[error("workload.{key}: {msg}")]
    Invalid { key: &'static str, msg: String },
    /// A named file could not be read (shared, so that the error stays `Clone`).
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("{path}: {source}")]
    File {
        path: String,
        #[source]
        source: WorkloadFileError,
    },
}

/// What is wrong inside a size CDF or an HPCC flow file, by line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadFileError {
    #[error("line {0}: expected `size_bytes cum_percent`")]
    CdfSyntax(usize),
    #[error("line {line}: bad size {text:?}")]
    CdfSize { line: usize, text: String },
    #[error("line {line}: bad percent {text:?}")]
    CdfPercent { line: usize, text: String },
    #[error("line {0}: sizes and percents must increase")]
    CdfNotIncreasing(usize),
    #[error("the CDF must start at 0% and end at 100%")]
    CdfEnds,
    #[error("empty flow file")]
    EmptyFlowFile,
    #[error("line 1: expected the flow count, found {0:?}")]
    FlowCount(String),
    #[error("line {0}: expected `src dst pg dport size start_s`")]
    FlowSyntax(usize),
    #[error("line {line}: field {field} ({text:?}) is not an integer")]
    NotInteger {
        line: usize,
        field: usize,
        text: String,
    },
    #[error("line {line}: bad start time {text:?}")]
    StartTime { line: usize, text: String },
    #[error("line {line}: hosts {src}->{dst} invalid ({hosts} hosts)")]
    FlowHosts {
        line: usize,
        src: u64,
        dst: u64,
        hosts: u32,
    },
    #[error("the header says {header} flows but {found} follow")]
    FlowsMissing { header: usize, found: usize },
}

/// The most flows a Poisson workload may generate (about 2 GB of flow records).
pub const MAX_POISSON_FLOWS: u64 = 20_000_000;

fn invalid(key: &'static str, msg: impl Into<String>) -> WorkloadError {
    WorkloadError::Invalid {
        key,
        msg: msg.into(),
    }
}

/// A flow-size distribution: piecewise-linear between `(bytes, cumulative %)` points.
#[derive(Clone, Debug)]
pub struct SizeCdf {
    points: Vec<(f64, f64)>,
}

pub const WEBSEARCH_CDF: &str = include_str!("../../data/websearch.cdf");
pub const HADOOP_CDF: &str = include_str!("../../data/hadoop.cdf");

impl SizeCdf {
    /// Parses `size cum_percent` lines: first percent 0, last 100, both increasing.
    pub fn parse(text: &str) -> Result<Self, WorkloadFileError> {
        let mut points = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(x), Some(y), None) = (it.next(), it.next(), it.next()) else {
                return Err(WorkloadFileError::CdfSyntax(i + 1));
            };
            let x: f64 = x.parse().map_err(|_| WorkloadFileError::CdfSize {
                line: i + 1,
                text: x.to_string(),
            })?;
            let y: f64 = y.parse().map_err(|_| WorkloadFileError::CdfPercent {
                line: i + 1,
                text: y.to_string(),
            })?;
            if let Some(&(px, py)) = points.last() {
                if x < px || y <= py {
                    return Err(WorkloadFileError::CdfNotIncreasing(i + 1));
                }
            }
            points.push((x, y));
        }
        match (points.first(), points.last()) {
            (Some(&(_, 0.0)), Some(&(_, 100.0))) if points.len() >= 2 => Ok(SizeCdf { points }),
            _ => Err(WorkloadFileError::CdfEnds),
        }
    }

    /// Size at percentile `r` in [0, 100).
    pub fn at(&self, r: f64) -> u64 {
        let i = self
            .points
            .iter()
            .position(|&(_, y)| r <= y)
            .unwrap_or(self.points.len() - 1)
            .max(1);
        let (x0, y0) = self.points[i - 1];
        let (x1, y1) = self.points[i];
        let x = x0 + (x1 - x0) / (y1 - y0) * (r - y0);
        (x as u64).max(1)
    }

    /// Mean size by the trapezoid rule (as `traffic_gen.py`'s `getAvg`).
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .map(|w| (w[0].0 + w[1].0) / 2.0 * (w[1].1 - w[0].1) / 100.0)
            .sum()
    }
}

/// Builds the flow list. `read_file` loads the named file (a CDF or a flow file).
pub fn generate(
    w: &WorkloadConfig,
    hosts: u32,
    host_rate_bps: u64,
    seed: u64,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<Vec<FlowSpec>, WorkloadError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x574f_524b);
    let start = (w.start_us * 1e6) as u64;
    let check_host = |key: &'static str, h: u32| {
        if h < hosts {
            Ok(h)
        } else {
            Err(invalid(
                key,
                format!("host {h} does not exist ({hosts} hosts)"),
            ))
        }
    };
    if hosts < 2 {
        return Err(invalid("kind", "needs at least 2 hosts"));
    }
    let flow = |src, dst, size, start_ps| FlowSpec {
        src,
        dst,
        size,
        start_ps,
        after: None,
    };
    Ok(match w.kind.as_str() {
        "permutation" => {
            // A uniformly random derangement: shuffle until no host maps to itself.
            let mut perm: Vec<u32> = (0..hosts).collect();
            loop {
                for i in (1..perm.len()).rev() {
                    let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                    perm.swap(i, j);
                }
                if perm.iter().enumerate().all(|(i, &p)| i as u32 != p) {
                    break;
                }
            }
            (0..hosts)
                .map(|s| flow(s, perm[s as usize], w.size_bytes, start))
                .collect()
        }
        "incast" => {
            let r = check_host("receiver", w.receiver)?;
            if w.senders == 0 || w.senders >= hosts {
                return Err(invalid("senders", format!("must be 1 to {}", hosts - 1)));
            }
            (0..hosts)
                .filter(|&h| h != r)
                .take(w.senders as usize)
                .map(|s| flow(s, r, w.size_bytes, start))
                .collect()
        }
        "all-to-all" => {
            let mut v = Vec::with_capacity((hosts as usize) * (hosts as usize - 1));
            for s in 0..hosts {
                for d in 0..hosts {
                    if s != d {
                        v.push(flow(s, d, w.size_bytes, start));
                    }
                }
            }
            v
        }
        "poisson" => {
            let text = match w.cdf.as_str() {
                "websearch" => WEBSEARCH_CDF.to_string(),
                "hadoop" => HADOOP_CDF.to_string(),
                path => read_file(path).map_err(|e| WorkloadError::Read {
                    path: path.into(),
                    source: Arc::new(e),
                })?,
            };
            let cdf = SizeCdf::parse(&text).map_err(|source| WorkloadError::File {
                path: w.cdf.clone(),
                source,
            })?;
            // Mean gap per host so that its offered load is `load` of its link.
            let mean_gap_ps = cdf.mean() * 8.0 / (host_rate_bps as f64 * w.load) * 1e12;
            let end = start + (w.duration_ms * 1e9) as u64;
            // Refuse a duration whose flows would not fit in memory before generating
            // any (each flow record is about 100 bytes in the engine).
            let expected = hosts as f64 * (end - start) as f64 / mean_gap_ps;
            if !(expected <= MAX_POISSON_FLOWS as f64) {
                return Err(invalid(
                    "duration_ms",
                    format!(
                        "{} ms at load {} would generate about {expected:.3e} flows; at most {MAX_POISSON_FLOWS} are allowed (shorten the duration or lower the load)",
                        w.duration_ms, w.load
                    ),
                ));
            }
            // Each host's next arrival, merged in time order (ties by host id).
            let mut next: BinaryHeap<Reverse<(u64, u32)>> = (0..hosts)
                .map(|h| {
                    let t = start + (-(1.0 - uniform(&mut rng)).ln() * mean_gap_ps) as u64;
                    Reverse((t, h))
                })
                .collect();
            let mut v = Vec::new();
            while let Some(Reverse((t, h))) = next.pop() {
                if t >= end {
                    break;
                }
                let mut d = (rng.next_u64() % (hosts as u64 - 1)) as u32;
                if d >= h {
                    d += 1;
                }
                let size = cdf.at(uniform(&mut rng) * 100.0);
                v.push(flow(h, d, size, t));
                let gap = (-(1.0 - uniform(&mut rng)).ln() * mean_gap_ps) as u64;
                next.push(Reverse((t + gap, h)));
            }
            v
        }
        "flow-file" => {
            let path = &w.flow_file;
            let text = read_file(path).map_err(|e| WorkloadError::Read {
                path: path.clone(),
                source: Arc::new(e),
            })?;
            parse_flow_file(&text, hosts).map_err(|source| WorkloadError::File {
                path: path.clone(),
                source,
            })?
        }
        "flows" => {
            let mut v = Vec::with_capacity(w.flows.len());
            for f in &w.flows {
                check_host("flows.src", f.src)?;
                check_host("flows.dst", f.dst)?;
                let t = if f.after.is_some() {
                    (f.after_delay_us * 1e6) as u64
                } else {
                    (f.start_us * 1e6) as u64
                };
                v.push(FlowSpec {
                    src: f.src,
                    dst: f.dst,
                    size: f.size_bytes.max(1),
                    start_ps: t,
                    after: f.after,
                });
            }
            v
        }
        other => return Err(invalid("kind", format!("unknown kind {other:?}"))),
    })
}

/// Parses an HPCC flow file: a count, then `src dst pg dport size start_s` lines.
pub fn parse_flow_file(text: &str, hosts: u32) -> Result<Vec<FlowSpec>, WorkloadFileError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or(WorkloadFileError::EmptyFlowFile)?;
    let n: usize = first
        .trim()
        .parse()
        .map_err(|_| WorkloadFileError::FlowCount(first.to_string()))?;
    let mut v = Vec::with_capacity(n.min(1 << 20));
    for (i, line) in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 6 {
            return Err(WorkloadFileError::FlowSyntax(i + 1));
        }
        let num = |j: usize| -> Result<u64, WorkloadFileError> {
            f[j].parse().map_err(|_| WorkloadFileError::NotInteger {
                line: i + 1,
                field: j + 1,
                text: f[j].to_string(),
            })
        };
        let (src, dst, size) = (num(0)?, num(1)?, num(4)?);
        let t: f64 = f[5]
            .parse()
            .ok()
            .filter(|t: &f64| *t >= 0.0 && t.is_finite())
            .ok_or_else(|| WorkloadFileError::StartTime {
                line: i + 1,
                text: f[5].to_string(),
            })?;
        if src >= hosts as u64 || dst >= hosts as u64 || src == dst {
            return Err(WorkloadFileError::FlowHosts {
                line: i + 1,
                src,
                dst,
                hosts,
            });
        }
        v.push(FlowSpec {
            src: src as u32,
            dst: dst as u32,
            size: size.max(1),
            start_ps: (t * 1e12).round() as u64,
            after: None,
        });
    }
    if v.len() != n {
        return Err(WorkloadFileError::FlowsMissing {
            header: n,
            found: v.len(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(_: &str) -> std::io::Result<String> {
        Err(std::io::Error::other("no files in this test"))
    }

    #[test]
    fn permutation_is_a_seeded_derangement() {
        let w = WorkloadConfig::default();
        let a = generate(&w, 64, 100_000_000_000, 1, &no_files).unwrap();
        let b = generate(&w, 64, 100_000_000_000, 1, &no_files).unwrap();
        assert_eq!(a, b);
        let mut dsts: Vec<u32> = a.iter().map(|f| f.dst).collect();
        assert!(a.iter().all(|f| f.src != f.dst));
        dsts.sort();
        assert_eq!(dsts, (0..64).collect::<Vec<_>>());
        assert_ne!(a, generate(&w, 64, 100_000_000_000, 2, &no_files).unwrap());
    }

    #[test]
    fn cdfs_parse_and_match_the_hpcc_means() {
        let ws = SizeCdf::parse(WEBSEARCH_CDF).unwrap();
        assert_eq!(ws.mean(), 1_711_250.0);
        let hd = SizeCdf::parse(HADOOP_CDF).unwrap();
        assert_eq!(hd.mean(), 120_420.75);
        assert_eq!(ws.at(0.0), 1);
        assert!(SizeCdf::parse("0 0\n10 50\n").is_err());
        assert!(SizeCdf::parse("0 0\n10 50\n5 100\n").is_err());
    }

    #[test]
    fn poisson_offers_the_requested_load() {
        let w = WorkloadConfig {
            kind: "poisson".into(),
            load: 0.5,
            cdf: "hadoop".into(),
            duration_ms: 20.0,
            ..Default::default()
        };
        let f = generate(&w, 16, 100_000_000_000, 3, &no_files).unwrap();
        let bytes: u64 = f.iter().map(|f| f.size).sum();
        let offered = bytes as f64 * 8.0 / 20e-3 / 16.0 / 100e9;
        assert!((offered - 0.5).abs() < 0.1, "offered load {offered}");
        assert!(f.windows(2).all(|w| w[0].start_ps <= w[1].start_ps));
        // A duration whose flows would not fit in memory is refused up front.
        let long = WorkloadConfig {
            duration_ms: 1e9,
            ..w
        };
        let e = generate(&long, 16, 100_000_000_000, 3, &no_files)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("workload.duration_ms") && e.contains("20000000"),
            "{e}"
        );
    }

    #[test]
    fn flow_file_parses_and_rejects_bad_lines() {
        let f = parse_flow_file("2\n0 1 3 100 1000 2.0\n1 0 3 100 5 2.000001\n", 2).unwrap();
        assert_eq!(f[1].start_ps, 2_000_001_000_000);
        for bad in [
            "",
            "x",
            "1\n0 1 3 100 1000\n",
            "1\n0 9 3 100 10 0\n",
            "2\n0 1 3 100 10 0\n",
            "1\n0 1 3 100 10 -1\n",
        ] {
            assert!(parse_flow_file(bad, 2).is_err(), "{bad:?}");
        }
    }
}

/// `n` distinct hosts of `0..hosts`, none of them `exclude`, sampled uniformly with a
/// seeded partial Fisher–Yates shuffle; returned ascending. Panics if `n` exceeds the
/// hosts available (callers check).
pub fn sample_hosts(hosts: u32, exclude: u32, n: u32, seed: u64) -> Vec<u32> {
    let mut pool: Vec<u32> = (0..hosts).filter(|&h| h != exclude).collect();
    assert!(
        n as usize <= pool.len(),
        "sample of {n} from {}",
        pool.len()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5045_454c);
    for i in 0..n as usize {
        let j = i + (rng.next_u64() % (pool.len() - i) as u64) as usize;
        pool.swap(i, j);
    }
    let mut v = pool[..n as usize].to_vec();
    v.sort_unstable();
    v
}
