//! The record of one no-op measurement (`hoop bench nop`, the suite's no-op rows).

use serde::Serialize;

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

/// A result of `engine` on `threads` threads, for the tests of the tables and charts.
#[cfg(test)]
pub(crate) fn test_result(
    engine: &'static str,
    threads: usize,
    nops_per_sec: f64,
    p6_us: f64,
) -> NopResult {
    NopResult {
        bench: "nop",
        engine,
        threads,
        // The shared engine's (load::nop::SHARED) ring count.
        rings: (engine == "hoop-shared").then_some(1),
        batch: 32,
        entries: 64,
        secs: 1.0,
        nops: nops_per_sec as u64,
        errors: 0,
        nops_per_sec,
        batches: 1,
        batch_mean_us: Some(10.0),
        batch_p50_us: Some(9.0),
        batch_p90_us: Some(11.0),
        batch_p99_us: Some(12.0),
        batch_p999_us: Some(13.0),
        batch_p9999_us: Some(14.0),
        batch_p99999_us: Some(15.0),
        batch_p999999_us: Some(p6_us),
        batch_max_us: Some(p6_us),
        syscalls_per_op: None,
        setup_flags: String::new(),
    }
}
