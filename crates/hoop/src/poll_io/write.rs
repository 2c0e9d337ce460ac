//! The write direction of a [`PollIo`]: write-behind into the internal buffers, the pusher
//! handing-over of a socket's writes, a file's read-ahead given back before it writes, flush
//! and close.

use std::future::Future as _;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::local::Bound;
use super::ops::{extend_from, grow, Handle, Kind, Ops, WriteDir};
use super::{push, PollIo};
use crate::send_path::Inline;

impl<O: Ops> PollIo<O> {
    /// Drives the write in flight (and the rest of a short write, and the staged bytes) as far
    /// as it goes without waiting; an error is kept in `write_err`. `Ready` once nothing is in
    /// flight. A socket whose writes push themselves hands a write still in flight to its
    /// pusher (`push`); while the pusher runs this is `Pending`, and a caller that returns
    /// `Pending` then registers `cx` with [`wait_pusher`](Self::wait_pusher) (only those: a
    /// waiter registered by a call that returned `Ready` would be woken for nothing).
    pub(super) fn drive_write(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<()> {
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
    pub(super) fn reclaim(&mut self) -> bool {
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
    pub(super) fn wait_pusher(&self, cx: &Context<'_>) {
        if let Some(p) = &self.pushed {
            p.0.shared.borrow_mut().set_waiter(cx);
        }
    }

    /// With a socket write in flight: moves the write direction to a pusher task, which sends
    /// what is staged behind it when it completes (and the rest of a short write) without this
    /// value being polled again.
    pub(super) fn push(&mut self, fd: RawFd) {
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
        let handle = Handle::new(w);
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
    pub(super) fn poll_write_done(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
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
        match self.take_write_err() {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Ready(Ok(())),
        }
    }

    /// The write-behind's error, for the caller. A socket whose failed write-behind lost bytes
    /// it had accepted writes nothing more: from then on every write, flush and close fails
    /// (`BrokenPipe`). Bytes written after the hole would reach the peer as if none were
    /// missing: TLS records it cannot decrypt, a protocol stream misread. A file goes on (as
    /// `tokio::fs::File` does after a failed write): a write lands at the file's position.
    fn take_write_err(&mut self) -> Option<io::Error> {
        if self.w.broken {
            return Some(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "an earlier write of this socket failed after its bytes were accepted: they \
                 were lost, so nothing more is written after them",
            ));
        }
        let e = self.w.write_err.take()?;
        if self.kind == Kind::Socket && self.w.write_err_bytes > 0 {
            self.w.broken = true;
        }
        self.w.write_err_bytes = 0;
        Some(e)
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
        if let Some(e) = self.take_write_err() {
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
            self.writes_since_flush = self.writes_since_flush.saturating_add(1);
            return Poll::Ready(Ok(n));
        }
        // Nothing in flight: a socket sends inline first (`crate::send_path`); what that did
        // not send goes to the ring.
        let mut sent = 0;
        if self.kind == Kind::Socket {
            let answer = self.answers && self.writes_since_flush == 0;
            self.writes_since_flush = self.writes_since_flush.saturating_add(1);
            match self.ops.try_send(fd, bufs, answer) {
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
            // What of this write went out before the error: the inline part, and what the
            // ring wrote before it failed (a short send, then the rest failing at once: `drive`
            // counted the rest in `write_err_bytes`; nothing was staged, the value was idle).
            let out = sent + n.saturating_sub(self.w.write_err_bytes);
            // Only `out` is reported as accepted (the rest was not): no hole.
            self.w.write_err_bytes = 0;
            if out > 0 {
                // Say what went out, and the error comes with the next call.
                self.w.write_err = Some(e);
                return Poll::Ready(Ok(out));
            }
            // Nothing of the bytes was written: report it now (the caller may retry).
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(sent + n))
    }

    /// Files, before a write at the file's position: the read in flight finishes (its result,
    /// error included, is only kept as unread bytes), and bytes read ahead and not handed out
    /// are given back (`lseek` back by their number, then dropped), so the write lands right
    /// after the last byte the caller was given. A file with no position (a pipe, a terminal:
    /// `ESPIPE`) keeps them for the next read. The read-ahead starts over.
    pub(super) fn poll_give_back(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
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
        self.end_write_cycle();
        self.poll_write_done(fd, cx)
    }

    /// A flush or close ends a cycle of writes: whether it held one write at most (an answer)
    /// decides whether the next cycle's first write is tried inline (`SendPath::adaptive`).
    /// A flush with no write since the last one changes nothing.
    fn end_write_cycle(&mut self) {
        if self.writes_since_flush > 0 {
            self.answers = self.writes_since_flush == 1;
            self.writes_since_flush = 0;
        }
    }

    pub(crate) fn poll_close(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_thread()?;
        self.end_write_cycle();
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
