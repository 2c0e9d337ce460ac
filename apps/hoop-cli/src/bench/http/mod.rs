//! `hoop bench http`: the HTTP load generator ([`client`]) against one server (`--url`), or
//! side by side: hoop (io_uring), hoop (epoll), nginx when installed ([`nginx`]) and a
//! tokio + hyper static server ([`hyper_server`]), each a child process pinned to the first
//! CPU, the client on the second, in alternating order (A B C D A B C D), each configuration
//! at least twice, on files the bench creates (1 KiB, 64 KiB, 1 MiB, every response verified
//! byte for byte). When `wrk` is installed, one cell also runs wrk against hoop.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::output::Out;
use super::server::{Ready, ServerChild, ServerMetrics, ServerProbe};
use super::stats::{self, median};
use super::{check_conns, check_rounds, check_secs, invalid};

pub(crate) mod client;
pub(crate) mod hyper_server;
pub(crate) mod nginx;

use client::{HttpClientConfig, HttpOutcome};

/// Most requests in flight per connection (`--pipeline`).
const MAX_PIPELINE: usize = 1024;
/// Planned overhead of one run (connect phase, stop), for the progress bar.
const RUN_OVERHEAD_SECS: f64 = 0.3;

/// The servers of the side-by-side runs, in run order.
pub(crate) const SERVERS: [&str; 4] = ["hoop", "hoop-epoll", "nginx", "hyper"];

/// How a server is named in tables and charts.
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-epoll" => "hoop (epoll)",
        "hyper" => "tokio+hyper",
        other => other,
    }
}

/// Arguments of `hoop bench http`.
#[derive(Debug, clap::Args)]
pub struct HttpBenchArgs {
    /// The file to load (`http://IP:PORT/path`). Without it: hoop (io_uring and epoll), nginx
    /// and tokio+hyper side by side on files the bench creates.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Connections [default: 50; side by side: 50 and 500 keep-alive, 50 connection-per-request].
    #[arg(short = 'c', long = "conns", value_name = "CONNS")]
    pub conns: Option<usize>,
    /// Seconds per run [default: 5; side by side: 2].
    #[arg(short = 't', long = "secs", value_name = "SECS")]
    pub secs: Option<f64>,
    /// A new connection for every request (`Connection: close`).
    #[arg(long)]
    pub close: bool,
    /// Requests in flight per keep-alive connection, sent together.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pipeline: usize,
    /// With --url: compare every body byte for byte with this file (its size is the expected
    /// Content-Length; without it, the first response's length is expected of every response).
    #[arg(long, value_name = "FILE")]
    pub verify: Option<PathBuf>,
    /// With --url: the server's PID, to measure its CPU time and syscalls per request.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Side by side: the full matrix (adds 10,000 keep-alive connections).
    #[arg(long)]
    pub full: bool,
    /// Side by side: repetitions of each configuration (at least 2).
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub rounds: u32,
    /// Side by side: the servers, comma-separated (hoop, hoop-epoll, nginx, hyper).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Side by side: where the files and nginx's configuration go (default:
    /// target/hoop-report/http).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// One HTTP measurement: one server, one configuration, one round (a JSON line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HttpResult {
    /// Always "http".
    pub bench: &'static str,
    /// "hoop" (io_uring), "hoop-epoll", "nginx", "hyper", or "external" (--url).
    pub server: String,
    /// "hoop" (this load generator) or "wrk".
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
    /// Client CPU >= 90% of wall time while the server's was under 90%.
    pub client_bound: bool,
    /// Server and client pinned to different CPUs.
    pub pinned: bool,
    /// Connections established when the window opened (keep-alive).
    pub connected: usize,
}

/// One side-by-side configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    /// File size.
    pub file_bytes: u64,
    /// Connections.
    pub conns: usize,
    /// Connection per request.
    pub close: bool,
}

impl Cell {
    fn mode(&self) -> &'static str {
        if self.close {
            "close"
        } else {
            "keep-alive"
        }
    }
}

