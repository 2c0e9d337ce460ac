//! Dropping a value with write-behind pending (DESIGN.md, "Writes accepted are written": bytes
//! a write accepted are written).
//!
//! A `poll_write` that returned `Ready(n)` made the `n` bytes the value's responsibility. When
//! the value (a `File`, a stream, an owned write half) is dropped with such bytes not written
//! yet, its state and its fd owner move into a detached writer: a task of the runtime (one of
//! hoop's own, left out of `task_count`) that drives the writes to their end, in order, counts
//! their error (only `flush`/`close` return errors; a dropped value's is counted in
//! `ShutdownReport::failed_writes`, and a file's said once on stderr), then closes the fd (after shutting down
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
//!
//! `hoop::shared`'s values have no runtime of their own but need none: their operations are
//! `Send` and woken by the rings (their reaper, or tokio's reactor). A dropped one with writes
//! pending becomes a self-driven writer ([`finish_shared`]): the state is polled by whoever
//! wakes it, on that thread, until its writes are over; it holds the fd's `Arc` (in its
//! operations) until then. There is no timeout: a write that cannot finish stays in flight
//! until the rings shut down, which cancels and reaps it (counted in their `ShutdownReport` as
//! cancelled).

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::ops::Ops;
use super::PollIo;
use crate::runtime::Writers;

impl<O: Ops> PollIo<O> {
    /// Whether bytes a write accepted are not known to be written yet. (A write is in flight
    /// whenever accepted bytes are pending: `drive_write` resubmits the rest of a short write
    /// at once, and staged bytes wait behind a write in flight, with the value or with its
    /// pusher.) On the owner's thread only.
    fn writes_pending(&self) -> bool {
        self.w.write_op.is_some() || self.pushed.is_some()
    }

    /// How many bytes the writes accepted and are not known to have written. On the owner's
    /// thread only.
    fn pending_write_bytes(&self) -> u64 {
        let pushed = self
            .pushed
            .as_ref()
            .map_or(0, |p| p.0.shared.borrow().w.pending_bytes());
        (self.w.pending_bytes() + pushed) as u64
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
    let here = super::this_thread() == io.owner;
    if here {
        // A pusher's writes come back to the value: its detached writer drives them (and
        // spawns no pusher: only detached writers run at `block_on`'s end and at shutdown).
        io.no_push = true;
        if let Some(p) = io.pushed.take() {
            super::push::take_back(&p.0.shared, &mut io.w);
        }
    }
    let detachable = fd >= 0 && here && io.writes_pending() && crate::runtime::writers().is_some();
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
            // Ready once nothing is in flight: every byte written, or an error.
            std::task::ready!(io.drive_write(this.fd, cx));
            if let Some(e) = io.w.write_err.take() {
                // Nobody is left to return it to, but a write error must not vanish (a full
                // disk's ENOSPC cut the file short): it is counted in the `ShutdownReport`,
                // and a file's, which loses data on disk, is said once on stderr.
                let lost = io.w.write_err_bytes as u64;
                this.writers.failed(lost);
                if io.kind == super::Kind::File {
                    say_dropped_file_error_once(&e, lost);
                }
            }
        }
        this.end();
        Poll::Ready(())
    }
}

/// Says on stderr, once per process, that a `File` dropped with writes pending lost bytes to
/// an error: the program never flushed or closed it, so this line and
/// `ShutdownReport::failed_writes` are the only traces left.
fn say_dropped_file_error_once(e: &std::io::Error, lost: u64) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "hoop: a File dropped with writes pending failed ({e}); {lost} bytes not written \
             (flush or close a File to get its write errors; later ones are only counted in \
             ShutdownReport::failed_writes)"
        );
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

/// The end of a `hoop::shared` value with the poll-based state `io` of fd `fd` (its operations
/// hold the fd's `Arc`, so the fd stays open while they run): with writes pending, a
/// self-driven writer finishes them (see the module docs); otherwise `io` is dropped now.
pub(crate) fn finish_shared<O>(io: Option<Box<PollIo<O>>>, fd: RawFd)
where
    O: Ops + Send + 'static,
    O::Read: Send,
    O::Write: Send,
    O::Shutdown: Send,
{
    let Some(mut io) = io else {
        return;
    };
    if O::THREAD_BOUND || !io.writes_pending() {
        return;
    }
    io.read_op = None;
    io.read_buf = None;
    let writer = std::future::poll_fn(move |cx| io.drive_write(fd, cx));
    let driven = std::sync::Arc::new(SelfDriven {
        future: std::sync::Mutex::new(Some(Box::pin(writer))),
        again: std::sync::atomic::AtomicBool::new(false),
    });
    driven.run();
}

/// A future polled by its own waker, on the thread that wakes it, until it completes.
struct SelfDriven {
    future: std::sync::Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    /// A wake came since the last poll began.
    again: std::sync::atomic::AtomicBool,
}

impl SelfDriven {
    fn run(self: std::sync::Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        self.again.store(true, SeqCst);
        loop {
            // Polled elsewhere right now: that poller sees `again` once it lets go, and polls
            // once more.
            let Ok(mut slot) = self.future.try_lock() else {
                return;
            };
            self.again.store(false, SeqCst);
            let Some(future) = slot.as_mut() else {
                return;
            };
            let waker = std::task::Waker::from(self.clone());
            let mut cx = Context::from_waker(&waker);
            if future.as_mut().poll(&mut cx).is_ready() {
                // The state goes with the future: its operations' fd `Arc`s close the fd when
                // they are the last.
                *slot = None;
                return;
            }
            drop(slot);
            if !self.again.load(SeqCst) {
                return;
            }
        }
    }
}

impl std::task::Wake for SelfDriven {
    fn wake(self: std::sync::Arc<Self>) {
        self.run();
    }
}
