//! `target/hoop-report/`: report.md, results.json and the charts.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::compare::echo::{in_cell, BIG_CELL, LENS};
use crate::compare::file_quick as quick;
use crate::compare::pair_ratio;
use crate::machine::SysInfo;
use crate::record::echo::EchoResult;
use crate::record::file::FileSuite;
use crate::record::nop::NopResult;
use crate::report::echo::{configurations, label};
use crate::report::file_quick::section as file_section;

/// Everything the report says.
pub(crate) struct ReportData<'a> {
    /// The machine.
    pub sys: &'a SysInfo,
    /// How the processes were pinned.
    pub pinning: String,
    /// Servers compared, in run order.
    pub servers: &'a [String],
    /// Seconds per echo run and rounds per configuration.
    pub echo_secs: f64,
    /// Rounds per configuration.
    pub rounds: u32,
    /// Echo measurements.
    pub echo: &'a [EchoResult],
    /// The echo table (markdown).
    pub echo_table: &'a str,
    /// No-op measurements.
    pub nop: &'a [NopResult],
    /// The no-op table (markdown).
    pub nop_table: &'a str,
    /// The quick file run (empty when skipped).
    pub file: &'a FileSuite,
    /// HTTP measurements (empty when skipped).
    pub http: &'a [crate::record::http::HttpResult],
    /// The HTTP table (markdown).
    pub http_table: &'a str,
    /// Seconds per HTTP run (none: skipped).
    pub http_secs: Option<f64>,
    /// HTTP profile measurements (empty when skipped).
    pub arena: &'a [crate::record::arena::ArenaResult],
    /// The HTTP profile section (markdown; none: skipped).
    pub arena_section: Option<&'a str>,
    /// HTTPS measurements (empty when skipped).
    pub tls: &'a [crate::compare::http::tls::TlsRun],
    /// The HTTPS section (markdown; none: skipped).
    pub tls_section: Option<&'a str>,
    /// Fan-out measurements (empty when skipped).
    pub fanout: &'a [crate::record::fanout::FanoutResult],
    /// The fan-out section (markdown; none: skipped).
    pub fanout_section: Option<&'a str>,
    /// Cancellation counts (empty when skipped).
    pub cancel: &'a [crate::record::cancel::CancelResult],
    /// The cancellation section (markdown; none: skipped).
    pub cancel_section: Option<&'a str>,
    /// Idle-connection measurements (empty when skipped).
    pub idle: &'a [crate::record::idle::IdleResult],
    /// The idle-connection section (markdown; none: skipped).
    pub idle_section: Option<&'a str>,
    /// Runs that could not be measured.
    pub failures: &'a [String],
    /// Phase timings.
    pub phases: &'a [(String, Duration)],
}

