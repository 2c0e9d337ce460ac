//! The connection loop: read, parse every complete request, answer them in order, wait for
//! more under the header or idle deadline, and close (lingering after a final response whose
//! request bytes may be unread).

use std::cell::{Cell, RefCell};
use std::future::Future as _;
use std::io;
use std::net::Shutdown;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hoop::net::{DirectRecvStream, DirectTcpStream};

use super::transport::Transport;
use hoop::BufRing;

use super::service::Outcome;
use super::{Conn, CountGuard, CutGuard, OpenGuard, Shared, READ_BYTES};
use crate::parse::{parse, Method, Parsed, Request};
use crate::response::write_status;
use crate::status::Status;

/// Where received bytes come from: a multishot recv on the thread's buffer ring (the best
/// path), or single reads into a buffer of the connection's own.
pub(super) enum Reader<'a> {
    Ring(DirectRecvStream<'a>),
    Plain(&'a Transport, Vec<u8>),
    /// Wait for readability (no buffer held), then `recv(2)` into the thread's scratch,
    /// through the thread's driver.
    Ready(i32, &'a RefCell<Vec<u8>>, hoop::driver::Driver),
}

impl Reader<'_> {
    /// Appends what arrives next to `input`; 0 at end of stream.
    pub(super) async fn read_into(&mut self, input: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Reader::Ring(rx) => match rx.next().await {
                Some(Ok(buf)) => {
                    input.extend_from_slice(&buf);
                    Ok(buf.len())
                }
                Some(Err(e)) => Err(e),
                None => Ok(0),
            },
            Reader::Ready(fd, scratch, driver) => loop {
                let r = {
                    let mut b = scratch.borrow_mut();
                    // Through the driver: on epoll it records a drained socket, so the wait
                    // below makes no system call and a read that would find nothing is not
                    // made (a `recv(2)` of our own left the record stale: two `poll(2)`s and
                    // an `EAGAIN` read more per request, 44% more CPU per request on epoll
                    // once thousands of idle connections pushed the busy ones onto this path).
                    let r = driver.try_recv(*fd, &mut b);
                    if let Ok(n) = r {
                        input.extend_from_slice(&b[..n]);
                    }
                    r
                };
                match r {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let readable = hoop::driver::op::PollOnce::ready(*fd);
                        hoop::driver::Op::new(readable).await?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
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

impl Reader<'_> {
    /// Appends what has already arrived, without waiting: a received buffer the ring holds,
    /// or what one non-blocking `recv(2)` finds. `None` when nothing is there (or the stream
    /// ended or failed: the next [`read_into`](Self::read_into) says so).
    pub(super) async fn read_now(&mut self, input: &mut Vec<u8>) -> Option<usize> {
        match self {
            Reader::Ring(rx) => {
                let mut next = std::pin::pin!(rx.next());
                let got = std::future::poll_fn(|cx| match next.as_mut().poll(cx) {
                    std::task::Poll::Ready(got) => std::task::Poll::Ready(Some(got)),
                    std::task::Poll::Pending => std::task::Poll::Ready(None),
                })
                .await;
                match got {
                    Some(Some(Ok(buf))) if !buf.is_empty() => {
                        input.extend_from_slice(&buf);
                        Some(buf.len())
                    }
                    _ => None,
                }
            }
            Reader::Ready(fd, scratch, driver) => {
                let mut b = scratch.borrow_mut();
                match driver.try_recv(*fd, &mut b) {
                    Ok(n) if n > 0 => {
                        input.extend_from_slice(&b[..n]);
                        Some(n)
                    }
                    _ => None,
                }
            }
            Reader::Plain(..) => None,
        }
    }
}

/// Serves one accepted connection until it closes. `ring`: the thread's buffer ring, if any.
pub async fn serve(stream: DirectTcpStream, ring: Option<BufRing>, sh: Rc<Shared>) {
    let _open = OpenGuard(sh.open_conns.clone());
    serve_transport(Transport::Tcp(stream), ring, sh).await;
}

/// Serves requests over `stream` until it closes (a connection's socket or TLS stream, or
/// one HTTP/2 stream). `ring`: the thread's buffer ring, for a socket.
pub(crate) async fn serve_transport(stream: Transport, ring: Option<BufRing>, sh: Rc<Shared>) {
    let timer = sh.deadlines.register();
    let mut conn = Conn {
        sh: &sh,
        stream: &stream,
        timer: &timer,
        out: Vec::with_capacity(4096),
        remote: sh.log.as_ref().and_then(|_| stream.peer_addr().ok()),
        file_body: Cell::new(0),
        cache_control: b"",
        parts: None,
    };
    // A buffer ring in user memory (the epoll driver, or a kernel without ring-mapped
    // buffers) holds a buffer per waiting read: past half its buffers, a connection waits for
    // readability with no buffer and reads into the thread's scratch instead (nginx's way with
    // idle keep-alive connections), so thousands of idle connections never drain the ring.
    let ring = ring.filter(|r| {
        stream.as_direct().is_some()
            && (r.is_kernel() || sh.ring_readers.get() < sh.ring_readers_max)
    });
    let _ring_reader = ring.as_ref().map(|_| CountGuard::new(&sh.ring_readers));
    let mut reader = match (&ring, stream.as_tcp_stream()) {
        (Some(r), _) => match stream.recv_stream(r) {
            Some(rx) => Reader::Ring(rx),
            None => Reader::Plain(&stream, Vec::with_capacity(READ_BYTES)),
        },
        (None, Some(tcp)) => match hoop::driver::Driver::current() {
            Some(d) => {
                use std::os::fd::AsRawFd;
                Reader::Ready(tcp.as_raw_fd(), &sh.scratch, d)
            }
            None => Reader::Plain(&stream, Vec::with_capacity(READ_BYTES)),
        },
        // An HTTP/2 stream hands over a request head and its body's frames: a small buffer
        // (a stream is a request, not a connection).
        (None, None) if stream.frames_bodies() => {
            Reader::Plain(&stream, Vec::with_capacity(H2_READ_BYTES))
        }
        (None, None) => Reader::Plain(&stream, Vec::with_capacity(READ_BYTES)),
    };
    let linger = conn.run(&mut reader).await;
    drop(reader);
    if linger {
        conn.linger().await;
    } else if matches!(stream, Transport::Tls(_)) {
        // TLS ends with close_notify, so that the client tells a complete close from a cut
        // (an answer delimited by the close, or a client that checks); bounded like a send.
        timer.set(Instant::now() + sh.cfg.idle_timeout.min(CLOSE_NOTIFY_WAIT));
        let _ = timer.run(stream.shutdown_with(Shutdown::Write)).await;
    }
}

/// Bytes one read of an HTTP/2 stream asks for.
const H2_READ_BYTES: usize = 2048;
/// Longest wait to send TLS's close_notify at the end of a connection.
const CLOSE_NOTIFY_WAIT: Duration = Duration::from_secs(1);

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
                    Parsed::Complete {
                        mut request,
                        len_bytes,
                    } => {
                        let head_at = start;
                        start += len_bytes;
                        awaiting_first = false;
                        // The service takes what the files cannot: everything without a
                        // root, other methods, bodies, and (below) targets no file answers.
                        let to_service = self.sh.service.is_some()
                            && (self.sh.root.is_none()
                                || request.method == Method::Other
                                || request.has_body);
                        // A short body on a GET or HEAD means nothing to a file: read past it
                        // and answer (nginx discards it too); a long or chunked one is 413.
                        if !to_service && request.method != Method::Other {
                            if let Some(n) = discardable(&request) {
                                match self.skip_body(reader, &mut input, start, n).await {
                                    Some(next) => start = next,
                                    None => return false,
                                }
                                request.has_body = false;
                            }
                        }
                        let cut = CutGuard::new(
                            self.sh,
                            self.stream,
                            Some((request.method, &request.target)),
                        );
                        let answer = match to_service {
                            true => Answer::Fallback,
                            false => self.respond(&request).await,
                        };
                        let keep = match answer {
                            Answer::Keep(k) => k,
                            Answer::Failed => return false,
                            Answer::Fallback => {
                                let head = head_at..start;
                                match self.exchange(&request, &mut input, head, reader).await {
                                    Outcome::Keep(next) => {
                                        start = next;
                                        true
                                    }
                                    Outcome::Close { next, unread: u } => {
                                        start = next;
                                        close = true;
                                        unread = u || start < input.len();
                                        break;
                                    }
                                    Outcome::Failed => return false,
                                }
                            }
                        };
                        cut.disarm();
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
                        let head = self.head(status, &date, false);
                        write_status(&mut self.out, head, false);
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
            let cut = CutGuard::new(self.sh, self.stream, None);
            let flushed = if close {
                self.out.is_empty() || self.flush_last().await
            } else {
                self.out.is_empty() || self.flush().await
            };
            cut.disarm();
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

    /// Reads until the `len` body bytes after `start` are in `input`; returns where the next
    /// request starts, or `None` when the connection ended or idled out first.
    async fn skip_body(
        &mut self,
        reader: &mut Reader<'_>,
        input: &mut Vec<u8>,
        start: usize,
        len: usize,
    ) -> Option<usize> {
        while input.len() < start + len {
            self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
            match self.timer.run(reader.read_into(input)).await {
                Some(Ok(n)) if n > 0 => {}
                _ => return None,
            }
        }
        Some(start + len)
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
    /// before a large body), or leaves it to the service when no file answers it.
    async fn respond(&mut self, req: &Request) -> Answer {
        match self.respond_here(req).await {
            Some(Ok(keep)) => Answer::Keep(keep),
            Some(Err(())) => Answer::Fallback,
            None => Answer::Failed,
        }
    }

    /// [`respond`](Self::respond): `Some(Ok(keep))` answered, `Some(Err(()))` for the service,
    /// `None` if the connection failed.
    async fn respond_here(&mut self, req: &Request) -> Option<Result<bool, ()>> {
        let keep = req.keep_alive && !self.sh.stopping.get();
        let head_only = req.method == Method::Head;
        let date = self.sh.date.borrow_mut().now().to_string();
        if req.method == Method::Other {
            let keep = keep && !req.has_body;
            let head = self.head(Status::MethodNotAllowed, &date, keep);
            write_status(&mut self.out, head, false);
            self.log(req, Status::MethodNotAllowed);
            return Some(Ok(keep));
        }
        if req.has_body {
            let head = self.head(Status::PayloadTooLarge, &date, false);
            write_status(&mut self.out, head, head_only);
            self.log(req, Status::PayloadTooLarge);
            return Some(Ok(false));
        }
        let status = match self.respond_file(req, &date, keep, head_only).await {
            Ok(Some(status)) => {
                self.log(req, status);
                return Some(Ok(keep));
            }
            Ok(None) => return None,
            // A target no file answers goes to the service, when there is one.
            Err(Status::NotFound) if self.sh.service.is_some() => return Some(Err(())),
            Err(status) => status,
        };
        let keep = keep && !status.closes_connection();
        self.write_error(status, &date, keep, head_only).await?;
        self.log(req, status);
        Some(Ok(keep))
    }
}

/// What [`Conn::respond`] did with a request.
enum Answer {
    /// Answered; whether the connection stays open.
    Keep(bool),
    /// No file answers it: the service does.
    Fallback,
    /// The connection failed.
    Failed,
}

/// How long a closing connection keeps reading, and how much.
const LINGER: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 256 * 1024;

/// The largest request body the files read past instead of refusing.
const DISCARD_BODY_BYTES: u64 = 64 * 1024;

/// The length of a body the files read past: one framed by `Content-Length` alone, of at
/// most [`DISCARD_BODY_BYTES`].
fn discardable(req: &Request) -> Option<usize> {
    match req.content_length {
        Some(n) if req.has_body && !req.transfer_encoding && n <= DISCARD_BODY_BYTES => {
            Some(n as usize)
        }
        _ => None,
    }
}

/// Whether `input` holds only the start of a request (not just empty lines).
fn start_of_request(input: &[u8]) -> bool {
    input.iter().any(|&b| b != b'\r' && b != b'\n')
}
