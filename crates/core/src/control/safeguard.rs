//! Safeguard fallback (Cepheus §V-D): switch a group back to application-layer
//! multicast when in-network multicast cannot work, that is when MFT registration
//! failed, or when the multicast's throughput falls below a fraction (the paper's
//! example: 50%) of what it achieves under normal conditions, as abnormal loss from a
//! misconfigured switch or server would make it.
//!
//! [`SafeguardMonitor`] runs beside the multicast source's QP. The driver reports
//! acknowledged bytes ([`handle_acked`](SafeguardMonitor::handle_acked)) and whether the source
//! has anything to send ([`handle_busy`](SafeguardMonitor::handle_busy) /
//! [`handle_idle`](SafeguardMonitor::handle_idle)); the monitor decides once, and the decision
//! is sticky.
//!
//! # How throughput is measured
//!
//! Throughput is acknowledged bytes per unit of *busy* time. The monitor keeps a clock
//! that runs only while the source is busy, so an application that has nothing to send
//! is not "slow": idle time is not in the denominator, and a window can span an idle
//! gap. The first `grace` of every busy period is not counted either, since a burst's
//! first ACK comes a round trip after its first packet. (Bytes acknowledged during the
//! grace are counted, which can only raise the measurement: the monitor errs toward not
//! falling back.)
//!
//! The window slides over busy time in [`SLOTS`] slots: the rate is the bytes in the
//! slots covering the last `window` of busy time divided by the busy time they span.
//! No decision is made before a whole `window` of busy time has passed, so a transfer
//! that just started is never judged. While busy, [`poll_timeout`](SafeguardMonitor::poll_timeout)
//! asks to be woken at each slot boundary, so a source whose ACKs stopped altogether is
//! caught by time passing alone. All arithmetic is integer; the same inputs give the
//! same decision at the same instant.

use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// Slots a window is divided into: the resolution of the sliding window (the span
/// measured is between `(SLOTS - 1) / SLOTS` and all of a window).
pub const SLOTS: u64 = 32;

/// What the monitor watches for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SafeguardConfig {
    /// The group's throughput under normal conditions (bits per second of acknowledged
    /// payload), e.g. the line rate of the source's link or a measured baseline.
    pub expected_bps: u64,
    /// Fall back when the measured rate is below `threshold × expected_bps`
    /// (0 < threshold ≤ 1). The paper's example is 0.5.
    pub threshold: f64,
    /// Busy time the rate is averaged over. Long enough to ride out congestion control's
    /// swings (DCQCN recovers within milliseconds), short enough to fall back quickly.
    pub window: Duration,
    /// Busy time not measured at the start of each busy period (about a round trip).
    pub grace: Duration,
}

impl SafeguardConfig {
    /// Threshold 0.5, a 10 ms window, a 100 µs grace.
    pub fn new(expected_bps: u64) -> Self {
        SafeguardConfig {
            expected_bps,
            threshold: 0.5,
            window: Duration::from_ms(10),
            grace: Duration::from_us(100),
        }
    }

