//! Shortest-path ECMP routing, precomputed.
//!
//! Every host hangs off one top-of-rack switch (its ToR; a GPU's ToR is its NIC
//! switch). For each ToR a breadth-first search over the working switch-to-switch links
//! gives every switch its hop distance; a switch's next hops towards that ToR are its
//! ports to neighbours one hop closer, as in the HPCC simulator's `CalculateRoute`.
//! Identical next-hop sets are stored once, so the table is one `u32` per
//! (switch, ToR) plus a small pool of port lists.
//!
//! Forwarding is then `next_hop(switch, dst_host, hash)`: the host's own port at its
//! ToR, else `group[hash % len]` — two lookups, no search.
//!
//! Memory: 4 bytes per (switch, ToR) pair, plus 6 bytes per host: 42 MB for a k=64
//! fat-tree (5,120 switches × 2,048 ToRs), 0.3 MB for k=16.

use super::topology::{NodeId, Topology};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    #[error("host {host} has {links} links; a host needs exactly one (to its ToR)")]
    HostLinks { host: NodeId, links: usize },
    #[error("host {0} is wired straight to another host; hosts must attach to a switch")]
    HostToHost(NodeId),
}

/// Precomputed next hops of every switch towards every ToR.
#[derive(Debug, Clone)]
pub struct Routes {
    n_hosts: u32,
    /// Per host: its ToR and the ToR's port towards it.
    host_attach: Vec<(NodeId, u16)>,
    /// Per switch (node id − hosts): its index among ToRs, or `u32::MAX`.
    tor_index: Vec<u32>,
    n_tors: usize,
    /// Per (switch, ToR): a next-hop group id, 0 when unreachable.
    next_group: Vec<u32>,
    /// Group g's ports are `group_ports[group_start[g]..group_start[g + 1]]`.
    group_start: Vec<u32>,
    group_ports: Vec<u16>,
}

impl Routes {
    /// Routes over the links of `topo` not marked failed.
    pub fn compute(topo: &Topology) -> Result<Self, RoutingError> {
        let n_hosts = topo.num_hosts() as u32;
        let n_sw = topo.num_switches();
        let mut host_attach = Vec::with_capacity(n_hosts as usize);
        let mut tor_index = vec![u32::MAX; n_sw];
        let mut tors = Vec::new();
        for h in 0..n_hosts {
            let ports = topo.ports(h);
            if ports.len() != 1 {
                return Err(RoutingError::HostLinks {
                    host: h,
                    links: ports.len(),
                });
            }
            let (link, tor) = ports[0];
            if topo.is_host(tor) {
                return Err(RoutingError::HostToHost(h));
            }
            let port = topo.port_of(tor, link).expect("adjacency is symmetric");
            host_attach.push((tor, port));
            let ti = &mut tor_index[(tor - n_hosts) as usize];
            if *ti == u32::MAX {
                *ti = tors.len() as u32;
                tors.push(tor);
            }
        }
        let n_tors = tors.len();
        let mut next_group = vec![0u32; n_sw * n_tors];
        let mut group_start = vec![0u32, 0u32]; // group 0: unreachable, empty
        let mut group_ports: Vec<u16> = Vec::new();
        let mut group_of: HashMap<Box<[u16]>, u32> = HashMap::new();
        let mut dist = vec![u16::MAX; n_sw];
        let mut queue: Vec<u32> = Vec::with_capacity(n_sw);
        let mut buf: Vec<u16> = Vec::new();
        let up = |l: u32| !topo.links[l as usize].failed;
        for (ti, &tor) in tors.iter().enumerate() {
            dist.fill(u16::MAX);
            queue.clear();
            dist[(tor - n_hosts) as usize] = 0;
            queue.push(tor);
            let mut head = 0;
            while head < queue.len() {
                let u = queue[head];
                head += 1;
                let du = dist[(u - n_hosts) as usize];
                for &(l, v) in topo.ports(u) {
                    if v < n_hosts || !up(l) {
                        continue;
                    }
                    let dv = &mut dist[(v - n_hosts) as usize];
                    if *dv == u16::MAX {
                        *dv = du + 1;
                        queue.push(v);
                    }
                }
            }
            for &s in &queue[1..] {
                let ds = dist[(s - n_hosts) as usize];
                buf.clear();
                for (p, &(l, v)) in topo.ports(s).iter().enumerate() {
                    if v >= n_hosts && up(l) && dist[(v - n_hosts) as usize] == ds - 1 {
                        buf.push(p as u16);
                    }
                }
                let g = match group_of.get(&buf[..]) {
                    Some(&g) => g,
                    None => {
                        let g = group_start.len() as u32 - 1;
                        group_ports.extend_from_slice(&buf);
                        group_start.push(group_ports.len() as u32);
                        group_of.insert(buf.clone().into_boxed_slice(), g);
                        g
                    }
                };
                next_group[(s - n_hosts) as usize * n_tors + ti] = g;
            }
        }
        Ok(Routes {
            n_hosts,
            host_attach,
            tor_index,
            n_tors,
            next_group,
            group_start,
            group_ports,
        })
    }

