//! Offline multicast trees from spec strings, shared by `rocast tree` and the Python
//! package (`rocast.tree`): a topology from `fat-tree:k=…`/`leaf-spine:…`/a file, the
//! destination set from `random:N`/a list/a file, a tree by algorithm name (PEEL §2's
//! layer peeling, the symmetric optimum, Cepheus' hop-by-hop tree, the exact Steiner
//! tree), and the tree as DOT or JSON.

use crate::error::EvalError;
use crate::peel::steiner_exact::exact_tree;
use rocast_core::plan::multicast_tree::{
    hop_by_hop_tree, layer_peeling_tree, symmetric_tree, MulticastTree,
};
use rocast_core::plan::topology::{NodeId, NodeRole, Topology};
use rocast_core::plan::Routes;
use rocast_sim::scenario::topology::build_topology;
use rocast_sim::Scenario;
use std::path::{Path, PathBuf};

/// Builds a topology from `--topo`, through the simulator's scenario keys.
pub fn topology_from_spec(spec: &str, fail: f64, seed: u64) -> Result<Topology, EvalError> {
    let mut sets = vec![format!("seed={seed}")];
    let base = match spec.split_once(':') {
        Some((kind @ ("fat-tree" | "leaf-spine"), args)) => {
            sets.push(format!("topology.kind=\"{kind}\""));
            for kv in args.split(',').filter(|s| !s.is_empty()) {
                let (k, v) = kv.split_once('=').ok_or_else(|| {
                    EvalError::argument("topo", format!("{spec:?}: {kv:?} is not key=value"))
                })?;
                let key = match k {
                    "k" | "spines" | "leaves" | "oversubscription" => k,
                    "hosts" => "hosts_per_leaf",
                    "gpus" => "gpus_per_host",
                    _ => return Err(EvalError::argument("topo", format!("{spec:?}: unknown key {k:?} (k, spines, leaves, hosts, gpus, oversubscription)"))),
                };
                v.parse::<u32>().map_err(|_| {
                    EvalError::argument(
                        "topo",
                        format!("{spec:?}: {k}={v:?} is not a whole number"),
                    )
                })?;
                sets.push(format!("topology.{key}={v}"));
            }
            PathBuf::from(".")
        }
        None if Path::new(spec).exists() => {
            sets.push("topology.kind=\"file\"".into());
            let abs = std::fs::canonicalize(spec).map_err(|e| format!("{spec}: {e}"))?;
            sets.push(format!("topology.file={:?}", abs.display().to_string()));
            PathBuf::from(".")
        }
        _ => {
            return Err(EvalError::argument(
                "topo",
                format!(
                "{spec:?}: expected fat-tree:k=N, leaf-spine:spines=S,leaves=L,hosts=H or a file"
            ),
            ))
        }
    };
    if !(0.0..=1.0).contains(&fail) {
        return Err(EvalError::argument(
            "fail",
            format!("{fail}: must be a fraction in [0, 1]"),
        ));
    }
    sets.push(format!("topology.fail_fraction={fail}"));
    // The keys are the scenario's (`topology.k: must be even`); the argument is `topo`.
    let sc = Scenario::preset("default", &sets)
        .map_err(|e| EvalError::argument("topo", format!("{spec:?}: {e}")))?;
    build_topology(&sc, &base).map_err(|e| EvalError::argument("topo", format!("{spec:?}: {e}")))
}

