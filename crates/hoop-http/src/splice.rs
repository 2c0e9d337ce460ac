//! Big files without copying through user space: a splice from the file into a pipe, then from
//! the pipe into the socket (a direct descriptor's slot, or its fd), a pipe's worth at a time:
//! `IORING_OP_SPLICE` on io_uring, splice(2) on the epoll driver (file -> pipe on its blocking
//! pool, pipe -> socket when the socket is writable). The page cache's pages travel by reference; only the receiver copies them (on
//! loopback the receiving socket's copy is the only one), where read + send copies the body
//! twice more (into user memory, then into the socket).
//!
//! Each thread keeps a few pipes (grown to 1 MiB with `F_SETPIPE_SZ` where allowed). A pipe is
//! returned to the pool only empty; one that held bytes when its response failed is closed.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use hoop::driver::op::{self, Target};
use hoop::driver::Op;
use hoop::net::DirectTcpStream;

use super::deadline::Timer;

/// Pipes kept per thread for later responses.
const POOL_MAX: usize = 64;
/// The pipe size asked for (capped by /proc/sys/fs/pipe-max-size for unprivileged processes).
const PIPE_BYTES: i32 = 1 << 20;

/// A pipe: read end, write end, capacity.
#[derive(Debug)]
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    cap: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two fds into the valid array.
        hoop::driver::error::cvt_libc(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
        // SAFETY: both fds are new and owned by nothing else.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on an fd we own; failure leaves the default size.
        let set = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
        let cap = if set > 0 {
            set
        } else {
            // SAFETY: fcntl on an fd we own; it only reads the pipe's size.
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) }
        };
        Ok(Pipe {
            r,
            w,
            cap: usize::try_from(cap).unwrap_or(64 * 1024).max(4096),
        })
    }
}

/// One thread's pipes.
#[derive(Debug, Default)]
pub struct PipePool {
    free: RefCell<Vec<Pipe>>,
}

impl PipePool {
    fn take(&self) -> io::Result<Pipe> {
        match self.free.borrow_mut().pop() {
            Some(p) => Ok(p),
            None => Pipe::new(),
        }
    }

    fn give(&self, p: Pipe) {
        let mut free = self.free.borrow_mut();
        if free.len() < POOL_MAX {
            free.push(p);
        }
    }
}

/// The socket as an operation target: its slot, or its fd.
fn target(stream: &DirectTcpStream) -> Option<Target> {
    match stream.slot() {
        Some(slot) => Some(Target::Fixed(slot)),
        None => stream.as_tcp_stream().map(|s| Target::Fd(s.as_raw_fd())),
    }
}

/// Sends `len` bytes of `file` from `start` to `stream` through a pipe, each step under the
/// deadline `idle` from now. False if anything failed (the connection must close: the promised
/// length cannot be kept).
pub async fn send_file(
    pool: &PipePool,
    stream: &DirectTcpStream,
    file: &hoop::fs::File,
    start: u64,
    len: u64,
    timer: &Timer,
    idle: std::time::Duration,
) -> bool {
    let (Some(sock), Ok(pipe)) = (target(stream), pool.take()) else {
        return false;
    };
    let (mut filled, mut sent) = (0u64, 0u64);
    while sent < len {
        if filled == sent {
            let want = (pipe.cap as u64).min(len - filled) as u32;
            timer.set(Instant::now() + idle);
            let moved = timer
                .run(Op::new(op::Splice::new(
                    file.as_raw_fd(),
                    Some(start + filled),
                    pipe.w.as_raw_fd(),
                    None,
                    want,
                    libc::SPLICE_F_MOVE,
                )))
                .await;
            match moved {
                Some(Ok(n)) if n > 0 => filled += n as u64,
                // End of file before the promised length (it shrank), an error, or the deadline.
                _ => return false,
            }
        }
        let want = (filled - sent) as u32;
        timer.set(Instant::now() + idle);
        let moved = timer
            .run(Op::new(op::Splice::new(
                pipe.r.as_raw_fd(),
                None,
                sock,
                None,
                want,
                libc::SPLICE_F_MOVE,
            )))
            .await;
        match moved {
            Some(Ok(n)) if n > 0 => sent += n as u64,
            _ => return false,
        }
    }
    pool.give(pipe);
    true
}
