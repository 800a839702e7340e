//! The requester's rate-control hook: the reaction point of a congestion-control scheme
//! plugs in here. [`Dcqcn`] is DCQCN's reaction point (Zhu et al., SIGCOMM 2015, §3.3 and
//! Fig. 8), as the HPCC simulator's `RdmaHw` implements it; the notification point is the
//! responder's CNP generation (`QpConfig::cnp_interval`). The shape
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

/// A fixed-rate pacer: packets leave no faster than `rate_bps` on the wire, with an
/// optional burst allowance (a token bucket of `burst` worth of the rate).
///
/// A hardware NIC paces each packet; a software endpoint that sleeps between packets
/// wakes tens of microseconds late, so with no burst it sends one packet per wakeup and
/// falls far below the rate. A burst lets a late wakeup catch up, and the average stays
/// exactly `rate_bps`.
#[derive(Debug, Clone)]
pub struct FixedRate {
    pub rate_bps: u64,
    /// How far behind the schedule the pacer may fall and then catch up at once.
    pub burst: Duration,
    next: Instant,
    pub cnps: u64,
}
impl FixedRate {
    pub fn new(rate_bps: u64) -> Self {
        Self::with_burst(rate_bps, 0)
    }
    /// A pacer that may send `burst_bytes` back to back after falling behind.
    pub fn with_burst(rate_bps: u64, burst_bytes: u64) -> Self {
        FixedRate {
            rate_bps,
            burst: Duration::for_bytes(burst_bytes, rate_bps.max(1)),
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
        // Credit older than the burst is lost: the schedule restarts at now − burst.
        let floor = Instant::from_ps(now.as_ps().saturating_sub(self.burst.as_ps()));
        let start = if self.next > floor { self.next } else { floor };
        self.next = start + Duration::for_bytes(bytes as u64, self.rate_bps);
    }
    fn next_send_time(&self) -> Option<Instant> {
        Some(self.next)
    }
    fn rate_bps(&self) -> Option<u64> {
        Some(self.rate_bps)
    }
}

/// DCQCN reaction-point parameters. Field docs name each value's role in the DCQCN paper
/// (Zhu et al., SIGCOMM 2015) and its knob in the HPCC simulator (`mix/config.txt`).
#[derive(Debug, Clone, PartialEq)]
pub struct DcqcnConfig {
    /// The NIC's line rate: the starting and the highest rate.
    pub line_rate_bps: u64,
    /// Floor of the rate (`MIN_RATE`).
    pub min_rate_bps: u64,
    /// EWMA gain g of alpha (`EWMA_GAIN`; 1/256 in both sources).
    pub g: f64,
    /// Alpha update period K (`ALPHA_RESUME_INTERVAL`): each tick alpha moves towards 1
    /// if a CNP arrived since the previous tick and decays towards 0 otherwise.
    pub alpha_interval: Duration,
    /// How often a pending CNP cuts the rate (`RATE_DECREASE_INTERVAL`). Zero cuts at
    /// once on every CNP, as the paper's pseudo-code does.
    pub decrease_interval: Duration,
    /// Rate-increase timer T (`RP_TIMER`).
    pub increase_timer: Duration,
    /// Rate-increase byte counter B; `None` disables it (HPCC's `RdmaHw` has none).
    pub byte_counter: Option<u64>,
    /// Fast-recovery steps F (`FAST_RECOVERY_TIMES`).
    pub fast_recovery_steps: u32,
    /// Additive-increase step R_AI (`RATE_AI`).
    pub rate_ai_bps: u64,
    /// Hyper-increase step R_HAI (`RATE_HAI`).
    pub rate_hai_bps: u64,
    /// Rate multiplier on the first CNP (`RATE_ON_FIRST_CNP`; 1 in both sources).
    pub rate_on_first_cnp: f64,
    /// Also set the target rate to the current rate on a cut that comes before any
    /// increase (`CLAMP_TARGET_RATE`).
    pub clamp_target_rate: bool,
}

impl DcqcnConfig {
    /// The DCQCN paper's parameters (Zhu et al. 2015, §5): g = 1/256, K = 55 µs, T = 55 µs,
    /// B = 10 MB, F = 5, R_AI = 40 Mb/s; R_HAI is not given there and is set to 10 R_AI; the
    /// rate is cut on every CNP (the NP already spaces CNPs 50 µs apart). These are the
    /// values as the paper's text is commonly quoted; the paper PDF is not in
    /// `shared/papers`, so they are not checked against it here.
    pub fn paper(line_rate_bps: u64) -> Self {
        DcqcnConfig {
            line_rate_bps,
            min_rate_bps: 100_000_000,
            g: 1.0 / 256.0,
            alpha_interval: Duration::from_us(55),
            decrease_interval: Duration::ZERO,
            increase_timer: Duration::from_us(55),
            byte_counter: Some(10 * 1024 * 1024),
            fast_recovery_steps: 5,
            rate_ai_bps: 40_000_000,
            rate_hai_bps: 400_000_000,
            rate_on_first_cnp: 1.0,
            clamp_target_rate: true,
        }
    }

