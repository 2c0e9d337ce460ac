//! hoop-http: a static-file HTTP/1.1 server on hoop's io_uring runtime, as a library (the
//! server behind `hoop serve http`), to embed in a program of your own as tower-http's
//! `ServeDir` or static-web-server's library are.
//!
//! It serves the files under one directory to `GET` and `HEAD` (conditional requests, byte
//! ranges, several as `multipart/byteranges` up to [`Config::max_ranges`], keep-alive and
//! pipelining; a listing, HTML or JSON, only when asked; no dot files, nothing outside the
//! root, symlinks included), with limits and timeouts on every connection ([`Config`]),
//! `Cache-Control` rules, custom 404/403 pages and optional security headers.
//!
//! # Serving
//!
//! Build a [`Server`] ([`Server::builder`], or [`Server::new`] with a [`Config`]), then either:
//! * [`Server::run`] (or [`Server::bind`] then [`Bound::run`]): [`Config::threads`] runtime
//!   threads, each pinned to a CPU with its own `SO_REUSEPORT` listener, until the shutdown
//!   the builder set ([`Builder::shutdown_on`] a [`CancellationToken`](hoop::sync::CancellationToken),
//!   [`Builder::shutdown_on_signal`] for SIGINT/SIGTERM);
//! * [`Server::serve`] (or [`Server::serve_until`] a token) on a listener you made, inside a
//!   hoop runtime of yours, once per runtime thread.
//!
//! On shutdown each thread stops accepting, lets the responses in flight finish within
//! [`Config::shutdown_grace`], and returns [`ServeStats`]; connections still open are closed.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! fn main() -> std::io::Result<()> {
//!     let server = hoop_http::Server::builder("./public")
//!         .threads(2)
//!         .max_conns(1000)
//!         .idle_timeout(Duration::from_secs(30))
//!         .access_log(|e| println!("{e} {} bytes", e.body_bytes))
//!         .shutdown_on_signal()
//!         .build()?;
//!     let bound = server.bind("127.0.0.1:8080")?;
//!     println!("serving on http://{}", bound.local_addr());
//!     let stats = bound.run()?; // until Ctrl-C or SIGTERM
//!     println!("{} requests", stats.requests);
//!     Ok(())
//! }
//! ```
//!
//! On a runtime and listener of your own, stopped by a token:
//!
//! ```no_run
//! use hoop::sync::CancellationToken;
//! use hoop_http::{Config, Server};
//!
//! fn main() -> std::io::Result<()> {
//!     let server = Server::new("./public", Config::default())?;
//!     let token = CancellationToken::new();
//!     hoop::Runtime::new()?.block_on(async {
//!         let listener = hoop::net::TcpListener::bind("127.0.0.1:8080").await?;
//!         // Elsewhere: token.cancel() begins the graceful stop.
//!         let stats = server.serve_until(listener, &token).await;
//!         println!("{} connections", stats.accepted);
//!         Ok(())
//!     })
//! }
//! ```
//!
//! A whole exchange, runnable: a temporary directory served on a free port of 127.0.0.1, one
//! file fetched with a plain blocking [`std::net::TcpStream`] (on the runtime's blocking pool,
//! so the server keeps running on the runtime's thread), then the graceful stop:
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::SocketAddr;
//! use std::time::Duration;
//!
//! use hoop::sync::CancellationToken;
//! use hoop_http::Server;
//!
//! /// A `GET` on a connection of its own, read to its end (`Connection: close`).
//! fn get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
//!     let mut s = std::net::TcpStream::connect(addr)?;
//!     s.set_read_timeout(Some(Duration::from_secs(10)))?;
//!     write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
//!     let mut response = String::new();
//!     s.read_to_string(&mut response)?;
//!     Ok(response)
//! }
//!
//! fn main() -> std::io::Result<()> {
//! #   // Injected resets (CI's fault runs) would end the one connection: the example is about
//! #   // the API, not about surviving them.
//! #   let _faults =
//! #       hoop::fault::opt_out_because(&["econnreset"], "a doc example's one connection");
//!     let root = std::env::temp_dir().join(format!("hoop-http-doc-{}", std::process::id()));
//!     std::fs::create_dir_all(&root)?;
//!     std::fs::write(root.join("hello.txt"), "hello from hoop-http\n")?;
//!
//!     let server = Server::builder(&root).build()?;
//!     let token = CancellationToken::new();
//!     let (stats, response) = hoop::Runtime::new()?.block_on(async {
//!         let listener = hoop::net::TcpListener::bind("127.0.0.1:0").await?;
//!         let addr = listener.local_addr()?;
//!         let client = async {
//!             let response = hoop::spawn_blocking(move || get(addr, "/hello.txt")).await;
//!             token.cancel(); // the graceful stop, whatever the client got
//!             response
//!         };
//!         let (stats, response) = hoop::join!(server.serve_until(listener, &token), client);
//!         Ok::<_, std::io::Error>((stats, response??))
//!     })?;
//!
//!     assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
//!     assert!(response.ends_with("\r\n\r\nhello from hoop-http\n"), "{response}");
//!     assert_eq!(stats.requests, 1);
//!     std::fs::remove_dir_all(&root)?;
//!     Ok(())
//! }
//! ```
//!
//! # What it serves
//!
//! - `GET` and `HEAD` of regular files under the root, resolved beneath it by the kernel
//!   (`openat2` with `RESOLVE_BENEATH`: no `..`, no symlink out of the root, no dot files);
//! - `ETag` and `Last-Modified` with `If-None-Match`/`If-Modified-Since` (`304`), byte
//!   ranges (`206`, `416`) with `If-Range`, several as `multipart/byteranges` up to
//!   [`Config::max_ranges`] parts, keep-alive and pipelining, nginx's content types;
//! - precompressed variants (`a.css.br`, `a.css.zst`, `a.css.gz`) to clients that accept them
//!   ([`Config::precompressed`]), index files ([`Config::index`]) and an optional directory
//!   listing ([`Config::autoindex`]) in HTML or JSON ([`Config::autoindex_format`]);
//! - `Cache-Control` by path glob or content type ([`Config::cache_control`]), custom 404 and
//!   403 pages from files under the root ([`Config::error_pages`]), and, off by default,
//!   `X-Content-Type-Options: nosniff` and a `Content-Security-Policy`
//!   ([`Config::security_headers`], [`Config::content_security_policy`]);
//! - small files from a bounded in-memory cache in one send, bigger ones by `sendfile(2)`;
//! - limits and timeouts on every connection ([`Config`]), an access-log hook
//!   ([`Builder::access_log`]), a graceful stop, on io_uring or on hoop's epoll driver.
//!
//! The crate has no cargo features of its own; it runs on whichever driver hoop's runtime
//! picked (`HOOP_DRIVER`).
//!
//! # Inside
//!
//! A request's story, one module per step (private to the crate):
//! 1. `parse`: received bytes become a request (httparse), or the status that refuses them;
//! 2. `resolve`: the target is percent-decoded once and opened beneath the root
//!    (`openat2` with `RESOLVE_BENEATH` through the ring); `lookup` takes the cached copy
//!    while a fresh `statx` still shows its identity, else opens the file;
//! 3. `response`: `statx` (a system call on the thread: the ring would run it in an io-wq
//!    worker) gives size and validators; conditionals and ranges decide the
//!    answer (the rules of ranges and `If-Range` in `ranges`), and the head is written; a
//!    precompressed variant (`a.css.br`, `a.css.zst`, `a.css.gz`)
//!    answers instead when the client's `Accept-Encoding` takes it, and a directory without
//!    an index file gets a listing with [`Config::autoindex`];
//! 4. `conn` (the loop, the file answer, its head, the body senders, the log, one file
//!    each): the body goes out: from the `cache` with the head in one send below 16 KiB,
//!    by `sendfile(2)` from the page cache behind the head (sent with `MSG_MORE`) from 16 KiB
//!    ([`Config::sendfile_min_bytes`]), waiting through the ring while the socket is full;
//!    pipelined responses in order; the [`access_log`] sees each answered request.
//!
//! What the configuration adds to responses is prepared once per server (`extras`):
//! [`Config::cache_control`] rules ([`cache_control`]), the security headers
//! ([`Config::security_headers`], [`Config::content_security_policy`]) and the custom error
//! pages read into memory ([`Config::error_pages`], [`error_page`]).
//!
//! `server` runs it on a thread: accept (paced after failures by
//! [`hoop::net::AcceptPacing`]), limits ([`config`]) and the graceful stop (`stop`: when
//! [`Server::run`] stops).

