//! The body senders: what `out` holds in one send, a cached body from where it is, an open
//! file by `sendfile(2)` behind the head (sent with `MSG_MORE`), or read and sent a chunk at
//! a time.

use std::io;
use std::time::Instant;

use hoop::IoBuf;

use super::head::Rep;
use super::Conn;
use crate::cache::{Entry, FdEntry};
use crate::parse::Request;
use crate::status::Status;

/// A cached body (or a range of it) sent without copying it.
struct BodySlice {
    body: bytes::Bytes,
    start: usize,
    end: usize,
}

// SAFETY: the bytes live in the `Bytes`' heap allocation, which never moves and is never
// written (`Bytes` is immutable); the value keeps it alive; `start..end` is inside it.
unsafe impl IoBuf for BodySlice {
    fn stable_ptr(&self) -> *const u8 {
        self.body[self.start..].as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.end - self.start
    }
    fn bytes_total(&self) -> usize {
        self.end - self.start
    }
}

impl Conn<'_> {
    /// Sends everything in `out`, under the idle deadline; false if that failed.
    pub(super) async fn flush(&mut self) -> bool {
        let out = std::mem::take(&mut self.out);
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        let Some((res, mut out)) = self.timer.run(self.stream.write_all(out)).await else {
            return false;
        };
        out.clear();
        self.out = out;
        res.is_ok()
    }

    /// Sends the connection's last responses: on a plain socket with `MSG_MORE`, so that the
    /// close (or the linger's shutdown) that follows at once carries the FIN in the same
    /// segment as the last bytes (one segment and one wake-up of the client fewer: nginx's
    /// `tcp_nopush` does the same); through the ring otherwise.
    pub(super) async fn flush_last(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(fd) = self.stream.as_tcp_stream().map(|s| s.as_raw_fd()) else {
            return self.flush().await;
        };
        let out = std::mem::take(&mut self.out);
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        let sent = self.timer.run(send_more(fd, &out)).await;
        sent == Some(true)
    }

    /// Answers from an open file (kept, or just opened): the head, then the body by
    /// `sendfile(2)`. `None` if the connection failed.
    pub(super) async fn send_by_fd(
        &mut self,
        req: &Request,
        entry: &FdEntry,
        rep: Rep,
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Option<Status> {
        let validators = (&*entry.etag, &*entry.last_modified);
        let (status, (start, len)) =
            self.answer_head(req, &entry.meta, validators, rep, date, (keep, head_only));
        if head_only || len == 0 {
            return Some(status);
        }
        if let Some(parts) = self.parts.take() {
            let source = super::parts::Source::Sendfile(&entry.file);
            return self.send_parts(source, &parts).await.then_some(status);
        }
        let file = entry.file.clone();
        self.sendfile_body(&file, start, len)
            .await
            .then_some(status)
    }

    /// Answers from a cached file: header and body copied into one send when they fit,
    /// else the body sent from the cache as it is.
    pub(super) async fn send_cached(
        &mut self,
        req: &Request,
        entry: &Entry,
        rep: Rep,
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Option<Status> {
        let validators = (&*entry.etag, &*entry.last_modified);
        let (status, (start, len)) =
            self.answer_head(req, &entry.meta, validators, rep, date, (keep, head_only));
        if head_only || len == 0 {
            return Some(status);
        }
        if let Some(parts) = self.parts.take() {
            let source = super::parts::Source::Memory(&entry.body);
            return self.send_parts(source, &parts).await.then_some(status);
        }
        let (start, end) = (start as usize, (start + len) as usize);
        if self.out.len() + (end - start) <= self.sh.cfg.one_send_max_bytes {
            self.out.extend_from_slice(&entry.body[start..end]);
            return Some(status);
        }
        if !self.flush().await {
            return None;
        }
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        let sent = match self.stream.as_h2() {
            // An HTTP/2 stream takes the cached bytes as they are (no copy into its frames).
            Some(h2) => {
                let body = entry.body.slice(start..end);
                self.timer.run(h2.write_bytes(body)).await.map(|r| (r, ()))
            }
            None => {
                let body = BodySlice {
                    body: entry.body.clone(),
                    start,
                    end,
                };
                let sent = self.timer.run(self.stream.write_all(body)).await;
                sent.map(|(r, _)| (r, ()))
            }
        };
        match sent {
            Some((Ok(()), ())) => Some(status),
            _ => None,
        }
    }

    /// Sends what `out` holds, then `len` bytes of `file` from `start` with `sendfile(2)`, under
    /// the idle deadline: the pending bytes go first with `MSG_MORE`, so the head and the first
    /// body bytes leave in the same segments (nginx's `tcp_nopush`). Both are system calls on
    /// this thread while the socket has room; the task waits through the driver when it has
    /// none. False if the connection failed or the file ended early (it shrank).
    pub(super) async fn sendfile_body(
        &mut self,
        file: &hoop::fs::File,
        start: u64,
        len: u64,
    ) -> bool {
        use std::os::fd::AsRawFd;
        let Some(tcp) = self.stream.as_tcp_stream() else {
            return false;
        };
        let fd = tcp.as_raw_fd();
        let out = std::mem::take(&mut self.out);
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        let sent = self
            .timer
            .run(async {
                if !send_more(fd, &out).await {
                    return false;
                }
                let (mut pos, end) = (start, start + len);
                while pos < end {
                    let want = (end - pos).min(SENDFILE_CHUNK_BYTES) as usize;
                    match tcp.send_file(file, pos, want).await {
                        Ok(n) if n > 0 => pos += n as u64,
                        _ => return false,
                    }
                }
                true
            })
            .await;
        let mut out = out;
        out.clear();
        self.out = out;
        sent == Some(true)
    }

    /// Sends `len` bytes of `file` from `start` after what `out` holds, a chunk at a time: each
    /// read lands behind the pending bytes, so the head goes out with the first chunk; `out`
    /// is sent once it holds `batch_bytes` (0: after every chunk; the parts of a multipart
    /// answer pass a batch, so a big file's small parts go out together). A file that ends
    /// early (it shrank) ends the connection: the promised length cannot be kept.
    pub(super) async fn stream_file(
        &mut self,
        file: &hoop::fs::File,
        (start, len): (u64, u64),
        batch_bytes: usize,
    ) -> bool {
        let chunk = self.sh.cfg.stream_chunk_bytes as u64;
        let (mut pos, end) = (start, start + len);
        while pos < end {
            let want = chunk.min(end - pos) as usize;
            let mut out = std::mem::take(&mut self.out);
            let at = out.len();
            out.reserve(want);
            let (res, slice) = file.read_at(out.slice(at..at + want), pos).await;
            self.out = slice.into_inner();
            match res {
                Ok(n) if n > 0 => pos += n as u64,
                _ => return false,
            }
            if self.out.len() >= batch_bytes && !self.flush().await {
                return false;
            }
        }
        true
    }
}

/// Most bytes one `sendfile(2)` is asked for (it returns sooner when the socket fills).
const SENDFILE_CHUNK_BYTES: u64 = 1 << 30;

/// Sends all of `bytes` on the socket `fd` with `MSG_MORE` (held back until the next send
/// fills a segment or ends the response), waiting through the driver while there is no room.
async fn send_more(fd: i32, bytes: &[u8]) -> bool {
    let mut sent = 0;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: `rest` is valid for its length for the call; `fd` is the connection's socket,
        // open while its stream is borrowed by the caller.
        let r = unsafe {
            libc::send(
                fd,
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_MORE | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r > 0 {
            sent += r as usize;
            continue;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) if r < 0 => {
                if hoop::driver::Op::new(hoop::driver::op::PollOnce::writable(fd))
                    .await
                    .is_err()
                {
                    return false;
                }
            }
            Some(libc::EINTR) if r < 0 => {}
            _ => return false,
        }
    }
    true
}

/// Reads up to `size` bytes from the start of `file` (fewer if it shrank meanwhile).
pub(super) async fn read_whole(file: &hoop::fs::File, size: u64) -> Option<Vec<u8>> {
    let size = usize::try_from(size).ok()?;
    let mut buf: Vec<u8> = Vec::with_capacity(size);
    while buf.len() < size {
        let at = buf.len();
        let (res, b) = file.read_at(buf.slice(at..size), at as u64).await;
        buf = b.into_inner();
        match res {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    Some(buf)
}
