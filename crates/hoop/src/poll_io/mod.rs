//! `futures::io::{AsyncRead, AsyncWrite}` (and, with feature `tokio`, tokio's traits) for
//! [`TcpStream`](crate::net::TcpStream), [`UnixStream`](crate::net::UnixStream) and
//! [`File`](crate::fs::File) (and `AsyncSeek` for files), on top of completion operations.
//!
//! Poll-based traits hand in borrowed slices, but the kernel needs memory the operation owns.
//! Each value therefore keeps internal buffers (made on first use, then reused: no allocation
//! per call), of at most `max_buf` bytes: 16 KiB for sockets (many connections), 1 MiB for
//! files by default (`File::set_max_buf_size`):
//! * reads go into the read buffer and are copied out; a read still in flight when the caller
//!   gives up is kept and its bytes are handed to the next `poll_read`, so nothing is lost. A
//!   socket read asks for at most the caller's slice length. A file read asks for at least the
//!   read-ahead (`read_ahead`), which each read doubles up to `max_buf` and a seek or a write
//!   resets: sequential reads of small slices become few large reads, the rest served from the
//!   buffer;
//! * `poll_write` copies the caller's bytes into the write buffer, submits the write and
//!   returns `Ready(n)` at once (write-behind): the bytes are then the value's responsibility,
//!   written in order, the rest of a short write resubmitted. On the `inline` and `both` send
//!   paths a socket first tries the send inline (`Ops::try_send`: on io_uring `send(2)` with
//!   `MSG_DONTWAIT` on this thread, see `crate::send_path`), and only what the socket has no
//!   room for goes to the write buffer and the ring. While a write is in flight, a file's `poll_write` appends to a second,
//!   staging buffer (`write_staging`, up to `max_buf`) and returns `Ready(n)` too; the staged
//!   bytes are submitted when the write in flight has written all of its bytes, so there is
//!   one write at a time at the file's position, in order, and reading one file overlaps
//!   writing another. A socket stages likewise (16 KiB at most; `Ops::stage_sockets`, not
//!   `hoop::shared`'s): by default every trait write of a socket on io_uring goes to the ring
//!   and what is written while it is in flight is staged behind it (`crate::send_path`). A
//!   socket's write direction pushes itself (`push`, `Ops::pushes`, again not `hoop::shared`'s;
//!   on both drivers, though on epoll a send is in flight only while the socket is full):
//!   once a send is in flight, a pusher task of the runtime owns it and the bytes staged
//!   behind it, and sends them (and the rest of a short send) when it completes, whether or not
//!   the value is polled again, so a write half that writes without flushing and then awaits
//!   something else still gets its bytes out. A file's staged bytes, and a socket's where no
//!   runtime can run a pusher, go out when the value is next polled (a write, a flush, a close,
//!   a read) or dropped. (`HOOP_SEND_PATH=inline` or `ring` turns staging off: a socket's
//!   `poll_write` then returns `Pending` while its write is in flight.) A `poll_write` that
//!   returns `Pending` (a write in flight and no room to stage) has taken nothing, so a write
//!   future dropped at any point neither loses accepted bytes nor duplicates them.
//!   An error of a write-behind is reported by the next `poll_write`/`poll_flush`/`poll_close`
//!   (the bytes staged behind the write that failed are dropped with it: they would land after
//!   a hole). `poll_flush` waits for every accepted byte, staged ones included; `poll_close`
//!   flushes, then shuts down the write half of a socket; both wait for a pusher to end first
//!   (it wakes them when it has sent everything, or failed). A socket's `poll_read` also
//!   pushes a write-behind on when it has no pusher (the rest of a short write), so a request
//!   written and not flushed still goes out while its reply is awaited. Dropping the value with
//!   writes pending finishes them (INVARIANTS rule 5b, `finish`): on the thread of the runtime
//!   that runs them, while it runs, the state (taken back from a pusher, the send in flight
//!   included) and the fd owner move into a detached task of the runtime that writes every
//!   accepted byte in order, then closes (a write half: shuts down the write direction);
//!   `block_on`'s end and the shutdown wait for it up to the shutdown timeout and report what
//!   did not finish (`ShutdownReport::unfinished_writes`). Its errors are dropped: only
//!   `poll_flush`/`poll_close` report errors. Dropped after `block_on` returned or on another
//!   thread, the writes are cancelled (the staged bytes dropped), as nothing can run them.
//!
//! Files use the file's own position (`read(2)`/`write(2)`, `CURRENT_POS`), like
//! `std::fs::File`, with at most one operation at that position in flight: a file's
//! `poll_read` waits for the pending writes first; its `poll_write` waits for a read in flight
//! and gives back the bytes read ahead and not handed out (`lseek` back by their number;
//! `poll_give_back`), and so does a seek (`poll_seek`, which also flushes first): reads,
//! writes and seeks through the traits land where they would with std's `File`.
//!
//! The state machine is generic over how its operations are made ([`Ops`]): the thread-per-core
//! types use the runtime's `Op` futures ([`Local`]); `hoop::shared`'s types use shared rings'
//! `Send` futures.

