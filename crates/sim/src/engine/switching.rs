//! The switches' forwarding: unicast by the precomputed routes with ECMP, group
//! packets through each switch's Cepheus engine (replication along the MFT paths and
//! feedback aggregation, Cepheus §III-D; the CNP filter's timers), and labelled
//! tree-multicast copies through PEEL's switch rules (PEEL §3).

use super::{Engine, EngineConfig, EngineError, EvKind, Hop, PeelFabric, Step, SHARED_CELL};
use crate::packet::{host_ip, host_of_ip, SimPacket};
use rocast_core::fabric::cepheus::{CepheusAction, CepheusSwitch, GroupAddressSpace};
use rocast_core::fabric::ecmp_hash;
use rocast_core::fabric::peel::PeelAction;
use rocast_core::plan::{Routes, Topology};
use rocast_core::switch::mrp_agent::{UnicastRoute, UnicastTable};
use rocast_core::switch::pipeline::{self, PacketClass, PacketHeadline, UnicastDecision};
use rocast_core::time::Instant;
use rocast_core::wire::peel::PEEL_UDP_PORT;
use rocast_core::wire::Ipv4Address;
use rocast_core::wire::{IP_PROTO_UDP, ROCEV2_UDP_PORT};

/// The switches' multicast engines and the buffers their actions pass through.
pub(super) struct SwitchNodes {
    /// Each switch's Cepheus engine (index: switch − hosts).
    pub(super) cepheus: Vec<CepheusSwitch>,
    /// Per switch: the wake-up its multicast engine has scheduled (ps).
    pub(super) timers: Vec<Option<u64>>,
    /// PEEL's switch engines (`PeelSwitch`): the prefix tier's static rules, built
    /// when the first PEEL group arrives (empty before), and the racks' memberships.
    pub(super) peel: PeelFabric,
    /// Scratch: a Cepheus engine's (or a group aggregator's) actions.
    pub(super) actions: Vec<CepheusAction>,
    /// Scratch: the copies of one packet, by egress port.
    pub(super) copies: Vec<(u16, SimPacket)>,
}

/// The unicast forwarding table of one switch, as the MRP agent reads it.
pub(super) struct SwitchRoutes<'a> {
    pub(super) topo: &'a Topology,
    pub(super) routes: &'a Routes,
    pub(super) node: u32,
}

impl UnicastTable for SwitchRoutes<'_> {
    fn route(&self, ip: Ipv4Address) -> UnicastRoute<'_> {
        let ip = ip.to_u32();
        let host = host_of_ip(ip);
        if host as usize >= self.topo.num_hosts() || host_ip(host) != ip {
            return UnicastRoute::Unknown;
        }
        let (sw, port) = self.routes.attachment(host);
        if sw == self.node {
            return UnicastRoute::Attached(port);
        }
        match self.routes.next_hops(self.node, host) {
            [] => UnicastRoute::Unknown,
            ports => UnicastRoute::Via(ports),
        }
    }
}

/// Switch `node`'s Cepheus engine as the run starts it (and a restart leaves it).
pub(super) fn empty_cepheus_switch(
    topo: &Topology,
    cfg: &EngineConfig,
    node: u32,
) -> CepheusSwitch {
    let ports = topo.ports(node).len() as u16;
    CepheusSwitch::new(ports, cfg.mft_max_groups, cfg.cnp_filter.build())
}

impl SwitchNodes {
    /// Every switch's Cepheus engine empty, no PEEL rules yet.
    pub(super) fn new(topo: &Topology, cfg: &EngineConfig) -> Self {
        let n_hosts = topo.num_hosts();
        let cepheus: Vec<CepheusSwitch> = (n_hosts..topo.num_nodes())
            .map(|s| empty_cepheus_switch(topo, cfg, s as u32))
            .collect();
        SwitchNodes {
            timers: vec![None; cepheus.len()],
            cepheus,
            peel: PeelFabric::default(),
            actions: Vec::new(),
            copies: Vec::new(),
        }
    }
}

