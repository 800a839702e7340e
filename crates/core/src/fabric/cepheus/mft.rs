//! The multicast forwarding table of one group at one switch (Cepheus §III-B, Fig. 3).
//!
//! A Path Index with one slot per switch port says whether the port is on the group's
//! multicast distribution tree (MDT) and, if so, which Path Table entry serves it. The
//! Path Table holds at most one entry per port, so a group's table is bounded by the
//! port count however many receivers sit behind each port: a path toward another
//! switch carries the aggregate of everything behind it (§III-D "Bounded Memory
//! Overhead Per Group").
//!
//! Group-level state is the feedback machinery of §III-D: the largest PSN this switch
//! has acknowledged upstream (AggAckPSN), the port feedback leaves by (AckOutPort, which
//! is the port the group's data arrives on — §III-E's source port), the port that held
//! the minimum at the last aggregation (triPort), and the smallest expected PSN among
//! NAKs not yet passed on (MePSN).

use crate::wire::{AckSyndrome, Ipv4Address, Psn};

/// Packed per-group state: McstID (4), AggAckPSN (3), AckOutPort (1), triPort (1),
/// MePSN with its valid bit and syndrome (4).
const GROUP_STATE_BYTES: usize = 4 + 3 + 1 + 1 + 4;
/// Packed per-path fields the paper's §III-B names: dstIP (4), dstQP (3), AckPSN (3).
const PAPER_ENTRY_BYTES: usize = 4 + 3 + 3;

/// Where a path of the tree leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// Another Cepheus switch; packets keep the McstID addressing.
    Switch,
    /// A member host: the switch bridges the virtual connection to the host's QP.
    Host {
        ip: Ipv4Address,
        qpn: u32,
        /// The member's memory region (VA, RKey) for RDMA WRITE groups.
        region: Option<(u64, u32)>,
    },
}

/// One outgoing path of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEntry {
    pub port: u16,
    pub next_hop: NextHop,
    /// The largest PSN acknowledged from this path (an ACK's PSN, or a NAK's ePSN − 1);
    /// `None` until the path first acknowledges anything since the source last changed.
    pub ack_psn: Option<Psn>,
    /// The MSN of the acknowledgement that set `ack_psn`.
    pub ack_msn: u32,
}

/// One group's MFT at one switch.
#[derive(Clone, Debug)]
pub struct MulticastForwardingTable {
    pub mcst_id: Ipv4Address,
    /// Per port: 0 = not on the tree, else 1 + the entry's index.
    path_index: Vec<u16>,
    entries: Vec<PathEntry>,
    /// Largest PSN this switch has acknowledged toward the source.
    pub agg_ack_psn: Option<Psn>,
    /// MSN sent with `agg_ack_psn`.
    pub agg_ack_msn: u32,
    /// The port data arrives on and feedback leaves by (the source's direction).
    pub ack_out_port: Option<u16>,
    /// The port that held the minimum AckPSN at the last aggregation.
    pub tri_port: Option<u16>,
    /// The smallest ePSN among NAKs not yet passed on, with its syndrome (sequence
    /// error or RNR).
    pub me_psn: Option<(Psn, AckSyndrome)>,
    /// A path was removed since the last aggregation: the minimum over the paths left
    /// may be above `agg_ack_psn` with no new ACK to say so (the removed member was
    /// the laggard), so the next retransmission is answered from the paths left.
    pub resync: bool,
}

impl MulticastForwardingTable {
    pub fn new(mcst_id: Ipv4Address, ports: u16) -> Self {
        MulticastForwardingTable {
            mcst_id,
            path_index: vec![0; ports as usize],
            entries: Vec::new(),
            agg_ack_psn: None,
            agg_ack_msn: 0,
            ack_out_port: None,
            tri_port: None,
            me_psn: None,
            resync: false,
        }
    }

    pub fn ports(&self) -> u16 {
        self.path_index.len() as u16
    }
    pub fn entries(&self) -> &[PathEntry] {
        &self.entries
    }