/// The files of the side-by-side runs.
pub(crate) const FILES: [u64; 3] = [1024, 64 * 1024, 1 << 20];

/// The quick matrix (the main job's): 1 KiB at 50 and 500 keep-alive, 64 KiB and 1 MiB at 50,
/// 1 KiB connection-per-request at 50.
pub(crate) fn quick_cells() -> Vec<Cell> {
    let c = |file_bytes, conns, close| Cell {
        file_bytes,
        conns,
        close,
    };
    vec![
        c(1024, 50, false),
        c(1024, 500, false),
        c(64 * 1024, 50, false),
        c(1 << 20, 50, false),
        c(1024, 50, true),
    ]
}

/// The full matrix: every file at 50 and 500 keep-alive and 50 connection-per-request, and
/// 1 KiB at 10,000 keep-alive.
pub(crate) fn full_cells() -> Vec<Cell> {
    let mut v = Vec::new();
    for &f in &FILES {
        for (conns, close) in [(50, false), (500, false), (50, true)] {
            v.push(Cell {
                file_bytes: f,
                conns,
                close,
            });
        }
    }
    v.push(Cell {
        file_bytes: 1024,
        conns: 10_000,
        close: false,
    });
    v
}

/// Name of the test file of `size` bytes.
fn file_name(size: u64) -> String {
    format!("f{size}.bin")
}

/// Deterministic content of the test file of `size` bytes.
fn file_content(size: u64) -> Vec<u8> {
    let mut x: u64 = size.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(size as usize + 8);
    while (v.len() as u64) < size {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(size as usize);
    v
}

/// Runs `hoop bench http`.
pub(crate) fn run_http_command(args: HttpBenchArgs, json: bool) -> io::Result<()> {
    if let Some(c) = args.conns {
        check_conns(c)?;
    }
    if args.pipeline == 0 || args.pipeline > MAX_PIPELINE {
        return Err(invalid(format!(
            "--pipeline must be between 1 and {MAX_PIPELINE} (got {})",
            args.pipeline
        )));
    }
    if args.close && args.pipeline > 1 {
        return Err(invalid(
            "--pipeline applies to keep-alive connections, not with --close",
        ));
    }
    super::sysinfo::raise_nofile_limit();
    match &args.url {
        Some(url) => {
            let secs = args.secs.unwrap_or(5.0);
            check_secs("-t/--secs", secs)?;
            run_external(url, &args, secs, json)
        }
        None => {
            if args.verify.is_some() || args.server_pid.is_some() {
                return Err(invalid("--verify and --server-pid go with --url"));
            }
            check_rounds(args.rounds)?;
            let secs = args.secs.unwrap_or(2.0);
            check_secs("-t/--secs", secs)?;
            let servers = parse_servers(args.servers.clone())?;
            let mut cells = if args.full {
                full_cells()
            } else {
                quick_cells()
            };
            if let Some(c) = args.conns {
                cells.retain(|cell| cell.close == args.close);
                for cell in &mut cells {
                    cell.conns = c;
                }
                cells.dedup();
            }
            let dir = args
                .dir
                .clone()
                .unwrap_or_else(|| super::sysinfo::default_out_dir().join("http"));
            let plan = Plan {
                cells,
                servers,
                secs,
                rounds: args.rounds,
                pipeline: args.pipeline,
                dir,
            };
            let out = Out::new(json, plan.planned_secs());
            let outcome = run_side_by_side(&plan, &out);
            out.finish();
            out.human(&summary_table(
                &outcome.results,
                &plan.servers,
                &outcome.notes,
            ));
            finish_status(&outcome)
        }
    }
}

/// Checks `--servers` (default: all four).
fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    let list = list.unwrap_or_else(|| SERVERS.iter().map(|s| s.to_string()).collect());
    let mut out: Vec<String> = Vec::new();
    for s in list {
        let s = s.trim().to_ascii_lowercase();
        if !SERVERS.contains(&s.as_str()) {
            return Err(invalid(format!(
                "unknown server {s:?} in --servers (known: {})",
                SERVERS.join(", ")
            )));
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    if out.is_empty() {
        return Err(invalid("--servers needs at least one server"));
    }
    Ok(out)
}

/// `http://HOST:PORT/path` -> (address, host header, path).
fn parse_url(url: &str) -> io::Result<(SocketAddr, String, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid(format!("--url must start with http:// (got {url:?})")))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        return Err(invalid(format!("--url has no host: {url:?}")));
    }
    let with_port = if host.contains(':') && !host.ends_with(']') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| invalid(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| invalid(format!("{host} resolves to nothing")))?;
    Ok((addr, host.to_string(), path.to_string()))
}

