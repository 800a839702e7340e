//! `plan`: pure algorithms on the datacenter graph — topologies and routing and multicast trees. No clock, no packets: the simulator, the real-time
//! runtime and offline tools (`rocast tree`) all build on these.
//!
//! - [`topology`]: the k-ary three-tier fat-tree (Al-Fares et al., SIGCOMM 2008), the
//!   two-tier leaf–spine with optional GPUs behind each NIC (the PEEL setting, PEEL §4),
//!   HPCC-format topology files, and seeded or explicit link failures.
//! - [`routing`]: shortest-path ECMP next hops, precomputed per (switch, destination
//!   rack) so forwarding a packet is two table lookups and a hash.
//! - [`multicast_tree`]: multicast trees — PEEL's optimal symmetric tree and
//!   layer-peeling greedy (PEEL §2), Cepheus' hop-by-hop tree, the lower bound.
//! - [`prefix`]: PEEL's static power-of-two prefix rules and per-group cover sets
//!   (PEEL §3.2–3.3).

pub mod multicast_tree;
pub mod prefix;
pub mod routing;
pub mod topology;

pub use routing::{Routes, RoutingError};
pub use topology::{FatTreeShape, LinkSpec, NodeRole, TierSpec, Topology, TopologyError};
