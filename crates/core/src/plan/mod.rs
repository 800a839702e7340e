//! `plan`: pure algorithms on the datacenter graph — topologies and routing (and, in
//! later issues, multicast trees). No clock, no packets: the simulator, the real-time
//! runtime and offline tools (`rocast tree`) all build on these.
//!
//! - [`topology`]: the k-ary three-tier fat-tree (Al-Fares et al., SIGCOMM 2008), the
//!   two-tier leaf–spine with optional GPUs behind each NIC (the PEEL setting, PEEL §4),
//!   HPCC-format topology files, and seeded or explicit link failures.
//! - [`routing`]: shortest-path ECMP next hops, precomputed per (switch, destination
//!   rack) so forwarding a packet is two table lookups and a hash.

pub mod routing;
pub mod topology;

pub use routing::{Routes, RoutingError};
pub use topology::{LinkSpec, NodeRole, TierSpec, Topology, TopologyError};
