//! Links and ports: serialisation and propagation, random loss and link failures,
//! the switches' egress queues (MMU admission, RED/ECN marking at dequeue) and PFC
//! pause and resume per IEEE 802.1Qbb.

use super::{Crossing, Engine, EngineConfig, EngineError, EvKind};
use crate::packet::{SimPacket, CONTROL_CLASS};
use crate::uniform;
use rocast_core::fabric::mmu::PRIORITIES;
use rocast_core::plan::{NodeRole, Routes, Topology};
use rocast_core::switch::{EgressConfig, EgressQueues, Ingress};
use rocast_core::time::{Duration, Instant};
use std::collections::VecDeque;
use std::sync::Arc;

/// The topology, its routes, and the state of every port and switch queue.
pub(super) struct Fabric {
    /// Shared by a partitioned run's engines until a link change (copy on write).
    pub(super) topo: Arc<Topology>,
    pub(super) routes: Arc<Routes>,
    pub(super) ports: Vec<Port>,
    /// Each node's first port in `ports` (one entry past the last node: the total).
    pub(super) node_port_base: Vec<u32>,
    /// Each switch's egress queues (index: switch − hosts): the core's admission, PFC
    /// and RED decisions; the engine owns the links.
    pub(super) egress: Vec<EgressQueues<Hop>>,
    /// Scheduled loss changes (port, new loss), by index ([`Engine::schedule_loss_toward_host`]).
    pub(super) loss_changes: Vec<(u32, f64)>,
}

/// The ingress of a replicated copy whose buffer cell the first copy holds.
pub(super) const SHARED_CELL: u16 = u16::MAX;

/// Counters of one egress port (one direction of a link).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PortCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Delivered to the far end.
    pub rx_bytes: u64,
    /// Lost on the link (random loss or a failed link).
    pub link_drops: u64,
    pub link_drop_bytes: u64,
    /// Dropped by the MMU on enqueue to this port, or flushed when the link failed.
    pub queue_drops: u64,
    pub queue_drop_bytes: u64,
    pub ecn_marks: u64,
    pub pauses_sent: u64,
    pub pauses_received: u64,
    pub paused_ps: u64,
}

/// A packet as a switch sees it on the way: its slab slot and what routing and
/// queueing read (addresses, UDP source port, class, wire bytes, ECN capability,
/// label). It travels beside the slot through egress queues, the transmitter and the
/// link, so a unicast hop never reads the packet's record: on a large fabric the
/// record has long left the cache, and that read was a fifth of `permutation-1024`'s
/// time (`docs/perf/`). Built from the record where the record is at hand (the NIC,
/// multicast copies); the fields it copies do not change between hops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(super) struct Hop {
    pub(super) slot: u32,
    pub(super) wire: u32,
    pub(super) src_ip: u32,
    pub(super) dst_ip: u32,
    pub(super) sport: u16,
    pub(super) class: u8,
    pub(super) bits: u8,
}

impl Hop {
    const ECT: u8 = 1;
    const LABELLED: u8 = 2;
    const IDLE: Hop = Hop {
        slot: u32::MAX,
        wire: 0,
        src_ip: 0,
        dst_ip: 0,
        sport: 0,
        class: 0,
        bits: 0,
    };
    pub(super) fn of(sp: &SimPacket, slot: u32) -> Hop {
        Hop {
            slot,
            wire: sp.wire_len(),
            src_ip: sp.src_ip,
            dst_ip: sp.dst_ip,
            sport: sp.sport,
            class: sp.class,
            bits: if sp.ecn != 0 { Self::ECT } else { 0 }
                | if sp.label().is_some() {
                    Self::LABELLED
                } else {
                    0
                },
        }
    }
    pub(super) fn ect(self) -> bool {
        self.bits & Self::ECT != 0
    }
    pub(super) fn labelled(self) -> bool {
        self.bits & Self::LABELLED != 0
    }
}

