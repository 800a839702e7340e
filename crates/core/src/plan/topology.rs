//! Datacenter topologies as plain graphs: nodes with a role, full-duplex links with a
//! rate, a propagation delay and a loss rate, and a per-link "failed" mark.
//!
//! Node numbering follows the HPCC simulator's convention: hosts first (0..H), then
//! switches. A node's ports are its links in the order they were added, so port
//! numbers are stable for a given builder and seed.
//!
//! Memory: 32 bytes per link plus 8 bytes per link end in the adjacency lists and 2
//! bytes per node: a k=64 fat-tree (65,536 hosts, 5,120 switches, 196,608 links) takes
//! about 10 MB.

use crate::time::Duration;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

pub type NodeId = u32;

/// What a node is. Switch tiers count up from the hosts: 0 is a top-of-rack (edge or
/// leaf) switch, 1 aggregation or spine, 2 core. A NIC that fans out to several GPUs
/// is a tier-0 switch of its own, with its GPUs as the hosts (PEEL's GPU servers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    Host,
    Switch { tier: u8 },
}

/// One full-duplex link between nodes `a` and `b`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub a: NodeId,
    pub b: NodeId,
    pub rate_bps: u64,
    pub delay: Duration,
    /// Probability that a packet crossing the link (either way) is lost.
    pub loss: f64,
    /// A failed link carries nothing and routing avoids it.
    pub failed: bool,
}

/// The size of a three-tier fat-tree ([`Topology::fat_tree_shaped`]): switch radix
/// `k`, hosts per edge `k/2 × oversubscription`, and how many of the k pods, of how
/// many of a pod's k/2 edge switches, are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatTreeShape {
    pub k: u32,
    pub oversubscription: u32,
    pub pods: u32,
    pub edges_per_pod: u32,
}

/// Rate and propagation delay of the links of one tier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierSpec {
    pub rate_bps: u64,
    pub delay: Duration,
}

impl TierSpec {
    pub const fn new(rate_bps: u64, delay: Duration) -> Self {
        TierSpec { rate_bps, delay }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("fat-tree k must be even and between 2 and 128, got {0}")]
    FatTreeK(u32),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("topology file line {line}: {msg}")]
    File { line: usize, msg: String },
    #[error("link {a}-{b} is not in the topology")]
    NoSuchLink { a: NodeId, b: NodeId },
    #[error("failed-links fraction {0} is not in [0, 1]")]
    FailFraction(String),
    #[error("fat-tree shape: {0}")]
    Shape(String),
    #[error("topology too large: {0} nodes (at most 2^24)")]
    TooLarge(u64),
}

#[derive(Clone, Debug)]
pub struct Topology {
    pub roles: Vec<NodeRole>,
    pub links: Vec<LinkSpec>,
    /// A short description for summaries ("fat-tree k=16", ...).
    pub name: String,
    /// Per node, its links in port order: (link index, peer node).
    adjacency: Vec<Vec<(u32, NodeId)>>,
    n_hosts: u32,
}

impl Topology {
    /// An empty topology with `hosts` hosts (ids 0..hosts) and `switch_tiers` switches.
    pub fn new(name: impl Into<String>, hosts: u32, switch_tiers: &[u8]) -> Self {
        let mut roles = vec![NodeRole::Host; hosts as usize];
        roles.extend(switch_tiers.iter().map(|&tier| NodeRole::Switch { tier }));
        let n = roles.len();
        Topology {
            roles,
            links: Vec::new(),
            name: name.into(),
            adjacency: vec![Vec::new(); n],
            n_hosts: hosts,
        }
    }

    pub fn add_link(&mut self, a: NodeId, b: NodeId, tier: TierSpec) -> u32 {
        let id = self.links.len() as u32;
        self.links.push(LinkSpec {
            a,
            b,
            rate_bps: tier.rate_bps,
            delay: tier.delay,
            loss: 0.0,
            failed: false,
        });
        self.adjacency[a as usize].push((id, b));
        self.adjacency[b as usize].push((id, a));
        id
    }

