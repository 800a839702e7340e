//! What the run reports: the totals, the PFC and queue-length logs (HPCC's `pfc.txt`
//! and `qlen.txt`), the packet capture, tree-multicast counters, and the
//! end-of-run conservation checks.

use super::{Engine, EvKind, PortCounters};
use rocast_core::fabric::mmu::PRIORITIES;

/// Counters and logs across the run.
#[derive(Default)]
pub struct Statistics {
    pub totals: Totals,
    pub pfc_log: Vec<String>,
    pub qlen_log: Vec<String>,
    /// Captured frames: (time in ps, frame bytes).
    pub capture: Vec<(u64, Vec<u8>)>,
    pub tree: TreeMulticastStats,
    /// The frame a captured packet is written into before it is copied.
    pub(super) frame_buf: Vec<u8>,
    /// Bytes of packets no route could take (part of `Totals::drop_bytes` once
    /// finalized).
    pub(super) unroutable_bytes: u64,
}

/// Totals across the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub events: u64,
    pub host_tx_bytes: u64,
    pub host_rx_bytes: u64,
    pub switch_rx_bytes: u64,
    pub switch_tx_bytes: u64,
    pub link_drops: u64,
    pub queue_drops: u64,
    pub drop_bytes: u64,
    pub unroutable: u64,
    pub ecn_marks: u64,
    pub pauses: u64,
    pub stale_packets: u64,
    pub qp_rx_drops: u64,
    pub retransmitted: u64,
    pub timeouts: u64,
    pub cnps: u64,
    pub flows_started: u64,
    pub flows_finished: u64,
    pub flows_failed: u64,
    pub peak_packets: u64,
}

/// What tree multicast did, across groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeMulticastStats {
    /// Data packets the sources' QPs sent to a group, and how many of them went to
    /// every receiver (first transmissions, or retransmissions all still need).
    pub source_packets: u64,
    pub full_transmissions: u64,
    /// Copies put on the sources' links for full transmissions (one per label).
    pub label_copies: u64,
    /// Of those, sent with the programmable cores' rule in place.
    pub core_copies: u64,
    /// Retransmitted copies sent only to the receivers that had not acknowledged
    /// them, as unicast.
    pub repair_copies: u64,
    /// Copies a ToR discarded (rack over-covered) or a static rule could not send
    /// (its port's link down).
    pub over_cover_discards: u64,
    /// Labelled copies at a switch or host that had no use for them (none expected).
    pub stray_copies: u64,
    /// Copies host-side agents sent back into the fabric (Orca's rack fan-out).
    pub agent_copies: u64,
    /// Feedback packets from receivers into the sources' aggregators, and the
    /// aggregated feedback that reached the sources' QPs.
    pub feedback_in: u64,
    pub feedback_to_source: u64,
    /// With switch aggregation: feedback packets that reached the sources' hosts
    /// (already aggregated by the fabric), and retransmissions sent as Cepheus
    /// packets.
    pub switch_feedback_to_source: u64,
    pub cepheus_retransmissions: u64,
}

impl Totals {
    /// Adds `o`'s counts to these (a partitioned run's partitions summed; the peak of
    /// packet records becomes the sum of the partitions' slabs' peaks).
    pub fn absorb(&mut self, o: &Totals) {
        let Totals {
            events,
            host_tx_bytes,
            host_rx_bytes,
            switch_rx_bytes,
            switch_tx_bytes,
            link_drops,
            queue_drops,
            drop_bytes,
            unroutable,
            ecn_marks,
            pauses,
            stale_packets,
            qp_rx_drops,
            retransmitted,
            timeouts,
            cnps,
            flows_started,
            flows_finished,
            flows_failed,
            peak_packets,
        } = o;
        self.events += events;
        self.host_tx_bytes += host_tx_bytes;
        self.host_rx_bytes += host_rx_bytes;
        self.switch_rx_bytes += switch_rx_bytes;
        self.switch_tx_bytes += switch_tx_bytes;
        self.link_drops += link_drops;
        self.queue_drops += queue_drops;
        self.drop_bytes += drop_bytes;
        self.unroutable += unroutable;
        self.ecn_marks += ecn_marks;
        self.pauses += pauses;
        self.stale_packets += stale_packets;
        self.qp_rx_drops += qp_rx_drops;
        self.retransmitted += retransmitted;
        self.timeouts += timeouts;
        self.cnps += cnps;
        self.flows_started += flows_started;
        self.flows_finished += flows_finished;
        self.flows_failed += flows_failed;
        self.peak_packets += peak_packets;
    }
}

