//! The record of one fan-out measurement (`hoop bench fanout`, the suite's fan-out run).

use serde::Serialize;

use crate::record::usage::Latency;

/// One fan-out measurement: one server, one load, one round.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FanoutResult {
    /// Always "fanout".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-epoll" or "tokio".
    pub server: String,
    /// The address the clients connected to.
    pub addr: String,
    /// Round (0-based).
    pub round: u32,
    /// Connections (each message goes to all of them).
    pub conns: usize,
    /// Bytes per message, newline included.
    pub len: usize,
    /// Messages in flight per connection.
    pub window: u32,
    /// Whether a CPU hog ran on the server's core.
    pub hog: bool,
    /// Length of the measured window in seconds.
    pub secs: f64,
    /// Verified deliveries inside the window, over all receiving connections.
    pub deliveries: u64,
    /// Messages sent inside the window.
    pub messages: u64,
    /// Missing, reordered or corrupt deliveries, stalled messages, I/O errors.
    pub errors: u64,
    /// The first error seen, if any.
    pub first_error: Option<String>,
    /// deliveries / secs.
    pub deliveries_per_sec: f64,
    /// messages / secs.
    pub messages_per_sec: f64,
    /// Delivery latency (from the sender's write to the receiver's verified read), sampled:
    /// every 4th delivery by sequence number and receiver.
    #[serde(flatten)]
    pub latency: Latency,
    /// Server process CPU time (user + system) per verified delivery, microseconds.
    pub cpu_us_per_delivery: Option<f64>,
    /// Server process CPU time over the window, % of wall time.
    pub server_cpu_pct: Option<f64>,
    /// Server syscalls per verified delivery (perf; null without it).
    pub syscalls_per_delivery: Option<f64>,
    /// Client thread CPU time over the window, % of wall time.
    pub client_cpu_pct: f64,
    /// Client CPU >= 90% of wall time while the server's was under 90% (and no hog).
    pub client_bound: bool,
    /// The hog's CPU time, % of its wall time (null: no hog).
    pub hog_cpu_pct: Option<f64>,
    /// Connections established and subscribed when the window opened.
    pub connected: usize,
    /// Whether server and client ran pinned to different cores.
    pub pinned: bool,
    /// Rejoins after resets (a connection reconnected and subscribed again), counted apart
    /// from errors only while the run's fault plan injects resets (test builds under
    /// `HOOP_FAULTS`); 0 otherwise. The messages sent while a connection was gone are not
    /// owed to it.
    pub reconnects: u64,
}

/// A result of `server` (with the CPU hog or not), for the tests of the tables and charts.
#[cfg(test)]
pub(crate) fn test_result(server: &str, round: u32, hog: bool, dps: f64, cpu: f64) -> FanoutResult {
    FanoutResult {
        bench: "fanout",
        server: server.to_string(),
        addr: "127.0.0.1:1".into(),
        round,
        conns: 10,
        len: 64,
        window: 4,
        hog,
        secs: 1.0,
        deliveries: dps as u64,
        messages: dps as u64 / 10,
        errors: 0,
        first_error: None,
        deliveries_per_sec: dps,
        messages_per_sec: dps / 10.0,
        latency: Latency {
            p50_us: Some(10.0),
            p99_us: Some(20.0),
            p999_us: Some(30.0),
            max_us: Some(40.0),
        },
        cpu_us_per_delivery: Some(cpu),
        server_cpu_pct: Some(99.0),
        syscalls_per_delivery: None,
        client_cpu_pct: 50.0,
        client_bound: false,
        hog_cpu_pct: hog.then_some(50.0),
        connected: 10,
        pinned: true,
        reconnects: 0,
    }
}
