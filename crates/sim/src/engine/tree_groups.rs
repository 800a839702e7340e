//! Tree-multicast groups at the hosts (PEEL §3, Orca, per-group trees): the source
//! NIC's labelled copies and repairs, its feedback aggregation, and Orca's host-side
//! relays.

use super::{qp_input, Engine, EngineError, GroupForwarding, PeelFabric};
use crate::packet::{host_ip, host_of_ip, SimPacket};
use crate::uniform;
use rocast_core::fabric::cepheus::{
    is_mcst_id, CepheusAction, CepheusSwitch, CnpFilterPolicy, NextHop,
};
use rocast_core::plan::prefix::PrefixLayout;
use rocast_core::time::Instant;
use rocast_core::wire::Ipv4Address;

/// The installed tree-multicast groups, by McstID and by source QP.
#[derive(Default)]
pub(super) struct TreeGroups {
    pub(super) groups: Vec<TreeGroup>,
    pub(super) by_mcst: std::collections::BTreeMap<u32, u32>,
    pub(super) by_source_qp: std::collections::BTreeMap<u32, u32>,
}

/// A tree-multicast group ([`Engine::install_tree_group`]): PEEL, or per-group trees.
#[derive(Clone, Debug)]
pub struct TreeGroupSpec {
    /// The group's address: copies in the fabric are addressed to it.
    pub mcst_id: u32,
    pub source: u32,
    /// The source's QP, connected to (McstID, 1) as a Cepheus member's is.
    pub source_qpn: u32,
    /// (host, QPN) of each receiver; each receiver's QP is connected to the source's
    /// address and QPN, so its ACKs, NAKs and CNPs are ordinary unicast.
    pub receivers: Vec<(u32, u32)>,
    pub forwarding: GroupForwarding,
    /// When the programmable cores hold the group's rule (PEEL §3.3): from then on
    /// first transmissions use `forwarding.core_send`.
    pub core_from: Option<Instant>,
    /// Compose with Cepheus' in-network feedback aggregation: the tree's switches get
    /// MFT paths for the group, receivers' QPs are connected to (McstID, 1) so their
    /// ACKs, NAKs and CNPs climb the tree and are aggregated on the way (Cepheus
    /// §III-D), and retransmissions go as Cepheus packets the switches filter. Data
    /// still travels by `forwarding`. `None`: aggregation at the source's NIC.
    pub switch_feedback: Option<rocast_core::plan::multicast_tree::MulticastTree>,
}

pub(super) struct TreeGroup {
    pub(super) mcst: u32,
    pub(super) source: u32,
    pub(super) source_qpn: u32,
    /// Receiver host → (aggregator port, QPN).
    pub(super) receivers: std::collections::BTreeMap<u32, (u16, u32)>,
    pub(super) forwarding: GroupForwarding,
    pub(super) core_from_ps: Option<u64>,
    /// Feedback is aggregated by the switches; the highest PSN sent so far tells
    /// first transmissions (labelled) from retransmissions (Cepheus packets).
    pub(super) switch_feedback: bool,
    pub(super) highest_psn: Option<u32>,
    /// The source NIC's feedback aggregation and retransmission filter: Cepheus'
    /// MFT logic with one path per receiver (port 0: the source's QP), so the
    /// sender tracks the minimum over receivers and repairs only the laggards
    /// (PEEL §4 leaves reliability to the hosts). CNPs all pass: the source's DCQCN
    /// reacts at most once per `decrease_interval` (PEEL's 50 µs guard timer).
    pub(super) aggregator: CepheusSwitch,
}

