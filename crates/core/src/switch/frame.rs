//! [`FrameSwitch`]: one switch's whole pipeline on Ethernet frames, sans-IO — what
//! `rocast switch` runs on real ports. It owns no socket and no clock: the
//! driver hands it `(now, in port, frame)` and sends the frames it returns.
//!
//! Per frame, in order:
//! 1. **Learning and the source guard**. The source MAC is learned on the
//!    arrival port; an IPv4 or ARP sender address is learned as a host (port, MAC)
//!    unless pinned by configuration. A learned address is *bound* to its port: the
//!    first port it is seen on keeps it until it ages out ([`FrameSwitchConfig::table_age`]
//!    without a frame from it), so a stranger cannot move another host's binding by
//!    sending from its address (counted `host_move_refused`; MACs likewise,
//!    `mac_move_refused`). On a host port (any port not toward another switch) the
//!    guard then drops, counted in `source_guard_drops`: every IPv4 frame whose source
//!    lies in the switch's group space (those addresses are the switch's own; no host
//!    sends from one), and every RoCE, MRP or PEEL frame (UDP 4791, 4792, 4793) whose
//!    source address is not bound to the arrival port. An ARP whose sender address is
//!    bound to another port, or lies in the group space, is dropped too
//!    (`arp_spoof_drops`): it would poison the other hosts' ARP caches. A host's own
//!    traffic — Soft-RoCE from its own address, gratuitous ARP — passes, and so does
//!    everything on a port toward another switch (that switch guards its own hosts).
//! 2. **ARP.** A request for a group address (the switch's [`GroupAddressSpace`]) is
//!    answered by the switch (proxy ARP: the switch is where a group lives); any other
//!    ARP is switched at layer 2 (flooded when broadcast).
//! 3. **MRP** (UDP [`MRP_UDP_PORT`] to a group address, Cepheus §III-C) goes to the
//!    MRP agent ([`mrp_agent::handle_mrp`]), which fills the MFT from the host
//!    table. The MRP packet for a port with one attached member is addressed to that
//!    member's own IP: a host's kernel only accepts UDP to its unicast address or to
//!    multicast groups it joined, and the member cannot know the McstID in advance. A
//!    refusal goes back to the leader as a [`SwitchReport`] datagram. An
//!    [`MrpRelease`](crate::wire::mrp::MrpRelease) from the group's source direction frees its table.
//! 4. **RoCE to a group address** goes to the Cepheus engine, data only from the
//!    group's source: the address and arrival port of the MRP registration that the
//!    switch last accepted for it (the source moves only through authenticated MRP,
//!    never by data; other data to the group is counted in `group_source_drops`)
//!    ([`CepheusSwitch::handle_packet`], Cepheus §III-B/§III-D): replicas are bridged
//!    to each member's connection ([`Bridge::apply`] on the parsed packet, checksum and
//!    ICRC recomputed, IPv4 ident 0), feedback is emitted toward the source ([`FeedbackPacket::repr`](crate::fabric::cepheus::FeedbackPacket::repr)).
//! 5. **PEEL** (UDP [`PEEL_UDP_PORT`], PEEL §3.2–3.3), at a switch configured with a
//!    [`PeelRole`]: the shim is read ([`read_shim`]) and the PEEL engine
//!    ([`PeelSwitch::handle_packet`]) decides the copies. A copy toward a switch keeps the
//!    frame as it arrived, byte for byte (Ethernet header included: the group's MAC and
//!    the source's, so layer-2 learning stays consistent with the tree); a copy to a
//!    member host has the shim stripped ([`strip_shim`]: UDP port 4791, IPv4 total
//!    length and checksum restored), which restores exactly the bytes the source's
//!    ICRC covers — no switch recomputes an ICRC, nor checks one (a commodity switch
//!    cannot; the receiving endpoint does). A shim that does not parse is a
//!    counted drop (`peel_malformed`); so are the engine's refusals (no rule, another
//!    pod or plane, no uplink, an over-covered rack). A switch without a PEEL role
//!    treats such a frame as any other IPv4 packet.
//! 6. **IPv4 multicast** outside the group space — plain IP multicast, and RoCE UD
//!    multicast (the broadcast-select paper's transport) — goes to the ports that
//!    joined the group by IGMP ([`IgmpSnooping`], RFC 4541): reports and leaves are
//!    snooped (and passed on only toward other switches); a snooped group's frames go
//!    to its member ports; link-local groups and groups nobody joined are flooded.
//!    With `igmp_query_interval` the switch is the querier.
//! 7. **Other IPv4** is forwarded by the host table (destination MAC set to the
//!    host's), else switched at layer 2.
//! 8. **Everything else** is switched at layer 2: by the learned MAC table, flooded
//!    when the destination is broadcast, multicast or unknown.
//!
//! **Incarnations.** A registration marked as a new incarnation
//! ([`MrpRepr::new_incarnation`](crate::wire::mrp::MrpRepr::new_incarnation): a leader's first, not a refresh) starts the group's
//! per-member acknowledgement state afresh (counted `mrp_new_incarnations`): a leader
//! restarted within the lease gets no acknowledgement positions of its predecessor,
//! and its first packet (`seq` 0) replaces the predecessor's tree, so members it no
//! longer lists are not waited for.
//!
//! **Soft state.** With `group_lease` set, every accepted MRP registration (the first
//! one or a leader's refresh) sets the group's lease to now + lease;
//! [`handle_timeout`](FrameSwitch::handle_timeout) frees a group whose lease ran out
//! (its leader crashed or lost its path), and an [`MrpPrune`](crate::wire::mrp::MrpPrune) from the group's source
//! direction takes evicted members' paths off the tree (rocast's additions to §III-C).
//!
//! Bad input never panics: a short frame, a bad IPv4 header, a bad ARP body, a
//! malformed MRP or RoCE packet, or a copy whose ICRC does not verify is dropped and
//! counted in [`FrameSwitchStats`].
//!
//! **Bounded tables.** Every table keyed by what a host sends has a cap, an aging rule
//! and a counted refusal, so a flood from one port costs the switch a stated amount of
//! memory and the other ports nothing:
//!
//! | table            | cap (default), per host port / in all | ages                       | refusal counter     | bytes per entry |
//! |------------------|----------------------------------------|----------------------------|---------------------|-----------------|
//! | learned MACs     | 1,024 / 8,192                          | `table_age` (300 s) idle   | `mac_table_full`    | 40              |
//! | learned hosts    | 64 / 4,096 (pinned hosts not counted)  | `table_age` idle           | `host_table_full`   | 48              |
//! | IGMP memberships | 1,024 / 16,384                         | membership interval, or `table_age` without a querier | `igmp_table_full` | 24, + 320 per group |
//! | groups (MFT)     | `max_groups` (1,024)                   | `group_lease` (5 s)        | `mrp_refused`       | ~1.2 KB on 8 ports, 3.3 KB on 64 |
//! | allocations      | `max_groups`                           | `allocation_lease`         | `allocation_full`   | 48              |
//! | MRP senders      | [`MAX_MRP_SENDERS`] (4,096), key holders only | never (counters must stay) | `mrp_replayed` | 16 |
//!
//! With the defaults on a 64-port switch that is at most 8,192 × 40 + 4,096 × 48 +
//! 16,384 × 344 + 1,024 × (3.3 KB + 88) ≈ 9.6 MB of tables (per-port caps on switch
//! ports: the global caps only, a switch port carries many hosts). Bytes per entry
//! include `BTreeMap` node overhead; `rocast switch --stats` prints
//! [`memory_bytes`](FrameSwitch::memory_bytes) beside the process's VmRSS and VmHWM.
//!
//! Memory: 40 bytes per learned MAC and 48 per host entry (`BTreeMap` nodes
//! included), a lease and a source per group (12 + 40 B plus nodes), 16 B per
//! authenticated MRP sender (at most [`MAX_MRP_SENDERS`]), and
//! the Cepheus engine's tables (see [`CepheusSwitch::memory_bytes`]): about 1 KB per
//! group on a 64-port switch; and the PEEL state ([`PeelSwitch::memory_bytes`]): k − 1
//! static rules at a prefix-tier switch, 8 bytes plus 2 per member port per group at a
//! rack switch; IGMP snooping's memberships ([`IgmpSnooping::memory_bytes`]).