impl Engine {
    /// Bytes all hosts have put on the wire so far (headers and framing included).
    pub fn host_tx_bytes(&self) -> u64 {
        self.stats.totals.host_tx_bytes
    }

    /// Packets retransmitted so far, by finished flows and by live QPs.
    pub fn retransmitted(&self) -> u64 {
        self.stats.totals.retransmitted
            + self
                .hosts
                .qps
                .iter()
                .flatten()
                .map(|s| s.qp.stats().tx_retransmitted)
                .sum::<u64>()
    }

    /// The run's totals with the counters of the QPs still open added (a QP adds its
    /// retransmissions, timeouts and CNPs to `totals` only when it retires, so an
    /// unfinished flow's would otherwise be missing).
    pub fn totals_now(&self) -> Totals {
        let mut t = self.stats.totals.clone();
        for slot in self.hosts.qps.iter().flatten() {
            let s = slot.qp.stats();
            t.retransmitted += s.tx_retransmitted;
            t.timeouts += s.timeouts;
            t.cnps += s.tx_cnps;
        }
        t
    }

    pub(super) fn sample(&mut self) {
        let Some(iv) = self.cfg.qlen_interval else {
            return;
        };
        let n_hosts = self.fabric.topo.num_hosts();
        for p in &self.fabric.ports {
            if (p.node as usize) < n_hosts {
                continue;
            }
            let q = &self.fabric.egress[p.node as usize - n_hosts];
            for class in 0..PRIORITIES as u8 {
                let b = q.queue_bytes(p.local, class);
                if b > 0 {
                    self.stats.qlen_log.push(format!(
                        "{} {} {} {} {}",
                        self.now / 1000,
                        p.node,
                        p.local,
                        class,
                        b
                    ));
                }
            }
        }
        self.schedule(self.now + iv.as_ps(), EvKind::Sample, 0, 0);
    }

    pub fn port_counters(&self) -> impl Iterator<Item = (u32, u16, u32, &PortCounters)> {
        self.fabric
            .ports
            .iter()
            .map(|p| (p.node, p.local, p.link, &p.c))
    }

    /// Sums the per-port drop counters into `totals`, and checks byte conservation:
    /// what hosts sent equals what hosts received plus what was dropped plus what is
    /// still queued or in flight. Returns the imbalance (0 when conserved).
    pub fn finalize(&mut self) -> i128 {
        let mut t = self.stats.totals.clone();
        t.link_drops = 0;
        t.queue_drops = 0;
        let mut dropped = self.stats.unroutable_bytes as i128;
        let mut held = 0i128;
        let n_hosts = self.fabric.topo.num_hosts();
        for p in &self.fabric.ports {
            if p.node as usize >= n_hosts {
                held += self.fabric.egress[p.node as usize - n_hosts].port_bytes(p.local) as i128;
            }
            t.link_drops += p.c.link_drops;
            t.queue_drops += p.c.queue_drops;
            dropped += (p.c.link_drop_bytes + p.c.queue_drop_bytes) as i128;
            for &(_, hop) in &p.in_flight {
                held += hop.wire as i128;
            }
            if p.busy() {
                held += p.current.wire as i128;
            }
        }
        t.drop_bytes = dropped as u64;
        self.stats.totals = t;
        self.stats.totals.host_tx_bytes as i128
            - self.stats.totals.host_rx_bytes as i128
            - dropped
            - held
    }

    /// Checks per-link conservation: every port's transmitted bytes equal what the far
    /// end received plus link drops plus what is in flight on it.
    pub fn link_imbalance(&self) -> u64 {
        let mut bad = 0;
        for p in &self.fabric.ports {
            let flying: u64 = p.in_flight.iter().map(|&(_, hop)| hop.wire as u64).sum();
            if p.c.tx_bytes != p.c.rx_bytes + p.c.link_drop_bytes + flying {
                bad += 1;
            }
        }
        bad
    }

    /// Bytes queued at `node`'s port `local`, all classes.
    pub fn port_queue_bytes(&self, node: u32, local: u16) -> u64 {
        match (node as usize).checked_sub(self.fabric.topo.num_hosts()) {
            Some(sw) => self.fabric.egress[sw].port_bytes(local),
            None => 0,
        }
    }
}
