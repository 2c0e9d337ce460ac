//! The JSON line of `hoop bench http --attack`: one server's figures without and under a
//! slowloris and idle keep-alive attack.

use serde::Serialize;

/// One server's figures under attack (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttackResult {
    /// Always "http-attack".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-epoll", "nginx", "hyper".
    pub server: String,
    /// Slowloris connections asked for.
    pub slowloris: usize,
    /// Idle keep-alive connections asked for.
    pub idle: usize,
    /// Legitimate keep-alive connections.
    pub legit_conns: usize,
    /// Size of the file the legitimate clients load.
    pub file_bytes: u64,
    /// Length of each legitimate run, seconds.
    pub secs: f64,
    /// Verified requests per second without attack.
    pub legit_req_per_sec_unattacked: f64,
    /// Verified requests per second under attack.
    pub legit_req_per_sec_attacked: f64,
    /// attacked / unattacked.
    pub attacked_ratio: Option<f64>,
    /// p99 latency of the legitimate requests without attack, ms.
    pub p99_ms_unattacked: Option<f64>,
    /// p99 latency under attack, ms.
    pub p99_ms_attacked: Option<f64>,
    /// p99 latency of the requests of the attacked run's first second, ms.
    pub p99_ms_first_second: Option<f64>,
    /// Largest latency under attack, ms.
    pub max_ms_attacked: Option<f64>,
    /// Verified requests in each second of the attacked run.
    pub legit_requests_per_second_attacked: Vec<u64>,
    /// A second of the attacked run verified no request, its connections took a second or
    /// more to connect, or a fresh client's request took a second or more or failed.
    pub stalled: bool,
    /// How long the legitimate connections took to connect under attack, ms.
    pub legit_connect_ms_attacked: f64,
    /// Errors of the legitimate client without and with attack.
    pub legit_errors_unattacked: u64,
    pub legit_errors_attacked: u64,
    /// The first legitimate error under attack.
    pub first_error_attacked: Option<String>,
    /// Fresh clients (a new connection per request, every 100 ms) from the moment the
    /// attackers start connecting to the end of the attacked run:
    /// answered, failed (timeout 5 s, or a wrong answer), and the slowest, ms.
    pub fresh_requests: u64,
    pub fresh_failures: u64,
    pub fresh_max_ms: Option<f64>,
    /// The fresh clients' slowest connect, ms (1,000 and more: a SYN dropped because the
    /// listen queue was full).
    pub fresh_connect_max_ms: Option<f64>,
    /// The machine's `TcpExt: ListenOverflows` while the attackers connected and the attacked
    /// run lasted (every listener of the machine: anything else running counts too).
    pub listen_overflows: Option<u64>,
    /// Attackers connected (slowloris + idle), and how long that took, seconds.
    pub attackers_connected: usize,
    pub attackers_connect_secs: f64,
    /// Idle attackers whose request was answered.
    pub idle_answered: usize,
    /// Attackers still connected at the end of the attacked run.
    pub held_connections: usize,
    /// Of them, slowloris ones (the rest are idle ones).
    pub held_slowloris: usize,
    /// Attackers the server closed before the end of the attacked run (timeouts).
    pub closed_by_server: usize,
    /// Server RSS before the attack, at the end of the attacked run, 2 s after the attackers
    /// left (bytes).
    pub rss_bytes_before: Option<u64>,
    pub rss_bytes_during: Option<u64>,
    pub rss_bytes_after: Option<u64>,
    /// (during - before) / held connections.
    pub rss_bytes_per_held_connection: Option<f64>,
    /// Server CPU time while the attackers connected (and the idle ones were answered), ms.
    pub server_cpu_ms_attack_connect: Option<f64>,
    /// Server and clients pinned to different CPUs.
    pub pinned: bool,
    /// The legitimate clients' reconnects after resets, unattacked and attacked: counted apart
    /// from errors only while the run's fault plan injects resets; 0 otherwise.
    pub legit_reconnects_unattacked: u64,
    pub legit_reconnects_attacked: u64,
}
