//! `hoop bench echo`'s flags, turned into the library's [`EchoPlan`].

use std::io;

use hoop_bench::compare::echo::EchoPlan;

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

impl From<EchoArgs> for EchoPlan {
    fn from(a: EchoArgs) -> EchoPlan {
        EchoPlan {
            addr: a.addr,
            conns: a.conns,
            len: a.len,
            secs: a.secs,
            quick: a.quick,
            rounds: a.rounds,
            servers: a.servers,
            server_pid: a.server_pid,
        }
    }
}

/// Runs `hoop bench echo`.
pub fn run(args: EchoArgs, json: bool) -> io::Result<()> {
    hoop_bench::report::echo::run_echo(args.into(), json)
}
