//! The scenario's flows: one RDMA WRITE (with immediate) from host to host each,
//! started at a time or after another flow, and their results (`fct.txt`).

use super::{Crossing, Engine, EngineConfig, EvKind, QpOwner};
use rocast_core::overlay::model::MessageCost;
use rocast_core::plan::{Routes, Topology};
use rocast_core::rnic::{Event, Payload};
use rocast_core::time::Duration;
use rocast_core::wire::{
    AETH_LEN, BTH_LEN, ICRC_LEN, IMMDT_LEN, IPV4_HEADER_LEN, RETH_LEN, UDP_HEADER_LEN,
};

/// The scenario's flows, their results, and which flows wait for which.
pub struct ScenarioFlows {
    pub(super) specs: Vec<FlowSpec>,
    pub results: Vec<FlowResult>,
    /// Per flow: the flows that start once it has been received.
    pub(super) dependents: Vec<Vec<u32>>,
}

/// One flow to run: an RDMA WRITE (with immediate) of `size` bytes from `src` to `dst`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    /// Start time in picoseconds (for a dependent flow: the delay after its trigger).
    pub start_ps: u64,
    /// Start only after this flow (an index into the same list) has been received.
    pub after: Option<u32>,
}

/// Per-flow record, as `fct.txt` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub size: u64,
    pub start_ps: u64,
    /// Sender completion (all data acknowledged), if it finished.
    pub finish_ps: Option<u64>,
    /// Receiver saw the whole message.
    pub received_ps: Option<u64>,
    pub standalone_ps: u64,
    pub failed: bool,
}

/// QP numbers of flow `i`: 2i+2 (sender) and 2i+3 (receiver). QPNs are never reused
/// (late packets to a finished flow are counted, not misdelivered); 24 bits allow 8
/// million flows.
pub(super) fn flow_qpns(i: u32) -> (u32, u32) {
    (2 * i + 2, 2 * i + 3)
}

/// The ideal flow completion time on an empty network: the packet train pipelined
/// through every store-and-forward hop of the path at line rate, then the last ACK
/// back. With identical packets of wire size s over hops of rate r_j and delay d_j,
/// the last packet arrives at Σ_j (s/r_j + d_j) + (n−1)·s/min r_j; the first and last
/// packets' header differences (RETH, ImmDt, a short tail) are accounted exactly in
/// the total bytes at the bottleneck.
pub fn standalone_fct(
    topo: &Topology,
    routes: &Routes,
    src: u32,
    dst: u32,
    size: u64,
    mtu: usize,
) -> u64 {
    let c = ideal_message(topo, routes, src, dst, size, mtu);
    c.deliver_ps + c.ack_ps
}

/// The parts of [`standalone_fct`]: how long the message occupies the sender's NIC,
/// post → last byte delivered, and delivery → the ACK back at the sender.
pub fn ideal_message(
    topo: &Topology,
    routes: &Routes,
    src: u32,
    dst: u32,
    size: u64,
    mtu: usize,
) -> MessageCost {
    let zero = MessageCost {
        nic_ps: 0,
        deliver_ps: 0,
        ack_ps: 0,
    };
    let Some(path) = routes.path(topo, src, dst) else {
        return zero;
    };
    let mtu = mtu as u64;
    let n = size.div_ceil(mtu).max(1);
    // Every packet: IPv4, UDP, BTH, ICRC and framing; RETH on the first, ImmDt on the
    // last, and padding to a 4-byte multiple.
    let hdr = (IPV4_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN + ICRC_LEN) as u64
        + crate::packet::FRAME_OVERHEAD as u64;
    let (reth, imm) = (RETH_LEN as u64, IMMDT_LEN as u64);
    let full = mtu + hdr;
    let total_wire = size + n * hdr + reth + imm + (4 - size % 4) % 4;
    let ack = hdr + AETH_LEN as u64;
    let mut t = 0u64;
    let mut r_min = u64::MAX;
    let mut back = 0u64;
    let first = full.min(size + hdr + reth);
    for &l in &path {
        let spec = &topo.links[l as usize];
        r_min = r_min.min(spec.rate_bps);
        t += Duration::for_bytes(first, spec.rate_bps).as_ps() + spec.delay.as_ps();
        back += Duration::for_bytes(ack, spec.rate_bps).as_ps() + spec.delay.as_ps();
    }
    let first_rate = path
        .first()
        .map(|&l| topo.links[l as usize].rate_bps)
        .unwrap_or(r_min);
    MessageCost {
        nic_ps: Duration::for_bytes(total_wire, first_rate).as_ps(),
        deliver_ps: t + Duration::for_bytes(total_wire - first, r_min).as_ps(),
        ack_ps: back,
    }
}

