//! Seeking a file through the poll state (`AsyncSeek`): after its writes are flushed and a
//! read in flight finished, giving back the bytes read ahead.

use std::future::Future as _;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::ops::Ops;
use super::PollIo;

impl<O: Ops> PollIo<O> {
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
}