    pub fn validate(&self) -> Result<(), SafeguardConfigError> {
        if self.expected_bps == 0 {
            return Err(SafeguardConfigError::ZeroExpectedRate);
        }
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err(SafeguardConfigError::Threshold);
        }
        if self.window.as_ps() < SLOTS {
            return Err(SafeguardConfigError::Window);
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SafeguardConfigError {
    #[error("the expected rate must be positive")]
    ZeroExpectedRate,
    #[error("the threshold must be a fraction in (0, 1]")]
    Threshold,
    #[error("the window must be at least {SLOTS} ps")]
    Window,
}

/// Why the group should fall back to application-layer multicast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallbackReason {
    /// MFT registration failed (a switch refused, or members never confirmed).
    RegistrationFailed,
    /// The rate over the last window of busy time was below the threshold.
    LowThroughput {
        measured_bps: u64,
        expected_bps: u64,
    },
}

/// Watches one multicast source and decides, at most once, to fall back (Cepheus §V-D).
///
/// The monitor starts idle. Drivers call [`handle_busy`](Self::handle_busy) when the source
/// gets something to send, [`handle_idle`](Self::handle_idle) when its send queue is empty and
/// everything is acknowledged, [`handle_acked`](Self::handle_acked) for every acknowledgement
/// that completes bytes, and [`handle_timeout`](Self::handle_timeout) at
/// [`poll_timeout`](Self::poll_timeout); then [`poll_event`](Self::poll_event).
/// Times that go backwards are treated as the latest time seen.
#[derive(Clone, Debug)]
pub struct SafeguardMonitor {
    cfg: SafeguardConfig,
    /// `threshold × expected_bps`, rounded down.
    threshold_bps: u64,
    /// Width of one slot, ps of busy time.
    slot: u64,
    busy: bool,
    /// Real time up to which busy time has been accounted.
    clock_at: Instant,
    /// Busy time before this instant is grace, not measured.
    grace_until: Instant,
    /// Busy time measured so far, ps.
    busy_ps: u64,
    /// (slot index, bytes acknowledged in it), ascending, the last `SLOTS` slots at most.
    slots: VecDeque<(u64, u64)>,
    decision: Option<FallbackReason>,
    reported: bool,
}

impl SafeguardMonitor {
    pub fn new(cfg: SafeguardConfig) -> Result<Self, SafeguardConfigError> {
        cfg.validate()?;
        Ok(SafeguardMonitor {
            threshold_bps: (cfg.expected_bps as f64 * cfg.threshold) as u64,
            slot: cfg.window.as_ps() / SLOTS,
            cfg,
            busy: false,
            clock_at: Instant::ZERO,
            grace_until: Instant::ZERO,
            busy_ps: 0,
            slots: VecDeque::new(),
            decision: None,
            reported: false,
        })
    }

    pub fn config(&self) -> &SafeguardConfig {
        &self.cfg
    }
    pub fn is_busy(&self) -> bool {
        self.busy
    }
    /// Busy time measured so far (grace excluded).
    pub fn busy_time(&self) -> Duration {
        Duration::from_ps(self.busy_ps)
    }
    /// The decision, once taken (whether or not `poll_event` reported it yet).
    pub fn decision(&self) -> Option<FallbackReason> {
        self.decision
    }

    /// Acknowledged bytes per second over the last window of busy time, once a whole
    /// window has been measured (as of the last input).
    pub fn measured_bps(&self) -> Option<u64> {
        if self.busy_ps < self.cfg.window.as_ps() {
            return None;
        }
        let k = self.busy_ps / self.slot;
        let lo = (k + 1).saturating_sub(SLOTS);
        let bytes: u128 = self
            .slots
            .iter()
            .filter(|(i, _)| *i >= lo)
            .map(|(_, b)| *b as u128)
            .sum();
        // busy_ps >= window >= SLOTS * slot > lo * slot, so the span is positive.
        let span = (self.busy_ps - lo * self.slot).max(1) as u128;
        Some((bytes * 8 * 1_000_000_000_000 / span).min(u64::MAX as u128) as u64)
    }

    /// Moves the busy clock to `now`.
    fn advance(&mut self, now: Instant) {
        let now = now.max(self.clock_at);
        if self.busy {
            let from = self.clock_at.max(self.grace_until);
            self.busy_ps = self
                .busy_ps
                .saturating_add(now.saturating_since(from).as_ps());
        }
        self.clock_at = now;
    }

    fn evaluate(&mut self) {
        if self.decision.is_some() {
            return;
        }
        if let Some(measured_bps) = self.measured_bps() {
            if measured_bps < self.threshold_bps {
                self.decision = Some(FallbackReason::LowThroughput {
                    measured_bps,
                    expected_bps: self.cfg.expected_bps,
                });
            }
        }
    }

    /// The source has something to send from `now` on.
    pub fn handle_busy(&mut self, now: Instant) {
        if self.decision.is_some() {
            return;
        }
        self.advance(now);
        if !self.busy {
            self.busy = true;
            self.grace_until = self.clock_at + self.cfg.grace;
        }
    }

    /// The source has nothing to send and nothing unacknowledged from `now` on: the
    /// time until the next [`handle_busy`](Self::handle_busy) does not count.
    pub fn handle_idle(&mut self, now: Instant) {
        if self.decision.is_some() {
            return;
        }
        self.advance(now);
        self.evaluate();
        self.busy = false;
    }

