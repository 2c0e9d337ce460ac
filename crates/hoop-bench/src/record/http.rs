//! The JSON line of `hoop bench http`: one server, one configuration, one round, measured by
//! the bench's load generator or by wrk.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::compare::Sample;
use crate::load::http::client::{HttpClientConfig, HttpOutcome};
use crate::measure::latency as stats;
use crate::measure::usage::{ServerMetrics, ThreadUse};
use crate::target::netns;

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
}

impl HttpResult {
    /// The load generator's measurement of `server` (`cfg`, what it saw, the server's usage).
    pub(crate) fn of_client(
        server: &str,
        url: &str,
        round: u32,
        cfg: &HttpClientConfig,
        o: &HttpOutcome,
        m: ServerMetrics,
        pinned: bool,
    ) -> HttpResult {
        let secs = cfg.secs.as_secs_f64();
        let wall = o.wall.as_secs_f64();
        let client_cpu_pct =
            (wall > 0.0).then(|| stats::round3(o.cpu.as_secs_f64() / wall * 100.0));
        HttpResult {
            bench: "http",
            server: server.to_string(),
            client: "hoop",
            url: url.to_string(),
            round,
            file_bytes: cfg.file_bytes,
            conns: cfg.conns,
            mode: if cfg.close { "close" } else { "keep-alive" },
            pipeline: if cfg.close { 1 } else { cfg.pipeline },
            secs,
            requests: o.requests,
            errors: o.error_count(),
            errors_by_kind: o.errors.clone(),
            first_error: o.first_error.clone(),
            verified_bytes: cfg.verify.is_some() || cfg.mix.is_some(),
            loopback_mtu: netns::loopback_mtu(),
            rps: stats::round3(o.requests as f64 / secs),
            mib_s: stats::round3(o.body_bytes as f64 / secs / (1 << 20) as f64),
            p50_us: stats::quantile_us(&o.hist, 0.5),
            p99_us: stats::quantile_us(&o.hist, 0.99),
            p999_us: stats::quantile_us(&o.hist, 0.999),
            max_us: stats::max_us(&o.hist),
            client_cpu_pct,
            server_cpu_pct: m.cpu_pct,
            server_cpu_us_per_req: m.cpu_us_per_req,
            syscalls_per_req: m.syscalls_per_req,
            ctx_switches_per_req: m.ctx_switches_per_req,
            server_cpus: None,
            server_threads: m.threads,
            client_bound: client_cpu_pct.is_some_and(|c| c >= 90.0)
                && m.cpu_pct.is_none_or(|s| s < 90.0),
            pinned,
            connected: o.connected,
            mix: cfg.mix.is_some(),
            requests_by_encoding: o.by_encoding.clone(),
            wrk_req_per_sec: None,
        }
    }
}

impl Sample for HttpResult {
    fn target(&self) -> &str {
        &self.server
    }
    fn round(&self) -> u32 {
        self.round
    }
}