/// `random:N` (seeded, without the source), `a,b,c`, or a file of ids.
pub fn parse_destinations(
    spec: &str,
    topo: &Topology,
    src: NodeId,
    seed: u64,
) -> Result<Vec<NodeId>, EvalError> {
    let hosts = topo.num_hosts() as u32;
    if let Some(n) = spec.strip_prefix("random:") {
        let n: u32 = n.parse().map_err(|_| {
            EvalError::argument("dst", format!("{spec:?}: N must be a whole number"))
        })?;
        if n == 0 || n >= hosts {
            return Err(EvalError::argument(
                "dst",
                format!(
                    "{spec:?}: N must be 1..{} (hosts other than the source)",
                    hosts - 1
                ),
            ));
        }
        return Ok(rocast_sim::scenario::workload::sample_hosts(
            hosts, src, n, seed,
        ));
    }
    let text = if Path::new(spec).is_file() {
        std::fs::read_to_string(spec).map_err(|e| format!("{spec}: {e}"))?
    } else {
        spec.to_string()
    };
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            let id: NodeId = s
                .parse()
                .map_err(|_| EvalError::argument("dst", format!("{s:?} is not a host id")))?;
            if id >= hosts {
                return Err(EvalError::argument(
                    "dst",
                    format!("{id} is not a host (0..{hosts})"),
                ));
            }
            Ok(id)
        })
        .collect()
}

/// Builds `algo`'s tree (`routes` is computed on first use by `cepheus` and kept).
pub fn build_tree(
    algo: &str,
    topo: &Topology,
    routes: &mut Option<Routes>,
    src: NodeId,
    dst: &[NodeId],
    time_limit: f64,
) -> Result<MulticastTree, EvalError> {
    let e = |e: rocast_core::plan::multicast_tree::TreeError| EvalError::Setting(e.to_string());
    match algo {
        "optimal" => symmetric_tree(topo, src, dst).map_err(e),
        "peel" => layer_peeling_tree(topo, src, dst).map_err(e),
        "cepheus" => {
            if routes.is_none() {
                *routes = Some(Routes::compute(topo)?);
            }
            hop_by_hop_tree(topo, routes.as_ref().expect("set"), src, dst, &|_, _| 0).map_err(e)
        }
        "exact" => exact_tree(topo, src, dst, time_limit),
        _ => Err(EvalError::argument(
            "algo",
            format!("{algo:?}: expected optimal, peel, cepheus or exact"),
        )),
    }
}

fn role(topo: &Topology, n: NodeId) -> String {
    match topo.roles[n as usize] {
        NodeRole::Host => format!("h{n}"),
        NodeRole::Switch { tier } => format!("s{n} (tier {tier})"),
    }
}

/// The tree as Graphviz DOT (source gold, destinations light blue).
pub fn to_dot(topo: &Topology, tree: &MulticastTree) -> String {
    let mut s = String::from("digraph multicast_tree {\n  rankdir=TB;\n");
    let mut nodes: Vec<NodeId> = tree.arcs.iter().flat_map(|a| [a.parent, a.child]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    for n in nodes {
        let shape = if topo.is_host(n) { "ellipse" } else { "box" };
        let style = if n == tree.source {
            ", style=filled, fillcolor=gold"
        } else if tree.destinations.binary_search(&n).is_ok() {
            ", style=filled, fillcolor=lightblue"
        } else {
            ""
        };
        s.push_str(&format!(
            "  n{n} [label=\"{}\", shape={shape}{style}];\n",
            role(topo, n)
        ));
    }
    for a in &tree.arcs {
        s.push_str(&format!(
            "  n{} -> n{} [label=\"l{}\"];\n",
            a.parent, a.child, a.link
        ));
    }
    s.push_str("}\n");
    s
}

/// The tree as a JSON object (algorithm, topology, source, destinations, sizes, arcs).
pub fn tree_json(
    topo: &Topology,
    algo: &str,
    tree: &MulticastTree,
) -> Result<serde_json::Value, EvalError> {
    let sum = tree.summary(topo)?;
    let v = serde_json::json!({
        "algorithm": algo,
        "topology": topo.name,
        "source": tree.source,
        "destinations": tree.destinations,
        "switches": sum.switches,
        "links": sum.links,
        "depth": sum.depth,
        "lower_bound": sum.lower_bound,
        "arcs": tree.arcs.iter().map(|a| [a.parent, a.child, a.link]).collect::<Vec<_>>(),
    });
    Ok(v)
}
