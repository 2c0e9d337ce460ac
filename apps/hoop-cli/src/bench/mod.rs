//! `hoop bench`: the subcommands, each its flags turned into a run of the [`hoop_bench`] library.

use std::io;
use std::path::PathBuf;

mod cancel;
mod count;
mod echo;
mod fanout;
mod file;
mod fsread;
mod http;
mod idle;
mod nop;

use hoop_bench::report::suite;

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every measurement completed and every request was \
verified; 1 on bad arguments, when the server cannot be reached or started, or when a \
measurement counted errors or verified no request (its result is printed all the same).";

/// Arguments of `hoop bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct BenchArgs {
    /// Which benchmark; none: the quick suite (echo matrix, no-ops, file reads, HTTP, fan-out,
    /// cancellation counts) and the report.
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Print one JSON object per measurement per line on stdout (human output goes to stderr).
    #[arg(long, global = true)]
    pub json: bool,
    /// Suite only: where to write the report (default: target/hoop-report next to the binary).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Suite only: seconds per echo run.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub secs: f64,
    /// Suite only: repetitions of each echo configuration (at least 2).
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub rounds: u32,
    /// Suite only: the servers to compare, comma-separated (hoop, hoop-basic, hoop-epoll, tokio,
    /// monoio, compio).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Suite only: seconds per no-op engine.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub nop_secs: f64,
    /// Suite only: seconds per engine of the quick file run.
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub file_secs: f64,
    /// Suite only: size of the quick file run's test file (k/m/g suffixes; reused between runs).
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    pub file_size: String,
    /// Suite only: skip the quick file run.
    #[arg(long)]
    pub no_file: bool,
    /// Suite only: seconds per run of the quick HTTP matrix.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub http_secs: f64,
    /// Suite only: skip the quick HTTP run.
    #[arg(long)]
    pub no_http: bool,
    /// Suite only: leave out the peers (compio's echo server, the compio and tokio-uring no-op
    /// rows, the monoio, compio, tokio-uring and tokio-io-uring file engines), which run in the
    /// hoop-peer binary of peers/, built first (monoio's echo server is built in and stays;
    /// glommio is not in the suite: `hoop bench file --engines glommio`).
    #[arg(long)]
    pub no_peers: bool,
    /// Suite only: seconds per run of the short fan-out run (3 servers x 2 rounds, unloaded and
    /// with a CPU hog on the server's core).
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub fanout_secs: f64,
    /// Suite only: skip the short fan-out run.
    #[arg(long)]
    pub no_fanout: bool,
    /// Suite only: seconds of each active run of the idle-connection run (`hoop bench idle` at
    /// 2,000 idle connections).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub idle_secs: f64,
    /// Suite only: skip the idle-connection run.
    #[arg(long)]
    pub no_idle: bool,
    /// Suite only: skip the cancellation counts (`hoop bench cancel` at a small size: hoop,
    /// hoop-epoll, tokio and, unless --no-peers, monoio, compio and tokio-uring).
    #[arg(long)]
    pub no_cancel: bool,
}

