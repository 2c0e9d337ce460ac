//! `hoop bench http`: the HTTP load generator ([`client`]) against one server (`--url`), or
//! side by side: hoop (io_uring), hoop (epoll), nginx when installed ([`nginx`]) and a
//! tokio + hyper static server ([`hyper_server`]), each a child process pinned to the first
//! CPU, the client on the second, in alternating order (A B C D A B C D), each configuration
//! at least twice, on files the bench creates (1 KiB, 64 KiB, 1 MiB, every response verified
//! byte for byte). When `wrk` is installed, one cell also runs wrk against hoop.
//!
//! The static mix (`mix-c50`, in the quick and full matrices; issue 23): 20 files of 3-300 KB
//! with web-like names, each with a `.gz` variant made by `gzip`, asked for in turn by
//! keep-alive connections with `Accept-Encoding: br, gzip`; each response must be the file, or
//! with `Content-Encoding: gzip` exactly its `.gz` variant ([`mix`]). nginx serves the variants
//! (`gzip_static on`); the JSON line says `"mix": true`, `file_bytes` is the mean size and
//! `requests_by_encoding` counts the verified requests by encoding.
//!
//! Issue 22's comparison: two more servers, not in the default list, `hyper-shared` (hyper on
//! `hoop::shared` sockets) and `hyper-tokio` (the same hyper service on tokio's `TcpStream`),
//! both in tokio's multi-thread runtime with one worker per allowed CPU, files served from
//! memory ([`hyper_sockets`]). They are not pinned: both get every CPU the bench may use (the
//! client stays pinned to the second), and the output says so. With both in `--servers`, a
//! per-round table of hyper-shared / hyper-tokio (req/s, server CPU µs/req, context switches
//! per request) follows the summary, with medians and issue 22's targets:
//!
//! ```text
//! hoop bench http --servers hyper-shared,hyper-tokio --cells 1k-c50,1k-c500 --rounds 5 -t 3
//! ```
//!
//! `--wrk` adds wrk (`-t1 -cCONNS`, pinned like the client) against every server in every cell
//! and round, right after the load generator (`Connection: close` in close cells, a Lua script
//! cycling over the static mix's files with its `Accept-Encoding`), its req/s in the table's
//! `wrk req/s` column and the JSON's `wrk_req_per_sec`; with the hyper pair, the same per-round
//! table for wrk. The main job runs wrk so against hoop and nginx when wrk is installed.
//!
//! Context switches per request (`ctx_switches_per_req`, every server and `--url
//! --server-pid`): voluntary + involuntary switches of every thread of the server
//! (`/proc/PID/task/*/status`) over the window, divided by verified requests; by thread group
//! (name without its number) with CPU time in `server_threads`.

use crate::target::netns;
use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::measure::latency as stats;
use crate::measure::usage::{ServerMetrics, ServerProbe, ThreadUse};
use crate::plan::{check_conns, check_rounds, check_secs, invalid};
use crate::report::output::Out;

pub(crate) mod attack;
pub(crate) mod client;
pub(crate) mod mix;
mod side_by_side;
mod table;

pub(crate) use side_by_side::{
    finish_status, run_side_by_side, wrk_path, Outcome, Plan, WRK_MISSING,
};
pub(crate) use table::{cells_of, med, size_label, summary_table, targets};

use client::{HttpClientConfig, HttpOutcome};

/// Most requests in flight per connection (`--pipeline`).
const MAX_PIPELINE: usize = 1024;
/// Planned overhead of one run (connect phase, stop), for the progress bar.
const RUN_OVERHEAD_SECS: f64 = 0.3;

/// The servers of the side-by-side runs by default (and of the main job), in run order.
pub(crate) const SERVERS: [&str; 4] = ["hoop", "hoop-epoll", "nginx", "hyper"];

/// Every server `--servers` accepts: the default ones and issue 22's pair.
pub(crate) const ALL_SERVERS: [&str; 6] = [
    "hoop",
    "hoop-epoll",
    "nginx",
    "hyper",
    "hyper-shared",
    "hyper-tokio",
];