/// Writes report.md, results.json and the charts into `dir` (created if needed); returns the
/// paths written.
pub(crate) fn write_report(dir: &Path, d: &ReportData<'_>) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    let mut written = Vec::new();

    let mut all: Vec<serde_json::Value> = Vec::new();
    for r in d.echo {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.nop {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.file.all() {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in &d.file.whole {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.http {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.arena {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.tls {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.fanout {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.cancel {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    for r in d.idle {
        all.push(serde_json::to_value(r).map_err(io::Error::other)?);
    }
    let json = serde_json::to_string_pretty(&all).map_err(io::Error::other)?;
    let path = dir.join("results.json");
    std::fs::write(&path, json + "\n")?;
    written.push(path);

    let (mut charts, mut chart_error) =
        match crate::report::charts::write_charts(dir, d.echo, d.servers, d.nop, d.file, d.http) {
            Ok(c) => (c, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
    // Beside the absolute bars, each bench's ratio chart: what a reader compares.
    match crate::report::ratios::write(dir, d.echo, d.http, d.fanout, d.arena) {
        Ok(c) => charts.extend(c),
        Err(e) => {
            chart_error = Some(chart_error.map_or(e.clone(), |first| format!("{first}; {e}")))
        }
    }
    written.extend(charts.iter().map(|c| dir.join(c)));

    let path = dir.join("report.md");
    std::fs::write(&path, markdown(d, &charts, chart_error.as_deref()))?;
    written.push(path);
    Ok(written)
}

fn markdown(d: &ReportData<'_>, charts: &[String], chart_error: Option<&str>) -> String {
    let s = d.sys;
    let mut m = String::new();
    let _ = writeln!(m, "# hoop benchmark report\n");
    let _ = writeln!(m, "- Date: {}", s.date_utc);
    let _ = writeln!(m, "- Command: `{}`", s.command);
    let _ = writeln!(m, "- CPU: {}", s.cpu_model);
    let _ = writeln!(
        m,
        "- Cores: {} online, this process may use {:?}",
        s.cores_online, s.cores_allowed
    );
    let _ = writeln!(m, "- Kernel: {}", s.kernel);
    let sizes = s.uring_ring_sizes.map_or(String::new(), |(sq, cq)| {
        format!(" (default ring: SQ {sq}, CQ {cq})")
    });
    let _ = writeln!(
        m,
        "- io_uring: setup flags of hoop's ring: {}{sizes}",
        s.uring_setup_flags
    );
    let _ = writeln!(m, "- Pinning: {}", d.pinning);
    let _ = writeln!(
        m,
        "- perf: {}",
        s.perf.as_deref().map_or_else(
            || "not found: syscalls/req are null".to_string(),
            |p| format!("{p} (`perf stat -e raw_syscalls:sys_enter -p PID`)")
        )
    );
    let phases: Vec<String> = d
        .phases
        .iter()
        .map(|(n, t)| format!("{n} {:.1} s", t.as_secs_f64()))
        .collect();
    let _ = writeln!(m, "- Phases: {}\n", phases.join(", "));

    let _ = writeln!(m, "## Echo, side by side\n");
    let _ = writeln!(
        m,
        "Each server runs as a child process; the client is `hoop bench echo` on a hoop runtime \
         (one thread). Every reply is compared byte for byte with its request; mismatches, early \
         ends of stream and errors count as errors, never as requests. {} s per run, {} rounds per \
         configuration in alternating order ({}); values are medians over rounds, and the \
         ratios are taken pair by pair within a round, then their median. `hoop (io_uring)` is \
         `hoop serve echo --driver uring` and `hoop (epoll)` is `hoop serve echo --driver epoll`: \
         the same server code on the two drivers (JSON `server`: `hoop` and `hoop-epoll`). Server \
         CPU is utime+stime from /proc/PID/stat over the window; syscalls per request come from \
         perf's raw_syscalls:sys_enter tracepoint on the server PID, enabled in every run for \
         every server alike. The cell c={} l={} (16 KiB messages: a reply takes several \
         receives, or one bundle of ring buffers) follows the quick matrix's four.\n",
        d.echo_secs,
        d.rounds,
        d.servers
            .iter()
            .map(|s| label(s))
            .collect::<Vec<_>>()
            .join(", "),
        BIG_CELL.0,
        BIG_CELL.1,
    );
    if d.echo.is_empty() {
        let _ = writeln!(m, "No echo measurement.\n");
    } else {
        let _ = writeln!(m, "{}", d.echo_table);
        let bound: Vec<String> = d
            .echo
            .iter()
            .filter(|r| r.client_bound)
            .map(|r| {
                format!(
                    "{} c={} l={} round {}",
                    r.server, r.conns, r.len_bytes, r.round
                )
            })
            .collect();
        if bound.is_empty() {
            let _ = writeln!(
                m,
                "The client was never the bottleneck (client_bound false in every run).\n"
            );
        } else {
            let _ = writeln!(
                m,
                "**The client was the bottleneck** (its CPU >= 90% of wall time while the server's \
                 was under 90%) in: {}. Those requests/s measure the client; compare server CPU \
                 per request instead.\n",
                bound.join(", ")
            );
        }
    }

    let _ = writeln!(m, "## No-op batches\n");
    if d.nop.is_empty() {
        let _ = writeln!(m, "No no-op measurement.\n");
    } else {
        if d.nop.iter().any(|r| r.engine == crate::load::nop::SHARED) {
            let _ = writeln!(
                m,
                "`hoop` and `raw-io-uring`: one ring per thread. `hoop-shared` (kbio's nopbench): \
                 every thread submits batches of `rings.nop()` to one `hoop::shared::Rings` of one \
                 ring and awaits each batch in `futures::executor::block_on` (no runtime), in \
                 kbio's two configurations (1 thread with 64 entries, 4 threads with 1024).\n"
            );
        }
        let _ = writeln!(m, "{}", d.nop_table);
    }

    if d.file.all().next().is_some() || !d.file.failures.is_empty() {
        m.push_str(&file_section(d.file));
    }

    if let Some(secs) = d.http_secs {
        let _ = writeln!(
            m,
            "## HTTP static files\n\n\
             `hoop serve http` on io_uring and on epoll, nginx (one process, sendfile on, access \
             log off, keep-alive unlimited; its configuration is written under the report \
             directory) and a tokio + hyper 1.x server (tokio::fs, one thread), each a child \
             process pinned like the echo servers, loaded by `hoop bench http`'s client on the \
             other CPU; {secs} s per run, 2 rounds in alternating order, medians. Every response \
             is checked: status 200, Content-Length, and every body byte against the file. \
             The static mix: 20 files of 3-300 KB asked for in turn with `Accept-Encoding: br, \
             gzip`, each body the file or, with `Content-Encoding: gzip`, exactly its `.gz` \
             variant (nginx: `gzip_static on`). `wrk req/s`: wrk -t1 right after the load \
             generator (hoop and nginx, when installed; bodies not verified). \
             Full matrix (adds 10,000 connections): `hoop bench http --full`.\n\n{}\n",
            d.http_table
        );
    }

    if let Some(section) = d.arena_section {
        m.push_str(section);
    }

    if let Some(section) = d.tls_section {
        m.push_str(section);
    }

    if let Some(section) = d.fanout_section {
        m.push_str(section);
    }

    if let Some(section) = d.cancel_section {
        m.push_str(section);
    }

    if let Some(section) = d.idle_section {
        m.push_str(section);
    }

    let _ = writeln!(m, "## Speed targets\n");
    targets(&mut m, d);

    if !charts.is_empty() || chart_error.is_some() {
        let _ = writeln!(m, "## Charts\n");
        for c in charts {
            let _ = writeln!(m, "![{c}]({c})\n");
        }
        if let Some(e) = chart_error {
            let _ = writeln!(m, "Charts could not be drawn: {e}\n");
        }
    }
    if !d.failures.is_empty() {
        let _ = writeln!(m, "## Failed runs\n");
        for f in d.failures {
            let _ = writeln!(m, "- {f}");
        }
        m.push('\n');
    }
    m
}

fn targets(m: &mut String, d: &ReportData<'_>) {
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    for (c, l) in configurations(d.echo) {
        // The targets are set on the product cells; the 16 KiB cell is measured, not judged.
        if (c != 50 && c != 500) || !LENS.contains(&l) {
            continue;
        }
        let rps = |r: &EchoResult| Some(r.rps);
        let cpu = |r: &EchoResult| r.usage.server_cpu_us_per_req;
        for base in d.servers.iter().filter(|s| !s.starts_with("hoop")) {
            if let Some(r) = pair_ratio(d.echo, "hoop", base, in_cell(c, l), rps) {
                let _ = writeln!(
                    m,
                    "- echo c={c} l={l}: hoop (io_uring)/{base} requests/s {r:.2}x (target >= \
                     1.0x): {}",
                    verdict(r >= 1.0)
                );
            }
        }
        if let Some(r) = pair_ratio(d.echo, "hoop", "tokio", in_cell(c, l), cpu) {
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop (io_uring)/tokio server CPU per request {r:.2}x \
                 (target <= 0.9x): {}",
                verdict(r <= 0.9)
            );
        }
        if let Some(r) = pair_ratio(d.echo, "hoop", "tokio", in_cell(c, l), cpu) {
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop best path/tokio server CPU per request {r:.2}x \
                 (modern-io_uring target <= 0.8x): {}",
                verdict(r <= 0.8)
            );
        }
        if let Some(r) = pair_ratio(d.echo, "hoop", "hoop-basic", in_cell(c, l), cpu) {
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop best path/basic path server CPU per request {r:.2}x \
                 (target <= 0.9x): {}",
                verdict(r <= 0.9)
            );
        }
        if let Some(r) = pair_ratio(d.echo, "hoop", "hoop-basic", in_cell(c, l), rps) {
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop best path/basic path requests/s {r:.2}x (no target)"
            );
        }
        if let Some(r) = pair_ratio(d.echo, "hoop-epoll", "tokio", in_cell(c, l), rps) {
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop (epoll)/tokio requests/s {r:.2}x (target: within 5%, \
                 >= 0.95x): {}",
                verdict(r >= 0.95)
            );
        }
        if let Some(r) = pair_ratio(d.echo, "hoop-epoll", "tokio", in_cell(c, l), cpu) {
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop (epoll)/tokio server CPU per request {r:.2}x (no target)"
            );
        }
        let uring_rps = pair_ratio(d.echo, "hoop", "hoop-epoll", in_cell(c, l), rps);
        let uring_cpu = pair_ratio(d.echo, "hoop", "hoop-epoll", in_cell(c, l), cpu);
        if let Some(r) = uring_rps {
            let cpu = uring_cpu.map_or(String::new(), |x| {
                format!(", server CPU per request {x:.2}x")
            });
            let _ = writeln!(
                m,
                "- echo c={c} l={l}: hoop (io_uring)/hoop (epoll), the same code on the two \
                 drivers: requests/s {r:.2}x{cpu} (no target)"
            );
        }
    }
    let hoop = d.nop.iter().find(|r| r.engine == crate::load::nop::HOOP);
    let raw = d.nop.iter().find(|r| r.engine == crate::load::nop::RAW);
    if let (Some(h), Some(r)) = (hoop, raw) {
        if r.nops_per_sec > 0.0 {
            let x = h.nops_per_sec / r.nops_per_sec;
            let _ = writeln!(
                m,
                "- no-op batch {}: hoop/raw ceiling {x:.2}x (target >= 0.5x): {}",
                h.batch,
                verdict(x >= 0.5)
            );
        }
        if let (Some(p), Some(mean)) = (h.batch_p9999_us, h.batch_mean_us) {
            if mean > 0.0 {
                let x = p / mean;
                let _ = writeln!(
                    m,
                    "- no-op: hoop batch p99.99 / mean {x:.1}x (target < 10x): {}",
                    verdict(x < 10.0)
                );
            }
        }
    }
    for t in crate::report::nop::shared_targets(d.nop) {
        let _ = writeln!(m, "{t}");
    }
    if d.file.all().next().is_some() {
        for t in quick::targets(d.file) {
            let _ = writeln!(m, "{t}");
        }
    }
    if !d.http.is_empty() {
        for t in crate::report::http::targets(d.http) {
            let _ = writeln!(m, "- http: {t}");
        }
    }
    m.push('\n');
}
