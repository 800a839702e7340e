//! Host NICs and their QPs: receiving packets into QPs, the NIC's transmit scheduler
//! (feedback first, then data round-robin), QP timers, and opening, changing and
//! closing QPs.

use super::{AppEndpoint, Engine, EngineError, EvKind, Fabric, Totals};
use crate::packet::{host_ip, traffic_class, SimPacket};
use rocast_core::fabric::cepheus::is_mcst_id;
use rocast_core::rnic::{
    Dcqcn, DcqcnConfig, Event, Payload, QpConfig, RateController, RcQueuePair, Retransmission,
    SendOp, SendRequest, Unlimited,
};
use rocast_core::time::Instant;
use rocast_core::wire::Ipv4Address;
use std::collections::VecDeque;

/// The hosts' NICs and every QP.
pub(super) struct Hosts {
    pub(super) nics: Vec<Host>,
    /// By QPN (None: never opened, or retired).
    pub(super) qps: Vec<Option<Box<QpSlot>>>,
    /// The traffic class of the data packets our QPs send (from their DSCP): the
    /// class whose PFC pause stops a NIC's data.
    pub(super) data_class: u8,
    /// The next QPN for a connection or an app QP (flows' QPNs come first).
    pub(super) next_qpn: u32,
    /// Scratch: a QP's events.
    pub(super) event_buf: Vec<Event>,
}

/// Hands `repr` to a QP; a packet the QP refuses is counted. The caller services
/// the QP afterwards.
pub(super) fn qp_input(
    qp: &mut RcQueuePair,
    now: u64,
    repr: &rocast_core::wire::RoceRepr<'_>,
    totals: &mut Totals,
) {
    if qp.handle_repr(Instant::from_ps(now), repr).is_err() {
        totals.qp_rx_drops += 1;
    }
}

/// What a QP belongs to: a scenario flow, or a connection opened with
/// [`Engine::open_connection`].
#[derive(Clone, Copy, Debug)]
pub(super) enum QpOwner {
    Flow(u32),
    Conn(u32),
    /// A QP the layer above drives directly ([`Engine::open_qp`]).
    App,
}

/// A QP and its NIC's bookkeeping of it.
pub(super) struct QpSlot {
    pub(super) qp: RcQueuePair,
    pub(super) host: u32,
    pub(super) owner: QpOwner,
    /// In its host's `ctrl` queue (feedback to send).
    pub(super) in_ctrl: bool,
    /// In its host's `active` round-robin (data to send).
    pub(super) in_active: bool,
    /// When its pending `QpTimer` event fires (`u64::MAX`: none).
    pub(super) timer_at: u64,
}

/// One host's NIC.
pub(super) struct Host {
    /// Its port (an index into the fabric's ports).
    pub(super) port: u32,
    /// QPs with an ACK, NAK or CNP to send: served first.
    pub(super) ctrl: VecDeque<u32>,
    /// QPs with data to send, round-robin.
    pub(super) active: VecDeque<u32>,
    /// Copies a multicast source's NIC made of one packet (one per PEEL label, or
    /// repairs), waiting for the wire.
    pub(super) copies: VecDeque<u32>,
}

impl Hosts {
    /// The open QP numbered `qpn`, if any.
    #[inline]
    pub(super) fn slot(&self, qpn: u32) -> Option<&QpSlot> {
        self.qps.get(qpn as usize)?.as_deref()
    }

    /// The open QP numbered `qpn`, if any, to change.
    #[inline]
    pub(super) fn slot_mut(&mut self, qpn: u32) -> Option<&mut QpSlot> {
        self.qps.get_mut(qpn as usize)?.as_deref_mut()
    }

    /// A NIC per host, no QPs yet; connections and app QPs are numbered from `first_qpn`.
    pub(super) fn new(fabric: &Fabric, first_qpn: u32) -> Self {
        let nics = (0..fabric.topo.num_hosts())
            .map(|h| Host {
                copies: VecDeque::new(),
                port: fabric.node_port_base[h],
                ctrl: VecDeque::new(),
                active: VecDeque::new(),
            })
            .collect();
        Hosts {
            nics,
            qps: Vec::new(),
            data_class: traffic_class(
                QpConfig::new(Ipv4Address::UNSPECIFIED, 0, Ipv4Address::UNSPECIFIED, 0).dscp,
            ),
            next_qpn: first_qpn,
            event_buf: Vec::new(),
        }
    }
}

