//! How the poll state makes its operations ([`Ops`]), and the write direction they drive
//! ([`WriteDir`]), which a socket's pusher shares with the value ([`Push`] behind a
//! [`Handle`]: the pusher task itself is `push`'s). These types name each other (an `Ops`
//! spawns the pusher of a `Handle<Self>`; the write direction holds an `Ops`'s write), so
//! they live together.

use std::cell::RefCell;
use std::future::Future as _;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use hoop_driver::{BufResult, IoBuf, Slice};

use crate::send_path::Inline;

/// Size of each internal buffer of a socket (many connections: kept small).
pub(super) const BUF_BYTES: usize = 16 * 1024;

/// Sockets use recv/send (`MSG_NOSIGNAL`), files read/write at their position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Socket,
    File,
}

/// How the poll-based state makes its operations.
pub(crate) trait Ops: 'static {
    /// A read (recv or positional read) into the internal buffer.
    type Read: std::future::Future<Output = BufResult<usize, Slice<Vec<u8>>>> + Unpin + 'static;
    /// A write (send or positional write) from the internal buffer.
    type Write: std::future::Future<Output = BufResult<usize, Slice<Vec<u8>>>> + Unpin + 'static;
    /// `shutdown(SHUT_WR)` of a socket.
    type Shutdown: std::future::Future<Output = io::Result<()>> + Unpin + 'static;
    /// Operations in flight belong to the runtime of the thread that started them.
    const THREAD_BOUND: bool;
    /// A read of `buf`; `poll_first`: a socket believed empty (`op::Recv::poll_first`).
    fn read(&self, fd: RawFd, kind: Kind, buf: Slice<Vec<u8>>, poll_first: bool) -> Self::Read;
    fn write(&self, fd: RawFd, kind: Kind, buf: Slice<Vec<u8>>) -> Self::Write;
    fn shutdown(&self, fd: RawFd) -> Self::Shutdown;
    /// A send on the stream socket `fd` made now, outside the ring, if these operations have
    /// one (`crate::send_path`); `Inline::Ring` sends through `write` instead. Called only
    /// while no write of the state is in flight. `answer`: the write is the first since a
    /// flush that covered one write, a request's answer (`SendPath::adaptive`).
    fn try_send(&self, fd: RawFd, bufs: &[io::IoSlice<'_>], answer: bool) -> Inline {
        let _ = (fd, bufs, answer);
        Inline::Ring
    }
    /// Whether a socket's `poll_write` stages bytes behind a send in flight (files always do).
    fn stage_sockets(&self) -> bool {
        false
    }
    /// Whether a socket's writes push themselves: a write in flight moves to a pusher task
    /// (`push`) that sends what follows it without the value being polled.
    fn pushes(&self) -> bool {
        false
    }
    /// Spawns the pusher of `shared`'s writes on socket `fd` on this thread's runtime; `false`
    /// if there is none (or these operations have no pusher).
    fn spawn_pusher(&self, handle: &Handle<Self>, fd: RawFd) -> bool
    where
        Self: Sized,
    {
        let _ = (handle, fd);
        false
    }
}

/// The write direction of a [`PollIo`]: the write in flight, the rest of a short write, the
/// bytes staged behind it, and a write-behind's error for the next call. Held by the value, or
/// while a socket's writes push themselves, by its pusher (`push`).
pub(crate) struct WriteDir<O: Ops> {
    /// The write buffer when no write is in flight (empty: nothing pending).
    pub(super) write_buf: Option<Vec<u8>>,
    /// Bytes of the write buffer already written.
    pub(super) write_done: usize,
    /// The length of the write buffer in flight (its bytes from `write_done` on are pending).
    pub(super) write_len: usize,
    pub(super) write_op: Option<O::Write>,
    /// Bytes accepted while a write was in flight, written after it (at most `max_buf`;
    /// empty: none).
    pub(super) write_staging: Vec<u8>,
    /// The error of a write-behind, for the next call.
    pub(super) write_err: Option<io::Error>,
    /// The bytes accepted and dropped with `write_err` (the rest of the failed write and
    /// what was staged behind it), for a detached writer's count.
    pub(super) write_err_bytes: usize,
    /// A socket's write-behind failed after its bytes were accepted, and the error was
    /// reported: the stream has a hole, so nothing more is written (`PollIo::take_write_err`).
    pub(super) broken: bool,
}