    /// The entry serving `port`, if the port is on the tree.
    pub fn entry(&self, port: u16) -> Option<&PathEntry> {
        let i = *self.path_index.get(port as usize)?;
        (i != 0).then(|| &self.entries[i as usize - 1])
    }
    pub fn entry_mut(&mut self, port: u16) -> Option<&mut PathEntry> {
        let i = *self.path_index.get(port as usize)?;
        (i != 0).then(|| &mut self.entries[i as usize - 1])
    }
    pub(crate) fn entry_index(&self, port: u16) -> Option<usize> {
        let i = *self.path_index.get(port as usize)?;
        (i != 0).then(|| i as usize - 1)
    }

    /// Puts `port` on the tree (or updates its next hop). Returns false when the port
    /// does not exist. A host next hop replaces a switch one, never the reverse: a
    /// port that leads to a member host is a host path.
    pub fn set_path(&mut self, port: u16, next_hop: NextHop) -> bool {
        if port as usize >= self.path_index.len() {
            return false;
        }
        if let Some(e) = self.entry_mut(port) {
            if matches!(next_hop, NextHop::Host { .. }) {
                e.next_hop = next_hop;
            }
            return true;
        }
        self.entries.push(PathEntry {
            port,
            next_hop,
            ack_psn: None,
            ack_msn: 0,
        });
        self.path_index[port as usize] = self.entries.len() as u16;
        true
    }

    /// Takes `port` off the tree. Returns false when it was not on it. The other
    /// paths keep their acknowledgement state (an evicted member's lag no longer holds
    /// the aggregate back).
    pub fn remove_path(&mut self, port: u16) -> bool {
        let Some(i) = self.entry_index(port) else {
            return false;
        };
        self.entries.remove(i);
        self.path_index[port as usize] = 0;
        for (j, e) in self.entries.iter().enumerate().skip(i) {
            self.path_index[e.port as usize] = j as u16 + 1;
        }
        if self.ack_out_port == Some(port) {
            self.ack_out_port = None;
        }
        if self.tri_port == Some(port) {
            self.tri_port = None;
        }
        self.resync = true;
        true
    }

    /// Forgets all acknowledgement state: the source changed, and PSNs from the new
    /// source are not comparable with what the old one was acknowledged for.
    pub fn reset_feedback(&mut self) {
        for e in &mut self.entries {
            e.ack_psn = None;
            e.ack_msn = 0;
        }
        self.agg_ack_psn = None;
        self.agg_ack_msn = 0;
        self.tri_port = None;
        self.me_psn = None;
    }

    /// The minimum AckPSN over the paths away from the source, with its port and
    /// MSN; `None` while some path has acknowledged nothing (or there is no path).
    pub fn min_ack(&self) -> Option<(Psn, u16, u32)> {
        let mut best: Option<(Psn, u16, u32)> = None;
        for e in &self.entries {
            if Some(e.port) == self.ack_out_port {
                continue;
            }
            let psn = e.ack_psn?;
            if best.is_none_or(|(b, _, _)| psn < b) {
                best = Some((psn, e.port, e.ack_msn));
            }
        }
        best
    }

