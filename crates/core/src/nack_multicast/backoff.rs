//! NACK back-off: RFC 5401 §3.5 (the NORM building block), the algorithm behind Aeron's
//! `OptimalMulticastDelayGenerator`.
//!
//! A receiver that detects a gap waits a random time in `[0, T_max)` before NACKing. The
//! delay is a truncated exponential with λ = ln(N) + 1 for a group of N receivers: most
//! receivers draw late times and only a few draw early ones, so the first NACK (multicast)
//! usually reaches the others before their own timers fire and suppresses them. With a
//! uniform delay the expected number of NACKs per loss grows with N; with this one it
//! stays near a constant (Nonnenmacher & Biersack, 1998).

use crate::time::Duration;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Draws NACK delays for a group of `group_size` receivers, bounded by `max_backoff`.
#[derive(Debug, Clone)]
pub struct NackBackoff {
    max_backoff_ps: f64,
    lambda: f64,
    exp_lambda_m1: f64,
    rng: ChaCha8Rng,
}

impl NackBackoff {
    pub fn new(max_backoff: Duration, group_size: usize, seed: u64) -> Self {
        let lambda = (group_size.max(1) as f64).ln() + 1.0;
        NackBackoff {
            max_backoff_ps: max_backoff.as_ps() as f64,
            lambda,
            exp_lambda_m1: lambda.exp() - 1.0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// One delay in `[0, max_backoff)`.
    pub fn next_delay(&mut self) -> Duration {
        if self.max_backoff_ps <= 0.0 {
            return Duration::ZERO;
        }
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        Duration::from_ps(self.delay_for(u) as u64)
    }

    /// The delay for a uniform draw `u` in `[0, 1)`: RFC 5401's
    /// `t = (T/λ)·ln(x·(e^λ−1)·T/λ)` with `x = u·λ/T + λ/(T·(e^λ−1))`, which simplifies to
    /// `(T/λ)·ln(1 + u·(e^λ−1))`.
    pub fn delay_for(&self, u: f64) -> f64 {
        let t = self.max_backoff_ps;
        (t / self.lambda) * (1.0 + u * self.exp_lambda_m1).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_in_range_and_bias_late_for_large_groups() {
        let t = Duration::from_us(100);
        for n in [1usize, 4, 32, 1024] {
            let mut g = NackBackoff::new(t, n, 3);
            let draws: Vec<u64> = (0..20_000).map(|_| g.next_delay().as_ps()).collect();
            assert!(draws.iter().all(|&d| d < t.as_ps()), "n={n}");
            let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64 / t.as_ps() as f64;
            // E[t]/T = ((1+a)·ln(1+a) − a)/(a·λ) with a = e^λ − 1: 0.58 for one
            // receiver, rising toward 1 as the group grows (later, fewer early timers).
            let expect = {
                let l = (n as f64).ln() + 1.0;
                let a = l.exp() - 1.0;
                ((1.0 + a) * (1.0 + a).ln() - a) / (a * l)
            };
            assert!(
                (mean - expect).abs() < 0.01,
                "n={n}: mean {mean} vs {expect}"
            );
        }
    }

    #[test]
    fn first_of_n_draws_is_early_but_few_draws_are_close_to_it() {
        // The property suppression relies on: among N receivers, the earliest delay is
        // well separated from the rest, so its NACK has time to arrive.
        let t = Duration::from_us(1000);
        let n = 64;
        let mut within = 0usize;
        let trials = 500;
        let mut g = NackBackoff::new(t, n, 11);
        for _ in 0..trials {
            let mut d: Vec<u64> = (0..n).map(|_| g.next_delay().as_ps()).collect();
            d.sort_unstable();
            // Receivers whose timer fires within 50 µs (a one-way trip) of the first.
            within += d.iter().filter(|&&x| x < d[0] + 50_000_000).count();
        }
        let per_loss = within as f64 / trials as f64;
        assert!(
            per_loss < 4.0,
            "{per_loss} NACKs per loss expected without suppression in time"
        );
    }

    #[test]
    fn closed_form_matches_the_rfc_expression() {
        let g = NackBackoff::new(Duration::from_us(40), 16, 1);
        let (t, l) = (g.max_backoff_ps, g.lambda);
        for u in [0.0, 0.1, 0.5, 0.9, 0.999] {
            let x = u * l / t + l / (t * (l.exp() - 1.0));
            let rfc = (t / l) * (x * (l.exp() - 1.0) * (t / l)).ln();
            assert!((rfc - g.delay_for(u)).abs() < 1e-3 * t, "u={u}");
        }
    }
}
