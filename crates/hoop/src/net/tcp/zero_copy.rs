//! TCP I/O that skips a copy: zero-copy sends, and reads and writes of registered buffers.

use std::io;
use std::os::fd::AsRawFd;

use hoop_driver::{op, BufResult, IoBuf, IoBufMut, MultiOp};

use super::stream::TcpStream;

impl TcpStream {
    /// Sends the initialized bytes of `buf` once with zero-copy send (`IORING_OP_SEND_ZC`);
    /// returns how many were sent, like [`write`](Self::write). The buffer comes back only
    /// after the kernel's notification that it no longer references the pages (for TCP, once
    /// the data was acknowledged), not merely after the send's result. Dropping the future in
    /// flight cancels the send; the driver then keeps the buffer until that notification.
    ///
    /// Without `SEND_ZC` (kernels before 6.0, the epoll driver) it is a plain send. Zero copy
    /// pays off for large buffers; for small ones a plain [`write`](Self::write) is cheaper.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub async fn send_zc<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        let mut op = MultiOp::new(op::SendZc::new(self.socket.as_raw_fd(), buf));
        loop {
            // One item (the send's result), then the end: the notification CQE.
            while op.next().await.is_some() {}
            match op.into_data() {
                Ok(data) => return data.into_result(),
                // Not reachable once the stream ended; if it were, wait for the end again.
                Err(again) => op = again,
            }
        }
    }

    /// Sends every initialized byte of `buf` with [`send_zc`](Self::send_zc), in as many sends
    /// as it takes.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub async fn send_zc_all<B: IoBuf>(&self, buf: B) -> BufResult<(), B> {
        let total = buf.bytes_init();
        let mut sent = 0;
        let mut buf = buf;
        while sent < total {
            let (res, slice) = self.send_zc(buf.slice(sent..total)).await;
            buf = slice.into_inner();
            match res {
                Ok(0) => {
                    return (
                        Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "failed to write whole buffer",
                        )),
                        buf,
                    )
                }
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Reads into a buffer of a [`FixedBufPool`](crate::FixedBufPool) (a
    /// [`FixedBuf`](crate::FixedBuf) or a slice of one), from its start up to its capacity;
    /// `Ok(0)` is end of stream. `READ_FIXED` when the pool is registered with this thread's
    /// ring, else a plain read into the same memory.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: bytes received for a dropped call are lost with its
    /// registered buffer. In `select!`, use [`read`](Self::read).
    pub async fn read_fixed<B>(&self, buf: B) -> BufResult<usize, B>
    where
        B: hoop_driver::FixedIoBuf + IoBufMut,
    {
        let fd = self.socket.as_raw_fd();
        hoop_driver::Op::new(op::ReadFixed::new(fd, buf, op::CURRENT_POS)).await
    }

    /// Writes the initialized bytes of a buffer of a [`FixedBufPool`](crate::FixedBufPool)
    /// once; returns how many were sent (maybe fewer: write the rest from
    /// `buf.slice(n..len)`). `WRITE_FIXED` when the pool is registered with this thread's ring,
    /// else a plain write. Like `write(2)`, a write to a connection the peer closed raises
    /// `SIGPIPE` unless the process ignores it (Rust programs do by default) and fails with
    /// `BrokenPipe`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub async fn write_fixed<B>(&self, buf: B) -> BufResult<usize, B>
    where
        B: hoop_driver::FixedIoBuf,
    {
        let fd = self.socket.as_raw_fd();
        hoop_driver::Op::new(op::WriteFixed::new(fd, buf, op::CURRENT_POS)).await
    }
}
