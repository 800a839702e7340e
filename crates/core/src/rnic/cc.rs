//! The requester's rate-control hook: the reaction point of a congestion-control scheme
//! plugs in here (DCQCN arrives with the simulator; see ARCHITECTURE.md). The shape
//! follows quinn-proto's `congestion::Controller`: a small trait the QP calls on its
//! events, with no clock of its own.

use crate::time::{Duration, Instant};

/// Decides when the requester may put the next data packet on the wire.
pub trait RateController: Send + core::fmt::Debug {
    /// A CNP for this QP arrived (RoCEv2 Annex A17.9).
    fn on_cnp(&mut self, now: Instant);
    /// A data packet of `bytes` (IP packet length) was just handed to the driver.
    fn on_packet_sent(&mut self, now: Instant, bytes: usize);
    /// An ACK acknowledged `bytes` of new data.
    fn on_ack(&mut self, _now: Instant, _bytes: u64) {}
    /// Earliest time the next data packet may go; `None` means "now".
    fn next_send_time(&self) -> Option<Instant>;
    /// The controller's own timers (e.g. DCQCN's rate-increase timer).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    /// Current sending rate in bit/s, if the controller has one.
    fn rate_bps(&self) -> Option<u64> {
        None
    }
}

/// No rate control: send as fast as the window allows. The default.
#[derive(Debug, Default, Clone)]
pub struct Unlimited {
    /// CNPs seen (kept so tests and drivers can observe the hook firing).
    pub cnps: u64,
}
impl RateController for Unlimited {
    fn on_cnp(&mut self, _now: Instant) {
        self.cnps += 1;
    }
    fn on_packet_sent(&mut self, _now: Instant, _bytes: usize) {}
    fn next_send_time(&self) -> Option<Instant> {
        None
    }
}

/// A fixed-rate pacer: packets leave no faster than `rate_bps` on the wire.
#[derive(Debug, Clone)]
pub struct FixedRate {
    pub rate_bps: u64,
    next: Instant,
    pub cnps: u64,
}
impl FixedRate {
    pub fn new(rate_bps: u64) -> Self {
        FixedRate {
            rate_bps,
            next: Instant::ZERO,
            cnps: 0,
        }
    }
}
impl RateController for FixedRate {
    fn on_cnp(&mut self, _now: Instant) {
        self.cnps += 1;
    }
    fn on_packet_sent(&mut self, now: Instant, bytes: usize) {
        let start = if self.next > now { self.next } else { now };
        self.next = start + Duration::for_bytes(bytes as u64, self.rate_bps);
    }
    fn next_send_time(&self) -> Option<Instant> {
        Some(self.next)
    }
    fn rate_bps(&self) -> Option<u64> {
        Some(self.rate_bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn fixed_rate_spaces_packets() {
        let mut r = FixedRate::new(8_000_000_000); // 1 byte per ns
        r.on_packet_sent(Instant::ZERO, 1000);
        assert_eq!(r.next_send_time(), Some(Instant::from_ns(1000)));
        r.on_packet_sent(Instant::from_ns(500), 1000); // sent early: still queues behind
        assert_eq!(r.next_send_time(), Some(Instant::from_ns(2000)));
        r.on_packet_sent(Instant::from_ns(5000), 500);
        assert_eq!(r.next_send_time(), Some(Instant::from_ns(5500)));
    }
}