    /// The HPCC paper's DCQCN settings (Li et al., SIGCOMM 2019), as `run.py` of
    /// `alibaba-edu/High-Precision-Congestion-Control` (commit 9f4be2a) passes them for
    /// `--cc dcqcn`: g = 1/256, alpha tick 1 µs, cut check every 4 µs, T = 300 µs, no byte
    /// counter (its `RdmaHw` has none), F = 1, R_AI = 5 Mb/s and R_HAI = 50 Mb/s per
    /// 25 Gb/s of line rate, min rate 1 Gb/s, no target clamp.
    pub fn hpcc(line_rate_bps: u64) -> Self {
        let per_25g = (line_rate_bps / 25_000_000_000).max(1);
        DcqcnConfig {
            line_rate_bps,
            g: 1.0 / 256.0,
            alpha_interval: Duration::from_us(1),
            decrease_interval: Duration::from_us(4),
            increase_timer: Duration::from_us(300),
            byte_counter: None,
            fast_recovery_steps: 1,
            rate_ai_bps: 5_000_000 * per_25g,
            rate_hai_bps: 50_000_000 * per_25g,
            rate_on_first_cnp: 1.0,
            clamp_target_rate: false,
            min_rate_bps: 1_000_000_000,
        }
    }

    /// NVIDIA ConnectX-5's firmware defaults (the `roce_rp` knobs of the mlx5 driver's
    /// `/sys/class/net/<if>/ecn/` and `mlxconfig`, as NVIDIA's "DCQCN Parameters"
    /// documentation lists them; `docs/cepheus/readings.md` cites each): alpha EWMA
    /// `dce_tcp_g` = 1019/1024 (g = 5/1024) ticking every `dce_tcp_rtt` = 1 µs, a cut
    /// checked every `rate_reduce_monitor_period` = 4 µs, increase timer
    /// `rpg_time_reset` = 300 µs, byte counter `rpg_byte_reset` = 32767 B, fast
    /// recovery `rpg_threshold` = 1 step, `rpg_ai_rate` = 5 Mb/s and `rpg_hai_rate` =
    /// 50 Mb/s (absolute, whatever the line rate), `rpg_min_rate` = 1 Mb/s,
    /// `clamp_tgt_rate` = 0. Cepheus §V-C: "go-back-N and DCQCN, same as Mellanox
    /// ConnectX-5 RNIC".
    pub fn connectx5(line_rate_bps: u64) -> Self {
        DcqcnConfig {
            line_rate_bps,
            min_rate_bps: 1_000_000,
            g: 5.0 / 1024.0,
            alpha_interval: Duration::from_us(1),
            decrease_interval: Duration::from_us(4),
            increase_timer: Duration::from_us(300),
            byte_counter: Some(32767),
            fast_recovery_steps: 1,
            rate_ai_bps: 5_000_000,
            rate_hai_bps: 50_000_000,
            rate_on_first_cnp: 1.0,
            clamp_target_rate: false,
        }
    }
}

/// DCQCN's reaction point: a rate-based pacer whose rate is cut multiplicatively by
/// `alpha / 2` when CNPs arrive and recovers in three stages (fast recovery towards the
/// pre-cut target, then additive, then hyper increase of the target), driven by a timer
/// and an optional byte counter.
///
/// Alpha ticks are applied lazily (a run of k quiet ticks multiplies alpha by (1-g)^k),
/// so an idle or uncongested QP costs no timer events; the result equals ticking every
/// `alpha_interval`, as the HPCC simulator does.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    cfg: DcqcnConfig,
    rate: f64,
    target: f64,
    alpha: f64,
    /// Set once the first CNP arrived: before that the QP runs at line rate, timer-free.
    started: bool,
    alpha_cnp: bool,
    next_alpha_tick: Instant,
    /// A CNP arrived since the last cut.
    cut_pending: bool,
    next_cut_check: Instant,
    next_increase: Option<Instant>,
    timer_count: u32,
    byte_count: u32,
    bytes_since: u64,
    next_send: Instant,
    pub cnps: u64,
    pub cuts: u64,
}

