//! The byte-level fabric: the simulator's explicit mode for carrying real frames
//! (the simulator skips byte-level work for speed by default; this mode runs the same
//! pipeline code on the bytes instead). Every switch is the core's whole frame
//! pipeline, [`FrameSwitch`] — the object `rocast switch` runs on real ports — and
//! every host a [`FrameHost`] that exchanges Ethernet frames; links
//! carry the bytes. What the packet-record [`Engine`](super::Engine) skips (parsing,
//! ICRC checks, shim insertion and stripping, layer-2 learning and flooding) happens
//! here exactly as on real packets, so a scenario run here and in the namespace lab
//! is the same code deciding, with only time and links simulated. It is for small
//! fabrics (the lab's size) and conformance, not for datacenter scale.
//!
//! The model: a link is full duplex at one rate with one propagation delay; each
//! port sends its frames in FIFO order, a frame occupying the link for its bytes plus
//! [`WIRE_OVERHEAD`] (preamble, inter-frame gap, FCS); the queue is unbounded (the
//! lab's hosts and switch daemons have megabytes of socket buffer for these
//! scenarios). A switch's egress port can drop a fraction of its frames, each draw
//! from the fabric's seeded generator, as `rocast switch --loss` does. Hosts and
//! switches take no time to process a frame. Events run on the simulator's one
//! [`EventQueue`]; a run is a function of its configuration and seed.
//!
//! Memory: per port its queued frames (bytes each) and 40 B of counters; per event in
//! flight one frame; per switch its [`FrameSwitch`] state.

use std::collections::VecDeque;

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use rocast_core::switch::FrameSwitch;
use rocast_core::time::Instant;

use super::EventQueue;

/// A frame fabric that cannot be built or cabled as asked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FrameFabricError {
    #[error("link rate {0} Gb/s: must be in (0, 10000]")]
    LinkRate(f64),
    #[error("node {node} has no port {port}")]
    NoSuchPort { node: u32, port: u16 },
    #[error("node {node} port {port} is cabled twice")]
    CabledTwice { node: u32, port: u16 },
    #[error("loss {0}: must be in [0, 1)")]
    Loss(f64),
}

/// Bytes a frame costs on a link beyond its Ethernet header and payload: preamble
/// (8), inter-frame gap (12), FCS (4).
pub const WIRE_OVERHEAD: u64 = 24;

/// A host on the byte-level fabric: frames in, frames out, its own timers. It has
/// one port, port 0.
pub trait FrameHost {
    /// The run begins (a sender sends its first packets).
    fn start(&mut self, _now: Instant) {}
    fn handle_frame(&mut self, now: Instant, frame: &[u8]);
    /// The next frame the host sends, if any.
    fn poll_frame(&mut self, now: Instant) -> Option<Vec<u8>>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
}

/// A node of the fabric.
pub enum FrameNode<H> {
    Switch(Box<FrameSwitch>),
    Host(H),
}

/// Counters of one port's egress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames dropped by the port's loss.
    pub injected_drops: u64,
    /// The most frames queued at once.
    pub max_queue: usize,
}

struct Port {
    peer: Option<(u32, u16)>,
    queue: VecDeque<Vec<u8>>,
    busy: bool,
    loss: f64,
    counters: PortCounters,
}

enum Ev {
    /// A frame finished arriving at (node, port).
    Arrive {
        node: u32,
        port: u16,
        frame: Vec<u8>,
    },
    /// (node, port) finished sending its head frame.
    TxDone { node: u32, port: u16 },
    /// A host's timer.
    Timer { node: u32 },
}

/// The fabric (see the module docs).
pub struct FrameFabric<H> {
    nodes: Vec<FrameNode<H>>,
    ports: Vec<Vec<Port>>,
    /// Per host node, the timer it has an event queued for.
    armed: Vec<Option<u64>>,
    queue: EventQueue<Ev>,
    now: u64,
    /// Picoseconds per byte on every link.
    ps_per_byte: u64,
    delay_ps: u64,
    rng: ChaCha8Rng,
    buf: Vec<u8>,
    events: u64,
}

