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
//!     let (res, buf) = stream.read(Vec::with_capacity(4096)).await;
//!     res?; // buf.len() is the number of bytes read
//!     let (res, _) = stream.write_all(buf).await;
//!     res
//! })
//! # }
//! ```
//!
//! A whole round trip, runnable: an echo server on a free port of 127.0.0.1, a client task that
//! sends a line and reads it back, on one runtime thread (io_uring, or the epoll driver where
//! io_uring cannot run; `HOOP_DRIVER=epoll` chooses it):
//!
//! ```
//! # fn main() -> std::io::Result<()> {
//! # // Injected resets (CI's fault runs) would end this one connection: the example is about
//! # // the API, not about surviving them.
//! # let _faults = hoop::fault::opt_out_because(&["econnreset"], "a doc example's one connection");
//! use hoop::net::{TcpListener, TcpStream};
//!
//! hoop::Runtime::new()?.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     let server = hoop::spawn(async move {
//!         let (stream, _) = listener.accept().await?;
//!         let mut buf = Vec::with_capacity(1024);
//!         loop {
//!             let (res, b) = stream.read(buf).await;
//!             if res? == 0 {
//!                 return Ok::<_, std::io::Error>(()); // the client closed
//!             }
//!             let (res, b) = stream.write_all(b).await; // the bytes it got, back
//!             res?;
//!             buf = b;
//!         }
//!     });
//!
//!     let client = TcpStream::connect(addr).await?;
//!     let (res, _) = client.write_all(b"hello, hoop\n".to_vec()).await;
//!     res?;
//!     let (res, reply) = client.read_exact(vec![0u8; 12]).await; // however it was split
//!     res?;
//!     assert_eq!(reply, b"hello, hoop\n");
//!     drop(client);
//!     server.await??; // the task's own result, after its JoinError
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # What the crate provides
//!
//! - [`Runtime`] (and its [`Builder`]: driver, ring sizes, shutdown timeout), [`spawn`],
//!   [`spawn_blocking`], [`Handle`] (spawn onto a runtime from any thread), [`run_per_core`]
//!   (a runtime per CPU), [`task::JoinSet`], `#[hoop::main]` and `#[hoop::test]`;
//! - [`net`]: TCP (listeners with multishot accept, streams, owned and borrowed halves,
//!   `SO_REUSEPORT` groups), UDP and Unix sockets (streams and datagrams), zero-copy send,
//!   `sendfile`, deadlines on every call;
//! - [`fs`]: files (owned-buffer reads and writes at offsets, `O_DIRECT` with [`AlignedBuf`],
//!   registered files and buffers), directories, `copy`, `read`, `write`, metadata;
//! - [`time`]: [`time::sleep`], [`time::timeout`], [`time::Interval`], kernel-linked deadlines
//!   on an operation ([`time::op_timeout`]);
//! - [`select!`], [`join!`], [`try_join!`], [`sync::CancellationToken`], [`signal`];
//! - [`shared`]: hoop's files and sockets from any thread (rings several threads submit to),
//!   inside a tokio runtime too;
//! - [`op`], [`Op`], [`link`]: every operation, for programs that define their own;
//! - [`BufRing`], [`FixedBufPool`]: provided and registered buffers.
//!
//! Every runtime runs on io_uring where the kernel allows it and on its epoll driver where it
//! does not (old kernels, seccomp, `kernel.io_uring_disabled`), with the same API and cancel
//! safety; `HOOP_KERNEL_LEVEL` switches off what an older kernel lacks (see `hoop::driver::level`).
//!
//! # Cargo features
//!
//! - `tokio` (off): tokio's `AsyncRead`/`AsyncWrite` (and `AsyncSeek`) for [`net::TcpStream`],
//!   [`net::UnixStream`] and [`fs::File`] (no tokio runtime needed), and the [`shared`] rings'
//!   completions through tokio's reactor when used inside a tokio runtime.
//! - `fault-injection` (off): seeded fault injection in both drivers, driven by
//!   `HOOP_FAULTS=seed=N,rate=P[,kinds=LIST]` (see [`fault`]); inert until a plan is set.
//!
//! # The read rule: a buffer never shows stale bytes
//!
//! Every read-like operation — `read`, `recv`, `recv_from`, `read_at`, `readv_at`, the fixed
//! (registered) buffer reads, direct-descriptor reads, on io_uring and on epoll alike — writes
//! at the start of the buffer it is given, up to its capacity (`IoBuf::bytes_total`), and then
//! sets the buffer's length to **exactly** the number of bytes that read delivered: 0 on end of
//! stream and on error. Bytes from an earlier use of the buffer are never inside its length.
//! (A buffer received from a [`BufRing`] is a fresh buffer of exactly the bytes received.)
//!
//! `read_exact`/`read_exact_at` fill **exactly the buffer's length** (`Vec::len`, as std's
//! `read_exact(&mut buf)` does), or, for a [`Slice`], exactly its view; on an error or an early
//! end the length is the bytes that did arrive. So `vec![0u8; n]` asks for `n` bytes, and so
//! does `buf.slice(..n)` on any buffer with room for `n` (a reused one included). A
//! `Vec::with_capacity(n)` has length 0: `read` fills up to `n` into it, `read_exact` reads
//! nothing. A read into `buf.slice(k..)` keeps the first `k` bytes and sets the length to
//! `k + n`.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! # hoop::Runtime::new()?.block_on(async {
//! # let stream = hoop::net::TcpStream::connect("127.0.0.1:7000").await?;
//! use hoop::IoBuf; // for `slice`
//!
//! let buf = b"0123456789".to_vec();
//! // The peer sends "abc": the buffer reads back as "abc", never "abc3456789".
//! let (res, buf) = stream.read(buf).await;
//! assert_eq!(buf.len(), res?);
//!
//! // A header of exactly 4 bytes, into a reused buffer whatever its length was:
//! let (res, header) = stream.read_exact(buf.slice(..4)).await;
//! res?;
//! let header = header.into_inner(); // header.len() == 4
//!
//! // A body of exactly `len` bytes: a buffer of that length.
//! let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
//! let (res, body) = stream.read_exact(vec![0u8; len]).await;
//! res?;
//! assert_eq!(body.len(), len);
//! # Ok::<(), std::io::Error>(())
//! # })
//! # }
//! ```
//!
//! `Box<[u8]>` is not a read buffer (its length cannot change); use a `Vec<u8>`.
//!
//! # Poll-based I/O: `futures::io` and tokio's traits
//!
//! [`net::TcpStream`], [`net::UnixStream`] and [`fs::File`] also implement
//! `futures::io::{AsyncRead, AsyncWrite}` (and, with the `tokio` feature, tokio's `AsyncRead`
//! and `AsyncWrite`), so `BufReader::lines`, codecs and TLS crates work on them; see the
//! `poll_io` notes on `TcpStream` for the internal buffers and the write-behind rule. The
//! halves of a split stream (`into_split`, `split`) implement the trait of their direction.
//!
//! Bytes a `poll_write` accepted are written: a file, stream or owned write half dropped with
//! write-behind pending (no `flush` after `write_all`) finishes those writes in order, then
//! closes (a write half shuts down its direction), as a detached task of the runtime; the end
//! of `block_on` and the runtime's shutdown wait for such writes, up to the shutdown timeout
//! ([`Builder::shutdown_timeout`]), and [`ShutdownReport::unfinished_writes`] counts those that
//! did not finish. Their errors have nobody to go to: only `flush` and `close` report errors,
//! so call them where an error matters. This holds when the value is dropped on its runtime's
//! thread while the runtime runs (inside `block_on` or its shutdown); dropped elsewhere (after
//! `block_on` returned, on another thread), its pending writes are cancelled. (`hoop::shared`'s
//! `File` and `TcpStream` finish theirs wherever they are dropped: their operations are woken
//! by the rings, with no runtime.)
//!
//! # One rule for the two APIs
//!
//! A stream's own `read`, `read_exact`, `write` and `write_all` take an owned buffer and give
//! it back (`let (res, buf) = s.write_all(buf).await;`); Rust picks a type's own method before
//! a trait's of the same name, so with `AsyncWriteExt` in scope `s.write_all(b"hi")` is still
//! hoop's. Call the trait's by its path: `AsyncWriteExt::write_all(&mut s, b"hi").await?`.
//! Borrowed bytes given to hoop's methods fail to compile with an error that says so and
//! names that fix:
//!
//! ```compile_fail,E0277
//! # async fn f(mut s: hoop::net::TcpStream) -> std::io::Result<()> {
//! use futures::io::AsyncWriteExt;
//! let _ = s.write_all(b"hi\n").await; // `&[u8; 3]` is not an owned buffer: ... call the trait
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0277
//! # async fn f(mut s: hoop::net::TcpStream) -> std::io::Result<()> {
//! use futures::io::AsyncReadExt;
//! let mut buf = [0u8; 1024];
//! let _ = s.read(&mut buf).await; // `&mut [u8; 1024]` is not an owned buffer to read into
//! # Ok(()) }
//! ```
//!
//! A borrowed slice of any lifetime is refused the same way, by the type check (hoop has no
//! impl for `&'static [u8]`, which would turn these into borrow-check errors that name no
//! fix):
//!
//! ```compile_fail,E0277
//! # async fn f(mut s: hoop::net::TcpStream) -> std::io::Result<()> {
//! use futures::io::AsyncWriteExt;
//! let buf = [0u8; 64];
//! let n = 3;
//! let _ = s.write_all(&buf[..n]).await; // `&[u8]` is not an owned buffer: ... call the trait
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0277
//! # async fn f(s: hoop::net::UdpSocket, line: String) -> std::io::Result<()> {
//! let _ = s.send(line.as_bytes()).await; // `&[u8]` is not an owned buffer
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0277
//! # async fn f(mut s: hoop::net::TcpStream, line: String) -> std::io::Result<()> {
//! let _ = s.write_all(line.trim()).await; // `&str` is not an owned buffer
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0277
//! # async fn f(mut s: hoop::net::TcpStream) -> std::io::Result<()> {
//! use futures::io::AsyncReadExt;
//! let mut buf = vec![0u8; 1024];
//! let _ = s.read(&mut buf[..]).await; // `&mut [u8]` is not an owned buffer to read into
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # async fn f(mut s: hoop::net::TcpStream) -> std::io::Result<()> {
//! use futures::io::{AsyncReadExt, AsyncWriteExt};
//! AsyncWriteExt::write_all(&mut s, b"hi\n").await?; // the trait's
//! let mut buf = [0u8; 1024];
//! let _n = AsyncReadExt::read(&mut s, &mut buf).await?;
//! let (res, _buf) = s.write_all(b"hi\n".to_vec()).await; // hoop's: owned, given back
//! res?;
//! let (res, _) = s.write_all(hoop::StaticBuf(b"hi\n")).await; // static bytes, no copy
//! res?;
//! s.shutdown().await?; // tokio's meaning: flush, then shut the write direction
//! # Ok(()) }
//! ```
//!
//! Methods with no owned twin (`flush`, `read_to_end`, `read_line`, `copy`) are the traits'
//! as written. `shutdown()` is tokio's (flush what the traits accepted, then `SHUT_WR`);
//! std's `shutdown(how)` is `shutdown_with(how)`. One more clash: futures' `AsyncReadExt::split`
//! takes the stream by value, so with it in scope `s.split()` is futures' (a lock): write
//! `TcpStream::split(&mut s)`, or use `into_split`.
//!
//! # Selecting
//!
//! [`select!`] is tokio's `select!`, implemented by hoop: no `.fuse()`, no pinning, and the
//! same `biased;`, `, if` preconditions, refutable patterns and `else` (see the
//! [`select`](mod@select) module for the details). The recommended shape of a server's loop:
//! `biased;` so shutdown is seen first and finished tasks are reaped before new work comes
//! in, a guard on the `JoinSet` branch, and a refutable pattern where a stream can end:
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! # hoop::Runtime::new()?.block_on(async {
//! use hoop::net::{TcpListener, TcpStream};
//! use hoop::sync::CancellationToken;
//! use hoop::task::JoinSet;
//!
//! async fn serve(stream: TcpStream) -> std::io::Result<()> {
//!     let (res, buf) = stream.read(Vec::with_capacity(4096)).await;
//!     res?;
//!     stream.write_all(buf).await.0
//! }
//!
//! let listener = TcpListener::bind("127.0.0.1:7000").await?;
//! let shutdown = CancellationToken::new(); // cancelled elsewhere, e.g. on a signal
//! let mut incoming = listener.incoming();
//! let mut set = JoinSet::new();
//! loop {
//!     hoop::select! {
//!         biased;
//!         _ = shutdown.cancelled() => break,
//!         Some(res) = set.join_next(), if !set.is_empty() => {
//!             if let Err(e) = res? {
//!                 eprintln!("connection: {e}");
//!             }
//!         }
//!         Some(conn) = incoming.next() => {
//!             set.spawn(serve(conn?));
//!         }
//!         else => break, // the listener's stream ended and no task is left
//!     }
//! }
//! set.shutdown().await;
//! # Ok::<(), std::io::Error>(())
//! # })
//! # }
//! ```
//!
//! Without the guard, an empty set's `join_next()` would complete at once with `None`: the
//! pattern `Some(res)` does not match, so that branch is disabled for this `select!` (the
//! others go on), which is also safe, only a wasted poll per round.
//!
//! **Cancel safety, as tokio documents it.** A branch that loses is dropped; hoop's receives
//! lose nothing when that happens, on io_uring and on epoll: `accept` (TCP and Unix),
//! `incoming().next()`, stream `read`/`read_timeout` (streams and their halves), datagram
//! `recv`/`recv_from` (UDP and Unix), [`signal::Signal::recv`], [`time::Interval::tick`] and
//! [`task::JoinSet::join_next`]. A receive dropped while the kernel works on it is parked on
//! its socket, still in flight, and the next call on that socket adopts it: the connection,
//! the bytes (in order) or the datagram it got go to that call. Writes are not cancel safe
//! (`write_all` may have sent part of its bytes, as tokio's), nor is `read_exact`; each
//! method's docs have a `# Cancel safety` section that says which, and what to use in
//! `select!` instead (for writes, `AsyncWriteExt::write`, which takes bytes only when it
//! returns them written).
//!
//! `tokio::select!` also works on hoop's futures (it needs no tokio runtime), and
//! `futures::select!` (a different macro) works without `.fuse()` on hoop's fused types:
//! [`time::Sleep`], `cancelled()`, [`JoinHandle`], and the streams [`net::Incoming`],
//! [`time::Interval`], [`signal::Signal`] (through `StreamExt::next`). Futures of `async fn`s
//! (`interval.tick()`, tokio's `lines.next_line()`) still need `.fuse()` there.
//!
//! [`fs::File`] also implements `AsyncSeek` (futures', and tokio's with the `tokio` feature).
//! Its traits read and write at the file's own cursor (`read(2)`/`write(2)`), like
//! `std::fs::File`; its owned-buffer methods (`read_at`, `write_at`, …) take a position and
//! neither use nor move the cursor (`pread(2)`/`pwrite(2)`), unless the position is
//! [`op::CURRENT_POS`]. The traits' buffers are up to 1 MiB for files
//! ([`fs::File::set_max_buf_size`]; sockets keep 16 KiB): sequential reads read ahead, and
//! writes are staged behind the write in flight, so `futures::io::copy` between files is not
//! held to small system calls. Reads, writes and seeks through the traits land where they would
//! with std's `File` (a write or a seek gives back the bytes read ahead first); before using
//! the cursor otherwise (`CURRENT_POS`, `into_std`), flush and seek to `SeekFrom::Current(0)`
//! through the traits. See [`fs::File`].
//!
//! Each runtime thread owns one ring. Operations in flight are owned by the ring until their
//! final completion. Dropping a receive's future parks its operation on its socket for the
//! next call (above); dropping any other operation's future cancels it, and a result that
//! still comes is released (an accepted or opened fd closed, a buffer freed). See DESIGN.md
//! for the full lifecycle.

