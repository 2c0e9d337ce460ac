//! `hoop bench`: the benchmark suite.
//!
//! * `hoop bench echo --addr IP:PORT -c CONNS -l LEN -t SECS`: the echo load generator against a
//!   running server ([`echo_client`]). Every reply is checked byte for byte; a mismatch, an end
//!   of stream or an error counts as an error, never as a request.
//! * `hoop bench echo` (no `--addr`): hoop on io_uring, hoop on epoll (the same server code on
//!   the other driver), tokio, monoio and compio (the peers' binary, `peers/`) echo servers started side by side as child processes, the server pinned to one core and the client to the other, in alternating
//!   order, each configuration at least twice ([`side_by_side`]).
//! * `hoop bench nop -t THREADS -T SECS -b BATCH -n ENTRIES [--shared [--rings N]]`: batches of
//!   no-ops through hoop and through a raw `io-uring` loop, the machine's ceiling, and with
//!   `--shared` through one `hoop::shared::Rings` from every thread (kbio's table) ([`nop`]).
//! * `hoop bench file [--dir DIR] [--size 2G] [--bs 4k] [--qd 32] [--secs 10] [--direct]
//!   [--rw randread|randwrite|randrw] [--engines LIST]`: random I/O on one test file through
//!   sync, a thread pool, linux-aio, hoop's io_uring engines, the peers (monoio, compio,
//!   tokio-uring, glommio, tokio's io_uring files: [`peers`]) and fio ([`file`]).
//! * `hoop bench fsread [--dir DIR] [--sizes 64k,1m] [--reads 1000] [--warmup 50] [--secs 5]
//!   [--engines LIST]`: the latency of whole-file reads from one task of a multi-thread tokio
//!   runtime through `hoop::shared::fs::read`, tokio's own io_uring `tokio::fs::read` (the
//!   peers' binary) and `spawn_blocking(std::fs::read)`, every byte checked ([`file::whole`]).
//! * `hoop bench http [--url URL] [-c CONNS] [-t SECS] [--close] [--pipeline N] [--verify FILE]`:
//!   the HTTP load generator, or hoop, nginx and tokio+hyper static servers side by side
//!   ([`http`]).
//! * `hoop bench fanout [-c CONNS] [-t SECS] [-l LEN] [--window W] [--servers LIST] [--rounds R]
//!   [--hog]`: a line chat server's broadcast (every message to every connection), hoop on
//!   io_uring and on epoll and tokio side by side, every delivery verified in order
//!   ([`fanout`]).
//! * `hoop bench cancel [--runtimes LIST] [--scenarios LIST] [--clients N] [--bytes SIZE]
//!   [--datagrams N] [--files N] [--file-bytes SIZE] [--no-peers]`: what an I/O future dropped in
//!   `select!` loses, counted side by side on hoop (io_uring and epoll), tokio and the peers
//!   ([`cancel`]).
//! * `hoop bench idle [--idle N] [-c CONNS] [-l LEN] [-t SECS] [--servers LIST] [--sample N]
//!   [--per-client N]`: idle connections held against each echo server (helper processes
//!   `hoop bench idle-client` hold them) while active ones load it: RSS per idle connection,
//!   active req/s and p99 with and without them ([`idle`]).
//! * `hoop bench count --op nop|read --engine hoop|raw --count N [--batch B] [--file PATH]`: a
//!   fixed amount of work for instruction counts under callgrind ([`count`],
//!   `scripts/instructions`).
//! * `hoop bench`: the quick echo matrix (and a 16 KiB cell), the no-op bench, a quick file
//!   run, a quick HTTP run, a short fan-out run, the cancellation counts, a small idle-connection
//!   run, tables, and a report written to `target/hoop-report/` ([`suite`]).
//!
//! With `--json`, every command prints one JSON object per measurement, one per line, on stdout,
//! and its human output goes to stderr.

use std::io;
use std::path::PathBuf;

pub mod cancel;
pub mod count;
pub mod echo_client;
pub mod fanout;
pub mod file;
pub mod http;
pub mod idle;
pub mod machine;
pub mod measure;
pub mod nop;
pub mod report;
pub mod side_by_side;
pub mod target;

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every measurement completed and every request was \
verified; 1 on bad arguments, when the server cannot be reached or started, or when a \
measurement counted errors or verified no request (its result is printed all the same).";

