//! `hoop serve`: the servers built on hoop (and the baselines the benchmarks compare against).
//!
//! Every server prints exactly one line on stdout once it listens, `listening on IP:PORT` (with
//! the real port when port 0 was asked), and exits 0 on SIGINT or SIGTERM after closing its
//! sockets. See [`echo`] for the echo server.

use std::io;

pub mod echo;
mod signal;

/// Arguments of `hoop serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Which server to run.
    #[command(subcommand)]
    pub command: ServeCommand,
}

/// The servers `hoop serve` can run.
#[derive(Debug, clap::Subcommand)]
pub enum ServeCommand {
    /// TCP echo: every byte received on a connection is sent back on it.
    Echo(echo::EchoArgs),
}

/// Runs `hoop serve`.
pub fn run(args: ServeArgs) -> io::Result<()> {
    match args.command {
        ServeCommand::Echo(args) => echo::run(args),
    }
}