/// The README's examples, compiled with the doc tests so the crate page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod access_log;
pub(crate) mod autoindex;
mod builder;
pub(crate) mod cache;
pub mod cache_control;
pub(crate) mod compress;
pub mod config;
mod config_error;
pub(crate) mod conn;
pub(crate) mod date;
pub(crate) mod deadline;
pub(crate) mod encoding;
pub mod error_page;
pub(crate) mod extras;
pub(crate) mod fill;
pub(crate) mod http2;
pub(crate) mod lookup;
pub(crate) mod mime;
pub(crate) mod parse;
pub(crate) mod ranges;
pub(crate) mod resolve;
pub(crate) mod response;
mod server;
pub mod service;
pub(crate) mod splice;
pub(crate) mod status;
pub(crate) mod stop;
pub mod tls;
pub(crate) mod trim;

pub use access_log::{
    stdout_logger_as, AccessLog, AccessLogEntry, AccessLogFormat, AccessLogWriter, RequestLine,
};
pub use builder::Builder;
pub use config::{AutoindexFormat, CacheControlRule, Config, ConfigError, ErrorPage};
pub use server::{Bound, ServeStats, Server};
pub use service::{Body, BodyError, BoxError};
pub use tls::{ktls_available, TlsError, TlsFiles, TlsReloader};