#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly) marks the items only the `tokio` feature brings.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(clippy::undocumented_unsafe_blocks)]

/// The README's examples, compiled with the doc tests so the crate page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
#[path = "axum_serve.rs"]
pub mod axum;
pub mod epoll;
pub mod fs;
#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
#[path = "hyper_rt.rs"]
pub mod hyper;
mod io_util;
pub mod net;
mod poll_io;
pub mod runtime;
pub mod select;
mod send_path;
pub mod shared;
pub mod signal;
pub mod sync;
pub mod task;
pub mod time;

pub use hoop_driver::{
    buf, setup, BufResult, BufRing, Counters, DriverKind, IoBuf, IoBufMut, RingBuf, ShutdownReport,
    Slice, StaticBuf,
};
pub use hoop_driver::{AlignedBuf, FixedBuf, FixedBufPool, FixedIoBuf};
pub use hoop_macros::{main, select, test};

/// `join!`, `try_join!` and `pin_mut!`, re-exported from `futures` (they need no particular
/// runtime). [`select!`] is hoop's own, with tokio's syntax (see [Selecting](#selecting)).
pub use futures::{join, pin_mut, try_join};
pub use runtime::{
    run_per_core, run_per_core_reports, spawn, yield_now, Builder, JoinError, JoinHandle, Runtime,
};
pub use runtime::{spawn_blocking, Handle, SendJoinHandle};