/// The exit codes of `hoop bench fanout`, as `-h` says them.
const FANOUT_EXIT_CODES: &str = "Exit status: 0 when every run completed and every delivery was \
verified; 1 on bad arguments, when a server cannot be started or reached, or when a run counted \
errors (a missing, reordered or corrupt delivery, a message not delivered to every connection \
within 1 s, an I/O error) or verified no delivery (the results are printed all the same).";

/// Largest payload `-l` accepts: 16 MiB.
pub(crate) const MAX_LEN: usize = 16 * 1024 * 1024;
/// Most connections `-c` accepts.
pub(crate) const MAX_CONNS: usize = 100_000;
/// Longest run `-t`/`-T`/`--secs` accepts, in seconds.
pub(crate) const MAX_SECS: f64 = 3600.0;

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
    Echo(EchoArgs),
    /// No-op batches through hoop, through a raw io-uring loop (the ceiling) and through the
    /// peers that have a no-op (compio, tokio-uring); with --shared also from THREADS threads
    /// through one shared Rings (kbio's nopbench).
    #[command(after_help = EXIT_CODES)]
    Nop(NopArgs),
    /// Random file I/O on one test file through sync, a thread pool, linux-aio, hoop's
    /// io_uring engines and fio, with the same metrics; every read is verified.
    File(file::FileArgs),
    /// Whole-file read latency (64 KiB and 1 MiB, hot cache) from one task of a multi-thread
    /// tokio runtime: hoop::shared::fs::read, tokio's io_uring tokio::fs::read (tokio-io-uring,
    /// in the hoop-peer binary of peers/, built on demand; skipped with a line where it cannot
    /// be) and spawn_blocking(std::fs::read); every byte of every read checked.
    Fsread(file::whole::FsreadArgs),
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
    #[command(after_help = FANOUT_EXIT_CODES)]
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
    IdleClient(idle::holder::IdleClientArgs),
}

/// Arguments of `hoop bench echo`.
#[derive(Debug, clap::Args)]
pub struct EchoArgs {
    /// Server to load (IP:PORT). Without it: start hoop (io_uring and epoll), tokio, monoio and
    /// compio servers side by side.
    #[arg(long, value_name = "IP:PORT")]
    pub addr: Option<String>,
    /// Connections, each with one request in flight [default: 50; side by side: 50,500,1000].
    #[arg(short = 'c', long = "conns", value_name = "CONNS")]
    pub conns: Option<usize>,
    /// Payload bytes per request, at most 16 MiB [default: 128; side by side: 128,512].
    #[arg(short = 'l', long = "len", value_name = "LEN_BYTES")]
    pub len: Option<usize>,
    /// Seconds per run [default: 5; with --quick: 3].
    #[arg(short = 't', long = "secs", value_name = "SECS")]
    pub secs: Option<f64>,
    /// Side by side: the quick matrix (conns 50,500 x len 128,512).
    #[arg(long)]
    pub quick: bool,
    /// Side by side: repetitions of each configuration, in alternating server order (at least 2).
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub rounds: u32,
    /// Side by side: the servers to compare, comma-separated (hoop = io_uring best path,
    /// hoop-basic, hoop-epoll, tokio, monoio, compio; compio's runs in the hoop-peer binary of
    /// peers/, built on demand, and is skipped with a line where it cannot be).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// With --addr: the server's PID, to measure its CPU time and syscalls per request.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
}

/// Arguments of `hoop bench nop`.
#[derive(Debug, clap::Args)]
pub struct NopArgs {
    /// Threads: each with its own ring (hoop, raw), or all on one shared set (--shared).
    #[arg(short = 't', long, value_name = "THREADS", default_value_t = 1)]
    pub threads: usize,
    /// Seconds per engine.
    #[arg(short = 'T', long = "secs", value_name = "SECS", default_value_t = 3.0)]
    pub secs: f64,
    /// No-ops per batch (created together, awaited together).
    #[arg(short = 'b', long, value_name = "BATCH", default_value_t = 32)]
    pub batch: usize,
    /// SQ entries of each ring.
    #[arg(short = 'n', long, value_name = "ENTRIES", default_value_t = 128)]
    pub entries: u32,
    /// Also kbio's setup, first: THREADS OS threads each awaiting batches of `rings.nop()` on
    /// one shared `hoop::shared::Rings` (in a plain block_on, no runtime), with kbio's
    /// percentiles and its published figures (its own machine, 2021) for reference.
    #[arg(long)]
    pub shared: bool,
    /// With --shared: rings in the shared set (kbio used one).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "shared")]
    pub rings: usize,
    /// Leave out the peers' rows (compio, tokio-uring; 1 thread only), which run in the
    /// hoop-peer binary of peers/, built on demand. monoio has no row: it has no public no-op.
    #[arg(long)]
    pub no_peers: bool,
}

