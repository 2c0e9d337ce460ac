//! The JSON line of `hoop bench http`: one server, one configuration, one round, measured by
//! the bench's load generator or by wrk.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::measure::usage::ThreadUse;

/// One HTTP measurement: one server, one configuration, one round (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HttpResult {
    /// Always "http".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-epoll", "nginx", "hyper", or "external" (--url).
    pub server: String,
    /// "hoop" (this load generator) or "wrk" (bodies not verified).
    pub client: &'static str,
    /// The URL loaded.
    pub url: String,
    /// Repetition index within its configuration (0-based).
    pub round: u32,
    /// Size of the file served.
    pub file_bytes: u64,
    /// Connections.
    pub conns: usize,
    /// "keep-alive" or "close" (a connection per request).
    pub mode: &'static str,
    /// Requests in flight per keep-alive connection.
    pub pipeline: usize,
    /// Length of the window, seconds.
    pub secs: f64,
    /// Verified requests (status 200, right length, whole body; bytes with verification).
    pub requests: u64,
    /// Errors of every kind.
    pub errors: u64,
    /// Errors by kind (connect, read, write, eof, parse, status, length, body).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first error seen.
    pub first_error: Option<String>,
    /// Whether every body byte was compared with the file.
    pub verified_bytes: bool,
    /// The loopback MTU of the network namespace the run was made in (`--netns-mtu`).
    pub loopback_mtu: Option<u32>,
    /// requests / secs.
    pub rps: f64,
    /// Body MiB/s of verified requests.
    pub mib_s: f64,
    /// Latency percentiles, microseconds (null with no request or from wrk).
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile.
    pub p999_us: Option<f64>,
    /// Largest latency.
    pub max_us: Option<f64>,
    /// Client CPU over the window, % of wall time.
    pub client_cpu_pct: Option<f64>,
    /// Server CPU over the window, % of wall time.
    pub server_cpu_pct: Option<f64>,
    /// Server CPU per verified request, microseconds.
    pub server_cpu_us_per_req: Option<f64>,
    /// Server syscalls per verified request (perf; null without it).
    pub syscalls_per_req: Option<f64>,
    /// Server context switches (voluntary + involuntary, every thread) per verified request.
    pub ctx_switches_per_req: Option<f64>,
    /// The CPUs the server may run on ("0", "0,1"; null when unknown, as with --url).
    pub server_cpus: Option<String>,
    /// The server's threads by group (name without its number: "tokio-rt-worker",
    /// "hoop-reaper"): threads, CPU µs and context switches per verified request each.
    pub server_threads: BTreeMap<String, ThreadUse>,
    /// Client CPU >= 90% of wall time while the server's was under 90%.
    pub client_bound: bool,
    /// Server and client pinned to different CPUs.
    pub pinned: bool,
    /// Connections established when the window opened (keep-alive).
    pub connected: usize,
    /// The static mix (`mix-cCONNS`: 20 files of 3-300 KB, `Accept-Encoding: br, gzip`;
    /// `file_bytes` is then their mean size).
    pub mix: bool,
    /// The static mix, this load generator: verified requests by response encoding
    /// ("identity", "gzip"; null otherwise).
    pub requests_by_encoding: Option<BTreeMap<String, u64>>,
    /// This load generator's line: wrk's req/s against the same server, cell and round (run
    /// right after it; `--wrk`, and the main job for hoop and nginx), null where wrk did not
    /// run.
    pub wrk_req_per_sec: Option<f64>,
    /// Reconnects after resets, counted apart from errors only while the run's fault plan
    /// injects resets (test builds under `HOOP_FAULTS`); 0 otherwise (and from wrk).
    pub reconnects: u64,
}

/// A load generator's result of `server` at 1 KiB keep-alive, for the tests of the tables.
#[cfg(test)]
pub(crate) fn test_result(
    server: &str,
    round: u32,
    conns: usize,
    rps: f64,
    cpu: f64,
) -> HttpResult {
    HttpResult {
        bench: "http",
        server: server.into(),
        client: "hoop",
        url: String::new(),
        round,
        file_bytes: 1024,
        conns,
        mode: "keep-alive",
        pipeline: 1,
        secs: 1.0,
        requests: rps as u64,
        errors: 0,
        errors_by_kind: BTreeMap::new(),
        first_error: None,
        verified_bytes: true,
        loopback_mtu: Some(65536),
        rps,
        mib_s: 1.0,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        client_cpu_pct: None,
        server_cpu_pct: None,
        server_cpu_us_per_req: Some(cpu),
        syscalls_per_req: None,
        ctx_switches_per_req: Some(0.5),
        server_cpus: Some("0,1".into()),
        server_threads: BTreeMap::from([(
            "tokio-rt-worker".to_string(),
            crate::measure::usage::ThreadUse {
                threads: 2,
                cpu_us_per_req: cpu,
                ctx_switches_per_req: 0.5,
            },
        )]),
        client_bound: false,
        pinned: false,
        connected: conns,
        mix: false,
        requests_by_encoding: None,
        wrk_req_per_sec: None,
        reconnects: 0,
    }
}
