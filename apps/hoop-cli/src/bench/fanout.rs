//! `hoop bench fanout`'s flags and exit codes, turned into the library's [`FanoutPlan`].

use std::io;

use hoop_bench::compare::fanout::FanoutPlan;

/// The exit codes of `hoop bench fanout`, as `-h` says them.
pub(crate) const EXIT_CODES: &str =
    "Exit status: 0 when every run completed and every delivery was \
verified; 1 on bad arguments, when a server cannot be started or reached, or when a run counted \
errors (a missing, reordered or corrupt delivery, a message not delivered to every connection \
within 1 s, an I/O error) or verified no delivery (the results are printed all the same).";

/// Arguments of `hoop bench fanout`.
#[derive(Debug, clap::Args)]
pub struct FanoutArgs {
    /// Connections; each sends messages and receives every connection's (its own included).
    #[arg(
        short = 'c',
        long = "conns",
        value_name = "CONNS",
        default_value_t = 200
    )]
    pub conns: usize,
    /// Seconds per run.
    #[arg(short = 't', long = "secs", value_name = "SECS", default_value_t = 5.0)]
    pub secs: f64,
    /// Bytes per message, its newline included (32 to 65536).
    #[arg(short = 'l', long = "len", value_name = "LEN", default_value_t = 64)]
    pub len: usize,
    /// Messages each connection keeps in flight (sent and not yet delivered to every
    /// connection); bounds the load to CONNS x WINDOW messages.
    #[arg(long, value_name = "W", default_value_t = 4)]
    pub window: u32,
    /// The servers to compare, comma-separated (hoop = io_uring, hoop-epoll, tokio).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Rounds: each runs every server once, the order reversed every other round.
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub rounds: u32,
    /// Also run every server with a CPU hog on its core: a busy-looping thread pinned to the
    /// server's CPU at normal priority; both unloaded and hogged rows are reported.
    #[arg(long)]
    pub hog: bool,
    /// Load a running chat server (IP:PORT) instead of starting the servers side by side.
    #[arg(long, value_name = "IP:PORT", conflicts_with_all = ["servers", "hog"])]
    pub addr: Option<String>,
    /// With --addr: the server's PID, to measure its CPU time and syscalls per delivery.
    #[arg(long, value_name = "PID", requires = "addr")]
    pub server_pid: Option<u32>,
}

impl From<FanoutArgs> for FanoutPlan {
    fn from(a: FanoutArgs) -> FanoutPlan {
        FanoutPlan {
            conns: a.conns,
            secs: a.secs,
            len: a.len,
            window: a.window,
            servers: a.servers,
            rounds: a.rounds,
            hog: a.hog,
            addr: a.addr,
            server_pid: a.server_pid,
        }
    }
}

/// Runs `hoop bench fanout`.
pub fn run(args: FanoutArgs, json: bool) -> io::Result<()> {
    hoop_bench::report::fanout::run_fanout(args.into(), json)
}
