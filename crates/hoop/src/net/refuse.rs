//! Past the descriptor limit a new client is refused (its connection closed at once), never
//! left waiting unanswered.
//!
//! `accept(2)` (and io_uring's accept into a plain descriptor) fails with `EMFILE`/`ENFILE`
//! *before* it takes the connection off the listen queue. The client's `connect` has already
//! succeeded (the kernel completed the handshake into the backlog), so without this it would
//! wait, unanswered, for as long as the process stays at its limit. The remedy libev and libuv
//! use: keep one descriptor in reserve (`/dev/null`, opened when a listener is made); when an
//! accept fails for want of descriptors, close the reserve, accept the waiting connections one
//! at a time and close each at once (with `SO_LINGER` 0, so the client reads a reset rather than
//! a polite end of stream), then take the reserve back. Each refusal is counted
//! ([`refused_connections`]); the accept still returns its error, so the application sees (and
//! logs) that it is at its limit.
//!
//! A direct accept (`TcpListener::incoming_direct` on io_uring) needs none of this: the kernel
//! takes the connection first, and when the ring's file table is full it closes it and the
//! accept ends with `ENFILE`, which is counted here as one refusal.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The descriptor kept in reserve, shared by every thread of the process (descriptors are).
static RESERVE: Mutex<Option<OwnedFd>> = Mutex::new(None);
/// Connections refused so far in this process.
static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Most connections refused after one failed accept (the next failure refuses more).
const MAX_PER_FAILURE: usize = 256;

/// Connections this process refused because it had no descriptor for them: accepted and closed
/// at once after an accept failed with `EMFILE` or `ENFILE` (or, on a direct accept, closed by
/// the kernel because the ring's file table was full). Counted across every listener and
/// thread.
pub fn refused_connections() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// Makes sure a descriptor is in reserve (called when a listener is made, and by tests that
/// count descriptors, so that the reserve is counted before their window opens).
pub fn keep_reserve() {
    let Ok(mut reserve) = RESERVE.lock() else {
        return;
    };
    if reserve.is_none() {
        *reserve = open_reserve();
    }
}

fn open_reserve() -> Option<OwnedFd> {
    // SAFETY: the path is NUL-terminated; `open` returns a new descriptor or -1.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    // SAFETY: `fd` was just opened and is owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `e` says the process (or system) ran out of descriptors.
pub(crate) fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// An accept on `listener` failed with `e`: if for want of descriptors, refuses the
/// connections waiting in its queue (at most [`MAX_PER_FAILURE`]) with the reserve descriptor.
/// Returns how many were refused.
pub(crate) fn refuse_waiting(listener: RawFd, e: &io::Error) -> usize {
    if !out_of_descriptors(e) {
        return 0;
    }
    let Ok(mut reserve) = RESERVE.lock() else {
        return 0;
    };
    // Closing the reserve frees the one descriptor each accept below needs for a moment.
    drop(reserve.take());
    let refused = nonblocking(listener, || accept_and_close(listener)).unwrap_or(0);
    *reserve = open_reserve();
    REFUSED.fetch_add(refused as u64, Ordering::Relaxed);
    refused
}

/// Accepts the connections waiting on the non-blocking `listener` (at most
/// [`MAX_PER_FAILURE`]) and closes each at once, with a reset; returns how many.
fn accept_and_close(listener: RawFd) -> usize {
    let mut refused = 0;
    while refused < MAX_PER_FAILURE {
        // SAFETY: null address pointers are allowed; `accept4` returns a new descriptor or -1.
        let fd = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        if fd < 0 {
            break;
        }
        // SAFETY: `fd` was just accepted and is owned by nothing else.
        let conn = unsafe { OwnedFd::from_raw_fd(fd) };
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: `linger` is a valid `struct linger` for the call, its size passed with it.
        // Best effort: without it the client reads end of stream instead of a reset.
        let _ = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        drop(conn);
        refused += 1;
    }
    refused
}

/// A direct accept ended with `e`: `ENFILE` means the kernel closed the connection it took
/// because the ring's file table was full; it is counted as refused.
pub(crate) fn count_direct_failure(e: &io::Error) {
    if e.raw_os_error() == Some(libc::ENFILE) {
        REFUSED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `f` with `listener` in non-blocking mode (restored after; `None` if it cannot be set),
/// so an accept that finds the queue empty returns `EAGAIN` rather than waiting.
fn nonblocking<T>(listener: RawFd, f: impl FnOnce() -> T) -> Option<T> {
    // SAFETY: F_GETFL has no memory-safety preconditions.
    let flags = unsafe { libc::fcntl(listener, libc::F_GETFL) };
    if flags < 0 {
        return None;
    }
    let set = flags & libc::O_NONBLOCK == 0;
    if set {
        // SAFETY: F_SETFL on the listener's own flags has no memory-safety preconditions.
        let r = unsafe { libc::fcntl(listener, libc::F_SETFL, flags | libc::O_NONBLOCK) };
        if r != 0 {
            // Not non-blocking: refuse nothing rather than risk waiting in `accept`.
            return None;
        }
    }
    let out = f();
    if set {
        // SAFETY: as above; the flags read before.
        let _ = unsafe { libc::fcntl(listener, libc::F_SETFL, flags) };
    }
    Some(out)
}