impl PortCounters {
    /// Adds `o`'s counts to these (one port's counts from two partitions).
    pub(super) fn absorb(&mut self, o: &PortCounters) {
        let PortCounters {
            tx_packets,
            tx_bytes,
            rx_bytes,
            link_drops,
            link_drop_bytes,
            queue_drops,
            queue_drop_bytes,
            ecn_marks,
            pauses_sent,
            pauses_received,
            paused_ps,
        } = o;
        self.tx_packets += tx_packets;
        self.tx_bytes += tx_bytes;
        self.rx_bytes += rx_bytes;
        self.link_drops += link_drops;
        self.link_drop_bytes += link_drop_bytes;
        self.queue_drops += queue_drops;
        self.queue_drop_bytes += queue_drop_bytes;
        self.ecn_marks += ecn_marks;
        self.pauses_sent += pauses_sent;
        self.pauses_received += pauses_received;
        self.paused_ps += paused_ps;
    }
}

/// Laid out (`repr(C)`) so that what every packet's events read is in the first two
/// cache lines, which `Engine::prefetch_ahead` loads: the link FIFO, the ends, the
/// state and the delay in the first (64 bytes); the serialisation, loss, the packet
/// on the wire and the per-packet counters in the second (64); the rest after.
#[repr(C)]
pub(super) struct Port {
    /// On the link: (arrival time, packet).
    pub(super) in_flight: VecDeque<(u64, Hop)>,
    pub(super) node: u32,
    /// The opposite direction's port (owned by the peer).
    pub(super) reverse: u32,
    pub(super) local: u16,
    pub(super) up: bool,
    /// Classes paused by the peer's PFC (bit per class).
    pub(super) paused: u8,
    pub(super) capture: bool,
    pub(super) delay_ps: u64,
    /// The last serialisation computed, `last_ser_bytes` wire bytes in
    /// `last_ser_ps`: most packets on a port are the same size, and the exact time is
    /// a u128 division.
    pub(super) last_ser_bytes: u32,
    pub(super) link: u32,
    pub(super) last_ser_ps: u64,
    pub(super) loss: f64,
    /// The packet being transmitted ([`Hop::IDLE`] when none: see [`Port::busy`]).
    pub(super) current: Hop,
    pub(super) c: PortCounters,
    pub(super) rate_bps: u64,
    pub(super) paused_since: [u64; PRIORITIES],
}

impl Port {
    /// Whether the transmitter is sending a packet.
    pub(super) fn busy(&self) -> bool {
        self.current.slot != Hop::IDLE.slot
    }
}

pub(super) fn mac(node: u32) -> [u8; 6] {
    let b = node.to_be_bytes();
    [0x02, 0x00, b[0], b[1], b[2], b[3]]
}

impl Fabric {
    /// The ports of every link (one per direction) and each switch's egress queues, as
    /// `cfg` sizes them.
    pub(super) fn new(topo: Topology, cfg: &EngineConfig) -> Result<Self, EngineError> {
        let routes = Routes::compute(&topo)?;
        Ok(Self::with_routes(Arc::new(topo), Arc::new(routes), cfg))
    }

