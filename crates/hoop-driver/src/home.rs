//! The home of an fd: the driver whose SQ may still hold SQEs that name it.
//!
//! An fd leaves hoop (closed, or handed out by `into_raw_fd`/`into_std`) only after every SQE
//! naming it has been submitted; otherwise a reused number gets stale I/O. Each fd owner
//! (`hoop::net` sockets, `hoop::fs::File`) keeps the [`Home`] of the driver that was current when
//! it was made:
//! - on the home thread, a close goes through the ring behind the queued SQEs
//!   ([`Driver::close_detached`](crate::Driver::close_detached)), and a conversion submits the
//!   queued SQEs first;
//! - on another thread (the owner is `Send`), a close is sent home: the home driver closes it
//!   through its ring on its next turn (woken by its eventfd), and a conversion hands out a
//!   `dup` of the fd while the original goes home to be closed there;
//! - once the home driver is gone, nothing of it can be queued, and fds are closed at once.
//!
//! The same queue takes values that must be dropped on the home thread
//! ([`Home::send_drop`]): what a socket, file or half owns there (the `Rc`s of its operations
//! in flight, its pusher's state, the receives a dropped call parked) when the value is dropped
//! on another thread. The home driver drops them on its next turn, or at its shutdown; sent
//! after the shutdown, nothing can drop them safely and they are leaked (the kernel may still
//! own their memory, so that is the safe choice).

use std::any::Any;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::notifier::Notifier;

/// A `Send + Sync` handle to a driver's queue of fds to close, usable from any thread.
#[derive(Debug, Clone)]
pub struct Home(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// fds sent home from other threads, closed by the home driver's next turn.
    closes: Mutex<Vec<OwnedFd>>,
    /// Values sent home from other threads, dropped by the home driver's next turn.
    drops: Mutex<Vec<HomeBound>>,
    /// Whether `closes` or `drops` may hold something (skips the locks on every turn).
    pending: AtomicBool,
    /// Whether the home driver still runs (cleared at its shutdown).
    open: AtomicBool,
    /// The home driver's wake-up eventfd; weak, so fd owners that outlive the driver do not
    /// keep it open.
    wake_fd: Weak<OwnedFd>,
}

impl Home {
    pub(crate) fn new(wake_fd: &Arc<OwnedFd>) -> Home {
        Home(Arc::new(Inner {
            closes: Mutex::new(Vec::new()),
            drops: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            open: AtomicBool::new(true),
            wake_fd: Arc::downgrade(wake_fd),
        }))
    }

    pub(crate) fn same(&self, other: &Home) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Whether the home driver still runs.
    pub(crate) fn is_open(&self) -> bool {
        self.0.open.load(Ordering::Acquire)
    }

    /// Sends `fd` home, to be closed by the home driver's next turn (which it wakes).
    pub(crate) fn send(&self, fd: OwnedFd) {
        self.0
            .closes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(fd);
        self.0.pending.store(true, Ordering::Release);
        if let Some(fd) = self.0.wake_fd.upgrade() {
            Notifier { fd }.notify();
        }
        // The driver may have shut down meanwhile: then nobody will take it, so take it back.
        if !self.0.open.load(Ordering::Acquire) {
            self.take_all();
        }
    }

    /// Sends `value` home, to be dropped by the home driver's next turn on its thread (which
    /// it wakes), or at its shutdown; if the driver has shut down, `value` is leaked.
    ///
    /// # Safety
    ///
    /// `value` may be `!Send` only because of what it shares with the home thread (`Rc`s of
    /// that thread's driver and tasks): nothing of it may be touched on this thread after the
    /// call, and nothing it holds may belong to a third thread.
    pub unsafe fn send_drop<T: 'static>(&self, value: T) {
        let bound = HomeBound(Box::new(value));
        if !self.is_open() {
            std::mem::forget(bound);
            return;
        }
        self.0
            .drops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(bound);
        self.0.pending.store(true, Ordering::Release);
        if let Some(fd) = self.0.wake_fd.upgrade() {
            Notifier { fd }.notify();
        }
        // The driver may have shut down meanwhile: nobody will drop it there, and this thread
        // must not: leak what is queued.
        if !self.0.open.load(Ordering::Acquire) {
            self.leak_drops();
        }
    }

    /// Whether fds were sent home since the last [`Home::take`] (one load: the home
    /// driver asks every turn).
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.0.pending.load(Ordering::Acquire)
    }

    /// The fds and the values sent home since the last call (called by the home driver each
    /// turn, on its thread: it closes the fds and drops the values).
    pub(crate) fn take(&self) -> (Vec<OwnedFd>, Vec<HomeBound>) {
        if !self.0.pending.swap(false, Ordering::AcqRel) {
            return (Vec::new(), Vec::new());
        }
        let fds = std::mem::take(&mut *self.0.closes.lock().unwrap_or_else(|e| e.into_inner()));
        let drops = std::mem::take(&mut *self.0.drops.lock().unwrap_or_else(|e| e.into_inner()));
        (fds, drops)
    }

    /// The home driver shut down (on its thread): later closes happen at once; queued ones
    /// now, and the values queued are dropped here.
    pub(crate) fn shut(&self) {
        self.0.open.store(false, Ordering::Release);
        self.take_all();
        let drops = std::mem::take(&mut *self.0.drops.lock().unwrap_or_else(|e| e.into_inner()));
        drop(drops);
    }

    /// Leaks the values queued (called off the home thread, once it shut down).
    fn leak_drops(&self) {
        let drops = std::mem::take(&mut *self.0.drops.lock().unwrap_or_else(|e| e.into_inner()));
        std::mem::forget(drops);
    }

    fn take_all(&self) {
        let fds = std::mem::take(&mut *self.0.closes.lock().unwrap_or_else(|e| e.into_inner()));
        drop(fds);
    }
}

/// A value sent home to be dropped there ([`Home::send_drop`]).
pub(crate) struct HomeBound(#[allow(dead_code)] Box<dyn Any>);

impl std::fmt::Debug for HomeBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HomeBound")
    }
}

// SAFETY: a `HomeBound` is made by `Home::send_drop`, whose caller promises that the value's
// `!Send` parts belong to the home thread only; it is dropped only on that thread (by the home
// driver's turn or shutdown) or leaked, never touched anywhere else.
unsafe impl Send for HomeBound {}