/// The size of the body at `path`, from one plain request (the length every response must
/// have when no file is given to verify against).
fn probe_length(addr: SocketAddr, host: &str, path: &str) -> io::Result<u64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {addr}: {e}")))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(&client::request_bytes(host, path, true))?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        if s.read(&mut b)? == 0 {
            break;
        }
        head.push(b[0]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) if resp.code == Some(200) => resp
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
            .ok_or_else(|| io::Error::other(format!("{path}: no Content-Length in the response"))),
        Ok(httparse::Status::Complete(_)) => Err(io::Error::other(format!(
            "{path}: status {}, not 200",
            resp.code.unwrap_or(0)
        ))),
        _ => Err(io::Error::other(format!("{path}: no valid response head"))),
    }
}

/// `--url`: one measurement.
fn run_external(url: &str, args: &HttpBenchArgs, secs: f64, json: bool) -> io::Result<()> {
    let (addr, host, path) = parse_url(url)?;
    let verify: Option<Arc<[u8]>> = match &args.verify {
        Some(p) => Some(
            std::fs::read(p)
                .map_err(|e| io::Error::new(e.kind(), format!("--verify {}: {e}", p.display())))?
                .into(),
        ),
        None => None,
    };
    let file_bytes = match &verify {
        Some(v) => v.len() as u64,
        None => probe_length(addr, &host, &path)?,
    };
    let cfg = HttpClientConfig {
        addr,
        host,
        path,
        conns: args.conns.unwrap_or(50),
        secs: Duration::from_secs_f64(secs),
        close: args.close,
        pipeline: args.pipeline,
        file_bytes,
        verify,
    };
    let out = Out::new(json, secs);
    out.start(&format!("http {url}"), secs);
    let mut probe = None;
    let outcome = client::run_client(&cfg, None, || {
        probe = args.server_pid.map(|pid| ServerProbe::start(pid, cfg.secs));
    })?;
    let metrics = probe
        .map(|p| p.finish(outcome.wall, outcome.requests))
        .unwrap_or_default();
    out.finish();
    let r = make_result("external", url, 0, &cfg, &outcome, metrics, false);
    out.measurement(&r);
    out.human(&describe(&r));
    if r.errors > 0 {
        return Err(io::Error::other(format!(
            "{} error(s) during the run (first: {}); {} verified request(s)",
            r.errors,
            r.first_error.as_deref().unwrap_or("?"),
            r.requests
        )));
    }
    if r.requests == 0 {
        return Err(io::Error::other("no request was verified in the window"));
    }
    Ok(())
}

fn make_result(
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
        verified_bytes: cfg.verify.is_some(),
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
        client_bound: client_cpu_pct.is_some_and(|c| c >= 90.0)
            && m.cpu_pct.is_none_or(|s| s < 90.0),
        pinned,
        connected: o.connected,
    }
}