impl Engine {
    pub(super) fn host_receive(&mut self, host: u32, pkt: u32) {
        let mut sp = self.packets.records[pkt as usize];
        if let Some(label) = sp.label() {
            self.host_relay(host, pkt, label);
            // The member's NIC: strip the shim and bridge to the member's QP.
            let member = self
                .trees
                .by_mcst
                .get(&sp.dst_ip)
                .map(|&g| &self.trees.groups[g as usize])
                .and_then(|g| Some((g.source, g.receivers.get(&host)?.1)));
            let Some((source, qpn)) = member else {
                self.stats.tree.stray_copies += 1;
                self.release(pkt);
                return;
            };
            sp.clear_label();
            sp.src_ip = host_ip(source);
            sp.dst_ip = host_ip(host);
            sp.dest_qp = qpn;
            sp.reth_rkey = 1;
            self.packets.records[pkt as usize] = sp;
        } else if sp.flags_feedback() {
            if let Some(&g) = self.trees.by_source_qp.get(&sp.dest_qp) {
                if self.trees.groups[g as usize].switch_feedback {
                    self.stats.tree.switch_feedback_to_source += 1;
                } else {
                    self.release(pkt);
                    self.tree_feedback(g, sp);
                    return;
                }
            }
        }
        // The slot's payload stays in place until the slot is reused by `alloc`.
        self.release(pkt);
        let qpn = sp.dest_qp;
        let Some(slot) = self.hosts.slot_mut(qpn) else {
            self.stats.totals.stale_packets += 1;
            return;
        };
        if slot.host != host {
            self.stats.totals.stale_packets += 1;
            return;
        }
        let mut repr = sp.to_repr();
        if self.cfg.carry_payload && sp.is_data() {
            if let Some(d) = self.packets.payloads.get(pkt as usize) {
                if d.len() == repr.payload.len() {
                    repr.payload = d;
                }
            }
        }
        qp_input(&mut slot.qp, self.now, &repr, &mut self.stats.totals);
        self.service_qp(qpn);
    }

    /// After a QP took input: its bookkeeping, then its host's NIC may send.
    pub(super) fn service_qp(&mut self, qpn: u32) {
        let Some(host) = self.hosts.qps[qpn as usize].as_ref().map(|s| s.host) else {
            return;
        };
        self.after_qp_activity(qpn);
        let port = self.hosts.nics[host as usize].port;
        self.kick(port);
    }

    /// After a QP handled something: queue its feedback, (re)activate it, collect its
    /// events, and re-arm its timer.
    pub(super) fn after_qp_activity(&mut self, qpn: u32) {
        let Some(slot) = self.hosts.qps[qpn as usize].as_mut() else {
            return;
        };
        let host = slot.host as usize;
        if slot.qp.has_feedback() && !slot.in_ctrl {
            slot.in_ctrl = true;
            self.hosts.nics[host].ctrl.push_back(qpn);
        }
        if !slot.in_active && slot.qp.send_queue_len() > 0 {
            slot.in_active = true;
            self.hosts.nics[host].active.push_back(qpn);
        }
        let owner = slot.owner;
        let mut events = std::mem::take(&mut self.hosts.event_buf);
        events.extend(std::iter::from_fn(|| slot.qp.poll_event()));
        let finished = match owner {
            QpOwner::Flow(flow) => self.flow_events(flow, &events).map(|ok| (flow, ok)),
            QpOwner::Conn(conn) => {
                self.app_events_of(AppEndpoint::Conn(conn), &events);
                None
            }
            QpOwner::App => {
                self.app_events_of(AppEndpoint::Qp(qpn), &events);
                None
            }
        };
        events.clear();
        self.hosts.event_buf = events;
        match finished {
            Some((flow, ok)) => self.finish_flow(flow, ok),
            None => self.arm_timer(qpn),
        }
    }

