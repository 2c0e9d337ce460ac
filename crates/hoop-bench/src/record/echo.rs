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

/// A result of `server` at 50 connections and 128 bytes, for the tests of the tables and charts.
#[cfg(test)]
pub(crate) fn test_result(server: &str, round: u32, rps: f64, cpu: f64) -> EchoResult {
    EchoResult {
        bench: "echo",
        server: server.to_string(),
        addr: "127.0.0.1:1".to_string(),
        round,
        conns: 50,
        len_bytes: 128,
        secs: 1.0,
        requests: rps as u64,
        errors: 0,
        first_error: None,
        rps,
        latency: Latency {
            p50_us: Some(10.0),
            p99_us: Some(20.0),
            p999_us: Some(30.0),
            max_us: Some(40.0),
        },
        mean_us: Some(12.0),
        connected: 50,
        client_cpu_pct: 50.0,
        client_enters_per_req: None,
        usage: ServerUse {
            server_cpu_pct: Some(50.0),
            server_cpu_us_per_req: Some(cpu),
            syscalls_per_req: None,
        },
        client_bound: false,
        pinned: true,
        reconnects: 0,
    }
}
