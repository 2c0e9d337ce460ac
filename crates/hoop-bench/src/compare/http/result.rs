//! The `HttpResult` of one run of the load generator, and what the comparison reads of it.

use crate::load::http::client::{HttpClientConfig, HttpOutcome};
use crate::measure::latency as stats;
use crate::measure::usage::ServerMetrics;
use crate::record::http::HttpResult;
use crate::target::netns;

/// The load generator's measurement of `server` (`cfg`, what it saw, the server's usage).
pub(crate) fn client_result(
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
    let client_cpu_pct = (wall > 0.0).then(|| stats::round3(o.cpu.as_secs_f64() / wall * 100.0));
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
        reconnects: o.reconnects,
    }
}

crate::compare::matrix::measured!(HttpResult, requests);
