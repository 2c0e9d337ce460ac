//! `hoop bench http`'s flags, turned into the library's plan.

use std::path::PathBuf;

use hoop_bench::plan::http::HttpPlan;

/// Arguments of `hoop bench http`.
#[derive(Debug, clap::Args)]
pub struct HttpBenchArgs {
    /// The file to load (`http://IP:PORT/path`). Without it: hoop (io_uring and epoll), nginx
    /// and tokio+hyper side by side on files the bench creates.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Connections [default: 50; side by side: 50 and 500 keep-alive, 50 connection-per-request].
    #[arg(short = 'c', long = "conns", value_name = "CONNS")]
    pub conns: Option<usize>,
    /// Seconds per run [default: 5; side by side: 2].
    #[arg(short = 't', long = "secs", value_name = "SECS")]
    pub secs: Option<f64>,
    /// A new connection for every request (`Connection: close`).
    #[arg(long)]
    pub close: bool,
    /// Requests in flight per keep-alive connection, sent together.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pipeline: usize,
    /// With --url: compare every body byte for byte with this file (its size is the expected
    /// Content-Length; without it, the first response's length is expected of every response).
    #[arg(long, value_name = "FILE")]
    pub verify: Option<PathBuf>,
    /// With --url: the server's PID, to measure its CPU time and syscalls per request.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Side by side: the full matrix (adds 10,000 keep-alive connections).
    #[arg(long)]
    pub full: bool,
    /// Side by side: repetitions of each configuration (at least 2) [default: 2; with
    /// --profile: 3, at least 1].
    #[arg(long, value_name = "R")]
    pub rounds: Option<u32>,
    /// Side by side: the servers, comma-separated (default: hoop, hoop-epoll, nginx, hyper;
    /// also hyper-shared and hyper-tokio, hyper on hoop::shared sockets and on tokio's own,
    /// in tokio's multi-thread runtime, unpinned, compared round by round when both run; and
    /// hyper-hoop, the same hyper service on hoop's own runtime, a thread per allowed CPU,
    /// unpinned).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Side by side: only these cells, comma-separated, each SIZE-cCONNS[-close] with SIZE
    /// 1k, 64k, 1m or mix (the static mix: 20 files of 3-300 KB with .gz variants, requests
    /// with `Accept-Encoding: br, gzip`) (e.g. `1k-c50,1k-c500` for the hyper pair's comparison)
    /// [default: the quick matrix: 1k-c50,1k-c500,64k-c50,1m-c50,1k-c50-close,mix-c50].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cells: Option<Vec<String>>,
    /// Side by side: also wrk (`wrk -t1 -cCONNS`, whole seconds, pinned like the client, not
    /// verifying bodies; `Connection: close` in close cells, a script cycling over the files
    /// with `Accept-Encoding: br, gzip` in the static mix) against every server, right after
    /// the load generator in every cell and round; its req/s in the table's `wrk req/s` column
    /// and the JSON's `wrk_req_per_sec` (needs wrk installed). With hyper-shared and
    /// hyper-tokio, the pair's per-round table for wrk too.
    #[arg(long)]
    pub wrk: bool,
    /// Side by side: where the files and nginx's configuration go (default:
    /// target/hoop-report/http).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Side by side: after the run on the machine's loopback, the same run again inside a
    /// network namespace of its own whose loopback MTU is MTU (HttpArena uses 1500: 65536
    /// hides the kernel's segmentation cost), both reported; skipped with a line where a
    /// namespace cannot be made (needs CAP_SYS_ADMIN and `ip`).
    #[arg(long, value_name = "MTU", value_parser = clap::value_parser!(u32).range(68..=65536))]
    pub netns_mtu: Option<u32>,
    /// Each server (--servers; default hoop, hoop-epoll, nginx) under a slowloris
    /// and idle keep-alive attack: the legitimate load (-c, default 50 keep-alive, 1 KiB) for
    /// -t seconds (default 5) without attack, then again 1 s after the attackers connected;
    /// req/s, p99, stalls, RSS before / during / after, connections held.
    #[arg(long)]
    pub attack: bool,
    /// With --attack: connections sending a request head one byte every 2 s.
    #[arg(long, value_name = "N", requires = "attack")]
    pub slowloris: Option<usize>,
    /// With --attack: keep-alive connections that ask once, then stay silent.
    #[arg(long, value_name = "N", requires = "attack")]
    pub idle: Option<usize>,
    /// With --attack: attackers' connects in flight at a time [default: 256, below the listen
    /// backlog; 8000: all at once, a SYN flood].
    #[arg(long, value_name = "N", requires = "attack")]
    pub attack_in_flight: Option<usize>,
    /// HttpArena's profiles side by side, comma-separated: baseline, pipelined, short-lived,
    /// json, upload, static, or all. Servers (--servers): hoop, hoop-nocache (static),
    /// hoop-epoll, axum-tokio, actix, nginx and h2o (static and pipelined); one pinned thread
    /// (the targets) and two unpinned; -c, -t [2], --rounds [3] apply.
    #[arg(long = "profile", value_name = "LIST", value_delimiter = ',')]
    pub profile: Option<Vec<String>>,
    /// HTTPS side by side: hoop (io_uring, epoll) and nginx with the same certificate, suites
    /// and session tickets, wrk as the load (`--h2`: h2load), cells 1k, 64k, 1m, mix,
    /// gzip-mix (compressed on the fly) and handshakes (a connection per request); -c [50],
    /// -t [3], --rounds [2], --cells, --servers apply.
    #[arg(long)]
    pub tls: bool,
    /// With --tls: HTTP/2 by ALPN, h2load as the load (one stream in flight per connection).
    #[arg(long, requires = "tls")]
    pub h2: bool,
}

impl From<HttpBenchArgs> for HttpPlan {
    fn from(a: HttpBenchArgs) -> HttpPlan {
        HttpPlan {
            url: a.url,
            conns: a.conns,
            secs: a.secs,
            close: a.close,
            pipeline: a.pipeline,
            verify: a.verify,
            server_pid: a.server_pid,
            full: a.full,
            rounds: a.rounds,
            servers: a.servers,
            cells: a.cells,
            wrk: a.wrk,
            dir: a.dir,
            netns_mtu: a.netns_mtu,
            attack: a.attack,
            slowloris: a.slowloris,
            idle: a.idle,
            attack_in_flight: a.attack_in_flight,
            profiles: a.profile,
            tls: a.tls,
            h2: a.h2,
        }
    }
}
