//! `hoop bench`.

use std::io;

/// Arguments of `hoop bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `hoop bench`.
pub fn run(_args: BenchArgs) -> io::Result<()> {
    Err(io::Error::other("not built yet"))
}
