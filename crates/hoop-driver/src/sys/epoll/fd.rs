//! What the readiness driver knows of each fd (its readiness, its queues of waiting
//! operations), and where each unfinished operation waits.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::call::Call;

/// What the driver knows of one fd.
pub(super) struct FdState {
    pub(super) registered: bool,
    pub(super) nonblocking: bool,
    /// A regular file or block device (always "ready": its I/O goes to the pool).
    pub(super) regular: Option<bool>,
    pub(super) readable: bool,
    pub(super) writable: bool,
    /// The peer closed its side (or the socket failed): a condition that stays and is not
    /// signalled again, so a short read must not make the driver wait for another edge.
    pub(super) read_closed: bool,
    /// The socket hung up or failed: likewise for writes.
    pub(super) write_closed: bool,
    /// A message socket (datagram, seqpacket), learnt at its first short transfer (or its
    /// first send to an address that found no room): one call moves one message, so a short
    /// one says nothing of what is left.
    pub(super) message: Option<bool>,
    /// Writes wait for this timer, not for an edge: a send to an address found the target's
    /// queue full (see `note`).
    pub(super) write_retry_at: Option<Instant>,
    /// The last wait of `write_retry_at` (zero: none since the last write that went through).
    pub(super) write_backoff: Duration,
    pub(super) readers: VecDeque<u64>,
    pub(super) writers: VecDeque<u64>,
}

impl Default for FdState {
    fn default() -> FdState {
        FdState {
            registered: false,
            nonblocking: false,
            regular: None,
            // Unknown readiness: try the call first.
            readable: true,
            writable: true,
            read_closed: false,
            write_closed: false,
            message: None,
            write_retry_at: None,
            write_backoff: Duration::ZERO,
            readers: VecDeque::new(),
            writers: VecDeque::new(),
        }
    }
}

impl FdState {
    /// Records what a call's result says of the fd's readiness: `EAGAIN`, or a short stream
    /// read/write of at least one byte, means "wait for the next edge".
    ///
    /// The readiness rule per kind of fd: on a stream (TCP, a Unix stream, a pipe) a transfer
    /// shorter than asked drained the socket (or filled its buffer), as tokio also assumes. On
    /// a message socket (UDP, a Unix datagram or seqpacket socket) a receive returns one
    /// message, whatever its length, and a send is whole or fails: a short result says nothing
    /// of what is left, and only `EAGAIN` means "wait" (waiting there for an edge that only
    /// new traffic brings would strand the datagrams already queued).
    ///
    /// A send to an address on a message socket that found no room waits on a timer instead
    /// (returned, for the caller to arm): its `EAGAIN` may come from the target's queue
    /// (a Unix datagram socket's, full of other senders' datagrams), which nothing signals to
    /// an unconnected sender, while the failed send's own buffer, freed, raises a write edge
    /// at once, every time (waiting for edges spun: 2,016 waits in 28 ms). The wait starts at
    /// 20 µs and doubles up to 2 ms until a write goes through.
    pub(super) fn note(
        &mut self,
        fd: RawFd,
        write: bool,
        res: i32,
        call: &Call,
    ) -> Option<Instant> {
        let io_len = call.io_len;
        // A 0-byte read is end of stream, which stays readable (no new edge would come).
        let short = io_len > 0 && res > 0 && i64::from(res) < io_len;
        let closed = if write {
            self.write_closed
        } else {
            self.read_closed
        };
        let drained = res == -libc::EAGAIN || (short && !closed && !self.is_message(fd));
        if drained {
            if write {
                self.writable = false;
            } else {
                self.readable = false;
            }
        }
        if !write {
            return None;
        }
        if res >= 0 {
            self.write_backoff = Duration::ZERO;
        } else if res == -libc::EAGAIN && call.addressed && self.is_message(fd) {
            self.write_backoff = if self.write_backoff.is_zero() {
                Duration::from_micros(20)
            } else {
                (self.write_backoff * 2).min(Duration::from_millis(2))
            };
            let at = Instant::now() + self.write_backoff;
            self.write_retry_at = Some(at);
            return Some(at);
        }
        None
    }

