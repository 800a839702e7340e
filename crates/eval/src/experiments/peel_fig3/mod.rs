//! PEEL §2, Fig. 3: the header a Bloom-filter multicast scheme (RSBF) needs per
//! k-ary fat-tree; the paper: it passes one 1500 B MTU once k > 32, and its overhead
//! passes 100% even at a 20% false-positive ratio. Offline: no packets.
//!
//! Fig 3's model (rocast's, the RSBF paper not being at hand): the header is one
//! Bloom filter over the group tree's downstream (switch, port) pairs, sized for the
//! target false-positive ratio p: m = ⌈−n ln p / ln² 2⌉ bits for n pairs. A packet then
//! also leaves on each non-tree port of a tree switch with probability p (first-order:
//! a false positive's own replication is not followed). The group is a seeded random
//! `group_fractions` share of the fat-tree's hosts (1.0: a Broadcast to every host).
//!
//! Its keys live under `[experiment.peel-fig3]` ([`Fig3Config`]).

use crate::error::EvalError;
use std::collections::BTreeSet;
use std::fmt::Write as _;

use rocast_core::plan::multicast_tree::{symmetric_tree, MulticastTree};
use rocast_core::plan::Topology;
use rocast_sim::engine::tree_multicast::bloom_bytes;
use rocast_sim::scenario::workload::sample_hosts;
use rocast_sim::Scenario;
use serde::Deserialize;

use crate::experiment::{AlternativeScale, Context, Experiment, Figure, Paper, Preset, PEEL};
use crate::report::EvalReport;
use crate::verdict::{Verdict, Word};

/// `[experiment.peel-fig3]`: the sweep.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Fig3Config {
    /// Fat-tree arities (even, 4..=64).
    pub ks: Vec<u32>,
    /// Bloom-filter false-positive ratios, each in (0, 1).
    pub fprs: Vec<f64>,
    /// Group sizes as shares of the fabric's hosts, each in (0, 1] (1.0: a Broadcast).
    pub group_fractions: Vec<f64>,
}

impl Default for Fig3Config {
    fn default() -> Self {
        Fig3Config {
            ks: vec![8, 16, 32, 64],
            fprs: vec![0.01, 0.05, 0.2],
            group_fractions: vec![1.0],
        }
    }
}

impl Fig3Config {
    fn check(&self) -> Result<(), EvalError> {
        if self.ks.is_empty() || self.fprs.is_empty() || self.group_fractions.is_empty() {
            return Err(EvalError::Setting("peel-fig3 needs experiment.peel-fig3.ks, fprs and group_fractions".into()));
        }
        for &p in &self.fprs {
            if !(p > 0.0 && p < 1.0) {
                return Err(EvalError::Setting(format!("experiment.peel-fig3.fprs: {p} is not in (0, 1)")));
            }
        }
        for &f in &self.group_fractions {
            if !(f > 0.0 && f <= 1.0) {
                return Err(EvalError::Setting(format!(
                    "experiment.peel-fig3.group_fractions: {f} is not in (0, 1]"
                )));
            }
        }
        Ok(())
    }
}

pub struct PeelFig3;

pub static EXPERIMENT: PeelFig3 = PeelFig3;

impl Experiment for PeelFig3 {
    fn name(&self) -> &'static str {
        "peel-fig3"
    }
    fn paper(&self) -> &'static Paper {
        &PEEL
    }
    fn presets(&self) -> &'static [Preset] {
        &[Preset {
            name: "peel-fig3",
            toml: include_str!("peel-fig3.toml"),
        }]
    }
    fn figures(&self) -> &'static [Figure] {
        &[Figure {
            id: "peel-fig3",
            figure: "Fig. 3",
            what: "Bloom-filter header bytes vs fat-tree arity",
            args: &["sim", "--preset", "peel-fig3"],
            quick: &[],
            quick_says: "",
            typical_s: 0.1,
            calibrated: None,
            alternatives: AlternativeScale::Own,
            rank: 30,
        }]
    }
    fn plots(&self) -> &'static [(&'static str, &'static str)] {
        &[("peel-fig3", "peel_static")]
    }
    fn check(&self, sc: &Scenario) -> Result<(), EvalError> {
        crate::experiment::experiment_config::<Fig3Config>(sc, self.name())?.check()
    }
    fn run(&self, cx: &Context) -> Result<EvalReport, EvalError> {
        let config: Fig3Config = cx.config(self.name())?;
        fig3(cx.scenario, &config)
    }
}

/// Fig 3's numbers for one group tree: downstream (switch, port) pairs, and the
/// non-tree ports of the tree's switches (where false positives leak).
fn tree_pairs(topo: &Topology, tree: &MulticastTree) -> (usize, usize) {
    let pairs = tree.arcs.iter().filter(|a| !topo.is_host(a.parent)).count();
    let mut switches = BTreeSet::new();
    for a in &tree.arcs {
        for n in [a.parent, a.child] {
            if !topo.is_host(n) {
                switches.insert(n);
            }
        }
    }
    // Every tree switch has one upstream port and `out` tree ports; the rest can leak.
    let ports: usize = switches.iter().map(|&s| topo.ports(s).len()).sum();
    let leak = ports - pairs - switches.len();
    (pairs, leak)
}

/// The MTU the paper measures the header against.
const ETHERNET_MTU: u64 = 1500;

