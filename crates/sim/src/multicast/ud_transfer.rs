//! A reliable UD multicast transfer through the two-tier PEEL fabric, in the
//! simulator's byte-level fabric ([`crate::engine::frames`]): the scenario the
//! namespace lab runs as `rocast bench lab-ud --fabric peel` (and `rocast lab run
//! --preset peel-transfer`), with the same objects deciding — the core's
//! [`FrameSwitch`](rocast_core::switch::FrameSwitch) at every switch, set up from the
//! same [`TwoTierFabric`], a [`UdEndpoint`] per host carrying the NACK protocol of the
//! broadcast-select paper (002 §IV, [`NackMulticastSender`] /
//! [`NackMulticastReceiver`]), and the source's PEEL headers (PEEL §3.2,
//! [`TwoTierFabric::source_headers`]).
//!
//! Host 0 sends messages `0..messages` ([`stream_message`]) to the group of hosts
//! `1..hosts`; every DATA, repair and heartbeat goes out once per PEEL header, the
//! shim inserted after UDP (what the lab's kernel socket sends to UDP 4793).
//! Receivers NACK to the group (plain RoCEv2, flooded at layer 2) and send STATUS to
//! the source, as in the lab. The run ends when the sender has every receiver's
//! report of the whole stream.
//!
//! The protocol settings ([`transfer_sender_config`], [`transfer_receiver_config`])
//! are the lab's: timers for real time on a loaded 2-core machine.
//!
//! Memory: per host one endpoint with `recv_buffers` posted receives (4096 × the
//! MTU's bookkeeping, no payload until used), the protocol's window (≤ 4096 packets
//! at the sender, 1024 fragments at a receiver), and one bit per message of delivery
//! state; plus the fabric's queues.

use std::collections::{BTreeMap, VecDeque};

use rocast_core::nack_multicast::packet::{Packet, DATA_HEADER_LEN};
use rocast_core::nack_multicast::{
    Destination, NackMulticastReceiver, NackMulticastSender, Peer, ReceiverConfig,
    ReceiverCounters, ReceiverEvent, SenderConfig, SenderCounters,
};
use rocast_core::payload::{stream_message, StreamTally};
use rocast_core::rnic::{UdAddress, UdConfig, UdCounters, UdEndpoint, UdError, UdEvent};
use rocast_core::switch::two_tier::{TwoTierError, TwoTierFabric};
use rocast_core::switch::FrameSwitchStats;
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::peel::{insert_shim, PeelHeader};
use rocast_core::wire::{EthernetAddress, Ipv4Address, Psn, ETHERNET_HEADER_LEN, ROCEV2_UDP_PORT};

use crate::engine::frames::{FrameFabric, FrameFabricError, FrameHost, FrameNode};

/// Why a UD transfer could not be set up or did not complete.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum UdTransferError {
    #[error(transparent)]
    Fabric(#[from] TwoTierError),
    #[error(transparent)]
    FrameFabric(#[from] FrameFabricError),
    #[error("host {host}: {source}")]
    Host {
        host: usize,
        #[source]
        source: UdError,
    },
    #[error("a UD transfer needs at least one message of at least one byte")]
    NothingToSend,
    #[error("UD MTU {0}: must be 256, 512, 1024, 2048 or 4096")]
    Mtu(usize),
    #[error("a UD transfer needs a sender and at least one receiver")]
    TooFewHosts,
    #[error("loss toward host {0:?}: not a receiver")]
    LossHostNotReceiver(Option<usize>),
    #[error(
        "UD transfer did not complete by {limit_ms} ms of simulated time: receivers delivered {delivered:?} of {messages}"
    )]
    Incomplete {
        limit_ms: u64,
        delivered: Vec<u64>,
        messages: u64,
    },
    #[error("host 0 is not the sender")]
    NoSender,
}

/// The Q_Key every QP of the run uses.
pub const QKEY: u32 = 0x1111_0000;
/// Receive buffers each host keeps posted.
pub const RECV_BUFFERS: usize = 4096;