    pub fn num_nodes(&self) -> usize {
        self.roles.len()
    }
    pub fn num_hosts(&self) -> usize {
        self.n_hosts as usize
    }
    pub fn num_switches(&self) -> usize {
        self.roles.len() - self.n_hosts as usize
    }
    pub fn is_host(&self, n: NodeId) -> bool {
        n < self.n_hosts
    }
    /// Node `n`'s links in port order: (link index, peer).
    pub fn ports(&self, n: NodeId) -> &[(u32, NodeId)] {
        &self.adjacency[n as usize]
    }
    /// The port of `n` that link `link` attaches to (`None` past the 16-bit port
    /// numbers as well; [`Topology::widest_node`] finds such a node).
    pub fn port_of(&self, n: NodeId, link: u32) -> Option<u16> {
        self.adjacency[n as usize]
            .iter()
            .position(|&(l, _)| l == link)
            .and_then(|p| u16::try_from(p).ok())
    }
    /// The node with the most ports, and their number.
    pub fn widest_node(&self) -> Option<(NodeId, usize)> {
        (0..self.adjacency.len())
            .map(|n| (n as NodeId, self.adjacency[n].len()))
            .max_by_key(|&(n, d)| (d, std::cmp::Reverse(n)))
    }
    pub fn find_link(&self, a: NodeId, b: NodeId) -> Option<u32> {
        self.adjacency
            .get(a as usize)?
            .iter()
            .find(|&&(_, p)| p == b)
            .map(|&(l, _)| l)
    }
    /// Bytes held by this description (the figure the README quotes).
    pub fn memory_bytes(&self) -> usize {
        self.roles.len() * std::mem::size_of::<NodeRole>()
            + self.links.len() * std::mem::size_of::<LinkSpec>()
            + self
                .adjacency
                .iter()
                .map(|a| a.capacity() * 8 + 24)
                .sum::<usize>()
    }

    /// Wires server `server` to its top-of-rack switch `tor`: directly (the server is a
    /// host), or, with `gpus_per_host > 0`, as the NIC switch `nic` with GPUs
    /// `server·gpus .. (server+1)·gpus` behind it.
    fn attach_server(
        &mut self,
        server: u32,
        gpus_per_host: u32,
        nic: NodeId,
        tor: NodeId,
        host: TierSpec,
        gpu: TierSpec,
    ) {
        if gpus_per_host > 0 {
            for g in 0..gpus_per_host {
                self.add_link(server * gpus_per_host + g, nic, gpu);
            }
            self.add_link(nic, tor, host);
        } else {
            self.add_link(server, tor, host);
        }
    }

    /// The k-ary three-tier fat-tree: k pods of k/2 edge and k/2 aggregation switches,
    /// (k/2)² core switches, and `k/2 × oversubscription` hosts per edge switch
    /// (oversubscription 1 gives the classic k³/4 hosts). Edge `e` of pod `p` is
    /// wired to every aggregation switch of its pod; aggregation `a` of every pod to
    /// cores `a·k/2 .. (a+1)·k/2`.
    pub fn fat_tree(
        k: u32,
        oversubscription: u32,
        host: TierSpec,
        edge_agg: TierSpec,
        agg_core: TierSpec,
    ) -> Result<Self, TopologyError> {
        Self::fat_tree_with_gpus(k, oversubscription, 0, host, edge_agg, agg_core, host)
    }

    /// [`fat_tree`](Self::fat_tree) whose servers, with `gpus_per_host > 0`, are NICs
    /// (tier-0 switches) fanning out to that many GPUs (the hosts) over `gpu` links, as
    /// in PEEL §4; edges are then tier 1, aggregation 2, core 3. Numbering: GPUs, NICs,
    /// edges, aggregation, cores.
    pub fn fat_tree_with_gpus(
        k: u32,
        oversubscription: u32,
        gpus_per_host: u32,
        host: TierSpec,
        edge_agg: TierSpec,
        agg_core: TierSpec,
        gpu: TierSpec,
    ) -> Result<Self, TopologyError> {
        let shape = FatTreeShape {
            k,
            oversubscription,
            pods: k,
            edges_per_pod: k / 2,
        };
        Self::fat_tree_shaped(shape, gpus_per_host, host, edge_agg, agg_core, gpu)
    }