/// Runs `hoop bench`.
pub fn run(args: BenchArgs) -> io::Result<()> {
    let json = args.json;
    match args.command {
        Some(BenchCommand::Echo(echo)) => side_by_side::run_echo_command(echo, json),
        Some(BenchCommand::Nop(nop)) => nop::run_nop_command(nop, json),
        Some(BenchCommand::File(f)) => file::run_file_command(f, json),
        Some(BenchCommand::Fsread(f)) => file::whole::run_fsread_command(f, json),
        Some(BenchCommand::Http(h)) => http::run_http_command(h, json),
        Some(BenchCommand::Count(c)) => count::run_count_command(c),
        Some(BenchCommand::Fanout(f)) => fanout::run_fanout_command(f, json),
        Some(BenchCommand::Cancel(c)) => cancel::run_cancel_command(c, json),
        Some(BenchCommand::Idle(i)) => idle::run_idle_command(i, json),
        Some(BenchCommand::IdleClient(c)) => idle::holder::run_idle_client(c),
        None => report::suite::run_suite(report::suite::SuiteOptions {
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

/// An `InvalidInput` error with `msg`.
pub(crate) fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// Checks a duration in seconds given as `flag`.
pub(crate) fn check_secs(flag: &str, secs: f64) -> io::Result<()> {
    if !secs.is_finite() || secs <= 0.0 {
        return Err(invalid(format!(
            "{flag} must be more than 0 seconds (got {secs})"
        )));
    }
    if secs > MAX_SECS {
        return Err(invalid(format!(
            "{flag} must be at most {MAX_SECS} seconds (got {secs})"
        )));
    }
    Ok(())
}

/// Checks `-c`.
pub(crate) fn check_conns(conns: usize) -> io::Result<()> {
    if conns == 0 {
        return Err(invalid("-c/--conns must be at least 1 connection (got 0)"));
    }
    if conns > MAX_CONNS {
        return Err(invalid(format!(
            "-c/--conns must be at most {MAX_CONNS} (got {conns})"
        )));
    }
    Ok(())
}

/// Checks `-l`.
pub(crate) fn check_len(len: usize) -> io::Result<()> {
    if len == 0 {
        return Err(invalid("-l/--len must be at least 1 byte (got 0)"));
    }
    if len > MAX_LEN {
        return Err(invalid(format!(
            "-l/--len must be at most 16 MiB ({MAX_LEN} bytes); got {len}"
        )));
    }
    Ok(())
}

/// Checks `--rounds`.
pub(crate) fn check_rounds(rounds: u32) -> io::Result<()> {
    if rounds < 2 {
        return Err(invalid(format!(
            "--rounds must be at least 2: ratios are taken pair by pair over repeated runs (got {rounds})"
        )));
    }
    if rounds > 100 {
        return Err(invalid(format!(
            "--rounds must be at most 100 (got {rounds})"
        )));
    }
    Ok(())
}

/// Checks a `--servers` list against `known` (case and spaces ignored, repeats dropped, in the
/// order given) and returns it; `None`: every known server.
pub(crate) fn parse_server_list(
    list: Option<Vec<String>>,
    known: &[&str],
) -> io::Result<Vec<String>> {
    let list = list.unwrap_or_else(|| known.iter().map(|s| s.to_string()).collect());
    let mut out: Vec<String> = Vec::new();
    for s in list {
        let s = s.trim().to_ascii_lowercase();
        if !known.contains(&s.as_str()) {
            return Err(invalid(format!(
                "unknown server {s:?} in --servers (known: {})",
                known.join(", ")
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
