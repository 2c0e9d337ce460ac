//! The record of `hoop bench fsread`: one engine's whole-file reads of one size (a JSON line).

use std::io;

use serde::Serialize;

/// One engine's whole-file reads of one size.
#[derive(Debug, Clone, Serialize)]
pub struct ReadResult {
    /// Always "fsread".
    pub bench: &'static str,
    /// The engine.
    pub engine: &'static str,
    /// The file's size.
    pub file_bytes: u64,
    /// Timed reads that returned the whole file, verified.
    pub reads: u64,
    /// Warm-up reads before them.
    pub warmup: u64,
    /// Reads that failed, came back short or did not verify (warm-up ones included).
    pub errors: u64,
    /// The first of them.
    pub first_error: Option<String>,
    /// Bytes checked byte for byte in the timed reads.
    pub bytes_verified: u64,
    /// Latency per read, µs.
    pub mean_us: Option<f64>,
    /// Median.
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// Slowest.
    pub max_us: Option<f64>,
    /// Wall time of the engine's reads (warm-up included).
    pub secs: f64,
    /// Workers of the tokio runtime.
    pub workers: usize,
    /// How it ran.
    pub setup: String,
}

impl ReadResult {
    /// Whether it counted reads and no error.
    pub fn ok(&self) -> bool {
        self.errors == 0 && self.reads > 0
    }

    /// The record of a run that failed before any read: one error, `e`.
    pub fn failed(engine: &'static str, size: u64, workers: usize, e: &io::Error) -> ReadResult {
        ReadResult {
            bench: "fsread",
            engine,
            file_bytes: size,
            reads: 0,
            warmup: 0,
            errors: 1,
            first_error: Some(e.to_string()),
            bytes_verified: 0,
            mean_us: None,
            p50_us: None,
            p99_us: None,
            max_us: None,
            secs: 0.0,
            workers,
            setup: String::new(),
        }
    }
}

/// The mean latency of `engine`'s reads of `size`, if it ran with no error.
pub fn mean_of(rs: &[ReadResult], engine: &str, size: u64) -> Option<f64> {
    rs.iter()
        .find(|r| r.engine == engine && r.file_bytes == size && r.ok())
        .and_then(|r| r.mean_us)
}