fn describe(r: &HttpResult) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = format!(
        "http {} {} ({} B, {} conns, {}{}): {} verified requests ({:.0} req/s, {:.1} MiB/s), {} errors {:?}\n\
         latency µs: p50 {}  p99 {}  p99.9 {}  max {}\n\
         client CPU {}%  server CPU {}%  server CPU µs/req {}  syscalls/req {}",
        r.server,
        r.url,
        r.file_bytes,
        r.conns,
        r.mode,
        if r.pipeline > 1 {
            format!(", pipeline {}", r.pipeline)
        } else {
            String::new()
        },
        r.requests,
        r.rps,
        r.mib_s,
        r.errors,
        r.errors_by_kind,
        f(r.p50_us),
        f(r.p99_us),
        f(r.p999_us),
        f(r.max_us),
        f(r.client_cpu_pct),
        f(r.server_cpu_pct),
        r.server_cpu_us_per_req
            .map_or("-".into(), |x| format!("{x:.2}")),
        r.syscalls_per_req.map_or("-".into(), |x| format!("{x:.2}")),
    );
    if let Some(e) = &r.first_error {
        s.push_str(&format!("\nfirst error: {e}"));
    }
    if r.client_bound {
        s.push_str("\nnote: the client was the bottleneck (its CPU near 100%, the server's not)");
    }
    s
}

/// A side-by-side plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Configurations.
    pub cells: Vec<Cell>,
    /// Servers, in run order.
    pub servers: Vec<String>,
    /// Seconds per run.
    pub secs: f64,
    /// Rounds per configuration.
    pub rounds: u32,
    /// Requests in flight per keep-alive connection.
    pub pipeline: usize,
    /// Files and nginx's prefix.
    pub dir: PathBuf,
}

impl Plan {
    /// Planned seconds, for progress bars.
    pub(crate) fn planned_secs(&self) -> f64 {
        let runs = self.cells.len() * self.servers.len() * self.rounds as usize;
        runs as f64 * (self.secs + RUN_OVERHEAD_SECS)
    }
}

/// What a side-by-side run produced.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Every measurement.
    pub results: Vec<HttpResult>,
    /// Runs that could not be measured, with why.
    pub failures: Vec<String>,
    /// Lines for the table (nginx missing, fd limit, wrk).
    pub notes: Vec<String>,
}

/// The exit status: an error if a run failed or counted errors.
pub(crate) fn finish_status(o: &Outcome) -> io::Result<()> {
    let bad = o
        .results
        .iter()
        .filter(|r| r.errors > 0 || r.requests == 0)
        .count();
    if o.results.is_empty() || !o.failures.is_empty() || bad > 0 {
        return Err(io::Error::other(format!(
            "{} run(s) measured, {} failed, {} counted errors or no verified request{}",
            o.results.len(),
            o.failures.len(),
            bad,
            o.failures
                .first()
                .map_or(String::new(), |f| format!("; first failure: {f}"))
        )));
    }
    Ok(())
}

/// Starts server `name` pinned to `cpu`, serving `root`.
fn start_server(
    name: &str,
    root: &Path,
    dir: &Path,
    cpu: Option<usize>,
) -> io::Result<Option<ServerChild>> {
    let exe = std::env::current_exe()?;
    let hoop = |extra: &[&str]| {
        let mut cmd = Command::new(&exe);
        cmd.args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra);
        cmd
    };
    let (cmd, ready) = match name {
        "hoop" => (hoop(&["--driver", "uring"]), Ready::ListeningLine),
        "hoop-epoll" => (hoop(&["--driver", "epoll"]), Ready::ListeningLine),
        "hyper" => (hoop(&["--server", "hyper"]), Ready::ListeningLine),
        "nginx" => {
            let Some(bin) = nginx::find() else {
                return Ok(None);
            };
            let addr = nginx::free_addr()?;
            let root = std::fs::canonicalize(root)?;
            (
                nginx::command(&bin, &dir.join("nginx"), &root, addr)?,
                Ready::Connect(addr),
            )
        }
        other => return Err(invalid(format!("unknown server {other}"))),
    };
    ServerChild::spawn_cmd(name, cmd, cpu, ready).map(Some)
}

/// The test files' contents by size.
type Files = BTreeMap<u64, Arc<[u8]>>;

/// Writes the test files into `dir/root` (kept between runs when already right).
fn make_files(dir: &Path) -> io::Result<(PathBuf, Files)> {
    let root = dir.join("root");
    std::fs::create_dir_all(&root)?;
    let mut files = BTreeMap::new();
    for &size in &FILES {
        let data = file_content(size);
        let path = root.join(file_name(size));
        if std::fs::read(&path).ok().as_deref() != Some(&data[..]) {
            std::fs::write(&path, &data)?;
        }
        files.insert(size, Arc::from(data));
    }
    Ok((root, files))
}