impl Engine {
    /// Registers a tree-multicast group; its source QP's packets to the McstID go
    /// through the group's aggregator and out as labelled copies.
    pub fn install_tree_group(&mut self, spec: TreeGroupSpec) -> Result<(), EngineError> {
        let mcst = Ipv4Address::from_u32(spec.mcst_id);
        if !is_mcst_id(mcst) {
            return Err(EngineError::NotMcstId(mcst));
        }
        if self.trees.by_mcst.contains_key(&spec.mcst_id) {
            return Err(EngineError::GroupExists(mcst));
        }
        let on = |h: u32, q: u32| self.hosts.slot(q).is_some_and(|s| s.host == h);
        if !on(spec.source, spec.source_qpn) {
            return Err(EngineError::SourceQpElsewhere {
                qpn: spec.source_qpn,
                host: spec.source,
            });
        }
        let ports =
            u16::try_from(spec.receivers.len() + 1).map_err(|_| EngineError::TooManyReceivers)?;
        let mut aggregator = CepheusSwitch::new(ports, 1, CnpFilterPolicy::ForwardAll.build());
        let host_hop = |h: u32, qpn: u32, region| NextHop::Host {
            ip: Ipv4Address::from_u32(host_ip(h)),
            qpn,
            region,
        };
        aggregator.set_path(mcst, 0, host_hop(spec.source, spec.source_qpn, None), true)?;
        let mut receivers = std::collections::BTreeMap::new();
        for (i, &(h, q)) in spec.receivers.iter().enumerate() {
            if !on(h, q) || h == spec.source {
                return Err(EngineError::ReceiverQpElsewhere { qpn: q, host: h });
            }
            let port = i as u16 + 1;
            if receivers.insert(h, (port, q)).is_some() {
                return Err(EngineError::ReceiverTwice(h));
            }
            aggregator.set_path(mcst, port, host_hop(h, q, Some((0, 1))), false)?;
        }
        let peel = spec.forwarding.labels.iter().any(|l| l.peel.is_some());
        if peel && self.switches.peel.rule_count() == 0 {
            let layout = PrefixLayout::from_topology(&self.fabric.topo)?;
            self.switches.peel = PeelFabric::new(&self.fabric.topo, &layout)?;
        }
        self.switches
            .peel
            .install(&self.fabric.topo, mcst, &spec.forwarding);
        if let Some(tree) = &spec.switch_feedback {
            let hosts = self.fabric.topo.num_hosts() as u32;
            let hop_of = |n: u32| -> NextHop {
                if n == spec.source {
                    host_hop(n, spec.source_qpn, None)
                } else if let Some(&(_, q)) = receivers.get(&n) {
                    host_hop(n, q, Some((0, 1)))
                } else {
                    NextHop::Switch
                }
            };
            for a in &tree.arcs {
                for (at, toward, source_side) in
                    [(a.parent, a.child, false), (a.child, a.parent, true)]
                {
                    if at < hosts {
                        continue;
                    }
                    let port = self
                        .fabric
                        .topo
                        .port_of(at, a.link)
                        .ok_or(EngineError::TreeLinkNotAtNode)?;
                    self.switches.cepheus[(at - hosts) as usize]
                        .set_path(mcst, port, hop_of(toward), source_side)
                        .map_err(|source| EngineError::SwitchPath { switch: at, source })?;
                }
            }
        }
        let g = self.trees.groups.len() as u32;
        self.trees.by_mcst.insert(spec.mcst_id, g);
        self.trees.by_source_qp.insert(spec.source_qpn, g);
        self.trees.groups.push(TreeGroup {
            mcst: spec.mcst_id,
            source: spec.source,
            source_qpn: spec.source_qpn,
            receivers,
            forwarding: spec.forwarding,
            core_from_ps: spec.core_from.map(Instant::as_ps),
            switch_feedback: spec.switch_feedback.is_some(),
            highest_psn: None,
            aggregator,
        });
        Ok(())
    }

    /// Forgets a group (its copies still in flight are then counted as strays).
    pub fn remove_tree_group(&mut self, mcst_id: u32) {
        if let Some(g) = self.trees.by_mcst.remove(&mcst_id) {
            if self.trees.groups[g as usize].switch_feedback {
                let id = Ipv4Address::from_u32(mcst_id);
                for c in &mut self.switches.cepheus {
                    c.remove_group(id);
                }
            }
            let t = &mut self.trees.groups[g as usize];
            self.switches
                .peel
                .remove(Ipv4Address::from_u32(mcst_id), &t.forwarding);
            self.trees.by_source_qp.remove(&t.source_qpn);
            t.receivers.clear();
            t.forwarding = GroupForwarding::default();
            t.aggregator = CepheusSwitch::new(1, 0, CnpFilterPolicy::ForwardAll.build());
        }
    }

