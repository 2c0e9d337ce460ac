//! The limits of the flags every command shares, and their checks.

use std::io;

/// Largest payload `-l` accepts: 16 MiB.
pub const MAX_LEN: usize = 16 * 1024 * 1024;
/// Most connections `-c` accepts.
pub const MAX_CONNS: usize = 100_000;
/// Longest run `-t`/`-T`/`--secs` accepts, in seconds.
pub const MAX_SECS: f64 = 3600.0;

/// An `InvalidInput` error with `msg`.
pub fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// Checks a duration in seconds given as `flag`.
pub fn check_secs(flag: &str, secs: f64) -> io::Result<()> {
    if !secs.is_finite() || secs <= 0.0 {
        return Err(invalid(format!(
            "{flag} must be more than 0 seconds (got {secs})"
        )));
    }
    if secs > MAX_SECS {
        return Err(invalid(format!(
            "{flag} must be at most {MAX_SECS} seconds (got {secs})"
        )));
    }
    Ok(())
}

/// Checks `-c`.
pub fn check_conns(conns: usize) -> io::Result<()> {
    if conns == 0 {
        return Err(invalid("-c/--conns must be at least 1 connection (got 0)"));
    }
    if conns > MAX_CONNS {
        return Err(invalid(format!(
            "-c/--conns must be at most {MAX_CONNS} (got {conns})"
        )));
    }
    Ok(())
}

/// Checks `-l`.
pub fn check_len(len: usize) -> io::Result<()> {
    if len == 0 {
        return Err(invalid("-l/--len must be at least 1 byte (got 0)"));
    }
    if len > MAX_LEN {
        return Err(invalid(format!(
            "-l/--len must be at most 16 MiB ({MAX_LEN} bytes); got {len}"
        )));
    }
    Ok(())
}

/// Checks `--rounds`.
pub fn check_rounds(rounds: u32) -> io::Result<()> {
    if rounds < 2 {
        return Err(invalid(format!(
            "--rounds must be at least 2: ratios are taken pair by pair over repeated runs (got {rounds})"
        )));
    }
    if rounds > 100 {
        return Err(invalid(format!(
            "--rounds must be at most 100 (got {rounds})"
        )));
    }
    Ok(())
}

/// Checks a `--servers` list against `known` (case and spaces ignored, repeats dropped, in the
/// order given) and returns it; `None`: every known server.
pub fn parse_server_list(list: Option<Vec<String>>, known: &[&str]) -> io::Result<Vec<String>> {
    parse_names("--servers", "server", list, known)
}

/// Checks the list of names given as `flag` against `known` (case and spaces ignored, repeats
/// dropped, in the order given) and returns it; `None`: every known name. The errors call an
/// entry a `noun` ("server", "name").
pub fn parse_names(
    flag: &str,
    noun: &str,
    list: Option<Vec<String>>,
    known: &[&str],
) -> io::Result<Vec<String>> {
    let list = list.unwrap_or_else(|| known.iter().map(|s| s.to_string()).collect());
    let mut out: Vec<String> = Vec::new();
    for s in list {
        let s = s.trim().to_ascii_lowercase();
        if !known.contains(&s.as_str()) {
            return Err(invalid(format!(
                "unknown {noun} {s:?} in {flag} (known: {})",
                known.join(", ")
            )));
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    if out.is_empty() {
        return Err(invalid(format!("{flag} needs at least one {noun}")));
    }
    Ok(out)
}

/// The first address `addr` (`--addr IP:PORT`) resolves to; an `InvalidInput` error that names
/// it otherwise.
pub fn resolve_addr(addr: &str) -> io::Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .map_err(|e| invalid(format!("cannot connect to {addr}: bad address ({e})")))?
        .next()
        .ok_or_else(|| invalid(format!("cannot connect to {addr}: it resolves to nothing")))
}