/// Issue 22's pair: hyper on hoop's shared sockets, and the same on tokio's (the baseline).
pub(crate) const HYPER_PAIR: (&str, &str) = ("hyper-shared", "hyper-tokio");

/// How a server is named in tables and charts.
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-epoll" => "hoop (epoll)",
        "hyper" => "tokio+hyper",
        "hyper-shared" => "hyper on hoop::shared",
        "hyper-tokio" => "hyper on tokio net",
        other => other,
    }
}

/// Whether server `name` is a multi-thread server, left unpinned (every allowed CPU).
pub(crate) fn unpinned(name: &str) -> bool {
    name == HYPER_PAIR.0 || name == HYPER_PAIR.1
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
    /// Side by side: the servers, comma-separated (default: hoop, hoop-epoll, nginx, hyper;
    /// also hyper-shared and hyper-tokio, hyper on hoop::shared sockets and on tokio's own,
    /// in tokio's multi-thread runtime, unpinned, compared round by round when both run).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Side by side: only these cells, comma-separated, each SIZE-cCONNS[-close] with SIZE
    /// 1k, 64k, 1m or mix (the static mix: 20 files of 3-300 KB with .gz variants, requests
    /// with `Accept-Encoding: br, gzip`) (e.g. `1k-c50,1k-c500` for issue 22's comparison)
    /// [default: the quick matrix: 1k-c50,1k-c500,64k-c50,1m-c50,1k-c50-close,mix-c50].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cells: Option<Vec<String>>,
    /// Side by side: also wrk (`wrk -t1 -cCONNS`, whole seconds, pinned like the client, not
    /// verifying bodies; `Connection: close` in close cells, a script cycling over the files
    /// with `Accept-Encoding: br, gzip` in the static mix) against every server, right after
    /// the load generator in every cell and round; its req/s in the table's `wrk req/s` column
    /// and the JSON's `wrk_req_per_sec` (needs wrk installed). With hyper-shared and
    /// hyper-tokio, issue 22's per-round table for wrk too.
    #[arg(long)]
    pub wrk: bool,
    /// Side by side: where the files and nginx's configuration go (default:
    /// target/hoop-report/http).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Side by side: after the run on the machine's loopback, the same run again inside a
    /// network namespace of its own whose loopback MTU is MTU (HttpArena uses 1500: 65536
    /// hides the kernel's segmentation cost), both reported; skipped with a line where a
    /// namespace cannot be made (needs CAP_SYS_ADMIN and `ip`).
    #[arg(long, value_name = "MTU", value_parser = clap::value_parser!(u32).range(68..=65536))]
    pub netns_mtu: Option<u32>,
    /// Each server (--servers; default hoop, hoop-epoll, nginx) under a slowloris
    /// and idle keep-alive attack: the legitimate load (-c, default 50 keep-alive, 1 KiB) for
    /// -t seconds (default 5) without attack, then again 1 s after the attackers connected;
    /// req/s, p99, stalls, RSS before / during / after, connections held (bench/http/attack.rs).
    #[arg(long)]
    pub attack: bool,
    /// With --attack: connections sending a request head one byte every 2 s.
    #[arg(long, value_name = "N", requires = "attack")]
    pub slowloris: Option<usize>,
    /// With --attack: keep-alive connections that ask once, then stay silent.
    #[arg(long, value_name = "N", requires = "attack")]
    pub idle: Option<usize>,
    /// With --attack: attackers' connects in flight at a time [default: 256, below the listen
    /// backlog; 8000: all at once, a SYN flood].
    #[arg(long, value_name = "N", requires = "attack")]
    pub attack_in_flight: Option<usize>,
}

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

/// One side-by-side configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    /// File size.
    pub file_bytes: u64,
    /// Connections.
    pub conns: usize,
    /// Connection per request.
    pub close: bool,
    /// The static mix ([`mix`]; `file_bytes` is its mean size).
    pub mix: bool,
}

