//! How an fd owned on a driver leaves hoop: closed through the ring behind the SQEs that may
//! name it, or sent to its home driver from another thread (see [`crate::home`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{Driver, Engine, LOCAL};
use crate::home::Home;
use crate::lifecycle::Lifecycle;
use crate::op::Close;
use crate::sys::uring::UringOp;

impl Driver {
    /// The driver on this thread whose home `home` is (the current one, or one built here
    /// whose runtime is not running now), if any.
    pub(crate) fn local_with_home(home: &Home) -> Option<Driver> {
        if let Some(d) = Driver::current().filter(|d| d.home_ref().same(home)) {
            return Some(d);
        }
        LOCAL.with(|l| {
            l.borrow()
                .iter()
                .filter_map(|w| w.upgrade())
                .find(|s| s.home.same(home))
                .map(|shared| Driver { shared })
        })
    }

    /// This driver's [`Home`]: where fds owned here are sent to be closed from other threads.
    pub fn home(&self) -> Home {
        self.shared.home.clone()
    }

    pub(crate) fn home_ref(&self) -> &Home {
        &self.shared.home
    }

    /// Closes `fd` through the driver, without waiting (used by `Drop` of fd owners). With
    /// io_uring the close is queued in the SQ, behind any operation already queued on the fd,
    /// and submitted on this tick; if the ring has no room, the fd is closed at once with
    /// `close(2)` after the queued SQEs are submitted (none then reaches a reused number). The
    /// epoll driver forgets the fd's registration and closes it at once.
    pub fn close_detached(&self, fd: OwnedFd) {
        let mut op = Close::new(fd);
        let closed = match self.shared.engine.try_borrow_mut() {
            Ok(mut d) => match &mut *d {
                // IOPOLL rings refuse IORING_OP_CLOSE: close(2) at once.
                Engine::Uring(u) if u.is_iopoll() => false,
                Engine::Uring(u) => match u.push(op.create_entry(), false, Lifecycle::Submitted) {
                    Ok(user_data) => {
                        // Nobody waits for this result: the slot owns the op from the start,
                        // and it is submitted on this tick, even if tasks are still ready.
                        u.detach(user_data, Box::new(op));
                        return;
                    }
                    Err(_) => {
                        let _ = u.turn(false, None);
                        false
                    }
                },
                Engine::Epoll(e) => {
                    e.forget_fd(op.fd);
                    false
                }
            },
            Err(_) => false,
        };
        if !closed {
            // The op owns the fd and no kernel took it: dropping it closes it with close(2).
            drop(op);
        }
    }
}

impl Home {
    /// The home of the driver current on this thread, if any (taken when an fd owner is made).
    pub fn current() -> Option<Home> {
        Driver::current().map(|d| d.home())
    }

    /// Whether this home's driver is the one current on this thread.
    pub fn is_here(&self) -> bool {
        Driver::current().is_some_and(|d| d.home_ref().same(self))
    }

    /// Closes `fd`, owned by something made on `home`'s driver (or on none), so that no SQE
    /// queued there can reach the number after it is reused (see the module docs).
    pub fn close(home: Option<&Home>, fd: OwnedFd) {
        let Some(home) = home else {
            match Driver::current() {
                Some(d) => d.close_detached(fd),
                None => drop(fd),
            }
            return;
        };
        if let Some(d) = Driver::local_with_home(home) {
            if d.is_current() {
                d.close_detached(fd);
            } else {
                // The home runtime is not running: submit what its SQ holds, then close.
                d.submit_queued();
                drop(fd);
            }
        } else if home.is_open() {
            home.send(fd);
        } else {
            drop(fd);
        }
    }

    /// Gives `fd` up (into_raw_fd, into_std): on the home thread after ending the operations
    /// whose cancel is queued (the receives a dropped call parked on it: none may take bytes
    /// from the new owner) and submitting every queued SQE; elsewhere as a `dup` of it, the
    /// original going home to be closed behind its SQEs.
    pub fn release(home: Option<&Home>, fd: OwnedFd) -> OwnedFd {
        let Some(home) = home else {
            if let Some(d) = Driver::current() {
                d.cancel_queued_now();
            }
            return fd;
        };
        if let Some(d) = Driver::local_with_home(home) {
            d.cancel_queued_now();
            return fd;
        }
        if !home.is_open() {
            return fd;
        }
        // SAFETY: F_DUPFD_CLOEXEC on an fd we own; the result is a new fd or -1.
        let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            // No fd to spare (EMFILE): hand out the original; the home ring may still hold
            // an SQE naming it (documented on the conversions).
            return fd;
        }
        home.send(fd);
        // SAFETY: fcntl returned a new fd that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(dup) }
    }
}
