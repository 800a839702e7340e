//! The control plane: MRP datagrams between hosts and switches (Cepheus §III-B, handled
//! by the same `switch::mrp_agent` code as `rocast switch`), and the out-of-band
//! control channel between hosts (confirmations, switch reports).

use super::{AppEvent, Engine, EvKind, SlotPool, SwitchRoutes};
use rocast_core::control::SwitchReport;
use rocast_core::switch::mrp_agent;
use rocast_core::switch::pipeline::MrpMessage;
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::mrp::MrpRepr;

/// MRP and control-channel messages in transit, and what the switches refused.
#[derive(Default)]
pub struct ControlChannel {
    pub(super) messages: SlotPool<ControlMsg>,
    /// MRP datagrams at a switch that parse as nothing MRP carries.
    pub mrp_malformed: u64,
    /// Prunes and releases a switch refused (not from the group's source direction,
    /// or for a group it does not hold: a repeated release finds nothing).
    pub mrp_ignored: u64,
}

/// An out-of-band or MRP message in transit.
pub(super) enum ControlMsg {
    /// An MRP packet arriving at `node` on local port `port`.
    Mrp {
        node: u32,
        port: u16,
        bytes: Vec<u8>,
    },
    /// A control-channel message, or a switch report, to deliver as an app event.
    App(AppEvent),
}

impl Engine {
    /// How long a control-channel message takes (`EngineConfig::control_latency`).
    pub fn control_latency(&self) -> Duration {
        self.cfg.control_latency
    }

    pub(super) fn push_control(&mut self, at: u64, msg: ControlMsg) {
        let i = self.control.messages.insert(msg);
        self.app.outstanding += 1;
        self.schedule(at, EvKind::Control, i, 0);
    }

    /// Sends an MRP packet (its UDP payload) out of `node`'s port `port` now: it
    /// arrives at the far end after serialisation and propagation. MRP is
    /// control-plane traffic sent before the group's data, so it is not queued
    /// behind data here.
    pub(super) fn send_mrp(&mut self, at: u64, node: u32, port: u16, mrp: &MrpRepr) {
        let mut bytes = vec![0; mrp.buffer_len()];
        mrp.emit(&mut bytes);
        self.send_mrp_bytes(at, node, port, bytes);
    }

    /// An MRP datagram (registration, prune or release) out of `node`'s `port`.
    pub(super) fn send_mrp_bytes(&mut self, at: u64, node: u32, port: u16, bytes: Vec<u8>) {
        let p =
            &self.fabric.ports[(self.fabric.node_port_base[node as usize] + port as u32) as usize];
        if !p.up {
            return;
        }
        let wire = bytes.len() as u64 + 20 + 8 + crate::packet::FRAME_OVERHEAD as u64;
        let at = at + Duration::for_bytes(wire, p.rate_bps).as_ps() + p.delay_ps;
        let peer = &self.fabric.ports[p.reverse as usize];
        let (node, port) = (peer.node, peer.local);
        self.push_control(at, ControlMsg::Mrp { node, port, bytes });
    }

    /// The leader host `host` sends an MRP packet toward the group (at `at`).
    pub fn inject_mrp(&mut self, at: Instant, host: u32, mrp: &MrpRepr) {
        self.send_mrp(at.as_ps().max(self.now), host, 0, mrp);
    }

    /// The leader host `host` sends an MRP datagram (a registration, a prune or a
    /// release, as `control::session` emits them) toward the group (at `at`).
    pub fn inject_mrp_bytes(&mut self, at: Instant, host: u32, bytes: Vec<u8>) {
        self.send_mrp_bytes(at.as_ps().max(self.now), host, 0, bytes);
    }

    /// Sends `bytes` from host `from` to host `to` over the control channel.
    pub fn send_control(&mut self, at: Instant, from: u32, to: u32, bytes: Vec<u8>) {
        let at = at.as_ps().max(self.now) + self.cfg.control_latency.as_ps();
        self.push_control(at, ControlMsg::App(AppEvent::Control { from, to, bytes }));
    }

    pub(super) fn control_arrive(&mut self, i: u32) {
        let Some(msg) = self.control.messages.take(i) else {
            return;
        };
        self.app.outstanding -= 1;
        match msg {
            ControlMsg::App(ev) => self.app.events.push_back((self.now, ev)),
            ControlMsg::Mrp { node, port, bytes } => {
                if (node as usize) < self.fabric.topo.num_hosts() {
                    self.app
                        .events
                        .push_back((self.now, AppEvent::Mrp { host: node, bytes }));
                    return;
                }
                let sw = node as usize - self.fabric.topo.num_hosts();
                // The same MRP messages, in the same order, and the same handlers as
                // `rocast switch` (`switch::pipeline`, `switch::mrp_agent`); a prune or a
                // release from the group's source direction goes on to the switches
                // downstream.
                let table = SwitchRoutes {
                    topo: &self.fabric.topo,
                    routes: &self.fabric.routes,
                    node,
                };
                let mrp = match MrpMessage::parse(&bytes) {
                    Some(MrpMessage::Register(mrp)) => mrp,
                    Some(MrpMessage::Prune(prune)) => {
                        match mrp_agent::handle_prune(
                            &mut self.switches.cepheus[sw],
                            port,
                            &prune,
                            &table,
                        ) {
                            Some(out) => {
                                for (p, next) in out.next {
                                    let mut b = vec![0u8; next.buffer_len()];
                                    next.emit(&mut b);
                                    self.send_mrp_bytes(self.now, node, p, b);
                                }
                            }
                            None => self.control.mrp_ignored += 1,
                        }
                        return;
                    }
                    Some(MrpMessage::Release(rel)) => {
                        match mrp_agent::handle_release(
                            &mut self.switches.cepheus[sw],
                            port,
                            rel.mcst_id,
                        ) {
                            Some(next) => {
                                for p in next {
                                    self.send_mrp_bytes(self.now, node, p, bytes.clone());
                                }
                            }
                            None => self.control.mrp_ignored += 1,
                        }
                        return;
                    }
                    // The simulated fabric has no allocation service: its groups'
                    // addresses are the scenario's.
                    Some(MrpMessage::Allocate(_)) => {
                        self.control.mrp_ignored += 1;
                        return;
                    }
                    None => {
                        self.control.mrp_malformed += 1;
                        return;
                    }
                };
                match mrp_agent::handle_mrp(&mut self.switches.cepheus[sw], port, &mrp, &table) {
                    Ok(out) => {
                        for (p, m) in out {
                            self.send_mrp(self.now, node, p, &m);
                        }
                    }
                    Err(reason) => {
                        let report = SwitchReport {
                            switch: node,
                            mcst_id: mrp.mcst_id,
                            reason,
                        };
                        let at = self.now + self.cfg.control_latency.as_ps();
                        self.push_control(at, ControlMsg::App(AppEvent::SwitchReport(report)));
                    }
                }
            }
        }
    }
}