    /// A three-tier fat-tree of k-port switches with only some of its pods, or pods of
    /// fewer edge switches ([`FatTreeShape`]): `pods` pods of `edges_per_pod` edge
    /// switches, each edge with `k/2 × oversubscription` hosts and one uplink to each of
    /// its pod's k/2 aggregation switches; aggregation `a` of every pod has
    /// `edges_per_pod` uplinks, to cores `a·edges_per_pod .. (a+1)·edges_per_pod`, so
    /// that every tier above the edge stays 1:1. With `pods = k` and `edges_per_pod = k/2`
    /// this is the classic k-ary fat-tree. Cepheus §V-C's "3-layer fat-tree with 1024
    /// servers … each switch has 64 100Gbps ports" is k = 64 with 2 pods of 16 edges.
    pub fn fat_tree_shaped(
        shape: FatTreeShape,
        gpus_per_host: u32,
        host: TierSpec,
        edge_agg: TierSpec,
        agg_core: TierSpec,
        gpu: TierSpec,
    ) -> Result<Self, TopologyError> {
        let FatTreeShape {
            k,
            oversubscription,
            pods,
            edges_per_pod: epp,
        } = shape;
        if k < 2 || k % 2 != 0 || k > 128 {
            return Err(TopologyError::FatTreeK(k));
        }
        if oversubscription == 0 {
            return Err(TopologyError::Zero("oversubscription"));
        }
        let h = k / 2;
        if pods == 0 || pods > k {
            return Err(TopologyError::Shape(format!(
                "pods {pods}: a k={k} fat-tree has 1 to {k}"
            )));
        }
        if epp == 0 || epp > h {
            return Err(TopologyError::Shape(format!(
                "edges_per_pod {epp}: a k={k} pod has 1 to {h}"
            )));
        }
        let hosts_per_edge = h * oversubscription;
        let n_edge = pods * epp;
        let n_agg = pods * h;
        let n_core = h * epp;
        let n_servers = n_edge as u64 * hosts_per_edge as u64;
        let (n_hosts, n_nics) = if gpus_per_host > 0 {
            (n_servers * gpus_per_host as u64, n_servers)
        } else {
            (n_servers, 0)
        };
        let total = n_hosts + n_nics + n_edge as u64 + n_agg as u64 + n_core as u64;
        if total >= 1 << 24 {
            return Err(TopologyError::TooLarge(total));
        }
        let (n_hosts, n_nics) = (n_hosts as u32, n_nics as u32);
        let base = u8::from(gpus_per_host > 0);
        let mut tiers = vec![0u8; n_nics as usize];
        tiers.extend(std::iter::repeat_n(base, n_edge as usize));
        tiers.extend(std::iter::repeat_n(base + 1, n_agg as usize));
        tiers.extend(std::iter::repeat_n(base + 2, n_core as usize));
        let mut name = if oversubscription == 1 {
            format!("fat-tree k={k}")
        } else {
            format!("fat-tree k={k} oversubscribed {oversubscription}:1")
        };
        if pods != k || epp != h {
            name.push_str(&format!(
                ", {pods} pods of {epp} edges ({n_servers} servers)"
            ));
        }
        if gpus_per_host > 0 {
            name.push_str(&format!(", {gpus_per_host} GPUs/server"));
        }
        let mut t = Topology::new(name, n_hosts, &tiers);
        let nic = |s: u32| n_hosts + s;
        let edge = |p: u32, e: u32| n_hosts + n_nics + p * epp + e;
        let agg = |p: u32, a: u32| n_hosts + n_nics + n_edge + p * h + a;
        let core = |c: u32| n_hosts + n_nics + n_edge + n_agg + c;
        t.links
            .reserve((n_hosts + n_nics + n_edge * h + n_agg * epp) as usize);
        for p in 0..pods {
            for e in 0..epp {
                for i in 0..hosts_per_edge {
                    let server = (p * epp + e) * hosts_per_edge + i;
                    t.attach_server(server, gpus_per_host, nic(server), edge(p, e), host, gpu);
                }
            }
        }
        for p in 0..pods {
            for e in 0..epp {
                for a in 0..h {
                    t.add_link(edge(p, e), agg(p, a), edge_agg);
                }
            }
        }
        for a in 0..h {
            for j in 0..epp {
                for p in 0..pods {
                    t.add_link(agg(p, a), core(a * epp + j), agg_core);
                }
            }
        }
        Ok(t)
    }

