//! Cepheus' multicast engine in one switch's pipeline (Cepheus §III-B, §III-D, §III-E).
//!
//! [`CepheusSwitch`] owns the MFTs of every group through this switch and does the
//! data-plane work the paper puts in its FPGA accelerator:
//!
//! - **Replication** (§III-B.2): a data packet addressed to a McstID is copied to every
//!   path of the group's tree except the one it came from.
//! - **Connection bridging** (§III-B.2, Fig. 4): a copy leaving toward a member host is
//!   rewritten to that member's connection ([`Bridge`]).
//! - **Retransmission filtering** (§III-D): a copy goes out of a path only if the path
//!   has not acknowledged its PSN, so retransmissions reach only those that miss them.
//! - **ACK aggregation** (§III-D): per-path AckPSN; the aggregated ACK carries their
//!   minimum and is generated only when the path that held the minimum (triPort)
//!   advances, so the source is not flooded with one ACK per receiver.
//! - **NAK aggregation** (§III-D): a NAK's ePSN is remembered in MePSN and passed on only
//!   once every path has acknowledged everything below it, so one receiver's NAK never
//!   acknowledges packets another receiver lost (the "inter-covering" problem).
//! - **CNP filtering** (§III-D "Congestion Control"): a pluggable [`CnpFilter`].
//! - **Source switching** (§III-E): the port the group's data arrives on is the source
//!   port; feedback leaves by it. Data from another port of the tree makes that port the
//!   source and restarts the acknowledgement state.
//! - At the switch next to the source, feedback is rewritten to look like an ordinary
//!   ACK/NAK/CNP from the source's virtual remote ([`FeedbackPacket`]).
//!
//! One rocast addition, for lossy fabrics: when a retransmitted packet reaches a switch
//! below which every path has already acknowledged it (so the filter sends it nowhere),
//! and the packet asks for an acknowledgement, the switch answers with its aggregated
//! ACK. Without this, a lost aggregated ACK would leave the source retransmitting into
//! filters that swallow every copy until its retry limit, since receivers that hold
//! everything have nothing new to acknowledge. (A responder re-acknowledges a duplicate
//! the same way.)
//!
//! Memory: per group one [`MulticastForwardingTable`] — 2 bytes of Path Index per port
//! and one 48-byte entry per port on the tree, bounded by the port count whatever the
//! group size — plus the CNP filter's counters (2 bytes per path). The packed hardware
//! layout is [`MulticastForwardingTable::packed_bytes`]: 909 bytes per group on a
//! 64-port switch, 0.91 MB for 1,000 groups (the paper: 0.69 MB, without CNP counters).
//!
//! Registration (MRP) fills these tables through [`CepheusSwitch::set_path`]; the MRP
//! protocol itself lives in `control`.

pub mod bridge;
pub mod cnp_filter;
pub mod mft;

pub use bridge::{
    Bridge, BridgedHeaders, FeedbackHeader, FeedbackKind, FeedbackPacket, VIRTUAL_QPN,
};
pub use cnp_filter::{
    BufferedTmcfCnpFilter, CnpFilter, CnpFilterError, CnpFilterPolicy, CounterCnpFilter,
    DampedTmcfCnpFilter, ForwardAllCnp, TmcfCnpFilter,
};
pub use mft::{MulticastForwardingTable, NextHop, PathEntry};

use crate::time::Instant;
pub use crate::wire::group_space::{GroupAddressSpace, GroupSpaceError, GroupSpaceParseError};
use crate::wire::{AckSyndrome, Ipv4Address, NakCode, Opcode, Psn, RoceRepr};
use std::collections::{BTreeMap, VecDeque};

/// True for the addresses rocast uses as McstIDs by default: IPv4 multicast,
/// 224.0.0.0/4 ([`GroupAddressSpace::MULTICAST`]).
pub fn is_mcst_id(ip: Ipv4Address) -> bool {
    GroupAddressSpace::MULTICAST.contains(ip)
}