    pub(super) fn arm_timer(&mut self, qpn: u32) {
        let Some(slot) = self.hosts.qps[qpn as usize].as_mut() else {
            return;
        };
        if let Some(t) = slot.qp.poll_timeout() {
            // A due deadline of a QP already in the NIC's round-robin is a pacing
            // deadline the scheduler will meet when the port frees; no timer needed.
            if t.as_ps() <= self.now && slot.in_active {
                return;
            }
            let t = t.as_ps().max(self.now);
            if t < slot.timer_at {
                slot.timer_at = t;
                self.schedule(t, EvKind::QpTimer, qpn, 0);
            }
        }
    }

    pub(super) fn qp_timer(&mut self, qpn: u32) {
        let now = self.now;
        let Some(slot) = self.hosts.slot_mut(qpn) else {
            return;
        };
        if slot.timer_at != now {
            return; // superseded by an earlier timer
        }
        slot.timer_at = u64::MAX;
        slot.qp.handle_timeout(Instant::from_ps(now));
        self.service_qp(qpn);
    }

    /// The NIC's transmit scheduler: ACK/NAK/CNP first (strict priority), then data QPs
    /// round-robin, each as its window and rate controller allow.
    pub(super) fn host_pull(&mut self, host: u32) {
        let port = self.hosts.nics[host as usize].port;
        let now = Instant::from_ps(self.now);
        while let Some(qpn) = self.hosts.nics[host as usize].ctrl.pop_front() {
            let Some(slot) = self.hosts.qps[qpn as usize].as_mut() else {
                continue;
            };
            slot.in_ctrl = false;
            if !slot.qp.has_feedback() {
                continue;
            }
            let repr = slot.qp.poll_transmit_repr(now).expect("feedback pending");
            let sp = SimPacket::from_repr(&repr);
            if slot.qp.has_feedback() {
                slot.in_ctrl = true;
                self.hosts.nics[host as usize].ctrl.push_front(qpn);
            }
            let pkt = self.alloc(sp);
            self.start_tx(port, pkt);
            return;
        }
        if self.fabric.ports[port as usize].paused & (1 << self.hosts.data_class) != 0 {
            return;
        }
        if let Some(pkt) = self.hosts.nics[host as usize].copies.pop_front() {
            self.start_tx(port, pkt);
            return;
        }
        while let Some(qpn) = self.hosts.nics[host as usize].active.pop_front() {
            let Some(slot) = self.hosts.qps[qpn as usize].as_mut() else {
                continue;
            };
            match slot.qp.poll_transmit_repr(now) {
                Some(repr) => {
                    let sp = SimPacket::from_repr(&repr);
                    if self.cfg.carry_payload {
                        self.packets.scratch.clear();
                        self.packets.scratch.extend_from_slice(repr.payload);
                    }
                    self.hosts.nics[host as usize].active.push_back(qpn);
                    if is_mcst_id(Ipv4Address::from_u32(sp.dst_ip)) {
                        if let Some(&g) = self.trees.by_source_qp.get(&qpn) {
                            self.tree_source_send(g, host, sp);
                            self.arm_timer(qpn);
                            if self.fabric.ports[port as usize].busy() {
                                return;
                            }
                            // Every receiver had it: nothing went out, so the NIC
                            // moves on to the next packet now.
                            continue;
                        }
                    }
                    let pkt = self.alloc_with_scratch_payload(sp, self.cfg.carry_payload);
                    self.start_tx(port, pkt);
                    self.arm_timer(qpn);
                    return;
                }
                None => {
                    slot.in_active = false;
                    self.arm_timer(qpn);
                }
            }
        }
    }

    pub(super) fn new_qp(
        &mut self,
        cfg: QpConfig,
        host: u32,
        owner: QpOwner,
    ) -> Result<u32, EngineError> {
        let line = self.fabric.ports[self.hosts.nics[host as usize].port as usize].rate_bps;
        let rate: Box<dyn RateController> = match &self.cfg.dcqcn {
            Some(d) => Box::new(Dcqcn::new(DcqcnConfig {
                line_rate_bps: line,
                ..d.clone()
            })),
            None => Box::new(Unlimited::default()),
        };
        let qpn = cfg.local_qpn;
        let qp = RcQueuePair::with_rate_controller(cfg, rate)?;
        let slot = Box::new(QpSlot {
            qp,
            host,
            owner,
            in_ctrl: false,
            in_active: false,
            timer_at: u64::MAX,
        });
        if self.hosts.qps.len() <= qpn as usize {
            self.hosts.qps.resize_with(qpn as usize + 1, || None);
        }
        self.hosts.qps[qpn as usize] = Some(slot);
        Ok(qpn)
    }