    /// A two-tier leaf–spine: every leaf wired to every spine, `hosts_per_leaf` servers
    /// per leaf. With `gpus_per_host > 0` each server is a NIC (a tier-0 switch node)
    /// fanning out to that many GPUs (the hosts) over `gpu` links, so leaves are tier 1
    /// and spines tier 2; otherwise leaves are tier 0 and spines tier 1.
    pub fn leaf_spine(
        spines: u32,
        leaves: u32,
        hosts_per_leaf: u32,
        gpus_per_host: u32,
        host: TierSpec,
        leaf_spine: TierSpec,
        gpu: TierSpec,
    ) -> Result<Self, TopologyError> {
        for (v, n) in [
            (spines, "spines"),
            (leaves, "leaves"),
            (hosts_per_leaf, "hosts_per_leaf"),
        ] {
            if v == 0 {
                return Err(TopologyError::Zero(n));
            }
        }
        let servers = leaves as u64 * hosts_per_leaf as u64;
        let endpoints = servers * gpus_per_host.max(1) as u64;
        let nic_switches = if gpus_per_host > 0 { servers } else { 0 };
        let total = endpoints + nic_switches + leaves as u64 + spines as u64;
        if total >= 1 << 24 {
            return Err(TopologyError::TooLarge(total));
        }
        let base = if gpus_per_host > 0 { 1 } else { 0 };
        let mut tiers = vec![0u8; nic_switches as usize];
        tiers.extend(std::iter::repeat_n(base, leaves as usize));
        tiers.extend(std::iter::repeat_n(base + 1, spines as usize));
        let name = if gpus_per_host > 0 {
            format!("leaf-spine {spines}x{leaves}, {hosts_per_leaf} servers/leaf, {gpus_per_host} GPUs/server")
        } else {
            format!("leaf-spine {spines}x{leaves}, {hosts_per_leaf} hosts/leaf")
        };
        let endpoints = endpoints as u32;
        let mut t = Topology::new(name, endpoints, &tiers);
        let nic = |s: u32| endpoints + s;
        let leaf = |l: u32| endpoints + nic_switches as u32 + l;
        let spine = |s: u32| endpoints + nic_switches as u32 + leaves + s;
        for l in 0..leaves {
            for i in 0..hosts_per_leaf {
                let server = l * hosts_per_leaf + i;
                t.attach_server(server, gpus_per_host, nic(server), leaf(l), host, gpu);
            }
        }
        for l in 0..leaves {
            for s in 0..spines {
                t.add_link(leaf(l), spine(s), leaf_spine);
            }
        }
        Ok(t)
    }