impl<H: FrameHost> FrameFabric<H> {
    /// An empty fabric whose links run at `gbps` with `delay` propagation; loss draws
    /// come from `seed`.
    pub fn new(
        gbps: f64,
        delay: rocast_core::time::Duration,
        seed: u64,
    ) -> Result<Self, FrameFabricError> {
        if !(gbps.is_finite() && gbps > 0.0 && gbps <= 1e4) {
            return Err(FrameFabricError::LinkRate(gbps));
        }
        Ok(FrameFabric {
            nodes: Vec::new(),
            ports: Vec::new(),
            armed: Vec::new(),
            queue: EventQueue::new(),
            now: 0,
            ps_per_byte: (8000.0 / gbps).round().max(1.0) as u64,
            delay_ps: delay.as_ps(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf: vec![0; 1 << 16],
            events: 0,
        })
    }

    /// Adds a switch; its node id.
    pub fn add_switch(&mut self, sw: FrameSwitch) -> u32 {
        let ports = sw.config().ports;
        self.add_node(FrameNode::Switch(Box::new(sw)), ports)
    }

    /// Adds a host; its node id.
    pub fn add_host(&mut self, host: H) -> u32 {
        self.add_node(FrameNode::Host(host), 1)
    }

    fn add_node(&mut self, n: FrameNode<H>, ports: u16) -> u32 {
        self.nodes.push(n);
        self.ports.push(
            (0..ports)
                .map(|_| Port {
                    peer: None,
                    queue: VecDeque::new(),
                    busy: false,
                    loss: 0.0,
                    counters: PortCounters::default(),
                })
                .collect(),
        );
        self.armed.push(None);
        (self.nodes.len() - 1) as u32
    }

    fn port_mut(&mut self, (n, p): (u32, u16)) -> Result<&mut Port, FrameFabricError> {
        self.ports
            .get_mut(n as usize)
            .and_then(|v| v.get_mut(p as usize))
            .ok_or(FrameFabricError::NoSuchPort { node: n, port: p })
    }

    /// Cables (node, port) to (node, port).
    pub fn connect(&mut self, a: (u32, u16), b: (u32, u16)) -> Result<(), FrameFabricError> {
        for (x, y) in [(a, b), (b, a)] {
            let p = self.port_mut(x)?;
            if p.peer.is_some() {
                return Err(FrameFabricError::CabledTwice {
                    node: x.0,
                    port: x.1,
                });
            }
            p.peer = Some(y);
        }
        Ok(())
    }

    /// Drops each frame leaving (node, port) with probability `p`.
    pub fn set_loss(&mut self, at: (u32, u16), p: f64) -> Result<(), FrameFabricError> {
        if !(0.0..1.0).contains(&p) {
            return Err(FrameFabricError::Loss(p));
        }
        self.port_mut(at)?.loss = p;
        Ok(())
    }

    pub fn now(&self) -> Instant {
        Instant::from_ps(self.now)
    }
    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }
    pub fn node(&self, n: u32) -> Option<&FrameNode<H>> {
        self.nodes.get(n as usize)
    }
    pub fn host(&self, n: u32) -> Option<&H> {
        match self.nodes.get(n as usize)? {
            FrameNode::Host(h) => Some(h),
            FrameNode::Switch(_) => None,
        }
    }
    pub fn host_mut(&mut self, n: u32) -> Option<&mut H> {
        match self.nodes.get_mut(n as usize)? {
            FrameNode::Host(h) => Some(h),
            FrameNode::Switch(_) => None,
        }
    }
    pub fn switch(&self, n: u32) -> Option<&FrameSwitch> {
        match self.nodes.get(n as usize)? {
            FrameNode::Switch(s) => Some(s),
            FrameNode::Host(_) => None,
        }
    }
    pub fn port_counters(&self, n: u32, p: u16) -> Option<&PortCounters> {
        Some(&self.ports.get(n as usize)?.get(p as usize)?.counters)
    }

