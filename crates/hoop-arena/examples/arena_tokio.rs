//! The axum-on-tokio baseline by hand: `arena_tokio [ADDR] [WORKERS] [DATASET.json]`
//! (defaults `127.0.0.1:8080`, 1 worker, the built-in dataset). Prints `listening on IP:PORT`,
//! then serves until killed.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use hoop_arena::{serve_tokio, Dataset};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = args.first().map_or("127.0.0.1:8080", String::as_str);
    let Some(workers) = args.get(1).map_or(Some(1), |w| w.parse::<usize>().ok()) else {
        eprintln!("arena_tokio: WORKERS must be a number");
        return ExitCode::FAILURE;
    };
    let dataset = match args.get(2) {
        None => Ok(Dataset::builtin()),
        Some(path) => Dataset::load(Path::new(path)),
    };
    let result = dataset.and_then(|d| serve_tokio(addr, workers, Arc::new(d)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("arena_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}