    /// The source's NIC sends packet `sp` of group `g`: to every receiver as labelled
    /// copies, or, for a retransmission some receivers already hold, as unicast
    /// repairs to the others. The first copy starts now; the rest queue.
    pub(super) fn tree_source_send(&mut self, g: u32, host: u32, sp: SimPacket) {
        let now = self.now;
        let grp = &mut self.trees.groups[g as usize];
        if grp.switch_feedback {
            let newer = grp
                .highest_psn
                .is_none_or(|h| sp.psn != h && (sp.psn.wrapping_sub(h) & 0xff_ffff) < 0x80_0000);
            let port = self.hosts.nics[host as usize].port;
            if !newer {
                // A retransmission: the switches' MFTs send it only down the paths
                // that have not acknowledged it.
                self.stats.tree.cepheus_retransmissions += 1;
                let slot = self.alloc_with_scratch_payload(sp, self.cfg.carry_payload);
                self.start_tx(port, slot);
                return;
            }
            grp.highest_psn = Some(sp.psn);
        }
        let repr = sp.to_repr();
        let mut out = std::mem::take(&mut self.switches.actions);
        out.clear();
        let grp = &mut self.trees.groups[g as usize];
        let at = Instant::from_ps(now);
        grp.aggregator.handle_packet(at, 0, &repr);
        out.extend(std::iter::from_fn(|| grp.aggregator.poll_transmit(at)));
        let mut copies = std::mem::take(&mut self.switches.copies);
        copies.clear();
        let replicas = if grp.switch_feedback {
            grp.receivers.len()
        } else {
            out.iter()
                .filter(|a| matches!(a, CepheusAction::Replicate { .. }))
                .count()
        };
        let mut feedback = Vec::new();
        self.stats.tree.source_packets += 1;
        if replicas == grp.receivers.len() {
            let core =
                grp.core_from_ps.is_some_and(|t| now >= t) && !grp.forwarding.core_send.is_empty();
            let send = if core {
                &grp.forwarding.core_send
            } else {
                &grp.forwarding.static_send
            };
            for &l in send {
                let mut c = sp;
                c.set_label(l, grp.forwarding.header(l));
                copies.push((0, c));
            }
            self.stats.tree.full_transmissions += 1;
            self.stats.tree.label_copies += send.len() as u64;
            if core {
                self.stats.tree.core_copies += send.len() as u64;
            }
        }
        for a in out.iter().copied() {
            match a {
                CepheusAction::Replicate {
                    bridge: Some(b), ..
                } if replicas < grp.receivers.len() => {
                    let mut c = sp;
                    b.apply(&mut c);
                    c.src_ip = host_ip(grp.source);
                    copies.push((0, c));
                    self.stats.tree.repair_copies += 1;
                }
                CepheusAction::Feedback { packet, .. } => feedback.push(packet),
                _ => {}
            }
        }
        self.switches.actions = out;
        let port = self.hosts.nics[host as usize].port;
        for (i, &(_, c)) in copies.iter().enumerate() {
            if self.cfg.carry_payload && i + 1 < copies.len() {
                // The scratch is swapped into each slot; keep a copy for the next.
                let keep = self.packets.scratch.clone();
                let slot = self.alloc_with_scratch_payload(c, true);
                self.packets.scratch = keep;
                self.hosts.nics[host as usize].copies.push_back(slot);
            } else {
                let slot = self.alloc_with_scratch_payload(c, self.cfg.carry_payload);
                self.hosts.nics[host as usize].copies.push_back(slot);
            }
        }
        self.switches.copies = copies;
        if let Some(pkt) = self.hosts.nics[host as usize].copies.pop_front() {
            self.start_tx(port, pkt);
        }
        for f in feedback {
            self.tree_deliver_feedback(g, &repr, f);
        }
    }