/// What the switch does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CepheusAction {
    /// A copy of the data packet out of `port`, bridged to a member's connection when
    /// `bridge` says so.
    Replicate { port: u16, bridge: Option<Bridge> },
    /// A feedback packet out of `port`, toward the source.
    Feedback { port: u16, packet: FeedbackPacket },
}

/// Whether the multicast engine took the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handling {
    /// Not addressed to a McstID: route it as unicast.
    NotMulticast,
    /// Taken: the actions (possibly none, with the reason counted) say what follows.
    Handled,
}

/// Why the table refused a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MftError {
    #[error("MFT full: {0} groups")]
    TableFull(usize),
    #[error("no port {0}")]
    NoSuchPort(u16),
    #[error("{0} is not in the switch's group address space")]
    NotMulticast(Ipv4Address),
    #[error(transparent)]
    BadGroupSpace(#[from] GroupSpaceError),
}

/// Counters of the multicast engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CepheusStats {
    pub data_in: u64,
    pub replicas: u64,
    pub bridged: u64,
    /// Copies not sent because the path had acknowledged the PSN.
    pub filtered: u64,
    pub acks_in: u64,
    pub naks_in: u64,
    pub cnps_in: u64,
    pub acks_out: u64,
    pub naks_out: u64,
    pub cnps_out: u64,
    pub cnps_filtered: u64,
    /// Aggregated ACKs re-sent for fully acknowledged retransmissions.
    pub reacks: u64,
    pub source_switches: u64,
    /// Addressed to a McstID this switch has no table for.
    pub unknown_group: u64,
    /// Arrived on a port that is not on the group's tree.
    pub not_in_tree: u64,
    /// Feedback arriving on the source port, or before any source is known.
    pub stray_feedback: u64,
    /// Opcodes multicast does not carry (READ, atomics, UD) or reserved syndromes.
    pub unsupported: u64,
}

impl std::ops::AddAssign<&CepheusStats> for CepheusStats {
    fn add_assign(&mut self, o: &CepheusStats) {
        self.data_in += o.data_in;
        self.replicas += o.replicas;
        self.bridged += o.bridged;
        self.filtered += o.filtered;
        self.acks_in += o.acks_in;
        self.naks_in += o.naks_in;
        self.cnps_in += o.cnps_in;
        self.acks_out += o.acks_out;
        self.naks_out += o.naks_out;
        self.cnps_out += o.cnps_out;
        self.cnps_filtered += o.cnps_filtered;
        self.reacks += o.reacks;
        self.source_switches += o.source_switches;
        self.unknown_group += o.unknown_group;
        self.not_in_tree += o.not_in_tree;
        self.stray_feedback += o.stray_feedback;
        self.unsupported += o.unsupported;
    }
}

/// The multicast engine of one switch.
#[derive(Debug)]
pub struct CepheusSwitch {
    ports: u16,
    max_groups: usize,
    groups: BTreeMap<u32, MulticastForwardingTable>,
    /// Groups whose tree uses each port (MRP's group-level load balancing).
    port_load: Vec<u32>,
    cnp_filter: Box<dyn CnpFilter>,
    /// Per group, the headers of the last CNP a holding filter kept (what a CNP it
    /// releases later is built on); only for groups in the table.
    held_cnp_headers: BTreeMap<u32, FeedbackHeader>,
    group_space: GroupAddressSpace,
    pub stats: CepheusStats,
    /// Decisions made and not yet polled.
    pending: VecDeque<CepheusAction>,
    scratch: Vec<CepheusAction>,
}

impl CepheusSwitch {
    pub fn new(ports: u16, max_groups: usize, cnp_filter: Box<dyn CnpFilter>) -> Self {
        CepheusSwitch {
            ports,
            max_groups,
            groups: BTreeMap::new(),
            port_load: vec![0; ports as usize],
            cnp_filter,
            held_cnp_headers: BTreeMap::new(),
            group_space: GroupAddressSpace::MULTICAST,
            stats: CepheusStats::default(),
            pending: VecDeque::new(),
            scratch: Vec::new(),
        }
    }