/// The driver layer, for programs that define their own operations.
pub use hoop_driver as driver;

/// Seeded fault injection (`fault-injection` feature, `HOOP_FAULTS`): see the module.
pub use hoop_driver::fault;

/// Every operation, defined once (`op::Recv::new(fd, buf, 0)` and friends): await one with
/// [`Op::new`], give it a kernel-linked deadline with [`time::op_timeout`], chain two with
/// [`link`].
#[doc(inline)]
pub use hoop_driver::op;
#[doc(inline)]
pub use hoop_driver::{link, Link, MultiOp, Op};

/// Support for `#[hoop::test]` (and the crate's own test harness); not a public API.
#[doc(hidden)]
pub mod __private {
    use std::any::Any;
    use std::future::Future;
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::OnceLock;

    use crate::{DriverKind, Runtime};

    /// Where an unbiased `hoop::select!` starts polling.
    pub use crate::select::select_start;

    /// The send path of this thread (tests; DESIGN.md, "The send path").
    pub use crate::send_path::set_for_thread as set_send_path;

    /// Opens the process's reserve descriptor now if no listener has yet (tests that count
    /// descriptors: the reserve lives as long as the process, from the first listener on).
    pub use crate::net::keep_fd_reserve;

    /// What a test body returns: `()` or a `Result` (whose `Ok` is itself a test outcome).
    pub trait TestOutcome: Sized {
        /// The outcome of a run that was skipped (every driver it asked for is unavailable).
        fn skipped() -> Self;
        /// Whether this outcome fails the test.
        fn failed(&self) -> bool;
    }

