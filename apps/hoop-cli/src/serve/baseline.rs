//! The baseline echo servers hoop's benchmarks compare against: tokio's current-thread runtime
//! (epoll) and monoio (io_uring, or its legacy epoll driver), each on the calling thread, doing
//! the same work per connection as hoop's (a 64 KiB buffer, write back what was read,
//! `TCP_NODELAY`).

use std::io;
use std::time::Duration;

/// Per-connection read buffer size (one read never returns more than this).
const BUF_SIZE: usize = 64 * 1024;

/// Number of `io_uring` submission-queue entries for monoio (monoio's own
/// default is also 1024; we set it explicitly so the baseline is pinned).
const URING_ENTRIES: u32 = 1024;

/// Pause after an `accept` failure caused by resource exhaustion
/// (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`), so the loop does not spin
/// while the process is out of descriptors or memory.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(1);

/// What the accept loop should do after `accept` failed.
enum AcceptErrorAction {
    /// Try again right away (e.g. the peer aborted before we accepted it).
    Retry,
    /// Out of descriptors or memory: sleep [`ACCEPT_BACKOFF`], then retry.
    Backoff,
    /// The listening socket itself is broken: stop serving.
    Fatal,
}

/// Classifies an `accept` error; see accept(2), which says most errors
/// (including network errors of the pending connection) should be retried.
fn classify_accept_error(err: &io::Error) -> AcceptErrorAction {
    match err.raw_os_error() {
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT) => {
            AcceptErrorAction::Fatal
        }
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
            AcceptErrorAction::Backoff
        }
        _ => AcceptErrorAction::Retry,
    }
}

// ===== tokio =====

/// Serves TCP echo on `listener` with tokio's current-thread runtime, forever.
///
/// Builds `tokio::runtime::Builder::new_current_thread().enable_all()`,
/// switches `listener` to non-blocking mode (tokio requires it), and spawns
/// one task per accepted connection. Each task sets `TCP_NODELAY`, reads up
/// to 64 KiB into its own buffer and `write_all`s it back until EOF or an
/// error, which closes only that connection.
///
/// There is no stop flag: the function runs until the process is killed.
///
/// # Errors
///
/// Returns an error only if the runtime cannot be built, the listener cannot
/// be registered with tokio, or `accept` fails in a way that means the
/// listening socket itself is unusable (`EBADF`, `EINVAL`, `ENOTSOCK`,
/// `EFAULT`). Transient `accept` errors are logged to stderr and retried.
pub fn run_tokio_echo(listener: std::net::TcpListener) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(tokio_accept_loop(listener))
}

/// Accepts connections forever, spawning [`tokio_echo_conn`] for each.
async fn tokio_accept_loop(listener: std::net::TcpListener) -> io::Result<()> {
    // `from_std` must run inside the runtime (it registers with the reactor).
    let listener = tokio::net::TcpListener::from_std(listener)?;
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                tokio::spawn(tokio_echo_conn(stream));
            }
            Err(err) => match classify_accept_error(&err) {
                AcceptErrorAction::Retry => eprintln!("tokio echo: accept failed: {err}"),
                AcceptErrorAction::Backoff => {
                    eprintln!("tokio echo: accept failed: {err}; backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                AcceptErrorAction::Fatal => return Err(err),
            },
        }
    }
}

/// Echoes one connection until EOF or the first error.
async fn tokio_echo_conn(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // Best effort: a failure here only costs latency, not correctness.
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; BUF_SIZE];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

// ===== monoio =====

