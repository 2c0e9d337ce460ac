//! hoop-http: a static-file HTTP/1.1 server on hoop's io_uring runtime, as a library (the
//! server behind `hoop serve http`).
//!
//! ```no_run
//! use hoop_http::{Config, Server};
//!
//! fn main() -> std::io::Result<()> {
//!     let server = Server::new("./public", Config::default())?;
//!     hoop::Runtime::new()?.block_on(async {
//!         let listener = hoop::net::TcpListener::bind("127.0.0.1:8080").await?;
//!         server.serve(listener, std::future::pending()).await;
//!         Ok(())
//!     })
//! }
//! ```
//!
//! A request's story, one module per step:
//! 1. [`parse`]: received bytes become a request (httparse), or the status that refuses them;
//! 2. [`resolve`]: the target is percent-decoded once and opened beneath the root
//!    (`openat2` with `RESOLVE_BENEATH` through the ring);
//! 3. [`response`]: `statx` gives size and validators; conditionals and ranges decide the
//!    answer, and the head is written; a precompressed variant (`a.css.br`, `a.css.gz`) answers
//!    instead when the client's `Accept-Encoding` ([`encoding`]) takes it, and a directory
//!    without an index file gets a listing with `--autoindex` ([`autoindex`]);
//! 4. [`conn`]: the body goes out: from the [`cache`] with the head in one send when small,
//!    by [`splice`] (file -> pipe -> socket) when big on io_uring, read and sent otherwise;
//!    pipelined responses in order.
//!
//! [`server`] runs it on a thread: accept, limits ([`config`]) and the graceful stop.

#[doc(hidden)]
pub mod accept;
pub mod autoindex;
pub mod cache;
pub mod config;
pub mod conn;
pub mod date;
pub mod deadline;
pub mod encoding;
pub mod mime;
pub mod parse;
pub mod resolve;
pub mod response;
pub mod server;
pub mod splice;
pub mod status;

pub use config::Config;
pub use server::Server;
