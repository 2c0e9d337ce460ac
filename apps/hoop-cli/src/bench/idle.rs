//! The flags of `hoop bench idle` and of its hidden helper `hoop bench idle-client`, turned
//! into the library's idle plans.

use std::net::SocketAddr;

use hoop_bench::plan::idle::{IdleClientPlan, IdlePlan, DEFAULT_IDLE};

/// Arguments of `hoop bench idle`.
#[derive(Debug, clap::Args)]
pub struct IdleArgs {
    /// Idle connections held against each server; capped, with a line, at the servers'
    /// open-file hard limit less 500.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_IDLE)]
    pub idle: usize,
    /// Active connections, each with one request in flight.
    #[arg(short = 'c', long, value_name = "CONNS", default_value_t = 50)]
    pub conns: usize,
    /// Payload bytes per active request.
    #[arg(short = 'l', long, value_name = "LEN_BYTES", default_value_t = 128)]
    pub len: usize,
    /// Seconds of each active run (without, then with the idle connections).
    #[arg(short = 't', long = "secs", value_name = "SECS", default_value_t = 3.0)]
    pub secs: f64,
    /// The servers, comma-separated (hoop = io_uring, hoop-basic, hoop-epoll, tokio, monoio).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Idle connections whose echo is checked once all are open (evenly spread, the last
    /// opened included).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub sample: usize,
    /// Idle connections per helper process [default: its open-file hard limit less 256].
    #[arg(long, value_name = "N")]
    pub per_client: Option<usize>,
}

impl IdleArgs {
    /// The plan these flags ask for (checked when it runs).
    pub fn plan(self) -> IdlePlan {
        IdlePlan {
            idle: self.idle,
            conns: self.conns,
            len: self.len,
            secs: self.secs,
            servers: self.servers,
            sample: self.sample,
            per_client: self.per_client,
        }
    }
}

/// Arguments of the hidden `hoop bench idle-client`.
#[derive(Debug, clap::Args)]
pub struct IdleClientArgs {
    /// The echo server.
    #[arg(long, value_name = "IP:PORT")]
    pub addr: SocketAddr,
    /// Connections to open and hold.
    #[arg(long, value_name = "N")]
    pub count: usize,
    /// Last byte of the first 127.0.0.x source address (the next ones follow).
    #[arg(long, value_name = "X")]
    pub source: u8,
    /// Open connections whose echo is checked (evenly spread, the last one included).
    #[arg(long, value_name = "N")]
    pub sample: usize,
    /// CPU to pin the helper to.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,
}

impl IdleClientArgs {
    /// The helper's plan.
    pub fn plan(self) -> IdleClientPlan {
        IdleClientPlan {
            addr: self.addr,
            count: self.count,
            source: self.source,
            sample: self.sample,
            cpu: self.cpu,
        }
    }
}
