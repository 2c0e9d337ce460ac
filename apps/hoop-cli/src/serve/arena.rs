//! `hoop serve arena`: HttpArena's endpoints (`/baseline11`, `/pipeline`, `/json/{count}`,
//! `/upload`; the crate `hoop_arena`) as an axum `Router` behind hoop-http's files (`--root`,
//! the static profile), on hoop's runtime; or (hidden `--engine axum-tokio`) the same
//! `Router` on `axum::serve` in tokio's multi-thread runtime, the benchmark's baseline.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use hoop_arena::Dataset;
use hoop_http::{Config, Server};

use super::http::{invalid, parse_bytes, ServerFlags};
use super::threads::raise_nofile_limit;

/// Arguments of `hoop serve arena`.
#[derive(Debug, clap::Args)]
pub struct ArenaArgs {
    /// Files served in front of the endpoints (the static profile); none by default.
    #[arg(long, value_parser = super::http::parse_root, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The JSON profile's dataset: a JSON array of HttpArena's items (id, name, category,
    /// price, quantity, active, tags, rating {score, count}) [default: a built-in 50 items].
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    #[command(flatten)]
    pub common: ServerFlags,
    /// The largest request body (a longer `Content-Length` is answered 413).
    #[arg(long, default_value = "64M", value_parser = parse_bytes, value_name = "BYTES")]
    pub max_body_bytes: u64,
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

/// Runs `hoop serve arena`.
pub fn run(args: ArenaArgs) -> io::Result<()> {
    let cfg = Config {
        max_body_bytes: args.max_body_bytes,
        ..args.common.config()?
    };
    let dataset = Arc::new(match &args.dataset {
        Some(path) => Dataset::load(path)?,
        None => Dataset::builtin(),
    });
    if args.engine == Engine::AxumTokio {
        if args.root.is_some() || args.common.driver.is_some() {
            let why = "--engine axum-tokio serves the endpoints alone: no --root or --driver";
            return Err(invalid(why.into()));
        }
        raise_nofile_limit();
        return hoop_arena::serve_tokio(&args.common.addr, args.common.threads, dataset);
    }
    let files = args
        .root
        .map_or_else(hoop_http::Builder::new, Server::builder);
    let router = hoop_arena::router(dataset);
    let builder = args.common.logged(files.config(cfg))?;
    args.common
        .serve("arena", builder.fallback_service(router).build()?)
}
