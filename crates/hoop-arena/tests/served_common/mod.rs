//! What `served.rs`'s scenarios share: the Router served by hoop-http on a thread of its own
//! (`serve::spawn_server_for`, hoop-http's tests' own, on 127.0.0.1:0), the loop over drivers
//! and units with a new server per attempt (`resets::retry`), the requests a benchmark client
//! sends, and the checks of their answers.

#![allow(dead_code)]

#[path = "../../../hoop-http/tests/serve/mod.rs"]
mod serve;

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_arena::{router, Dataset};
use hoop_http::{ServeStats, Server};
use hoop_test_support as common;
use hoop_test_support::http::{try_read_any, Response};
use hoop_test_support::{resets, ReadRetry as _};

/// A server on a thread of its own; dropped, it is stopped (and waited for, boundedly).
pub struct Running {
    pub addr: SocketAddr,
    /// A clone of the server it runs (`open_connections`).
    pub server: Server,
    token: CancellationToken,
    done: mpsc::Receiver<ServeStats>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.token.cancel();
        let _ = self.done.recv_timeout(serve::THREAD_TIMEOUT);
    }
}

/// Starts `server` on `kind` (`None` where io_uring cannot be set up: that driver passes).
pub fn start(kind: DriverKind, server: Server, attempt: u32) -> Option<Running> {
    let token = CancellationToken::new();
    let watch = server.clone();
    let (addr, done) = serve::spawn_server_for(kind, server, token.clone(), None, attempt)?;
    Some(Running {
        addr,
        server: watch,
        token,
        done,
    })
}

/// The Router on `dataset`, no root: what `hoop serve arena` runs without `--root`.
pub fn arena(dataset: Dataset) -> Server {
    Server::with_service(router(Arc::new(dataset)))
        .build()
        .unwrap()
}

/// Runs `scenario` once per unit on each driver, each attempt on a new server made by
/// `server`. A unit is what one attempt repeats after a reset: a few exchanges, so that at CI's
/// rate of resets an attempt has a fair chance to finish.
pub fn on_each_driver<U: std::fmt::Debug>(
    what: &str,
    units: &[U],
    server: impl Fn() -> Server,
    scenario: impl Fn(DriverKind, &Running, &U) -> io::Result<()>,
) {
    served(what, units, server, scenario, false);
}

/// Why the uploads opt out of the faults that fail a receive.
pub const UPLOADS: &str = "an upload is hundreds to thousands of receives (16 KiB each on \
     epoll, up to 64 KiB on io_uring's ring), each failed at CI's rate (2%), so few attempts \
     would finish";

/// [`on_each_driver`]; with `uploads`, the servers opt out of the kinds that fail a receive
/// ([`UPLOADS`]).
pub fn served<U: std::fmt::Debug>(
    what: &str,
    units: &[U],
    server: impl Fn() -> Server,
    scenario: impl Fn(DriverKind, &Running, &U) -> io::Result<()>,
    uploads: bool,
) {
    common::each_driver(|kind| {
        // Held while the servers start: they inherit it.
        let _resets =
            uploads.then(|| common::faults_off(&["econnreset", "ecanceled", "enobufs"], UPLOADS));
        for (i, unit) in units.iter().enumerate() {
            resets::retry(&format!("{kind}: {what} {unit:?}"), |attempt| {
                // Each unit's and attempt's server thread is named apart (its faults drawn
                // apart): `test`, then `test#N`.
                let Some(running) = start(kind, server(), i as u32 * 100 + attempt) else {
                    return Ok(());
                };
                scenario(kind, &running, unit)
            });
        }
    });
}

pub fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n")
}

pub fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A chunked POST whose body is `chunks`, one chunk each.
pub fn post_chunked(path: &str, chunks: &[&str]) -> String {
    let mut req =
        format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n");
    for c in chunks {
        req.push_str(&format!("{:x}\r\n{c}\r\n", c.len()));
    }
    req + "0\r\n\r\n"
}

/// A request, shown by a name (its first line by default) in the failures' and the retries'
/// messages.
pub struct Req {
    pub what: String,
    pub bytes: String,
}

impl Req {
    pub fn new(bytes: String) -> Req {
        let what = bytes.lines().next().unwrap_or_default().to_string();
        Req { what, bytes }
    }

    pub fn named(what: &str, bytes: String) -> Req {
        let what = what.to_string();
        Req { what, bytes }
    }
}

impl std::fmt::Debug for Req {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

/// Sends `req` on `s` and reads the answer (with a length, or chunked: axum's 404 has no
/// exact length, so hoop-http sends it chunked).
pub fn ask(s: &mut TcpStream, req: &str) -> io::Result<Response> {
    s.write_all(req.as_bytes())?;
    try_read_any(s)
}

/// Reads one response and checks it is a 200 of `body`, the connection kept.
pub fn expect_ok(kind: DriverKind, s: &mut TcpStream, body: &str, what: &str) -> io::Result<()> {
    let r = try_read_any(s)?;
    let got = String::from_utf8_lossy(&r.body);
    assert_eq!((r.status, &*got), (200, body), "{kind}: {what}");
    assert!(!r.closes(), "{kind}: {what}: the connection is kept");
    Ok(())
}

/// Whether the server closed `s` (end of stream) within a few seconds; a reset is returned.
pub fn expect_closed(kind: DriverKind, s: &mut TcpStream, what: &str) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut b = [0u8; 1];
    let n = s.read_retry(&mut b)?;
    assert_eq!(n, 0, "{kind}: {what}: closed, nothing more sent");
    Ok(())
}
