//! Percentiles, medians and means: the one place the simulator, the experiments
//! (`rocast-eval`), the runtime's benches and the CLI take them from.
//!
//! Two definitions are in use, and each output keeps the one it was published with
//! (changing either would change preset outputs that are compared byte for byte):
//!
//! - [`nearest_rank`]: the textbook nearest-rank percentile, the ⌈q·n⌉-th smallest
//!   value. Every experiment table (PEEL's CCT percentiles, the ODBSS latency study)
//!   uses it.
//! - [`percentile_rounded_rank`]: the value at index round(p/100 · (n − 1)), the
//!   rounded linear-interpolation rank. `summary.json` and `rocast sim`'s summary use
//!   it for FCT and slowdown; it differs from nearest rank for some medians (n = 4:
//!   the third value, where nearest rank gives the second).

/// The nearest-rank `q`-quantile (`q` in [0, 1]) of ascending `sorted`: its
/// ⌈q·n⌉-th smallest value (the smallest for q = 0); `None` when empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// The `p`-th percentile (`p` in [0, 100]) of ascending `sorted` as `summary.json`
/// reports it: the value at index round(p/100 · (n − 1)); 0 when empty.
pub fn percentile_rounded_rank(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i]
}

/// The median of `v` as rocast's benches report it: the upper one of an even count
/// (the value at index n/2 once sorted, so always a measured value); `None` when empty.
pub fn upper_median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Mean of `v`; 0 when empty.
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_definitions_where_they_agree_and_differ() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.99), Some(99.0));
        assert_eq!(percentile_rounded_rank(&v, 99.0), 99.0);
        let four = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(nearest_rank(&four, 0.5), Some(2.0));
        assert_eq!(percentile_rounded_rank(&four, 50.0), 3.0);
        assert_eq!(nearest_rank(&four, 0.0), Some(1.0));
        assert_eq!(nearest_rank(&four, 1.0), Some(4.0));
        assert_eq!(nearest_rank::<u64>(&[], 0.5), None);
        assert_eq!(percentile_rounded_rank(&[], 50.0), 0.0);
        assert_eq!(mean(&four), 2.5);
        assert_eq!(upper_median(vec![4.0, 1.0, 3.0, 2.0]), Some(3.0));
        assert_eq!(upper_median(vec![2.0, 9.0, 1.0]), Some(2.0));
        assert_eq!(upper_median(Vec::new()), None);
        assert_eq!(mean(&[]), 0.0);
    }
}
