//! Dropping a value with write-behind pending (INVARIANTS rule 5b: bytes a write accepted are
//! written).
//!
//! A `poll_write` that returned `Ready(n)` made the `n` bytes the value's responsibility. When
//! the value (a `File`, a stream, an owned write half) is dropped with such bytes not written
//! yet, its state and its fd owner move into a detached writer: a task of the runtime (one of
//! hoop's own, left out of `task_count`) that drives the writes to their end, in order, drops
//! their error (only `flush`/`close` report errors), then closes the fd (after shutting down
//! the write direction, for a write half) and submits the close at once. The end of
//! `block_on` and the runtime's shutdown run the writers still pending, up to the shutdown
//! timeout; a writer still unfinished then is cancelled, closed and counted in the
//! `ShutdownReport` (`unfinished_writes`, `unfinished_write_bytes`).
//!
//! That needs the runtime whose ring runs the write in flight: the drop must happen on its
//! thread, inside its `block_on` or its shutdown. Elsewhere (a value dropped after `block_on`
//! returned, or on another thread) the writes are given up as before: a write in flight is
//! cancelled (on another thread it is left to its ring, its buffer with it), the staged bytes
//! are dropped, and the fd is closed behind them.

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::{Local, PollIo};
use crate::runtime::Writers;

impl PollIo<Local> {
    /// Whether bytes a write accepted are not known to be written yet. (A write is in flight
    /// whenever accepted bytes are pending: `drive_write` resubmits the rest of a short write
    /// at once, and staged bytes wait behind a write in flight.)
    fn writes_pending(&self) -> bool {
        self.write_op.is_some()
    }

    /// How many bytes the writes accepted and are not known to have written.
    fn pending_write_bytes(&self) -> u64 {
        let current = if self.write_op.is_some() {
            self.write_len.saturating_sub(self.write_done)
        } else {
            self.write_buf
                .as_ref()
                .map_or(0, |b| b.len().saturating_sub(self.write_done))
        };
        (current + self.write_staging.len()) as u64
    }
}

/// The end of a value that owns `fd` and the poll-based state `io` of its writes: `done`
/// closes the fd (and does what else the value's drop does). With writes pending, on the thread
/// whose runtime runs them and inside that runtime, a detached writer finishes them first and
/// then calls `done`; otherwise `io` is dropped (a write in flight is cancelled) and `done` runs
/// now. See the module docs.
pub(crate) fn finish_then(io: Option<Box<PollIo>>, fd: RawFd, done: impl FnOnce() + 'static) {
    let Some(mut io) = io else {
        return done();
    };
    let detachable = fd >= 0
        && io.writes_pending()
        && std::thread::current().id() == io.owner
        && crate::runtime::writers().is_some();
    if !detachable {
        drop(io);
        return done();
    }
    let Some(writers) = crate::runtime::writers() else {
        drop(io);
        return done();
    };
    // Nobody reads any more: a read in flight is cancelled now, its bytes dropped.
    io.read_op = None;
    io.read_buf = None;
    let writer = Finish {
        io: Some(io),
        fd,
        done: Some(Box::new(done)),
        writers,
    };
    // `spawn_writer` drops the writer unpolled if the runtime went away meanwhile (it cannot
    // here: `writers()` saw it on this thread); its drop then cancels and closes.
    crate::runtime::spawn_writer(writer);
}

/// A detached writer: drives `io`'s write-behind to its end, then runs `done` (the close).
struct Finish {
    /// `None` once the writes are over.
    io: Option<Box<PollIo>>,
    fd: RawFd,
    done: Option<Box<dyn FnOnce()>>,
    writers: Rc<Writers>,
}

impl Finish {
    /// Drops the state (cancelling what is still in flight), runs `done` and submits what that
    /// queued (the close goes out now, not at the ring's next turn).
    fn end(&mut self) {
        self.io = None;
        if let Some(done) = self.done.take() {
            done();
        }
        if let Some(d) = hoop_driver::Driver::current() {
            d.submit_queued();
        }
    }
}

impl Future for Finish {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if let Some(io) = &mut this.io {
            // Ready once nothing is in flight: every byte written, or an error (kept in the
            // state, and dropped with it: nobody is left to report it to).
            std::task::ready!(io.drive_write(this.fd, cx));
        }
        this.end();
        Poll::Ready(())
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        // Dropped before the end: the runtime shut down past its timeout.
        if let Some(io) = &self.io {
            if io.writes_pending() {
                self.writers.unfinished(io.pending_write_bytes());
            }
        }
        self.end();
    }
}