impl Dcqcn {
    pub fn new(cfg: DcqcnConfig) -> Self {
        let line = cfg.line_rate_bps as f64;
        Dcqcn {
            rate: line,
            target: line,
            alpha: 1.0,
            started: false,
            alpha_cnp: false,
            next_alpha_tick: Instant::ZERO,
            cut_pending: false,
            next_cut_check: Instant::ZERO,
            next_increase: None,
            timer_count: 0,
            byte_count: 0,
            bytes_since: 0,
            next_send: Instant::ZERO,
            cnps: 0,
            cuts: 0,
            cfg,
        }
    }
    pub fn config(&self) -> &DcqcnConfig {
        &self.cfg
    }
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    pub fn target_rate_bps(&self) -> u64 {
        self.target as u64
    }

    /// Applies every alpha tick at or before `now`.
    fn advance_alpha(&mut self, now: Instant) {
        if !self.started || self.next_alpha_tick > now {
            return;
        }
        let k = self.cfg.alpha_interval.as_ps();
        let ticks = if k == 0 {
            1
        } else {
            (now.as_ps() - self.next_alpha_tick.as_ps()) / k + 1
        };
        let keep = 1.0 - self.cfg.g;
        // The first due tick sees the CNP flag; the rest are quiet.
        self.alpha = keep * self.alpha + if self.alpha_cnp { self.cfg.g } else { 0.0 };
        self.alpha_cnp = false;
        if ticks > 1 {
            self.alpha *= keep.powi((ticks - 1).min(i32::MAX as u64) as i32);
        }
        self.next_alpha_tick = Instant::from_ps(self.next_alpha_tick.as_ps() + ticks * k.max(1));
    }

    fn cut(&mut self, now: Instant) {
        self.advance_alpha(now);
        let clamp = self.cfg.clamp_target_rate || self.timer_count != 0 || self.byte_count != 0;
        if clamp {
            self.target = self.rate;
        }
        self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.cfg.min_rate_bps as f64);
        self.cut_pending = false;
        self.cuts += 1;
        self.timer_count = 0;
        self.byte_count = 0;
        self.bytes_since = 0;
        self.next_increase = Some(now + self.cfg.increase_timer);
    }

    /// One rate-increase event (timer or byte counter), by the stage the counters give.
    fn increase(&mut self) {
        let f = self.cfg.fast_recovery_steps;
        let (hi, lo) = if self.cfg.byte_counter.is_some() {
            (
                self.timer_count.max(self.byte_count),
                self.timer_count.min(self.byte_count),
            )
        } else {
            (self.timer_count, self.timer_count)
        };
        let line = self.cfg.line_rate_bps as f64;
        if hi < f {
            // fast recovery: halve the distance to the target
        } else if lo > f {
            self.target = (self.target + self.cfg.rate_hai_bps as f64).min(line);
        } else {
            self.target = (self.target + self.cfg.rate_ai_bps as f64).min(line);
        }
        self.rate = ((self.rate + self.target) / 2.0).min(line);
    }

    fn at_line_rate(&self) -> bool {
        self.rate >= self.cfg.line_rate_bps as f64 && self.target >= self.cfg.line_rate_bps as f64
    }
}

