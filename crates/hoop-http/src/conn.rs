//! One connection, from its first byte to its close: read, parse every complete request,
//! answer them in order (pipelined responses gathered into one send), wait for more under the
//! header or idle deadline, and close cleanly.
//!
//! Memory per connection is bounded: the unparsed input never exceeds one request head's limits
//! plus one received buffer (a longer head is refused with 414 or 431), and responses are sent
//! before more input is parsed, so a client that stops reading holds at most the responses
//! that fit its socket buffers and one batch, then its connection is closed at the idle
//! deadline.

use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hoop::net::{DirectRecvStream, DirectTcpStream};
use hoop::{BufRing, IoBuf};

use super::access_log::{AccessLogEntry, Hook, RequestLine};
use super::cache::{variant_key, Cache, Entry, FdEntry};
use super::config::Config;
use super::date::DateCache;
use super::deadline::{Deadlines, Timer};
use super::encoding::Coding;
use super::parse::{parse, Method, Parsed, Request};
use super::resolve::{decode, open_error_status, Root};
use super::response::{decide, write_status, Decision, FileMeta, Head};
use super::splice::PipePool;
use super::status::Status;

/// What the connections of one server thread share.
#[derive(Debug)]
pub struct Shared {
    /// Limits and timeouts.
    pub cfg: Arc<Config>,
    /// The served directory.
    pub root: Arc<Root>,
    /// This thread's file cache.
    pub cache: RefCell<Cache>,
    /// This thread's connection deadlines.
    pub deadlines: Rc<Deadlines>,
    /// The formatted `Date`.
    pub date: RefCell<DateCache>,
    /// Connections of this thread answering a request right now (shutdown waits for them).
    pub busy: Cell<usize>,
    /// Shutdown began: answer what is in hand with `Connection: close`, take nothing new.
    pub stopping: Cell<bool>,
    /// Connections of this thread waiting for a request with none begun (idle keep-alive
    /// connections, and new ones that sent nothing yet): the shutdown closes them.
    pub idle: Cell<usize>,
    /// Open connections over every thread (for `--max-conns`).
    pub open_conns: Arc<AtomicUsize>,
    /// Pipes for splicing big files; `None` where splice is not used (an io_uring without
    /// `IORING_OP_SPLICE`, or `HOOP_HTTP_NO_SPLICE` set).
    pub pipes: Option<PipePool>,
    /// The access-log hook, if any.
    pub log: Option<Hook>,
    /// Requests answered on this thread.
    pub requests: Cell<u64>,
    /// Precompressed variants found missing lately (not looked for again for a second).
    pub missing: RefCell<super::cache::Missing>,
    /// Connections of this thread reading through the buffer ring right now.
    pub ring_readers: Cell<usize>,
    /// Past this many ring readers, a connection on a buffer ring in user memory reads by
    /// readiness instead (half the ring's buffers; `HOOP_HTTP_RING_READERS_MAX` for tests).
    pub ring_readers_max: usize,
    /// Where readiness reads land before they are appended to a connection's input (only
    /// borrowed during one `recv(2)`, never across an await).
    pub scratch: RefCell<Vec<u8>>,
}

/// Counts the connection as open until dropped.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts the connection in a per-thread tally (busy, reading through the ring) until dropped.
struct CountGuard<'a>(&'a Cell<usize>);

impl<'a> CountGuard<'a> {
    fn new(c: &'a Cell<usize>) -> Self {
        c.set(c.get() + 1);
        CountGuard(c)
    }
}

