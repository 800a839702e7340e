//! The exact minimum Steiner tree, the yardstick for PEEL's approximation (PEEL §2.3):
//! an integer program solved by HiGHS through `python/steiner_exact.py` (highspy from
//! PyPI, installed in the project venv by `scripts/install-deps.sh`). The formulation
//! and why it is exact are in that script's docstring.
//!
//! Hosts that are neither the source nor a destination cannot relay, so they are left
//! out of the graph handed to the solver; the model then grows with switch links ×
//! destinations, which keeps small instances (tens of switches) at well under a second.

use crate::error::EvalError;
use rocast_core::plan::multicast_tree::{normalise_destinations, MulticastTree, TreeArc};
use rocast_core::plan::topology::{NodeId, Topology};
use std::io::Write;
use std::process::{Command, Stdio};

/// The minimum tree from `source` to `destinations` over working links, proved optimal
/// by HiGHS within `time_limit_s`.
pub fn exact_tree(
    topo: &Topology,
    source: NodeId,
    destinations: &[NodeId],
    time_limit_s: f64,
) -> Result<MulticastTree, EvalError> {
    let dests = normalise_destinations(topo, source, destinations)?;
    let edges = relay_links(topo, source, &dests);
    let request = serde_json::json!({
        "nodes": topo.num_nodes(),
        "edges": edges,
        "root": source,
        "terminals": dests,
        "time_limit_s": time_limit_s,
    });
    let root = crate::resources::resource_root()?;
    let mut child = Command::new(crate::resources::python(&root))
        .arg(root.join("python/steiner_exact.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the HiGHS solver: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(request.to_string().as_bytes())
        .map_err(|e| format!("writing to the HiGHS solver: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("HiGHS solver: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(match out.status.code() {
            Some(3) => EvalError::Setting(format!(
                "HiGHS did not prove optimality within {time_limit_s} s: {stdout}"
            )),
            _ => EvalError::Setting(format!(
                "exact solver failed ({}): {} (is highspy installed? bash scripts/install-deps.sh)",
                out.status,
                why.trim()
            )),
        });
    }
    let reply: serde_json::Value =
        serde_json::from_str(&stdout).map_err(|e| format!("exact solver output: {e}"))?;
    let arcs = reply["edges"]
        .as_array()
        .ok_or("exact solver output has no edges")?;
    let mut tree_arcs = Vec::with_capacity(arcs.len());
    for a in arcs {
        let (Some(p), Some(c)) = (a[0].as_u64(), a[1].as_u64()) else {
            return Err(EvalError::Setting(format!(
                "exact solver output: bad arc {a}"
            )));
        };
        tree_arcs.push((p as NodeId, c as NodeId));
    }
    tree_of_arcs(topo, source, dests, tree_arcs)
        .map_err(|e| EvalError::Setting(format!("exact solver: {e}")))
}

/// The working links a tree from `source` to `dests` may use: hosts that are neither
/// the source nor a destination cannot relay, so their links are left out (both exact
/// solvers' graph).
pub(super) fn relay_links(topo: &Topology, source: NodeId, dests: &[NodeId]) -> Vec<[NodeId; 2]> {
    let keep = |n: NodeId| !topo.is_host(n) || n == source || dests.binary_search(&n).is_ok();
    topo.links
        .iter()
        .filter(|l| !l.failed && l.a != l.b && keep(l.a) && keep(l.b))
        .map(|l| [l.a, l.b])
        .collect()
}

/// The tree of `arcs` (parent, child), each on a working link, sorted and checked.
pub(super) fn tree_of_arcs(
    topo: &Topology,
    source: NodeId,
    destinations: Vec<NodeId>,
    arcs: impl IntoIterator<Item = (NodeId, NodeId)>,
) -> Result<MulticastTree, EvalError> {
    let mut tree = MulticastTree {
        source,
        destinations,
        arcs: Vec::new(),
    };
    for (p, c) in arcs {
        let link = topo
            .ports(p)
            .iter()
            .find(|&&(l, m)| m == c && !topo.links[l as usize].failed)
            .map(|&(l, _)| l)
            .ok_or_else(|| format!("arc {p}-{c} is not a working link"))?;
        tree.arcs.push(TreeArc {
            parent: p,
            child: c,
            link,
        });
    }
    tree.arcs.sort_unstable();
    tree.validate(topo)?;
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_core::plan::multicast_tree::{layer_peeling_tree, symmetric_tree};
    use rocast_core::plan::topology::TierSpec;
    use rocast_core::time::Duration;

    fn tier() -> TierSpec {
        TierSpec::new(100_000_000_000, Duration::from_ns(1000))
    }

    #[test]
    fn exact_matches_the_symmetric_optimum_and_never_loses_to_the_greedy() {
        let t = Topology::fat_tree(4, 1, tier(), tier(), tier()).unwrap();
        let dests = [2, 4, 10, 15];
        let exact = exact_tree(&t, 0, &dests, 30.0).unwrap();
        let sym = symmetric_tree(&t, 0, &dests).unwrap();
        assert_eq!(exact.arcs.len(), sym.arcs.len());
        let mut f = Topology::leaf_spine(4, 6, 2, 0, tier(), tier(), tier()).unwrap();
        f.fail_fraction(0.3, 3).unwrap();
        let d = [3, 5, 7, 9, 11];
        let greedy = layer_peeling_tree(&f, 0, &d).unwrap();
        let exact = exact_tree(&f, 0, &d, 30.0).unwrap();
        assert!(exact.arcs.len() <= greedy.arcs.len());
    }
}