impl ScenarioFlows {
    /// The flows with their results not yet filled (each one's ideal completion time
    /// computed on the empty fabric).
    pub(super) fn new(
        topo: &Topology,
        routes: &Routes,
        cfg: &EngineConfig,
        specs: Vec<FlowSpec>,
    ) -> Self {
        let mut dependents = vec![Vec::new(); specs.len()];
        for (i, f) in specs.iter().enumerate() {
            if let Some(a) = f.after {
                dependents[a as usize].push(i as u32);
            }
        }
        let mut results = Vec::with_capacity(specs.len());
        for f in &specs {
            let standalone_ps = standalone_fct(topo, routes, f.src, f.dst, f.size, cfg.mtu);
            results.push(FlowResult {
                src: f.src,
                dst: f.dst,
                sport: 0,
                size: f.size,
                start_ps: f.start_ps,
                finish_ps: None,
                received_ps: None,
                standalone_ps,
                failed: false,
            });
        }
        ScenarioFlows {
            specs,
            results,
            dependents,
        }
    }
}

impl Engine {
    /// Flows started and not yet finished or failed, plus flows not yet started.
    pub fn flows_outstanding(&self) -> u64 {
        self.flows.specs.len() as u64
            - self.stats.totals.flows_finished
            - self.stats.totals.flows_failed
    }

    pub(super) fn start_flow(&mut self, i: u32) {
        let f = self.flows.specs[i as usize].clone();
        self.flows.results[i as usize].start_ps = self.now;
        // In a partitioned run the receiver's partition opens the pair too (its QP
        // takes the data) but only the sender's posts, counts and sends.
        let sends = self.owns(f.src);
        let (sq, rq) = flow_qpns(i);
        if rq > 0xff_ffff {
            if sends {
                self.fail_flow(i);
            }
            return;
        }
        let ok = self
            .open_qp_pair((f.src, sq), (f.dst, rq), QpOwner::Flow(i), f.size, false)
            .and_then(|sport| {
                self.flows.results[i as usize].sport = sport;
                if !sends {
                    // The receive the immediate consumes (the sender's post makes it).
                    return self.post_recv(rq, i as u64);
                }
                self.post_write_imm((sq, rq), i as u64, 0, i, Payload::Zeros(f.size as usize))
            });
        if !sends {
            return;
        }
        self.stats.totals.flows_started += 1;
        if ok.is_err() {
            self.fail_flow(i);
            return;
        }
        self.service_qp(sq);
    }

    pub(super) fn fail_flow(&mut self, i: u32) {
        self.flows.results[i as usize].failed = true;
        self.stats.totals.flows_failed += 1;
        self.note_flow_change();
    }

    pub(super) fn finish_flow(&mut self, flow: u32, ok: bool) {
        let (sq, rq) = flow_qpns(flow);
        let (src, dst) = {
            let f = &self.flows.specs[flow as usize];
            (f.src, f.dst)
        };
        if !self.owns(src) {
            // The receiver's QP failed in its own partition: the sender decides the
            // flow's fate (it times out).
            self.retire_qp(rq);
            return;
        }
        for q in [sq, rq] {
            self.retire_qp(q);
        }
        if let Some(part) = self.partition.as_deref_mut() {
            if !part.owns(dst) {
                let to = part.owner_of(dst);
                part.send(to, Crossing::Retire { qpn: rq });
            }
        }
        if ok {
            self.flows.results[flow as usize].finish_ps = Some(self.now);
            self.stats.totals.flows_finished += 1;
            self.note_flow_change();
        } else {
            self.fail_flow(flow);
        }
    }

    /// A partition remembers when its last flow finished or failed.
    fn note_flow_change(&mut self) {
        if let Some(part) = self.partition.as_deref_mut() {
            part.last_flow_change = self.now;
        }
    }

    pub(super) fn flow_events(&mut self, flow: u32, events: &[Event]) -> Option<bool> {
        let mut done = None;
        for ev in events {
            match ev {
                Event::SendComplete { result, .. } => done = Some(result.is_ok()),
                Event::RecvWriteImm { .. } => {
                    let r = &mut self.flows.results[flow as usize];
                    if r.received_ps.is_none() {
                        r.received_ps = Some(self.now);
                        for i in 0..self.flows.dependents[flow as usize].len() {
                            let d = self.flows.dependents[flow as usize][i];
                            let t = self.now + self.flows.specs[d as usize].start_ps;
                            self.flows.results[d as usize].start_ps = t;
                            self.schedule(t, EvKind::FlowStart, d, 0);
                        }
                    }
                }
                Event::QpError(_) => done = Some(false),
                _ => {}
            }
        }
        done
    }

    /// Data bytes flow `i`'s sender has transmitted so far (None before it starts or
    /// after it finished).
    pub fn flow_tx_bytes(&self, i: u32) -> Option<u64> {
        self.hosts
            .slot(flow_qpns(i).0)
            .map(|s| s.qp.stats().tx_data_bytes)
    }
}