use super::igmp_snooping::IgmpSnooping;
use super::mrp_agent::{self, UnicastRoute, UnicastTable};
use super::pipeline::{self, MrpMessage, PacketClass, PacketHeadline, UnicastDecision};
use crate::control::registration::{SwitchRejection, SwitchReport, SWITCH_REPORT_LEN};
use crate::fabric::cepheus::{
    Bridge, CepheusAction, CepheusSwitch, CnpFilter, FeedbackPacket, GroupAddressSpace, Handling,
    NextHop,
};
use crate::fabric::peel::{PeelAction, PeelRole, PeelSwitch};
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use crate::wire::arp::{ArpOperation, ArpRepr, ARP_LEN};
use crate::wire::igmp::{IgmpRepr, ALL_SYSTEMS, IP_PROTO_IGMP};
use crate::wire::mrp::{MrpAllocate, MrpAllocation, MRP_ALLOCATION_LEN, MRP_UDP_PORT};
use crate::wire::mrp_auth::{seal_if_keyed, FabricKey, MrpCounter, ReplayGuard};
use crate::wire::peel::{read_shim, strip_shim, PEEL_UDP_PORT};
use crate::wire::{
    Ecn, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Ipv4Address, Ipv4Packet,
    Ipv4Repr, Opcode, RoceRepr, UdpPacket, UdpRepr, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN,
    IP_PROTO_UDP, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
};
use std::collections::{BTreeMap, VecDeque};

/// Configuration a [`FrameSwitch`] refuses: a pinned host or a PEEL member that does
/// not fit the switch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameSwitchError {
    #[error("host {ip}: no port {port}")]
    NoHostPort { ip: Ipv4Address, port: u16 },
    #[error("host {ip}: not a unicast host address and MAC")]
    NotUnicastHost { ip: Ipv4Address },
    #[error("PEEL member of {group}: no port {port}")]
    NoPeelMemberPort { group: Ipv4Address, port: u16 },
    #[error("PEEL member of {group}: port {port} is an uplink")]
    PeelMemberOnUplink { group: Ipv4Address, port: u16 },
    #[error("PEEL member of {group}: only a rack switch (PEEL role rack) has members")]
    NotPeelRack { group: Ipv4Address },
}

/// How a [`FrameSwitch`] is set up.
#[derive(Clone, Debug)]
pub struct FrameSwitchConfig {
    pub ports: u16,
    /// MFT capacity in groups (0 refuses every registration: the fallback test).
    pub max_groups: usize,
    pub group_space: GroupAddressSpace,
    /// The switch's id in the [`SwitchReport`]s it sends.
    pub switch_id: u32,
    /// Base of the MACs the switch sends from: port p uses it with p in the last two
    /// bytes.
    pub mac: EthernetAddress,
    /// The switch's place in a PEEL fabric, if any (module docs, step 5).
    pub peel: Option<PeelRole>,
    /// How long a group's MFT entries live after the last MRP registration that
    /// named it (soft state: leaders refresh, a crashed leader's group is reclaimed
    /// when its lease runs out). `None`: entries live until released.
    pub group_lease: Option<Duration>,
    /// The fabric key: with one, every MRP datagram must carry a valid
    /// [`mrp_auth`](crate::wire::mrp_auth) trailer with a fresh counter, and what the
    /// switch sends toward other switches and leaders is sealed too. `None`: MRP is
    /// accepted from anyone (Cepheus as published).
    pub mrp_key: Option<FabricKey>,
    /// Group addresses are allocated by this switch ([`MrpAllocate`]): a registration
    /// for an address not allocated to its leader (address and arrival port) is
    /// refused with `NotAllocated`. Without it a leader may also register an address
    /// it chose, unless the address is allocated to another host.
    pub require_allocation: bool,
    /// The longest lease an allocation gets (a request asking for less gets less);
    /// each accepted registration by the holder renews it.
    pub allocation_lease: Duration,
    /// Ports that lead to other switches (a ToR's uplink; every port of an
    /// aggregation switch). A host known behind one, pinned or learned, is reached
    /// *through* that switch: the MRP agent gives the group a switch hop there (the
    /// frame as it is, the next switch bridges), not a host connection (Cepheus
    /// §III-C's multi-switch tree). Empty: every host is attached (a one-switch star).
    pub switch_ports: Vec<u16>,
    /// IGMP snooping's querier (module docs, step 6): with an interval the switch
    /// sends a general query out of every host port at start-up and then every
    /// interval, and memberships age (RFC 3376 §8.4). `None`: no queries, and a
    /// membership lasts until its leave.
    pub igmp_query_interval: Option<Duration>,
    /// Learned MACs held at most in all, and from one host port (module docs,
    /// "Bounded tables"): a MAC past a cap is not learned (counted `mac_table_full`).
    pub max_macs: usize,
    pub max_macs_per_port: usize,
    /// Learned host addresses (source-guard bindings) in all and from one host port;
    /// pinned hosts do not count. An address past a cap is not bound (counted
    /// `host_table_full`), so its RoCE is dropped by the source guard.
    pub max_hosts: usize,
    pub max_hosts_per_port: usize,
    /// IGMP memberships in all and of one host port (counted `igmp_table_full`).
    pub max_igmp_memberships: usize,
    pub max_igmp_per_port: usize,
    /// How long a learned MAC or host binding lives without a frame from it, and an
    /// IGMP membership without a querier (with one, the membership interval).
    pub table_age: Duration,
}

/// `rocast switch`'s default McstID block (a unicast block: Linux drops packets whose
/// source is multicast).
pub const DEFAULT_GROUP_SPACE: &str = "10.77.0.128/25";
/// `rocast switch`'s default MFT capacity, in groups.
pub const DEFAULT_MAX_GROUPS: usize = 1024;
/// `rocast switch`'s default CNP filter ([`CnpFilterPolicy::NAMES`](crate::fabric::cepheus::CnpFilterPolicy::NAMES))
/// and its window in microseconds.
pub const DEFAULT_CNP_FILTER: &str = "cepheus";
pub const DEFAULT_CNP_WINDOW_US: u64 = 50;
/// `rocast switch`'s default group lease, in milliseconds: rocast's assumption, five
/// times the leaders' default refresh interval
/// ([`DEFAULT_REFRESH_MS`](crate::control::session::DEFAULT_REFRESH_MS)), so four lost
/// refreshes in a row do not cost a live group its entries.
pub const DEFAULT_GROUP_LEASE_MS: u64 = 5_000;
/// `rocast switch`'s longest allocation lease, in milliseconds: rocast's assumption,
/// ten minutes for an operator to hand the address and invitations to the members
/// before the leader's first registration; a running group's refreshes renew it.
pub const DEFAULT_ALLOCATION_LEASE_MS: u64 = 600_000;
/// Authenticated MRP senders (port, address) a switch remembers counters for.
pub const MAX_MRP_SENDERS: usize = 4096;
/// `rocast switch`'s default table caps and idle age (module docs, "Bounded tables").
pub const DEFAULT_MAX_MACS: usize = 8192;
pub const DEFAULT_MAX_MACS_PER_PORT: usize = 1024;
pub const DEFAULT_MAX_HOSTS: usize = 4096;
/// A host port is one host (a lab namespace, a Soft-RoCE guest): a few addresses.
pub const DEFAULT_MAX_HOSTS_PER_PORT: usize = 64;
pub const DEFAULT_MAX_IGMP_MEMBERSHIPS: usize = 16_384;
pub const DEFAULT_MAX_IGMP_PER_PORT: usize = 1024;
/// Five minutes, a commodity switch's MAC aging time.
pub const DEFAULT_TABLE_AGE_MS: u64 = 300_000;
/// Bytes one learned MAC costs (key, entry, `BTreeMap` node share).
pub const MAC_ENTRY_BYTES: usize = 40;
/// Bytes one host entry costs.
pub const HOST_ENTRY_BYTES: usize = 48;
/// Bytes one group's source and lease cost.
const GROUP_SOURCE_BYTES: usize = 40;
/// `rocast switch`'s default MAC base.
pub const DEFAULT_SWITCH_MAC: EthernetAddress = EthernetAddress([0x02, 0x72, 0x63, 0xfe, 0, 0]);

impl FrameSwitchConfig {
    /// A switch of `ports` ports with `rocast switch`'s defaults and no PEEL role.
    pub fn new(ports: u16) -> Self {
        FrameSwitchConfig {
            ports,
            max_groups: DEFAULT_MAX_GROUPS,
            group_space: GroupAddressSpace::parse(DEFAULT_GROUP_SPACE)
                .expect("the default group space parses"),
            switch_id: 0,
            mac: DEFAULT_SWITCH_MAC,
            peel: None,
            group_lease: Some(Duration::from_ms(DEFAULT_GROUP_LEASE_MS)),
            mrp_key: None,
            require_allocation: false,
            allocation_lease: Duration::from_ms(DEFAULT_ALLOCATION_LEASE_MS),
            switch_ports: Vec::new(),
            igmp_query_interval: None,
            max_macs: DEFAULT_MAX_MACS,
            max_macs_per_port: DEFAULT_MAX_MACS_PER_PORT,
            max_hosts: DEFAULT_MAX_HOSTS,
            max_hosts_per_port: DEFAULT_MAX_HOSTS_PER_PORT,
            max_igmp_memberships: DEFAULT_MAX_IGMP_MEMBERSHIPS,
            max_igmp_per_port: DEFAULT_MAX_IGMP_PER_PORT,
            table_age: Duration::from_ms(DEFAULT_TABLE_AGE_MS),
        }
    }
}