/// The benchmarks of `hoop bench`.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Echo: load a server (--addr), or run hoop (io_uring and epoll), tokio, monoio and compio
    /// servers side by side.
    #[command(after_help = EXIT_CODES)]
    Echo(echo::EchoArgs),
    /// No-op batches through hoop, through a raw io-uring loop (the ceiling) and through the
    /// peers that have a no-op (compio, tokio-uring); with --shared also from THREADS threads
    /// through one shared Rings (kbio's nopbench).
    #[command(after_help = EXIT_CODES)]
    Nop(nop::NopArgs),
    /// Random file I/O on one test file through sync, a thread pool, linux-aio, hoop's
    /// io_uring engines and fio, with the same metrics; every read is verified.
    File(file::FileArgs),
    /// Whole-file read latency (64 KiB and 1 MiB, hot cache) from one task of a multi-thread
    /// tokio runtime: hoop::shared::fs::read, tokio's io_uring tokio::fs::read (tokio-io-uring,
    /// in the hoop-peer binary of peers/, built on demand; skipped with a line where it cannot
    /// be) and spawn_blocking(std::fs::read); every byte of every read checked.
    Fsread(fsread::FsreadArgs),
    /// HTTP: load a static-file server (--url), or run hoop (io_uring and epoll), nginx and
    /// tokio+hyper side by side; every response checked.
    #[command(after_help = EXIT_CODES)]
    Http(http::HttpBenchArgs),
    /// A fixed number of no-ops or hot-cache 4 KiB reads through hoop or the raw io-uring
    /// loop, and nothing else: what scripts/instructions counts instructions of under callgrind.
    Count(count::CountArgs),
    /// Chat broadcast: CONNS clients, every message to every client, every delivery verified in
    /// order; hoop (io_uring and epoll) and tokio servers side by side, optionally with a CPU
    /// hog on the server's core.
    #[command(after_help = fanout::EXIT_CODES)]
    Fanout(fanout::FanoutArgs),
    /// What an I/O future dropped in select! loses (accept, read, datagram receives, files and
    /// TCP streams dropped after write-all): sent, received and lost, counted side by side on hoop
    /// (io_uring and epoll), tokio, monoio, compio and tokio-uring (the last three in the
    /// hoop-peer binary of peers/, built on demand). Only counts, no speed.
    Cancel(cancel::CancelArgs),
    /// Idle connections: N (default 100,000, capped at the open-file limit) held against each
    /// echo server while 50 active connections load it; RSS before, with and after them, per
    /// idle connection, active req/s and p99 with and without them; hoop (io_uring and epoll),
    /// tokio and monoio side by side; every active reply verified, a sample of the idle
    /// connections checked for an echo, failures counted.
    #[command(after_help = EXIT_CODES)]
    Idle(idle::IdleArgs),
    /// The helper that holds idle connections for `hoop bench idle` (one process per
    /// open-file limit's worth).
    #[command(hide = true)]
    IdleClient(idle::IdleClientArgs),
}

/// Runs `hoop bench`.
pub fn run(args: BenchArgs) -> io::Result<()> {
    let json = args.json;
    match args.command {
        Some(BenchCommand::Echo(a)) => echo::run(a, json),
        Some(BenchCommand::Nop(a)) => nop::run(a, json),
        Some(BenchCommand::File(f)) => f
            .plan()
            .and_then(|p| hoop_bench::report::file::run_file(p, json)),
        Some(BenchCommand::Fsread(f)) => f
            .plan()
            .and_then(|p| hoop_bench::report::fsread::run_fsread(p, json)),
        Some(BenchCommand::Http(h)) => hoop_bench::report::http_command::run_http(h.into(), json),
        Some(BenchCommand::Count(c)) => c
            .plan()
            .and_then(|p| hoop_bench::load::count::run_count(&p)),
        Some(BenchCommand::Fanout(a)) => fanout::run(a, json),
        Some(BenchCommand::Cancel(c)) => hoop_bench::report::cancel::run_cancel(c.plan(), json),
        Some(BenchCommand::Idle(i)) => hoop_bench::report::idle::run_idle(i.plan(), json),
        Some(BenchCommand::IdleClient(c)) => hoop_bench::load::idle::run_idle_client(c.plan()),
        None => suite::run_suite(suite::SuiteOptions {
            json,
            out: args.out,
            secs: args.secs,
            rounds: args.rounds,
            servers: args.servers,
            nop_secs: args.nop_secs,
            file_secs: args.file_secs,
            file_size: args.file_size,
            no_file: args.no_file,
            http_secs: args.http_secs,
            no_http: args.no_http,
            no_peers: args.no_peers,
            fanout_secs: args.fanout_secs,
            no_fanout: args.no_fanout,
            no_cancel: args.no_cancel,
            idle_secs: args.idle_secs,
            no_idle: args.no_idle,
        }),
    }
}
