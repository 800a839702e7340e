//! The 24-bit packet sequence number (IBTA §9.7.1) with wrapping arithmetic.
//!
//! Ordering is by wrapping distance: `a < b` when `b` is ahead of `a` by less than half
//! the space (2^23), as smoltcp's `TcpSeqNumber` does for 32 bits. Never compare raw
//! `u32` PSNs.

use core::cmp::Ordering;
use core::fmt;

/// A 24-bit PSN. Always holds a value below 2^24.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    pub const MASK: u32 = 0x00ff_ffff;
    pub const HALF: u32 = 1 << 23;

    /// The PSN whose low 24 bits are those of `v` (higher bits are dropped).
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }
    pub const fn value(self) -> u32 {
        self.0
    }
    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & Self::MASK)
    }
    /// `self - n`, wrapping at 2^24.
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & Self::MASK)
    }
    /// How far `self` is ahead of `earlier`, modulo 2^24 (0..2^24).
    pub const fn distance_from(self, earlier: Psn) -> u32 {
        self.0.wrapping_sub(earlier.0) & Self::MASK
    }
    /// Signed distance `self - other` in (-2^23, 2^23].
    pub const fn diff(self, other: Psn) -> i32 {
        let d = self.distance_from(other);
        if d > Self::HALF {
            d as i32 - (1 << 24)
        } else {
            d as i32
        }
    }
    pub fn next(self) -> Psn {
        self.add(1)
    }
    /// True if `self` lies in the half-open window `[start, start + len)`.
    pub fn in_window(self, start: Psn, len: u32) -> bool {
        self.distance_from(start) < len
    }
}

impl PartialOrd for Psn {
    fn partial_cmp(&self, other: &Psn) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
/// Total only within a half-space window; that is the RoCE rule, as for TCP sequence numbers.
impl Ord for Psn {
    fn cmp(&self, other: &Psn) -> Ordering {
        self.diff(*other).cmp(&0)
    }
}
impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({})", self.0)
    }
}
impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(0xff_ffff).next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), Psn::new(0xff_ffff));
        assert_eq!(Psn::new(0x1ff_ffff), Psn::new(0xff_ffff));
        assert_eq!(Psn::new(5).distance_from(Psn::new(0xff_fffe)), 7);
    }

    /// Exhaustive around the wrap: every pair within +-2^12 of the wrap point and of
    /// the half-space boundary orders by the true (unwrapped) difference.
    #[test]
    fn ordering_exhaustive_around_wrap() {
        for base in [0u32, 0xff_ffff, 0x7f_ffff, 0x80_0000, 12345] {
            for a_off in -4096i64..4096 {
                let a_true = base as i64 + a_off;
                let a = Psn::new(a_true.rem_euclid(1 << 24) as u32);
                for d in [
                    -4096i64,
                    -2,
                    -1,
                    0,
                    1,
                    2,
                    4095,
                    (1 << 23) - 1,
                    -((1 << 23) - 1),
                ] {
                    let b = Psn::new((a_true + d).rem_euclid(1 << 24) as u32);
                    assert_eq!(b.diff(a) as i64, d, "a={a:?} b={b:?}");
                    assert_eq!(b.cmp(&a), d.cmp(&0));
                    assert_eq!(a.add(d.rem_euclid(1 << 24) as u32), b);
                }
            }
        }
    }

    /// Every PSN against its 2^11 neighbours on each side, the whole space.
    #[test]
    fn add_sub_roundtrip_whole_space() {
        for v in (0..(1u32 << 24)).step_by(257) {
            let p = Psn::new(v);
            for n in [0u32, 1, 2047, 1 << 23, Psn::MASK] {
                assert_eq!(p.add(n).sub(n), p);
                assert_eq!(p.add(n).distance_from(p), n);
            }
            assert!(p.next() > p);
            assert!(p.add(Psn::HALF - 1) > p);
            assert!(p.add(Psn::HALF + 1) < p);
        }
    }

    #[test]
    fn window() {
        let s = Psn::new(0xff_fff0);
        assert!(Psn::new(0x5).in_window(s, 32));
        assert!(!Psn::new(0x10).in_window(s, 32));
        assert!(!Psn::new(0xff_ffef).in_window(s, 32));
    }
}
