//! The record of one echo measurement (`hoop bench echo`, the suite's echo matrix).

use serde::Serialize;

use crate::record::usage::{Latency, ServerUse};

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
    /// Latency percentiles of verified requests (null with no request).
    #[serde(flatten)]
    pub latency: Latency,
    /// Mean latency, microseconds.
    pub mean_us: Option<f64>,
    /// Connections that were established when the window opened.
    pub connected: usize,
    /// Client thread CPU time (user + system) over the window, % of wall time.
    pub client_cpu_pct: f64,
    /// The client ring's `io_uring_enter` calls per request (hoop's own counters).
    pub client_enters_per_req: Option<f64>,
    /// The server's CPU and syscalls over the window.
    #[serde(flatten)]
    pub usage: ServerUse,
    /// Client CPU >= 90% of wall time while the server's was under 90%.
    pub client_bound: bool,
    /// Whether server and client ran pinned to different cores.
    pub pinned: bool,
    /// Reconnects after resets, counted apart from errors only while the run's fault plan
    /// injects resets (test builds under `HOOP_FAULTS`); 0 otherwise.
    pub reconnects: u64,
}
