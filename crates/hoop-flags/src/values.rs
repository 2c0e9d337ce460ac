//! The value parsers of flags several servers take (clap's `value_parser`). Each check is
//! made by the flag's own parser, not after parsing, so that a config file's bad value is
//! refused with its file and line ([`crate::config_file`]) as on the command line.

use std::path::PathBuf;

/// The most runtime threads a server takes (`--threads`).
pub const MAX_THREADS: usize = 1024;

/// `64M`, `4096`, `1G`, `512k`: bytes (binary multiples).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a byte count: {s:?} (examples: 0, 4096, 512k, 64M)"))
}

/// `--threads N`: 1 to [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if n == 0 || n > MAX_THREADS {
        return Err(format!("must be between 1 and {MAX_THREADS}"));
    }
    Ok(n)
}

/// `--max-conns N`: at least 1.
pub fn parse_max_conns(s: &str) -> Result<usize, String> {
    match s.parse::<usize>().map_err(|e| format!("{e}"))? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
}

/// `--header-timeout-ms`, `--idle-timeout-ms`: at least 1 (0 would close every connection).
pub fn parse_timeout_ms(s: &str) -> Result<u64, String> {
    match s.parse::<u64>().map_err(|e| format!("{e}"))? {
        0 => Err("must be at least 1 ms".into()),
        n => Ok(n),
    }
}

/// `--root DIR`: a directory that exists now (the server opens it at start; saying so here
/// names the config file's line).
pub fn parse_root(s: &str) -> Result<PathBuf, String> {
    match std::fs::metadata(s) {
        Ok(m) if m.is_dir() => Ok(PathBuf::from(s)),
        Ok(_) => Err("not a directory".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert!(parse_bytes("12x").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn counts_and_timeouts_start_at_one() {
        assert_eq!(parse_threads("1"), Ok(1));
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("1025").is_err());
        assert!(parse_max_conns("0").is_err());
        assert_eq!(parse_timeout_ms("5"), Ok(5));
        assert!(parse_timeout_ms("0").is_err());
        assert!(parse_root("/").is_ok());
        assert!(parse_root("/nonexistent/hoop").is_err());
    }
}