impl RateController for Dcqcn {
    fn on_cnp(&mut self, now: Instant) {
        self.cnps += 1;
        if !self.started {
            self.started = true;
            self.alpha = 1.0;
            self.alpha_cnp = false;
            self.next_alpha_tick = now + self.cfg.alpha_interval;
            self.rate *= self.cfg.rate_on_first_cnp;
            self.target = self.rate;
            self.next_cut_check = now + self.cfg.decrease_interval;
        } else {
            self.advance_alpha(now);
            self.alpha_cnp = true;
        }
        if self.cfg.decrease_interval == Duration::ZERO {
            self.cut(now);
        } else if !self.cut_pending {
            self.cut_pending = true;
            // The periodic check runs on a fixed grid from the first CNP; find its next tick.
            let d = self.cfg.decrease_interval.as_ps();
            if self.next_cut_check <= now {
                let behind = (now.as_ps() - self.next_cut_check.as_ps()) / d + 1;
                self.next_cut_check = Instant::from_ps(self.next_cut_check.as_ps() + behind * d);
            }
        }
    }

    fn on_packet_sent(&mut self, now: Instant, bytes: usize) {
        let start = if self.next_send > now {
            self.next_send
        } else {
            now
        };
        self.next_send = start + Duration::for_bytes(bytes as u64, self.rate as u64);
        if let (Some(b), true) = (self.cfg.byte_counter, self.started) {
            self.bytes_since += bytes as u64;
            if self.bytes_since >= b && !self.at_line_rate() {
                self.bytes_since -= b;
                self.increase();
                self.byte_count += 1;
            }
        }
    }

    fn next_send_time(&self) -> Option<Instant> {
        Some(self.next_send)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let cut = self.cut_pending.then_some(self.next_cut_check);
        let inc = self.next_increase.filter(|_| !self.at_line_rate());
        [cut, inc].into_iter().flatten().min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.cut_pending && self.next_cut_check <= now {
            let at = self.next_cut_check;
            self.cut(at);
            self.next_cut_check = at + self.cfg.decrease_interval;
        }
        while let Some(t) = self.next_increase {
            if t > now || self.at_line_rate() {
                break;
            }
            self.increase();
            self.timer_count += 1;
            self.next_increase = Some(t + self.cfg.increase_timer);
        }
    }

    fn rate_bps(&self) -> Option<u64> {
        Some(self.rate as u64)
    }
}

#[cfg(test)]
mod tests {
    fn dcqcn_test_config() -> DcqcnConfig {
        DcqcnConfig {
            decrease_interval: Duration::ZERO,
            byte_counter: None,
            ..DcqcnConfig::paper(100_000_000_000)
        }
    }

    #[test]
    fn dcqcn_runs_at_line_rate_until_the_first_cnp() {
        let d = Dcqcn::new(dcqcn_test_config());
        assert_eq!(d.rate_bps(), Some(100_000_000_000));
        assert_eq!(d.poll_timeout(), None);
    }

    #[test]
    fn dcqcn_first_cnp_halves_the_rate_with_alpha_one() {
        let mut d = Dcqcn::new(dcqcn_test_config());
        d.on_cnp(Instant::from_us(10));
        // alpha starts at 1: rate * (1 - 1/2), target keeps the pre-cut rate.
        assert_eq!(d.rate_bps(), Some(50_000_000_000));
        assert_eq!(d.target_rate_bps(), 100_000_000_000);
        assert_eq!(d.poll_timeout(), Some(Instant::from_us(65)));
    }