/// The sender's protocol settings for a transfer to `hosts - 1` receivers with UD
/// path MTU `mtu` (timers for real time on a loaded 2-core machine: hundreds of
/// microseconds to milliseconds; the core's defaults are for a fabric with
/// microsecond round trips).
pub fn transfer_sender_config(hosts: usize, mtu: usize) -> SenderConfig {
    let mut c = SenderConfig::new(1, mtu - DATA_HEADER_LEN);
    c.window = 4096;
    c.expected_receivers = hosts - 1;
    c.heartbeat_interval = Duration::from_ms(1);
    c.receiver_timeout = Duration::from_ms(10_000);
    c.repair_linger = Duration::from_ms(2);
    c.max_pending_repairs = 1024;
    c.initial_receiver_window = 256;
    c
}

/// Receiver `i`'s protocol settings (see [`transfer_sender_config`]).
pub fn transfer_receiver_config(hosts: usize, i: usize, seed: u64) -> ReceiverConfig {
    let mut c = ReceiverConfig::new(i as u32, hosts - 1, seed ^ (i as u64) << 20);
    c.window = 1024;
    c.nack_max_backoff = Duration::from_us(300);
    c.nack_holdoff = Duration::from_ms(10);
    c.status_interval = Duration::from_ms(1);
    c
}

/// One transfer to run.
#[derive(Clone, Debug)]
pub struct UdTransferSpec {
    pub hosts: usize,
    pub tors: usize,
    pub subnet: [u8; 3],
    pub group: Ipv4Address,
    pub messages: u64,
    pub size: usize,
    /// UD path MTU.
    pub mtu: usize,
    pub seed: u64,
    pub gbps: f64,
    pub delay: Duration,
    /// Drop probability at switch egress: on every port, or with `loss_host` only on
    /// the ToR port toward that host.
    pub loss: f64,
    pub loss_host: Option<usize>,
    /// Simulated time after which the run fails.
    pub time_limit: Duration,
}

/// How the transfer went.
#[derive(Clone, Debug)]
pub struct UdTransferOutcome {
    /// Hosts 1..hosts: each one's account of the stream, and its protocol counters.
    pub receivers: Vec<StreamTally>,
    pub receiver_counters: Vec<ReceiverCounters>,
    pub sender: SenderCounters,
    pub sender_ud: UdCounters,
    /// Frames the sender put on its link (every PEEL copy counted).
    pub sender_frames: u64,
    /// Per switch (`agg`, `tor0`, …): its pipeline's counters and the frames its
    /// ports' loss dropped.
    pub switches: Vec<(String, FrameSwitchStats, u64)>,
    pub completion: Instant,
    pub events: u64,
}

impl UdTransferOutcome {
    /// Packets the sender sent to the group (DATA, repairs, heartbeats), each once
    /// before PEEL copies.
    pub fn group_packets(&self) -> u64 {
        self.sender.data_packets + self.sender.repair_packets + self.sender.heartbeats
    }
}

enum Role {
    Sender {
        s: NackMulticastSender,
        queued: u64,
        pending: Option<Vec<u8>>,
        done: bool,
    },
    Receiver {
        r: NackMulticastReceiver,
        sender: Option<UdAddress>,
        tally: StreamTally,
    },
}

/// A host's NIC side: its endpoint and QP, and the frames waiting for its link.
struct Nic {
    ep: UdEndpoint,
    qpn: u32,
    mtu: usize,
    next_wr: u64,
    /// PEEL headers for frames to the group (the sender's).
    peel: Vec<PeelHeader>,
    frames: VecDeque<Vec<u8>>,
    buf: Vec<u8>,
}