/// Counters, each drop by its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameSwitchStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Too short for Ethernet, a bad IPv4 header, a bad ARP body, or an arrival port
    /// the switch does not have.
    pub malformed: u64,
    pub arp_proxied: u64,
    /// Frames sent out of every other port (broadcast, multicast, unknown MAC).
    pub flooded: u64,
    /// Frames forwarded to one port by the host or MAC table.
    pub forwarded: u64,
    /// Frames whose destination is behind the port they arrived on.
    pub hairpin_drops: u64,
    /// Addressed to a group address but not a RoCE packet that parses.
    pub roce_malformed: u64,
    /// RoCE packets to a group whose ICRC did not verify: dropped before the engine
    /// sees them, so a corrupted packet neither changes the MFT nor is laundered into
    /// copies with a fresh ICRC.
    pub bad_icrc: u64,
    /// Replicas or feedback for a host whose MAC is not known.
    pub no_mac: u64,
    pub mrp_in: u64,
    pub mrp_out: u64,
    pub mrp_malformed: u64,
    pub mrp_refused: u64,
    /// Groups freed by an MRP release from their source direction.
    pub mrp_released: u64,
    /// Releases for a group this switch no longer holds (the leader's repeat).
    pub mrp_stale_release: u64,
    /// Member paths taken off a tree by an MRP prune (an evicted member).
    pub mrp_pruned: u64,
    /// Prunes from a port other than the group's source direction, for a group
    /// this switch does not hold, or naming a member not on its tree here.
    pub mrp_prune_ignored: u64,
    /// Groups whose lease ran out with no refresh (their leader is gone).
    pub lease_expired: u64,
    /// MRP datagrams without a valid authentication trailer (a fabric key is set).
    pub mrp_unauthenticated: u64,
    /// Authenticated MRP datagrams whose counter was not above the sender's last.
    pub mrp_replayed: u64,
    /// Group addresses allocated ([`MrpAllocate`]).
    pub allocated: u64,
    /// Allocation requests refused: no address left (answered `TableFull`).
    pub allocation_full: u64,
    /// Allocations whose lease ran out.
    pub allocation_expired: u64,
    /// Bytes of IP packets sent as replicas.
    pub replicated_bytes: u64,
    /// PEEL frames (UDP 4793) whose shim parsed, at a switch with a PEEL role.
    pub peel_in: u64,
    /// PEEL frames whose IPv4/UDP framing or shim did not parse: dropped.
    pub peel_malformed: u64,
    /// PEEL copies sent with the shim (toward another switch).
    pub peel_forwarded: u64,
    /// PEEL copies sent to member hosts with the shim stripped.
    pub peel_delivered: u64,
    /// PEEL frames that produced no copy: an over-covered rack's discard, no rule, another
    /// pod or plane, no uplink (the engine's [`PeelStats`](crate::fabric::peel::PeelStats)
    /// says which).
    pub peel_dropped: u64,
    /// Frames that did not fit the driver's `poll_transmit` buffer (dropped).
    pub tx_too_long: u64,
    /// IGMP reports and leaves snooped (each message once, whatever it changed).
    pub igmp_reports: u64,
    /// IGMP messages that did not parse (short, bad checksum, bad record): dropped.
    pub igmp_malformed: u64,
    /// General queries this switch sent (one per host port per query).
    pub igmp_queries_sent: u64,
    /// Memberships that aged out.
    pub igmp_expired: u64,
    /// Multicast frames of a snooped group sent to its member ports only.
    pub mcast_forwarded: u64,
    /// Multicast frames of a group no port joined: flooded (RFC 4541 allows either;
    /// flooding keeps hosts that never report, like an rxe QP attached without an
    /// IGMP join, reachable).
    pub mcast_unregistered: u64,
    /// Frames from a host port dropped by the source guard (module docs, step 1):
    /// from a group-space address, or RoCE/MRP/PEEL from an address not bound there.
    pub source_guard_drops: u64,
    /// ARP from a host port whose sender address is bound to another port or lies in
    /// the group space: dropped.
    pub arp_spoof_drops: u64,
    /// Data to a group from other than its registered source (address and port).
    pub group_source_drops: u64,
    /// Accepted registrations marked as a new incarnation: each started its group's
    /// ACK state afresh (a group's very first registration counts too).
    pub mrp_new_incarnations: u64,
    /// Learned addresses seen on another port while bound (not moved).
    pub host_move_refused: u64,
    /// Learned MACs seen on another port while fresh (not moved).
    pub mac_move_refused: u64,
    /// MACs, host addresses and IGMP memberships not learned: a cap was reached.
    pub mac_table_full: u64,
    pub host_table_full: u64,
    pub igmp_table_full: u64,
    /// Learned MACs and host bindings that aged out.
    pub mac_expired: u64,
    pub host_expired: u64,
}

/// A host the switch knows: the port it is behind and its MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostEntry {
    pub port: u16,
    pub mac: EthernetAddress,
    /// Set by configuration; learning does not move it, and it never ages.
    pub pinned: bool,
    /// The last frame from it (learned entries age from here).
    pub last_seen: Instant,
}

/// A MAC the switch knows: its port, as [`HostEntry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MacEntry {
    port: u16,
    pinned: bool,
    last_seen: Instant,
}

/// An entry of a [`LearnedTable`]: a binding to a port, pinned or learned.
trait PortBinding: Copy {
    fn port(&self) -> u16;
    fn pinned(&self) -> bool;
    fn last_seen(&self) -> Instant;
}

impl PortBinding for HostEntry {
    fn port(&self) -> u16 {
        self.port
    }
    fn pinned(&self) -> bool {
        self.pinned
    }
    fn last_seen(&self) -> Instant {
        self.last_seen
    }
}

impl PortBinding for MacEntry {
    fn port(&self) -> u16 {
        self.port
    }
    fn pinned(&self) -> bool {
        self.pinned
    }
    fn last_seen(&self) -> Instant {
        self.last_seen
    }
}

/// What [`LearnedTable::learn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Learn {
    /// Already bound to this port (a learned entry was refreshed).
    Kept,
    /// Pinned to another port by configuration.
    PinnedElsewhere,
    /// Learned on another port and still fresh: first come, kept.
    Refused,
    /// A cap (the port's or the table's) was reached.
    Full,
    /// A new binding (or one that replaced a stale one).
    Added,
}

/// A table of bindings to ports (module docs, step 1): the switch's MACs and hosts.
/// Entries are pinned by configuration, or learned: first come, kept while fresh,
/// capped per host port and in all, forgotten once idle for the table's age.
#[derive(Debug)]
struct LearnedTable<K, E> {
    entries: BTreeMap<K, E>,
    /// Learned (not pinned) entries in all and per port, for the caps.
    learned: usize,
    learned_per_port: Vec<u32>,
}

impl<K: Ord + Copy, E: PortBinding> LearnedTable<K, E> {
    fn new(ports: usize) -> Self {
        LearnedTable {
            entries: BTreeMap::new(),
            learned: 0,
            learned_per_port: vec![0; ports],
        }
    }

    fn get(&self, key: &K) -> Option<&E> {
        self.entries.get(key)
    }

    fn forget(&mut self, port: u16) {
        self.learned -= 1;
        self.learned_per_port[port as usize] -= 1;
    }

    /// Binds `key` by configuration (whatever was learned for it goes).
    fn pin(&mut self, key: K, entry: E) {
        if let Some(old) = self.entries.insert(key, entry) {
            if !old.pinned() {
                self.forget(old.port());
            }
        }
    }

    /// Learns `key` on `port` at `now`: `refresh` updates a learned entry already on
    /// this port, `entry` makes a new one. `port_cap` is the port's cap (None for a
    /// port toward another switch), `cap` the table's.
    #[allow(clippy::too_many_arguments)]
    fn learn(
        &mut self,
        key: K,
        port: u16,
        now: Instant,
        age: Duration,
        port_cap: Option<usize>,
        cap: usize,
        entry: impl FnOnce() -> E,
        refresh: impl FnOnce(&mut E),
    ) -> Learn {
        match self.entries.get(&key).copied() {
            Some(e) if e.port() == port => {
                if !e.pinned() {
                    if let Some(e) = self.entries.get_mut(&key) {
                        refresh(e);
                    }
                }
                Learn::Kept
            }
            Some(e) if e.pinned() => Learn::PinnedElsewhere,
            Some(e) if now < e.last_seen() + age => Learn::Refused,
            old => {
                let total = self.learned - usize::from(old.is_some());
                let on_port = self.learned_per_port[port as usize] as usize;
                if total >= cap || port_cap.is_some_and(|c| on_port >= c) {
                    return Learn::Full;
                }
                if let Some(o) = old {
                    self.forget(o.port());
                }
                self.entries.insert(key, entry());
                self.learned += 1;
                self.learned_per_port[port as usize] += 1;
                Learn::Added
            }
        }
    }

