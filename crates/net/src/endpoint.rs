//! [`Endpoint`]: one [`RcQueuePair`] driven in real time over a [`UdpTransport`].
//!
//! The driver has no protocol logic: it feeds received packets to `handle_packet`,
//! calls `handle_timeout` when `poll_timeout` says so, and sends what `poll_transmit`
//! produces. Everything RoCE does comes from the core.

use crate::udp::{wait_readable, UdpTransport};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rocast_core::rnic::RcQueuePair;
use rocast_core::time::Instant;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Real time as the core's [`Instant`]: picoseconds since the clock was made.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: std::time::Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
        }
    }
    pub fn now(&self) -> Instant {
        let d = self.start.elapsed();
        Instant(d.as_secs() * 1_000_000_000_000 + d.subsec_nanos() as u64 * 1_000)
    }
    /// The real duration from `now` until core instant `t` (zero if it has passed).
    pub fn until(&self, now: Instant, t: Instant) -> std::time::Duration {
        std::time::Duration::from_nanos(t.saturating_since(now).as_ns())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Seeded random drops of received packets (a lossy link, on the receive side).
#[derive(Clone, Debug)]
pub struct LossInjector {
    rng: ChaCha8Rng,
    threshold: u64,
    always: bool,
}

impl LossInjector {
    /// Drops each packet independently with probability `p` (clamped to 0..=1).
    pub fn new(p: f64, seed: u64) -> Self {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        LossInjector {
            rng: ChaCha8Rng::seed_from_u64(seed),
            threshold: (p * 2f64.powi(64)) as u64,
            always: p >= 1.0,
        }
    }
    pub fn drop_next(&mut self) -> bool {
        if self.threshold == 0 {
            return false;
        }
        self.always || self.rng.next_u64() < self.threshold
    }
}

/// Counters of the driver itself (the QP and transport keep their own).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Packets dropped by the loss injector before reaching the QP.
    pub injected_drops: u64,
    /// Packets the QP refused (bad ICRC, wrong QP, malformed...; see `QpStats`).
    pub qp_rejects: u64,
    /// Times the loop blocked in `ppoll`.
    pub waits: u64,
    /// Longest time between two arrivals while our requester had packets unacknowledged
    /// (a diagnostic: compare with the retransmission timeout).
    pub max_ack_gap: rocast_core::time::Duration,
}

/// What one [`Endpoint::poll_once`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    pub received: usize,
    pub sent: usize,
    pub timer_fired: bool,
}

impl Activity {
    pub fn is_idle(&self) -> bool {
        self.received == 0 && self.sent == 0 && !self.timer_fired
    }
}

/// An RC queue pair on a UDP socket.
#[derive(Debug)]
pub struct Endpoint {
    pub qp: RcQueuePair,
    pub transport: UdpTransport,
    loss: Option<LossInjector>,
    last_rx: Option<Instant>,
    /// At most this many `recvmmsg` batches per `poll_once`, so sending is not starved.
    pub rx_batches_per_poll: usize,
    stats: EndpointStats,
}

impl Endpoint {
    /// Joins a QP and a transport. The QP's `local_ip` and `udp_src_port` must be the
    /// transport's bound address and port (the transport refuses other packets).
    pub fn new(
        qp: RcQueuePair,
        transport: UdpTransport,
        loss: Option<LossInjector>,
    ) -> io::Result<Self> {
        let la = transport.local_addr();
        let c = qp.config();
        if std::net::Ipv4Addr::from(c.local_ip) != *la.ip() || c.udp_src_port != la.port() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "QP sends from {}:{} but the socket is bound to {la}",
                    c.local_ip, c.udp_src_port
                ),
            ));
        }
        if qp.max_packet_len() > transport.max_packet_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "transport slots are smaller than the QP's packets",
            ));
        }
        Ok(Endpoint {
            qp,
            transport,
            loss,
            last_rx: None,
            rx_batches_per_poll: 4,
            stats: EndpointStats::default(),
        })
    }

    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// One round without blocking, reading the clock as it goes: feed received packets
    /// to the QP, fire due timers, send what the QP has to send — a batch at a time,
    /// alternating, for at most `rx_batches_per_poll` rounds. Packets that already
    /// arrived are handled before timers fire, so an ACK waiting in the socket beats
    /// the retransmission timer. Afterwards the caller drains `qp.poll_event()`.
    pub fn poll_once(&mut self, clock: &Clock) -> io::Result<Activity> {
        let mut act = Activity::default();
        let batch = self.transport.batch_size();
        for _ in 0..self.rx_batches_per_poll.max(1) {
            let now = clock.now();
            let (qp, loss, stats) = (&mut self.qp, &mut self.loss, &mut self.stats);
            let received = self.transport.recv_with(|pkt| {
                if loss.as_mut().is_some_and(|l| l.drop_next()) {
                    stats.injected_drops += 1;
                    return;
                }
                if qp.handle_packet(now, pkt).is_err() {
                    stats.qp_rejects += 1;
                }
            })?;
            act.received += received;
            if received > 0 {
                if let Some(t) = self.last_rx {
                    self.stats.max_ack_gap = self.stats.max_ack_gap.max(now.saturating_since(t));
                }
            }
            // The gap counts only while something is unacknowledged.
            self.last_rx = (self.qp.outstanding() > 0)
                .then_some(self.last_rx.filter(|_| received == 0).unwrap_or(now));
            let now = if received > 0 { clock.now() } else { now };
            if self.qp.poll_timeout().is_some_and(|t| t <= now) {
                self.qp.handle_timeout(now);
                act.timer_fired = true;
            }
            let qp = &mut self.qp;
            let sent = self
                .transport
                .send_batch_with(|buf| qp.poll_transmit(now, buf).map(|t| t.len))?;
            act.sent += sent;
            if received < batch && sent < batch {
                break;
            }
        }
        Ok(act)
    }

    /// Blocks until a packet arrives, `also` becomes readable, the QP's next deadline
    /// comes, or `max_wait` passes — whichever is first. Returns whether `also` is readable.
    pub fn wait(
        &mut self,
        clock: &Clock,
        also: Option<RawFd>,
        max_wait: std::time::Duration,
    ) -> io::Result<bool> {
        let now = clock.now();
        let mut timeout = max_wait;
        if let Some(t) = self.qp.poll_timeout() {
            timeout = timeout.min(clock.until(now, t));
        }
        self.stats.waits += 1;
        let r = wait_readable(
            [self.transport.as_raw_fd(), also.unwrap_or(-1)],
            Some(timeout),
        )?;
        Ok(r[1])
    }
}