mod finish;
mod push;
mod split;
mod traits;

pub(crate) use finish::{finish_shared, finish_then};

pub(crate) use traits::poll_io_traits;

use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop_driver::{op, BufResult, IoBuf, Op, Slice};

use crate::net::kept::{Kept, Outcome};
use crate::send_path::Inline;

/// Size of each internal buffer of a socket (many connections: kept small).
const BUF_BYTES: usize = 16 * 1024;

/// The default largest buffer of a file: the read-ahead grows up to it, and so does each write
/// buffer (`File::set_max_buf_size` changes it). Measured in DESIGN.md ("Files through the
/// traits").
pub(crate) const FILE_BUF_BYTES: usize = 1024 * 1024;

/// The largest buffer size `set_max_buf` takes; larger values are lowered to it.
const MAX_BUF_BYTES: usize = 1 << 30;

/// Sockets use recv/send (`MSG_NOSIGNAL`), files read/write at their position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Socket,
    File,
}

/// How the poll-based state makes its operations.
pub(crate) trait Ops {
    /// A read (recv or positional read) into the internal buffer.
    type Read: std::future::Future<Output = BufResult<usize, Slice<Vec<u8>>>> + Unpin;
    /// A write (send or positional write) from the internal buffer.
    type Write: std::future::Future<Output = BufResult<usize, Slice<Vec<u8>>>> + Unpin;
    /// `shutdown(SHUT_WR)` of a socket.
    type Shutdown: std::future::Future<Output = io::Result<()>> + Unpin;
    /// Operations in flight belong to the runtime of the thread that started them.
    const THREAD_BOUND: bool;
    fn read(&self, fd: RawFd, kind: Kind, buf: Slice<Vec<u8>>) -> Self::Read;
    fn write(&self, fd: RawFd, kind: Kind, buf: Slice<Vec<u8>>) -> Self::Write;
    fn shutdown(&self, fd: RawFd) -> Self::Shutdown;
    /// A send on the stream socket `fd` made now, outside the ring, if these operations have
    /// one (`crate::send_path`); `Inline::Ring` sends through `write` instead. Called only
    /// while no write of the state is in flight.
    fn try_send(&self, fd: RawFd, bufs: &[io::IoSlice<'_>]) -> Inline {
        let _ = (fd, bufs);
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
    fn spawn_pusher(&self, handle: &push::Handle<Self>, fd: RawFd) -> bool
    where
        Self: Sized,
    {
        let _ = (handle, fd);
        false
    }
}

/// Operations on the runtime of the current thread (`Op`).
#[derive(Debug)]
pub(crate) struct Local;

impl Ops for Local {
    type Read = Bound<ReadOp>;
    type Write = Bound<WriteOp>;
    type Shutdown = Bound<Op<op::Shutdown>>;
    const THREAD_BOUND: bool = true;
    fn read(&self, fd: RawFd, kind: Kind, slice: Slice<Vec<u8>>) -> Bound<ReadOp> {
        Bound(match kind {
            Kind::Socket => ReadOp::Socket(Op::new(op::Recv::new(fd, slice, 0))),
            Kind::File => ReadOp::File(Op::new(op::Read::new(fd, slice, op::CURRENT_POS))),
        })
    }
    fn write(&self, fd: RawFd, kind: Kind, slice: Slice<Vec<u8>>) -> Bound<WriteOp> {
        Bound(match kind {
            Kind::Socket => WriteOp::Socket(Op::new(op::Send::new(fd, slice, 0))),
            Kind::File => WriteOp::File(Op::new(op::Write::new(fd, slice, op::CURRENT_POS))),
        })
    }
    fn shutdown(&self, fd: RawFd) -> Bound<Op<op::Shutdown>> {
        Bound(Op::new(op::Shutdown::new(fd, libc::SHUT_WR)))
    }
    fn try_send(&self, fd: RawFd, bufs: &[io::IoSlice<'_>]) -> Inline {
        crate::send_path::try_send(fd, bufs, crate::send_path::send_path().trait_inline)
    }
    fn stage_sockets(&self) -> bool {
        crate::send_path::send_path().staging
    }
    fn pushes(&self) -> bool {
        crate::send_path::send_path().push
    }
    fn spawn_pusher(&self, handle: &push::Handle<Local>, fd: RawFd) -> bool {
        crate::runtime::spawn_pusher(push::Pusher::new(handle, fd))
    }
}

/// An operation of the thread's runtime (or a pusher's handle, `push::Handle`) held by a
/// [`PollIo<Local>`], which touches it only on the thread that started it (`check_thread`) and
/// forgets it on any other.
#[derive(Debug)]
pub(crate) struct Bound<T>(T);

// SAFETY: a `Bound` is only made by `Local` (its operations) and by `PollIo::push` (a pusher's
// handle, made only where `Ops::pushes`, which only `Local` says), and only held by a
// `PollIo<Local>` (`pushed` is `None` for every other `Ops`), which polls, borrows and drops
// it on its owner thread only (`check_thread`; `Drop` and `merge_write` forget it elsewhere)
// and gives no access to it through `&self`: the runtime's `Rc`s inside are never used on
// another thread. The one thing touched elsewhere is a handle's `gone` flag, an
// `Arc<AtomicBool>`, which is `Send + Sync` itself.
unsafe impl<T> Send for Bound<T> {}
// SAFETY: as above: no access through `&Bound`.
unsafe impl<T> Sync for Bound<T> {}

impl<T: std::future::Future + Unpin> std::future::Future for Bound<T> {
    type Output = T::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

#[derive(Debug)]
pub(crate) enum ReadOp {
    Socket(Op<op::Recv<Slice<Vec<u8>>>>),
    File(Op<op::Read<Slice<Vec<u8>>>>),
}

impl std::future::Future for ReadOp {
    type Output = BufResult<usize, Slice<Vec<u8>>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            ReadOp::Socket(op) => Pin::new(op).poll(cx),
            ReadOp::File(op) => Pin::new(op).poll(cx),
        }
    }
}

#[derive(Debug)]
pub(crate) enum WriteOp {
    Socket(Op<op::Send<Slice<Vec<u8>>>>),
    File(Op<op::Write<Slice<Vec<u8>>>>),
}

impl std::future::Future for WriteOp {
    type Output = BufResult<usize, Slice<Vec<u8>>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            WriteOp::Socket(op) => Pin::new(op).poll(cx),
            WriteOp::File(op) => Pin::new(op).poll(cx),
        }
    }
}

