//! `hoop`: the echo server, the benchmark suite and the io_uring probe.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod bench;
mod probe;
mod serve;
mod soak;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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
    Serve(Box<serve::ServeArgs>),
    /// Run the benchmark suite (no subcommand: the quick suite and the report).
    Bench(Box<bench::BenchArgs>),
    /// What this machine offers hoop: kernel, io_uring limits, and which driver `auto` picks.
    Probe(probe::ProbeArgs),
    /// Servers on both drivers and file I/O under hostile load for N seconds, every byte
    /// verified; fails on a wrong byte, a leak or a hang.
    Soak(soak::SoakArgs),
}

fn main() -> ExitCode {
    // `--config FILE`: the file's flags put in before the command line's own.
    let argv = match hoop_flags::config_file::apply(Cli::command(), std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("hoop: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp
            | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            // One line saying what is wrong, exit 1 (clap's own message runs to several).
            _ => {
                let text = e.to_string();
                let line: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .skip_while(|l| l.is_empty())
                    .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
                    .collect();
                let line = line.join(" ");
                eprintln!("hoop: {}", line.trim_start_matches("error: "));
                return ExitCode::FAILURE;
            }
        },
    };
    let res = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Bench(args) => bench::run(*args),
        Command::Probe(args) => probe::run(args),
        Command::Soak(args) => soak::run(args),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.get_ref().is_some_and(|r| r.is::<serve::http::CutOff>()) => {
            eprintln!("hoop: {e}");
            ExitCode::from(serve::http::CutOff::EXIT_STATUS)
        }
        Err(e) => {
            eprintln!("hoop: {e}");
            ExitCode::FAILURE
        }
    }
}