/// The soft fd limit, after raising it to the hard one.
fn nofile_limit() -> u64 {
    // SAFETY: rlimit is plain old data.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    lim.rlim_cur
}

/// Runs the plan: servers started once (pinned to the first CPU), each configuration `rounds`
/// times with the servers in alternating order; then the wrk cell when wrk is installed.
pub(crate) fn run_side_by_side(plan: &Plan, out: &Out) -> Outcome {
    let mut o = Outcome::default();
    let (server_cpu, client_cpu) = super::sysinfo::pin_plan();
    let (root, files) = match make_files(&plan.dir) {
        Ok(f) => f,
        Err(e) => {
            o.failures.push(format!(
                "cannot write the test files under {}: {e}",
                plan.dir.display()
            ));
            return o;
        }
    };
    let mut cells = plan.cells.clone();
    let limit = nofile_limit();
    if let Some(big) = cells.iter().map(|c| c.conns).max() {
        // Client and server each need one fd per connection (and a few more).
        if (big as u64) + 64 > limit {
            o.notes.push(format!(
                "the open-file limit is {limit} (hard limit reached): runs of more than {} \
                 connections are skipped; raise it with `ulimit -Hn`",
                limit.saturating_sub(64)
            ));
            cells.retain(|c| (c.conns as u64) + 64 <= limit);
        }
    }
    let mut servers: Vec<(String, ServerChild)> = Vec::new();
    for name in &plan.servers {
        match start_server(name, &root, &plan.dir, server_cpu) {
            Ok(Some(child)) => servers.push((name.clone(), child)),
            Ok(None) => o.notes.push(nginx::MISSING.to_string()),
            Err(e) => {
                out.note(&format!("warning: {e}"));
                o.failures.push(e.to_string());
            }
        }
    }
    for cell in &cells {
        for round in 0..plan.rounds {
            for (name, child) in servers.iter_mut() {
                let what = format!(
                    "http {name}: {} B, c={} {} round {}",
                    cell.file_bytes,
                    cell.conns,
                    cell.mode(),
                    round + 1
                );
                out.start(&what, plan.secs + RUN_OVERHEAD_SECS);
                let cfg = HttpClientConfig {
                    addr: child.addr,
                    host: child.addr.to_string(),
                    path: format!("/{}", file_name(cell.file_bytes)),
                    conns: cell.conns,
                    secs: Duration::from_secs_f64(plan.secs),
                    close: cell.close,
                    pipeline: if cell.close { 1 } else { plan.pipeline },
                    file_bytes: cell.file_bytes,
                    verify: files.get(&cell.file_bytes).cloned(),
                };
                let url = format!("http://{}{}", cfg.host, cfg.path);
                let pid = child.pid();
                let mut probe = None;
                let run = client::run_client(&cfg, client_cpu, || {
                    probe = Some(ServerProbe::start(pid, cfg.secs));
                });
                match run.and_then(|outcome| {
                    let m = probe
                        .take()
                        .map(|p| p.finish(outcome.wall, outcome.requests))
                        .unwrap_or_default();
                    child.check_alive()?;
                    let pinned = server_cpu.is_some() && client_cpu.is_some();
                    Ok(make_result(name, &url, round, &cfg, &outcome, m, pinned))
                }) {
                    Ok(r) => {
                        out.measurement(&r);
                        if r.errors > 0 || r.requests == 0 {
                            out.note(&format!(
                                "warning: {what}: {} verified, {} error(s), first: {}",
                                r.requests,
                                r.errors,
                                r.first_error.as_deref().unwrap_or("-")
                            ));
                        }
                        o.results.push(r);
                    }
                    Err(e) => {
                        out.note(&format!("warning: {what}: {e}"));
                        o.failures.push(format!("{what}: {e}"));
                    }
                }
                out.done(plan.secs + RUN_OVERHEAD_SECS);
            }
        }
    }
    // One cell with wrk as the client, so a reader sees the two clients agree.
    if let Some((_, hoop)) = servers.iter().find(|(n, _)| n == "hoop") {
        match wrk_path() {
            Some(wrk) => match run_wrk(&wrk, hoop, plan.secs, client_cpu, server_cpu) {
                Ok(r) => {
                    o.notes.push(format!(
                        "wrk -t1 -c50 against hoop (io_uring), 1 KiB keep-alive: {:.0} req/s \
                         ({} errors); hoop's client in the same cell: {}",
                        r.rps,
                        r.errors,
                        median(
                            &o.results
                                .iter()
                                .filter(|x| x.server == "hoop"
                                    && x.file_bytes == 1024
                                    && x.conns == 50
                                    && x.mode == "keep-alive")
                                .map(|x| x.rps)
                                .collect::<Vec<_>>()
                        )
                        .map_or("-".into(), |v| format!("{v:.0} req/s"))
                    ));
                    out.measurement(&r);
                    o.results.push(r);
                }
                Err(e) => o.notes.push(format!("wrk failed: {e}")),
            },
            None => o
                .notes
                .push("wrk not installed (apt-get install wrk): no second client".into()),
        }
    }
    drop(servers);
    o
}

