//! Measurement records (the JSON objects), latency histograms and medians.

use std::io;

use hdrhistogram::Histogram;
use serde::Serialize;

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

/// One echo measurement: one server, one configuration, one round.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EchoResult {
    /// Always "echo".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-epoll", "tokio", "monoio", or "external" (a server given with
    /// --addr).
    pub server: String,
    /// The address the client loaded.
    pub addr: String,
    /// Repetition index within its configuration (0-based).
    pub round: u32,
    /// Connections.
    pub conns: usize,
    /// Payload bytes per request.
    pub len_bytes: usize,
    /// Length of the measured window in seconds.
    pub secs: f64,
    /// Requests whose reply came back complete and byte-for-byte equal within the window.
    pub requests: u64,
    /// Mismatched replies, early ends of stream, connect/read/write errors.
    pub errors: u64,
    /// The first error seen, if any.
    pub first_error: Option<String>,
    /// requests / secs.
    pub rps: f64,
    /// Latency percentiles of verified requests, microseconds (null with no request).
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile.
    pub p999_us: Option<f64>,
    /// Largest latency.
    pub max_us: Option<f64>,
    /// Mean latency.
    pub mean_us: Option<f64>,
    /// Connections that were established when the window opened.
    pub connected: usize,
    /// Client thread CPU time (user + system) over the window, % of wall time.
    pub client_cpu_pct: f64,
    /// The client ring's `io_uring_enter` calls per request (hoop's own counters).
    pub client_enters_per_req: Option<f64>,
    /// Server process CPU time over the window, % of wall time (null: unknown server PID).
    pub server_cpu_pct: Option<f64>,
    /// Server process CPU time per verified request, microseconds.
    pub server_cpu_us_per_req: Option<f64>,
    /// Server syscalls per verified request (perf's raw_syscalls:sys_enter; null without perf).
    pub syscalls_per_req: Option<f64>,
    /// Client CPU >= 90% of wall time while the server's was under 90%.
    pub client_bound: bool,
    /// Whether server and client ran pinned to different cores.
    pub pinned: bool,
}

/// One no-op measurement: one engine.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NopResult {
    /// Always "nop".
    pub bench: &'static str,
    /// "hoop" (thread-per-core rings), "raw-io-uring" or "hoop-shared" (`hoop::shared`).
    pub engine: &'static str,
    /// Threads: each with its own ring, or all on one shared set of `rings` (hoop-shared).
    pub threads: usize,
    /// Rings of the shared set (hoop-shared; null: one ring per thread).
    pub rings: Option<usize>,
    /// No-ops per batch.
    pub batch: usize,
    /// SQ entries per ring.
    pub entries: u32,
    /// Measured seconds (wall time of the run).
    pub secs: f64,
    /// No-ops completed.
    pub nops: u64,
    /// No-ops that completed with an error (not counted in `nops`).
    pub errors: u64,
    /// nops / secs.
    pub nops_per_sec: f64,
    /// Batches completed.
    pub batches: u64,
    /// Batch latency, microseconds.
    pub batch_mean_us: Option<f64>,
    /// 50th percentile.
    pub batch_p50_us: Option<f64>,
    /// 90th percentile.
    pub batch_p90_us: Option<f64>,
    /// 99th percentile.
    pub batch_p99_us: Option<f64>,
    /// 99.9th percentile.
    pub batch_p999_us: Option<f64>,
    /// 99.99th percentile.
    pub batch_p9999_us: Option<f64>,
    /// 99.999th percentile.
    pub batch_p99999_us: Option<f64>,
    /// 99.9999th percentile.
    pub batch_p999999_us: Option<f64>,
    /// Largest.
    pub batch_max_us: Option<f64>,
    /// `io_uring_enter` calls per no-op (hoop: its ring counters; raw: the loop's own count;
    /// null for hoop-shared, whose rings are not counted).
    pub syscalls_per_op: Option<f64>,
    /// The setup flags of the ring (hoop: what the kernel accepted).
    pub setup_flags: String,
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
