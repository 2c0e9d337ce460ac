//! wrk, the second client: finding it, its command line for one run, and reading its summary.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What the table says when wrk should run beside the load generator but is not installed.
pub(crate) const WRK_MISSING: &str =
    "wrk not installed (apt-get install wrk): no wrk run beside the load generator (wrk req/s: -)";

/// `wrk` on PATH, if any.
pub(crate) fn wrk_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("wrk"))
        .find(|p| p.is_file())
}

/// wrk's window: `secs` rounded up to whole seconds (wrk's `-d` takes no fraction).
pub(crate) fn wrk_secs(secs: f64) -> u64 {
    secs.ceil().max(1.0) as u64
}

/// One wrk run: `wrk -t1 -cCONNS -dSECS URL`.
pub(crate) struct WrkArgs<'a> {
    /// `-c`.
    pub conns: usize,
    /// `-d`, whole seconds.
    pub secs_whole: u64,
    /// wrk is pinned there (with `taskset`).
    pub client_cpu: Option<usize>,
    /// `-H 'Connection: close'`.
    pub close: bool,
    /// `-H 'Accept-Encoding: ...'` and the Lua script (`-s`) asking for its paths in turn.
    pub script: Option<(&'a str, &'a Path)>,
    /// The URL.
    pub url: &'a str,
}

/// The command line of one run of `wrk`.
pub(crate) fn command(wrk: &Path, a: &WrkArgs<'_>) -> Command {
    let mut cmd = match a.client_cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(wrk);
            c
        }
        None => Command::new(wrk),
    };
    cmd.arg("-t1")
        .arg(format!("-c{}", a.conns))
        .arg(format!("-d{}s", a.secs_whole));
    if a.close {
        cmd.args(["-H", "Connection: close"]);
    }
    if let Some((encoding, script)) = a.script {
        cmd.arg("-H")
            .arg(format!("Accept-Encoding: {encoding}"))
            .arg("-s")
            .arg(script);
    }
    cmd.arg(a.url);
    cmd
}

/// (requests, requests/s, errors) of a finished run, or why its output cannot be read.
pub(crate) fn read(outp: &Output) -> io::Result<(u64, f64, u64)> {
    let text = String::from_utf8_lossy(&outp.stdout).to_string();
    parse_wrk(&text).ok_or_else(|| {
        io::Error::other(format!(
            "cannot read wrk's output: {text}{}",
            String::from_utf8_lossy(&outp.stderr).trim()
        ))
    })
}

/// (requests, requests/s, errors) from wrk's summary.
pub(crate) fn parse_wrk(text: &str) -> Option<(u64, f64, u64)> {
    let requests = text
        .lines()
        .find(|l| l.contains("requests in"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let rps = text
        .lines()
        .find(|l| l.starts_with("Requests/sec:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let mut errors = 0u64;
    for l in text.lines() {
        if let Some(v) = l.trim().strip_prefix("Non-2xx or 3xx responses:") {
            errors += v.trim().parse::<u64>().unwrap_or(0);
        }
        if let Some(v) = l.trim().strip_prefix("Socket errors:") {
            for part in v.split(',') {
                errors += part
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Some((requests, rps, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_parses() {
        let text = "Running 2s test @ http://127.0.0.1:1/f\n  1 threads and 50 connections\n\
                    \x20 98765 requests in 2.00s, 100.00MB read\n\
                    \x20 Socket errors: connect 0, read 2, write 0, timeout 1\n\
                    \x20 Non-2xx or 3xx responses: 3\n\
                    Requests/sec:  49382.50\nTransfer/sec:     50.00MB\n";
        assert_eq!(parse_wrk(text), Some((98765, 49382.5, 6)));
    }
}
