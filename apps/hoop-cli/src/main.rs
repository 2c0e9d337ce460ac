//! `hoop`: the echo server, the benchmark suite and the io_uring probe.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod baseline;
mod bench;
mod probe;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// hoop: completion-based async I/O on io_uring, its servers and its benchmarks.
#[derive(Debug, Parser)]
#[command(name = "hoop", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a server built on hoop (or a baseline server for the benchmarks).
    Serve(serve::ServeArgs),
    /// Run the benchmark suite (no subcommand: the quick suite and the report).
    Bench(Box<bench::BenchArgs>),
    /// What this machine offers hoop: kernel, io_uring limits, and which driver `auto` picks.
    Probe(probe::ProbeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(*args),
        Command::Probe(args) => probe::run(args),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hoop: {e}");
            ExitCode::FAILURE
        }
    }
}