/// Serves TCP echo on `listener` with monoio on the calling thread, forever.
///
/// # Driver
///
/// monoio 0.2 picks its driver when the runtime is built, not per call:
///
/// 1. **`io_uring`** (`monoio::IoUringDriver`, 1024 SQ entries, default ring
///    flags: no SQPOLL) is used when `monoio::utils::detect_uring()` says
///    `io_uring` works and supports every opcode monoio uses (it also returns
///    false when the environment variable `MONOIO_FORCE_LEGACY_DRIVER` is
///    `1`/`true`/`yes`) **and** creating the 1024-entry ring succeeds.
/// 2. Otherwise the **legacy** driver (`monoio::LegacyDriver`, epoll via mio)
///    is used, i.e. monoio degrades to a readiness runtime like tokio.
///
/// This is the same decision as monoio's `FusionDriver`, except that a
/// failure to create the real ring also falls back instead of returning an
/// error (e.g. `ENOMEM` on kernels before 5.12, where ring memory counts
/// against `RLIMIT_MEMLOCK`: the 2-entry probe ring fits, 1024 entries may
/// not). `io_uring` being disabled (`kernel.io_uring_disabled`, seccomp)
/// makes the probe fail, so that case takes the legacy driver too. The driver
/// that ran is printed once to stderr as
/// `monoio echo: using io_uring driver ...` or
/// `monoio echo: using legacy (epoll) driver ...`.
///
/// The listening socket is put into blocking mode for `io_uring` (as monoio's
/// own `bind` leaves it; `io_uring` waits with its own internal poll) and into
/// non-blocking mode for the legacy driver (required by epoll).
///
/// Each accepted connection gets its own task, sets `TCP_NODELAY`, reads up
/// to 64 KiB into an owned buffer (`let (res, buf) = stream.read(buf).await`)
/// and `write_all`s it back until EOF or an error, which closes only that
/// connection. There is no stop flag: the function runs until the process is
/// killed.
///
/// # Errors
///
/// Returns an error only if neither driver can be built, the listener cannot
/// be handed to monoio, or `accept` fails in a way that means the listening
/// socket itself is unusable (`EBADF`, `EINVAL`, `ENOTSOCK`, `EFAULT`).
/// Transient `accept` errors are logged to stderr and retried.
pub fn run_monoio_echo(listener: std::net::TcpListener) -> io::Result<()> {
    if monoio::utils::detect_uring() {
        match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .with_entries(URING_ENTRIES)
            .enable_timer()
            .build()
        {
            Ok(mut rt) => {
                eprintln!("monoio echo: using io_uring driver ({URING_ENTRIES} entries)");
                listener.set_nonblocking(false)?;
                return rt.block_on(monoio_accept_loop(listener));
            }
            Err(err) => {
                eprintln!("monoio echo: io_uring runtime setup failed ({err}); falling back");
            }
        }
    }
    eprintln!("monoio echo: using legacy (epoll) driver");
    let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()?;
    listener.set_nonblocking(true)?;
    rt.block_on(monoio_accept_loop(listener))
}

/// Accepts connections forever, spawning [`monoio_echo_conn`] for each.
async fn monoio_accept_loop(listener: std::net::TcpListener) -> io::Result<()> {
    // `from_std` must run inside the runtime (it registers with its driver).
    let listener = monoio::net::TcpListener::from_std(listener)?;
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                // Detached: dropping the JoinHandle does not cancel the task.
                drop(monoio::spawn(monoio_echo_conn(stream)));
            }
            Err(err) => match classify_accept_error(&err) {
                AcceptErrorAction::Retry => eprintln!("monoio echo: accept failed: {err}"),
                AcceptErrorAction::Backoff => {
                    eprintln!("monoio echo: accept failed: {err}; backing off");
                    monoio::time::sleep(ACCEPT_BACKOFF).await;
                }
                AcceptErrorAction::Fatal => return Err(err),
            },
        }
    }
}

/// Echoes one connection until EOF or the first error.
async fn monoio_echo_conn(mut stream: monoio::net::TcpStream) {
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};

    // Best effort: a failure here only costs latency, not correctness.
    let _ = stream.set_nodelay(true);
    // monoio reads into the Vec's spare capacity starting at index 0 and sets
    // its length to the byte count, so `write_all` sends exactly what arrived.
    let mut buf: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    loop {
        buf.clear();
        let (res, b) = stream.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (res, b) = stream.write_all(buf).await;
        buf = b;
        if res.is_err() {
            return;
        }
    }
}