    /// Forgets learned entries idle for `age` at `now`; returns how many.
    fn expire(&mut self, now: Instant, age: Duration) -> u64 {
        let gone: Vec<(K, u16)> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.pinned() && now >= e.last_seen() + age)
            .map(|(&k, e)| (k, e.port()))
            .collect();
        for &(k, port) in &gone {
            self.entries.remove(&k);
            self.forget(port);
        }
        gone.len() as u64
    }
}

/// One frame the pipeline made, waiting for [`FrameSwitch::poll_transmit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutFrame {
    pub port: u16,
    pub frame: Vec<u8>,
}

/// A switch's pipeline on frames (see the module docs).
#[derive(Debug)]
pub struct FrameSwitch {
    cfg: FrameSwitchConfig,
    cepheus: CepheusSwitch,
    peel: Option<PeelSwitch>,
    macs: LearnedTable<[u8; 6], MacEntry>,
    hosts: LearnedTable<u32, HostEntry>,
    /// When learned MACs and hosts are next swept for age (`None`: none learned).
    next_sweep: Option<Instant>,
    /// Per group (McstID as u32) its source: the address and arrival port of the MRP
    /// registration last accepted for it (module docs, step 4).
    group_sources: BTreeMap<u32, (Ipv4Address, u16)>,
    stats: FrameSwitchStats,
    /// Frames made and not yet polled.
    tx: VecDeque<OutFrame>,
    /// Which ports joined which IPv4 multicast group (step 6).
    igmp: IgmpSnooping,
    /// Per group (McstID as u32) its lease's end, when leases are on.
    leases: BTreeMap<u32, Instant>,
    /// No lease ends before this (a lower bound: refreshes only move ends later).
    next_expiry: Option<Instant>,
    /// Authenticated MRP senders' last counters.
    replay: ReplayGuard,
    /// This switch's own counter for the MRP it seals.
    mrp_counter: MrpCounter,
    /// Allocated group addresses (McstID as u32).
    allocations: BTreeMap<u32, GroupAllocation>,
    /// Where the next allocation's search starts (an index into the group space), so
    /// a freed address is not handed out again at once.
    allocation_cursor: u64,
}

/// A group address held for one leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupAllocation {
    pub holder: Ipv4Address,
    /// The port the request came in on: registrations must come from there too.
    pub port: u16,
    pub until: Instant,
}

/// The host table as the MRP agent reads it, with the ports toward other switches
/// ([`FrameSwitchConfig::switch_ports`]).
struct HostRoutes<'a>(&'a BTreeMap<u32, HostEntry>, &'a [u16]);

impl UnicastTable for HostRoutes<'_> {
    fn route(&self, ip: Ipv4Address) -> UnicastRoute<'_> {
        match self.0.get(&ip.to_u32()) {
            Some(h) => match self.1.iter().position(|&p| p == h.port) {
                Some(i) => UnicastRoute::Via(&self.1[i..i + 1]),
                None => UnicastRoute::Attached(h.port),
            },
            None => UnicastRoute::Unknown,
        }
    }
}

fn is_unicast_mac(m: EthernetAddress) -> bool {
    m.0[0] & 1 == 0
}

/// Whether an IPv4 packet is UDP to RoCEv2's, MRP's or PEEL's port: what the source
/// guard holds to the bindings.
fn carries_roce<T: AsRef<[u8]>>(ip: &Ipv4Packet<T>) -> bool {
    ip.protocol() == IP_PROTO_UDP
        && UdpPacket::new_checked(ip.payload())
            .is_ok_and(|u| matches!(u.dst_port(), ROCEV2_UDP_PORT | MRP_UDP_PORT | PEEL_UDP_PORT))
}

impl FrameSwitch {
    pub fn new(cfg: FrameSwitchConfig, cnp_filter: Box<dyn CnpFilter>) -> Self {
        let cepheus = CepheusSwitch::new(cfg.ports, cfg.max_groups, cnp_filter)
            .with_group_space(cfg.group_space);
        let peel = cfg.peel.clone().map(PeelSwitch::new);
        let igmp = IgmpSnooping::new(cfg.igmp_query_interval).with_limits(
            cfg.max_igmp_memberships,
            cfg.max_igmp_per_port,
            cfg.table_age,
        );
        let ports = cfg.ports as usize;
        FrameSwitch {
            cfg,
            cepheus,
            peel,
            macs: LearnedTable::new(ports),
            hosts: LearnedTable::new(ports),
            next_sweep: None,
            group_sources: BTreeMap::new(),
            stats: FrameSwitchStats::default(),
            tx: VecDeque::new(),
            igmp,
            leases: BTreeMap::new(),
            next_expiry: None,
            replay: ReplayGuard::new(MAX_MRP_SENDERS),
            mrp_counter: MrpCounter::starting_at(1),
            allocations: BTreeMap::new(),
            allocation_cursor: 0,
        }
    }

    pub fn config(&self) -> &FrameSwitchConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &FrameSwitchStats {
        &self.stats
    }
    pub fn cepheus(&self) -> &CepheusSwitch {
        &self.cepheus
    }
    /// The PEEL engine, at a switch with a PEEL role.
    pub fn peel(&self) -> Option<&PeelSwitch> {
        self.peel.as_ref()
    }

    /// Makes `port` a member of `group` at a PEEL rack switch (configuration standing
    /// in for IGMP snooping).
    pub fn add_peel_member(
        &mut self,
        group: Ipv4Address,
        port: u16,
    ) -> Result<(), FrameSwitchError> {
        if port >= self.cfg.ports {
            return Err(FrameSwitchError::NoPeelMemberPort { group, port });
        }
        match &mut self.peel {
            Some(p) if matches!(p.role(), PeelRole::Rack { uplinks } if !uplinks.contains(&port)) =>
            {
                p.add_member(group, port);
                Ok(())
            }
            Some(p) if matches!(p.role(), PeelRole::Rack { .. }) => {
                Err(FrameSwitchError::PeelMemberOnUplink { group, port })
            }
            _ => Err(FrameSwitchError::NotPeelRack { group }),
        }
    }
    /// Known hosts, by address.
    pub fn hosts(&self) -> impl Iterator<Item = (Ipv4Address, &HostEntry)> {
        self.hosts
            .entries
            .iter()
            .map(|(&ip, h)| (Ipv4Address::from_u32(ip), h))
    }
    pub fn learned_macs(&self) -> usize {
        self.macs.entries.len()
    }
    /// Bytes of the tables (the figure `rocast switch --stats` prints beside the
    /// process's own VmRSS).
    pub fn memory_bytes(&self) -> usize {
        self.cepheus.memory_bytes()
            + self.peel.as_ref().map_or(0, PeelSwitch::memory_bytes)
            + self.macs.entries.len() * MAC_ENTRY_BYTES
            + self.hosts.entries.len() * HOST_ENTRY_BYTES
            + self.group_sources.len() * GROUP_SOURCE_BYTES
            + self.allocations.len() * HOST_ENTRY_BYTES
            + self.igmp.memory_bytes()
    }
    /// The source a group's data is accepted from: (address, arrival port) of its last
    /// accepted registration.
    pub fn group_source(&self, mcst_id: Ipv4Address) -> Option<(Ipv4Address, u16)> {
        self.group_sources.get(&mcst_id.to_u32()).copied()
    }

    /// Pins host `ip` behind `port` with `mac` (configuration, not learning).
    pub fn add_host(
        &mut self,
        ip: Ipv4Address,
        port: u16,
        mac: EthernetAddress,
    ) -> Result<(), FrameSwitchError> {
        if port >= self.cfg.ports {
            return Err(FrameSwitchError::NoHostPort { ip, port });
        }
        if !self.is_host_address(ip) || !is_unicast_mac(mac) {
            return Err(FrameSwitchError::NotUnicastHost { ip });
        }
        let last_seen = Instant::ZERO;
        let host = HostEntry {
            port,
            mac,
            pinned: true,
            last_seen,
        };
        self.hosts.pin(ip.to_u32(), host);
        let entry = MacEntry {
            port,
            pinned: true,
            last_seen,
        };
        self.macs.pin(mac.0, entry);
        Ok(())
    }

    /// A host port's cap, or none toward another switch (only the table's cap holds).
    fn port_cap(&self, port: u16, cap: usize) -> Option<usize> {
        (!self.toward_switch(port)).then_some(cap)
    }

    /// Arms the age sweep once something learned exists.
    fn arm_sweep(&mut self, now: Instant) {
        if self.next_sweep.is_none() {
            self.next_sweep = Some(now + self.sweep_interval());
        }
    }
    fn sweep_interval(&self) -> Duration {
        Duration::from_ps((self.cfg.table_age.as_ps() / 4).max(1))
    }