    /// `bytes` of multicast payload were acknowledged (by all receivers) at `now`.
    pub fn handle_acked(&mut self, now: Instant, bytes: u64) {
        if self.decision.is_some() {
            return;
        }
        self.advance(now);
        let k = self.busy_ps / self.slot;
        match self.slots.back_mut() {
            Some((i, b)) if *i == k => *b = b.saturating_add(bytes),
            _ => self.slots.push_back((k, bytes)),
        }
        while self.slots.front().is_some_and(|(i, _)| i + SLOTS <= k) {
            self.slots.pop_front();
        }
        self.evaluate();
    }

    /// MFT registration failed: fall back at once.
    pub fn handle_registration_failed(&mut self) {
        if self.decision.is_none() {
            self.decision = Some(FallbackReason::RegistrationFailed);
        }
    }

    /// Lets time pass: a source that stays busy without ACKs is judged by this alone.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.decision.is_some() {
            return;
        }
        self.advance(now);
        self.evaluate();
    }

    /// When the rate should next be checked: the instant the busy clock reaches a whole
    /// window, then each slot boundary. `None` while idle or once decided.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.busy || self.decision.is_some() {
            return None;
        }
        let target = self
            .cfg
            .window
            .as_ps()
            .max((self.busy_ps / self.slot + 1).saturating_mul(self.slot));
        let from = self.clock_at.max(self.grace_until);
        Some(from + Duration::from_ps(target.saturating_sub(self.busy_ps)))
    }

    /// The decision, reported once.
    pub fn poll_event(&mut self) -> Option<FallbackReason> {
        if self.reported {
            return None;
        }
        self.reported = self.decision.is_some();
        self.decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBPS: u64 = 1_000_000_000;
    const STEP: Duration = Duration::from_us(10);

    fn cfg() -> SafeguardConfig {
        SafeguardConfig {
            expected_bps: 100 * GBPS,
            threshold: 0.5,
            window: Duration::from_ms(1),
            grace: Duration::from_us(10),
        }
    }

    /// Drives `m` from `from` to `to`: an ACK every 10 µs for what `rate_bps` delivers
    /// in 10 µs (the first a step after `from`), and timers when due, in time order.
    /// Returns when the decision was taken, if it was.
    fn run(m: &mut SafeguardMonitor, from: Instant, to: Instant, rate_bps: u64) -> Option<Instant> {
        let bytes = rate_bps / 8 / 100_000; // per 10 µs
        let mut next_ack = from + STEP;
        loop {
            let timer = m.poll_timeout().filter(|t| *t <= to);
            let ack = Some(next_ack).filter(|t| *t <= to);
            let now = match (timer, ack) {
                (Some(t), Some(a)) if t < a => {
                    m.handle_timeout(t);
                    t
                }
                (_, Some(a)) => {
                    if rate_bps > 0 {
                        m.handle_acked(a, bytes);
                    }
                    next_ack = a + STEP;
                    a
                }
                (Some(t), None) => {
                    m.handle_timeout(t);
                    t
                }
                (None, None) => return None,
            };
            if m.decision().is_some() {
                return Some(now);
            }
        }
    }

    fn ms(n: u64) -> Instant {
        Instant::ZERO + Duration::from_ms(n)
    }

    #[test]
    fn a_healthy_transfer_never_triggers() {
        for pct in [100, 60, 51] {
            let mut m = SafeguardMonitor::new(cfg()).unwrap();
            m.handle_busy(Instant::ZERO);
            assert_eq!(
                run(&mut m, Instant::ZERO, ms(20), pct * GBPS),
                None,
                "{pct}%"
            );
            let measured = m.measured_bps().unwrap();
            assert!(
                measured >= pct * GBPS && measured < pct * GBPS * 102 / 100,
                "{measured}"
            );
            assert_eq!(m.poll_event(), None);
        }
    }

    #[test]
    fn thirty_percent_triggers_after_one_window() {
        let decide = || {
            let mut m = SafeguardMonitor::new(cfg()).unwrap();
            m.handle_busy(Instant::ZERO);
            let at = run(&mut m, Instant::ZERO, ms(20), 30 * GBPS);
            (at, m.poll_event(), m.poll_event())
        };
        let (at, d, again) = decide();
        // One window of busy time after the grace, not before.
        assert_eq!(at, Some(Instant::ZERO + cfg().grace + cfg().window));
        match d {
            Some(FallbackReason::LowThroughput {
                measured_bps,
                expected_bps,
            }) => {
                assert_eq!(expected_bps, 100 * GBPS);
                assert!(
                    (30 * GBPS..31 * GBPS).contains(&measured_bps),
                    "{measured_bps}"
                );
            }
            d => panic!("{d:?}"),
        }
        assert_eq!(again, None, "reported once");
        // Deterministic: the same inputs give the same decision at the same instant.
        assert_eq!(decide(), (at, d, None));
    }

    #[test]
    fn a_just_started_transfer_is_not_judged() {
        let mut m = SafeguardMonitor::new(cfg()).unwrap();
        assert_eq!(m.poll_timeout(), None, "idle: no timer");
        m.handle_busy(Instant::ZERO);
        let first = Instant::ZERO + cfg().grace + cfg().window;
        assert_eq!(m.poll_timeout(), Some(first));
        // No ACK at all yet, but less than a window of busy time: no decision.
        m.handle_timeout(Instant::from_ps(first.as_ps() - 1));
        assert_eq!(m.measured_bps(), None);
        assert_eq!(m.poll_event(), None);
        // Still nothing by the end of the window: a blackhole is caught by time alone.
        m.handle_timeout(first);
        assert_eq!(
            m.poll_event(),
            Some(FallbackReason::LowThroughput {
                measured_bps: 0,
                expected_bps: 100 * GBPS
            })
        );
        assert_eq!(m.poll_timeout(), None, "decided: no timer");
    }

    #[test]
    fn an_idle_gap_does_not_trigger() {
        let mut m = SafeguardMonitor::new(cfg()).unwrap();
        m.handle_busy(Instant::ZERO);
        assert_eq!(run(&mut m, Instant::ZERO, ms(2), 100 * GBPS), None);
        m.handle_idle(ms(2));
        assert_eq!(m.poll_timeout(), None);
        // Fifty windows with nothing to send, with timers fired anyway.
        m.handle_timeout(ms(30));
        m.handle_timeout(ms(52));
        assert_eq!(
            m.busy_time(),
            Duration::from_ps(Duration::from_ms(2).as_ps() - cfg().grace.as_ps())
        );
        m.handle_busy(ms(52));
        assert_eq!(run(&mut m, ms(52), ms(55), 100 * GBPS), None);
        assert_eq!(m.poll_event(), None);

        // The same gap reported as busy (a source stuck with data and no ACKs) does trigger.
        let mut stuck = SafeguardMonitor::new(cfg()).unwrap();
        stuck.handle_busy(Instant::ZERO);
        run(&mut stuck, Instant::ZERO, ms(2), 100 * GBPS);
        let at = run(&mut stuck, ms(2), ms(52), 0).expect("falls back");
        // The average falls below 50% about half a window into the silence.
        let d = at.saturating_since(ms(2));
        assert!(
            d > Duration::from_us(450) && d < Duration::from_us(560),
            "{d}"
        );
        assert!(matches!(
            stuck.poll_event(),
            Some(FallbackReason::LowThroughput { .. })
        ));
    }

    #[test]
    fn short_bursts_with_idle_gaps_are_not_slow() {
        // 100 µs bursts at line rate, 1 ms apart; each burst's first ACK comes 10 µs
        // in (a round trip), covered by the grace.
        let mut m = SafeguardMonitor::new(cfg()).unwrap();
        for i in 0..100 {
            let start = Instant::ZERO + Duration::from_ms(i);
            m.handle_busy(start);
            assert_eq!(
                run(&mut m, start, start + Duration::from_us(100), 100 * GBPS),
                None
            );
            m.handle_idle(start + Duration::from_us(100));
        }
        assert!(m.busy_time() >= Duration::from_ms(9));
        assert!(m.measured_bps().unwrap() >= 100 * GBPS);
        assert_eq!(m.poll_event(), None);
    }

    #[test]
    fn a_slowdown_after_a_healthy_start_triggers_within_a_window() {
        let mut m = SafeguardMonitor::new(cfg()).unwrap();
        m.handle_busy(Instant::ZERO);
        assert_eq!(run(&mut m, Instant::ZERO, ms(5), 100 * GBPS), None);
        let at = run(&mut m, ms(5), ms(10), 20 * GBPS).expect("falls back");
        // The average crosses 50% once (100 x + 20 (1 - x)) < 50, i.e. x < 3/8 of the
        // window is still healthy: about 5/8 of a window (625 µs) into the slowdown.
        let d = at.saturating_since(ms(5));
        assert!(
            d > Duration::from_us(560) && d < Duration::from_us(700),
            "{d}"
        );
    }

    #[test]
    fn registration_failure_decides_at_once_and_sticks() {
        let mut m = SafeguardMonitor::new(cfg()).unwrap();
        m.handle_registration_failed();
        assert_eq!(m.poll_timeout(), None);
        m.handle_busy(Instant::ZERO);
        run(&mut m, Instant::ZERO, ms(3), 0);
        m.handle_registration_failed();
        assert_eq!(m.poll_event(), Some(FallbackReason::RegistrationFailed));
        assert_eq!(m.poll_event(), None);
        assert_eq!(m.decision(), Some(FallbackReason::RegistrationFailed));
    }

    #[test]
    fn time_going_backwards_is_harmless() {
        let mut m = SafeguardMonitor::new(cfg()).unwrap();
        m.handle_busy(ms(5));
        m.handle_acked(ms(1), 1000);
        m.handle_timeout(Instant::ZERO);
        m.handle_idle(ms(2));
        assert_eq!(m.busy_time(), Duration::ZERO);
        m.handle_acked(Instant::from_ps(u64::MAX), u64::MAX);
        m.handle_acked(Instant::from_ps(u64::MAX), u64::MAX);
        assert_eq!(m.poll_event(), None);
        // The end of time, busy, with absurd byte counts: no overflow anywhere.
        m.handle_busy(Instant::from_ps(u64::MAX - 1));
        m.handle_acked(Instant::from_ps(u64::MAX), u64::MAX);
        let mut late = SafeguardMonitor::new(cfg()).unwrap();
        late.handle_busy(Instant::ZERO);
        late.handle_acked(Instant::from_ps(u64::MAX), u64::MAX);
        late.handle_acked(Instant::from_ps(u64::MAX), u64::MAX);
        assert!(late.measured_bps().unwrap() > 100 * GBPS);
        assert_eq!(late.poll_timeout(), Some(Instant::from_ps(u64::MAX)));
        late.handle_timeout(Instant::from_ps(u64::MAX));
        assert_eq!(late.poll_event(), None);
    }

    proptest::proptest! {
        /// Any sequence of inputs at any times: no panic, a decision at most once, and
        /// timers that never point before the latest input.
        #[test]
        fn arbitrary_input_never_panics(
            ops in proptest::collection::vec((0u8..6, proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()), 0..64),
            window in 32u64..u64::MAX,
            grace in proptest::prelude::any::<u64>(),
        ) {
            let mut c = cfg();
            c.window = Duration::from_ps(window);
            c.grace = Duration::from_ps(grace);
            let mut m = SafeguardMonitor::new(c).unwrap();
            let mut decisions = 0;
            let mut latest = Instant::ZERO;
            for (op, t, bytes) in ops {
                let now = Instant::from_ps(t);
                latest = latest.max(now);
                match op {
                    0 => m.handle_busy(now),
                    1 => m.handle_idle(now),
                    2 | 3 => m.handle_acked(now, bytes),
                    4 => m.handle_timeout(now),
                    _ => m.handle_registration_failed(),
                }
                if let Some(t) = m.poll_timeout() {
                    proptest::prop_assert!(t >= latest);
                }
                decisions += m.poll_event().iter().count();
                proptest::prop_assert!(decisions <= 1);
            }
        }
    }

    #[test]
    fn config_is_validated() {
        let bad = |f: &dyn Fn(&mut SafeguardConfig)| {
            let mut c = cfg();
            f(&mut c);
            SafeguardMonitor::new(c).err()
        };
        assert_eq!(bad(&|_| {}), None);
        assert_eq!(
            bad(&|c| c.expected_bps = 0),
            Some(SafeguardConfigError::ZeroExpectedRate)
        );
        for t in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            assert_eq!(
                bad(&|c| c.threshold = t),
                Some(SafeguardConfigError::Threshold)
            );
        }
        assert_eq!(bad(&|c| c.threshold = 1.0), None);
        assert_eq!(
            bad(&|c| c.window = Duration::from_ps(SLOTS - 1)),
            Some(SafeguardConfigError::Window)
        );
        assert_eq!(bad(&|c| c.window = Duration::from_ps(SLOTS)), None);
        assert_eq!(SafeguardConfig::new(GBPS).threshold, 0.5);
    }
}