    /// A receiver's ACK, NAK or CNP reached the source of group `g`: into the
    /// aggregator on the receiver's port.
    pub(super) fn tree_feedback(&mut self, g: u32, mut sp: SimPacket) {
        self.stats.tree.feedback_in += 1;
        // The receivers address the source itself; the aggregator keys on the group.
        sp.dst_ip = self.trees.groups[g as usize].mcst;
        let grp = &mut self.trees.groups[g as usize];
        let Some(&(port, _)) = grp.receivers.get(&host_of_ip(sp.src_ip)) else {
            self.stats.totals.stale_packets += 1;
            return;
        };
        let repr = sp.to_repr();
        let mut out = std::mem::take(&mut self.switches.actions);
        out.clear();
        let at = Instant::from_ps(self.now);
        grp.aggregator.handle_packet(at, port, &repr);
        out.extend(std::iter::from_fn(|| grp.aggregator.poll_transmit(at)));
        let fb: Vec<_> = out
            .iter()
            .filter_map(|a| match *a {
                CepheusAction::Feedback { packet, .. } => Some(packet),
                CepheusAction::Replicate { .. } => None,
            })
            .collect();
        self.switches.actions = out;
        for f in fb {
            self.tree_deliver_feedback(g, &repr, f);
        }
    }

    /// Aggregated feedback into the source's QP (inside its NIC: no wire).
    pub(super) fn tree_deliver_feedback(
        &mut self,
        g: u32,
        template: &rocast_core::wire::RoceRepr<'_>,
        f: rocast_core::fabric::cepheus::FeedbackPacket,
    ) {
        let qpn = self.trees.groups[g as usize].source_qpn;
        let repr = f.repr(template);
        let Some(slot) = self.hosts.slot_mut(qpn) else {
            return;
        };
        self.stats.tree.feedback_to_source += 1;
        qp_input(&mut slot.qp, self.now, &repr, &mut self.stats.totals);
        self.service_qp(qpn);
    }

    /// A host-side agent (Orca): when the copy's label names this host, its NIC sends
    /// the listed copies back into the fabric, queued behind its own transmissions.
    pub(super) fn host_relay(&mut self, host: u32, pkt: u32, label: u16) {
        let sp = self.packets.records[pkt as usize];
        let Some(&g) = self.trees.by_mcst.get(&sp.dst_ip) else {
            return;
        };
        let f = &self.trees.groups[g as usize].forwarding;
        let Some(h) = f.hops_at(host, label) else {
            return;
        };
        let mut copies = std::mem::take(&mut self.switches.copies);
        copies.clear();
        for &(port, out) in h {
            let mut c = sp;
            c.set_label(out, f.header(out));
            copies.push((port, c));
        }
        // The agent's NIC queue marks ECN as a switch port would (the fabric's RED
        // thresholds, against the copies already waiting): a relay that falls behind
        // slows the source through its receivers' CNPs instead of growing without
        // bound. rocast's assumption; Orca's paper does not say how its agent signals
        // congestion.
        let red = self.fabric.egress.first().and_then(|e| e.red().copied());
        let mut queued = self.hosts.nics[host as usize].copies.len() as u64 * sp.wire_len() as u64;
        for &(_, mut c) in &copies {
            if let Some(red) = red {
                // ECT(0) or ECT(1): a copy already marked CE stays as it is.
                let ect = matches!(
                    c.ecn(),
                    rocast_core::wire::Ecn::Ect0 | rocast_core::wire::Ecn::Ect1
                );
                let rng = &mut self.rng;
                if ect && red.should_mark(queued, || uniform(rng)) {
                    c.set_ce();
                    self.stats.totals.ecn_marks += 1;
                }
            }
            queued += c.wire_len() as u64;
            let slot = self.alloc_copy_of(pkt, c);
            self.hosts.nics[host as usize].copies.push_back(slot);
            self.stats.tree.agent_copies += 1;
        }
        self.switches.copies = copies;
        let port = self.hosts.nics[host as usize].port;
        self.kick(port);
    }
}
