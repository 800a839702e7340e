//! rocast's protocol core: everything that decides what goes on the wire, with no
//! clock, no socket and no idea whether it runs in a simulator or on a real network
//! (see `ARCHITECTURE.md`, "The one rule that keeps the house livable").
//!
//! - [`wire`]: RoCEv2 frame formats (Ethernet, IPv4, UDP, BTH and its extension
//!   headers, ICRC, CNP), the 24-bit [`wire::Psn`], and pcap files.
//! - [`rnic`]: a software RoCE endpoint (reliable connection) with the
//!   `handle_*`/`poll_*` shape every rocast state machine shares.
//! - [`fabric`]: the parts of a switch: ECMP hashing, the shared-buffer MMU with PFC,
//!   ECN RED marking, the Cepheus multicast engine.
//! - [`switch`]: the one switch pipeline composed of them, driven unchanged by the
//!   simulator and by `rocast switch`.
//! - [`control`]: Cepheus' control plane: MFT registration (MRP controller and member
//!   agents), multicast source switching (PSN synchronisation), safeguard fallback.
//! - [`plan`]: topologies (fat-tree, leaf–spine, HPCC files, failures) and routing.
//! - [`time`]: the one integer clock type the core uses; drivers supply `now`.
//! - [`payload`]: deterministic message bytes, the same in the simulator and the lab.

pub mod control;
pub mod fabric;
pub mod nack_multicast;
pub mod overlay;
pub mod payload;
pub mod plan;
pub mod rnic;
pub mod switch;
pub mod time;
pub mod transmit;
pub mod wire;

pub use transmit::Transmit;
