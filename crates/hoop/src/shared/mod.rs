//! hoop from any thread: io_uring files and sockets on rings shared by every thread, awaited as
//! ordinary `Send + 'static` futures from any executor (tokio's multi-thread runtime, hyper,
//! `futures::executor`, plain threads).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use hoop::shared::{File, Rings};
//!
//! let rings = Rings::builder().rings(2).entries(256).build()?;
//! let file = File::open(&rings, "/etc/hostname").await?;
//! // A `Send + 'static` future: spawn it on tokio's multi-thread runtime if you like.
//! let (res, buf) = file.read_at(Vec::with_capacity(4096), 0).await;
//! println!("{} bytes: {:?}", res?, String::from_utf8_lossy(&buf));
//! # Ok(()) }
//! ```
//!
//! Every future here is `Send + 'static`, the constructors' too: [`File::open`],
//! [`File::create`], [`OpenOptions::open`], [`fs::read`], [`fs::write`], [`TcpStream::connect`]
//! and [`TcpListener::bind`] take `&Rings` and a borrowed path or address, but clone the handle
//! and copy the path (or resolve the address) before they return, so
//! `tokio::spawn(File::open(&rings, &path))` compiles and runs after both are gone. Name
//! resolution: `TcpStream::connect` looks a host name up on hoop's blocking pool when the
//! future runs (a literal address is parsed at once); `TcpListener::bind` resolves with std's
//! resolver before it returns, which blocks the calling thread for a host name (never for a
//! literal address such as `"127.0.0.1:0"`), and binds when first polled. Methods on a `File`,
//! `TcpStream` or `TcpListener` take `&self` and clone what the operation needs (the fd's
//! `Arc`, the rings), so their futures borrow nothing either. An operation may be polled first
//! on one thread and finished on another, even one polled first on a thread that has exited
//! since (the kernel then cancels the request; a cancel its owner did not ask for is
//! resubmitted): `tests/shared_tokio_threads.rs` moves operations in flight between tokio's
//! workers and past a thread's exit.
//!
//! The rules are the thread-per-core runtime's: buffers are owned by the operation until its
//! final completion, dropping a future cancels its operation in the kernel, a late accept or
//! open result is closed, and the rings' memory is freed only after every final CQE (dropping
//! the last [`Rings`] handle, from any thread, cancels and reaps first, on a thread of its own:
//! the dropping thread never blocks). See [`Rings`] for how SQEs are batched and completions
//! reaped, and DESIGN.md ("Shared rings") for the numbers behind the design.
//!
//! Inside a tokio runtime (feature `tokio`), the rings hand their waiting to tokio's reactor:
//! a poller task per ring watches the ring fd, so a completion wakes a tokio worker directly,
//! with no thread of hoop's in between. A runtime built with
//! `.on_thread_park(hoop::shared::submit_deferred)` also lets the rings send: on its workers,
//! tokio's `AsyncWrite` on a [`TcpStream`] hands the bytes to a ring send that is submitted,
//! with every other send of that turn of the worker's loop, in one `io_uring_enter` just
//! before the worker sleeps (without the hook, each write is a `sendmsg(2)` of its own). Where
//! io_uring is refused (Docker's default seccomp
//! profile, `kernel.io_uring_disabled`), [`Rings::new`] builds the same set on hoop's epoll
//! engine, says why once on stderr and in [`Rings::fallback_reason`], and every type here keeps
//! working (`HOOP_DRIVER=epoll` chooses it; [`RingsBuilder::driver`] forces either).
//!
//! # Owned-buffer methods and the I/O traits
//!
//! [`TcpStream`] has inherent methods with owned buffers whose names are also methods of
//! tokio's `AsyncReadExt`/`AsyncWriteExt` (feature `tokio`) and of `futures::io`'s. Rust picks
//! the inherent method for `stream.method(..)` (on a `TcpStream` value, or a `&TcpStream`),
//! whatever trait is in scope, so the call with the trait's arguments does not compile; call
//! the trait's method through the trait (or through a `&mut TcpStream` receiver, where the
//! trait's `&mut self` method is found first). The names stay: other code uses them.
//!
//! | method | `stream.method(..)` is | the trait's spelling |
//! |---|---|---|
//! | `read` | `TcpStream::read(&self, buf: B) -> BufResult<usize, B>` (owned buffer) | `AsyncReadExt::read(&mut stream, &mut buf)` |
//! | `read_exact` | `TcpStream::read_exact(&self, buf: B) -> BufResult<(), B>` | `AsyncReadExt::read_exact(&mut stream, &mut buf)` |
//! | `write` | `TcpStream::write(&self, buf: B) -> BufResult<usize, B>` | `AsyncWriteExt::write(&mut stream, &buf)` |
//! | `write_all` | `TcpStream::write_all(&self, buf: B) -> BufResult<(), B>` | `AsyncWriteExt::write_all(&mut stream, &buf)` |
//! | `shutdown` | `TcpStream::shutdown(&mut self)`: the same as the trait's (flushes, then shuts the write half); std's `shutdown(how)` is `shutdown_with(how)` | `AsyncWriteExt::shutdown(&mut stream)` |
//!
//! The futures' traits are spelled the same way (`futures::io::AsyncReadExt::read(&mut stream,
//! &mut buf)`). Every other trait method (`flush`, `read_to_end`, `read_to_string`, `read_buf`,
//! `write_buf`, `close`, ...) has no inherent twin: `stream.flush()` is the trait's. [`File`]
//! has no clash: its owned-buffer methods end in `_at` (`read_at`, `write_all_at`, ...), so
//! `file.read(&mut buf)`, `file.write_all(&buf)`, `file.seek(pos)` and `file.flush()` are the
//! traits' (`AsyncSeekExt` included).
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn demo(
//! #     rings: hoop::shared::Rings,
//! #     addr: std::net::SocketAddr,
//! # ) -> std::io::Result<()> {
//! use std::net::Shutdown;
//!
//! use hoop::shared::{File, TcpStream};
//! use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
//!
//! let mut stream = TcpStream::connect(&rings, addr).await?;
//! // `stream.method(..)`: the owned-buffer methods.
//! let (res, buf) = stream.write_all(b"ping".to_vec()).await;
//! res?;
//! let (res, _) = stream.write(buf).await;
//! res?;
//! let (res, buf) = stream.read(Vec::with_capacity(4096)).await;
//! res?;
//! let (res, _) = stream.read_exact(vec![0u8; 4]).await;
//! res?;
//! drop(buf);
//!
//! // tokio's methods of the same names, through the trait.
//! let mut buf = [0u8; 4];
//! AsyncWriteExt::write_all(&mut stream, b"ping").await?;
//! let _n: usize = AsyncWriteExt::write(&mut stream, b"ping").await?;
//! let _n: usize = AsyncReadExt::read(&mut stream, &mut buf).await?;
//! AsyncReadExt::read_exact(&mut stream, &mut buf).await?;
//! // Or through a `&mut TcpStream` receiver.
//! let _n: usize = (&mut stream).read(&mut buf).await?;
//! (&mut stream).write_all(b"ping").await?;
//! // No twin: the trait's at once.
//! stream.flush().await?;
//! let mut rest = Vec::new();
//! stream.read_to_end(&mut rest).await?;
//! // Shutdowns: tokio's (flush, then the write direction), and std's with a direction.
//! stream.shutdown().await?;
//! stream.shutdown_with(Shutdown::Both).await?;
//!
//! // A File: no clash at all.
//! let mut file = File::open(&rings, "/etc/hostname").await?;
//! let _n: usize = file.read(&mut buf).await?;
//! file.seek(std::io::SeekFrom::Start(0)).await?;
//! let (res, _) = file.read_at(Vec::with_capacity(64), 0).await;
//! res?;
//! # Ok(()) }
//! ```

mod fs_impl;
mod io_traits;
mod net;
mod poll;
#[cfg(feature = "tokio")]
mod reactor;

pub use hoop_driver::shared::{submit_deferred, Keep, Rings, RingsBuilder, Route, SharedOp};
pub use hoop_driver::ShutdownReport;

pub use self::fs_impl::{File, OpenOptions};
pub use self::net::{TcpListener, TcpStream};

/// Whole-file helpers on shared rings.
pub mod fs {
    pub use super::fs_impl::{read, write};
}
