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
    /// Whether `closes` may hold something (skips the lock on every turn).
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

    /// Whether fds were sent home since the last [`Home::take`] (one load: the home
    /// driver asks every turn).
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.0.pending.load(Ordering::Acquire)
    }

    /// The fds sent home since the last call (called by the home driver each turn).
    pub(crate) fn take(&self) -> Vec<OwnedFd> {
        if !self.0.pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.0.closes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The home driver shut down: later closes happen at once; queued ones now.
    pub(crate) fn shut(&self) {
        self.0.open.store(false, Ordering::Release);
        self.take_all();
    }

    fn take_all(&self) {
        let fds = std::mem::take(&mut *self.0.closes.lock().unwrap_or_else(|e| e.into_inner()));
        drop(fds);
    }
}