impl Nic {
    /// Posts one UD SEND of `payload` and queues its frames (PEEL copies for the
    /// group when the host has headers).
    fn send(&mut self, now: Instant, dest: UdAddress, payload: &[u8]) {
        if self
            .ep
            .post_send(self.qpn, 0, &dest, payload, None)
            .is_err()
        {
            return;
        }
        while let Some(t) = self.ep.poll_transmit(now, &mut self.buf) {
            let frame = &self.buf[..t.len];
            if dest.is_multicast() && !self.peel.is_empty() {
                for h in &self.peel {
                    if let Ok(ip) = insert_shim(&frame[ETHERNET_HEADER_LEN..], h) {
                        let mut f = frame[..ETHERNET_HEADER_LEN].to_vec();
                        f.extend_from_slice(&ip);
                        self.frames.push_back(f);
                    }
                }
            } else {
                self.frames.push_back(frame.to_vec());
            }
        }
    }

    /// Gives a receive buffer back to `qpn` (one per completed receive).
    fn repost(&mut self, qpn: u32) {
        let _ = self.ep.post_recv(qpn, self.next_wr, self.mtu);
        self.next_wr += 1;
    }
}

/// One host: a UD endpoint with one QP on the group, and its side of the protocol.
pub struct UdNackHost {
    nic: Nic,
    group: UdAddress,
    /// Where a learnt source IP's frames go at layer 2 (the lab's ARP).
    arp: BTreeMap<Ipv4Address, EthernetAddress>,
    messages: u64,
    seed: u64,
    size: usize,
    role: Role,
    /// The protocol's next packet.
    packet: Vec<u8>,
    rejects: u64,
    /// Stopped: sends nothing more, arms no timer (the run is over; frames in flight
    /// drain).
    quiet: bool,
}

impl UdNackHost {
    fn new(
        spec: &UdTransferSpec,
        fabric: &TwoTierFabric,
        i: usize,
        role: Role,
    ) -> Result<Self, UdTransferError> {
        let e = |source: UdError| UdTransferError::Host { host: i, source };
        let mut uc = UdConfig::new(fabric.host_ip(i), TwoTierFabric::host_mac(i));
        uc.mtu = spec.mtu;
        uc.udp_src_port = ROCEV2_UDP_PORT;
        let mut ep = UdEndpoint::new(uc).map_err(e)?;
        let qpn = 0x100 + i as u32;
        ep.create_qp(qpn, QKEY, Psn::new(0)).map_err(e)?;
        ep.attach_multicast(qpn, spec.group).map_err(e)?;
        for wr in 0..RECV_BUFFERS as u64 {
            ep.post_recv(qpn, wr, spec.mtu).map_err(e)?;
        }
        let group = UdAddress::multicast(spec.group, QKEY).map_err(e)?;
        let max = ep.max_frame_len();
        Ok(UdNackHost {
            nic: Nic {
                ep,
                qpn,
                mtu: spec.mtu,
                next_wr: RECV_BUFFERS as u64,
                peel: Vec::new(),
                frames: VecDeque::new(),
                buf: vec![0; max],
            },
            group,
            arp: (0..fabric.hosts())
                .map(|h| (fabric.host_ip(h), TwoTierFabric::host_mac(h)))
                .collect(),
            messages: spec.messages,
            seed: spec.seed,
            size: spec.size,
            role,
            packet: vec![0; spec.mtu],
            rejects: 0,
            quiet: false,
        })
    }

    /// The sender has every receiver's report of the whole stream.
    pub fn sender_done(&self) -> bool {
        matches!(self.role, Role::Sender { done: true, .. })
    }

    /// Frames the endpoint refused (its counters say why).
    pub fn rejects(&self) -> u64 {
        self.rejects
    }