impl<O: Ops> WriteDir<O> {
    pub(super) fn new() -> WriteDir<O> {
        WriteDir {
            write_buf: None,
            write_done: 0,
            write_len: 0,
            write_op: None,
            write_staging: Vec::new(),
            write_err: None,
            write_err_bytes: 0,
            broken: false,
        }
    }

    /// How many bytes the writes accepted and are not known to have written.
    pub(super) fn pending_bytes(&self) -> usize {
        let current = if self.write_op.is_some() {
            self.write_len.saturating_sub(self.write_done)
        } else {
            self.write_buf
                .as_ref()
                .map_or(0, |b| b.len().saturating_sub(self.write_done))
        };
        current + self.write_staging.len()
    }

    /// Appends up to `room` bytes of `bufs` (`total` of them) to the staging buffer; the
    /// number taken.
    pub(super) fn stage(
        &mut self,
        bufs: &[io::IoSlice<'_>],
        total: usize,
        max_buf: usize,
    ) -> usize {
        let room = max_buf.saturating_sub(self.write_staging.len());
        let n = total.min(room);
        if n > 0 {
            grow(&mut self.write_staging, n, max_buf);
            extend_from(&mut self.write_staging, bufs, 0, n);
        }
        n
    }

    /// Drives the write in flight (see `PollIo::drive_write`).
    pub(super) fn drive(
        &mut self,
        ops: &O,
        fd: RawFd,
        kind: Kind,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        loop {
            if let Some(op) = &mut self.write_op {
                let (res, slice) = std::task::ready!(Pin::new(op).poll(cx));
                self.write_op = None;
                let mut buf = slice.into_inner();
                let unwritten = buf.len().saturating_sub(self.write_done);
                match res {
                    Ok(0) => {
                        self.write_err_bytes = unwritten + self.write_staging.len();
                        buf.clear();
                        self.write_err = Some(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "failed to write the whole buffer",
                        ));
                    }
                    Ok(n) => self.write_done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.write_err_bytes = unwritten + self.write_staging.len();
                        buf.clear();
                        self.write_err = Some(e);
                    }
                }
                if self.write_done >= buf.len() {
                    buf.clear();
                    self.write_done = 0;
                }
                self.write_buf = Some(buf);
            }
            if self.write_err.is_some() {
                self.write_done = 0;
                // Staged bytes would land after the bytes that failed: they go with the error.
                self.write_staging.clear();
                return Poll::Ready(());
            }
            match self.write_buf.take() {
                Some(buf) if !buf.is_empty() => self.submit_write(ops, fd, kind, buf, cx),
                Some(buf) if !self.write_staging.is_empty() => {
                    // The write buffer is done: the staged bytes go next, and the emptied
                    // buffer stages the bytes after them.
                    let next = std::mem::replace(&mut self.write_staging, buf);
                    self.write_done = 0;
                    self.send_staged(ops, fd, kind, next, cx);
                }
                None if !self.write_staging.is_empty() => {
                    let next = std::mem::take(&mut self.write_staging);
                    self.write_done = 0;
                    self.send_staged(ops, fd, kind, next, cx);
                }
                other => {
                    self.write_buf = other;
                    return Poll::Ready(());
                }
            }
        }
    }

    /// Staged bytes `buf`, now that nothing is in flight: a socket tries them inline first
    /// (the send before them just completed, so the socket likely has room), and only what
    /// that did not send goes to the ring.
    pub(super) fn send_staged(
        &mut self,
        ops: &O,
        fd: RawFd,
        kind: Kind,
        mut buf: Vec<u8>,
        cx: &mut Context<'_>,
    ) {
        if kind == Kind::Socket {
            match ops.try_send(fd, &[io::IoSlice::new(&buf)], false) {
                Inline::Sent(n) if n >= buf.len() => {
                    buf.clear();
                    self.write_buf = Some(buf);
                    return;
                }
                Inline::Sent(n) => self.write_done = n,
                Inline::Failed(e) => {
                    self.write_err_bytes = buf.len();
                    buf.clear();
                    self.write_buf = Some(buf);
                    self.write_err = Some(e);
                    return;
                }
                Inline::Ring => {}
            }
        }
        self.submit_write(ops, fd, kind, buf, cx);
    }

    /// Submits `buf[write_done..]` (the first poll pushes the operation).
    pub(super) fn submit_write(
        &mut self,
        ops: &O,
        fd: RawFd,
        kind: Kind,
        buf: Vec<u8>,
        _cx: &mut Context<'_>,
    ) {
        let len = buf.len();
        self.write_len = len;
        let slice = buf.slice(self.write_done..len);
        self.write_op = Some(ops.write(fd, kind, slice));
    }
}

