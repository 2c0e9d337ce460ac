//! What `hoop bench cancel` is asked to do: the values as given (sizes with their k/m/g
//! suffixes), and the checks of its counts and sizes.

use std::io;
use std::path::PathBuf;

use crate::plan::invalid;

/// Most clients, datagrams or files a flag accepts.
pub const MAX_COUNT: u64 = 10_000_000;
/// Largest `--bytes` and `--file-bytes`: 4 GiB.
pub const MAX_BYTES: u64 = 4 << 30;

/// `hoop bench cancel`: every scenario on every runtime, counted.
#[derive(Debug, Clone)]
pub struct CancelPlan {
    /// Runtimes, in order (`None`: every one).
    pub runtimes: Option<Vec<String>>,
    /// Scenarios, in order (`None`: every one).
    pub scenarios: Option<Vec<String>>,
    /// accept: clients, one after another.
    pub clients: u64,
    /// read: bytes sent over TCP (k/m/g suffixes).
    pub bytes: String,
    /// udp_recv_from and unix_recv: numbered datagrams.
    pub datagrams: u64,
    /// drop_after_write: files.
    pub files: u64,
    /// drop_after_write: bytes per file (k/m/g suffixes).
    pub file_bytes: String,
    /// stream_drop_after_write: TCP streams, one after another.
    pub streams: u64,
    /// stream_drop_after_write: bytes per stream (k/m/g suffixes).
    pub stream_bytes: String,
    /// drop_after_write: where the files go (`None`: target/hoop-bench-cancel next to the
    /// binary).
    pub dir: Option<PathBuf>,
    /// Leave out the runtimes of the peers' binary.
    pub no_peers: bool,
}

/// A count given as `flag`: 1 to [`MAX_COUNT`].
pub(crate) fn check_count(flag: &str, n: u64) -> io::Result<u64> {
    if n == 0 || n > MAX_COUNT {
        return Err(invalid(format!(
            "{flag} must be in 1..={MAX_COUNT} (got {n})"
        )));
    }
    Ok(n)
}

/// A size given as `flag` (k/m/g suffixes): 1 byte to [`MAX_BYTES`].
pub(crate) fn check_bytes(flag: &str, s: &str) -> io::Result<u64> {
    let n = crate::file::parse_size(flag, s)?;
    if n == 0 || n > MAX_BYTES {
        return Err(invalid(format!("{flag} must be 1 byte to 4 GiB (got {s})")));
    }
    Ok(n)
}