    #[test]
    fn fixed_rate_bursts_after_a_late_wakeup_and_keeps_the_average() {
        // 8 Gb/s: a 1000-byte packet takes 1 µs. Burst allowance 4000 bytes (4 µs).
        let mut p = FixedRate::with_burst(8_000_000_000, 4000);
        let us = |n: u64| Instant::from_ps(n * 1_000_000);
        p.on_packet_sent(us(0), 1000);
        // Woken 10 µs late: up to 4 µs of credit, so 5 packets may go at once...
        let mut sent = 0;
        while p.next_send_time().unwrap() <= us(10) {
            p.on_packet_sent(us(10), 1000);
            sent += 1;
        }
        assert_eq!(sent, 5);
        // ...and then the schedule is back to one per µs.
        assert_eq!(p.next_send_time(), Some(us(11)));
        // Without a burst, one packet per wakeup.
        let mut q = FixedRate::new(8_000_000_000);
        q.on_packet_sent(us(0), 1000);
        q.on_packet_sent(us(10), 1000);
        assert_eq!(q.next_send_time(), Some(us(11)));
    }

    #[test]
    fn dcqcn_recovers_in_stages_fast_then_additive_then_hyper() {
        let cfg = dcqcn_test_config();
        let mut d = Dcqcn::new(cfg.clone());
        d.on_cnp(Instant::ZERO);
        d.on_cnp(Instant::ZERO); // second cut with alpha still 1: 25 G, target 50 G
        assert_eq!(d.rate_bps(), Some(25_000_000_000));
        assert_eq!(d.target_rate_bps(), 50_000_000_000);
        let t = cfg.increase_timer;
        let mut now = Instant::ZERO;
        let mut rates = vec![];
        for _ in 0..7 {
            now += t;
            d.handle_timeout(now);
            rates.push((
                d.rate_bps().unwrap() / 1_000_000,
                d.target_rate_bps() / 1_000_000,
            ));
        }
        // F = 5 fast-recovery steps keep the target, then one additive step (+40 Mb/s),
        // then hyper increase (+400 Mb/s).
        assert_eq!(
            rates,
            vec![
                (37500, 50000),
                (43750, 50000),
                (46875, 50000),
                (48437, 50000),
                (49218, 50000),
                (49629, 50040),
                (50034, 50440),
            ]
        );
    }

    #[test]
    fn dcqcn_alpha_decays_lazily_like_per_tick_updates() {
        let cfg = dcqcn_test_config();
        let mut lazy = Dcqcn::new(cfg.clone());
        lazy.on_cnp(Instant::ZERO);
        // 10 quiet ticks, then a CNP just after the 10th.
        let at = Instant::from_ps(cfg.alpha_interval.as_ps() * 10 + 1);
        lazy.on_cnp(at);
        let mut alpha = 1.0f64;
        for _ in 0..10 {
            alpha *= 1.0 - cfg.g;
        }
        assert!(
            (lazy.alpha() - alpha).abs() < 1e-12,
            "{} vs {alpha}",
            lazy.alpha()
        );
    }

    #[test]
    fn dcqcn_periodic_cut_waits_for_the_check_and_respects_the_floor() {
        let cfg = DcqcnConfig::hpcc(100_000_000_000);
        let mut d = Dcqcn::new(cfg.clone());
        d.on_cnp(Instant::ZERO);
        assert_eq!(
            d.rate_bps(),
            Some(100_000_000_000),
            "cut waits for the 4 µs check"
        );
        assert_eq!(d.poll_timeout(), Some(Instant::from_us(4)));
        d.handle_timeout(Instant::from_us(4));
        assert!(d.rate_bps().unwrap() < 51_000_000_000);
        for i in 0..200u64 {
            let t = Instant::from_us(5 + 4 * i);
            d.on_cnp(t);
            d.handle_timeout(Instant::from_us(8 + 4 * i));
        }
        assert_eq!(d.rate_bps(), Some(cfg.min_rate_bps));
    }

    #[test]
    fn dcqcn_paces_at_the_current_rate() {
        let mut d = Dcqcn::new(dcqcn_test_config());
        d.on_cnp(Instant::ZERO); // 50 Gb/s
        d.on_packet_sent(Instant::ZERO, 1000);
        assert_eq!(d.next_send_time(), Some(Instant::from_ns(160)));
    }

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