/// Makes room in `buf` for `extra` more bytes: at least `BUF_BYTES`, doubling, at most `max`
/// unless the bytes themselves need more.
pub(super) fn grow(buf: &mut Vec<u8>, extra: usize, max: usize) {
    let need = buf.len() + extra;
    if need <= buf.capacity() {
        return;
    }
    let cap = buf
        .capacity()
        .saturating_mul(2)
        .max(BUF_BYTES)
        .min(max)
        .max(need);
    buf.reserve_exact(cap - buf.len());
}

/// Appends to `buf` the `n` bytes of `bufs` that follow the first `skip` of them.
pub(super) fn extend_from(
    buf: &mut Vec<u8>,
    bufs: &[io::IoSlice<'_>],
    mut skip: usize,
    mut n: usize,
) {
    for b in bufs {
        if n == 0 {
            break;
        }
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        let take = (b.len() - skip).min(n);
        buf.extend_from_slice(&b[skip..skip + take]);
        skip = 0;
        n -= take;
    }
}

/// The write direction shared by a value and its pusher.
pub(crate) type Shared<O> = Rc<RefCell<Push<O>>>;

/// What the value holds of its pusher: the shared state (touched on the owner thread only),
/// and a flag any thread may set (a value dropped on another thread) that tells the pusher to
/// send nothing more: the fd is about to be closed, and its number may be reused.
pub(crate) struct Handle<O: Ops> {
    pub(super) shared: Shared<O>,
    pub(super) gone: Arc<AtomicBool>,
}

impl<O: Ops> Handle<O> {
    /// The handle of a pusher starting with `w` (a write in flight).
    pub(super) fn new(w: WriteDir<O>) -> Handle<O> {
        Handle {
            shared: Push::new_shared(w),
            gone: Arc::new(AtomicBool::new(false)),
        }
    }

    /// From any thread, without touching the shared state: the pusher sends nothing more
    /// (what is in flight may still complete; the staged bytes are dropped).
    pub(super) fn give_up_from_anywhere(&self) {
        self.gone.store(true, Ordering::Release);
    }
}

/// What a value and its pusher share.
pub(crate) struct Push<O: Ops> {
    /// The write direction (the value's is empty meanwhile).
    pub(super) w: WriteDir<O>,
    /// The pusher has not ended: it owns `w`'s write in flight.
    pub(super) running: bool,
    /// The value's task waiting for room or for the end (`poll_write`/`poll_flush`/...).
    pub(super) waiter: Option<Waker>,
    /// The pusher's task, woken when the value gives the writes up.
    pub(super) pusher: Option<Waker>,
}

impl<O: Ops> Push<O> {
    /// The state of a pusher starting with `w` (a write in flight), no waiter yet.
    fn new_shared(w: WriteDir<O>) -> Shared<O> {
        Rc::new(RefCell::new(Push {
            w,
            running: true,
            waiter: None,
            pusher: None,
        }))
    }

    /// Registers `cx`'s waker as the value's waiter.
    pub(super) fn set_waiter(&mut self, cx: &Context<'_>) {
        match &self.waiter {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => self.waiter = Some(cx.waker().clone()),
        }
    }
}
