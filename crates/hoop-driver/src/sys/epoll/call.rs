//! A [`Call`] is the readiness driver's SQE: a system call number, its arguments (raw pointers
//! into memory the operation owns), and how to run it — at once, when the fd is ready, on the
//! blocking pool, or as a timer.

use std::os::fd::RawFd;
use std::time::Duration;

/// When and where a [`Call`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Completes at once with result 0.
    Nop,
    /// Completes at once with `-errno`.
    Fail(i32),
    /// Runs at once on the driver's thread (cheap, never blocks).
    Inline,
    /// Runs at once; closes `fd`, so the driver forgets its registration first.
    Close(RawFd),
    /// Runs on the blocking pool.
    Blocking,
    /// Completes with `-ETIME` after the duration.
    Timer(Duration),
    /// Runs when `fd` is readable (retried on `EAGAIN`).
    Readable(RawFd),
    /// Runs when `fd` is writable (retried on `EAGAIN`).
    Writable(RawFd),
    /// Like `Readable`, on a socket that must be non-blocking (accept).
    Accept(RawFd),
    /// Like `Accept`, but the operation stays armed, as a multishot accept does on io_uring:
    /// every connection is an item (`IORING_CQE_F_MORE`), taken whenever the listener is
    /// readable until `EAGAIN`, however far the stream's owner is behind; only an error or a
    /// cancel ends it.
    AcceptMulti(RawFd),
    /// A non-blocking connect: `EINPROGRESS`, then writable, then `SO_ERROR` is the result.
    Connect(RawFd),
    /// A generic read or write: on the pool for regular files and block devices; otherwise
    /// readiness-driven with `stream_nr` (no offset) on a non-blocking fd.
    File {
        /// The fd.
        fd: RawFd,
        /// Whether it writes.
        write: bool,
        /// The system call for streams (`read`/`write`/`readv`/`writev`), same first three
        /// arguments.
        stream_nr: libc::c_long,
    },
}

/// One system call, described for later execution (possibly on another thread).
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub(crate) nr: libc::c_long,
    pub(crate) args: [libc::c_long; 6],
    pub(crate) mode: Mode,
    /// For stream reads and writes: the length asked. A shorter result means the socket was
    /// drained (or its buffer filled), so the driver waits for the next edge instead of trying
    /// the next call at once only to get `EAGAIN` (tokio's short-read rule).
    pub(crate) io_len: i64,
    /// Cancel the operation (`ECANCELED`) if it has not completed by then.
    pub(crate) deadline: Option<Duration>,
    /// A result of 0 means "not ready yet" (`poll(2)` with a zero timeout): read as `EAGAIN`.
    pub(crate) zero_is_eagain: bool,
    /// Tried once, never queued: `EAGAIN` (or an fd known not to be ready, or other
    /// operations queued before it) completes it with `-EAGAIN` (a receive into a ring buffer,
    /// which must not hold its buffer while it waits).
    pub(crate) try_once: bool,
    /// No system call: completes with 1 once the fd is ready in the call's direction (a
    /// receive waiting for data without a buffer).
    pub(crate) ready_only: bool,
    /// A send to an address: on a message socket its `EAGAIN` may be the target's full queue,
    /// which no edge reports, so it waits on a backoff timer instead (`FdState::note`).
    pub(crate) addressed: bool,
}

impl Call {
    pub(super) fn new(nr: libc::c_long, args: &[libc::c_long], mode: Mode) -> Call {
        let mut a = [0; 6];
        a[..args.len()].copy_from_slice(args);
        Call {
            nr,
            args: a,
            mode,
            io_len: 0,
            deadline: None,
            zero_is_eagain: false,
            try_once: false,
            ready_only: false,
            addressed: false,
        }
    }

    /// Marks a stream read or write of `len` bytes (see `io_len`).
    pub(super) fn with_io_len(mut self, len: usize) -> Call {
        self.io_len = len as i64;
        self
    }

    /// Runs the system call; returns its result or `-errno`, as a CQE's `res`.
    pub(crate) fn run(&self) -> i32 {
        self.run_nr(self.nr)
    }

    /// Runs system call `nr` with this call's arguments.
    pub(crate) fn run_nr(&self, nr: libc::c_long) -> i32 {
        if self.ready_only {
            return 1;
        }
        let a = self.args;
        // SAFETY: the arguments point into memory the operation owns until its completion is
        // delivered (EpollOp's contract), exactly as an SQE's would.
        let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
        if r == 0 && self.zero_is_eagain {
            // `PollOnce`: the fd is not ready after all (the driver's readiness was stale):
            // like EAGAIN, wait for its next edge.
            -libc::EAGAIN
        } else if r < 0 {
            -std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            r as i32
        }
    }
}
