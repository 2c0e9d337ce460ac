//! What `hoop bench cancel` is asked to do: the values as given (sizes with their k/m/g
//! suffixes), and the checks of its counts and sizes.

use std::io;
use std::path::PathBuf;

use crate::plan::check::invalid;

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
    let n = crate::plan::size::parse_size(flag, s)?;
    if n == 0 || n > MAX_BYTES {
        return Err(invalid(format!("{flag} must be 1 byte to 4 GiB (got {s})")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::check::{parse_names, parse_server_list};

    #[test]
    fn name_lists_are_checked_deduplicated_and_kept_in_order() {
        let known = ["a", "b", "c"];
        let given = Some(vec![" B".to_string(), "a".into(), "b".into()]);
        assert_eq!(
            parse_names("--x", "name", given, &known).unwrap(),
            ["b", "a"]
        );
        assert_eq!(
            parse_names("--x", "name", None, &known).unwrap(),
            ["a", "b", "c"]
        );
        let e = parse_names("--runtimes", "name", Some(vec!["z".into()]), &known).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown name \"z\" in --runtimes (known: a, b, c)"
        );
        let e = parse_server_list(Some(vec!["z".into()]), &known).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown server \"z\" in --servers (known: a, b, c)"
        );
        let e = parse_names("--runtimes", "name", Some(Vec::new()), &known).unwrap_err();
        assert_eq!(e.to_string(), "--runtimes needs at least one name");
    }

    #[test]
    fn counts_and_sizes_are_bounded() {
        assert!(check_count("--files", 0).is_err());
        assert_eq!(check_count("--files", MAX_COUNT).unwrap(), MAX_COUNT);
        assert!(check_count("--files", MAX_COUNT + 1).is_err());
        assert_eq!(check_bytes("--bytes", "20M").unwrap(), 20 << 20);
        assert!(check_bytes("--bytes", "0").is_err());
        assert!(check_bytes("--bytes", "5G").is_err());
    }
}