    /// Heap bytes this table occupies in rocast (the software figure).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.path_index.capacity() * std::mem::size_of::<u16>()
            + self.entries.capacity() * std::mem::size_of::<PathEntry>()
    }

    /// Bytes a hardware table packs the group into with every port on the tree (the
    /// worst case the paper's 0.69 MB per 1,000 groups on 64 ports refers to): a
    /// one-byte Path Index slot per port; per entry a next-hop kind (1), dstIP (4),
    /// dstQP (3), AckPSN (3), the CNP filter's counter (2), and VA (8) + RKey (4) for a
    /// WRITE group; per group McstID (4), AggAckPSN (3), AckOutPort (1), triPort (1),
    /// MePSN with its valid bit and syndrome (4).
    pub fn packed_bytes(ports: u16, write: bool) -> usize {
        let entry = 1 + PAPER_ENTRY_BYTES + 2 + if write { 12 } else { 0 };
        ports as usize * (1 + entry) + GROUP_STATE_BYTES
    }

    /// [`Self::packed_bytes`] with only the fields the paper's §III-B names: Path Index
    /// slot, dstIP, dstQP and AckPSN per path, and the group state.
    pub fn packed_bytes_paper_fields(ports: u16) -> usize {
        ports as usize * (1 + PAPER_ENTRY_BYTES) + GROUP_STATE_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u8) -> NextHop {
        NextHop::Host {
            ip: Ipv4Address::new(10, 0, 0, n),
            qpn: 0x100 + n as u32,
            region: None,
        }
    }

    #[test]
    fn path_index_points_at_one_entry_per_port() {
        let mut t = MulticastForwardingTable::new(Ipv4Address::new(239, 1, 1, 1), 8);
        assert!(t.set_path(3, NextHop::Switch));
        assert!(t.set_path(5, host(5)));
        assert!(t.set_path(3, NextHop::Switch));
        assert!(
            !t.set_path(8, NextHop::Switch),
            "no port 8 on an 8-port switch"
        );
        assert_eq!(t.entries().len(), 2);
        assert_eq!(t.entry(3).unwrap().next_hop, NextHop::Switch);
        assert_eq!(t.entry(5).unwrap().next_hop, host(5));
        assert!(t.entry(0).is_none());
        assert!(t.entry(99).is_none());
        // A host path is not downgraded to a switch path.
        t.set_path(5, NextHop::Switch);
        assert_eq!(t.entry(5).unwrap().next_hop, host(5));
    }

    #[test]
    fn removing_a_path_keeps_the_others_and_their_acknowledgements() {
        let mut t = MulticastForwardingTable::new(Ipv4Address::new(239, 1, 1, 1), 6);
        for p in [4, 1, 2] {
            t.set_path(p, host(p as u8));
        }
        t.ack_out_port = Some(4);
        t.entry_mut(2).unwrap().ack_psn = Some(Psn::new(9));
        assert_eq!(t.min_ack(), None, "port 1 has acknowledged nothing");
        assert!(t.remove_path(1));
        assert!(!t.remove_path(1), "already gone");
        assert!(!t.remove_path(3), "never on the tree");
        assert!(t.entry(1).is_none());
        assert_eq!(t.entry(2).unwrap().ack_psn, Some(Psn::new(9)));
        assert_eq!(t.entry(4).unwrap().next_hop, host(4));
        assert_eq!(t.entries().len(), 2);
        assert_eq!(
            t.min_ack().map(|(p, port, _)| (p, port)),
            Some((Psn::new(9), 2))
        );
        // Re-adding finds a fresh slot.
        t.set_path(1, host(1));
        assert_eq!(t.entry(1).unwrap().next_hop, host(1));
        assert_eq!(t.entries().len(), 3);
    }

    #[test]
    fn min_ack_skips_the_source_port_and_waits_for_every_path() {
        let mut t = MulticastForwardingTable::new(Ipv4Address::new(239, 1, 1, 1), 4);
        for p in 0..3 {
            t.set_path(p, host(p as u8));
        }
        t.ack_out_port = Some(0);
        t.entry_mut(1).unwrap().ack_psn = Some(Psn::new(7));
        assert_eq!(t.min_ack(), None, "port 2 has acknowledged nothing");
        t.entry_mut(2).unwrap().ack_psn = Some(Psn::new(4));
        t.entry_mut(0).unwrap().ack_psn = Some(Psn::new(1)); // the source's own path
        assert_eq!(
            t.min_ack().map(|(p, port, _)| (p.value(), port)),
            Some((4, 2))
        );
        t.reset_feedback();
        assert!(t.entries().iter().all(|e| e.ack_psn.is_none()));
    }

    #[test]
    fn software_footprint_is_bounded_by_ports() {
        // A group on all 64 ports of a switch: 88 B of table (the resync flag of an eviction costs 8 of them, alignment), 128 B of index, 48 B
        // per entry — 3.3 KB, and no more however many receivers are behind the ports.
        let mut t = MulticastForwardingTable::new(Ipv4Address::new(239, 0, 0, 1), 64);
        for p in 0..64 {
            t.set_path(p, host(p as u8));
            t.set_path(p, NextHop::Switch);
        }
        assert_eq!(std::mem::size_of::<PathEntry>(), 48);
        assert_eq!(t.memory_bytes(), 88 + 64 * 2 + 64 * 48);
    }

    #[test]
    fn packed_size_matches_the_papers_order_of_magnitude() {
        // 1,000 groups on a 64-port switch: the paper reports 0.69 MB.
        let per_group = MulticastForwardingTable::packed_bytes(64, false);
        assert_eq!(per_group, 64 * 14 + 13);
        let total = per_group * 1000;
        assert!(total > 690_000 / 2 && total < 690_000 * 2, "{total}");
    }
}
