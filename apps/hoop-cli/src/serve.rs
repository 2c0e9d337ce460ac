//! `hoop serve`: the servers built on hoop (and the baselines the benchmarks compare against).
//!
//! Every server prints exactly one line on stdout once it listens, `listening on IP:PORT` (with
//! the real port when port 0 was asked), and exits 0 on SIGINT or SIGTERM after closing its
//! sockets. See [`echo`] for the echo server, [`fanout`] for the line chat server (the fan-out
//! benchmark's) and [`http`] for the HTTP server (the library [`hoop_http`]).

use std::io;

pub mod arena;
pub(crate) mod baseline;
pub(crate) mod driver;
pub mod echo;
pub mod fanout;
pub mod http;
pub(crate) mod hyper_server;
pub(crate) mod hyper_sockets;
pub(crate) mod threads;

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
    /// Static files over HTTP/1.1 from a root directory.
    Http(http::HttpArgs),
    /// Line chat: every line a client sends goes to every connected client, the sender
    /// included (the fan-out benchmark's server).
    Fanout(fanout::FanoutArgs),
    /// HttpArena's endpoints (`/baseline11`, `/pipeline`, `/json/{count}`, `/upload`) as an
    /// axum Router behind hoop-http's files (`--root`): the HTTP profiles' server.
    Arena(arena::ArenaArgs),
}

/// Runs `hoop serve`.
pub fn run(args: ServeArgs) -> io::Result<()> {
    match args.command {
        ServeCommand::Echo(args) => echo::run(args),
        ServeCommand::Http(args) => http::run(args),
        ServeCommand::Fanout(args) => fanout::run(args),
        ServeCommand::Arena(args) => arena::run(args),
    }
}
