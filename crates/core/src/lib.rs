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
//! - [`nack_multicast`]: reliable multicast over UD with NACKs; [`overlay`]:
//!   application-layer multicast schedules (RDMC) and their driver.
//!
//! # The one shape
//!
//! Every state machine here is driven the same way, and nothing else is asked of a
//! driver (the simulator, the real-time runtime, a test):
//!
//! - `handle_*(now, …)` feeds an input: a packet (`handle_packet`, `handle_frame`), a
//!   control message, a completion the driver observed;
//! - `handle_timeout(now)` lets timers fire;
//! - `poll_transmit(now, buf) -> Option<`[`Transmit`]`>` writes the next packet into the
//!   driver's buffer and says its length, port and, where the packet's header does
//!   not, its destination;
//! - `poll_timeout() -> Option<Instant>` says when to call `handle_timeout` next;
//! - `poll_event() -> Option<Event>` hands the layer above what happened: completions,
//!   deliveries, decisions, errors.
//!
//! A driver's loop: feed what arrived, fire due timers, drain `poll_transmit` and
//! `poll_event`, then sleep until the next packet or `poll_timeout`. The switch
//! pipeline ([`switch::FrameSwitch`]) has no timers of its own: `handle_frame` and
//! `poll_transmit`.
//!
//! Two RC queue pairs and a switch between them, driven by hand (the frame pipeline
//! forwards the IPv4 packets by its host table):
//!
//! ```
//! use rocast_core::fabric::cepheus::{CnpFilterPolicy, GroupAddressSpace};
//! use rocast_core::rnic::{Event, Payload, QpConfig, RcQueuePair, SendOp, SendRequest};
//! use rocast_core::switch::{FrameSwitch, FrameSwitchConfig};
//! use rocast_core::time::Instant;
//! use rocast_core::wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Ipv4Address};
//!
//! let (ip_a, ip_b) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
//! let (mac_a, mac_b) = (EthernetAddress([2, 0, 0, 0, 0, 1]), EthernetAddress([2, 0, 0, 0, 0, 2]));
//! let mut qps = [
//!     RcQueuePair::new(QpConfig::new(ip_a, 0x11, ip_b, 0x22)).unwrap(),
//!     RcQueuePair::new(QpConfig::new(ip_b, 0x22, ip_a, 0x11)).unwrap(),
//! ];
//! let mut sw = FrameSwitch::new(
//!     FrameSwitchConfig {
//!         max_groups: 16,
//!         group_space: GroupAddressSpace::default(),
//!         switch_id: 1,
//!         mac: EthernetAddress([2, 0xfe, 0, 0, 0, 0]),
//!         group_lease: None,
//!         ..FrameSwitchConfig::new(2)
//!     },
//!     CnpFilterPolicy::ForwardAll.build(),
//! );
//! sw.add_host(ip_a, 0, mac_a).unwrap();
//! sw.add_host(ip_b, 1, mac_b).unwrap();
//!
//! qps[1].post_recv(7, 4096).unwrap();
//! qps[0]
//!     .post_send(SendRequest { wr_id: 1, op: SendOp::Send, data: Payload::Bytes(b"hello".to_vec().into()) })
//!     .unwrap();
//!
//! let now = Instant::from_us(1);
//! let mut buf = vec![0u8; 9000];
//! let (mut sent_ok, mut got) = (false, None);
//! for _round in 0..4 {
//!     for (host, mac) in [(0usize, mac_a), (1, mac_b)] {
//!         // The host's NIC: one IP packet per poll_transmit, framed for the switch.
//!         while let Some(t) = qps[host].poll_transmit(now, &mut buf[14..]) {
//!             let eth = EthernetRepr { src_addr: mac, dst_addr: EthernetAddress([2, 0xfe, 0, 0, 0, 0]), ethertype: EtherType::Ipv4 };
//!             eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..14]));
//!             sw.handle_frame(now, host as u16, &buf[..14 + t.len]);
//!             let mut frame = vec![0u8; 9000];
//!             while let Some(out) = sw.poll_transmit(now, &mut frame) {
//!                 // The switch's output port is the other host; hand it the IP packet.
//!                 qps[out.port as usize].handle_packet(now, &frame[14..out.len]).unwrap();
//!             }
//!         }
//!     }
//!     while let Some(e) = qps[0].poll_event() {
//!         sent_ok |= matches!(e, Event::SendComplete { wr_id: 1, result: Ok(()) });
//!     }
//!     while let Some(e) = qps[1].poll_event() {
//!         if let Event::Recv { wr_id: 7, data, .. } = e {
//!             got = Some(data);
//!         }
//!     }
//! }
//! assert_eq!(got.as_deref(), Some(&b"hello"[..]));
//! assert!(sent_ok, "the ACK came back through the switch");
//! assert_eq!(sw.stats().forwarded, 2);
//! ```

#![forbid(unsafe_code)]

pub mod control;
pub mod fabric;
pub mod nack_multicast;
pub mod overlay;
pub mod payload;
pub mod plan;
pub mod rnic;
pub mod stats;
pub mod switch;
pub mod time;
pub mod transmit;
pub mod units;
pub mod wire;

pub use transmit::Transmit;
