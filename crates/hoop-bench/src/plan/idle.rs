//! What `hoop bench idle` and its helper `hoop bench idle-client` are asked to do: the values
//! as given, checked when the run starts.

use std::net::SocketAddr;

/// Idle connections by default, and the most `--idle` accepts.
pub const DEFAULT_IDLE: usize = 100_000;

/// `hoop bench idle`: idle connections held against each server while active ones load it.
#[derive(Debug, Clone)]
pub struct IdlePlan {
    /// Idle connections held against each server (capped at the open-file limit).
    pub idle: usize,
    /// Active connections, each with one request in flight.
    pub conns: usize,
    /// Payload bytes per active request.
    pub len: usize,
    /// Seconds of each active run.
    pub secs: f64,
    /// The servers, in run order (`None`: the default ones).
    pub servers: Option<Vec<String>>,
    /// Idle connections whose echo is checked once all are open.
    pub sample: usize,
    /// Idle connections per helper process (`None`: its open-file hard limit less a margin).
    pub per_client: Option<usize>,
}

/// `hoop bench idle-client`: one helper process's share of the idle connections.
#[derive(Debug, Clone)]
pub struct IdleClientPlan {
    /// The echo server.
    pub addr: SocketAddr,
    /// Connections to open and hold.
    pub count: usize,
    /// Last byte of the first 127.0.0.x source address (the next ones follow).
    pub source: u8,
    /// Open connections whose echo is checked (evenly spread, the last one included).
    pub sample: usize,
    /// CPU to pin the helper to.
    pub cpu: Option<usize>,
}
