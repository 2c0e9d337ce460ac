//! `hoop serve arena`: HttpArena's endpoints (`/baseline11`, `/pipeline`, `/json/{count}`,
//! `/upload`; the crate `hoop_arena`) as an axum `Router` behind hoop-http's files (`--root`,
//! the static profile), on hoop's runtime; or (hidden `--engine axum-tokio`) the same
//! `Router` on `axum::serve` in tokio's multi-thread runtime, the benchmark's baseline.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hoop_arena::Dataset;
use hoop_http::{Config, Server};

use super::driver::{DriverArg, MAX_THREADS};
use super::http::{parse_bytes, run_server};
use super::threads::raise_nofile_limit;

/// Arguments of `hoop serve arena`.
#[derive(Debug, clap::Args)]
pub struct ArenaArgs {
    /// Address to listen on; port 0 picks a free port (the first line printed says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Files served in front of the endpoints (the static profile); none by default.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The JSON profile's dataset: a JSON array of HttpArena's items (id, name, category,
    /// price, quantity, active, tags, rating {score, count}) [default: a built-in 50 items].
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    #[command(flatten)]
    pub backlog: hoop_flags::backlog::BacklogArg,
    /// Runtime threads, each pinned to a CPU with its own listener (SO_REUSEPORT); with
    /// `--engine axum-tokio`, tokio's workers.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// hoop's driver: uring, epoll, or auto (io_uring, else epoll). Default: $HOOP_DRIVER when
    /// set, else auto.
    #[arg(long, value_enum, value_name = "DRIVER")]
    pub driver: Option<DriverArg>,
    /// In-memory file cache over every thread, in bytes (suffixes k, M, G: binary).
    #[arg(long, default_value = "64M", value_parser = parse_bytes, value_name = "BYTES")]
    pub cache_bytes: u64,
    /// The largest request body (a longer `Content-Length` is answered 413).
    #[arg(long, default_value = "64M", value_parser = parse_bytes, value_name = "BYTES")]
    pub max_body_bytes: u64,
    /// Most open connections; past it new connections are accepted and closed at once.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_conns: usize,
    /// Close a connection whose request head is not complete after this long.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub header_timeout_ms: u64,
    /// Close a keep-alive connection idle this long (also bounds a stalled send or body read).
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub idle_timeout_ms: u64,
    /// One line per request on stdout, after the `listening on` line.
    #[arg(long)]
    pub access_log: bool,
    /// Where the endpoints run: hoop (hoop-http) or axum-tokio (the baseline).
    #[arg(long, value_enum, default_value_t = Engine::Hoop, hide = true)]
    pub engine: Engine,
}

/// What runs the endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// hoop-http on hoop's runtime.
    Hoop,
    /// `axum::serve` on tokio's multi-thread runtime.
    AxumTokio,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Runs `hoop serve arena`.
pub fn run(args: ArenaArgs) -> io::Result<()> {
    if args.threads == 0 || args.threads > MAX_THREADS {
        return Err(invalid(format!(
            "--threads must be between 1 and {MAX_THREADS}, not {}",
            args.threads
        )));
    }
    let dataset = Arc::new(match &args.dataset {
        Some(path) => Dataset::load(path)?,
        None => Dataset::builtin(),
    });
    if args.engine == Engine::AxumTokio {
        if args.root.is_some() || args.driver.is_some() {
            return Err(invalid(
                "--engine axum-tokio serves the endpoints alone, on tokio: no --root or --driver"
                    .into(),
            ));
        }
        raise_nofile_limit();
        return hoop_arena::serve_tokio(&args.addr, args.threads, dataset);
    }
    let cfg = Config {
        header_timeout: Duration::from_millis(args.header_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        max_conns: args.max_conns,
        cache_bytes: args.cache_bytes,
        max_body_bytes: args.max_body_bytes,
        access_log: args.access_log,
        threads: args.threads,
        backlog: args.backlog.backlog,
        ..Config::default()
    };
    let builder = match &args.root {
        Some(root) => Server::builder(root),
        None => hoop_http::Builder::new(),
    };
    let server = builder
        .config(cfg)
        .fallback_service(hoop_arena::router(dataset))
        .build()?;
    let addr = (args.addr.as_str(), args.backlog.backlog);
    run_server("arena", server, addr, args.threads, args.driver)
}
