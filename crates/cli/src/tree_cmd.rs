//! `rocast tree`: build a multicast tree offline (PEEL §2, Cepheus' hop-by-hop tree, or
//! the exact optimum) and, with `--prefix`, PEEL's static prefix rules and the group's
//! cover sets (PEEL §3.2).

use clap::Args;
use rocast_core::plan::multicast_tree::{lower_bound, MulticastTree};
use rocast_core::plan::prefix::{
    header_bits, naive_entries, plan_group, static_rules, CoverPolicy, PrefixLayout,
};
use rocast_core::plan::topology::{NodeId, Topology};
pub(crate) use rocast_eval::trees::topology_from_spec;
use rocast_eval::trees::{build_tree, parse_destinations, to_dot, tree_json};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct TreeCmd {
    /// fat-tree:k=64[,gpus=8][,oversubscription=1], leaf-spine:spines=16,leaves=48,hosts=2[,gpus=8],
    /// or an HPCC topology file.
    #[arg(long, default_value = "fat-tree:k=8")]
    topo: String,
    /// Fraction of switch-to-switch links to fail (seeded by --seed).
    #[arg(long, default_value_t = 0.0)]
    fail: f64,
    /// Source host.
    #[arg(long, default_value_t = 0)]
    src: NodeId,
    /// Destinations: random:N (seeded), a comma list of host ids, or a file of host ids.
    #[arg(long, default_value = "random:16")]
    dst: String,
    /// optimal (fault-free fabrics), peel, cepheus, exact; a comma list compares them.
    #[arg(long, default_value = "peel")]
    algo: String,
    /// Seed of the failed links and of random:N destinations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time limit of the exact solver (120s, 2.5s; a bare number is seconds).
    #[arg(long, default_value = "120s", value_parser = crate::output::parse_seconds)]
    exact_time_limit: f64,
    /// Write the tree (of the first algorithm) as Graphviz DOT.
    #[arg(long)]
    dot: Option<PathBuf>,
    /// Write the tree (of the first algorithm) as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also print the prefix rules per switch and the group's covers.
    #[arg(long)]
    prefix: bool,
    /// Covers: exact, or over:N (at most N packets per plane, over-covering).
    #[arg(long, default_value = "exact")]
    cover: String,
    /// Message size for the extra-bytes figures (bytes; K/M/G suffixes).
    #[arg(long, default_value = "1M")]
    message: String,
}

pub(crate) fn parse_cover(s: &str) -> Result<CoverPolicy, String> {
    match s {
        "exact" => Ok(CoverPolicy::Exact),
        _ => match s.strip_prefix("over:").map(str::parse::<u32>) {
            Some(Ok(n)) if n > 0 => Ok(CoverPolicy::OverCover { max_prefixes: n }),
            _ => Err(format!("--cover {s:?}: expected exact or over:N (N ≥ 1)")),
        },
    }
}