    /// Feeds the endpoint's received messages to the protocol.
    fn drain_endpoint(&mut self, now: Instant) {
        while let Some(ev) = self.nic.ep.poll_event() {
            let (qpn, src_ip, src_qpn, data) = match ev {
                UdEvent::Receive {
                    qpn,
                    src_ip,
                    src_qpn,
                    data,
                    ..
                } => (qpn, src_ip, src_qpn, data),
                UdEvent::RecvError { qpn, .. } => {
                    self.nic.repost(qpn);
                    continue;
                }
                UdEvent::SendComplete { .. } => continue,
            };
            // Keep the receive queue full: one buffer back per message.
            self.nic.repost(qpn);
            // The source the endpoint reported: the state machines bind streams and
            // receivers to it, as on real packets.
            let from = Some(Peer {
                ip: src_ip,
                qpn: src_qpn,
            });
            match &mut self.role {
                Role::Sender { s, .. } => s.handle_packet_from(now, from, &data),
                Role::Receiver { r, sender, .. } => {
                    if sender.is_none() && Packet::is_from_sender(&data) {
                        let mac = self.arp.get(&src_ip).copied().unwrap_or_default();
                        *sender = Some(UdAddress::unicast(src_ip, mac, src_qpn, QKEY));
                    }
                    r.handle_packet_from(now, from, &data);
                }
            }
        }
    }

    /// Runs the protocol's timers, queues messages, and sends what it has.
    fn pump(&mut self, now: Instant) {
        if self.quiet {
            return;
        }
        let (seed, size, count, group) = (self.seed, self.size, self.messages, self.group);
        let (nic, packet) = (&mut self.nic, &mut self.packet);
        match &mut self.role {
            Role::Sender {
                s,
                queued,
                pending,
                done,
            } => {
                if s.poll_timeout().is_some_and(|t| t <= now) {
                    s.handle_timeout(now);
                }
                while *queued < count {
                    let m = pending
                        .take()
                        .unwrap_or_else(|| stream_message(seed, *queued, size));
                    match s.send(now, &m) {
                        Ok(_) => *queued += 1,
                        Err(_) => {
                            *pending = Some(m);
                            break;
                        }
                    }
                }
                while let Some(t) = s.poll_transmit(now, packet) {
                    nic.send(now, group, &packet[..t.len]);
                }
                if *queued == count && s.all_delivered() {
                    *done = true;
                }
            }
            Role::Receiver { r, sender, tally } => {
                if r.poll_timeout().is_some_and(|t| t <= now) {
                    r.handle_timeout(now);
                }
                while let Some(ev) = r.poll_event() {
                    match ev {
                        ReceiverEvent::Message { msg_seq, data, .. } => {
                            let intact = data == stream_message(seed, msg_seq, size);
                            tally.record(msg_seq, &data, intact);
                        }
                        ReceiverEvent::Unrecoverable { messages, .. } => {
                            tally.lost(messages.end - messages.start);
                        }
                    }
                }
                while let Some(t) = r.poll_transmit(now, packet) {
                    let dest = match t.dest {
                        Destination::Group => group,
                        Destination::Sender => match sender {
                            Some(a) => *a,
                            None => continue,
                        },
                    };
                    nic.send(now, dest, &packet[..t.len]);
                }
            }
        }
    }
}

impl FrameHost for UdNackHost {
    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        if self.nic.ep.handle_frame(now, frame).is_err() {
            self.rejects += 1;
        }
        self.drain_endpoint(now);
        self.pump(now);
    }

    fn start(&mut self, now: Instant) {
        self.pump(now);
    }

    fn poll_frame(&mut self, _now: Instant) -> Option<Vec<u8>> {
        self.nic.frames.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.quiet {
            return None;
        }
        match &self.role {
            Role::Sender { s, .. } => s.poll_timeout(),
            Role::Receiver { r, .. } => r.poll_timeout(),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.pump(now);
    }
}