impl Drop for CountGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Where received bytes come from: a multishot recv on the thread's buffer ring (the best
/// path), or single reads into a buffer of the connection's own.
enum Reader<'a> {
    Ring(DirectRecvStream<'a>),
    Plain(&'a DirectTcpStream, Vec<u8>),
    /// Wait for readability (no buffer held), then `recv(2)` into the thread's scratch.
    Ready(i32, &'a RefCell<Vec<u8>>),
}

/// Bytes one single read asks for.
pub(crate) const READ_BYTES: usize = 16 * 1024;

impl Reader<'_> {
    /// Appends what arrives next to `input`; 0 at end of stream.
    async fn read_into(&mut self, input: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Reader::Ring(rx) => match rx.next().await {
                Some(Ok(buf)) => {
                    input.extend_from_slice(&buf);
                    Ok(buf.len())
                }
                Some(Err(e)) => Err(e),
                None => Ok(0),
            },
            Reader::Ready(fd, scratch) => loop {
                let r = {
                    let mut b = scratch.borrow_mut();
                    // SAFETY: `b` is valid for writes of its length for the call; `fd` is the
                    // connection's socket, open while the stream is borrowed.
                    let r = unsafe {
                        libc::recv(*fd, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT)
                    };
                    if r >= 0 {
                        input.extend_from_slice(&b[..r as usize]);
                    }
                    r
                };
                if r >= 0 {
                    return Ok(r as usize);
                }
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => {
                        let readable = hoop::driver::op::PollOnce::new(*fd, libc::POLLIN as u32);
                        hoop::driver::Op::new(readable).await?;
                    }
                    Some(libc::EINTR) => {}
                    _ => return Err(e),
                }
            },
            Reader::Plain(stream, buf) => {
                let mut b = std::mem::take(buf);
                b.clear();
                let (res, b) = stream.read(b).await;
                *buf = b;
                let n = res?;
                input.extend_from_slice(&buf[..n]);
                Ok(n)
            }
        }
    }
}

/// A cached body (or a range of it) sent without copying it.
struct BodySlice {
    body: Rc<[u8]>,
    start: usize,
    end: usize,
}

// SAFETY: the bytes live in the `Rc`'s heap allocation, which never moves and is never written
// (an `Rc<[u8]>` is immutable); the value keeps it alive; `start..end` is inside it.
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

/// Serves one accepted connection until it closes. `ring`: the thread's buffer ring, if any.
pub async fn serve(stream: DirectTcpStream, ring: Option<BufRing>, sh: Rc<Shared>) {
    let _open = OpenGuard(sh.open_conns.clone());
    let timer = sh.deadlines.register();
    let mut conn = Conn {
        sh: &sh,
        stream: &stream,
        timer: &timer,
        out: Vec::with_capacity(4096),
        remote: sh.log.as_ref().and_then(|_| stream.peer_addr().ok()),
        file_body: Cell::new(0),
    };
    // A buffer ring in user memory (the epoll driver, or a kernel without ring-mapped
    // buffers) holds a buffer per waiting read: past half its buffers, a connection waits for
    // readability with no buffer and reads into the thread's scratch instead (nginx's way with
    // idle keep-alive connections), so thousands of idle connections never drain the ring.
    let ring = ring.filter(|r| r.is_kernel() || sh.ring_readers.get() < sh.ring_readers_max);
    let _ring_reader = ring.as_ref().map(|_| CountGuard::new(&sh.ring_readers));
    let mut reader = match (&ring, stream.as_tcp_stream()) {
        (Some(r), _) => Reader::Ring(stream.recv_stream(r)),
        (None, Some(tcp)) => {
            use std::os::fd::AsRawFd;
            Reader::Ready(tcp.as_raw_fd(), &sh.scratch)
        }
        (None, None) => Reader::Plain(&stream, Vec::with_capacity(READ_BYTES)),
    };
    let linger = conn.run(&mut reader).await;
    drop(reader);
    if linger {
        conn.linger().await;
    }
}

/// One connection's state while it is served.
struct Conn<'a> {
    sh: &'a Shared,
    stream: &'a DirectTcpStream,
    timer: &'a Timer,
    /// Responses not sent yet.
    out: Vec<u8>,
    /// The client's address, where known and logged.
    remote: Option<SocketAddr>,
    /// Body bytes of the file response being answered (for the access log).
    file_body: Cell<u64>,
}

