//! How a stream socket sends on io_uring (DESIGN.md, "The send path").
//!
//! A send that finds room in the socket needs no ring turn: on the io_uring driver a socket's
//! send is first tried inline, `send(2)` with `MSG_DONTWAIT | MSG_NOSIGNAL` on the submitting
//! thread ([`hoop_driver::Driver::try_send`]), and only what would block (`EAGAIN`) or what a
//! short send left goes to the ring as a send operation, which waits for room in the kernel.
//! Bytes never reorder: a socket tries inline only while none of its sends is on the ring
//! (queued or in flight). The epoll driver's send already runs inside the submit: nothing
//! changes there.
//!
//! `HOOP_SEND_PATH`, read once per process, chooses the path for measuring the alternatives
//! side by side (a knob, not an API): `ring` (every send on the ring, as before), `inline`
//! (inline first, no staging), `staging` (ring sends; a socket's `poll_write` stages bytes
//! behind a send in flight), `both` (inline first and staging: the default).

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The send path `HOOP_SEND_PATH` chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendPath {
    /// Sends are tried inline first (io_uring only).
    pub(crate) inline: bool,
    /// A socket's `poll_write` stages bytes behind a send in flight (as a file's does).
    pub(crate) staging: bool,
}

/// The process's send path (`HOOP_SEND_PATH`; unknown values mean the default).
pub(crate) fn send_path() -> SendPath {
    static PATH: OnceLock<SendPath> = OnceLock::new();
    *PATH.get_or_init(|| {
        let (inline, staging) = match std::env::var("HOOP_SEND_PATH").as_deref() {
            Ok("ring") => (false, false),
            Ok("inline") => (true, false),
            Ok("staging") => (false, true),
            _ => (true, true),
        };
        SendPath { inline, staging }
    })
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

/// Tries to send `bufs` on the stream socket `fd` inline (see the module docs). The caller
/// guarantees that none of the socket's sends is on the ring.
pub(crate) fn try_send(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> Inline {
    if !send_path().inline {
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