    /// [`Fabric::new`] on a topology and routes already computed (a partitioned run's
    /// engines share one copy).
    pub(super) fn with_routes(
        topo: Arc<Topology>,
        routes: Arc<Routes>,
        cfg: &EngineConfig,
    ) -> Self {
        let n = topo.num_nodes();
        let mut node_port_base = Vec::with_capacity(n + 1);
        let mut total = 0u32;
        for v in 0..n {
            node_port_base.push(total);
            total += topo.ports(v as u32).len() as u32;
        }
        node_port_base.push(total);
        let mut ports = Vec::with_capacity(total as usize);
        for v in 0..n as u32 {
            for (local, &(link, peer)) in topo.ports(v).iter().enumerate() {
                let l = &topo.links[link as usize];
                let peer_local = topo.port_of(peer, link).expect("symmetric") as u32;
                ports.push(Port {
                    node: v,
                    local: local as u16,
                    link,
                    reverse: node_port_base[peer as usize] + peer_local,
                    rate_bps: l.rate_bps,
                    delay_ps: l.delay.as_ps(),
                    loss: l.loss,
                    up: !l.failed,
                    paused: 0,
                    paused_since: [0; PRIORITIES],
                    current: Hop::IDLE,
                    last_ser_bytes: 0,
                    last_ser_ps: 0,
                    in_flight: VecDeque::new(),
                    capture: cfg.capture_links.contains(&link),
                    c: PortCounters::default(),
                });
                if let (Some((tier, p)), NodeRole::Switch { tier: t }) =
                    (cfg.switch_loss, topo.roles[v as usize])
                {
                    if t == tier {
                        ports.last_mut().expect("just pushed").loss = p;
                    }
                }
            }
        }
        let n_hosts = topo.num_hosts();
        let mut egress = Vec::with_capacity(topo.num_switches());
        for s in n_hosts..n {
            let base = node_port_base[s] as usize;
            let np = topo.ports(s as u32).len();
            let headroom = (0..np)
                .map(|i| {
                    if cfg.headroom_bytes > 0 {
                        cfg.headroom_bytes
                    } else {
                        let p = &ports[base + i];
                        // 3 × BDP of the link, as the HPCC simulator sizes it.
                        (p.rate_bps as u128 * p.delay_ps as u128 / 8 / 1_000_000_000_000 * 3)
                            .max(3 * 1100) as u64
                    }
                })
                .collect();
            egress.push(EgressQueues::new(EgressConfig {
                mmu: rocast_core::fabric::MmuConfig {
                    buffer_bytes: cfg.buffer_bytes,
                    reserve_bytes: cfg.reserve_bytes,
                    resume_offset_bytes: cfg.resume_offset_bytes,
                    headroom_bytes: headroom,
                    alpha_shift: vec![cfg.alpha_shift; np],
                    lossless: cfg.lossless,
                },
                red: cfg.ecn,
                control_class: Some(CONTROL_CLASS),
            }));
        }
        Fabric {
            topo,
            routes,
            ports,
            node_port_base,
            egress,
            loss_changes: Vec::new(),
        }
    }

    /// The switch port toward `host` (the far end of its link), if `p` is a loss rate.
    fn port_toward_host(&self, host: u32, p: f64) -> Result<u32, EngineError> {
        if host as usize >= self.topo.num_hosts() || !(0.0..1.0).contains(&p) {
            return Err(EngineError::LossTowardHost { p, host });
        }
        Ok(self.ports[self.node_port_base[host as usize] as usize].reverse)
    }
}

impl Engine {
    pub fn routes(&self) -> &Routes {
        &self.fabric.routes
    }

    pub fn topology(&self) -> &Topology {
        &self.fabric.topo
    }

    /// Drops this fraction of the frames the fabric sends to `host` (only that
    /// direction of its link: the switch port toward it), as a lossy switch port
    /// would. Draws from the run's one seeded RNG.
    pub fn set_loss_toward_host(&mut self, host: u32, p: f64) -> Result<(), EngineError> {
        let toward = self.fabric.port_toward_host(host, p)?;
        self.fabric.ports[toward as usize].loss = p;
        Ok(())
    }

    /// [`Engine::set_loss_toward_host`] from time `at` on (a port that starts to
    /// drop frames mid-run: a failing transceiver or cable).
    pub fn schedule_loss_toward_host(
        &mut self,
        at: Instant,
        host: u32,
        p: f64,
    ) -> Result<(), EngineError> {
        let toward = self.fabric.port_toward_host(host, p)?;
        self.fabric.loss_changes.push((toward, p));
        let i = self.fabric.loss_changes.len() as u32 - 1;
        self.schedule(at.as_ps(), EvKind::LossChange, i, 0);
        Ok(())
    }

    /// Schedules a link failure (`up = false`) or recovery at `at`.
    pub fn schedule_link_change(&mut self, at: Instant, link: u32, up: bool) {
        self.schedule(at.as_ps(), EvKind::LinkChange, link, up as u32);
    }

    pub(super) fn start_tx(&mut self, port: u32, pkt: u32) {
        let hop = Hop::of(&self.packets.records[pkt as usize], pkt);
        self.start_tx_hop(port, hop);
    }

