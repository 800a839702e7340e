//! `rocast-net`: real-time drivers of rocast's sans-IO core.
//!
//! - [`udp`]: a UDP/4791 transport carrying whole IPv4 RoCEv2 packets, as Linux rxe
//!   puts them on the wire (DF, ident 0, UDP checksum 0), with `sendmmsg`/`recvmmsg`
//!   batches and no per-packet allocation.
//! - [`endpoint`]: an [`rocast_core::rnic::RcQueuePair`] on such a transport, driven by
//!   the wall clock; no protocol logic of its own.
//! - [`perf`]: `rocast perf server|client`, a perftest-style bandwidth test.
//! - [`mcast`]: the multicast API on real sockets (`rocast mcast lead|join`): member
//!   discovery over TCP, MRP registration through the switch, SEND/WRITE, the close.
//! - [`qp_set`]: several RC QPs on one UDP/4791 socket, demultiplexed by QPN.
//! - [`switch`]: `rocast switch`, the software multicast switch daemon on
//!   `AF_PACKET` or QEMU-style `dgram` ports, driving the core's `FrameSwitch`.
//! - [`switch_bench`]: `rocast bench switch`, the switch's forwarding rate beside the
//!   kernel bridge's on the same veths.
//! - [`udp_bench`]: `rocast bench udp`, raw loopback UDP beside `rocast perf`.
//! - [`bpf`]: an eBPF assembler and the `bpf(2)` calls the switch's fast path needs.
//! - [`fast_path`]: `rocast switch --fast-path`, the kernel program (generated from
//!   the core's compiled group tables) that replicates a group's new data in tc.
//! - [`lab`]: `rocast lab`, a test network of namespaces, veths and `tc` shaping.

pub mod bpf;
pub mod endpoint;
pub mod entropy;
pub mod fast_path;
pub mod lab;
pub mod mcast;
pub mod perf;
pub mod qp_set;
pub mod switch;
pub mod switch_bench;
pub mod ud_mcast;
pub mod udp;
pub mod udp_bench;

pub use endpoint::{Activity, Clock, Endpoint, EndpointStats, LossInjector};
pub use udp::{TransportConfig, TransportStats, UdpTransport};