impl Cell {
    fn mode(&self) -> &'static str {
        if self.close {
            "close"
        } else {
            "keep-alive"
        }
    }

    /// The cell's `--cells` name: `1k-c50`, `1m-c500`, `1k-c50-close`, `mix-c50`.
    pub(crate) fn name(&self) -> String {
        format!(
            "{}-c{}{}",
            if self.mix {
                "mix".to_string()
            } else {
                size_name(self.file_bytes)
            },
            self.conns,
            if self.close { "-close" } else { "" }
        )
    }

    /// How tables name the cell's file: `1 KiB`, or the static mix.
    pub(crate) fn file_label(&self) -> String {
        if self.mix {
            mix::LABEL.to_string()
        } else {
            size_label(self.file_bytes)
        }
    }

    /// A cell of one file.
    pub(crate) fn file(file_bytes: u64, conns: usize, close: bool) -> Cell {
        Cell {
            file_bytes,
            conns,
            close,
            mix: false,
        }
    }

    /// A cell of the static mix.
    pub(crate) fn mix(conns: usize) -> Cell {
        Cell {
            file_bytes: mix::mean_bytes(),
            conns,
            close: false,
            mix: true,
        }
    }
}

/// A size as `--cells` names it: `1k`, `64k`, `1m`.
fn size_name(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}m", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{}k", b >> 10),
        b => b.to_string(),
    }
}