fn wrk_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("wrk"))
        .find(|p| p.is_file())
}

/// wrk -t1 -c50 on the 1 KiB file, pinned to the client CPU.
fn run_wrk(
    wrk: &Path,
    server: &ServerChild,
    secs: f64,
    client_cpu: Option<usize>,
    server_cpu: Option<usize>,
) -> io::Result<HttpResult> {
    let url = format!("http://{}/{}", server.addr, file_name(1024));
    let secs_whole = secs.ceil().max(1.0) as u64;
    let mut cmd = match client_cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(wrk);
            c
        }
        None => Command::new(wrk),
    };
    cmd.args(["-t1", "-c50"])
        .arg(format!("-d{secs_whole}s"))
        .arg(&url);
    let probe = ServerProbe::start(server.pid(), Duration::from_secs(secs_whole));
    let outp = cmd.output()?;
    let text = String::from_utf8_lossy(&outp.stdout).to_string();
    let (requests, rps, errors) = parse_wrk(&text)
        .ok_or_else(|| io::Error::other(format!("cannot read wrk's output: {text}")))?;
    let m = probe.finish(Duration::from_secs(secs_whole), requests);
    Ok(HttpResult {
        bench: "http",
        server: "hoop".into(),
        client: "wrk",
        url,
        round: 0,
        file_bytes: 1024,
        conns: 50,
        mode: "keep-alive",
        pipeline: 1,
        secs: secs_whole as f64,
        requests,
        errors,
        errors_by_kind: BTreeMap::new(),
        first_error: None,
        verified_bytes: false,
        rps,
        mib_s: stats::round3(rps * 1024.0 / (1 << 20) as f64),
        p50_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        client_cpu_pct: None,
        server_cpu_pct: m.cpu_pct,
        server_cpu_us_per_req: m.cpu_us_per_req,
        syscalls_per_req: m.syscalls_per_req,
        client_bound: false,
        pinned: client_cpu.is_some() && server_cpu.is_some(),
        connected: 50,
    })
}

