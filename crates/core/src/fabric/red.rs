//! ECN marking by RED on the egress queue (DCQCN's congestion point; Zhu et al.,
//! SIGCOMM 2015, §3.1): below Kmin never mark, above Kmax always, in between with a
//! probability rising linearly to Pmax. As in the HPCC simulator, the decision is made
//! at dequeue against the queue's bytes left behind the departing packet, so the mark
//! reflects the freshest queue. The caller supplies the random draw (sans-IO).

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EcnRed {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
}

impl EcnRed {
    /// Marking probability at a queue of `queue_bytes`.
    pub fn probability(&self, queue_bytes: u64) -> f64 {
        if queue_bytes > self.kmax_bytes {
            1.0
        } else if queue_bytes > self.kmin_bytes {
            let span = (self.kmax_bytes - self.kmin_bytes).max(1) as f64;
            self.pmax * (queue_bytes - self.kmin_bytes) as f64 / span
        } else {
            0.0
        }
    }

    /// Whether to mark. `draw` gives a uniform number in [0, 1); it is called only when
    /// the probability is above zero, so a queue below Kmin costs no random draw.
    #[inline]
    pub fn should_mark(&self, queue_bytes: u64, draw: impl FnOnce() -> f64) -> bool {
        let p = self.probability(queue_bytes);
        if p <= 0.0 {
            return false;
        }
        let u = draw();
        p >= 1.0 || u < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn red_ramp() {
        let r = EcnRed {
            kmin_bytes: 100,
            kmax_bytes: 300,
            pmax: 0.2,
        };
        assert_eq!(r.probability(100), 0.0);
        assert!((r.probability(200) - 0.1).abs() < 1e-12);
        assert_eq!(r.probability(301), 1.0);
        assert!(r.should_mark(301, || 0.999));
        assert!(!r.should_mark(50, || 0.0));
        assert!(r.should_mark(200, || 0.05) && !r.should_mark(200, || 0.15));
    }
}