    /// Starts every host, sends what it has and arms its timer (call once after
    /// building).
    pub fn start(&mut self) {
        let now = Instant::from_ps(self.now);
        for n in 0..self.nodes.len() as u32 {
            if let FrameNode::Host(h) = &mut self.nodes[n as usize] {
                h.start(now);
            }
            self.service_host(n);
        }
    }

    /// Runs until `done` holds (checked after every event), time passes `until`, or
    /// nothing is left to happen; true if `done` held.
    pub fn run_until(&mut self, until: Instant, mut done: impl FnMut(&Self) -> bool) -> bool {
        if done(self) {
            return true;
        }
        while let Some((t, ev)) = self.queue.pop_until(until.as_ps()) {
            self.now = t;
            self.events += 1;
            match ev {
                Ev::Arrive { node, port, frame } => self.arrive(node, port, frame),
                Ev::TxDone { node, port } => {
                    let p = &mut self.ports[node as usize][port as usize];
                    p.busy = false;
                    self.kick(node, port);
                }
                Ev::Timer { node } => {
                    if self.armed[node as usize] == Some(t) {
                        self.armed[node as usize] = None;
                        if let FrameNode::Host(h) = &mut self.nodes[node as usize] {
                            if h.poll_timeout().is_some_and(|d| d.as_ps() <= t) {
                                h.handle_timeout(Instant::from_ps(t));
                            }
                        }
                        self.service_host(node);
                    }
                }
            }
            if done(self) {
                return true;
            }
        }
        false
    }

    fn arrive(&mut self, node: u32, port: u16, frame: Vec<u8>) {
        let now = Instant::from_ps(self.now);
        match &mut self.nodes[node as usize] {
            FrameNode::Host(h) => {
                h.handle_frame(now, &frame);
                self.service_host(node);
            }
            FrameNode::Switch(sw) => {
                sw.handle_frame(now, port, &frame);
                let mut out = Vec::new();
                while let Some(t) = sw.poll_transmit(now, &mut self.buf) {
                    out.push((t.port, self.buf[..t.len].to_vec()));
                }
                for (p, f) in out {
                    self.enqueue(node, p, f);
                }
            }
        }
    }

    /// Moves a host's frames to its port and (re)arms its timer.
    fn service_host(&mut self, node: u32) {
        let now = Instant::from_ps(self.now);
        let FrameNode::Host(h) = &mut self.nodes[node as usize] else {
            return;
        };
        let mut out = Vec::new();
        while let Some(f) = h.poll_frame(now) {
            out.push(f);
        }
        let wake = h.poll_timeout().map(|t| t.as_ps().max(self.now));
        for f in out {
            self.enqueue(node, 0, f);
        }
        if let Some(w) = wake {
            if self.armed[node as usize].is_none_or(|a| w < a) {
                self.armed[node as usize] = Some(w);
                self.queue.push(w, Ev::Timer { node });
            }
        }
    }

    fn enqueue(&mut self, node: u32, port: u16, frame: Vec<u8>) {
        let Some(p) = self.ports[node as usize].get_mut(port as usize) else {
            return;
        };
        if p.loss > 0.0 && crate::uniform(&mut self.rng) < p.loss {
            p.counters.injected_drops += 1;
            return;
        }
        p.queue.push_back(frame);
        p.counters.max_queue = p.counters.max_queue.max(p.queue.len());
        self.kick(node, port);
    }

