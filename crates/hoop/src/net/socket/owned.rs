//! The owned socket: its fd and home, options and addresses, connect, shutdown and close.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use hoop_driver::error::cvt_libc;
use hoop_driver::{op, Home, Op, SockAddr};

use super::deadline::{run, Dl};

/// An owned socket. Dropping it closes the fd through the ring (`IORING_OP_CLOSE`, submitted on
/// this tick) or with `close(2)` outside a runtime.
#[derive(Debug)]
pub(crate) struct Socket {
    /// What receives whose futures were dropped left for the next one (`kept`).
    pub(super) kept: crate::net::kept::Kept,
    pub(super) fd: Option<OwnedFd>,
    /// The driver whose SQ may hold SQEs naming the fd: the fd leaves hoop only once they
    /// are submitted, else a reused fd number would get them (see [`Home`]).
    pub(super) home: Option<Home>,
    /// Whether [`send_file`](Self::send_file) made the fd non-blocking already.
    pub(super) nonblocking: std::sync::atomic::AtomicBool,
    /// This socket's owned-buffer sends on the ring (queued or in flight): while there is one,
    /// the next send queues behind it rather than going inline, so bytes keep their order
    /// (`crate::send_path`).
    pub(super) ring_sends: std::sync::atomic::AtomicU32,
}

impl Socket {
    pub(crate) fn from_fd(fd: OwnedFd) -> Socket {
        Socket {
            kept: Default::default(),
            fd: Some(fd),
            home: Home::current(),
            nonblocking: std::sync::atomic::AtomicBool::new(false),
            ring_sends: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// A new socket through the ring (`IORING_OP_SOCKET`).
    pub(crate) async fn new(domain: i32, ty: i32) -> io::Result<Socket> {
        let fd = Op::new(op::Socket::new(domain, ty, 0)).await?;
        Ok(Socket::from_fd(fd))
    }

    /// A new socket with `socket(2)`, for the synchronous constructors (`bind`).
    pub(crate) fn new_sync(domain: i32, ty: i32) -> io::Result<Socket> {
        // SAFETY: socket(2) has no memory-safety preconditions.
        let fd = cvt_libc(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: socket returned a new fd nothing else owns.
        Ok(Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// What dropped receives left for the next one.
    pub(crate) fn kept(&self) -> &crate::net::kept::Kept {
        &self.kept
    }

    /// Moves the fd (and its home) out into a new `Socket`, leaving this one empty (its drop
    /// then closes nothing): for the drops and conversions of types that have a `Drop` of their
    /// own. Receives parked by dropped calls go with it (a split stream's halves adopt them;
    /// a detached writer cancels them when it drops the socket, ahead of the close).
    pub(crate) fn take(&mut self) -> Socket {
        Socket {
            kept: std::mem::take(&mut self.kept),
            fd: self.fd.take(),
            home: self.home.take(),
            nonblocking: std::sync::atomic::AtomicBool::new(
                self.nonblocking.load(std::sync::atomic::Ordering::Relaxed),
            ),
            // `&mut self`: no send future borrows this socket, none of its sends is counted.
            ring_sends: std::sync::atomic::AtomicU32::new(0),
        }
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    pub(crate) fn set_opt<T>(&self, level: i32, name: i32, value: T) -> io::Result<()> {
        // SAFETY: passes a pointer to a live `T` and its exact size.
        let r = unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                (&value as *const T).cast(),
                mem::size_of::<T>() as libc::socklen_t,
            )
        };
        cvt_libc(r).map(drop)
    }

    pub(crate) fn get_opt<T: Copy>(&self, level: i32, name: i32) -> io::Result<T> {
        let mut value = mem::MaybeUninit::<T>::zeroed();
        let mut len = mem::size_of::<T>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `value`.
        let r = unsafe {
            libc::getsockopt(self.raw(), level, name, value.as_mut_ptr().cast(), &mut len)
        };
        cvt_libc(r)?;
        // SAFETY: zero-initialised, then (partly) written by the kernel: a valid `T` for the
        // integer types this is used with.
        Ok(unsafe { value.assume_init() })
    }

    pub(crate) fn bind(&self, addr: &SockAddr) -> io::Result<()> {
        // SAFETY: the address pointer and length describe a live sockaddr.
        cvt_libc(unsafe { libc::bind(self.raw(), addr.as_ptr(), addr.len()) }).map(drop)
    }

    /// Listens; keeps a descriptor in reserve for refusing clients past the limit (`refuse`).
    pub(crate) fn listen(&self, backlog: i32) -> io::Result<()> {
        crate::net::refuse::keep_reserve();
        // SAFETY: listen(2) has no memory-safety preconditions.
        cvt_libc(unsafe { libc::listen(self.raw(), backlog) }).map(drop)
    }

    pub(crate) fn local_addr(&self) -> io::Result<SockAddr> {
        self.name(libc::getsockname)
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SockAddr> {
        self.name(libc::getpeername)
    }

    fn name(
        &self,
        f: unsafe extern "C" fn(i32, *mut libc::sockaddr, *mut libc::socklen_t) -> i32,
    ) -> io::Result<SockAddr> {
        let mut addr = SockAddr::empty();
        let mut len = addr.len();
        // SAFETY: the kernel writes at most `len` bytes into the address storage.
        cvt_libc(unsafe { f(self.raw(), addr.as_mut_ptr(), &mut len) })?;
        Ok(addr.with_len(len))
    }

    pub(crate) async fn connect(&self, addr: SockAddr) -> io::Result<()> {
        self.connect_until(addr, None).await
    }

    pub(crate) async fn connect_until(&self, addr: SockAddr, dl: Dl) -> io::Result<()> {
        run(op::Connect::new(self.raw(), addr), dl).await
    }

    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        Op::new(op::Shutdown::new(self.raw(), how)).await
    }

    /// `shutdown(2)` now, with a system call (a dropped write half's, which cannot wait).
    /// Errors (a peer already gone) are of no use there and ignored.
    pub(crate) fn shutdown_now(&self, how: i32) {
        // SAFETY: shutdown(2) on an fd `self` keeps open; no pointers.
        let _ = unsafe { libc::shutdown(self.raw(), how) };
    }

    /// Closes the socket through the ring and waits for the result.
    pub(crate) async fn close(mut self) -> io::Result<()> {
        self.kept.clear();
        match self.fd.take() {
            Some(fd) if self.home.as_ref().is_some_and(|h| !h.is_here()) => {
                // Another thread's ring may hold SQEs naming the fd: it closes the fd behind
                // them.
                Home::close(self.home.as_ref(), fd);
                Ok(())
            }
            Some(fd) => Op::new(op::Close::new(fd)).await,
            None => Ok(()),
        }
    }

    /// Gives the fd up, after every SQE naming it was submitted (see [`Home::release`]).
    pub(crate) fn into_owned(mut self) -> OwnedFd {
        self.kept.clear();
        let fd = self.fd.take().expect("socket fd present until drop");
        Home::release(self.home.as_ref(), fd)
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd stays open as long as `self` (it is only taken by value).
        unsafe { BorrowedFd::borrow_raw(self.raw()) }
    }
}

impl IntoRawFd for Socket {
    fn into_raw_fd(self) -> RawFd {
        self.into_owned().into_raw_fd()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // The poll-based traits' state went first (the stream types' drops: a write-behind
        // finished by a detached writer that drops this socket after it, or cancelled before
        // it), so the close queues behind their operations; so do the cancels of receives
        // parked by dropped calls.
        self.kept.clear();
        if let Some(fd) = self.fd.take() {
            Home::close(self.home.as_ref(), fd);
        }
    }
}
