//! `hoop bench cancel`'s record: one runtime's count in one scenario, one JSON line.

use serde::Serialize;

/// One runtime's count in one scenario: a JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct CancelResult {
    /// Always "cancel".
    pub bench: &'static str,
    /// hoop, hoop-epoll, tokio, monoio, compio, tokio-uring.
    pub runtime: String,
    /// accept, read, udp_recv_from, unix_recv, drop_after_write.
    pub scenario: String,
    /// Whether the runtime has the call (false: the counts are null and `note` says why).
    pub supported: bool,
    /// What `sent`, `received` and `lost` count: connections, bytes or datagrams.
    pub unit: &'static str,
    /// Units sent.
    pub sent: Option<u64>,
    /// Units received.
    pub received: Option<u64>,
    /// `sent - received`.
    pub lost: Option<u64>,
    /// The kinds of losses, an early stop, or why the call is missing.
    pub note: Option<String>,
}