use std::future::Future as _;

/// The state behind the poll-based traits of one fd.
///
/// With [`Local`] operations it is `Send` and `Sync` so that the types holding it stay so,
/// although an operation in flight belongs to the runtime of the thread that started it
/// (`owner`): polled on another thread while one is in flight it fails with an error instead of
/// touching the operation, and dropped on another thread it leaks the operation (its buffer
/// stays with it) rather than drop it there. With nothing in flight the state moves freely.
/// Shared rings' operations are `Send` themselves: none of this applies to them.
pub(crate) struct PollIo<O: Ops = Local> {
    ops: O,
    /// The thread whose runtime runs the operations in flight.
    owner: std::thread::ThreadId,
    kind: Kind,
    /// The largest read and write (so the largest buffer): `BUF_BYTES` for sockets,
    /// `FILE_BUF_BYTES` for files unless `set_max_buf` changed it.
    max_buf: usize,
    /// The read buffer when no read is in flight; bytes `read_pos..len` are not handed out yet.
    read_buf: Option<Vec<u8>>,
    read_pos: usize,
    read_op: Option<O::Read>,
    /// Files: the least the next read asks for (0: only what the caller asks), doubled by each
    /// read up to `max_buf`, back to 0 after a seek or a write.
    read_ahead: usize,
    /// The write direction, while the value holds it (see `pushed`).
    w: WriteDir<O>,
    /// A socket's write direction while a pusher task (`push`) owns it: `w` is then empty.
    /// Touched on the owner thread only (`check_thread`; `Drop` forgets it elsewhere).
    pushed: Option<Bound<push::Handle<O>>>,
    /// Writes never move to a pusher (a detached writer's state: `finish`).
    no_push: bool,
    shutdown: Option<O::Shutdown>,
    /// A seek started (`AsyncSeek::start_seek`) and not completed yet.
    seek: Option<io::SeekFrom>,
}