/// Parses one `--cells` name (`1k-c50`, `64k-c500`, `1m-c50-close`, `mix-c50`;
/// case-insensitive): the size must be one of the bench's files ([`FILES`]) or `mix`, the
/// static mix.
pub(crate) fn parse_cell(name: &str) -> io::Result<Cell> {
    let lower = name.trim().to_ascii_lowercase();
    let bad = || {
        invalid(format!(
            "--cells: {name:?} is not SIZE-cCONNS[-close] with SIZE 1k, 64k, 1m or mix \
             (examples: 1k-c50, 1k-c500, 1m-c50-close, mix-c50)"
        ))
    };
    let mut parts = lower.split('-');
    let size = parts.next().ok_or_else(bad)?;
    let conns = parts
        .next()
        .and_then(|c| c.strip_prefix('c'))
        .ok_or_else(bad)?;
    let close = match parts.next() {
        None => false,
        Some("close") => true,
        Some(_) => return Err(bad()),
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    let conns: usize = conns.parse().map_err(|_| bad())?;
    if size == "mix" {
        check_conns(conns).map_err(|e| invalid(format!("--cells {name:?}: {e}")))?;
        return Ok(Cell {
            close,
            ..Cell::mix(conns)
        });
    }
    // One of the bench's files, named as `Cell::name` names it.
    let file_bytes = FILES
        .iter()
        .copied()
        .find(|&f| size_name(f) == size)
        .ok_or_else(bad)?;
    check_conns(conns).map_err(|e| invalid(format!("--cells {name:?}: {e}")))?;
    Ok(Cell::file(file_bytes, conns, close))
}

/// Parses `--cells` (duplicates dropped, order kept).
pub(crate) fn parse_cells(names: &[String]) -> io::Result<Vec<Cell>> {
    let mut cells: Vec<Cell> = Vec::new();
    for n in names {
        let c = parse_cell(n)?;
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    if cells.is_empty() {
        return Err(invalid("--cells needs at least one cell"));
    }
    Ok(cells)
}

/// The files of the side-by-side runs.
pub(crate) const FILES: [u64; 3] = [1024, 64 * 1024, 1 << 20];

/// Connections of the static mix's cell.
pub(crate) const MIX_CONNS: usize = 50;

/// The quick matrix (the main job's): 1 KiB at 50 and 500 keep-alive, 64 KiB and 1 MiB at 50,
/// 1 KiB connection-per-request at 50, the static mix at 50.
pub(crate) fn quick_cells() -> Vec<Cell> {
    vec![
        Cell::file(1024, 50, false),
        Cell::file(1024, 500, false),
        Cell::file(64 * 1024, 50, false),
        Cell::file(1 << 20, 50, false),
        Cell::file(1024, 50, true),
        Cell::mix(MIX_CONNS),
    ]
}

/// The full matrix: every file at 50 and 500 keep-alive and 50 connection-per-request, 1 KiB
/// at 10,000 keep-alive, and the static mix at 50.
pub(crate) fn full_cells() -> Vec<Cell> {
    let mut v = Vec::new();
    for &f in &FILES {
        for (conns, close) in [(50, false), (500, false), (50, true)] {
            v.push(Cell::file(f, conns, close));
        }
    }
    v.push(Cell::file(1024, 10_000, false));
    v.push(Cell::mix(MIX_CONNS));
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
pub fn run_http_command(args: HttpBenchArgs, json: bool) -> io::Result<()> {
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
    if args.url.is_some() && args.wrk {
        return Err(invalid(
            "--wrk runs wrk beside the side-by-side runs, not with --url (run wrk itself)",
        ));
    }
    crate::machine::raise_nofile_limit();
    if args.attack {
        return run_attack_command(&args, json);
    }
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
            if args.wrk && side_by_side::wrk_path().is_none() {
                return Err(invalid("--wrk: wrk is not installed (apt-get install wrk)"));
            }
            check_rounds(args.rounds)?;
            let secs = args.secs.unwrap_or(2.0);
            check_secs("-t/--secs", secs)?;
            let servers = parse_servers(args.servers.clone())?;
            if args.cells.is_some() && (args.full || args.conns.is_some() || args.close) {
                return Err(invalid(
                    "--cells names every cell: not with --full, -c/--conns or --close",
                ));
            }
            let mut cells = match &args.cells {
                Some(names) => parse_cells(names)?,
                None if args.full => full_cells(),
                None => quick_cells(),
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
                .unwrap_or_else(|| crate::machine::default_out_dir().join("http"));
            let plan = Plan {
                cells,
                servers: servers.clone(),
                secs,
                rounds: args.rounds,
                pipeline: args.pipeline,
                dir,
                wrk: if args.wrk { servers } else { Vec::new() },
            };
            let report = |outcome: &Outcome, out: &Out| {
                out.human(&summary_table(
                    &outcome.results,
                    &plan.servers,
                    &outcome.notes,
                ));
                if let Some(pair) = table::hyper_pair_section(&outcome.results) {
                    out.human(&pair);
                }
            };
            let out = Out::new(json, plan.planned_secs());
            let outcome = run_side_by_side(&plan, &out);
            out.finish();
            out.human(&format!(
                "loopback MTU {} (the machine's network namespace)",
                netns::loopback_mtu().map_or("unknown".to_string(), |m| m.to_string())
            ));
            report(&outcome, &out);
            let status = finish_status(&outcome);
            let Some(mtu) = args.netns_mtu else {
                return status;
            };
            match netns::enter(mtu) {
                Err(e) => {
                    out.human(&format!("netns loopback MTU {mtu}: skipped: {e}"));
                    status
                }
                Ok(()) => {
                    let out = Out::new(json, plan.planned_secs());
                    out.human(&format!(
                        "\n## The same runs inside a network namespace of its own, loopback MTU {mtu}\n"
                    ));
                    let outcome_ns = run_side_by_side(&plan, &out);
                    out.finish();
                    report(&outcome_ns, &out);
                    status.and(finish_status(&outcome_ns))
                }
            }
        }
    }
}

/// `--attack`: every server under attack, a table and one JSON line each.
fn run_attack_command(args: &HttpBenchArgs, json: bool) -> io::Result<()> {
    if args.url.is_some()
        || args.cells.is_some()
        || args.full
        || args.wrk
        || args.close
        || args.pipeline != 1
        || args.netns_mtu.is_some()
        || args.verify.is_some()
        || args.server_pid.is_some()
    {
        return Err(invalid(
            "--attack takes --slowloris, --idle, --attack-in-flight, -c, -t, --servers and --dir \
             only",
        ));
    }
    let secs = args.secs.unwrap_or(5.0);
    check_secs("-t/--secs", secs)?;
    let servers = crate::plan::parse_server_list(
        Some(args.servers.clone().unwrap_or_else(|| {
            attack::ATTACK_SERVERS
                .iter()
                .map(|s| s.to_string())
                .collect()
        })),
        &attack::ATTACK_KNOWN,
    )?;
    let plan = attack::AttackPlan {
        servers,
        slowloris: args.slowloris.unwrap_or(attack::DEFAULT_SLOWLORIS),
        idle: args.idle.unwrap_or(attack::DEFAULT_IDLE),
        secs,
        conns: args.conns.unwrap_or(50),
        in_flight: args.attack_in_flight.unwrap_or(attack::CONNECT_IN_FLIGHT),
        dir: args
            .dir
            .clone()
            .unwrap_or_else(|| crate::machine::default_out_dir().join("http")),
    };
    plan.check()?;
    let out = Out::new(json, plan.planned_secs());
    let (results, failures, notes) = attack::run_attack(&plan, &out);
    out.finish();
    out.human(&attack::attack_table(&results, &notes));
    let bad = results
        .iter()
        .filter(|r| r.legit_errors_unattacked > 0 || r.legit_req_per_sec_unattacked <= 0.0)
        .count();
    if results.is_empty() || !failures.is_empty() || bad > 0 {
        return Err(io::Error::other(format!(
            "{} server(s) measured under attack, {} failed, {} counted errors or no verified \
             request without attack{}",
            results.len(),
            failures.len(),
            bad,
            failures
                .first()
                .map_or(String::new(), |f| format!("; first failure: {f}"))
        )));
    }
    Ok(())
}

/// Checks `--servers` and returns it (default: the four of [`SERVERS`]).
fn parse_servers(list: Option<Vec<String>>) -> io::Result<Vec<String>> {
    let list = list.or_else(|| Some(SERVERS.iter().map(|s| s.to_string()).collect()));
    crate::plan::parse_server_list(list, &ALL_SERVERS)
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
        mix: None,
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

/// `tokio-rt-worker x2 4.10 µs 0.412 cs; hoop-reaper x2 ...`: thread groups, busiest first.
pub(crate) fn threads_line(groups: &BTreeMap<String, ThreadUse>) -> String {
    let mut v: Vec<(&String, &ThreadUse)> = groups.iter().collect();
    v.sort_by(|a, b| {
        (b.1.cpu_us_per_req, b.1.ctx_switches_per_req)
            .partial_cmp(&(a.1.cpu_us_per_req, a.1.ctx_switches_per_req))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    v.iter()
        .filter(|(_, u)| u.cpu_us_per_req > 0.0 || u.ctx_switches_per_req > 0.0)
        .map(|(g, u)| {
            format!(
                "{g} x{} {:.2} µs {:.3} cs",
                u.threads, u.cpu_us_per_req, u.ctx_switches_per_req
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe(r: &HttpResult) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = format!(
        "http {} {} ({} B, {} conns, {}{}): {} verified requests ({:.0} req/s, {:.1} MiB/s), {} errors {:?}\n\
         latency µs: p50 {}  p99 {}  p99.9 {}  max {}\n\
         client CPU {}%  server CPU {}%  server CPU µs/req {}  syscalls/req {}  ctx switches/req {}",
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
        r.ctx_switches_per_req
            .map_or("-".into(), |x| format!("{x:.3}")),
    );
    if !r.server_threads.is_empty() {
        s.push_str(&format!(
            "\nserver threads, per request: {}",
            threads_line(&r.server_threads)
        ));
    }
    if let Some(e) = &r.first_error {
        s.push_str(&format!("\nfirst error: {e}"));
    }
    if r.client_bound {
        s.push_str("\nnote: the client was the bottleneck (its CPU near 100%, the server's not)");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::side_by_side::parse_wrk;
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
    fn cells_parse_and_name_themselves() {
        let c = parse_cells(&["1k-c50".into(), "1K-C500".into(), "1k-c50".into()]).unwrap();
        assert_eq!(
            c,
            vec![Cell::file(1024, 50, false), Cell::file(1024, 500, false)]
        );
        let close = parse_cell("1m-c50-close").unwrap();
        assert_eq!(
            (close.file_bytes, close.conns, close.close),
            (1 << 20, 50, true)
        );
        assert_eq!(parse_cell("64k-c10").unwrap().file_bytes, 64 * 1024);
        let m = parse_cell("MIX-c50").unwrap();
        assert_eq!(m, Cell::mix(50));
        assert!(m.mix && !m.close && m.file_bytes == mix::mean_bytes());
        assert_eq!(m.name(), "mix-c50");
        assert_eq!(m.file_label(), "static mix (20 files, 3-300 KB)");
        for c in quick_cells().iter().chain(full_cells().iter()) {
            assert_eq!(parse_cell(&c.name()).unwrap(), *c, "{}", c.name());
        }
        for bad in [
            "",
            "1k",
            "2k-c50",
            "1k-50",
            "1k-c",
            "1k-cx",
            "1k-c50-ka",
            "1k-c50-close-x",
            "1k-c0",
            "mix",
            "mix-50",
            "mix-c0",
            "mixed-c50",
            "mix-c50-keep",
        ] {
            assert!(parse_cell(bad).is_err(), "{bad:?}");
        }
        assert!(parse_cells(&[]).is_err());
    }

    #[test]
    fn servers_default_to_four_and_accept_the_hyper_pair() {
        assert_eq!(parse_servers(None).unwrap(), SERVERS.map(String::from));
        let pair = parse_servers(Some(vec!["hyper-shared".into(), "hyper-tokio".into()]));
        assert_eq!(pair.unwrap(), ["hyper-shared", "hyper-tokio"]);
        assert!(unpinned("hyper-shared") && unpinned("hyper-tokio") && !unpinned("hoop"));
    }

    #[test]
    fn planned_secs_count_wrk_beside_the_load_generator() {
        let plan = |wrk: &[&str]| Plan {
            cells: quick_cells(),
            servers: SERVERS.map(String::from).to_vec(),
            secs: 1.0,
            rounds: 2,
            pipeline: 1,
            dir: PathBuf::from("/nonexistent"),
            wrk: wrk.iter().map(|s| s.to_string()).collect(),
        };
        let runs = (6 * 4 * 2) as f64 * (1.0 + RUN_OVERHEAD_SECS);
        let one_wrk = 1.0 + RUN_OVERHEAD_SECS;
        if side_by_side::wrk_path().is_some() {
            // The quick matrix has 1k-c50: the check against hoop is one of the runs.
            let with = plan(&["hoop", "nginx"]).planned_secs();
            assert!(
                (with - (runs + (6 * 2 * 2) as f64 * one_wrk)).abs() < 1e-9,
                "{with}"
            );
            let without = plan(&[]).planned_secs();
            assert!((without - (runs + one_wrk)).abs() < 1e-9, "{without}");
        } else {
            assert!((plan(&["hoop"]).planned_secs() - runs).abs() < 1e-9);
        }
    }

    #[test]
    fn matrices() {
        assert_eq!(quick_cells().len(), 6);
        assert!(quick_cells().contains(&Cell::mix(50)) && full_cells().contains(&Cell::mix(50)));
        assert!(full_cells().iter().any(|c| c.conns == 10_000));
        assert_eq!(file_content(1000), file_content(1000));
        assert_ne!(file_content(1024)[..8], file_content(2048)[..8]);
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(65536), "64 KiB");
    }
}