impl Engine {
    pub(super) fn switch_receive(&mut self, node: u32, in_local: u16, hop: Hop) {
        let pkt = hop.slot;
        // The record's headline for the core's pipeline: every record is RoCE over UDP,
        // a labelled copy carries a shim (PEEL's, or Orca's header in its place).
        let headline = PacketHeadline {
            dst: Ipv4Address::from_u32(hop.dst_ip),
            protocol: IP_PROTO_UDP,
            udp_dst_port: Some(if hop.labelled() {
                PEEL_UDP_PORT
            } else {
                ROCEV2_UDP_PORT
            }),
        };
        match pipeline::classify(&headline, &GroupAddressSpace::MULTICAST, true) {
            PacketClass::Peel => return self.labelled_receive(node, in_local, pkt),
            PacketClass::GroupRoce => return self.multicast_receive(node, in_local, pkt),
            PacketClass::Unicast => {
                // The forwarding plug: the fabric's routes, ECMP by the flow's hash.
                let table = SwitchRoutes {
                    topo: &self.fabric.topo,
                    routes: &self.fabric.routes,
                    node,
                };
                let hash = ecmp_hash(hop.src_ip, hop.dst_ip, hop.sport, 4791, node);
                if let UnicastDecision::Port(out) =
                    pipeline::unicast_port(&table, headline.dst, hash, in_local)
                {
                    return self.switch_enqueue(node, in_local, out, hop);
                }
            }
            // The simulator carries no MRP, IGMP or other multicast as records.
            _ => {}
        }
        self.stats.totals.unroutable += 1;
        self.stats.unroutable_bytes += hop.wire as u64;
        self.release(pkt);
    }

    /// A packet addressed to a McstID: the switch's Cepheus engine decides. Copies
    /// are new slab records (with the payload when carried); the original's slot is
    /// reused for the first.
    pub(super) fn multicast_receive(&mut self, node: u32, in_local: u16, pkt: u32) {
        let sw = node as usize - self.fabric.topo.num_hosts();
        let sp = self.packets.records[pkt as usize];
        let repr = sp.to_repr();
        // Every McstID-range address is the engine's: an unknown group is counted
        // there and yields no action.
        let now = Instant::from_ps(self.now);
        // Only a CNP can give the engine's CNP filter something to release later.
        let cnp = repr.bth.opcode == rocast_core::wire::Opcode::CNP;
        let engine = &mut self.switches.cepheus[sw];
        engine.handle_packet(now, in_local, &repr);
        let mut copies = std::mem::take(&mut self.switches.copies);
        copies.clear();
        while let Some(a) = engine.poll_transmit(now) {
            copies.push(match a {
                CepheusAction::Replicate { port, bridge } => {
                    let mut c = sp;
                    if let Some(b) = bridge {
                        b.apply(&mut c);
                    }
                    (port, c)
                }
                CepheusAction::Feedback { port, packet } => {
                    (port, SimPacket::from_repr(&packet.repr(&repr)))
                }
            });
        }
        self.emit_copies(node, in_local, pkt, &copies, false);
        self.switches.copies = copies;
        if cnp {
            self.arm_switch_timer(node, false);
        }
    }

    /// Schedules switch `node`'s multicast engine's next wake-up, unless one at or
    /// before it is already scheduled.
    pub(super) fn arm_switch_timer(&mut self, node: u32, after_wake: bool) {
        let sw = node as usize - self.fabric.topo.num_hosts();
        let Some(at) = self.switches.cepheus[sw].poll_at() else {
            return;
        };
        // After a wake-up, strictly later: a filter asking again for the time just
        // served cannot spin the clock.
        let at = at.as_ps().max(self.now + after_wake as u64);
        if self.switches.timers[sw].is_none_or(|t| at < t) {
            self.switches.timers[sw] = Some(at);
            self.schedule(at, EvKind::SwitchTimer, node, 0);
        }
    }

    /// Switch `node`'s engine wakes: the CNPs its filter releases now go toward their
    /// sources (the engine builds them on the headers of the CNPs it held).
    pub(super) fn switch_timer_fired(&mut self, node: u32) {
        let sw = node as usize - self.fabric.topo.num_hosts();
        if self.switches.timers[sw] != Some(self.now) {
            return; // superseded by an earlier wake-up, which re-armed
        }
        self.switches.timers[sw] = None;
        let now = Instant::from_ps(self.now);
        self.switches.cepheus[sw].handle_timeout(now);
        let mut out = std::mem::take(&mut self.switches.actions);
        out.clear();
        out.extend(std::iter::from_fn(|| {
            self.switches.cepheus[sw].poll_transmit(now)
        }));
        for a in &out {
            if let CepheusAction::Feedback { port, packet } = *a {
                if let Some(repr) = self.switches.cepheus[sw].released_repr(&packet) {
                    let slot = self.alloc(SimPacket::from_repr(&repr));
                    let hop = Hop::of(&self.packets.records[slot as usize], slot);
                    self.switch_enqueue(node, SHARED_CELL, port, hop);
                }
            }
        }
        self.switches.actions = out;
        self.arm_switch_timer(node, true);
    }

