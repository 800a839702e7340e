//! [`QpSet`]: several RC queue pairs on one UDP/4791 socket, demultiplexed by the
//! destination QPN in the BTH, as an RNIC does for all its QPs on one port. The
//! overlay broadcast (one QP per schedule peer) runs on it. Like [`Endpoint`], it has
//! no protocol logic: packets go to the QP they name, timers fire when the QP says,
//! and what the QPs emit is sent.
//!
//! Memory: the transport's batch buffers plus the QPs; a `BTreeMap` entry per QP.
//!
//! [`Endpoint`]: crate::endpoint::Endpoint

use crate::endpoint::Clock;
use crate::udp::{wait_readable, TransportConfig, UdpTransport};
use rocast_core::rnic::RcQueuePair;
use rocast_core::wire::{BTH_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN};
use std::collections::BTreeMap;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};

/// Counters of the set itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QpSetStats {
    /// Packets naming a QPN this set does not hold (or too short to name one).
    pub unknown_qpn: u64,
    /// Packets a QP refused (see its `QpStats`).
    pub qp_rejects: u64,
}

pub struct QpSet {
    transport: UdpTransport,
    qps: BTreeMap<u32, RcQueuePair>,
    /// Where the next transmit round starts, so no QP starves the others.
    next_tx: u32,
    stats: QpSetStats,
}

impl QpSet {
    /// Binds UDP 4791 on `local` with slots for packets of up to `max_packet_len`.
    pub fn bind(local: Ipv4Addr, max_packet_len: usize) -> io::Result<Self> {
        let tcfg = TransportConfig {
            max_packet_len,
            ..Default::default()
        };
        Ok(QpSet {
            transport: UdpTransport::bind(local, &tcfg)?,
            qps: BTreeMap::new(),
            next_tx: 0,
            stats: QpSetStats::default(),
        })
    }

    /// Adds a QP; it must send from this set's address and port.
    pub fn add(&mut self, qp: RcQueuePair) -> io::Result<()> {
        let la = self.transport.local_addr();
        let c = qp.config();
        if Ipv4Addr::from(c.local_ip) != *la.ip() || c.udp_src_port != la.port() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "QP's address is not the set's",
            ));
        }
        if qp.max_packet_len() > self.transport.max_packet_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "transport slots are smaller than the QP's packets",
            ));
        }
        self.qps.insert(c.local_qpn, qp);
        Ok(())
    }

    pub fn qp_mut(&mut self, qpn: u32) -> Option<&mut RcQueuePair> {
        self.qps.get_mut(&qpn)
    }
    pub fn qp(&self, qpn: u32) -> Option<&RcQueuePair> {
        self.qps.get(&qpn)
    }
    pub fn qpns(&self) -> impl Iterator<Item = u32> + '_ {
        self.qps.keys().copied()
    }
    pub fn stats(&self) -> &QpSetStats {
        &self.stats
    }
    /// The shared socket's counters.
    pub fn transport_stats(&self) -> &crate::udp::TransportStats {
        self.transport.stats()
    }

    /// One round without blocking: received packets to their QPs, due timers, then
    /// transmissions from every QP in turn. Returns whether anything happened.
    pub fn poll_once(&mut self, clock: &Clock) -> io::Result<bool> {
        let now = clock.now();
        let (qps, stats) = (&mut self.qps, &mut self.stats);
        let received = self.transport.recv_with(|pkt| {
            // BTH's destination QPN: bytes 5..8 of the BTH.
            let at = IPV4_HEADER_LEN + UDP_HEADER_LEN;
            let Some(b) = pkt.get(at..at + BTH_LEN) else {
                stats.unknown_qpn += 1;
                return;
            };
            let qpn = u32::from_be_bytes([0, b[5], b[6], b[7]]);
            match qps.get_mut(&qpn) {
                Some(qp) => {
                    if qp.handle_packet(now, pkt).is_err() {
                        stats.qp_rejects += 1;
                    }
                }
                None => stats.unknown_qpn += 1,
            }
        })?;
        let now = clock.now();
        let mut fired = false;
        for qp in self.qps.values_mut() {
            if qp.poll_timeout().is_some_and(|t| t <= now) {
                qp.handle_timeout(now);
                fired = true;
            }
        }
        // Round-robin: each QP offers one packet per turn until none has any.
        let keys: Vec<u32> = self.qps.keys().copied().collect();
        let start = keys.iter().position(|&k| k >= self.next_tx).unwrap_or(0);
        let order: Vec<u32> = keys[start..]
            .iter()
            .chain(&keys[..start])
            .copied()
            .collect();
        let mut sent_total = 0;
        loop {
            let mut idle_turns = 0;
            let mut i = 0;
            let qps = &mut self.qps;
            let sent = self.transport.send_batch_with(|buf| {
                while idle_turns < order.len() {
                    let k = order[i % order.len()];
                    i += 1;
                    let qp = qps.get_mut(&k);
                    if let Some(n) = qp.and_then(|qp| qp.poll_transmit(now, buf)).map(|t| t.len) {
                        idle_turns = 0;
                        return Some(n);
                    }
                    idle_turns += 1;
                }
                None
            })?;
            sent_total += sent;
            if sent < self.transport.batch_size() {
                break;
            }
        }
        if let Some(&k) = order.get(1) {
            self.next_tx = k;
        }
        Ok(received > 0 || fired || sent_total > 0)
    }

    /// Blocks until a packet arrives, `also` is readable, a QP's deadline comes, or
    /// `max_wait` passes.
    pub fn wait(
        &mut self,
        clock: &Clock,
        also: Option<RawFd>,
        max_wait: std::time::Duration,
    ) -> io::Result<()> {
        let now = clock.now();
        let mut timeout = max_wait;
        for qp in self.qps.values() {
            if let Some(t) = qp.poll_timeout() {
                timeout = timeout.min(clock.until(now, t));
            }
        }
        wait_readable(
            [self.transport.as_raw_fd(), also.unwrap_or(-1)],
            Some(timeout),
        )?;
        Ok(())
    }
}