    /// The same switch taking McstIDs from `space` instead of 224.0.0.0/4.
    pub fn with_group_space(mut self, space: GroupAddressSpace) -> Self {
        self.group_space = space;
        self
    }
    pub fn group_space(&self) -> GroupAddressSpace {
        self.group_space
    }
    /// The McstIDs of the groups this switch holds, ascending.
    pub fn group_ids(&self) -> impl Iterator<Item = Ipv4Address> + '_ {
        self.groups.keys().map(|&k| Ipv4Address::from_u32(k))
    }

    pub fn ports(&self) -> u16 {
        self.ports
    }
    pub fn num_groups(&self) -> usize {
        self.groups.len()
    }
    pub fn group(&self, mcst_id: Ipv4Address) -> Option<&MulticastForwardingTable> {
        self.groups.get(&mcst_id.to_u32())
    }
    /// Groups whose tree uses `port`.
    pub fn port_load(&self, port: u16) -> u32 {
        self.port_load
            .get(port as usize)
            .copied()
            .unwrap_or(u32::MAX)
    }
    pub fn cnp_filter_name(&self) -> &'static str {
        self.cnp_filter.name()
    }

    /// Heap bytes of all tables and the CNP filter.
    pub fn memory_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|g| g.memory_bytes() + 48)
            .sum::<usize>()
            + self.cnp_filter.memory_bytes()
            + self.held_cnp_headers.len() * 48
            + self.port_load.capacity() * 4
    }

    /// Puts `port` on `mcst_id`'s tree with `next_hop`, creating the group's table if
    /// needed (which fails when the switch holds `max_groups` already). `source`
    /// marks the port the registration came from: the source's direction until data
    /// says otherwise.
    pub fn set_path(
        &mut self,
        mcst_id: Ipv4Address,
        port: u16,
        next_hop: NextHop,
        source: bool,
    ) -> Result<(), MftError> {
        if !self.group_space.contains(mcst_id) {
            return Err(MftError::NotMulticast(mcst_id));
        }
        if port >= self.ports {
            return Err(MftError::NoSuchPort(port));
        }
        let key = mcst_id.to_u32();
        if !self.groups.contains_key(&key) && self.groups.len() >= self.max_groups {
            return Err(MftError::TableFull(self.max_groups));
        }
        let ports = self.ports;
        let g = self
            .groups
            .entry(key)
            .or_insert_with(|| MulticastForwardingTable::new(mcst_id, ports));
        if g.entry(port).is_none() {
            self.port_load[port as usize] += 1;
        }
        g.set_path(port, next_hop);
        if source && g.ack_out_port.is_none() {
            g.ack_out_port = Some(port);
        }
        Ok(())
    }

    /// Takes `port` off `mcst_id`'s tree (an evicted member's path). The group's
    /// CNP-filter state is forgotten: it is indexed by the paths. Returns false when
    /// the group or the path does not exist.
    pub fn remove_path(&mut self, mcst_id: Ipv4Address, port: u16) -> bool {
        let key = mcst_id.to_u32();
        let Some(g) = self.groups.get_mut(&key) else {
            return false;
        };
        if !g.remove_path(port) {
            return false;
        }
        self.port_load[port as usize] -= 1;
        self.cnp_filter.forget(key);
        true
    }

    /// Starts `mcst_id`'s acknowledgement state afresh (every path's AckPSN, the
    /// aggregate, triPort, MePSN) and its CNP-filter state, keeping the tree: a new
    /// incarnation of the group's leader registered (its PSNs are not comparable with
    /// the old incarnation's, whose positions would otherwise filter the new data
    /// away). Returns false when the switch holds no such group.
    pub fn reset_group_feedback(&mut self, mcst_id: Ipv4Address) -> bool {
        let Some(g) = self.groups.get_mut(&mcst_id.to_u32()) else {
            return false;
        };
        g.reset_feedback();
        g.resync = false;
        self.cnp_filter.forget(mcst_id.to_u32());
        self.held_cnp_headers.remove(&mcst_id.to_u32());
        true
    }

    /// Removes a group's table.
    pub fn remove_group(&mut self, mcst_id: Ipv4Address) -> bool {
        let Some(g) = self.groups.remove(&mcst_id.to_u32()) else {
            return false;
        };
        for e in g.entries() {
            self.port_load[e.port as usize] -= 1;
        }
        self.cnp_filter.forget(mcst_id.to_u32());
        self.held_cnp_headers.remove(&mcst_id.to_u32());
        true
    }

    /// Takes a RoCE packet that arrived on `in_port`; what the switch sends because of
    /// it (replicas, feedback) waits for [`poll_transmit`](Self::poll_transmit).
    pub fn handle_packet(&mut self, now: Instant, in_port: u16, pkt: &RoceRepr<'_>) -> Handling {
        let mut out = std::mem::take(&mut self.scratch);
        let h = self.decide(now, in_port, pkt, &mut out);
        self.pending.extend(out.drain(..));
        self.scratch = out;
        h
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: a CNP filter that
    /// holds CNPs (TMCF's buffered reading) releases them later. `None`: never.
    pub fn poll_at(&self) -> Option<Instant> {
        self.cnp_filter.next_release()
    }

    /// Sends toward their sources the CNPs the filter releases by `now` (each counted in
    /// `cnps_out`; a group gone since is skipped); they wait for
    /// [`poll_transmit`](Self::poll_transmit), and [`released_repr`](Self::released_repr)
    /// builds each one.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut groups = Vec::new();
        self.cnp_filter.release(now, &mut groups);
        let mut out = std::mem::take(&mut self.scratch);
        for key in groups {
            if let Some(g) = self.groups.get(&key) {
                Self::toward_source(g, &mut self.stats, FeedbackKind::Cnp, Psn::new(0), &mut out);
            }
        }
        self.pending.extend(out.drain(..));
        self.scratch = out;
    }

    /// A released CNP (from [`handle_timeout`](Self::handle_timeout)) as a packet, on
    /// the headers of the last CNP its group's filter held; `None` for a group with none.
    pub fn released_repr(&self, packet: &FeedbackPacket) -> Option<RoceRepr<'static>> {
        let header = self.held_cnp_headers.get(&packet.src_ip.to_u32())?;
        Some(packet.repr_with(*header))
    }

    /// The next transmission the engine decided on, as headers: a replica of the packet
    /// last handed in (bridged to a member's connection, or as is toward a switch), or
    /// a feedback packet toward the source. The pipeline that holds the packet's bytes
    /// (or the simulator's record of them) makes the frame.
    pub fn poll_transmit(&mut self, _now: Instant) -> Option<CepheusAction> {
        self.pending.pop_front()
    }

    fn decide(
        &mut self,
        now: Instant,
        in_port: u16,
        pkt: &RoceRepr<'_>,
        out: &mut Vec<CepheusAction>,
    ) -> Handling {
        let dst = pkt.ip.dst_addr;
        let Some(g) = self.groups.get_mut(&dst.to_u32()) else {
            if self.group_space.contains(dst) {
                self.stats.unknown_group += 1;
                return Handling::Handled;
            }
            return Handling::NotMulticast;
        };
        let op = pkt.bth.opcode;
        if op == Opcode::CNP {
            self.stats.cnps_in += 1;
            if Self::cnp(
                g,
                &mut self.stats,
                self.cnp_filter.as_mut(),
                now,
                in_port,
                out,
            ) && self.cnp_filter.holds()
            {
                self.held_cnp_headers
                    .insert(dst.to_u32(), FeedbackHeader::of(pkt));
            }
        } else if let Some(aeth) = pkt.ext.aeth {
            Self::feedback(
                g,
                &mut self.stats,
                in_port,
                pkt.bth.psn,
                aeth.syndrome,
                aeth.msn,
                out,
            );
        } else if op.is_send() || op.is_write() {
            Self::data(g, &mut self.stats, in_port, pkt, out);
        } else {
            self.stats.unsupported += 1;
        }
        Handling::Handled
    }

    /// Sends feedback toward the source (out of AckOutPort, addressed as the source
    /// expects) and counts it by kind. False when no source is known.
    fn toward_source(
        g: &MulticastForwardingTable,
        stats: &mut CepheusStats,
        kind: FeedbackKind,
        psn: Psn,
        out: &mut Vec<CepheusAction>,
    ) -> bool {
        let Some(port) = g.ack_out_port else {
            return false;
        };
        let Some(e) = g.entry(port) else {
            return false;
        };
        let (dst_ip, dst_qp) = match e.next_hop {
            NextHop::Host { ip, qpn, .. } => (ip, qpn),
            NextHop::Switch => (g.mcst_id, VIRTUAL_QPN),
        };
        match kind {
            FeedbackKind::Ack {
                syndrome: AckSyndrome::Ack { .. },
                ..
            } => stats.acks_out += 1,
            FeedbackKind::Ack { .. } => stats.naks_out += 1,
            FeedbackKind::Cnp => stats.cnps_out += 1,
        }
        out.push(CepheusAction::Feedback {
            port,
            packet: FeedbackPacket {
                kind,
                psn,
                src_ip: g.mcst_id,
                dst_ip,
                dst_qp,
            },
        });
        true
    }

    fn data(
        g: &mut MulticastForwardingTable,
        stats: &mut CepheusStats,
        in_port: u16,
        pkt: &RoceRepr<'_>,
        out: &mut Vec<CepheusAction>,
    ) {
        if g.entry(in_port).is_none() {
            stats.not_in_tree += 1;
            return;
        }
        stats.data_in += 1;
        if g.ack_out_port != Some(in_port) {
            if g.ack_out_port.is_some() {
                stats.source_switches += 1;
            }
            g.ack_out_port = Some(in_port);
            g.reset_feedback();
        }
        let psn = pkt.bth.psn;
        let mut downstream = 0;
        let mut sent = 0;
        for e in g.entries() {
            if e.port == in_port {
                continue;
            }
            downstream += 1;
            if e.ack_psn.is_some_and(|a| psn <= a) {
                stats.filtered += 1;
                continue;
            }
            let bridge = match e.next_hop {
                NextHop::Host { ip, qpn, region } => {
                    stats.bridged += 1;
                    Some(Bridge {
                        mcst_id: g.mcst_id,
                        dst_ip: ip,
                        dst_qp: qpn,
                        region,
                    })
                }
                NextHop::Switch => None,
            };
            out.push(CepheusAction::Replicate {
                port: e.port,
                bridge,
            });
            sent += 1;
        }
        stats.replicas += sent;
        if downstream == 0 && pkt.bth.ack_req {
            // Every member below was pruned (an evicted member's switch keeps the
            // branch its upstream switch still sends copies on): nothing here waits
            // for this packet, so the branch acknowledges it, or the upstream
            // aggregate would wait on it until the source's retries ran out.
            let kind = FeedbackKind::ack(g.agg_ack_msn);
            if Self::toward_source(g, stats, kind, psn, out) {
                stats.reacks += 1;
            }
            return;
        }
        // Every path below has this PSN: answer for them if the source asks.
        if sent == 0 && downstream > 0 && pkt.bth.ack_req {
            // After a path was removed the aggregate may lag the paths left: they all
            // hold this PSN (nothing was sent), so their minimum is the answer.
            if std::mem::take(&mut g.resync) {
                if let Some((min, port, msn)) = g.min_ack() {
                    if g.agg_ack_psn.is_none_or(|a| min > a) {
                        g.agg_ack_psn = Some(min);
                        g.agg_ack_msn = msn;
                        g.tri_port = Some(port);
                    }
                }
            }
            if let Some(agg) = g.agg_ack_psn.filter(|&a| psn <= a) {
                let kind = FeedbackKind::ack(g.agg_ack_msn);
                if Self::toward_source(g, stats, kind, agg, out) {
                    stats.reacks += 1;
                }
            }
        }
    }

    fn feedback(
        g: &mut MulticastForwardingTable,
        stats: &mut CepheusStats,
        in_port: u16,
        psn: Psn,
        syndrome: AckSyndrome,
        msn: u32,
        out: &mut Vec<CepheusAction>,
    ) {
        if g.ack_out_port.is_none_or(|p| p == in_port) {
            stats.stray_feedback += 1;
            return;
        }
        let (acked, nak) = match syndrome {
            AckSyndrome::Ack { .. } => {
                stats.acks_in += 1;
                (psn, false)
            }
            AckSyndrome::Nak(NakCode::PsnSequenceError) | AckSyndrome::RnrNak { .. } => {
                stats.naks_in += 1;
                (psn.sub(1), true)
            }
            AckSyndrome::Nak(_) => {
                // A fatal NAK (access or request error) ends the sender's request
                // whatever the others say: pass it on.
                stats.naks_in += 1;
                Self::toward_source(g, stats, FeedbackKind::Ack { syndrome, msn }, psn, out);
                return;
            }
            AckSyndrome::Reserved(_) => {
                stats.unsupported += 1;
                return;
            }
        };
        let tri = g.tri_port;
        let agg = g.agg_ack_psn;
        let Some(e) = g.entry_mut(in_port) else {
            stats.not_in_tree += 1;
            return;
        };
        if e.ack_psn.is_none_or(|a| acked > a) {
            e.ack_psn = Some(acked);
            e.ack_msn = msn;
        }
        if nak && g.me_psn.is_none_or(|(m, _)| psn < m) {
            g.me_psn = Some((psn, syndrome));
        }
        // The trigger condition: the first aggregation, any NAK, or triPort advancing.
        let triggered = nak
            || agg.is_none()
            || tri.is_none()
            || (tri == Some(in_port) && agg.is_none_or(|a| acked > a));
        if !triggered {
            return;
        }
        let Some((min, port, min_msn)) = g.min_ack() else {
            return;
        };
        g.tri_port = Some(port);
        // What goes upstream: the pending NAK once no path lacks anything below its
        // ePSN (it then covers no one's loss), else an ACK if the minimum advanced.
        let (kind, psn) = match g.me_psn {
            Some((me, syn)) if min == me.sub(1) => {
                g.me_psn = None;
                (
                    FeedbackKind::Ack {
                        syndrome: syn,
                        msn: min_msn,
                    },
                    me,
                )
            }
            pending => {
                if pending.is_some_and(|(me, _)| min >= me) {
                    // Repaired by other means (a timeout's retransmission).
                    g.me_psn = None;
                }
                if g.agg_ack_psn.is_some_and(|a| min <= a) {
                    return;
                }
                (FeedbackKind::ack(min_msn), min)
            }
        };
        g.agg_ack_psn = Some(min);
        g.agg_ack_msn = min_msn;
        Self::toward_source(g, stats, kind, psn, out);
    }

    /// A CNP for group `g` from `in_port`: passed toward the source or held/filtered by
    /// the filter. True when it came from the group's tree (whatever the filter did).
    fn cnp(
        g: &mut MulticastForwardingTable,
        stats: &mut CepheusStats,
        filter: &mut dyn CnpFilter,
        now: Instant,
        in_port: u16,
        out: &mut Vec<CepheusAction>,
    ) -> bool {
        if g.ack_out_port.is_none_or(|p| p == in_port) {
            stats.stray_feedback += 1;
            return false;
        }
        let Some(idx) = g.entry_index(in_port) else {
            stats.not_in_tree += 1;
            return false;
        };
        if !filter.admit(now, g.mcst_id.to_u32(), idx, g.entries().len()) {
            stats.cnps_filtered += 1;
            return true;
        }
        Self::toward_source(g, stats, FeedbackKind::Cnp, Psn::new(0), out);
        true
    }
}

#[cfg(test)]
mod tests;