    /// Reads an HPCC-simulator topology file: `N S L` (nodes, switches, links), then the
    /// S switch ids, then L lines `src dst rate delay error_rate` such as
    /// `0 320 100Gbps 1000ns 0.000000`. Non-switch ids are hosts; the file's ids are
    /// renumbered so hosts come first, in ascending id order, then switches. Switch tiers
    /// are hop distances from the nearest host minus one.
    pub fn from_hpcc_file(text: &str) -> Result<Self, TopologyError> {
        let err = |line: usize, msg: String| TopologyError::File { line, msg };
        let mut tokens = text
            .lines()
            .enumerate()
            .flat_map(|(i, l)| l.split_whitespace().map(move |t| (i + 1, t)));
        let mut next = |what: &str| {
            tokens
                .next()
                .ok_or_else(|| err(0, format!("unexpected end of file, expected {what}")))
        };
        let mut num = |what: &str| -> Result<u64, TopologyError> {
            let (line, t) = next(what)?;
            t.parse::<u64>()
                .map_err(|_| err(line, format!("expected {what} (an integer), found {t:?}")))
        };
        let n = num("the node count")?;
        let s = num("the switch count")?;
        let l = num("the link count")?;
        if n >= 1 << 24 {
            return Err(TopologyError::TooLarge(n));
        }
        if s > n {
            return Err(err(1, format!("{s} switches but only {n} nodes")));
        }
        let mut is_switch = vec![false; n as usize];
        for _ in 0..s {
            let id = num("a switch id")?;
            if id >= n {
                return Err(err(
                    2,
                    format!("switch id {id} is not below the node count {n}"),
                ));
            }
            is_switch[id as usize] = true;
        }
        let mut raw = Vec::with_capacity(l.min(1 << 20) as usize);
        for _ in 0..l {
            let (line, a) = next("a link's source id")?;
            let a: u64 = a
                .parse()
                .map_err(|_| err(line, format!("expected a node id, found {a:?}")))?;
            let (_, b) = next("a link's destination id")?;
            let b: u64 = b
                .parse()
                .map_err(|_| err(line, format!("expected a node id, found {b:?}")))?;
            if a >= n || b >= n || a == b {
                return Err(err(
                    line,
                    format!("link {a}-{b}: ids must differ and be below {n}"),
                ));
            }
            let (_, rate) = next("a link rate")?;
            let rate = crate::units::parse_rate(rate).map_err(|e| err(line, e.to_string()))?;
            let (_, delay) = next("a link delay")?;
            let delay = crate::units::parse_duration(delay)
                .map(Duration::from_ps)
                .map_err(|e| err(line, e.to_string()))?;
            let (_, loss) = next("a link error rate")?;
            let loss: f64 = loss
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=1.0).contains(p))
                .ok_or_else(|| err(line, format!("error rate {loss:?} is not a probability")))?;
            raw.push((a as usize, b as usize, rate, delay, loss));
        }
        if let Ok((line, t)) = next("") {
            return Err(err(line, format!("unexpected trailing token {t:?}")));
        }
        // Renumber: hosts first, then switches, each in ascending file id.
        let mut new_id = vec![0u32; n as usize];
        let mut hosts = 0u32;
        for (i, sw) in is_switch.iter().enumerate() {
            if !sw {
                new_id[i] = hosts;
                hosts += 1;
            }
        }
        let mut next_sw = hosts;
        for (i, sw) in is_switch.iter().enumerate() {
            if *sw {
                new_id[i] = next_sw;
                next_sw += 1;
            }
        }
        let mut t = Topology::new("HPCC topology file", hosts, &vec![0; s as usize]);
        for (a, b, rate, delay, loss) in raw {
            let id = t.add_link(new_id[a], new_id[b], TierSpec::new(rate, delay));
            t.links[id as usize].loss = loss;
        }
        // Tiers by BFS distance from the hosts.
        let mut dist = vec![u32::MAX; t.num_nodes()];
        let mut q = std::collections::VecDeque::new();
        for h in 0..hosts {
            dist[h as usize] = 0;
            q.push_back(h);
        }
        while let Some(u) = q.pop_front() {
            for &(_, v) in t.ports(u) {
                if dist[v as usize] == u32::MAX {
                    dist[v as usize] = dist[u as usize] + 1;
                    q.push_back(v);
                }
            }
        }
        for v in hosts as usize..t.num_nodes() {
            let tier = dist[v].saturating_sub(1).min(255) as u8;
            t.roles[v] = NodeRole::Switch { tier };
        }
        Ok(t)
    }

    /// Fails `fraction` of the switch-to-switch links, chosen by a seeded shuffle (host
    /// links stay up: failing one would only disconnect its host; so do the uplinks of
    /// GPU servers' NICs, switches with a single switch neighbour). Returns the failed
    /// link indices, ascending.
    pub fn fail_fraction(&mut self, fraction: f64, seed: u64) -> Result<Vec<u32>, TopologyError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(TopologyError::FailFraction(fraction.to_string()));
        }
        let single_uplink = |n: NodeId| {
            self.adjacency[n as usize]
                .iter()
                .filter(|&&(_, m)| !self.is_host(m))
                .count()
                == 1
        };
        let mut fabric: Vec<u32> = (0..self.links.len() as u32)
            .filter(|&l| {
                let s = &self.links[l as usize];
                !self.is_host(s.a)
                    && !self.is_host(s.b)
                    && !single_uplink(s.a)
                    && !single_uplink(s.b)
            })
            .collect();
        let n = (fraction * fabric.len() as f64).round() as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Partial Fisher-Yates: the first n entries are a uniform sample.
        for i in 0..n {
            let j = i + (rng.next_u64() % (fabric.len() - i) as u64) as usize;
            fabric.swap(i, j);
        }
        let mut chosen = fabric[..n].to_vec();
        chosen.sort_unstable();
        for &l in &chosen {
            self.links[l as usize].failed = true;
        }
        Ok(chosen)
    }

    /// Fails the link between `a` and `b`.
    pub fn fail_link(&mut self, a: NodeId, b: NodeId) -> Result<u32, TopologyError> {
        let l = self
            .find_link(a, b)
            .ok_or(TopologyError::NoSuchLink { a, b })?;
        self.links[l as usize].failed = true;
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier() -> TierSpec {
        TierSpec::new(100_000_000_000, Duration::from_ns(1000))
    }

    #[test]
    fn fat_tree_counts_match_the_formulas() {
        for k in [2u32, 4, 8, 16] {
            let t = Topology::fat_tree(k, 1, tier(), tier(), tier()).unwrap();
            assert_eq!(t.num_hosts() as u32, k * k * k / 4);
            assert_eq!(t.num_switches() as u32, k * k + k * k / 4);
            assert_eq!(t.links.len() as u32, k * k * k / 4 * 3);
            // every switch has k ports
            for s in t.num_hosts()..t.num_nodes() {
                assert_eq!(t.ports(s as u32).len() as u32, k, "k={k} switch {s}");
            }
        }
        let t = Topology::fat_tree(4, 2, tier(), tier(), tier()).unwrap();
        assert_eq!(t.num_hosts(), 32);
        assert_eq!(t.ports(32).len(), 6, "edge: 4 hosts + 2 up");
        assert!(Topology::fat_tree(3, 1, tier(), tier(), tier()).is_err());
        assert!(Topology::fat_tree(0, 1, tier(), tier(), tier()).is_err());
    }

    #[test]
    fn cepheus_fabric_of_64_port_switches_has_1024_servers_at_1_to_1() {
        let shape = FatTreeShape {
            k: 64,
            oversubscription: 1,
            pods: 2,
            edges_per_pod: 16,
        };
        let t = Topology::fat_tree_shaped(shape, 0, tier(), tier(), tier(), tier()).unwrap();
        assert_eq!(t.num_hosts(), 1024);
        let tiers = |tier: u8| {
            (t.num_hosts()..t.num_nodes())
                .filter(|&n| t.roles[n] == NodeRole::Switch { tier })
                .collect::<Vec<_>>()
        };
        let (edges, aggs, cores) = (tiers(0), tiers(1), tiers(2));
        assert_eq!((edges.len(), aggs.len(), cores.len()), (32, 64, 512));
        // Edge: 32 hosts down, 32 up (1:1); aggregation: 16 down, 16 up; core: a port
        // per pod. No switch uses more than its 64 ports.
        for &e in &edges {
            let up = t.ports(e as u32).iter().filter(|p| !t.is_host(p.1)).count();
            assert_eq!((t.ports(e as u32).len(), up), (64, 32));
        }
        for &a in &aggs {
            assert_eq!(t.ports(a as u32).len(), 32);
        }
        for &c in &cores {
            assert_eq!(t.ports(c as u32).len(), 2);
        }
        // The classic shape is what fat_tree builds.
        let classic = FatTreeShape {
            k: 8,
            oversubscription: 1,
            pods: 8,
            edges_per_pod: 4,
        };
        let a = Topology::fat_tree_shaped(classic, 0, tier(), tier(), tier(), tier()).unwrap();
        let b = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
        assert_eq!(a.links, b.links);
        for (pods, epp) in [(0, 4), (9, 4), (8, 0), (8, 5)] {
            let bad = FatTreeShape {
                pods,
                edges_per_pod: epp,
                ..classic
            };
            assert!(Topology::fat_tree_shaped(bad, 0, tier(), tier(), tier(), tier()).is_err());
        }
    }

    #[test]
    fn leaf_spine_with_gpus_puts_a_nic_switch_in_front() {
        let t = Topology::leaf_spine(2, 3, 4, 0, tier(), tier(), tier()).unwrap();
        assert_eq!(
            (t.num_hosts(), t.num_switches(), t.links.len()),
            (12, 5, 12 + 6)
        );
        let g = Topology::leaf_spine(2, 3, 4, 8, tier(), tier(), tier()).unwrap();
        assert_eq!(g.num_hosts(), 96);
        assert_eq!(g.num_switches(), 12 + 3 + 2);
        assert_eq!(g.roles[96], NodeRole::Switch { tier: 0 });
        assert_eq!(g.roles[96 + 12], NodeRole::Switch { tier: 1 });
        assert_eq!(g.ports(96).len(), 9, "8 GPUs and one uplink");
    }

    #[test]
    fn hpcc_file_round_trip_and_errors() {
        let text = "5 2 4\n3 4\n0 3 100Gbps 1000ns 0\n1 3 100Gbps 1000ns 0\n2 4 100Gbps 1us 0.01\n3 4 400Gbps 0.5us 0\n";
        let t = Topology::from_hpcc_file(text).unwrap();
        assert_eq!((t.num_hosts(), t.num_switches()), (3, 2));
        assert_eq!(t.links[2].loss, 0.01);
        assert_eq!(t.links[3].rate_bps, 400_000_000_000);
        assert_eq!(t.links[3].delay, Duration::from_ns(500));
        assert_eq!(t.roles[3], NodeRole::Switch { tier: 0 });
        for (bad, want) in [
            ("5 2 1\n3 4\n0 3 100Gbps 1000ns", "end of file"),
            ("5 2 1\n3 9\n", "switch id 9"),
            ("5 2 1\n3 4\n0 3 fast 1000ns 0", "rate"),
            ("5 2 1\n3 4\n0 3 1Gbps 10 0", "unit"),
            ("5 2 1\n3 4\n0 3 1Gbps 10ns 2", "probability"),
            ("5 2 1\n3 4\n0 0 1Gbps 10ns 0", "must differ"),
            ("5 2 1\n3 4\n0 3 1Gbps 10ns 0 7", "trailing"),
            ("x", "integer"),
        ] {
            let e = Topology::from_hpcc_file(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn seeded_failures_are_reproducible_and_spare_host_links() {
        let mut a = Topology::fat_tree(8, 1, tier(), tier(), tier()).unwrap();
        let mut b = a.clone();
        let fa = a.fail_fraction(0.1, 7).unwrap();
        let fb = b.fail_fraction(0.1, 7).unwrap();
        assert_eq!(fa, fb);
        assert_eq!(fa.len(), (0.1f64 * 256.0).round() as usize);
        assert!(fa.iter().all(|&l| l >= 128), "host links are 0..128");
        let fc = b.clone().fail_fraction(0.1, 8).unwrap();
        assert_ne!(fa, fc);
        assert!(a.fail_fraction(1.5, 0).is_err());
    }
}