    /// Starts sending the port's head frame if the link is idle.
    fn kick(&mut self, node: u32, port: u16) {
        let p = &mut self.ports[node as usize][port as usize];
        if p.busy {
            return;
        }
        let Some(frame) = p.queue.pop_front() else {
            return;
        };
        let Some((peer, peer_port)) = p.peer else {
            return; // an uncabled port: the frame goes nowhere
        };
        let len = frame.len() as u64;
        p.busy = true;
        p.counters.tx_frames += 1;
        p.counters.tx_bytes += len;
        let tx = (len + WIRE_OVERHEAD) * self.ps_per_byte;
        self.queue.push(self.now + tx, Ev::TxDone { node, port });
        self.queue.push(
            self.now + tx + self.delay_ps,
            Ev::Arrive {
                node: peer,
                port: peer_port,
                frame,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_core::switch::FrameSwitchConfig;
    use rocast_core::time::Duration;
    use rocast_core::wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};

    /// Sends `n` frames to `to` at start; records what arrives.
    struct Talker {
        me: EthernetAddress,
        to: EthernetAddress,
        left: u32,
        got: Vec<(u64, Vec<u8>)>,
    }

    impl FrameHost for Talker {
        fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
            self.got.push((now.as_ps(), frame.to_vec()));
        }
        fn poll_frame(&mut self, _now: Instant) -> Option<Vec<u8>> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let mut f = vec![self.left as u8; 100];
            EthernetRepr {
                src_addr: self.me,
                dst_addr: self.to,
                ethertype: EtherType::Unknown(0x88b5),
            }
            .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
            Some(f)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _now: Instant) {}
    }

    fn mac(i: u8) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, 0, i])
    }

    /// Host `me` sending `left` frames to host `to`.
    fn talker(me: u8, to: u8, left: u32) -> Talker {
        Talker {
            me: mac(me),
            to: mac(to),
            left,
            got: vec![],
        }
    }

    #[test]
    fn frames_cross_a_switch_serialised_and_delayed_and_loss_is_counted() {
        let mut f: FrameFabric<Talker> = FrameFabric::new(8.0, Duration::from_ns(100), 1).unwrap();
        let sw = f.add_switch(FrameSwitch::new(
            FrameSwitchConfig::new(2),
            rocast_core::fabric::cepheus::CnpFilterPolicy::ForwardAll.build(),
        ));
        let a = f.add_host(talker(1, 2, 3));
        let b = f.add_host(talker(2, 1, 0));
        f.connect((a, 0), (sw, 0)).unwrap();
        f.connect((b, 0), (sw, 1)).unwrap();
        assert!(f.connect((b, 0), (sw, 1)).is_err());
        f.start();
        assert!(!f.run_until(Instant::from_ps(u64::MAX / 2), |_| false));
        let got = &f.host(b).unwrap().got;
        assert_eq!(got.len(), 3, "flooded (unknown MAC) to b");
        // 8 Gb/s: 1 ns per byte; 124 ns a frame, then 100 ns of wire, twice; the
        // switch sends the first frame when it has arrived, the next back to back.
        assert_eq!(got[0].0, 2 * (124_000 + 100_000));
        assert_eq!(got[1].0 - got[0].0, 124_000);
        assert_eq!(f.port_counters(sw, 1).unwrap().tx_frames, 3);

        let mut f: FrameFabric<Talker> = FrameFabric::new(8.0, Duration::from_ns(100), 1).unwrap();
        let a = f.add_host(talker(1, 2, 1000));
        let b = f.add_host(talker(2, 1, 0));
        f.connect((a, 0), (b, 0)).unwrap();
        f.set_loss((a, 0), 0.25).unwrap();
        assert!(f.set_loss((a, 0), 1.0).is_err());
        f.start();
        f.run_until(Instant::from_ps(u64::MAX / 2), |_| false);
        let drops = f.port_counters(a, 0).unwrap().injected_drops;
        assert_eq!(drops + f.host(b).unwrap().got.len() as u64, 1000);
        assert!((200..300).contains(&drops), "{drops}");
    }
}