    /// [`Self::start_tx`] of a packet taken from an egress queue.
    pub(super) fn start_tx_hop(&mut self, port: u32, hop: Hop) {
        let (pkt, wire) = (hop.slot, hop.wire as u64);
        let p = &mut self.fabric.ports[port as usize];
        p.current = hop;
        if p.last_ser_bytes as u64 != wire {
            p.last_ser_bytes = wire as u32;
            p.last_ser_ps = Duration::for_bytes(wire, p.rate_bps).as_ps();
        }
        let ser = p.last_ser_ps;
        let (capture, node, reverse) = (p.capture, p.node, p.reverse);
        if capture && (self.stats.capture.len() as u64) < self.cfg.capture_max_packets {
            let (a, b) = (node, self.fabric.ports[reverse as usize].node);
            self.packets.records[pkt as usize].write_frame(
                mac(a),
                mac(b),
                &mut self.stats.frame_buf,
            );
            self.stats
                .capture
                .push((self.now, self.stats.frame_buf.clone()));
        }
        self.schedule(self.now + ser, EvKind::TxDone, port, 0);
    }

    pub(super) fn tx_done(&mut self, port: u32) {
        let p = &mut self.fabric.ports[port as usize];
        let hop = std::mem::replace(&mut p.current, Hop::IDLE);
        let wire = hop.wire as u64;
        p.c.tx_packets += 1;
        p.c.tx_bytes += wire;
        if p.node < self.fabric.topo.num_hosts() as u32 {
            self.stats.totals.host_tx_bytes += wire;
        } else {
            self.stats.totals.switch_tx_bytes += wire;
        }
        let at = self.now + p.delay_ps;
        if let Some(part) = self.partition.as_deref_mut() {
            if let Some(to) = part.remote_far(port) {
                // A cut link: the far partition takes the packet at the barrier.
                let record = self.packets.records[hop.slot as usize];
                part.send(
                    to,
                    Crossing::Packet {
                        port,
                        at,
                        record,
                        hop,
                    },
                );
                self.release(hop.slot);
                self.kick(port);
                return;
            }
        }
        let p = &mut self.fabric.ports[port as usize];
        p.in_flight.push_back((at, hop));
        if p.in_flight.len() == 1 {
            self.schedule(at, EvKind::Arrive, port, 0);
        }
        self.kick(port);
    }

    pub(super) fn arrive(&mut self, port: u32) {
        let p = &mut self.fabric.ports[port as usize];
        let (_, hop) = p
            .in_flight
            .pop_front()
            .expect("arrival with a packet in flight");
        let (pkt, wire) = (hop.slot, hop.wire as u64);
        if let Some(&(t, _)) = p.in_flight.front() {
            self.schedule(t, EvKind::Arrive, port, 0);
        }
        let p = &mut self.fabric.ports[port as usize];
        let lost = !p.up || (p.loss > 0.0 && uniform(&mut self.rng) < p.loss);
        if lost {
            p.c.link_drops += 1;
            p.c.link_drop_bytes += wire;
            self.release(pkt);
            return;
        }
        p.c.rx_bytes += wire;
        let to = p.reverse;
        let node = self.fabric.ports[to as usize].node;
        let local = self.fabric.ports[to as usize].local;
        if (node as usize) < self.fabric.topo.num_hosts() {
            self.stats.totals.host_rx_bytes += wire;
            self.host_receive(node, pkt);
        } else {
            self.stats.totals.switch_rx_bytes += wire;
            self.switch_receive(node, local, hop);
        }
    }

