//! `hoop bench idle`'s record: one server's figures, one JSON line.

use serde::Serialize;

/// One server's figures (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub struct IdleResult {
    /// Always "idle".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-basic", "hoop-epoll", "tokio", "monoio".
    pub server: String,
    /// Idle connections asked for (before the cap).
    pub idle_asked: usize,
    /// Idle connections tried (after the cap).
    pub idle_tried: usize,
    /// Idle connections open (held) while the active load ran.
    pub idle_conns: usize,
    /// Idle connections that could not be opened, plus sampled ones with no or a wrong echo.
    pub idle_failed: usize,
    /// Of those, the ones that could not be opened.
    pub idle_connect_failed: usize,
    /// Idle connections checked for an echo once all were open.
    pub idle_sampled: usize,
    /// Of those, the ones with no or a wrong echo within 5 s.
    pub idle_sample_failed: usize,
    /// The first idle failure.
    pub idle_first_error: Option<String>,
    /// Idle connections still open after the active run with them (the rest the server
    /// closed).
    pub idle_still_open: usize,
    /// Seconds the idle connections took to connect.
    pub idle_connect_secs: f64,
    /// Helper processes holding them.
    pub idle_clients: usize,
    /// Active connections.
    pub active_conns: usize,
    /// Payload bytes per active request.
    pub len_bytes: usize,
    /// Seconds of each active run.
    pub secs: f64,
    /// Server RSS before the idle connections, bytes (`VmRSS`).
    pub rss_bytes_before: Option<u64>,
    /// Server RSS with them open.
    pub rss_bytes_with_idle: Option<u64>,
    /// Server RSS 1 s after they left.
    pub rss_bytes_after: Option<u64>,
    /// (with - before) / idle connections held: user memory per idle connection.
    pub rss_bytes_per_idle_conn: Option<f64>,
    /// Verified active requests per second with the idle connections.
    pub active_rps: f64,
    /// The same without them.
    pub active_rps_no_idle: f64,
    /// active_rps / active_rps_no_idle.
    pub active_rps_ratio: Option<f64>,
    /// p99 latency of the active requests with the idle connections, µs.
    pub p99_us: Option<f64>,
    /// The same without them.
    pub p99_us_no_idle: Option<f64>,
    /// Active errors with the idle connections.
    pub active_errors: u64,
    /// Active errors without them.
    pub active_errors_no_idle: u64,
    /// The first active error (or why the active run could not run).
    pub active_first_error: Option<String>,
    /// Server and clients on two CPUs.
    pub pinned: bool,
}