impl Conn<'_> {
    /// The request loop. Returns whether the close should linger: the connection ends with a
    /// response the client should read while request bytes may still be unread (an error
    /// status, a body not taken, pipelined requests after a `Connection: close`); a clean
    /// close, a timeout, an error or the client's close return false.
    async fn run(&mut self, reader: &mut Reader<'_>) -> bool {
        let cfg = self.sh.cfg.clone();
        let mut input: Vec<u8> = Vec::new();
        // The head being received must be complete by this time (the first one counts from
        // the connection's start, later ones from their first byte).
        let mut head_deadline = Instant::now() + cfg.header_timeout;
        let mut awaiting_first = true;
        loop {
            let had_request = start_of_request(&input);
            let deadline = if awaiting_first || had_request {
                head_deadline
            } else {
                Instant::now() + cfg.idle_timeout
            };
            // Waiting with no request begun is idle: the shutdown ends the wait (through the
            // timer, `Deadlines::expire_idle`), and one that began before this wait is not
            // waited for at all.
            let idle = (!had_request).then(|| CountGuard::new(&self.sh.idle));
            if idle.is_some() {
                if self.sh.stopping.get() {
                    return false;
                }
                self.timer.set_idle(deadline);
            } else {
                self.timer.set(deadline);
            }
            let read = self.timer.run(reader.read_into(&mut input)).await;
            drop(idle);
            match read {
                Some(Ok(n)) if n > 0 => {}
                // End of stream, an error, the deadline passed, or the shutdown (idle).
                _ => return false,
            }
            if !had_request && !awaiting_first && start_of_request(&input) {
                head_deadline = Instant::now() + cfg.header_timeout;
            }
            let busy = CountGuard::new(&self.sh.busy);
            let mut start = 0;
            let mut close = false;
            let mut unread = false;
            loop {
                match parse(&input[start..]) {
                    Parsed::Complete { request, len_bytes } => {
                        start += len_bytes;
                        awaiting_first = false;
                        let keep = match self.respond(&request).await {
                            Some(k) => k,
                            None => return false,
                        };
                        if !keep {
                            close = true;
                            unread = request.has_body || start < input.len();
                            break;
                        }
                        if self.out.len() >= cfg.out_batch_bytes && !self.flush().await {
                            return false;
                        }
                    }
                    Parsed::Partial => break,
                    Parsed::Invalid(status) => {
                        let date = self.sh.date.borrow_mut().now().to_string();
                        write_status(&mut self.out, Head::new(status, &date, false), false);
                        self.log_line(status);
                        close = true;
                        unread = true;
                        break;
                    }
                }
            }
            if start > 0 {
                input.drain(..start);
                if start_of_request(&input) {
                    head_deadline = Instant::now() + cfg.header_timeout;
                }
            }
            let flushed = if close {
                self.out.is_empty() || self.flush_last().await
            } else {
                self.out.is_empty() || self.flush().await
            };
            if !flushed {
                return false;
            }
            drop(busy);
            if close {
                return unread;
            }
            if self.sh.stopping.get() {
                return false;
            }
        }
    }

    /// Sends everything in `out`, under the idle deadline; false if that failed.
    async fn flush(&mut self) -> bool {
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
    async fn flush_last(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(fd) = self.stream.as_tcp_stream().map(|s| s.as_raw_fd()) else {
            return self.flush().await;
        };
        let out = std::mem::take(&mut self.out);
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        let sent = self.timer.run(send_more(fd, &out)).await;
        sent == Some(true)
    }

    /// After a final response: stop sending, and read (and drop) what the client still sends
    /// for a moment, so that unread request bytes do not make the kernel reset the connection
    /// before the client has read the response.
    async fn linger(&mut self) {
        if self.stream.shutdown_with(Shutdown::Write).await.is_err() {
            return;
        }
        self.timer.set(Instant::now() + LINGER);
        let mut left = LINGER_BYTES;
        while left > 0 {
            let buf = Vec::with_capacity(READ_BYTES);
            match self.timer.run(self.stream.read(buf)).await {
                Some((Ok(n), _)) if n > 0 => left = left.saturating_sub(n),
                _ => return,
            }
        }
    }

    /// Answers one request: appends the response to `out` (sending first whatever must go
    /// before a large body). Returns whether the connection stays open, or `None` if it failed.
    async fn respond(&mut self, req: &Request) -> Option<bool> {
        let keep = req.keep_alive && !self.sh.stopping.get();
        let head_only = req.method == Method::Head;
        let date = self.sh.date.borrow_mut().now().to_string();
        if req.method == Method::Other {
            let keep = keep && !req.has_body;
            let head = Head::new(Status::MethodNotAllowed, &date, keep);
            write_status(&mut self.out, head, false);
            self.log(req, Status::MethodNotAllowed);
            return Some(keep);
        }
        if req.has_body {
            let head = Head::new(Status::PayloadTooLarge, &date, false);
            write_status(&mut self.out, head, head_only);
            self.log(req, Status::PayloadTooLarge);
            return Some(false);
        }
        let status = match self.respond_file(req, &date, keep, head_only).await {
            Ok(Some(status)) => {
                self.log(req, status);
                return Some(keep);
            }
            Ok(None) => return None,
            Err(status) => status,
        };
        let keep = keep && !status.closes_connection();
        write_status(&mut self.out, Head::new(status, &date, keep), head_only);
        self.log(req, status);
        Some(keep)
    }

    /// Serves the file the request names. `Ok(Some(status))`: a response was written;
    /// `Ok(None)`: the connection failed; `Err(status)`: answer with that error instead.
    async fn respond_file(
        &mut self,
        req: &Request,
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Result<Option<Status>, Status> {
        let target = decode(&req.target)?;
        let rel = target.file_rel(self.sh.cfg.index.as_bytes());
        let sh = self.sh;
        let content_type = super::mime::content_type(&rel);
        // Whether a precompressed variant may answer for this file (and so `Vary`).
        let negotiable = sh.cfg.precompressed && super::mime::compressible(content_type);
        let mut rep = Rep {
            content_type,
            coding: None,
            vary: negotiable,
        };

        let mut found = match find(sh, &rel, &rel).await {
            Ok(found) => found,
            Err(status) => {
                // `/dir/` without an index: a listing with --autoindex, else 403 if the
                // directory exists.
                if target.dir_form && status == Status::NotFound {
                    if let Ok(dir) = sh.root.open_beneath(&target.rel, true).await {
                        if sh.cfg.autoindex {
                            return self
                                .send_listing(dir, &target.rel, date, keep, head_only)
                                .await;
                        }
                        return Err(Status::Forbidden);
                    }
                }
                return Err(status);
            }
        };
        if let Found::Opened(_, meta) = &found {
            if meta.is_dir() {
                if target.dir_form {
                    return Err(Status::Forbidden);
                }
                let head = Head {
                    location: Some((&target.raw_path, &target.raw_query)),
                    ..Head::new(Status::MovedPermanently, date, keep)
                };
                write_status(&mut self.out, head, head_only);
                return Ok(Some(Status::MovedPermanently));
            }
            if !meta.is_file() {
                return Err(Status::NotFound);
            }
        }

        // A precompressed variant the client takes, best first: `rel.br`, `rel.gz`, opened
        // beneath the root as the file itself, a regular file not older than it.
        if negotiable {
            let original = found.meta();
            for coding in req.accept_encoding.preferred() {
                let mut variant = rel.clone();
                variant.extend_from_slice(coding.suffix());
                let key = variant_key(&rel, coding);
                if sh.missing.borrow().is_missing(&key) {
                    continue;
                }
                match find(sh, &variant, &key).await {
                    Ok(v) if v.meta().is_file() && v.meta().not_older_than(&original) => {
                        found = v;
                        rep.coding = Some(coding);
                        break;
                    }
                    Err(Status::NotFound) => sh.missing.borrow_mut().note(key),
                    _ => {}
                }
            }
        }

        let (file, meta) = match found {
            Found::Cached(entry) => {
                return Ok(self
                    .send_cached(req, &entry, rep, date, keep, head_only)
                    .await);
            }
            Found::Fd(entry) => {
                return Ok(self
                    .send_by_fd(req, &entry, rep, date, keep, head_only)
                    .await);
            }
            Found::Opened(file, meta) => (file, meta),
        };
        let key = match rep.coding {
            Some(coding) => variant_key(&rel, coding),
            None => rel,
        };
        let sendfile =
            meta.size >= sh.cfg.sendfile_min_bytes && self.stream.as_tcp_stream().is_some();
        let splice = !sendfile && sh.pipes.is_some() && meta.size >= sh.cfg.splice_min_bytes;
        if sendfile {
            let entry = FdEntry::new(file, meta, rep.coding);
            sh.cache.borrow_mut().insert_fd(key, entry.clone());
            return Ok(self
                .send_by_fd(req, &entry, rep, date, keep, head_only)
                .await);
        }
        let cacheable = !splice
            && meta.size <= sh.cfg.cache_max_file_bytes
            && sh.cache.borrow().fits(meta.size);
        if cacheable {
            let Some(body) = read_whole(&file, meta.size).await else {
                return Err(Status::InternalServerError);
            };
            let entry = if body.len() as u64 == meta.size {
                sh.cache
                    .borrow_mut()
                    .insert(key, meta, body.into(), rep.coding)
            } else {
                // The file changed size while it was read: serve what was read, keep nothing.
                let meta = FileMeta {
                    size: body.len() as u64,
                    ..meta
                };
                Cache::new(0).insert(key, meta, body.into(), rep.coding)
            };
            return Ok(self
                .send_cached(req, &entry, rep, date, keep, head_only)
                .await);
        }
        let etag = meta.etag_for(rep.coding);
        let last_modified = super::date::format(meta.mtime_secs);
        let decision = decide(req, &meta, &etag);
        let validators = (&*etag, &*last_modified);
        let (status, range) =
            self.write_file_head(decision, &meta, date, (keep, head_only), validators, rep);
        if head_only || range.1 == 0 {
            return Ok(Some(status));
        }
        if let (true, Some(pipes)) = (splice, &sh.pipes) {
            if !self.flush().await {
                return Ok(None);
            }
            let idle = sh.cfg.idle_timeout;
            let sent = super::splice::send_file(
                pipes,
                self.stream,
                &file,
                range.0,
                range.1,
                self.timer,
                idle,
            )
            .await;
            return Ok(sent.then_some(status));
        }
        if self.stream_file(&file, range.0, range.1).await {
            Ok(Some(status))
        } else {
            Ok(None)
        }
    }

    /// Answers a directory target without an index file with its listing (`--autoindex`).
    async fn send_listing(
        &mut self,
        dir: OwnedFd,
        rel: &[u8],
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Result<Option<Status>, Status> {
        let max = super::autoindex::MAX_ENTRIES;
        let listing = match hoop::spawn_blocking(move || super::autoindex::read(dir, max)).await {
            Ok(Ok(listing)) => listing,
            Ok(Err(e)) if open_error_status(&e) == Status::Forbidden => {
                return Err(Status::Forbidden)
            }
            _ => return Err(Status::InternalServerError),
        };
        let body = super::autoindex::html(rel, &listing);
        Head {
            content_type: "text/html; charset=utf-8",
            content_length: Some(body.len() as u64),
            ..Head::new(Status::Ok, date, keep)
        }
        .write(&mut self.out);
        if !head_only {
            self.out.extend_from_slice(&body);
            self.file_body.set(body.len() as u64);
        }
        Ok(Some(Status::Ok))
    }

    /// Decides the answer for a file of identity `meta` with `(etag, last_modified)` (the
    /// conditionals and the range) and appends its head; returns the status and the body
    /// range to send (`head_only`: a HEAD, whose response never has a body).
    fn answer_head(
        &mut self,
        req: &Request,
        meta: &FileMeta,
        (etag, last_modified): (&str, &str),
        rep: Rep,
        date: &str,
        (keep, head_only): (bool, bool),
    ) -> (Status, (u64, u64)) {
        let decision = decide(req, meta, etag);
        let validators = (etag, last_modified);
        self.write_file_head(decision, meta, date, (keep, head_only), validators, rep)
    }

    /// Answers from an open file (kept, or just opened): the head, then the body by
    /// `sendfile(2)`. `None` if the connection failed.
    async fn send_by_fd(
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
        let file = entry.file.clone();
        self.sendfile_body(&file, start, len)
            .await
            .then_some(status)
    }

    /// Answers from a cached file: header and body copied into one send when they fit,
    /// else the body sent from the cache as it is.
    async fn send_cached(
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
        let (start, end) = (start as usize, (start + len) as usize);
        if self.out.len() + (end - start) <= self.sh.cfg.one_send_max_bytes {
            self.out.extend_from_slice(&entry.body[start..end]);
            return Some(status);
        }
        if !self.flush().await {
            return None;
        }
        let body = BodySlice {
            body: entry.body.clone(),
            start,
            end,
        };
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        match self.timer.run(self.stream.write_all(body)).await {
            Some((Ok(()), _)) => Some(status),
            _ => None,
        }
    }

    /// Sends what `out` holds, then `len` bytes of `file` from `start` with `sendfile(2)`, under
    /// the idle deadline: the pending bytes go first with `MSG_MORE`, so the head and the first
    /// body bytes leave in the same segments (nginx's `tcp_nopush`). Both are system calls on
    /// this thread while the socket has room; the task waits through the driver when it has
    /// none. False if the connection failed or the file ended early (it shrank).
    async fn sendfile_body(&mut self, file: &hoop::fs::File, start: u64, len: u64) -> bool {
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
    /// read lands behind the pending bytes, so the head goes out with the first chunk. A file
    /// that ends early (it shrank) ends the connection: the promised length cannot be kept.
    async fn stream_file(&mut self, file: &hoop::fs::File, start: u64, len: u64) -> bool {
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
            if !self.flush().await {
                return false;
            }
        }
        true
    }

    /// Counts the answered request and gives it to the access log, if any.
    fn log(&self, req: &Request, status: Status) {
        let method = match req.method {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Other => "OTHER",
        };
        let body = match self.body_bytes(status) {
            _ if req.method == Method::Head => 0,
            n => n,
        };
        let line = RequestLine {
            method,
            target: &req.target,
            minor_version: req.minor_version,
        };
        self.log_entry(Some(line), status, body);
    }

    /// Counts an unparsed request (answered with `status`) and logs it as `"-"`.
    fn log_line(&self, status: Status) {
        self.log_entry(None, status, self.body_bytes(status));
    }

    /// The body bytes of the response with `status` (not to `HEAD`).
    fn body_bytes(&self, status: Status) -> u64 {
        match status {
            Status::Ok | Status::PartialContent => self.file_body.take(),
            Status::NotModified => 0,
            // `write_status`'s body: `CODE REASON\n`.
            s => s.reason().len() as u64 + 5,
        }
    }

    fn log_entry(&self, request: Option<RequestLine<'_>>, status: Status, body_bytes: u64) {
        self.sh.requests.set(self.sh.requests.get() + 1);
        if let Some(Hook(hook)) = &self.sh.log {
            let time = SystemTime::now();
            // The hook cannot reach the date cache: borrowing it meanwhile is safe.
            let mut date = self.sh.date.borrow_mut();
            hook(&AccessLogEntry {
                remote: self.remote,
                request,
                status: status.code(),
                body_bytes,
                time,
                date: date.now(),
            });
        }
    }

    /// Appends the head for `decision`; returns the status and the body range to send.
    /// `head_only` (a HEAD) leaves out the body of a 416 too, whose head keeps the
    /// `Content-Length` a GET would get.
    fn write_file_head(
        &mut self,
        decision: Decision,
        meta: &FileMeta,
        date: &str,
        (keep, head_only): (bool, bool),
        (etag, last_modified): (&str, &str),
        rep: Rep,
    ) -> (Status, (u64, u64)) {
        let base = Head {
            content_type: rep.content_type,
            validators: Some((last_modified, etag)),
            accept_ranges: true,
            content_encoding: rep.coding.map(Coding::name),
            vary: rep.vary,
            ..Head::new(Status::Ok, date, keep)
        };
        match decision {
            Decision::NotModified => {
                Head {
                    status: Status::NotModified,
                    ..base
                }
                .write(&mut self.out);
                (Status::NotModified, (0, 0))
            }
            Decision::Unsatisfiable => {
                let head = Head {
                    status: Status::RangeNotSatisfiable,
                    content_range: Some((0, 0, meta.size)),
                    validators: None,
                    // The body is the status text.
                    content_encoding: None,
                    ..base
                };
                write_status(&mut self.out, head, head_only);
                (Status::RangeNotSatisfiable, (0, 0))
            }
            Decision::Full => {
                Head {
                    content_length: Some(meta.size),
                    ..base
                }
                .write(&mut self.out);
                self.file_body.set(meta.size);
                (Status::Ok, (0, meta.size))
            }
            Decision::Partial { start, len } => {
                Head {
                    status: Status::PartialContent,
                    content_length: Some(len),
                    content_range: Some((start, len, meta.size)),
                    ..base
                }
                .write(&mut self.out);
                self.file_body.set(len);
                (Status::PartialContent, (start, len))
            }
        }
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

/// How a file's body goes out: the content type of the file asked for (also when a
/// precompressed variant is sent), the variant's coding, and whether `Vary: Accept-Encoding`
/// goes with it (every response of a compressible file while precompressed files are on, so
/// that a shared cache keeps the variants apart whichever one it saw first).
#[derive(Debug, Clone, Copy)]
struct Rep {
    content_type: &'static str,
    coding: Option<Coding>,
    vary: bool,
}

/// A file to serve: a cached copy still current, or the file opened and its `statx`.
enum Found {
    Cached(Entry),
    /// An open file kept for `sendfile(2)`, still current.
    Fd(FdEntry),
    Opened(hoop::fs::File, FileMeta),
}

impl Found {
    fn meta(&self) -> FileMeta {
        match self {
            Found::Cached(e) => e.meta,
            Found::Fd(e) => e.meta,
            Found::Opened(_, m) => *m,
        }
    }
}

/// The file `rel`, cached under `key`: the cached copy when a fresh `statx` of `rel` still
/// shows the identity it was read with (the very inode once opened beneath the root), else
/// `rel` opened beneath the root and its `statx`. The status of the failure otherwise.
async fn find(sh: &Shared, rel: &[u8], key: &[u8]) -> Result<Found, Status> {
    let cached = sh.cache.borrow_mut().get(key).cloned();
    if let Some(entry) = cached {
        match stat_path(sh.root.raw_fd(), rel).await {
            Ok(meta) if meta == entry.meta => return Ok(Found::Cached(entry)),
            _ => sh.cache.borrow_mut().remove(key),
        }
    }
    let kept = sh.cache.borrow_mut().get_fd(key).cloned();
    if let Some(entry) = kept {
        match stat_path(sh.root.raw_fd(), rel).await {
            Ok(meta) if meta == entry.meta => return Ok(Found::Fd(entry)),
            _ => sh.cache.borrow_mut().remove(key),
        }
    }
    let fd = sh
        .root
        .open_beneath(rel, false)
        .await
        .map_err(|e| open_error_status(&e))?;
    let file = hoop::fs::File::from(fd);
    match fstat_now(&file) {
        Ok(meta) => Ok(Found::Opened(file, meta)),
        Err(_) => Err(Status::InternalServerError),
    }
}

/// How long a closing connection keeps reading, and how much.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 256 * 1024;

/// Whether `input` holds only the start of a request (not just empty lines).
fn start_of_request(input: &[u8]) -> bool {
    input.iter().any(|&b| b != b'\r' && b != b'\n')
}

/// `statx` of `rel` under the root fd (following symlinks; identity is checked by the caller),
/// as a system call on this thread: io_uring runs `IORING_OP_STATX` on an io-wq worker (a
/// context switch there and back) and the epoll driver on its blocking pool, while the call
/// itself on a cached dentry takes about a microsecond (DESIGN.md, "Metadata inline").
async fn stat_path(root: i32, rel: &[u8]) -> io::Result<FileMeta> {
    let path = if rel.is_empty() {
        CString::from(c".")
    } else {
        CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
    };
    statx_now(root, &path, libc::AT_STATX_SYNC_AS_STAT)
}

/// `statx(2)` on this thread; `path` empty with `AT_EMPTY_PATH` for the fd itself.
fn statx_now(dirfd: i32, path: &CString, flags: i32) -> io::Result<FileMeta> {
    // SAFETY: all-zero is a valid statx (plain integers).
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stx` a valid statx the call fills; both
    // outlive the call.
    let r = unsafe {
        libc::statx(
            dirfd,
            path.as_ptr(),
            flags,
            libc::STATX_BASIC_STATS,
            &mut stx,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileMeta::from_statx(&stx))
}

/// The metadata of an open file (see [`stat_path`] for why on this thread).
fn fstat_now(file: &hoop::fs::File) -> io::Result<FileMeta> {
    use std::os::fd::AsRawFd;
    statx_now(file.as_raw_fd(), &CString::default(), libc::AT_EMPTY_PATH)
}

/// Reads up to `size` bytes from the start of `file` (fewer if it shrank meanwhile).
async fn read_whole(file: &hoop::fs::File, size: u64) -> Option<Vec<u8>> {
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
