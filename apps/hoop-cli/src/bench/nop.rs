//! `hoop bench nop`'s flags, turned into the library's [`NopPlan`].

use std::io;

use hoop_bench::compare::nop::NopPlan;

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

impl From<NopArgs> for NopPlan {
    fn from(a: NopArgs) -> NopPlan {
        NopPlan {
            threads: a.threads,
            secs: a.secs,
            batch: a.batch,
            entries: a.entries,
            shared: a.shared,
            rings: a.rings,
            no_peers: a.no_peers,
        }
    }
}

/// Runs `hoop bench nop`.
pub fn run(args: NopArgs, json: bool) -> io::Result<()> {
    hoop_bench::report::nop::run_nop(args.into(), json)
}
