//! Integer time for the whole core. One tick is a picosecond, so that serialisation
//! of a single byte at 400 Gb/s (20 ps) is still exact; `u64` picoseconds last 213 days.
//!
//! The core never reads a clock: drivers pass `now` into every `handle_*`/`poll_*` call.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in time, in picoseconds since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of time in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const fn from_ps(ps: u64) -> Self {
        Instant(ps)
    }
    pub const fn from_ns(ns: u64) -> Self {
        Instant(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> Self {
        Instant(us * 1_000_000)
    }
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    /// Time since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const fn from_ps(ps: u64) -> Self {
        Duration(ps)
    }
    pub const fn from_ns(ns: u64) -> Self {
        Duration(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> Self {
        Duration(us * 1_000_000)
    }
    pub const fn from_ms(ms: u64) -> Self {
        Duration(ms * 1_000_000_000)
    }
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-12
    }
    /// `self * 2^shift`, saturating (used for exponential back-off).
    pub fn saturating_shl(self, shift: u32) -> Duration {
        Duration(
            self.0
                .checked_shl(shift)
                .filter(|v| v >> shift == self.0)
                .unwrap_or(u64::MAX),
        )
    }
    /// Time to serialise `bytes` at `bits_per_sec`.
    pub fn for_bytes(bytes: u64, bits_per_sec: u64) -> Duration {
        if bits_per_sec == 0 {
            return Duration(u64::MAX);
        }
        Duration(
            ((bytes as u128 * 8 * 1_000_000_000_000) / bits_per_sec as u128).min(u64::MAX as u128)
                as u64,
        )
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, o: Instant) -> Duration {
        self.saturating_since(o)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
}
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.0 / 1_000_000_000_000,
            (self.0 / 1_000_000) % 1_000_000
        )
    }
}
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0 / 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn units_and_saturation() {
        assert_eq!(Duration::from_us(50).as_ns(), 50_000);
        assert_eq!(Duration::for_bytes(1, 8_000_000_000).as_ps(), 1_000);
        assert_eq!(Duration::from_ms(1).saturating_shl(70), Duration(u64::MAX));
        assert_eq!(
            Duration::from_ns(3).saturating_shl(2),
            Duration::from_ns(12)
        );
        assert_eq!(Instant(5) - Instant(9), Duration::ZERO);
        assert_eq!(Instant(u64::MAX) + Duration(1), Instant(u64::MAX));
    }
}
