//! Latency histograms (nanoseconds in, microseconds out) and medians.

use std::io;

use hdrhistogram::Histogram;

/// Highest latency a histogram holds: 60 s in nanoseconds (longer ones saturate there).
const MAX_NS: u64 = 60_000_000_000;

/// A latency histogram in nanoseconds, 3 significant digits.
pub(crate) fn new_histogram() -> io::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_NS, 3)
        .map_err(|e| io::Error::other(format!("cannot create a histogram: {e:?}")))
}

/// Records `ns` (at least 1: the histogram's lowest value).
pub(crate) fn record_ns(h: &mut Histogram<u64>, ns: u128) {
    let v = u64::try_from(ns).unwrap_or(u64::MAX).clamp(1, MAX_NS);
    h.saturating_record(v);
}

/// The value at `q` (0..=1) in microseconds, or `None` if nothing was recorded.
pub(crate) fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| round3(h.value_at_quantile(q) as f64 / 1000.0))
}

/// The largest value in microseconds, or `None` if nothing was recorded.
pub(crate) fn max_us(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| round3(h.max() as f64 / 1000.0))
}

/// The mean in microseconds, or `None` if nothing was recorded.
pub(crate) fn mean_us(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| round3(h.mean() / 1000.0))
}

/// Rounds to 3 decimals (for readable JSON).
pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The median of `values` (the mean of the two middle ones for an even count), `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
    }

    #[test]
    fn empty_histogram_has_no_percentiles() {
        let mut h = new_histogram().unwrap();
        assert_eq!(quantile_us(&h, 0.5), None);
        record_ns(&mut h, 0);
        record_ns(&mut h, 2_000);
        assert_eq!(h.len(), 2);
        assert_eq!(max_us(&h), Some(2.0));
    }
}
