//! The flags of `hoop bench cancel`, turned into the library's cancel plan.

use std::path::PathBuf;

use hoop_bench::plan::cancel::CancelPlan;

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every scenario of hoop and tokio ran (losses are \
what is measured, not a failure); 1 on bad arguments or when one could not run (the rest is \
printed all the same). A runtime or a peer's scenario that cannot run here (no io_uring, the \
peers' binary cannot be built or fails) is skipped with a line.";

/// Arguments of `hoop bench cancel`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct CancelArgs {
    /// Runtimes, comma-separated (hoop, hoop-epoll, tokio, monoio, compio, tokio-uring; the
    /// last three run in the hoop-peer binary of peers/, built on demand).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub runtimes: Option<Vec<String>>,
    /// Scenarios, comma-separated (accept, read, udp_recv_from, unix_recv, drop_after_write,
    /// stream_drop_after_write).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub scenarios: Option<Vec<String>>,
    /// accept: clients, one after another.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub clients: u64,
    /// read: bytes sent over TCP (k/m/g suffixes).
    #[arg(long, value_name = "SIZE", default_value = "20M")]
    pub bytes: String,
    /// udp_recv_from and unix_recv: numbered datagrams.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub datagrams: u64,
    /// drop_after_write: files.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub files: u64,
    /// drop_after_write: bytes per file (k/m/g suffixes).
    #[arg(long, value_name = "SIZE", default_value = "300000")]
    pub file_bytes: String,
    /// stream_drop_after_write: TCP streams, one after another.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub streams: u64,
    /// stream_drop_after_write: bytes per stream (k/m/g suffixes).
    #[arg(long, value_name = "SIZE", default_value = "300000")]
    pub stream_bytes: String,
    /// drop_after_write: where the files go (a directory per runtime is made inside and
    /// removed after) [default: target/hoop-bench-cancel next to the binary].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Leave out the peers (monoio, compio, tokio-uring), which run in the hoop-peer binary of
    /// peers/, built first.
    #[arg(long)]
    pub no_peers: bool,
}

impl CancelArgs {
    /// The plan these flags ask for (checked when it runs).
    pub fn plan(self) -> CancelPlan {
        CancelPlan {
            runtimes: self.runtimes,
            scenarios: self.scenarios,
            clients: self.clients,
            bytes: self.bytes,
            datagrams: self.datagrams,
            files: self.files,
            file_bytes: self.file_bytes,
            streams: self.streams,
            stream_bytes: self.stream_bytes,
            dir: self.dir,
            no_peers: self.no_peers,
        }
    }
}