impl<O: Ops> std::fmt::Debug for PollIo<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollIo")
            .field("kind", &self.kind)
            .field("max_buf", &self.max_buf)
            .field("read_in_flight", &self.read_op.is_some())
            .field("write_in_flight", &self.w.write_op.is_some())
            .field("write_staged", &self.w.write_staging.len())
            .field("write_pushed", &self.pushed.is_some())
            .finish()
    }
}

impl<O: Ops> Drop for PollIo<O> {
    fn drop(&mut self) {
        if O::THREAD_BOUND && std::thread::current().id() != self.owner {
            // Not the owner's thread: the operations' `Rc`s must not be touched here.
            std::mem::forget(self.read_op.take());
            std::mem::forget(self.w.write_op.take());
            std::mem::forget(self.shutdown.take());
            // The pusher runs on the owner's thread: its `Rc` is not touched here either. It is
            // told (an atomic flag) to send nothing more: the fd is closed behind this drop.
            if let Some(p) = self.pushed.take() {
                p.0.give_up_from_anywhere();
                std::mem::forget(p);
            }
        } else if let Some(p) = self.pushed.take() {
            // Dropped with a pusher running (not through `finish_then`, which takes its writes
            // back): they are given up, as a write in flight of a dropped value is.
            push::abandon(&p.0.shared);
        }
    }
}

impl PollIo<Local> {
    pub(crate) fn new(kind: Kind) -> PollIo<Local> {
        PollIo::with_ops(kind, Local)
    }
}

impl<O: Ops> PollIo<O> {
    /// `Err` if an operation is in flight on another thread's runtime; with none, the state
    /// moves to this thread.
    fn check_thread(&mut self) -> io::Result<()> {
        if !O::THREAD_BOUND {
            return Ok(());
        }
        let here = std::thread::current().id();
        if here == self.owner {
            return Ok(());
        }
        if self.read_op.is_some()
            || self.w.write_op.is_some()
            || self.pushed.is_some()
            || self.shutdown.is_some()
        {
            return Err(io::Error::other(
                "an AsyncRead/AsyncWrite operation of this value is in flight on another \
                 thread's runtime: poll it on that thread",
            ));
        }
        self.owner = here;
        Ok(())
    }

    pub(crate) fn with_ops(kind: Kind, ops: O) -> PollIo<O> {
        PollIo {
            ops,
            owner: std::thread::current().id(),
            kind,
            max_buf: match kind {
                Kind::Socket => BUF_BYTES,
                Kind::File => FILE_BUF_BYTES,
            },
            read_buf: None,
            read_pos: 0,
            read_op: None,
            read_ahead: 0,
            w: WriteDir::new(),
            pushed: None,
            no_push: false,
            shutdown: None,
            seek: None,
        }
    }

    /// The largest read and write buffer.
    pub(crate) fn max_buf(&self) -> usize {
        self.max_buf
    }

    /// Sets the largest read and write buffer (`File::set_max_buf_size`): 0 is taken as 1
    /// (a read of 0 bytes would look like the end of the file), more than 1 GiB as 1 GiB.
    /// Bytes already buffered stay; idle buffers larger than the new size are freed.
    pub(crate) fn set_max_buf(&mut self, bytes: usize) {
        self.max_buf = bytes.clamp(1, MAX_BUF_BYTES);
        self.read_ahead = self.read_ahead.min(self.max_buf);
        let big = |b: &Vec<u8>, max: usize| b.capacity() > max;
        if self.read_op.is_none()
            && self.unread() == 0
            && self.read_buf.as_ref().is_some_and(|b| big(b, self.max_buf))
        {
            self.read_buf = None;
        }
        if self.w.write_op.is_none()
            && self
                .w
                .write_buf
                .as_ref()
                .is_some_and(|b| b.is_empty() && big(b, self.max_buf))
        {
            self.w.write_buf = None;
        }
        if self.w.write_staging.is_empty() && big(&self.w.write_staging, self.max_buf) {
            self.w.write_staging = Vec::new();
        }
    }

    /// Bytes read and not handed out yet.
    fn unread(&self) -> usize {
        self.read_buf
            .as_ref()
            .map_or(0, |b| b.len().saturating_sub(self.read_pos))
    }