    /// Whether `fd` is a message socket (asked once: its type never changes).
    pub(super) fn is_message(&mut self, fd: RawFd) -> bool {
        *self
            .message
            .get_or_insert_with(|| crate::sys::is_message_socket(fd))
    }
}

/// Where a started, unfinished operation waits.
#[derive(Clone, Copy)]
pub(super) enum Waiting {
    /// On fd readiness, running `nr` when ready (`connect_check`: read `SO_ERROR` instead).
    Fd {
        call: Call,
        nr: libc::c_long,
        fd: RawFd,
        write: bool,
        connect_check: bool,
    },
    Timer,
    Pool,
}

/// What the driver knows of each fd, indexed by fd number (fds are small integers).
#[derive(Default)]
pub(super) struct FdTable {
    v: Vec<Option<FdState>>,
}

impl FdTable {
    pub(super) fn get_mut(&mut self, fd: RawFd) -> Option<&mut FdState> {
        self.v.get_mut(usize::try_from(fd).ok()?)?.as_mut()
    }

    /// The state of `fd`, created if new. (Negative fds never reach here: the kernel rejects
    /// them before an operation can wait on one; they map to one shared dummy entry.)
    pub(super) fn entry(&mut self, fd: RawFd) -> &mut FdState {
        let i = usize::try_from(fd).unwrap_or(0);
        if self.v.len() <= i {
            self.v.resize_with(i + 1, || None);
        }
        self.v[i].get_or_insert_with(FdState::default)
    }

    pub(super) fn remove(&mut self, fd: RawFd) -> Option<FdState> {
        self.v.get_mut(usize::try_from(fd).ok()?)?.take()
    }
}

/// Where each unfinished operation waits, indexed by its slot.
#[derive(Default)]
pub(super) struct WaitTable {
    v: Vec<Option<(u64, Waiting)>>,
}

impl WaitTable {
    pub(super) fn index(user_data: u64) -> usize {
        (user_data & 0xffff_ffff) as usize
    }

    pub(super) fn insert(&mut self, user_data: u64, w: Waiting) {
        let i = Self::index(user_data);
        if self.v.len() <= i {
            self.v.resize_with(i + 1, || None);
        }
        self.v[i] = Some((user_data, w));
    }

    pub(super) fn get(&self, user_data: &u64) -> Option<&Waiting> {
        match self.v.get(Self::index(*user_data))? {
            Some((u, w)) if u == user_data => Some(w),
            _ => None,
        }
    }

    pub(super) fn remove(&mut self, user_data: &u64) -> Option<Waiting> {
        let e = self.v.get_mut(Self::index(*user_data))?;
        match e {
            Some((u, _)) if u == user_data => e.take().map(|(_, w)| w),
            _ => None,
        }
    }
}

/// Whether `fd` is a regular file, block device or directory (its I/O goes to the pool); an
/// fd that cannot be examined counts as one.
pub(super) fn fd_is_regular(fd: RawFd) -> bool {
    // SAFETY: fstat writes a stat struct into a local.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `sb` is a live, writable stat struct.
    let ok = unsafe { libc::fstat(fd, &mut sb) } == 0;
    let fmt = sb.st_mode & libc::S_IFMT;
    !ok || fmt == libc::S_IFREG || fmt == libc::S_IFBLK || fmt == libc::S_IFDIR
}

/// Sets `O_NONBLOCK` on `fd` if it is not set.
pub(super) fn make_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 && flags & libc::O_NONBLOCK == 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// The pending error of a socket (`SO_ERROR`), as a result: 0 or `-errno`.
pub(super) fn socket_error(fd: RawFd) -> i32 {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `err`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else if err == libc::EINPROGRESS || err == libc::EALREADY {
        -libc::EAGAIN
    } else {
        -err
    }
}
