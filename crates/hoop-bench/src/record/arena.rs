//! The JSON line of `hoop bench http --profile`: one server, one HttpArena profile, one
//! connection count and thread count, one round. A sibling of [`crate::record::http`]'s line:
//! the fields they share keep its names, and `profile` says which contract was loaded.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::load::http::client::HttpOutcome;
use crate::measure::latency as stats;
use crate::measure::usage::{ServerMetrics, ThreadUse};

/// One profile measurement (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ArenaResult {
    /// Always "http".
    pub bench: &'static str,
    /// baseline, pipelined, short-lived, json, upload or static.
    pub profile: &'static str,
    /// hoop, hoop-nocache, hoop-epoll, axum-tokio, actix, nginx, h2o.
    pub server: String,
    /// Always "hoop": this load generator, which verifies every answer.
    pub client: &'static str,
    /// The server's address.
    pub url: String,
    /// Repetition index within its cell (0-based).
    pub round: u32,
    /// Connections.
    pub conns: usize,
    /// "keep-alive", "pipeline-16" or "10-per-connection".
    pub mode: &'static str,
    /// Requests written together per connection (16 pipelined, else 1).
    pub pipeline: usize,
    /// Server threads (hoop's `--threads`, the others' workers).
    pub threads: usize,
    /// A target row: one server thread pinned to its own CPU, the client on another (the
    /// two-thread rows run unpinned and have no target).
    pub target: bool,
    /// Length of the window, seconds.
    pub secs: f64,
    /// Verified requests (status 200 and the exact expected body).
    pub requests: u64,
    /// Errors of every kind.
    pub errors: u64,
    /// Errors by kind (connect, write, read, eof, parse, status, body, json, close, length,
    /// encoding).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first error seen.
    pub first_error: Option<String>,
    /// requests / secs.
    pub rps: f64,
    /// Verified body MiB/s: the request bodies sent for upload, the response bodies otherwise.
    pub mib_s: f64,
    /// The same in decimal MB/s (HttpArena's upload unit).
    pub mb_s: f64,
    /// Latency percentiles, microseconds (an exchange's write to its answer; pipelined: the
    /// batch's write to each answer).
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile.
    pub p999_us: Option<f64>,
    /// Largest latency.
    pub max_us: Option<f64>,
    /// Client CPU over the window, % of wall time.
    pub client_cpu_pct: Option<f64>,
    /// Server CPU over the window, % of wall time (null where the process measured is not the
    /// one serving: nginx with two workers).
    pub server_cpu_pct: Option<f64>,
    /// Server CPU per verified request, microseconds.
    pub server_cpu_us_per_req: Option<f64>,
    /// Server syscalls per verified request (perf; null without it).
    pub syscalls_per_req: Option<f64>,
    /// Server context switches per verified request.
    pub ctx_switches_per_req: Option<f64>,
    /// The CPUs the server may run on ("0", "0,1").
    pub server_cpus: String,
    /// The server's threads by group: threads, CPU µs and context switches per request.
    pub server_threads: BTreeMap<String, ThreadUse>,
    /// Client CPU >= 90% of wall time while the server's was under 90%.
    pub client_bound: bool,
    /// Server and client pinned to different CPUs.
    pub pinned: bool,
    /// Connections established when the window opened (keep-alive profiles).
    pub connected: usize,
    /// The static profile: verified requests by response encoding ("identity", "gzip").
    pub requests_by_encoding: Option<BTreeMap<String, u64>>,
}

/// Where and how a run was made, besides what the client saw.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    /// The profile's name.
    pub profile: &'static str,
    /// The profile's connection mode.
    pub mode: &'static str,
    /// The server's name.
    pub server: String,
    /// Its address, as a URL.
    pub url: String,
    /// The round.
    pub round: u32,
    /// Connections.
    pub conns: usize,
    /// Server threads.
    pub threads: usize,
    /// Seconds of the window.
    pub secs: f64,
    /// Server and client pinned apart.
    pub pinned: bool,
    /// The server's CPUs.
    pub server_cpus: String,
}

impl ArenaResult {
    /// The record of one run: what the client saw (`o`) and the server's usage (`m`).
    pub(crate) fn of(info: RunInfo, o: &HttpOutcome, m: ServerMetrics) -> ArenaResult {
        let secs = info.secs;
        let wall = o.wall.as_secs_f64();
        let client_cpu_pct =
            (wall > 0.0).then(|| stats::round3(o.cpu.as_secs_f64() / wall * 100.0));
        ArenaResult {
            bench: "http",
            profile: info.profile,
            server: info.server,
            client: "hoop",
            url: info.url,
            round: info.round,
            conns: info.conns,
            mode: info.mode,
            pipeline: if info.mode == "pipeline-16" { 16 } else { 1 },
            threads: info.threads,
            target: info.threads == 1 && info.pinned,
            secs,
            requests: o.requests,
            errors: o.error_count(),
            errors_by_kind: o.errors.clone(),
            first_error: o.first_error.clone(),
            rps: stats::round3(o.requests as f64 / secs),
            mib_s: stats::round3(o.body_bytes as f64 / secs / (1 << 20) as f64),
            mb_s: stats::round3(o.body_bytes as f64 / secs / 1e6),
            p50_us: stats::quantile_us(&o.hist, 0.5),
            p99_us: stats::quantile_us(&o.hist, 0.99),
            p999_us: stats::quantile_us(&o.hist, 0.999),
            max_us: stats::max_us(&o.hist),
            client_cpu_pct,
            server_cpu_pct: m.cpu_pct,
            server_cpu_us_per_req: m.cpu_us_per_req,
            syscalls_per_req: m.syscalls_per_req,
            ctx_switches_per_req: m.ctx_switches_per_req,
            server_cpus: info.server_cpus,
            server_threads: m.threads,
            client_bound: client_cpu_pct.is_some_and(|c| c >= 90.0)
                && m.cpu_pct.is_none_or(|s| s < 90.0),
            pinned: info.pinned,
            connected: o.connected,
            requests_by_encoding: o.by_encoding.clone(),
        }
    }
}

crate::compare::matrix::measured!(ArenaResult, requests);

/// A result of `server` for the tests of the tables.
#[cfg(test)]
pub(crate) fn test_result(
    profile: &'static str,
    server: &str,
    round: u32,
    threads: usize,
    rps: f64,
) -> ArenaResult {
    ArenaResult {
        bench: "http",
        profile,
        server: server.into(),
        client: "hoop",
        url: String::new(),
        round,
        conns: 512,
        mode: "keep-alive",
        pipeline: 1,
        threads,
        target: threads == 1,
        secs: 1.0,
        requests: rps as u64,
        errors: 0,
        errors_by_kind: BTreeMap::new(),
        first_error: None,
        rps,
        mib_s: 1.0,
        mb_s: 1.0,
        p50_us: Some(100.0),
        p99_us: Some(900.0),
        p999_us: None,
        max_us: None,
        client_cpu_pct: None,
        server_cpu_pct: None,
        server_cpu_us_per_req: None,
        syscalls_per_req: None,
        ctx_switches_per_req: None,
        server_cpus: "0".into(),
        server_threads: BTreeMap::new(),
        client_bound: false,
        pinned: threads == 1,
        connected: 512,
        requests_by_encoding: None,
    }
}