    /// Starts the next transmission on `port` if it is idle.
    pub(super) fn kick(&mut self, port: u32) {
        let p = &self.fabric.ports[port as usize];
        if p.busy() || !p.up {
            return;
        }
        if (p.node as usize) < self.fabric.topo.num_hosts() {
            self.host_pull(p.node);
            return;
        }
        // The core's egress rule: control first and never paused; then data classes
        // high to low, skipping paused.
        let sw = p.node as usize - self.fabric.topo.num_hosts();
        let local = p.local;
        let Some(class) = self.fabric.egress[sw].next_class(local, p.paused) else {
            return;
        };
        let hop = self.dequeue(port, class as usize).expect("non-empty");
        // RED at dequeue, against the bytes left behind this packet (ECN-capable only;
        // the queue entry says which, so an unmarked packet's record is not touched).
        let rng = &mut self.rng;
        if hop.ect() && self.fabric.egress[sw].red_marks(local, class, || uniform(rng)) {
            self.packets.records[hop.slot as usize].set_ce();
            self.fabric.ports[port as usize].c.ecn_marks += 1;
            self.stats.totals.ecn_marks += 1;
        }
        self.start_tx_hop(port, hop);
    }

    /// Takes the head packet of a switch port's class queue and releases its buffer
    /// (which may resume a paused upstream).
    pub(super) fn dequeue(&mut self, port: u32, class: usize) -> Option<Hop> {
        let p = &self.fabric.ports[port as usize];
        let (node, local) = (p.node, p.local);
        let sw = node as usize - self.fabric.topo.num_hosts();
        let d = self.fabric.egress[sw].dequeue(local, class as u8)?;
        if let Some(in_port) = d.resume {
            self.send_pfc(node, in_port as usize, class, false);
        }
        Some(d.item)
    }

    /// Counts a packet dropped at the egress of `port` and frees it.
    pub(super) fn drop_at_queue(&mut self, port: u32, pkt: u32) {
        let wire = self.packets.records[pkt as usize].wire_len() as u64;
        let p = &mut self.fabric.ports[port as usize];
        p.c.queue_drops += 1;
        p.c.queue_drop_bytes += wire;
        self.release(pkt);
    }

    pub(super) fn send_pfc(&mut self, node: u32, in_local: usize, class: usize, pause: bool) {
        let port = self.fabric.node_port_base[node as usize] + in_local as u32;
        let upstream = self.fabric.ports[port as usize].reverse;
        let delay = self.fabric.ports[port as usize].delay_ps;
        if pause {
            self.fabric.ports[port as usize].c.pauses_sent += 1;
            self.stats.totals.pauses += 1;
        }
        // A PFC frame is 64 bytes, sent ahead of data.
        let ser = Duration::for_bytes(64 + 20, self.fabric.ports[port as usize].rate_bps).as_ps();
        let (at, arg) = (self.now + ser + delay, class as u32 | (pause as u32) << 8);
        if let Some(part) = self.partition.as_deref_mut() {
            if let Some(to) = part.remote_far(port) {
                let pfc = Crossing::Pfc {
                    port: upstream,
                    at,
                    arg,
                };
                part.send(to, pfc);
                return;
            }
        }
        self.schedule(at, EvKind::Pfc, upstream, arg);
    }

    pub(super) fn pfc(&mut self, port: u32, arg: u32) {
        let class = (arg & 0xff) as usize;
        let pause = arg >> 8 != 0;
        let now = self.now;
        let p = &mut self.fabric.ports[port as usize];
        let bit = 1u8 << class;
        if pause {
            if p.paused & bit == 0 {
                p.paused |= bit;
                p.paused_since[class] = now;
            }
            p.c.pauses_received += 1;
        } else if p.paused & bit != 0 {
            p.paused &= !bit;
            p.c.paused_ps += now - p.paused_since[class];
        }
        if self.cfg.pfc_log {
            // HPCC pfc.txt: time node type(0 host/1 switch) port pause(1)/resume(0), plus class
            let node = p.node;
            let kind = if (node as usize) < self.fabric.topo.num_hosts() {
                0
            } else {
                1
            };
            let line = format!(
                "{now_ns} {node} {kind} {} {} {class}",
                p.local,
                pause as u8,
                now_ns = now / 1000
            );
            self.stats.pfc_log.push(line);
        }
        if !pause {
            self.kick(port);
        }
    }