    pub(crate) fn poll_read(
        &mut self,
        fd: RawFd,
        kept: Option<&Kept>,
        cx: &mut Context<'_>,
        dst: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let want = dst.len();
        self.poll_read_with(fd, kept, cx, want, |bytes| {
            dst[..bytes.len()].copy_from_slice(bytes)
        })
    }

    /// Before a read made outside this machine (by readiness): pushes the write-behind on, as
    /// `poll_read_with` does, and says whether no read of this machine is pending (no bytes
    /// kept, no read in flight), so that the caller may read the socket itself.
    #[cfg(feature = "tokio")]
    pub(crate) fn read_idle(&mut self, fd: RawFd, cx: &mut Context<'_>) -> io::Result<bool> {
        self.check_thread()?;
        if self.w.write_op.is_some() {
            let _ = self.drive_write(fd, cx);
        }
        let kept = self
            .read_buf
            .as_ref()
            .is_some_and(|b| self.read_pos < b.len());
        Ok(!kept && self.read_op.is_none())
    }

    /// `poll_read` into whatever `put` writes to (tokio's `ReadBuf` takes the bytes without
    /// zeroing its unfilled part first): at most `want` bytes are handed to `put`, once.
    pub(crate) fn poll_read_with(
        &mut self,
        fd: RawFd,
        kept: Option<&Kept>,
        cx: &mut Context<'_>,
        want: usize,
        put: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<usize>> {
        self.check_thread()?;
        if self.kind == Kind::File {
            // One operation at the file's position at a time, in the caller's order: the bytes
            // accepted before this read are written first (as with std's File). An error of
            // theirs stays for the next write or flush.
            std::task::ready!(self.drive_write(fd, cx));
        } else if self.w.write_op.is_some() {
            // A reader waiting for a reply must not wait on a request whose tail is still ours
            // to send: push the write-behind on (its error stays for the next write or flush).
            let _ = self.drive_write(fd, cx);
        }
        if want == 0 {
            return Poll::Ready(Ok(0));
        }
        loop {
            // Bytes of an earlier read first.
            if let Some(buf) = &self.read_buf {
                if self.read_pos < buf.len() {
                    let n = (buf.len() - self.read_pos).min(want);
                    put(&buf[self.read_pos..self.read_pos + n]);
                    self.read_pos += n;
                    return Poll::Ready(Ok(n));
                }
            }
            // Then what owned-buffer reads dropped in flight received (the socket's kept
            // state, `net::kept`): they were in the kernel before this machine's next read.
            if let Some(kept) = kept {
                match kept.poll_take(cx) {
                    Poll::Ready(Some(Outcome::Received(bytes, from))) => {
                        let n = bytes.len().min(want);
                        put(&bytes[..n]);
                        if n < bytes.len() {
                            kept.put_back(Outcome::Received(bytes[n..].to_vec(), from));
                        }
                        return Poll::Ready(Ok(n));
                    }
                    Poll::Ready(Some(Outcome::Failed(errno))) => {
                        return Poll::Ready(Err(io::Error::from_raw_os_error(errno)))
                    }
                    Poll::Ready(Some(other)) => kept.put_back(other),
                    Poll::Ready(None) => {}
                    Poll::Pending => return Poll::Pending,
                }
            }
            if let Some(op) = &mut self.read_op {
                let (res, slice) = std::task::ready!(Pin::new(op).poll(cx));
                self.read_op = None;
                self.read_buf = Some(slice.into_inner());
                self.read_pos = 0;
                match res {
                    // The buffer's length is exactly what arrived (the read rule).
                    Ok(0) => return Poll::Ready(Ok(0)),
                    Ok(_) => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            // No byte of the buffer is unread here: it is reused whole. A file read asks for
            // at least the read-ahead, which doubles with each read (sequential reads ask
            // the kernel for more and more, up to `max_buf`); a seek or a write resets it.
            let mut buf = self.read_buf.take().unwrap_or_default();
            buf.clear();
            let len = want.max(self.read_ahead).min(self.max_buf);
            // At least BUF_BYTES at once (as many reads ask for about that much).
            buf.reserve_exact(len.max(BUF_BYTES.min(self.max_buf)));
            if self.kind == Kind::File {
                self.read_ahead = len.saturating_mul(2).min(self.max_buf);
            }
            let slice = buf.slice(..len);
            self.read_op = Some(self.ops.read(fd, self.kind, slice));
        }
    }

    /// Drives the write in flight (and the rest of a short write, and the staged bytes) as far
    /// as it goes without waiting; an error is kept in `write_err`. `Ready` once nothing is in
    /// flight. A socket whose writes push themselves hands a write still in flight to its
    /// pusher (`push`); while the pusher runs this is `Pending`, and a caller that returns
    /// `Pending` then registers `cx` with [`wait_pusher`](Self::wait_pusher) (only those: a
    /// waiter registered by a call that returned `Ready` would be woken for nothing).
    fn drive_write(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<()> {
        if !self.reclaim() {
            return Poll::Pending;
        }
        let r = self.w.drive(&self.ops, fd, self.kind, cx);
        if r.is_pending() {
            self.push(fd);
        }
        r
    }

    /// Takes the write direction back from a pusher that ended (`true`); `false` while it runs
    /// (a caller that then returns `Pending` registers with `wait_pusher`).
    fn reclaim(&mut self) -> bool {
        let Some(p) = &self.pushed else {
            return true;
        };
        let mut st = p.0.shared.borrow_mut();
        if st.running {
            return false;
        }
        std::mem::swap(&mut self.w, &mut st.w);
        drop(st);
        self.pushed = None;
        true
    }

    /// Registers `cx` to be woken when the pusher, if one runs, makes room or ends.
    fn wait_pusher(&self, cx: &Context<'_>) {
        if let Some(p) = &self.pushed {
            p.0.shared.borrow_mut().set_waiter(cx);
        }
    }

    /// With a socket write in flight: moves the write direction to a pusher task, which sends
    /// what is staged behind it when it completes (and the rest of a short write) without this
    /// value being polled again.
    fn push(&mut self, fd: RawFd) {
        if !O::THREAD_BOUND
            || self.kind != Kind::Socket
            || self.pushed.is_some()
            || self.no_push
            || self.w.write_op.is_none()
            || !self.ops.pushes()
        {
            return;
        }
        let w = std::mem::replace(&mut self.w, WriteDir::new());
        let handle = push::Handle::new(w);
        match self.ops.spawn_pusher(&handle, fd) {
            true => self.pushed = Some(Bound(handle)),
            false => {
                // No runtime to run it: the value keeps driving its writes.
                if let Ok(cell) = std::rc::Rc::try_unwrap(handle.shared) {
                    self.w = cell.into_inner().w;
                }
            }
        }
    }

    /// Nothing of this machine's writes pending (the write-behind driven to its end, its error
    /// reported): the caller may then write the socket itself without reordering bytes.
    #[cfg(feature = "tokio")]
    pub(crate) fn poll_write_idle(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.check_thread()?;
        self.poll_write_done(fd, cx)
    }

    /// Drives the write in flight to its end, then reports its error if it had one.
    fn poll_write_done(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(p) = &self.pushed {
            // Waiting for the pusher: drive its state here (no hop through it).
            let shared = p.0.shared.clone();
            std::task::ready!(push::drive_in_place(
                &shared,
                &mut self.w,
                &self.ops,
                fd,
                self.kind,
                cx
            ));
            self.pushed = None;
        }
        if self.drive_write(fd, cx).is_pending() {
            self.wait_pusher(cx);
            return Poll::Pending;
        }
        match self.w.write_err.take() {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Ready(Ok(())),
        }
    }

    pub(crate) fn poll_write(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(fd, cx, &[io::IoSlice::new(src)])
    }

    /// `poll_write` of the bytes of `bufs`, in order, as one write: as many as one write takes
    /// (`max_buf`, or the room left in the staging buffer) are accepted.
    pub(crate) fn poll_write_vectored(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check_thread()?;
        if self.kind == Kind::File {
            std::task::ready!(self.poll_give_back(fd, cx))?;
        }
        let idle = self.drive_write(fd, cx).is_ready();
        if let Some(e) = self.w.write_err.take() {
            return Poll::Ready(Err(e));
        }
        let total = bufs.iter().map(|b| b.len()).sum::<usize>();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        if !idle {
            // A write in flight: the bytes are staged, written after it (at the position it
            // leaves, for a file), at most `max_buf` of them; a socket that does not stage
            // (`Ops::stage_sockets`) waits for the write, taking nothing.
            // While a pusher holds the write direction (`drive_write` left `cx` with it to be
            // woken when it makes room or ends), the bytes are staged there.
            let stage = self.kind == Kind::File || self.ops.stage_sockets();
            if !stage {
                self.wait_pusher(cx);
                return Poll::Pending;
            }
            let n = match &self.pushed {
                Some(p) => p.0.shared.borrow_mut().w.stage(bufs, total, self.max_buf),
                None => self.w.stage(bufs, total, self.max_buf),
            };
            if n == 0 {
                self.wait_pusher(cx);
                return Poll::Pending;
            }
            return Poll::Ready(Ok(n));
        }
        // Nothing in flight: a socket sends inline first (`crate::send_path`); what that did
        // not send goes to the ring.
        let mut sent = 0;
        if self.kind == Kind::Socket {
            match self.ops.try_send(fd, bufs) {
                Inline::Sent(n) if n >= total => return Poll::Ready(Ok(total)),
                Inline::Sent(n) => sent = n,
                Inline::Failed(e) => return Poll::Ready(Err(e)),
                Inline::Ring => {}
            }
        }
        let mut buf = self.w.write_buf.take().unwrap_or_default();
        let n = (total - sent).min(self.max_buf);
        grow(&mut buf, n, self.max_buf);
        extend_from(&mut buf, bufs, sent, n);
        self.w.write_done = 0;
        self.w.submit_write(&self.ops, fd, self.kind, buf, cx);
        // Push it now; its completion is collected by the next call (or by the pusher, which
        // wakes nobody: this call returns `Ready`).
        let failed = match self.drive_write(fd, cx) {
            Poll::Ready(()) => self.w.write_err.take(),
            Poll::Pending => None,
        };
        if let Some(e) = failed {
            if sent > 0 {
                // The inline part went out: say so, and the error comes with the next call.
                self.w.write_err = Some(e);
                return Poll::Ready(Ok(sent));
            }
            // The bytes were accepted, then failed at once: report it now (nothing of them
            // was written, the caller may retry).
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(sent + n))
    }

    /// Files, before a write at the file's position: the read in flight finishes (its result,
    /// error included, is only kept as unread bytes), and bytes read ahead and not handed out
    /// are given back (`lseek` back by their number, then dropped), so the write lands right
    /// after the last byte the caller was given. A file with no position (a pipe, a terminal:
    /// `ESPIPE`) keeps them for the next read. The read-ahead starts over.
    fn poll_give_back(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(op) = &mut self.read_op {
            let (_, slice) = std::task::ready!(Pin::new(op).poll(cx));
            self.read_op = None;
            // By the read rule its length is what arrived (0 on error).
            self.read_buf = Some(slice.into_inner());
            self.read_pos = 0;
        }
        self.read_ahead = 0;
        let unread = self.unread();
        if unread == 0 {
            return Poll::Ready(Ok(()));
        }
        // A buffer holds at most MAX_BUF_BYTES (1 GiB): the count fits an off_t.
        let back = -(unread as libc::off_t);
        // SAFETY: lseek(2) has no memory-safety preconditions.
        if unsafe { libc::lseek(fd, back, libc::SEEK_CUR) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ESPIPE) {
                return Poll::Ready(Ok(()));
            }
            return Poll::Ready(Err(e));
        }
        if let Some(b) = &mut self.read_buf {
            b.clear();
        }
        self.read_pos = 0;
        Poll::Ready(Ok(()))
    }

    pub(crate) fn poll_flush(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_thread()?;
        self.poll_write_done(fd, cx)
    }

    /// Starts a seek of a file (`AsyncSeek::start_seek`); `poll_seek` completes it.
    pub(crate) fn start_seek(&mut self, pos: io::SeekFrom) -> io::Result<()> {
        if self.seek.is_some() {
            return Err(io::Error::other(
                "start_seek called while an earlier seek is not complete",
            ));
        }
        self.seek = Some(pos);
        Ok(())
    }

    /// Forgets a seek that was started and not completed.
    pub(crate) fn take_seek(&mut self) -> Option<io::SeekFrom> {
        self.seek.take()
    }

    /// Completes the seek `start_seek` began (or, without one, reports the position): the
    /// write-behind is flushed and a read in flight finishes first (both move the file's
    /// position); bytes read ahead and not handed out are given back by seeking relative to
    /// the position the caller has seen, then dropped. Returns the new position.
    pub(crate) fn poll_seek(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        self.check_thread()?;
        if let Err(e) = std::task::ready!(self.poll_write_done(fd, cx)) {
            self.seek = None;
            return Poll::Ready(Err(e));
        }
        if let Some(op) = &mut self.read_op {
            let (_, slice) = std::task::ready!(Pin::new(op).poll(cx));
            self.read_op = None;
            // By the read rule its length is what arrived (0 on error): unread bytes.
            self.read_buf = Some(slice.into_inner());
            self.read_pos = 0;
        }
        let unread = self.unread() as i64;
        self.read_ahead = 0;
        let (offset, whence) = match self.seek.take().unwrap_or(io::SeekFrom::Current(0)) {
            io::SeekFrom::Start(n) => match i64::try_from(n) {
                Ok(n) => (n, libc::SEEK_SET),
                Err(_) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "seek position past what off_t can hold",
                    )))
                }
            },
            io::SeekFrom::End(n) => (n, libc::SEEK_END),
            io::SeekFrom::Current(n) => (n.saturating_sub(unread), libc::SEEK_CUR),
        };
        // SAFETY: lseek(2) has no memory-safety preconditions.
        let pos = unsafe { libc::lseek(fd, offset, whence) };
        if pos < 0 {
            return Poll::Ready(Err(io::Error::last_os_error()));
        }
        if let Some(b) = &mut self.read_buf {
            b.clear();
        }
        self.read_pos = 0;
        Poll::Ready(Ok(pos as u64))
    }

    pub(crate) fn poll_close(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_thread()?;
        std::task::ready!(self.poll_write_done(fd, cx))?;
        if self.kind == Kind::File {
            return Poll::Ready(Ok(()));
        }
        let ops = &self.ops;
        let op = self.shutdown.get_or_insert_with(|| ops.shutdown(fd));
        let res = std::task::ready!(Pin::new(op).poll(cx));
        self.shutdown = None;
        // Shutting down twice (or a peer already gone) is not an error worth reporting.
        match res {
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Poll::Ready(Ok(())),
            r => Poll::Ready(r),
        }
    }
}