    /// Learns `mac` on `port` (module docs, step 1): a fresh entry on another port
    /// stays where it is.
    fn learn_mac(&mut self, now: Instant, mac: EthernetAddress, port: u16) {
        let port_cap = self.port_cap(port, self.cfg.max_macs_per_port);
        let learned = self.macs.learn(
            mac.0,
            port,
            now,
            self.cfg.table_age,
            port_cap,
            self.cfg.max_macs,
            || MacEntry {
                port,
                pinned: false,
                last_seen: now,
            },
            |e| e.last_seen = now,
        );
        match learned {
            Learn::PinnedElsewhere | Learn::Refused => self.stats.mac_move_refused += 1,
            Learn::Full => self.stats.mac_table_full += 1,
            Learn::Added => self.arm_sweep(now),
            Learn::Kept => {}
        }
    }

    /// Whether `ip` is bound to `port` (the source guard's test).
    fn bound_to(&self, ip: Ipv4Address, port: u16) -> bool {
        self.hosts.get(&ip.to_u32()).is_some_and(|h| h.port == port)
    }

    /// The MAC the switch sends from on `port`.
    pub fn port_mac(&self, port: u16) -> EthernetAddress {
        let mut m = self.cfg.mac.0;
        m[4..6].copy_from_slice(&port.to_be_bytes());
        EthernetAddress(m)
    }

    fn is_host_address(&self, ip: Ipv4Address) -> bool {
        let v = ip.to_u32();
        v != 0 && v != u32::MAX && v >> 28 != 0xe && !self.cfg.group_space.contains(ip)
    }

    /// Binds `ip` to `port` (module docs, step 1): first come, kept while fresh.
    fn learn_host(&mut self, now: Instant, ip: Ipv4Address, port: u16, mac: EthernetAddress) {
        if !self.is_host_address(ip) || !is_unicast_mac(mac) {
            return;
        }
        let port_cap = self.port_cap(port, self.cfg.max_hosts_per_port);
        let learned = self.hosts.learn(
            ip.to_u32(),
            port,
            now,
            self.cfg.table_age,
            port_cap,
            self.cfg.max_hosts,
            || HostEntry {
                port,
                mac,
                pinned: false,
                last_seen: now,
            },
            |h| {
                h.mac = mac;
                h.last_seen = now;
            },
        );
        match learned {
            Learn::Refused => self.stats.host_move_refused += 1,
            Learn::Full => self.stats.host_table_full += 1,
            Learn::Added => self.arm_sweep(now),
            Learn::Kept | Learn::PinnedElsewhere => {}
        }
    }

    /// Queues a frame for [`poll_transmit`](Self::poll_transmit).
    fn send(&mut self, port: u16, frame: Vec<u8>) {
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        self.tx.push_back(OutFrame { port, frame });
    }

