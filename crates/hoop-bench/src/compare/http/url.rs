//! `hoop bench http --url`: the load generator against one running server, the server's usage
//! measured when its PID is given.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use crate::compare::http::result::client_result;
use crate::compare::matrix::single_status;
use crate::load::http::client::{self, HttpClientConfig};
use crate::load::resets;
use crate::measure::usage::ServerProbe;
use crate::output::Out;
use crate::plan::http::HttpPlan;
use crate::plan::invalid;
use crate::record::http::HttpResult;

/// `http://HOST:PORT/path` -> (address, host header, path).
fn parse_url(url: &str) -> io::Result<(SocketAddr, String, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid(format!("--url must start with http:// (got {url:?})")))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        return Err(invalid(format!("--url has no host: {url:?}")));
    }
    let with_port = if host.contains(':') && !host.ends_with(']') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| invalid(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| invalid(format!("{host} resolves to nothing")))?;
    Ok((addr, host.to_string(), path.to_string()))
}

/// The size of the body at `path`, from one plain request (the length every response must
/// have when no file is given to verify against), asked again on a fresh connection after a
/// reset while resets are injected (at most [`resets::MAX_IN_A_ROW`] times).
fn probe_length(addr: SocketAddr, host: &str, path: &str) -> io::Result<u64> {
    let mut streak = resets::Streak::default();
    loop {
        match probe_once(addr, host, path) {
            Err(e) if streak.excuses_error(&e) => continue,
            other => return other,
        }
    }
}

/// One request of [`probe_length`].
fn probe_once(addr: SocketAddr, host: &str, path: &str) -> io::Result<u64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {addr}: {e}")))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(&client::request_bytes(host, path, true))?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        if s.read(&mut b)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{path}: the server closed the connection in the response head"),
            ));
        }
        head.push(b[0]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) if resp.code == Some(200) => resp
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
            .ok_or_else(|| io::Error::other(format!("{path}: no Content-Length in the response"))),
        Ok(httparse::Status::Complete(_)) => Err(io::Error::other(format!(
            "{path}: status {}, not 200",
            resp.code.unwrap_or(0)
        ))),
        _ => Err(io::Error::other(format!("{path}: no valid response head"))),
    }
}

/// The load generator's configuration for `--url` (the expected body read from `--verify`,
/// or its length asked of the server).
pub(crate) fn config(url: &str, args: &HttpPlan, secs: f64) -> io::Result<HttpClientConfig> {
    let (addr, host, path) = parse_url(url)?;
    let verify: Option<Arc<[u8]>> = match &args.verify {
        Some(p) => Some(
            std::fs::read(p)
                .map_err(|e| io::Error::new(e.kind(), format!("--verify {}: {e}", p.display())))?
                .into(),
        ),
        None => None,
    };
    let file_bytes = match &verify {
        Some(v) => v.len() as u64,
        None => probe_length(addr, &host, &path)?,
    };
    let cfg = HttpClientConfig {
        addr,
        host,
        path,
        conns: args.conns.unwrap_or(50),
        secs: Duration::from_secs_f64(secs),
        close: args.close,
        pipeline: args.pipeline,
        file_bytes,
        verify,
        mix: None,
    };
    Ok(cfg)
}

/// One run of the load generator against `url` (the server measured when its PID is given),
/// its JSON line printed.
pub(crate) fn measure(
    url: &str,
    cfg: &HttpClientConfig,
    server_pid: Option<u32>,
    out: &Out,
) -> io::Result<HttpResult> {
    out.start(&format!("http {url}"), cfg.secs.as_secs_f64());
    let mut probe = None;
    let outcome = client::run_client(cfg, None, || {
        probe = server_pid.map(|pid| ServerProbe::start(pid, cfg.secs));
    })?;
    let metrics = probe
        .map(|p| p.finish(outcome.wall, outcome.requests))
        .unwrap_or_default();
    out.finish();
    let r = client_result("external", url, 0, cfg, &outcome, metrics, false);
    out.measurement(&r);
    Ok(r)
}

/// The exit status of `--url`: an error if the run counted errors or verified no request.
pub(crate) fn status(r: &HttpResult) -> io::Result<()> {
    single_status(r, "no request was verified in the window")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let (a, h, p) = parse_url("http://127.0.0.1:8080/f.bin").unwrap();
        assert_eq!(a, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((h.as_str(), p.as_str()), ("127.0.0.1:8080", "/f.bin"));
        let (_, _, p) = parse_url("http://127.0.0.1:1").unwrap();
        assert_eq!(p, "/");
        assert!(parse_url("https://x/").is_err());
        assert!(parse_url("http:///x").is_err());
    }
}