    /// Queues `hop` (arrived on `in_local`) for egress port `out` of switch `node`,
    /// through the MMU's admission and PFC.
    pub(super) fn switch_enqueue(&mut self, node: u32, in_local: u16, out: u16, hop: Hop) {
        let (pkt, class, wire) = (hop.slot, hop.class, hop.wire as u64);
        let out_port = self.fabric.node_port_base[node as usize] + out as u32;
        if !self.fabric.ports[out_port as usize].up {
            self.drop_at_queue(out_port, pkt);
            return;
        }
        let ingress = if in_local == SHARED_CELL {
            Ingress::SharedCell
        } else {
            Ingress::Port(in_local)
        };
        let sw = node as usize - self.fabric.topo.num_hosts();
        match self.fabric.egress[sw].enqueue(ingress, out, class, wire, hop) {
            Err((q, _)) => {
                self.drop_at_queue(out_port, q.slot);
                return;
            }
            Ok(Some(paused)) => self.send_pfc(node, paused as usize, class as usize, true),
            Ok(None) => {}
        }
        self.kick(out_port);
    }

    pub(super) fn link_change(&mut self, link: u32, up: bool) {
        Arc::make_mut(&mut self.fabric.topo).links[link as usize].failed = !up;
        let l = &self.fabric.topo.links[link as usize];
        let a = l.a;
        let pa = self.fabric.node_port_base[a as usize]
            + self.fabric.topo.port_of(a, link).unwrap() as u32;
        let pb = self.fabric.ports[pa as usize].reverse;
        for p in [pa, pb] {
            self.fabric.ports[p as usize].up = up;
        }
        // Re-route around the change (control-plane convergence is taken as instant).
        self.fabric.routes =
            Arc::new(Routes::compute(&self.fabric.topo).expect("hosts keep one link"));
        if !up {
            // Flush what was queued for the dead ports.
            // (Host ports queue nothing: a NIC pulls from its QPs when it transmits.)
            for p in [pa, pb] {
                if (self.fabric.ports[p as usize].node as usize) < self.fabric.topo.num_hosts() {
                    continue;
                }
                for class in 0..PRIORITIES {
                    while let Some(hop) = self.dequeue(p, class) {
                        self.drop_at_queue(p, hop.slot);
                    }
                }
            }
        } else {
            self.kick(pa);
            self.kick(pb);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Hop, Port, PortCounters, SimPacket};

    #[test]
    fn a_ports_per_packet_fields_lie_in_its_first_two_cache_lines() {
        // What prefetch_ahead loads: the first two lines of a port.
        let end = |offset: usize, size: usize| offset + size;
        assert_eq!(std::mem::offset_of!(Port, in_flight), 0);
        assert!(end(std::mem::offset_of!(Port, delay_ps), 8) <= 64);
        assert!(end(std::mem::offset_of!(Port, last_ser_ps), 8) <= 128);
        assert!(
            end(
                std::mem::offset_of!(Port, current),
                std::mem::size_of::<Hop>()
            ) <= 128
        );
        let rx = std::mem::offset_of!(Port, c) + std::mem::offset_of!(PortCounters, rx_bytes);
        assert!(end(rx, 8) <= 128, "rx_bytes at {rx}");
    }

    #[test]
    fn a_hop_copies_what_routing_and_queueing_read_from_the_record() {
        assert_eq!(std::mem::size_of::<Hop>(), 20);
        let mut sp = SimPacket::default();
        sp.src_ip = 0x0a00_0001;
        sp.dst_ip = 0x0a00_0203;
        sp.sport = 4711;
        sp.class = 3;
        sp.ip_len = 1000;
        let h = Hop::of(&sp, 9);
        assert_eq!(
            (h.slot, h.wire, h.src_ip, h.dst_ip),
            (9, sp.wire_len(), sp.src_ip, sp.dst_ip)
        );
        assert_eq!(
            (h.sport, h.class, h.ect(), h.labelled()),
            (4711, 3, false, false)
        );
        sp.ecn = 2;
        sp.set_label(5, 0);
        let h = Hop::of(&sp, 9);
        assert!(h.ect() && h.labelled());
    }
}