    /// Opens the QP pair of a connection from host `src` (QPN `sq`) to host `dst` (QPN
    /// `rq`), configured as the scenario says, with the receiver exposing
    /// `region_bytes` under rkey 1 at VA 0 (real bytes when `real_region`, else a
    /// null region). Returns the requester's UDP source port.
    pub(super) fn open_qp_pair(
        &mut self,
        (src, sq): (u32, u32),
        (dst, rq): (u32, u32),
        owner: QpOwner,
        region_bytes: u64,
        real_region: bool,
    ) -> Result<u16, EngineError> {
        let (sip, dip) = (host_ip(src), host_ip(dst));
        let (c, r) = (
            self.qp_config(sip, sq, dip, rq),
            self.qp_config(dip, rq, sip, sq),
        );
        let sport = c.udp_src_port;
        self.new_qp(c, src, owner)?;
        self.new_qp(r, dst, owner)?;
        self.register_region(rq, region_bytes, real_region)?;
        Ok(sport)
    }

    /// A QP's connection attributes as the scenario sets them.
    pub(super) fn qp_config(
        &self,
        local_ip: u32,
        local_qpn: u32,
        remote_ip: u32,
        remote_qpn: u32,
    ) -> QpConfig {
        let cfg = &self.cfg;
        let mut c = QpConfig::new(
            Ipv4Address::from_u32(local_ip),
            local_qpn,
            Ipv4Address::from_u32(remote_ip),
            remote_qpn,
        );
        c.mtu = cfg.mtu;
        c.max_outstanding = cfg.window;
        c.retransmission = cfg.retransmission;
        c.peer_sack = cfg.retransmission == Retransmission::SelectiveRepeat;
        c.retransmit_timeout = cfg.rto;
        c.ack_every = cfg.ack_every;
        c.cnp_interval = cfg.cnp_interval;
        c
    }

    /// Exposes `region_bytes` of QP `qpn`'s memory under rkey 1 at VA 0: real bytes
    /// when `real`, else a null region that accepts writes without storing them.
    pub(super) fn register_region(
        &mut self,
        qpn: u32,
        region_bytes: u64,
        real: bool,
    ) -> Result<(), EngineError> {
        let qp = &mut self.hosts.qps[qpn as usize]
            .as_mut()
            .ok_or(EngineError::NoSuchQp)?
            .qp;
        if real {
            let len = usize::try_from(region_bytes).map_err(|_| EngineError::RegionTooLarge)?;
            qp.register_mr(0, len, 1)
        } else {
            qp.register_null_mr(0, region_bytes, 1)
        }
        .map_err(EngineError::from)
    }

    /// Posts a WRITE with immediate from QP `sq` into rkey 1 of QP `rq`, which first
    /// pre-posts the receive the immediate consumes.
    pub(super) fn post_write_imm(
        &mut self,
        (sq, rq): (u32, u32),
        wr_id: u64,
        remote_va: u64,
        imm: u32,
        data: Payload,
    ) -> Result<(), EngineError> {
        self.post_recv(rq, wr_id)?;
        let op = SendOp::WriteImm {
            remote_va,
            rkey: 1,
            imm,
        };
        self.post_on(sq, wr_id, op, data)
    }

    /// Posts `op` of `data` on QP `sq` (an app QP's WRITE or SEND with immediate).
    pub(super) fn post_on(
        &mut self,
        sq: u32,
        wr_id: u64,
        op: SendOp,
        data: Payload,
    ) -> Result<(), EngineError> {
        let sqp = &mut self.hosts.slot_mut(sq).ok_or(EngineError::QpClosed)?.qp;
        sqp.post_send(SendRequest { wr_id, op, data })
            .map_err(EngineError::from)
    }

