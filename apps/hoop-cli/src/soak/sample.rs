//! What the soak samples every few seconds: fds, memory and operations in flight, of this
//! process and of each child server.

use serde::Serialize;

/// One sample of a child server process.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChildSample {
    pub name: String,
    pub fds: usize,
    pub rss_kib: u64,
}

/// One sample of the whole soak.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sample {
    pub t_secs: f64,
    /// Open fds of this process (in-process echo servers, file loads and all clients).
    pub fds: usize,
    pub rss_kib: u64,
    /// Operations in flight in the in-process runtimes (echo servers and file loads).
    pub in_flight: usize,
    /// Operations completed per second since the previous sample, all loads together.
    pub ops_per_sec: f64,
    pub children: Vec<ChildSample>,
}