/// Runs the transfer (see the module docs).
pub fn run_ud_transfer(spec: &UdTransferSpec) -> Result<UdTransferOutcome, UdTransferError> {
    if spec.messages == 0 || spec.size == 0 {
        return Err(UdTransferError::NothingToSend);
    }
    if !matches!(spec.mtu, 256 | 512 | 1024 | 2048 | 4096) {
        return Err(UdTransferError::Mtu(spec.mtu));
    }
    if spec.hosts < 2 {
        return Err(UdTransferError::TooFewHosts);
    }
    if spec.loss_host.is_some_and(|h| h == 0 || h >= spec.hosts) {
        return Err(UdTransferError::LossHostNotReceiver(spec.loss_host));
    }
    let members: Vec<usize> = (1..spec.hosts).collect();
    let fabric = TwoTierFabric::new(
        spec.hosts,
        spec.tors,
        spec.subnet,
        vec![(spec.group, members.clone())],
    )?;
    let mut net: FrameFabric<UdNackHost> = FrameFabric::new(spec.gbps, spec.delay, spec.seed)?;
    let setups = fabric.switches();
    let mut switch_nodes = Vec::new();
    for s in &setups {
        switch_nodes.push(net.add_switch(s.frame_switch()?));
    }
    let (agg, tor_nodes) = (switch_nodes[0], &switch_nodes[1..]);
    let per = fabric.per_rack() as u16;
    for (t, &tor) in tor_nodes.iter().enumerate() {
        net.connect((tor, per), (agg, t as u16))?;
    }
    let mut host_nodes = Vec::new();
    for i in 0..spec.hosts {
        let role = if i == 0 {
            Role::Sender {
                s: NackMulticastSender::new(transfer_sender_config(spec.hosts, spec.mtu)),
                queued: 0,
                pending: None,
                done: false,
            }
        } else {
            Role::Receiver {
                r: NackMulticastReceiver::new(transfer_receiver_config(spec.hosts, i, spec.seed)),
                sender: None,
                tally: StreamTally::new(spec.messages),
            }
        };
        let mut h = UdNackHost::new(spec, &fabric, i, role)?;
        if i == 0 {
            h.nic.peel = fabric.source_headers(0, &members);
        }
        let n = net.add_host(h);
        let (t, port) = fabric.rack_of(i);
        net.connect((n, 0), (tor_nodes[t], port))?;
        host_nodes.push(n);
    }
    if spec.loss > 0.0 {
        match spec.loss_host {
            Some(h) => {
                let (t, port) = fabric.rack_of(h);
                net.set_loss((tor_nodes[t], port), spec.loss)?;
            }
            None => {
                for (k, s) in setups.iter().enumerate() {
                    for p in 0..s.ports {
                        net.set_loss((switch_nodes[k], p), spec.loss)?;
                    }
                }
            }
        }
    }
    net.start();
    let sender = host_nodes[0];
    let done = net.run_until(Instant::ZERO + spec.time_limit, |n| {
        n.host(sender).is_some_and(UdNackHost::sender_done)
    });
    if !done {
        let got: Vec<u64> = host_nodes[1..]
            .iter()
            .filter_map(|&n| match &net.host(n)?.role {
                Role::Receiver { tally, .. } => Some(tally.delivered),
                Role::Sender { .. } => None,
            })
            .collect();
        return Err(UdTransferError::Incomplete {
            limit_ms: spec.time_limit.as_ps() / 1_000_000_000,
            delivered: got,
            messages: spec.messages,
        });
    }
    // The run is over: every host stops, and what is on the wire arrives (the
    // sender's last packet has all its copies counted, as in the lab, whose counters
    // are read after the hosts have stopped).
    for &n in &host_nodes {
        if let Some(h) = net.host_mut(n) {
            h.quiet = true;
        }
    }
    let completion = net.now();
    net.run_until(Instant::ZERO + spec.time_limit, |_| false);
    let (mut receivers, mut receiver_counters) = (Vec::new(), Vec::new());
    for &n in &host_nodes[1..] {
        if let Some(Role::Receiver { tally, r, .. }) = net.host(n).map(|h| &h.role) {
            receivers.push(tally.clone());
            receiver_counters.push(r.counters().clone());
        }
    }
    let (sender_counters, sender_ud) = match net.host(sender) {
        Some(UdNackHost {
            role: Role::Sender { s, .. },
            nic,
            ..
        }) => (s.counters().clone(), nic.ep.counters().clone()),
        _ => return Err(UdTransferError::NoSender),
    };
    let switches = setups
        .iter()
        .zip(&switch_nodes)
        .map(|(s, &n)| {
            let drops = (0..s.ports)
                .filter_map(|p| net.port_counters(n, p))
                .map(|c| c.injected_drops)
                .sum();
            let stats = match net.node(n) {
                Some(FrameNode::Switch(sw)) => sw.stats().clone(),
                _ => FrameSwitchStats::default(),
            };
            (s.name.clone(), stats, drops)
        })
        .collect();
    Ok(UdTransferOutcome {
        receivers,
        receiver_counters,
        sender: sender_counters,
        sender_ud,
        sender_frames: net.port_counters(sender, 0).map_or(0, |c| c.tx_frames),
        switches,
        completion,
        events: net.events(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> UdTransferSpec {
        UdTransferSpec {
            hosts: 6,
            tors: 3,
            subnet: [10, 77, 0],
            group: Ipv4Address::new(239, 77, 0, 1),
            messages: 300,
            size: 4000,
            mtu: 4096,
            seed: 7,
            gbps: 10.0,
            delay: Duration::from_us(10),
            loss: 0.0,
            loss_host: None,
            time_limit: Duration::from_ms(10_000),
        }
    }

    #[test]
    fn every_receiver_gets_every_message_once_and_peel_copies_follow_the_cover() {
        let o = run_ud_transfer(&spec()).unwrap();
        let whole: Vec<u8> = (0..300).flat_map(|i| stream_message(7, i, 4000)).collect();
        for r in &o.receivers {
            assert_eq!((r.delivered, r.bytes), (300, 1_200_000));
            assert_eq!(
                (r.duplicates, r.out_of_order, r.corrupt, r.unrecoverable),
                (0, 0, 0, 0)
            );
            assert_eq!(r.crc32, rocast_core::payload::crc32(&whole));
        }
        let f = o.group_packets();
        assert!(f >= 300, "{f}");
        // Two copies per packet: prefixes 01 and 10 (racks 1 and 2).
        assert_eq!(o.sender_frames, 2 * f);
        let peel = |k: usize| {
            let s = &o.switches[k].1;
            (
                s.peel_in,
                s.peel_forwarded,
                s.peel_delivered,
                s.peel_dropped,
            )
        };
        assert_eq!(o.switches[0].0, "agg");
        assert_eq!(peel(0), (2 * f, 2 * f, 0, 0));
        // tor0: both copies up, the SOURCE_RACK one also to h1.
        assert_eq!(peel(1), (2 * f, 2 * f, f, 0));
        assert_eq!(peel(2), (f, 0, 2 * f, 0));
        assert_eq!(peel(3), (f, 0, 2 * f, 0));
    }

    #[test]
    fn loss_toward_one_member_is_repaired_and_the_same_seed_gives_the_same_run() {
        let s = UdTransferSpec {
            loss: 0.01,
            loss_host: Some(3),
            ..spec()
        };
        let a = run_ud_transfer(&s).unwrap();
        let b = run_ud_transfer(&s).unwrap();
        assert_eq!(a.receivers, b.receivers);
        assert_eq!((a.completion, a.events), (b.completion, b.events));
        assert!(a.switches[2].2 > 0, "tor1 dropped toward h3");
        assert!(a.sender.repair_packets > 0);
        assert!(a.receiver_counters[2].nacks_sent > 0);
        for r in &a.receivers {
            assert_eq!(
                (r.delivered, r.duplicates, r.out_of_order, r.corrupt),
                (300, 0, 0, 0)
            );
        }
        assert!(run_ud_transfer(&UdTransferSpec {
            loss_host: Some(0),
            loss: 0.1,
            ..spec()
        })
        .is_err());
        assert!(run_ud_transfer(&UdTransferSpec {
            mtu: 1000,
            ..spec()
        })
        .is_err());
    }
}
