//! `hoop serve`.

use std::io;

/// Arguments of `hoop serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

/// Runs `hoop serve`.
pub fn run(_args: ServeArgs) -> io::Result<()> {
    Err(io::Error::other("not built yet"))
}