    /// Opens a QP at `host` connected to (`remote_ip`, `remote_qpn`) — for a Cepheus
    /// group member, the virtual remote (McstID, 1). It exposes `region_bytes` of
    /// memory under rkey 1 at VA 0 (real bytes when `carry_payload`). Returns its QPN.
    pub fn open_qp(
        &mut self,
        host: u32,
        remote_ip: u32,
        remote_qpn: u32,
        region_bytes: u64,
    ) -> Result<u32, EngineError> {
        if host >= self.fabric.topo.num_hosts() as u32 {
            return Err(EngineError::NoHost(host));
        }
        let qpn = self.hosts.next_qpn;
        if qpn > 0xff_ffff {
            return Err(EngineError::OutOfQpns);
        }
        self.hosts.next_qpn += 1;
        let mut c = self.qp_config(host_ip(host), qpn, remote_ip, remote_qpn);
        c.udp_src_port = 49152 + (qpn & 0x3fff) as u16;
        self.new_qp(c, host, QpOwner::App)?;
        self.register_region(qpn, region_bytes, self.cfg.carry_payload)?;
        Ok(qpn)
    }

    /// An app QP (None once closed).
    pub fn qp(&self, qpn: u32) -> Option<&RcQueuePair> {
        self.hosts.qps.get(qpn as usize)?.as_ref().map(|s| &s.qp)
    }

    /// Changes an app QP (e.g. its PSNs, for source switching), then lets it act.
    pub fn modify_qp<R>(&mut self, qpn: u32, f: impl FnOnce(&mut RcQueuePair) -> R) -> Option<R> {
        let r = f(&mut self.hosts.slot_mut(qpn)?.qp);
        self.service_qp(qpn);
        Some(r)
    }

    /// Changes two app QPs together (multicast source switching), then lets both act.
    pub fn modify_qp_pair<R>(
        &mut self,
        a: u32,
        b: u32,
        f: impl FnOnce(&mut RcQueuePair, &mut RcQueuePair) -> R,
    ) -> Option<R> {
        if a == b {
            return None;
        }
        let mut sa = self.hosts.qps.get_mut(a as usize)?.take()?;
        let Some(mut sb) = self.hosts.qps.get_mut(b as usize).and_then(Option::take) else {
            self.hosts.qps[a as usize] = Some(sa);
            return None;
        };
        let r = f(&mut sa.qp, &mut sb.qp);
        self.hosts.qps[a as usize] = Some(sa);
        self.hosts.qps[b as usize] = Some(sb);
        self.service_qp(a);
        self.service_qp(b);
        Some(r)
    }

    /// Destroys an app QP: late packets for it are counted as stale, and its
    /// unfinished sends no longer hold the run open.
    pub fn close_qp(&mut self, qpn: u32) {
        if let Some(qp) = self.retire_qp(qpn) {
            let pending = qp.send_queue_len() as u64;
            self.app.outstanding = self.app.outstanding.saturating_sub(pending);
        }
    }

    /// Removes a QP, adding its counters to the run's totals; returns it.
    pub(super) fn retire_qp(&mut self, qpn: u32) -> Option<RcQueuePair> {
        let slot = self
            .hosts
            .qps
            .get_mut(qpn as usize)
            .and_then(Option::take)?;
        let s = slot.qp.stats();
        self.stats.totals.retransmitted += s.tx_retransmitted;
        self.stats.totals.timeouts += s.timeouts;
        self.stats.totals.cnps += s.tx_cnps;
        Some(slot.qp)
    }

    /// Posts a receive on an app QP (a WRITE with immediate consumes one).
    pub fn post_recv(&mut self, qpn: u32, wr_id: u64) -> Result<(), EngineError> {
        self.post_recv_len(qpn, wr_id, 0)
    }

    /// Posts a receive of up to `max_len` bytes (a SEND's buffer) on app QP `qpn`.
    pub fn post_recv_len(
        &mut self,
        qpn: u32,
        wr_id: u64,
        max_len: usize,
    ) -> Result<(), EngineError> {
        let slot = self.hosts.slot_mut(qpn).ok_or(EngineError::NoSuchQp)?;
        slot.qp.post_recv(wr_id, max_len).map_err(EngineError::from)
    }

    /// The memory of an app QP's region (empty unless `carry_payload`).
    pub fn qp_region(&self, qpn: u32) -> Option<&[u8]> {
        self.qp(qpn)?.mr(1).map(|m| m.data.as_slice())
    }
}