/// Fig 3: RSBF-style header bytes and bandwidth overhead per fat-tree arity.
fn fig3(sc: &Scenario, m: &Fig3Config) -> Result<EvalReport, EvalError> {
    let mut text = String::from(
        "# PEEL Fig 3: a Bloom-filter header (RSBF-style: the group tree's downstream switch ports in one\n\
         filter sized for a false-positive ratio) per k-ary fat-tree\n\
         paper: the header exceeds one 1500 B MTU once k > 32; even at a 20% false-positive ratio the\n\
         bandwidth overhead passes 100%.\n",
    );
    let mut csv = String::from("figure,k,hosts,group_fraction,members,tree_ports,fpr,header_bytes,header_over_mtu,false_positive_copies,overhead\n");
    let _ = writeln!(
        text,
        "{:>4} {:>6} {:>6} {:>8} {:>6} {:>7} {:>10} {:>8} {:>10} {:>9}",
        "k",
        "hosts",
        "share",
        "ports",
        "fpr",
        "header B",
        "header/MTU",
        "FP/tree",
        "overhead",
        "> MTU"
    );
    // Per (share, fpr): the first k whose header passes the MTU.
    let mut crossing: Vec<((f64, f64), Option<u32>)> = Vec::new();
    for &k in &m.ks {
        if k < 4 || k % 2 != 0 || k > 64 {
            return Err(EvalError::Setting(format!("experiment.peel-fig3.ks: {k} is not an even arity in 4..=64")));
        }
        let topo = crate::peel::offline_fat_tree(k)?;
        let hosts = topo.num_hosts() as u32;
        for &f in &m.group_fractions {
            let members = ((hosts as f64 * f).round() as u32).clamp(2, hosts);
            let dests = sample_hosts(hosts, 0, members - 1, sc.seed ^ k as u64);
            let tree = symmetric_tree(&topo, 0, &dests)?;
            let (pairs, leak) = tree_pairs(&topo, &tree);
            for &p in &m.fprs {
                let bytes = bloom_bytes(pairs, p);
                let fp = p * leak as f64 / pairs as f64;
                // Header per MTU of payload, plus the copies false positives add.
                let overhead = bytes as f64 / ETHERNET_MTU as f64 + fp;
                let over = bytes > ETHERNET_MTU;
                let _ = writeln!(
                    text,
                    "{k:>4} {hosts:>6} {f:>6.2} {pairs:>8} {p:>6.2} {bytes:>7} {:>10.2} {fp:>8.3} {:>9.0}% {:>9}",
                    bytes as f64 / ETHERNET_MTU as f64,
                    overhead * 100.0,
                    if over { "yes" } else { "no" }
                );
                let _ = writeln!(
                    csv,
                    "peel-fig3,{k},{hosts},{f},{members},{pairs},{p},{bytes},{:.4},{fp:.4},{overhead:.4}",
                    bytes as f64 / ETHERNET_MTU as f64
                );
                match crossing.iter_mut().find(|(key, _)| *key == (f, p)) {
                    Some((_, c)) => {
                        if over && c.is_none() {
                            *c = Some(k);
                        }
                    }
                    None => crossing.push(((f, p), over.then_some(k))),
                }
            }
        }
    }
    let _ = writeln!(
        text,
        "\npaper vs rocast (first k whose header passes 1500 B; paper: the first arity above 32):"
    );
    let first_above_32 = m.ks.iter().copied().filter(|&k| k > 32).min();
    let mut verdicts = Vec::new();
    for ((f, p), c) in &crossing {
        verdicts.push(Verdict::new(
            format!("first k whose Bloom header passes 1500 B (share {f:.2}, fpr {p:.2})"),
            "the first arity above 32",
            c.map_or("never in this sweep".to_string(), |k| format!("k={k}")),
            match (c, first_above_32) {
                (Some(k), Some(a)) if *k == a => Word::Reproduced,
                (Some(k), _) if *k <= 32 => Word::DiffersLower,
                (Some(_), _) => Word::DiffersHigher,
                (None, _) => Word::Differs,
            },
        ));
        let verdict = match (c, first_above_32) {
            (Some(k), Some(a)) if *k == a => "reproduced".to_string(),
            (Some(k), _) if *k <= 32 => format!("differs: already at k={k}"),
            (Some(k), _) => format!("differs: only at k={k}"),
            (None, _) => "differs: never in this sweep".to_string(),
        };
        let _ = writeln!(text, "  share {f:.2}, fpr {p:.2}: {verdict}");
    }
    let _ = writeln!(
        text,
        "The paper gives neither Fig 3's group nor RSBF's exact encoding; the share column shows how the\n\
         crossing moves with the group."
    );
    Ok(EvalReport {
        text,
        files: vec![("peel-fig3.csv".into(), csv)],
        capture: Vec::new(),
        verdicts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_sim::engine::tree_multicast::bloom_bits;

    #[test]
    fn bloom_bits_follow_the_textbook_formula() {
        // n = 1000 at 1%: 9585.06 bits (m/n = 9.585).
        assert_eq!(bloom_bits(1000, 0.01), 9586);
        assert_eq!(bloom_bits(0, 0.2), 0);
        assert!(bloom_bits(100, 0.2) < bloom_bits(100, 0.01));
    }

    #[test]
    fn a_full_broadcast_tree_counts_its_ports() {
        // k=4, host 0 to the 15 others: the source's ToR → host 1 and its agg; that agg →
        // the other ToR of the pod and a core; the core → 3 pods' aggs, each → 2 ToRs;
        // 7 ToRs → 2 hosts each: 27 downstream pairs. Leaks: the source ToR's and its
        // agg's spare uplink, the 3 aggs' other core port, the 7 ToRs' other agg: 12.
        let topo = crate::peel::offline_fat_tree(4).unwrap();
        let dests: Vec<u32> = (1..16).collect();
        let tree = symmetric_tree(&topo, 0, &dests).unwrap();
        assert_eq!(tree_pairs(&topo, &tree), (27, 12));
    }
}
