//! The read direction of a [`PollIo`]: reads into the internal buffer, copied out, with the
//! file read-ahead and a read given up kept for the next call.

use std::future::Future as _;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop_driver::IoBuf;

use super::ops::{Kind, Ops, BUF_BYTES};
use super::PollIo;
use crate::net::kept::{Kept, Outcome};

impl<O: Ops> PollIo<O> {
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
                // The slice's range is what the read asked for; the buffer's length what came.
                let asked = slice.bytes_total();
                let buf = slice.into_inner();
                self.drained = buf.len() < asked;
                self.read_buf = Some(buf);
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
            let poll_first = self.drained && self.kind == Kind::Socket;
            self.read_op = Some(self.ops.read(fd, self.kind, slice, poll_first));
        }
    }
}
