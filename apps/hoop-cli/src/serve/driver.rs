//! The flags every hoop server shares: which driver its runtimes run on, how many threads.

use hoop::DriverKind;

/// Most runtime threads `--threads` accepts.
pub(crate) use hoop_flags::values::MAX_THREADS;

/// The driver hoop's runtimes run on (`--driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DriverArg {
    /// io_uring if it can be set up, else epoll (saying why on stderr).
    Auto,
    /// io_uring, or fail with the reason it cannot run.
    Uring,
    /// The epoll readiness driver.
    Epoll,
}

impl From<DriverArg> for DriverKind {
    fn from(d: DriverArg) -> DriverKind {
        match d {
            DriverArg::Auto => DriverKind::Auto,
            DriverArg::Uring => DriverKind::Uring,
            DriverArg::Epoll => DriverKind::Epoll,
        }
    }
}