pub fn run(cmd: TreeCmd) -> Result<(), String> {
    let topo = topology_from_spec(&cmd.topo, cmd.fail, cmd.seed).map_err(|e| e.to_string())?;
    let dst = parse_destinations(&cmd.dst, &topo, cmd.src, cmd.seed).map_err(|e| e.to_string())?;
    let algos: Vec<&str> = cmd.algo.split(',').filter(|s| !s.is_empty()).collect();
    if algos.is_empty() {
        return Err("--algo: name at least one algorithm".into());
    }
    let failed = topo.links.iter().filter(|l| l.failed).count();
    let lb = lower_bound(&topo, cmd.src, &dst).map_err(|e| e.to_string())?;
    println!(
        "# {}: {} hosts, {} switches, {} links ({} failed); source {}, {} destinations; lower bound max(|D|, F) = {lb}",
        topo.name,
        topo.num_hosts(),
        topo.num_switches(),
        topo.links.len(),
        failed,
        cmd.src,
        dst.len()
    );
    let mut routes = None;
    let mut trees = Vec::new();
    for &algo in &algos {
        let t0 = std::time::Instant::now();
        let tree = build_tree(
            algo,
            &topo,
            &mut routes,
            cmd.src,
            &dst,
            cmd.exact_time_limit,
        )
        .map_err(|e| e.to_string())?;
        let secs = t0.elapsed().as_secs_f64();
        tree.validate(&topo).map_err(|e| format!("{algo}: {e}"))?;
        trees.push((algo, tree, secs));
    }
    let exact_links = trees
        .iter()
        .find(|(a, _, _)| *a == "exact")
        .map(|(_, t, _)| t.arcs.len());
    println!("algorithm  switches  links  depth  links/LB  links/exact  time_ms");
    for (algo, tree, secs) in &trees {
        let s = tree.summary(&topo).map_err(|e| e.to_string())?;
        let vs_exact = exact_links
            .map(|x| format!("{:.3}", s.links as f64 / x as f64))
            .unwrap_or_else(|| "-".into());
        println!(
            "{algo:<10} {:>8}  {:>5}  {:>5}  {:>8.3}  {vs_exact:>11}  {:>7.2}",
            s.switches,
            s.links,
            s.depth,
            s.links as f64 / s.lower_bound as f64,
            secs * 1e3
        );
    }
    let (algo0, tree0, _) = &trees[0];
    if let Some(path) = &cmd.dot {
        std::fs::write(path, to_dot(&topo, tree0))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("dot ({algo0}): {}", path.display());
    }
    if let Some(path) = &cmd.json {
        std::fs::write(
            path,
            crate::output::pretty(&tree_json(&topo, algo0, tree0).map_err(|e| e.to_string())?),
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("json ({algo0}): {}", path.display());
    }
    if cmd.prefix {
        let policy = parse_cover(&cmd.cover)?;
        let message = rocast_sim::scenario::config::parse_bytes(&cmd.message)
            .map_err(|e| format!("--message: {e}"))?;
        print_prefix(&topo, tree0, algo0, policy, message)?;
    }
    Ok(())
}

fn print_prefix(
    topo: &Topology,
    tree: &MulticastTree,
    algo: &str,
    policy: CoverPolicy,
    message: u64,
) -> Result<(), String> {
    let layout = PrefixLayout::from_topology(topo).map_err(|e| e.to_string())?;
    let racks_per_pod = layout.pods.iter().map(|p| p.racks.len()).max().unwrap_or(0) as u32;
    let bits = layout.pods.iter().map(|p| p.bits).max().unwrap_or(0);
    println!(
        "\n# prefix state: {} pods, {} racks per pod (tier {}), {}-bit rack ids",
        layout.pods.len(),
        racks_per_pod,
        layout.rack_tier,
        bits
    );
    println!(
        "rules per prefix-tier switch: {} static (one per power-of-two block); naive IP multicast: up to {} (2^{racks_per_pod} − 1 rack subsets)",
        layout.max_rules(),
        naive_entries(racks_per_pod)
    );
    println!(
        "header: {} bits of (prefix value, prefix length) in rocast's 8-byte PEEL shim (UDP port 4793, between UDP and BTH)",
        header_bits(bits)
    );
    let plan = plan_group(topo, &layout, tree, policy).map_err(|e| e.to_string())?;
    let mut planes: Vec<NodeId> = plan.packets.iter().map(|p| p.plane).collect();
    planes.dedup();
    for plane in planes {
        let pod = layout.plane_pod(plane).expect("plane");
        let b = layout.pods[pod as usize].bits;
        println!(
            "switch s{plane} (pod {pod}, plane {}): {} rules",
            layout.plane_index(plane).expect("plane"),
            static_rules(layout.pods[pod as usize].racks.len() as u32).len()
        );
        for (prefix, ports) in layout.rules(topo, plane) {
            println!(
                "  {:>8}/{} -> ports {ports:?}",
                prefix.render(b),
                prefix.len
            );
        }
    }
    println!("covers of this group ({algo} tree, {policy:?}):");
    for p in &plan.packets {
        let b = layout.pods[p.pod as usize].bits;
        println!(
            "  pod {:>3} via s{:<6} {}/{}",
            p.pod,
            p.plane,
            p.prefix.render(b),
            p.prefix.len
        );
    }
    let (extra_static, extra_prog) = plan.extra_bytes(message);
    println!(
        "packets per message {}, member racks {}, over-covered racks discarding {}",
        plan.packets.len(),
        plan.member_racks,
        plan.discarded_rack_copies
    );
    println!(
        "link copies per message: tree {}, static prefixes {}, programmable core {}; extra bytes per {message}-byte message: static {extra_static}, programmable {extra_prog}",
        plan.tree_link_copies, plan.static_link_copies, plan.programmable_link_copies
    );
    println!(
        "naive per-group state for this group: {} entries (one per switch on the tree), against 0 per-group entries with PEEL",
        plan.naive_group_entries
    );
    Ok(())
}
