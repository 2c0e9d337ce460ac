//! The flags of `hoop bench count`, turned into the library's count plan.

use std::io;
use std::path::PathBuf;

use hoop_bench::load::count::CountPlan;

/// Arguments of `hoop bench count`.
#[derive(Debug, clap::Args)]
pub struct CountArgs {
    /// The operation: nop or read.
    #[arg(long, value_name = "OP")]
    pub op: String,
    /// Who runs it: hoop or raw (the io-uring crate in a plain loop).
    #[arg(long, value_name = "ENGINE")]
    pub engine: String,
    /// Operations to complete.
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// No-ops per batch, or reads in flight.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub batch: usize,
    /// The file `--op read` reads (at least 4 KiB; its size is rounded down to 4 KiB blocks).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

impl CountArgs {
    /// The plan these flags ask for.
    pub fn plan(self) -> io::Result<CountPlan> {
        CountPlan::new(&self.op, &self.engine, self.count, self.batch, self.file)
    }
}