    /// Writes the next frame to send into `buf`: its length and output port. `buf` must
    /// hold the longest frame handed to [`handle_frame`](Self::handle_frame) (no frame
    /// the switch makes is longer, bar a 42-byte ARP reply and a 50-byte IGMP query); a frame that does not fit
    /// is dropped and counted (`tx_too_long`), never truncated.
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        loop {
            let f = self.tx.pop_front()?;
            match buf.get_mut(..f.frame.len()) {
                Some(dst) => {
                    dst.copy_from_slice(&f.frame);
                    return Some(Transmit {
                        port: f.port,
                        len: f.frame.len(),
                        dest: (),
                    });
                }
                None => self.stats.tx_too_long += 1,
            }
        }
    }

    /// Frames waiting for [`poll_transmit`](Self::poll_transmit).
    pub fn pending_transmits(&self) -> usize {
        self.tx.len()
    }

    /// Takes one frame that arrived on `in_port`; what it causes waits for
    /// [`poll_transmit`](Self::poll_transmit).
    pub fn handle_frame(&mut self, now: Instant, in_port: u16, frame: &[u8]) {
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += frame.len() as u64;
        if in_port >= self.cfg.ports {
            self.stats.malformed += 1;
            return;
        }
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.stats.malformed += 1;
            return;
        };
        let (src, dst) = (eth.src_addr(), eth.dst_addr());
        if is_unicast_mac(src) {
            self.learn_mac(now, src, in_port);
        }
        match eth.ethertype() {
            EtherType::Arp => match ArpRepr::parse(eth.payload()) {
                Err(_) => self.stats.malformed += 1,
                Ok(a) => {
                    self.learn_host(now, a.sender_ip, in_port, a.sender_mac);
                    if !self.toward_switch(in_port)
                        && (self.cfg.group_space.contains(a.sender_ip)
                            || self
                                .hosts
                                .get(&a.sender_ip.to_u32())
                                .is_some_and(|h| h.port != in_port))
                    {
                        self.stats.arp_spoof_drops += 1;
                        return;
                    }
                    if a.operation == ArpOperation::Request
                        && self.cfg.group_space.contains(a.target_ip)
                    {
                        self.proxy_arp(in_port, &a);
                    } else {
                        self.l2_forward(in_port, frame, dst);
                    }
                }
            },
            EtherType::Ipv4 => self.ipv4(now, in_port, frame, src, dst),
            _ => self.l2_forward(in_port, frame, dst),
        }
    }

    fn proxy_arp(&mut self, port: u16, a: &ArpRepr) {
        self.stats.arp_proxied += 1;
        let mac = self.port_mac(port);
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + ARP_LEN];
        EthernetRepr {
            src_addr: mac,
            dst_addr: a.sender_mac,
            ethertype: EtherType::Arp,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        a.reply_from(mac).emit(&mut f[ETHERNET_HEADER_LEN..]);
        self.send(port, f);
    }

    /// Layer-2 switching: to the learned port, else flooded.
    fn l2_forward(&mut self, in_port: u16, frame: &[u8], dst: EthernetAddress) {
        match self.macs.get(&dst.0).map(|e| e.port) {
            Some(p) if is_unicast_mac(dst) => {
                if p == in_port {
                    self.stats.hairpin_drops += 1;
                } else {
                    self.stats.forwarded += 1;
                    self.send(p, frame.to_vec());
                }
            }
            _ => {
                self.stats.flooded += 1;
                for p in (0..self.cfg.ports).filter(|&p| p != in_port) {
                    self.send(p, frame.to_vec());
                }
            }
        }
    }

    fn ipv4(
        &mut self,
        now: Instant,
        in_port: u16,
        frame: &[u8],
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
    ) {
        let Ok(ip) = Ipv4Packet::new_checked(&frame[ETHERNET_HEADER_LEN..]) else {
            self.stats.malformed += 1;
            return;
        };
        // Link-layer padding is not part of the packet.
        let ip_bytes = &frame[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + ip.total_len() as usize];
        let (src_ip, dst_ip) = (ip.src_addr(), ip.dst_addr());
        let guarded = !self.toward_switch(in_port);
        if guarded && self.cfg.group_space.contains(src_ip) {
            // The group addresses are the switch's own: no host sends from one.
            self.stats.source_guard_drops += 1;
            return;
        }
        self.learn_host(now, src_ip, in_port, src_mac);
        if guarded && carries_roce(&ip) && !self.bound_to(src_ip, in_port) {
            self.stats.source_guard_drops += 1;
            return;
        }
        let udp = (ip.protocol() == IP_PROTO_UDP)
            .then(|| UdpPacket::new_checked(ip.payload()).ok())
            .flatten();
        let headline = PacketHeadline {
            dst: dst_ip,
            protocol: ip.protocol(),
            udp_dst_port: udp.as_ref().map(|u| u.dst_port()),
        };
        match pipeline::classify(&headline, &self.cfg.group_space, self.peel.is_some()) {
            PacketClass::Peel => self.peel_frame(in_port, frame, ip_bytes, dst_ip),
            PacketClass::Igmp => self.igmp_frame(now, in_port, frame, ip.payload(), dst_mac),
            PacketClass::Mrp => {
                let payload = udp.map_or(Vec::new(), |u| u.payload().to_vec());
                self.mrp(now, in_port, src_ip, src_mac, &payload);
            }
            PacketClass::GroupRoce => self.roce(now, in_port, ip_bytes),
            // Only RoCE and MRP are carried to groups.
            PacketClass::GroupOther => self.stats.roce_malformed += 1,
            PacketClass::IpMulticast => self.multicast(in_port, frame, dst_ip, dst_mac),
            PacketClass::Unicast => {
                // The forwarding plug: this switch's host table (one port per host).
                let table = HostRoutes(&self.hosts.entries, &self.cfg.switch_ports);
                match pipeline::unicast_port(&table, dst_ip, 0, in_port) {
                    UnicastDecision::Hairpin => self.stats.hairpin_drops += 1,
                    UnicastDecision::Port(port) => {
                        let mac = self.hosts.get(&dst_ip.to_u32()).map(|h| h.mac);
                        let mut f = frame.to_vec();
                        if let Some(mac) = mac {
                            EthernetFrame::new_unchecked(&mut f[..]).set_dst_addr(mac);
                        }
                        self.stats.forwarded += 1;
                        self.send(port, f);
                    }
                    UnicastDecision::Unroutable => self.l2_forward(in_port, frame, dst_mac),
                }
            }
        }
    }

    /// Step 6 of the module docs: IPv4 multicast outside the group space, by the
    /// snooped memberships. Link-local groups (224.0.0.0/24) and groups no port joined
    /// are flooded (RFC 4541 §2.1.2).
    fn multicast(
        &mut self,
        in_port: u16,
        frame: &[u8],
        group: Ipv4Address,
        dst_mac: EthernetAddress,
    ) {
        let link_local = group.to_u32() >> 8 == 0xe000_00;
        if link_local {
            self.l2_forward(in_port, frame, dst_mac);
        } else if self.igmp.members(group).is_none() {
            self.stats.mcast_unregistered += 1;
            self.l2_forward(in_port, frame, dst_mac);
        } else {
            // A snooped group also goes toward every other switch (RFC 4541 §2.1.2's
            // router ports): members behind it are that switch's to find.
            self.stats.mcast_forwarded += 1;
            for p in (0..self.cfg.ports).filter(|&p| p != in_port) {
                if self.igmp.is_member(group, p) || self.toward_switch(p) {
                    self.send(p, frame.to_vec());
                }
            }
        }
    }

    /// Step 6: an IGMP message. Reports and leaves update the memberships and go on
    /// only toward other switches (RFC 4541 §2.1.1: reports reach router ports, not
    /// hosts, whose IGMPv2 report suppression would otherwise hide them); anything
    /// else (a query from another querier) is flooded.
    fn igmp_frame(
        &mut self,
        now: Instant,
        in_port: u16,
        frame: &[u8],
        igmp: &[u8],
        dst_mac: EthernetAddress,
    ) {
        match IgmpRepr::parse(igmp) {
            Err(_) => self.stats.igmp_malformed += 1,
            Ok(IgmpRepr::Membership(changes)) => {
                self.stats.igmp_reports += 1;
                let to_switch = self.toward_switch(in_port);
                for c in changes {
                    self.igmp.apply(now, in_port, to_switch, c);
                }
                // The snooping table counts its own refusals; the stats mirror it.
                self.stats.igmp_table_full = self.igmp.refused();
                let up: Vec<u16> = (0..self.cfg.ports)
                    .filter(|&p| p != in_port && self.toward_switch(p))
                    .collect();
                for p in up {
                    self.send(p, frame.to_vec());
                }
            }
            Ok(_) => self.l2_forward(in_port, frame, dst_mac),
        }
    }

    /// Whether `port` leads to another switch: a configured switch port, a PEEL rack
    /// switch's uplink, or any port of a PEEL prefix-tier switch.
    fn toward_switch(&self, port: u16) -> bool {
        self.cfg.switch_ports.contains(&port)
            || match &self.cfg.peel {
                Some(PeelRole::Rack { uplinks }) => uplinks.contains(&port),
                Some(PeelRole::Prefix { .. }) => true,
                None => false,
            }
    }

    /// A general query out of `port`: from the port's MAC and 0.0.0.0 (the address
    /// RFC 4541 §2.1.1 lets a snooping switch's querier use), to 224.0.0.1, TTL 1,
    /// with the Router Alert option (RFC 3376 §4).
    fn send_general_query(&mut self, port: u16) {
        let igmp = IgmpRepr::emit_general_query(
            (super::igmp_snooping::QUERY_RESPONSE_INTERVAL.as_ps() / 100_000_000_000) as u8,
            super::igmp_snooping::ROBUSTNESS as u8,
            self.cfg
                .igmp_query_interval
                .map_or(0, |q| (q.as_ps() / 1_000_000_000_000).min(127) as u8),
        );
        const IHL: usize = 24;
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + IHL + igmp.len()];
        let m = ALL_SYSTEMS.0;
        EthernetRepr {
            src_addr: self.port_mac(port),
            dst_addr: EthernetAddress([0x01, 0x00, 0x5e, m[1] & 0x7f, m[2], m[3]]),
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        let ip = &mut f[ETHERNET_HEADER_LEN..];
        ip[0] = 0x46; // version 4, 6 words: the Router Alert option
        ip[1] = 0xc0; // DSCP CS6, as Linux sends IGMP
        ip[2..4].copy_from_slice(&((IHL + igmp.len()) as u16).to_be_bytes());
        ip[8] = 1;
        ip[9] = IP_PROTO_IGMP;
        ip[16..20].copy_from_slice(&m);
        ip[20..24].copy_from_slice(&[0x94, 0x04, 0, 0]);
        ip[IHL..].copy_from_slice(&igmp);
        Ipv4Packet::new_unchecked(&mut ip[..]).fill_checksum();
        self.stats.igmp_queries_sent += 1;
        self.send(port, f);
    }

    /// IGMP snooping's table (module docs, step 6).
    pub fn igmp(&self) -> &IgmpSnooping {
        &self.igmp
    }
    /// The IPv4 multicast memberships IGMP snooping holds: (group, port), in order.
    pub fn igmp_memberships(&self) -> impl Iterator<Item = (Ipv4Address, u16)> + '_ {
        self.igmp.memberships()
    }

    /// Step 5 of the module docs.
    fn peel_frame(&mut self, in_port: u16, frame: &[u8], ip_bytes: &[u8], group: Ipv4Address) {
        let Some(peel) = self.peel.as_mut() else {
            return;
        };
        let Ok(shim) = read_shim(ip_bytes) else {
            self.stats.peel_malformed += 1;
            return;
        };
        self.stats.peel_in += 1;
        peel.handle_packet(in_port, group, &shim);
        let actions: Vec<PeelAction> = std::iter::from_fn(|| peel.poll_transmit()).collect();
        if actions.is_empty() {
            self.stats.peel_dropped += 1;
            return;
        }
        let as_sent = &frame[..ETHERNET_HEADER_LEN + ip_bytes.len()];
        let mut stripped: Option<Vec<u8>> = None;
        for a in actions {
            match a {
                PeelAction::Forward(port) => {
                    self.stats.peel_forwarded += 1;
                    self.send(port, as_sent.to_vec());
                }
                PeelAction::Deliver(port) => {
                    if stripped.is_none() {
                        // Parsed above, so stripping cannot fail; count it if it does.
                        let Ok((_, inner)) = strip_shim(ip_bytes) else {
                            self.stats.peel_malformed += 1;
                            return;
                        };
                        let mut f = Vec::with_capacity(ETHERNET_HEADER_LEN + inner.len());
                        f.extend_from_slice(&frame[..ETHERNET_HEADER_LEN]);
                        f.extend_from_slice(&inner);
                        stripped = Some(f);
                    }
                    if let Some(f) = &stripped {
                        self.stats.peel_delivered += 1;
                        let f = f.clone();
                        self.send(port, f);
                    }
                }
            }
        }
    }

    fn roce(&mut self, now: Instant, in_port: u16, ip_bytes: &[u8]) {
        let Ok(pkt) = RoceRepr::parse(ip_bytes) else {
            self.stats.roce_malformed += 1;
            return;
        };
        // Verified once here; each bridged copy then gets a fresh ICRC from `emit`.
        if !pkt.icrc_ok(ip_bytes) {
            self.stats.bad_icrc += 1;
            return;
        }
        // Data (not feedback) to a held group only from its registered source: the
        // source moves through MRP, never by one data packet (module docs, step 4).
        let dst = pkt.ip.dst_addr;
        let data = pkt.bth.opcode != Opcode::CNP && pkt.ext.aeth.is_none();
        if data
            && self.cepheus.group(dst).is_some()
            && self.group_sources.get(&dst.to_u32()) != Some(&(pkt.ip.src_addr, in_port))
        {
            self.stats.group_source_drops += 1;
            return;
        }
        if self.cepheus.handle_packet(now, in_port, &pkt) == Handling::NotMulticast {
            // Cannot happen for a group address, but never drop silently.
            self.stats.roce_malformed += 1;
        }
        while let Some(a) = self.cepheus.poll_transmit(now) {
            match a {
                CepheusAction::Replicate { port, bridge } => {
                    self.replica(port, bridge, &pkt, ip_bytes)
                }
                CepheusAction::Feedback { port, packet } => {
                    self.emit_feedback(port, &packet, &packet.repr(&pkt))
                }
            }
        }
    }

    /// Sends feedback `repr` (of `packet`) out of `port` toward the source.
    fn emit_feedback(&mut self, port: u16, packet: &FeedbackPacket, repr: &RoceRepr<'_>) {
        let mut ipb = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ipb);
        let dst = self.next_hop_mac(port, packet.dst_ip);
        self.emit_ip(port, dst, &ipb);
    }

    fn replica(&mut self, port: u16, bridge: Option<Bridge>, pkt: &RoceRepr<'_>, ip_bytes: &[u8]) {
        let rewritten;
        let (copy, dst): (&[u8], _) = match bridge {
            Some(b) => {
                // Rewritten from the parsed packet: checksum and ICRC recomputed once.
                let mut r = *pkt;
                b.apply(&mut r);
                let mut bytes = vec![0u8; r.buffer_len()];
                r.emit(&mut bytes);
                rewritten = bytes;
                (&rewritten, self.next_hop_mac(port, b.dst_ip))
            }
            None => (ip_bytes, Some(EthernetAddress::BROADCAST)),
        };
        self.stats.replicated_bytes += copy.len() as u64;
        self.emit_ip(port, dst, copy);
    }

    /// The MAC of host `ip` behind `port`, or broadcast toward a switch (a group
    /// address); None (counted) when the host's MAC is not known.
    fn next_hop_mac(&mut self, port: u16, ip: Ipv4Address) -> Option<EthernetAddress> {
        self.peek_next_hop_mac(port, ip)
    }

    /// [`next_hop_mac`](Self::next_hop_mac) without its side of the bargain: what a
    /// compiled fast path puts on a copy.
    pub(crate) fn peek_next_hop_mac(&self, port: u16, ip: Ipv4Address) -> Option<EthernetAddress> {
        if self.cfg.group_space.contains(ip) {
            return Some(EthernetAddress::BROADCAST);
        }
        match self.hosts.get(&ip.to_u32()) {
            Some(h) if h.port == port => Some(h.mac),
            _ => None,
        }
    }

    fn emit_ip(&mut self, port: u16, dst: Option<EthernetAddress>, ip_packet: &[u8]) {
        let Some(dst) = dst else {
            self.stats.no_mac += 1;
            return;
        };
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + ip_packet.len()];
        EthernetRepr {
            src_addr: self.port_mac(port),
            dst_addr: dst,
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f[ETHERNET_HEADER_LEN..].copy_from_slice(ip_packet);
        self.send(port, f);
    }

    /// A UDP datagram as an IPv4 packet (DF, TTL 64, UDP checksum 0).
    pub fn udp_packet(src: Ipv4Address, dst: Ipv4Address, port: u16, payload: &[u8]) -> Vec<u8> {
        let udp_len = UDP_HEADER_LEN + payload.len();
        let mut b = vec![0u8; IPV4_HEADER_LEN + udp_len];
        Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            dscp: 0,
            ecn: Ecn::NotEct,
            ident: 0,
            dont_frag: true,
            ttl: 64,
            protocol: IP_PROTO_UDP,
            payload_len: udp_len,
        }
        .emit(&mut b);
        UdpRepr {
            src_port: port,
            dst_port: port,
            checksum: 0,
            payload_len: payload.len(),
        }
        .emit(&mut b[IPV4_HEADER_LEN..]);
        b[IPV4_HEADER_LEN + UDP_HEADER_LEN..].copy_from_slice(payload);
        b
    }

    fn mrp(
        &mut self,
        now: Instant,
        in_port: u16,
        leader: Ipv4Address,
        leader_mac: EthernetAddress,
        datagram: &[u8],
    ) {
        self.stats.mrp_in += 1;
        let payload = match &self.cfg.mrp_key {
            None => datagram,
            Some(key) => match key.open(leader, datagram) {
                Err(_) => {
                    self.stats.mrp_unauthenticated += 1;
                    return;
                }
                Ok((inner, counter)) => {
                    if !self.replay.accept(in_port, leader, counter) {
                        self.stats.mrp_replayed += 1;
                        return;
                    }
                    inner
                }
            },
        };
        // The message types in the order every rocast switch parses them
        // (`pipeline::MrpMessage`).
        let (mcst, result) = match MrpMessage::parse(payload) {
            Some(MrpMessage::Allocate(req)) => {
                self.allocate(now, in_port, leader, leader_mac, req);
                return;
            }
            Some(MrpMessage::Prune(prune)) => {
                let routes = HostRoutes(&self.hosts.entries, &self.cfg.switch_ports);
                match mrp_agent::handle_prune(&mut self.cepheus, in_port, &prune, &routes) {
                    Some(out) => {
                        self.stats.mrp_pruned += out.removed as u64;
                        self.stats.mrp_prune_ignored += out.unknown as u64;
                        for (port, p) in out.next {
                            let mut body = vec![0u8; p.buffer_len()];
                            p.emit(&mut body);
                            self.stats.mrp_out += 1;
                            let to = (p.mcst_id, EthernetAddress::BROADCAST);
                            self.send_mrp(port, leader, to, &body, true);
                        }
                    }
                    None => self.stats.mrp_prune_ignored += 1,
                }
                return;
            }
            Some(MrpMessage::Release(rel)) => {
                match mrp_agent::handle_release(&mut self.cepheus, in_port, rel.mcst_id) {
                    Some(next) => {
                        self.stats.mrp_released += 1;
                        self.leases.remove(&rel.mcst_id.to_u32());
                        self.group_sources.remove(&rel.mcst_id.to_u32());
                        let mut body = [0u8; 8];
                        rel.emit(&mut body);
                        for port in next {
                            self.stats.mrp_out += 1;
                            let to = (rel.mcst_id, EthernetAddress::BROADCAST);
                            self.send_mrp(port, leader, to, &body, true);
                        }
                    }
                    // A repeated release (the leader sends two) finds nothing left.
                    None if self.cepheus.group(rel.mcst_id).is_none() => {
                        self.stats.mrp_stale_release += 1
                    }
                    None => self.stats.mrp_refused += 1,
                }
                return;
            }
            Some(MrpMessage::Register(m)) => {
                let check = self.allocation_check(m.mcst_id, leader, in_port);
                // A new incarnation's first packet replaces the tree its predecessor
                // left (same direction only: another direction stays a conflict), so
                // a member the new leader no longer lists cannot hold its ACKs back.
                if check.is_ok()
                    && m.new_incarnation
                    && m.seq == 0
                    && self
                        .cepheus
                        .group(m.mcst_id)
                        .is_some_and(|g| g.ack_out_port == Some(in_port))
                {
                    self.cepheus.remove_group(m.mcst_id);
                }
                let r = match check {
                    Err(e) => Err(e),
                    Ok(()) => mrp_agent::handle_mrp(
                        &mut self.cepheus,
                        in_port,
                        &m,
                        &HostRoutes(&self.hosts.entries, &self.cfg.switch_ports),
                    ),
                };
                if r.is_ok() {
                    self.group_sources
                        .insert(m.mcst_id.to_u32(), (leader, in_port));
                    if m.new_incarnation && self.cepheus.reset_group_feedback(m.mcst_id) {
                        self.stats.mrp_new_incarnations += 1;
                    }
                }
                (m.mcst_id, r)
            }
            None => {
                self.stats.mrp_malformed += 1;
                // The McstID is the first 4 bytes when there are 4.
                let id = payload.get(..4).map_or(Ipv4Address::UNSPECIFIED, |b| {
                    Ipv4Address([b[0], b[1], b[2], b[3]])
                });
                (id, Err(SwitchRejection::Malformed))
            }
        };
        match result {
            Ok(next) => {
                if let Some(lease) = self.cfg.group_lease {
                    let end = now + lease;
                    self.leases.insert(mcst.to_u32(), end);
                    self.next_expiry = Some(self.next_expiry.map_or(end, |e| e.min(end)));
                }
                // The holder's registration renews its allocation.
                let renew = now + self.cfg.allocation_lease;
                if let Some(a) = self.allocations.get_mut(&mcst.to_u32()) {
                    a.until = a.until.max(renew);
                }
                for (port, m) in next {
                    let mut body = vec![0u8; m.buffer_len()];
                    m.emit(&mut body);
                    // One attached member: address it directly (see the module docs).
                    let host = match m.members.as_slice() {
                        [one] => self
                            .hosts
                            .get(&one.ip.to_u32())
                            .filter(|h| h.port == port)
                            .map(|h| (one.ip, h.mac)),
                        _ => None,
                    };
                    // Toward a switch the registration is sealed; a member host has no
                    // key and gets the bare record (its leader checks what it confirms).
                    let to = host.unwrap_or((m.mcst_id, EthernetAddress::BROADCAST));
                    self.stats.mrp_out += 1;
                    self.send_mrp(port, leader, to, &body, host.is_none());
                }
            }
            Err(reason) => {
                self.stats.mrp_refused += 1;
                let report = SwitchReport {
                    switch: self.cfg.switch_id,
                    mcst_id: mcst,
                    reason,
                };
                let src = if self.cfg.group_space.contains(mcst) {
                    mcst
                } else {
                    Ipv4Address::UNSPECIFIED
                };
                self.send_report(in_port, (leader, leader_mac), src, report);
            }
        }
    }

    /// Whether `leader`, on `in_port`, may register `mcst`: the address is allocated
    /// to it, or (without `require_allocation`) allocated to nobody.
    fn allocation_check(
        &self,
        mcst: Ipv4Address,
        leader: Ipv4Address,
        in_port: u16,
    ) -> Result<(), SwitchRejection> {
        match self.allocations.get(&mcst.to_u32()) {
            Some(a) if a.holder == leader && a.port == in_port => Ok(()),
            Some(_) => Err(SwitchRejection::NotAllocated),
            None if self.cfg.require_allocation => Err(SwitchRejection::NotAllocated),
            None => Ok(()),
        }
    }

    /// Answers an allocation request: the first address of the group space, from the
    /// cursor on, that is neither allocated nor registered, held for the requester.
    /// The table cap counts allocations, so "full" comes back as `TableFull`. The
    /// search visits at most one address more than are taken (O(groups)).
    fn allocate(
        &mut self,
        now: Instant,
        in_port: u16,
        requester: Ipv4Address,
        requester_mac: EthernetAddress,
        req: MrpAllocate,
    ) {
        let space = self.cfg.group_space;
        let size = space.size();
        let taken = self.allocations.len() + self.cepheus.num_groups();
        let mut found = None;
        if self.allocations.len() < self.cfg.max_groups && (taken as u64) < size {
            for i in 0..size.min(taken as u64 + 1) {
                let idx = (self.allocation_cursor + i) % size;
                let Some(ip) = space.nth(idx) else { break };
                if !self.allocations.contains_key(&ip.to_u32()) && self.cepheus.group(ip).is_none()
                {
                    found = Some((idx, ip));
                    break;
                }
            }
        }
        let Some((idx, mcst)) = found else {
            self.stats.allocation_full += 1;
            let report = SwitchReport {
                switch: self.cfg.switch_id,
                mcst_id: Ipv4Address::UNSPECIFIED,
                reason: SwitchRejection::TableFull,
            };
            let src = space.nth(0).unwrap_or(Ipv4Address::UNSPECIFIED);
            self.send_report(in_port, (requester, requester_mac), src, report);
            return;
        };
        self.allocation_cursor = (idx + 1) % size;
        let grant = Duration::from_ms(req.lease_ms as u64).min(self.cfg.allocation_lease);
        let until = now + grant;
        self.allocations.insert(
            mcst.to_u32(),
            GroupAllocation {
                holder: requester,
                port: in_port,
                until,
            },
        );
        self.next_expiry = Some(self.next_expiry.map_or(until, |e| e.min(until)));
        self.stats.allocated += 1;
        let ans = MrpAllocation {
            mcst_id: mcst,
            nonce: req.nonce,
            lease_ms: (grant.as_ps() / 1_000_000_000).min(u32::MAX as u64) as u32,
        };
        let mut body = [0u8; MRP_ALLOCATION_LEN];
        ans.emit(&mut body);
        self.stats.mrp_out += 1;
        self.send_mrp(in_port, mcst, (requester, requester_mac), &body, true);
    }

    /// The group addresses allocated now.
    pub fn allocations(&self) -> impl Iterator<Item = (Ipv4Address, &GroupAllocation)> {
        self.allocations
            .iter()
            .map(|(&ip, a)| (Ipv4Address::from_u32(ip), a))
    }

    /// `body` with this switch's authentication trailer as sent from `src`, when it
    /// holds the fabric key; unchanged otherwise.
    fn seal(&mut self, src: Ipv4Address, body: &[u8]) -> Vec<u8> {
        seal_if_keyed(self.cfg.mrp_key.as_ref(), src, &mut self.mrp_counter, body)
    }

    /// `body` to `to` (address, MAC) behind `port`, in a UDP datagram from `src` to the
    /// MRP port; sealed when `seal` (and this switch holds the fabric key).
    fn send_mrp(
        &mut self,
        port: u16,
        src: Ipv4Address,
        to: (Ipv4Address, EthernetAddress),
        body: &[u8],
        seal: bool,
    ) {
        let body = if seal {
            self.seal(src, body)
        } else {
            body.to_vec()
        };
        let ipb = Self::udp_packet(src, to.0, MRP_UDP_PORT, &body);
        self.emit_ip(port, Some(to.1), &ipb);
    }

    /// A [`SwitchReport`] to `to` (behind `port`), sealed as sent from `src`.
    fn send_report(
        &mut self,
        port: u16,
        to: (Ipv4Address, EthernetAddress),
        src: Ipv4Address,
        report: SwitchReport,
    ) {
        let mut body = [0u8; SWITCH_REPORT_LEN];
        if report.emit(&mut body).is_ok() {
            self.send_mrp(port, src, to, &body, true);
        }
    }

    /// Where this switch's own MRP counter starts (the driver passes the wall clock in
    /// nanoseconds, so a restarted switch goes on above the counters it used before).
    pub fn set_mrp_counter(&mut self, first: u64) {
        self.mrp_counter = MrpCounter::starting_at(first);
    }

    /// Forgets a group (the controller tearing it down, or an operator).
    pub fn remove_group(&mut self, mcst_id: Ipv4Address) -> bool {
        self.leases.remove(&mcst_id.to_u32());
        self.group_sources.remove(&mcst_id.to_u32());
        self.cepheus.remove_group(mcst_id)
    }

    /// When the next group lease may run out or IGMP work is due (a query, a
    /// membership's end); `None`: nothing timed is pending.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.next_expiry,
            self.next_sweep,
            self.igmp.poll_timeout(),
            self.cepheus.poll_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Frees every group whose lease ran out by `now` (counted in `lease_expired`).
    /// Cheap when nothing is due: one comparison.
    pub fn handle_timeout(&mut self, now: Instant) {
        // CNPs the filter held (TMCF's buffered reading) and releases now.
        if self.cepheus.poll_at().is_some_and(|t| t <= now) {
            self.cepheus.handle_timeout(now);
            while let Some(a) = self.cepheus.poll_transmit(now) {
                if let CepheusAction::Feedback { port, packet } = a {
                    if let Some(repr) = self.cepheus.released_repr(&packet) {
                        self.emit_feedback(port, &packet, &repr);
                    }
                }
            }
        }
        self.stats.igmp_expired += self.igmp.expire(now);
        if self.next_sweep.is_some_and(|t| t <= now) {
            self.sweep(now);
        }
        if self.igmp.poll_query(now) {
            let hosts: Vec<u16> = (0..self.cfg.ports)
                .filter(|&p| !self.toward_switch(p))
                .collect();
            for p in hosts {
                self.send_general_query(p);
            }
        }
        if self.next_expiry.is_none_or(|e| now < e) {
            return;
        }
        let expired: Vec<u32> = self
            .leases
            .iter()
            .filter(|(_, &end)| end <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            self.leases.remove(&id);
            self.group_sources.remove(&id);
            if self.cepheus.remove_group(Ipv4Address::from_u32(id)) {
                self.stats.lease_expired += 1;
            }
        }
        let before = self.allocations.len();
        self.allocations.retain(|_, a| a.until > now);
        self.stats.allocation_expired += (before - self.allocations.len()) as u64;
        self.next_expiry = self
            .leases
            .values()
            .copied()
            .chain(self.allocations.values().map(|a| a.until))
            .min();
    }

    /// Forgets learned MACs and host bindings idle for `table_age` (pinned ones stay).
    fn sweep(&mut self, now: Instant) {
        let age = self.cfg.table_age;
        self.stats.mac_expired += self.macs.expire(now, age);
        self.stats.host_expired += self.hosts.expire(now, age);
        self.next_sweep =
            (self.macs.learned + self.hosts.learned > 0).then(|| now + self.sweep_interval());
    }

    /// When `mcst_id`'s lease runs out (`None`: no lease, or no such group).
    pub fn lease_end(&self, mcst_id: Ipv4Address) -> Option<Instant> {
        self.leases.get(&mcst_id.to_u32()).copied()
    }

    /// The member hosts of a group's tree at this switch: (port, IP, QPN).
    pub fn group_members(&self, mcst_id: Ipv4Address) -> Vec<(u16, Ipv4Address, u32)> {
        self.cepheus.group(mcst_id).map_or(Vec::new(), |g| {
            g.entries()
                .iter()
                .filter_map(|e| match e.next_hop {
                    NextHop::Host { ip, qpn, .. } => Some((e.port, ip, qpn)),
                    NextHop::Switch => None,
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod peel_tests;

#[cfg(test)]
mod igmp_tests;
