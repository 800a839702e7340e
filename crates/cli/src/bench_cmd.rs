//! `rocast bench …`: benchmarks that print figures (never pass/fail assertions).

use clap::Subcommand;
use rocast_core::plan::{Routes, TierSpec, Topology};
use rocast_core::time::Duration;

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Build a k-ary fat-tree and precompute its ECMP routes; print time and memory.
    FatTree {
        #[arg(long, default_value_t = 64)]
        k: u32,
    },
}

fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn run(cmd: BenchCmd) -> Result<(), String> {
    match cmd {
        BenchCmd::FatTree { k } => {
            let tier = TierSpec::new(100_000_000_000, Duration::from_ns(1000));
            let t0 = std::time::Instant::now();
            let topo = Topology::fat_tree(k, 1, tier, tier, tier).map_err(|e| e.to_string())?;
            let build = t0.elapsed().as_secs_f64();
            let t1 = std::time::Instant::now();
            let routes = Routes::compute(&topo).map_err(|e| e.to_string())?;
            let route = t1.elapsed().as_secs_f64();
            println!(
                "# fat-tree k={k}: {} hosts, {} switches, {} links",
                topo.num_hosts(),
                topo.num_switches(),
                topo.links.len()
            );
            println!("build_s {build:.3}");
            println!("route_s {route:.3}");
            println!("total_s {:.3}", build + route);
            println!("topology_mb {:.1}", topo.memory_bytes() as f64 / 1e6);
            println!(
                "routes_mb {:.1}  ({} next-hop groups)",
                routes.memory_bytes() as f64 / 1e6,
                routes.num_groups()
            );
            if let Some(kb) = peak_rss_kb() {
                println!("peak_rss_mb {:.1}", kb as f64 / 1024.0);
            }
            Ok(())
        }
    }
}