    impl TestOutcome for () {
        fn skipped() {}
        fn failed(&self) -> bool {
            false
        }
    }

    impl<T: TestOutcome, E> TestOutcome for Result<T, E> {
        fn skipped() -> Self {
            Ok(T::skipped())
        }
        fn failed(&self) -> bool {
            self.as_ref().map_or(true, T::failed)
        }
    }

    /// Why io_uring cannot run in this process (ENOSYS, EPERM: seccomp or
    /// `kernel.io_uring_disabled`), or `None` if it can. Probed once.
    pub fn uring_unavailable() -> Option<&'static str> {
        static REASON: OnceLock<Option<String>> = OnceLock::new();
        REASON
            .get_or_init(|| {
                match Runtime::builder().driver(DriverKind::Uring).build() {
                    Ok(_) => None,
                    Err(e) => match e.kind() {
                        std::io::ErrorKind::Unsupported | std::io::ErrorKind::PermissionDenied => {
                            Some(e.to_string())
                        }
                        // The ring works but lacks an operation hoop needs: a sandbox's partial
                        // io_uring, or a kernel level (`HOOP_KERNEL_LEVEL`) below the driver's.
                        _ if e
                            .get_ref()
                            .and_then(|i| i.downcast_ref::<crate::setup::SetupError>())
                            .is_some_and(|s| {
                                s.kind() == crate::setup::SetupErrorKind::MissingOpcodes
                            }) =>
                        {
                            Some(e.to_string())
                        }
                        // Anything else is a bug to report, not a reason to skip.
                        _ => None,
                    },
                }
            })
            .as_deref()
    }

    /// Prints `skip on KIND: REASON` on stderr, bypassing the test harness's output capture
    /// (which hides what passing tests print), so a skipped run is never silent. At a kernel
    /// level (`HOOP_KERNEL_LEVEL`) an io_uring skip names the test and the level instead,
    /// `hoop level: TEST skipped at LEVEL on uring: REASON` (the thread's name is the test's
    /// under the harness), so CI lists the skips of each level by name; the level switches off
    /// io_uring features only, so an epoll skip is the same at every level and keeps its form.
    pub fn skip(kind: DriverKind, reason: &str) {
        use std::io::Write;
        let level = crate::driver::level::current();
        let _ = if level == crate::driver::level::Level::Native || kind != DriverKind::Uring {
            writeln!(std::io::stderr(), "skip on {kind}: {reason}")
        } else {
            let thread = std::thread::current();
            writeln!(
                std::io::stderr(),
                "hoop level: {} skipped at {level} on {kind}: {reason}",
                thread.name().unwrap_or("?")
            )
        };
    }

    fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
        payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
    }

    /// Panics again with `driver=KIND: ` before the message (the original payload when it is
    /// not a string).
    fn repanic(kind: DriverKind, payload: Box<dyn Any + Send>) -> ! {
        match panic_message(&*payload) {
            Some(msg) => panic!("driver={kind:?}: {msg}"),
            None => {
                eprintln!("the test panicked on driver={kind:?}");
                resume_unwind(payload)
            }
        }
    }

    /// The fault kinds the driver matrix opts out of (see [`each_driver`]).
    pub const MATRIX_OPT_OUTS: [&str; 1] = ["setup"];

    /// Runs `f` once per driver in `drivers`, in order, and stops at the first failure: a
    /// panic is raised again with `driver=KIND: ` before its message, a failed outcome (an
    /// `Err`) is returned after a line on stderr naming the driver. io_uring is skipped, with
    /// a line on stderr, where it is unavailable.
    ///
    /// With `expect_panic` (a `#[should_panic]` test), every driver must panic: a driver that
    /// does not is named on stderr and its outcome returned (so the test fails); otherwise the
    /// first panic is raised again.
    pub fn each_driver<R: TestOutcome>(
        drivers: &[DriverKind],
        expect_panic: bool,
        mut f: impl FnMut(DriverKind) -> R,
    ) -> R {
        let mut outcome = None;
        let mut first_panic = None;
        // The harness names the driver of each run, so an injected setup failure would only
        // fail the test, not test anything: its runtimes opt out of it (tests/faults.rs and
        // `hoop soak` cover setup failures and the fallback). Resets are not opted out: the
        // tests' clients reconnect and retry an exchange a reset ended
        // (`hoop_test_support::resets`), as a production client does.
        let _faults = crate::fault::opt_out_quietly(&MATRIX_OPT_OUTS);
        if let Some(plan) = crate::fault::describe() {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "hoop faults: HOOP_FAULTS={plan}; #[hoop::test] and driver-matrix runtimes \
                     opt out of {}",
                    MATRIX_OPT_OUTS.join(", ")
                );
            });
        }
        for &kind in drivers {
            if kind == DriverKind::Uring {
                if let Some(reason) = uring_unavailable() {
                    skip(kind, &format!("io_uring unavailable here: {reason}"));
                    continue;
                }
            }
            match catch_unwind(AssertUnwindSafe(|| f(kind))) {
                Ok(r) if expect_panic => {
                    eprintln!("driver={kind:?} did not panic");
                    return r;
                }
                Ok(r) if r.failed() => {
                    match crate::fault::describe() {
                        Some(plan) => eprintln!(
                            "the test failed on driver={kind:?} under HOOP_FAULTS={plan} \
                             (repeat with the same HOOP_FAULTS)"
                        ),
                        None => eprintln!("the test failed on driver={kind:?}"),
                    }
                    return r;
                }
                Ok(r) => outcome = Some(r),
                Err(payload) if expect_panic => {
                    first_panic.get_or_insert((kind, payload));
                }
                Err(payload) => repanic(kind, payload),
            }
        }
        if let Some((kind, payload)) = first_panic {
            repanic(kind, payload);
        }
        outcome.unwrap_or_else(R::skipped)
    }

    /// The body of a `#[hoop::test]`: runs `body()` on a fresh runtime of each driver in turn
    /// (with `entries` SQ entries if given); see [`each_driver`].
    pub fn run_test<F, Fut>(
        drivers: &[DriverKind],
        entries: Option<u32>,
        expect_panic: bool,
        mut body: F,
    ) -> Fut::Output
    where
        F: FnMut() -> Fut,
        Fut: Future,
        Fut::Output: TestOutcome,
    {
        each_driver(drivers, expect_panic, |kind| {
            let mut builder = Runtime::builder().driver(kind);
            if let Some(entries) = entries {
                builder = builder.entries(entries);
            }
            let rt = builder
                .build()
                .unwrap_or_else(|e| panic!("hoop: cannot start the runtime: {e}"));
            rt.block_on(body())
        })
    }
}