    /// Sends `copies` of switch `node`'s packet `pkt` (arrived on `in_local`): new
    /// slab records (with the payload when carried), the original's slot reused for
    /// the first; no copies frees it.
    /// With `shared_cell`, copies after the first are charged to their egress queues
    /// only (one stored cell; the ingress and PFC see the packet once).
    pub(super) fn emit_copies(
        &mut self,
        node: u32,
        in_local: u16,
        pkt: u32,
        copies: &[(u16, SimPacket)],
        shared_cell: bool,
    ) {
        let mut original = Some(pkt);
        for (n, &(port, copy)) in copies.iter().enumerate() {
            let ingress = if shared_cell && n > 0 {
                SHARED_CELL
            } else {
                in_local
            };
            let slot = match original.take() {
                Some(p) => {
                    self.packets.records[p as usize] = copy;
                    p
                }
                None => self.alloc_copy_of(pkt, copy),
            };
            let hop = Hop::of(&self.packets.records[slot as usize], slot);
            self.switch_enqueue(node, ingress, port, hop);
        }
        if let Some(p) = original {
            self.release(p);
        }
    }

    /// A labelled tree-multicast copy at a switch: `tree_multicast`'s rules 1–4.
    pub(super) fn labelled_receive(&mut self, node: u32, in_local: u16, pkt: u32) {
        let sp = self.packets.records[pkt as usize];
        let label = sp.label().unwrap_or(0);
        let mut copies = std::mem::take(&mut self.switches.copies);
        copies.clear();
        let mut discards = 0;
        match self.trees.by_mcst.get(&sp.dst_ip) {
            None => self.stats.tree.stray_copies += 1,
            Some(&g) => {
                let f = &self.trees.groups[g as usize].forwarding;
                let base = self.fabric.node_port_base[node as usize];
                let group = Ipv4Address::from_u32(sp.dst_ip);
                match self.switches.peel.step(f, node, in_local, group, label) {
                    Step::Hops(h) => {
                        for &(port, out) in h {
                            let mut c = sp;
                            c.set_label(out, f.header(out));
                            copies.push((port, c));
                        }
                    }
                    Step::Peel => {
                        for &a in self.switches.peel.actions() {
                            match a {
                                // A static rule's port whose link is down: only an
                                // over-covered rack can sit behind it.
                                PeelAction::Forward(port)
                                    if !self.fabric.ports[(base + port as u32) as usize].up =>
                                {
                                    discards += 1
                                }
                                PeelAction::Forward(port) | PeelAction::Deliver(port) => {
                                    copies.push((port, sp))
                                }
                            }
                        }
                    }
                    Step::Discard => discards += 1,
                }
            }
        }
        self.stats.tree.over_cover_discards += discards;
        self.emit_copies(node, in_local, pkt, &copies, true);
        self.switches.copies = copies;
    }

    /// Switch `node` restarts: its Cepheus engine starts empty (no groups, no
    /// feedback state, no held CNPs), as a restarted `rocast switch` daemon does; its
    /// counters go on (the fabric's totals keep what it did before). Frames already in
    /// its egress queues still leave: a restart in the simulator loses tables, not
    /// queued bytes (the group's RC retransmissions cover either). Err if `node` is not
    /// a switch.
    pub fn restart_switch(&mut self, node: u32) -> Result<(), EngineError> {
        let sw = (node as usize)
            .checked_sub(self.fabric.topo.num_hosts())
            .filter(|&s| s < self.switches.cepheus.len())
            .ok_or(EngineError::NotSwitch(node))?;
        let stats = self.switches.cepheus[sw].stats.clone();
        self.switches.cepheus[sw] = empty_cepheus_switch(&self.fabric.topo, &self.cfg, node);
        self.switches.cepheus[sw].stats = stats;
        self.switches.timers[sw] = None;
        Ok(())
    }

    /// Per switch (node id, engine): the Cepheus multicast engines.
    pub fn cepheus_switches(&self) -> impl Iterator<Item = (u32, &CepheusSwitch)> {
        let h = self.fabric.topo.num_hosts() as u32;
        self.switches
            .cepheus
            .iter()
            .enumerate()
            .map(move |(i, c)| (h + i as u32, c))
    }
}
