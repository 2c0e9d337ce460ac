//! How a stream socket sends on io_uring (DESIGN.md, "The send path").
//!
//! A send that finds room in the socket needs no ring turn: on the io_uring driver a socket's
//! send can be tried inline, `send(2)` with `MSG_DONTWAIT | MSG_NOSIGNAL` on the submitting
//! thread ([`hoop_driver::Driver::try_send`]), with only what would block (`EAGAIN`) or what a
//! short send left going to the ring as a send operation, which waits for room in the kernel.
//! Bytes never reorder: a socket tries inline only while none of its sends is on the ring
//! (queued or in flight). The epoll driver's send already runs inside the submit: nothing
//! changes there. Measured (DESIGN.md): the traits' writes of a socket go to the ring and
//! stage behind the send in flight (the `staging` path: everything written during a ring turn
//! leaves as one send, a userspace Nagle of at most 16 KiB, 3.5-4.5x epoll in the chat where
//! inline-first measured 0.9-1.25x); the staged bytes leave when the send ahead of them
//! completes, without the value being polled again, because a pusher task owns the socket's
//! write direction while a send is in flight (`poll_io::push`). Owned-buffer writes stay on
//! the ring (an inline send costs a system call where ring sends share one `io_uring_enter`,
//! and it made echo dearer and fan-out no faster).
//!
//! Three knobs, read once per process, choose the path, for measuring the alternatives side by
//! side (knobs, not an API): `HOOP_SEND_OWNED` for owned-buffer writes (`write`, `write_all`
//! of streams and owned write halves): `ring` (every send on the ring: the default) or
//! `inline` (inline first); `HOOP_SEND_PATH` for the I/O traits' writes (`poll_write`): `ring`
//! (ring sends, `Pending` while one is in flight, as before), `inline` (inline first, no
//! staging), `staging` (ring sends; bytes staged behind a send in flight), `adaptive` (the
//! default: `staging`, except that a socket whose writer answers, one write per flush, tries
//! the first write after a flush inline) or `both` (inline first, and staging behind a send
//! in flight); `HOOP_SEND_PUSH=off` leaves
//! the write direction with the value (no pusher: staged bytes wait for its next poll, as
//! before pushers; for measuring their cost). Tests choose a path per thread
//! ([`set_for_thread`]).

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The send path the knobs chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendPath {
    /// Owned-buffer sends are tried inline first (io_uring only).
    pub(crate) owned_inline: bool,
    /// The traits' sends are tried inline first (io_uring only).
    pub(crate) trait_inline: bool,
    /// A socket's `poll_write` stages bytes behind a send in flight (as a file's does).
    pub(crate) staging: bool,
    /// A socket's trait writes push themselves (`poll_io::push`): a pusher task sends what
    /// follows a send in flight without the value being polled again.
    pub(crate) push: bool,
    /// On the staging path, a socket whose writer answers (one write, then a flush: a
    /// request/response protocol, hyper's connections) tries the first write after a flush
    /// inline; a writer that writes several times per flush, or never flushes, stages as
    /// before.
    pub(crate) adaptive: bool,
}

/// The traits' path named `traits` (`HOOP_SEND_PATH`'s values): (`trait_inline`, `staging`,
/// `adaptive`); an unknown name is the default, `adaptive`.
fn trait_path(traits: Option<&str>) -> (bool, bool, bool) {
    match traits {
        Some("ring") => (false, false, false),
        Some("inline") => (true, false, false),
        Some("both") => (true, true, false),
        Some("staging") => (false, true, false),
        _ => (false, true, true),
    }
}

/// The process's send path (`HOOP_SEND_OWNED`, `HOOP_SEND_PATH`; unknown values mean the
/// defaults).
pub(crate) fn send_path() -> SendPath {
    static PATH: OnceLock<SendPath> = OnceLock::new();
    if let Some(p) = THREAD_PATH.with(std::cell::Cell::get) {
        return p;
    }
    *PATH.get_or_init(|| {
        let owned_inline = std::env::var("HOOP_SEND_OWNED").as_deref() == Ok("inline");
        let (trait_inline, staging, adaptive) =
            trait_path(std::env::var("HOOP_SEND_PATH").ok().as_deref());
        let push = std::env::var("HOOP_SEND_PUSH").as_deref() != Ok("off");
        SendPath {
            owned_inline,
            trait_inline,
            staging,
            push,
            adaptive,
        }
    })
}

thread_local! {
    /// A path chosen for this thread ([`set_for_thread`]), over the knobs.
    static THREAD_PATH: std::cell::Cell<Option<SendPath>> = const { std::cell::Cell::new(None) };
}

/// Chooses the send path of this thread's sends (tests: every path on both drivers), or with
/// `None` gives it back to the knobs. `owned` and `traits` are the knobs' values (`ring`,
/// `inline`; `ring`, `inline`, `staging`, `adaptive`, `both`).
pub fn set_for_thread(path: Option<(&str, &str)>) {
    let p = path.map(|(owned, traits)| {
        let (trait_inline, staging, adaptive) = trait_path(Some(traits));
        SendPath {
            owned_inline: owned == "inline",
            trait_inline,
            staging,
            push: std::env::var("HOOP_SEND_PUSH").as_deref() != Ok("off"),
            adaptive,
        }
    });
    THREAD_PATH.with(|t| t.set(p));
}

/// What an inline send did.
#[derive(Debug)]
pub(crate) enum Inline {
    /// Sent this many bytes (maybe fewer than asked: the rest would block).
    Sent(usize),
    /// Not tried, or the socket had no room: the ring sends.
    Ring,
    /// The send failed, as the ring's send would have.
    Failed(io::Error),
}

/// Tries to send `bufs` on the stream socket `fd` inline (see the module docs), if `enabled`
/// (`SendPath::owned_inline` or `trait_inline`). The caller guarantees that none of the
/// socket's sends is on the ring.
pub(crate) fn try_send(fd: RawFd, bufs: &[io::IoSlice<'_>], enabled: bool) -> Inline {
    if !enabled {
        return Inline::Ring;
    }
    let Some(driver) = hoop_driver::Driver::current() else {
        return Inline::Ring;
    };
    match driver.try_send(fd, bufs) {
        None => Inline::Ring,
        Some(Ok(n)) => Inline::Sent(n),
        Some(Err(e))
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted =>
        {
            Inline::Ring
        }
        Some(Err(e)) => Inline::Failed(e),
    }
}