    /// The ToR of `host` and the ToR's port towards it.
    pub fn attachment(&self, host: NodeId) -> (NodeId, u16) {
        self.host_attach[host as usize]
    }

    /// The equal-cost ports of `switch` towards `dst_host` (empty if unreachable, or if
    /// `switch` is the host's ToR: then the answer is [`attachment`](Self::attachment)).
    pub fn next_hops(&self, switch: NodeId, dst_host: NodeId) -> &[u16] {
        let (tor, _) = self.host_attach[dst_host as usize];
        let ti = self.tor_index[(tor - self.n_hosts) as usize] as usize;
        let g = self.next_group[(switch - self.n_hosts) as usize * self.n_tors + ti] as usize;
        &self.group_ports[self.group_start[g] as usize..self.group_start[g + 1] as usize]
    }

    /// The port `switch` forwards a packet for `dst_host` on, choosing among equal-cost
    /// ports by `hash`; `None` if the host is unreachable from here.
    #[inline]
    pub fn next_hop(&self, switch: NodeId, dst_host: NodeId, hash: u32) -> Option<u16> {
        let (tor, port) = self.host_attach[dst_host as usize];
        if tor == switch {
            return Some(port);
        }
        let hops = self.next_hops(switch, dst_host);
        if hops.is_empty() {
            None
        } else {
            Some(hops[hash as usize % hops.len()])
        }
    }

    /// One shortest path from `src` to `dst` host, as link indices (the first equal-cost
    /// choice at every switch); `None` if unreachable.
    pub fn path(&self, topo: &Topology, src: NodeId, dst: NodeId) -> Option<Vec<u32>> {
        let (first_link, tor) = topo.ports(src)[0];
        if topo.links[first_link as usize].failed {
            return None;
        }
        let mut links = vec![first_link];
        let mut at = tor;
        for _ in 0..topo.num_nodes() {
            let port = self.next_hop(at, dst, 0)?;
            let (l, next) = topo.ports(at)[port as usize];
            if topo.links[l as usize].failed {
                return None;
            }
            links.push(l);
            if next == dst {
                return Some(links);
            }
            at = next;
        }
        None
    }

    /// Number of distinct next-hop groups (a measure of how regular the fabric is).
    pub fn num_groups(&self) -> usize {
        self.group_start.len() - 1
    }

    pub fn memory_bytes(&self) -> usize {
        self.host_attach.len() * 8
            + self.tor_index.len() * 4
            + self.next_group.len() * 4
            + self.group_start.len() * 4
            + self.group_ports.len() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::topology::TierSpec;
    use crate::time::Duration;

    fn ft(k: u32) -> Topology {
        let t = TierSpec::new(100_000_000_000, Duration::from_ns(1000));
        Topology::fat_tree(k, 1, t, t, t).unwrap()
    }

    #[test]
    fn fat_tree_paths_have_the_textbook_lengths_and_ecmp_width() {
        let t = ft(4);
        let r = Routes::compute(&t).unwrap();
        // same edge: 2 links; same pod: 4; other pod: 6
        assert_eq!(r.path(&t, 0, 1).unwrap().len(), 2);
        assert_eq!(r.path(&t, 0, 2).unwrap().len(), 4);
        assert_eq!(r.path(&t, 0, 15).unwrap().len(), 6);
        // an edge switch has k/2 up-ports towards another pod; an agg switch k/2 to cores
        let edge0 = 16;
        assert_eq!(r.next_hops(edge0, 15).len(), 2);
        let agg0 = 16 + 8;
        assert_eq!(r.next_hops(agg0, 15).len(), 2);
        // a core has exactly one port to each pod
        let core0 = 16 + 16;
        assert_eq!(r.next_hops(core0, 15).len(), 1);
        assert_eq!(r.next_hop(edge0, 1, 12345), Some(1));
    }

    #[test]
    fn failed_links_are_routed_around() {
        let mut t = ft(4);
        let edge0 = 16;
        let agg0 = 16 + 8;
        t.fail_link(edge0, agg0).unwrap();
        let r = Routes::compute(&t).unwrap();
        assert_eq!(r.next_hops(edge0, 15).len(), 1);
        for h in 1..16 {
            let p = r.path(&t, 0, h).unwrap();
            assert!(p.iter().all(|&l| !t.links[l as usize].failed));
        }
        // cut the rack off entirely
        t.fail_link(edge0, agg0 + 1).unwrap();
        let r = Routes::compute(&t).unwrap();
        assert!(r.path(&t, 0, 15).is_none());
        assert_eq!(r.next_hop(edge0, 15, 0), None);
    }

    #[test]
    fn groups_are_shared_and_memory_is_small() {
        let t = ft(16);
        let r = Routes::compute(&t).unwrap();
        assert!(r.num_groups() < 400, "{}", r.num_groups());
        // 320 switches x 128 ToRs x 4 bytes, plus the host table: about 0.17 MB
        assert!(r.memory_bytes() < 200_000, "{}", r.memory_bytes());
    }
}
