//! The flags of `hoop bench fsread`, turned into the library's fsread plan.

use std::io;
use std::path::PathBuf;

use hoop_bench::plan::file::default_dir;
use hoop_bench::plan::fsread::{parse_engines, parse_sizes, FsreadPlan, ENGINES};

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every engine that ran counted at least one \
verified read and no error (a skipped engine does not fail the run); 1 on bad arguments, when a \
test file cannot be made, or when an engine failed or counted errors (its result is printed all \
the same).";

/// Arguments of `hoop bench fsread`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct FsreadArgs {
    /// Directory of the test files [default: target/hoop-bench-file next to the binary].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// File sizes, comma-separated: multiples of 512 bytes, k/m suffixes allowed.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "64k,1m",
        value_delimiter = ','
    )]
    pub sizes: Vec<String>,
    /// Timed reads per engine and size (after the warm-up).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub reads: u64,
    /// Untimed reads per engine and size before the timed ones (still checked).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub warmup: u64,
    /// Longest time per engine and size in seconds: the timed reads stop then, however many.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub secs: f64,
    /// Engines, comma-separated [default: shared, tokio-io-uring, spawn-blocking].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub engines: Option<Vec<String>>,
}

impl FsreadArgs {
    /// The plan these flags ask for (checked when it runs).
    pub fn plan(self) -> io::Result<FsreadPlan> {
        Ok(FsreadPlan {
            dir: self.dir.unwrap_or_else(default_dir),
            sizes: parse_sizes(&self.sizes)?,
            reads: self.reads,
            warmup: self.warmup,
            secs: self.secs,
            engines: match &self.engines {
                Some(list) => parse_engines(list)?,
                None => ENGINES.to_vec(),
            },
        })
    }
}