/// The write direction of a [`PollIo`]: the write in flight, the rest of a short write, the
/// bytes staged behind it, and a write-behind's error for the next call. Held by the value, or
/// while a socket's writes push themselves, by its pusher (`push`).
pub(crate) struct WriteDir<O: Ops> {
    /// The write buffer when no write is in flight (empty: nothing pending).
    write_buf: Option<Vec<u8>>,
    /// Bytes of the write buffer already written.
    write_done: usize,
    /// The length of the write buffer in flight (its bytes from `write_done` on are pending).
    write_len: usize,
    write_op: Option<O::Write>,
    /// Bytes accepted while a write was in flight, written after it (at most `max_buf`;
    /// empty: none).
    write_staging: Vec<u8>,
    /// The error of a write-behind, for the next call.
    write_err: Option<io::Error>,
}

impl<O: Ops> WriteDir<O> {
    fn new() -> WriteDir<O> {
        WriteDir {
            write_buf: None,
            write_done: 0,
            write_len: 0,
            write_op: None,
            write_staging: Vec::new(),
            write_err: None,
        }
    }

    /// How many bytes the writes accepted and are not known to have written.
    fn pending_bytes(&self) -> usize {
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
    fn stage(&mut self, bufs: &[io::IoSlice<'_>], total: usize, max_buf: usize) -> usize {
        let room = max_buf.saturating_sub(self.write_staging.len());
        let n = total.min(room);
        if n > 0 {
            grow(&mut self.write_staging, n, max_buf);
            extend_from(&mut self.write_staging, bufs, 0, n);
        }
        n
    }

    /// Drives the write in flight (see `PollIo::drive_write`).
    fn drive(&mut self, ops: &O, fd: RawFd, kind: Kind, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(op) = &mut self.write_op {
                let (res, slice) = std::task::ready!(Pin::new(op).poll(cx));
                self.write_op = None;
                let mut buf = slice.into_inner();
                match res {
                    Ok(0) => {
                        buf.clear();
                        self.write_err = Some(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "failed to write the whole buffer",
                        ));
                    }
                    Ok(n) => self.write_done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
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
    fn send_staged(
        &mut self,
        ops: &O,
        fd: RawFd,
        kind: Kind,
        mut buf: Vec<u8>,
        cx: &mut Context<'_>,
    ) {
        if kind == Kind::Socket {
            match ops.try_send(fd, &[io::IoSlice::new(&buf)]) {
                Inline::Sent(n) if n >= buf.len() => {
                    buf.clear();
                    self.write_buf = Some(buf);
                    return;
                }
                Inline::Sent(n) => self.write_done = n,
                Inline::Failed(e) => {
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
    fn submit_write(
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
fn grow(buf: &mut Vec<u8>, extra: usize, max: usize) {
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
fn extend_from(buf: &mut Vec<u8>, bufs: &[io::IoSlice<'_>], mut skip: usize, mut n: usize) {
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
