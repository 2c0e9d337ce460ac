//! `--backlog N`, the listen backlog every hoop server's listeners (and its baselines') ask
//! for, and the line that says when the kernel gives less.

use std::io;
use std::net::ToSocketAddrs;

use hoop::net::{ListenOptions, TcpListener, DEFAULT_BACKLOG, MAX_BACKLOG};

/// `--backlog`, flattened into each server's arguments.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct BacklogArg {
    /// Listen backlog: connections the kernel completes and queues before they are accepted
    /// (a SYN that finds the queue full is dropped, and its client retries after 1 s). The
    /// kernel caps it at net.core.somaxconn (said on stderr at start when it does).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BACKLOG, value_parser = parse_backlog)]
    pub backlog: u32,
}

/// A whole number from 1 to `MAX_BACKLOG`.
fn parse_backlog(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=u64::from(MAX_BACKLOG)).contains(&n) => Ok(n as u32),
        _ => Err(format!(
            "not a listen backlog: {s:?} (a whole number from 1 to {MAX_BACKLOG}; the kernel \
             caps it at net.core.somaxconn{})",
            hoop::net::somaxconn().map_or(String::new(), |m| format!(", {m} here"))
        )),
    }
}

/// Says on stderr, once, what caps a backlog of `requested` on this machine
/// (`hoop: listen backlog 65535 capped to 4096 by net.core.somaxconn ...`).
pub fn say_limits(requested: u32) {
    for note in hoop::net::listen_limits().notes(requested) {
        eprintln!("hoop: {note}");
    }
}

/// Binds one listener on `addr` with `backlog` (`SO_REUSEPORT` if `reuse_port`).
pub fn bind(addr: impl ToSocketAddrs, backlog: u32, reuse_port: bool) -> io::Result<TcpListener> {
    ListenOptions::new()
        .backlog(backlog)
        .reuse_port(reuse_port)
        .bind(addr)
}

#[cfg(test)]
mod tests {
    use super::parse_backlog;

    #[test]
    fn backlog_values() {
        assert_eq!(parse_backlog("1"), Ok(1));
        assert_eq!(parse_backlog("65535"), Ok(65535));
        assert_eq!(parse_backlog("2147483647"), Ok(2147483647));
        for bad in ["0", "-1", "2147483648", "many", "", "1.5"] {
            let e = parse_backlog(bad).unwrap_err();
            assert!(e.contains("not a listen backlog"), "{bad}: {e}");
        }
    }
}