/// (requests, requests/s, errors) from wrk's summary.
fn parse_wrk(text: &str) -> Option<(u64, f64, u64)> {
    let requests = text
        .lines()
        .find(|l| l.contains("requests in"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let rps = text
        .lines()
        .find(|l| l.starts_with("Requests/sec:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let mut errors = 0u64;
    for l in text.lines() {
        if let Some(v) = l.trim().strip_prefix("Non-2xx or 3xx responses:") {
            errors += v.trim().parse::<u64>().unwrap_or(0);
        }
        if let Some(v) = l.trim().strip_prefix("Socket errors:") {
            for part in v.split(',') {
                errors += part
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Some((requests, rps, errors))
}

/// The configurations present in `results` (hoop's client only), in first-seen order.
pub(crate) fn cells_of(results: &[HttpResult]) -> Vec<Cell> {
    let mut v: Vec<Cell> = Vec::new();
    for r in results.iter().filter(|r| r.client == "hoop") {
        let c = Cell {
            file_bytes: r.file_bytes,
            conns: r.conns,
            close: r.mode == "close",
        };
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

fn in_cell(r: &HttpResult, c: &Cell) -> bool {
    r.client == "hoop"
        && r.file_bytes == c.file_bytes
        && r.conns == c.conns
        && (r.mode == "close") == c.close
}

/// Median over rounds of `f` for `server` in `cell`.
pub(crate) fn med(
    results: &[HttpResult],
    server: &str,
    cell: &Cell,
    f: impl Fn(&HttpResult) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = results
        .iter()
        .filter(|r| r.server == server && in_cell(r, cell))
        .filter_map(f)
        .collect();
    median(&v)
}

/// Median over rounds of `num`'s `f` / `base`'s `f`, paired within each round.
pub(crate) fn pair_ratio(
    results: &[HttpResult],
    num: &str,
    base: &str,
    cell: &Cell,
    f: impl Fn(&HttpResult) -> Option<f64>,
) -> Option<f64> {
    let ratios: Vec<f64> = results
        .iter()
        .filter(|r| r.server == num && in_cell(r, cell))
        .filter_map(|a| {
            let b = results
                .iter()
                .find(|r| r.server == base && r.round == a.round && in_cell(r, cell))?;
            let (x, y) = (f(a)?, f(b)?);
            (y > 0.0).then(|| x / y)
        })
        .collect();
    median(&ratios)
}

/// Human size of a file.
pub(crate) fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The side-by-side table (markdown): medians over rounds, and hoop (io_uring)'s ratios to
/// every server, paired within a round; then the notes.
pub(crate) fn summary_table(
    results: &[HttpResult],
    servers: &[String],
    notes: &[String],
) -> String {
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let mut s = String::from(
        "| file | conns | mode | server | req/s (median) | MiB/s | p99 µs | server CPU µs/req | \
         syscalls/req | client CPU % | errors | client-bound runs | hoop/this req/s | hoop/this CPU/req |\n\
         |---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for cell in cells_of(results) {
        for server in servers {
            let runs: Vec<&HttpResult> = results
                .iter()
                .filter(|r| &r.server == server && in_cell(r, &cell))
                .collect();
            if runs.is_empty() {
                continue;
            }
            let m = |f: fn(&HttpResult) -> Option<f64>| med(results, server, &cell, f);
            let (rr, cr) = if server == "hoop" {
                ("1.00".to_string(), "1.00".to_string())
            } else {
                (
                    f2(pair_ratio(results, "hoop", server, &cell, |r| Some(r.rps))),
                    f2(pair_ratio(results, "hoop", server, &cell, |r| {
                        r.server_cpu_us_per_req
                    })),
                )
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {:.0} | {:.1} | {} | {} | {} | {} | {} | {}/{} | {rr} | {cr} |\n",
                size_label(cell.file_bytes),
                cell.conns,
                cell.mode(),
                label(server),
                m(|r| Some(r.rps)).unwrap_or(0.0),
                m(|r| Some(r.mib_s)).unwrap_or(0.0),
                f1(m(|r| r.p99_us)),
                f2(m(|r| r.server_cpu_us_per_req)),
                f2(m(|r| r.syscalls_per_req)),
                f1(m(|r| r.client_cpu_pct)),
                runs.iter().map(|r| r.errors).sum::<u64>(),
                runs.iter().filter(|r| r.client_bound).count(),
                runs.len(),
            ));
        }
    }
    for n in notes {
        s.push_str(&format!("\n{n}"));
    }
    s
}

/// The targets, evaluated from the numbers: one line each, `met`, `MISSED` or
/// `not measured`.
pub(crate) fn targets(results: &[HttpResult]) -> Vec<String> {
    let cells = cells_of(results);
    let has = |s: &str| results.iter().any(|r| r.server == s);
    let mut lines = Vec::new();
    let mut check = |name: String,
                     num: &str,
                     base: &str,
                     f: fn(&HttpResult) -> Option<f64>,
                     min: Option<f64>,
                     max: Option<f64>,
                     only: &dyn Fn(&Cell) -> bool| {
        if !has(num) || !has(base) {
            lines.push(format!(
                "{name}: not measured ({} did not run)",
                if has(num) { base } else { num }
            ));
            return;
        }
        let mut worst: Option<(f64, Cell)> = None;
        let mut all = true;
        for c in cells.iter().filter(|c| only(c)) {
            let Some(r) = pair_ratio(results, num, base, c, f) else {
                continue;
            };
            let ok = min.is_none_or(|m| r >= m) && max.is_none_or(|m| r <= m);
            all &= ok;
            let worse = match (&worst, min) {
                (None, _) => true,
                (Some((w, _)), Some(_)) => r < *w,
                (Some((w, _)), None) => r > *w,
            };
            if worse {
                worst = Some((r, *c));
            }
        }
        match worst {
            None => lines.push(format!("{name}: not measured")),
            Some((r, c)) => lines.push(format!(
                "{name}: {} (worst cell {} c={} {}: {r:.2}x)",
                if all { "met" } else { "MISSED" },
                size_label(c.file_bytes),
                c.conns,
                c.mode()
            )),
        }
    };
    let any = |_: &Cell| true;
    check(
        "hoop (io_uring) >= 1.0x nginx req/s in every cell".into(),
        "hoop",
        "nginx",
        |r| Some(r.rps),
        Some(1.0),
        None,
        &any,
    );
    check(
        "hoop (io_uring) server CPU/req <= nginx's in every cell".into(),
        "hoop",
        "nginx",
        |r| r.server_cpu_us_per_req,
        None,
        Some(1.0),
        &any,
    );
    check(
        "hoop (io_uring) >= 1.3x nginx req/s at 10,000 connections".into(),
        "hoop",
        "nginx",
        |r| Some(r.rps),
        Some(1.3),
        None,
        &|c: &Cell| c.conns >= 10_000,
    );
    check(
        "hoop (io_uring) >= 1.3x tokio+hyper req/s in every cell".into(),
        "hoop",
        "hyper",
        |r| Some(r.rps),
        Some(1.3),
        None,
        &any,
    );
    check(
        "hoop (epoll) >= 0.9x nginx req/s in every cell".into(),
        "hoop-epoll",
        "nginx",
        |r| Some(r.rps),
        Some(0.9),
        None,
        &any,
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let (a, h, p) = parse_url("http://127.0.0.1:8080/f.bin").unwrap();
        assert_eq!(a, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((h.as_str(), p.as_str()), ("127.0.0.1:8080", "/f.bin"));
        let (_, _, p) = parse_url("http://127.0.0.1:1").unwrap();
        assert_eq!(p, "/");
        assert!(parse_url("https://x/").is_err());
        assert!(parse_url("http:///x").is_err());
    }

    #[test]
    fn wrk_output_parses() {
        let text = "Running 2s test @ http://127.0.0.1:1/f\n  1 threads and 50 connections\n\
                    \x20 98765 requests in 2.00s, 100.00MB read\n\
                    \x20 Socket errors: connect 0, read 2, write 0, timeout 1\n\
                    \x20 Non-2xx or 3xx responses: 3\n\
                    Requests/sec:  49382.50\nTransfer/sec:     50.00MB\n";
        assert_eq!(parse_wrk(text), Some((98765, 49382.5, 6)));
    }

    #[test]
    fn matrices() {
        assert_eq!(quick_cells().len(), 5);
        assert!(full_cells().iter().any(|c| c.conns == 10_000));
        assert_eq!(file_content(1000), file_content(1000));
        assert_ne!(file_content(1024)[..8], file_content(2048)[..8]);
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(65536), "64 KiB");
    }
}
