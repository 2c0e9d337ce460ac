//! hoop: completion-based async I/O on Linux io_uring.
//!
//! A thread-per-core runtime in the tokio idiom: [`Runtime::block_on`], [`spawn`] returning a
//! [`JoinHandle`], `#[hoop::main]` and `#[hoop::test]`, and [`net`], [`fs`] and [`time`]
//! modules. Reads and writes take buffers by value and give them back with the result, so the
//! kernel never writes into memory the caller still borrows:
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! hoop::Runtime::new()?.block_on(async {
//!     let listener = hoop::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let (stream, _) = listener.accept().await?;
//!     let (res, buf) = stream.read(vec![0u8; 4096]).await;
//!     let n = res?;
//!     let (res, _) = stream.write_all(buf[..n].to_vec()).await;
//!     res
//! })
//! # }
//! ```
//!
//! Each runtime thread owns one ring. Operations in flight are owned by the ring until their
//! final completion: dropping a future cancels its operation and the result is released by its
//! owner (an accepted fd is closed, a buffer freed). See DESIGN.md for the full lifecycle.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod fs;
pub mod net;
pub mod runtime;
pub mod time;

pub use hoop_driver::{buf, setup, BufResult, Counters, DriverKind, IoBuf, IoBufMut, ShutdownReport, Slice};
pub use hoop_macros::{main, test};
pub use runtime::{run_per_core, spawn, yield_now, Builder, JoinError, JoinHandle, Runtime};

/// The driver layer, for programs that define their own operations.
pub use hoop_driver as driver;
