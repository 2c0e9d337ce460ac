//! Waiting on an epoll set of the program's own: [`Epoll`].
//!
//! For descriptors that arrive from elsewhere (a C library that hands out fds to watch,
//! thousands of them watched at once) rather than through hoop's sockets and files. On io_uring
//! with `IORING_OP_EPOLL_WAIT` (Linux 6.15) a wait is one operation on the ring; on an older
//! ring it waits for the set's fd to be readable and then takes the events with a
//! non-blocking `epoll_wait(2)`; on the epoll driver the set is nested in the driver's own.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use hoop_driver::error::cvt_libc;
use hoop_driver::{op, Op};

/// One event of a wait: the event bits (`libc::EPOLLIN`, ...) and the data the fd was added
/// with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The ready events (`EPOLLIN`, `EPOLLOUT`, `EPOLLERR`, `EPOLLHUP`, ...).
    pub events: u32,
    /// The value given to [`Epoll::add`] for the fd.
    pub data: u64,
}

/// An epoll set (`epoll_create1(EPOLL_CLOEXEC)`) that a task waits on with [`Epoll::wait`].
///
/// # Cancel safety
///
/// A [`wait`](Epoll::wait) dropped after the kernel took its events loses them for the fds
/// added with `EPOLLET` or `EPOLLONESHOT`; level-triggered fds report them again on the next
/// wait.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// A new, empty set.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory-safety preconditions.
        let fd = cvt_libc(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: epoll_create1 returned a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Watches `fd` for `events` (`EPOLL_CTL_ADD`); `data` comes back with its events.
    pub fn add(&self, fd: BorrowedFd<'_>, events: u32, data: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd.as_raw_fd(), events, data)
    }

    /// Changes what `fd` is watched for (`EPOLL_CTL_MOD`).
    pub fn modify(&self, fd: BorrowedFd<'_>, events: u32, data: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd.as_raw_fd(), events, data)
    }

    /// Stops watching `fd` (`EPOLL_CTL_DEL`).
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd.as_raw_fd(), 0, 0)
    }

    fn ctl(&self, op: i32, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: epoll_ctl reads one epoll_event on this stack frame, alive for the call.
        cvt_libc(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Waits until the set has events and returns up to `max_events` of them (at least one).
    pub async fn wait(&self, max_events: usize) -> io::Result<Vec<Event>> {
        let epfd = self.fd.as_raw_fd();
        loop {
            let events = Op::new(op::EpollWait::new(epfd, max_events)).await?;
            if !events.is_empty() {
                return Ok(events
                    .into_iter()
                    .map(|e| Event {
                        events: e.events,
                        data: e.u64,
                    })
                    .collect());
            }
            // A ring without `IORING_OP_EPOLL_WAIT` found none: wait for the set's fd.
            Op::new(op::PollOnce::new(epfd, libc::POLLIN as u32)).await?;
        }
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
