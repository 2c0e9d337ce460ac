//! One connection, from its first byte to its close: read, parse every complete request,
//! answer them in order (pipelined responses gathered into one send), wait for more under the
//! header or idle deadline, and close cleanly.
//!
//! Memory per connection is bounded: the unparsed input never exceeds one request head's limits
//! plus one received buffer (a longer head is refused with 414 or 431), and responses are sent
//! before more input is parsed, so a client that stops reading holds at most the responses
//! that fit its socket buffers and one batch, then its connection is closed at the idle
//! deadline.
//!
//! Split by idea: the loop (`run`: read, parse, answer in order,
//! linger), the file answer (`file`: the target looked up, a precompressed variant chosen, how
//! the body goes out), the file response head (`head`: conditionals and ranges decided), the
//! body senders (`body`: one send, `sendfile(2)`, chunks, `MSG_MORE`) and the access log
//! (`log`). The lookups of a file under the root live beside `resolve` (`crate::lookup`).
//! This file holds what they all share: the thread's `Shared` state and one `Conn`.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::access_log::Hook;
use crate::cache::{Cache, Missing};
use crate::config::Config;
use crate::date::DateCache;
use crate::deadline::{Deadlines, Timer};
use crate::resolve::Root;
use crate::splice::PipePool;

mod body;
mod feed;
mod file;
mod head;
mod log;
mod page;
mod parts;
pub(crate) mod run;
mod service;
pub(crate) mod transport;

use transport::Transport;

/// What the connections of one server thread share.
#[derive(Debug)]
pub struct Shared {
    /// Limits and timeouts.
    pub cfg: Arc<Config>,
    /// The served directory (`None`: a service alone answers).
    pub root: Option<Arc<Root>>,
    /// This thread's file cache.
    pub cache: RefCell<Cache>,
    /// This thread's bodies compressed on the fly (`crate::compress`), keyed by path, coding
    /// and file identity.
    pub compressed: RefCell<Cache>,
    /// This thread's connection deadlines.
    pub deadlines: Rc<Deadlines>,
    /// The formatted `Date`.
    pub date: RefCell<DateCache>,
    /// Connections of this thread answering a request right now (shutdown waits for them).
    pub busy: Cell<usize>,
    /// Shutdown began: answer what is in hand with `Connection: close`, take nothing new.
    pub stopping: Cell<bool>,
    /// The shutdown's grace ran out with answers unfinished: each is cut when the runtime
    /// drops its task, and says so on stderr ([`CutGuard`]).
    pub gave_up: Cell<bool>,
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
    pub missing: RefCell<Missing>,
    /// Files being read into `cache` right now: one read per file, the other requests wait.
    pub fills: RefCell<crate::fill::Fills>,
    /// Bodies being compressed into `compressed` right now, likewise.
    pub compress_fills: RefCell<crate::fill::Fills>,
    /// Connections of this thread reading through the buffer ring right now.
    pub ring_readers: Cell<usize>,
    /// Past this many ring readers, a connection on a buffer ring in user memory reads by
    /// readiness instead (half the ring's buffers; `HOOP_HTTP_RING_READERS_MAX` for tests).
    pub ring_readers_max: usize,
    /// Where readiness reads land before they are appended to a connection's input (only
    /// borrowed during one `recv(2)`, never across an await).
    pub scratch: RefCell<Vec<u8>>,
    /// What the configuration adds to responses (`Cache-Control`, security headers, error
    /// pages), shared by every thread.
    pub extras: Arc<crate::extras::Extras>,
    /// The certificate and key handshakes use, with HTTPS.
    pub tls: Option<Arc<crate::tls::Certs>>,
    /// TLS handshakes that failed on this thread (garbage, no shared suite, a deadline).
    pub tls_failed: Cell<u64>,
    /// This thread's clone of the service behind the files, if any.
    pub service: Option<RefCell<Box<dyn crate::service::Fallback>>>,
}

/// Counts the connection as open until dropped.
pub(crate) struct OpenGuard(pub(crate) Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts the connection in a per-thread tally (busy, reading through the ring) until dropped.
pub(crate) struct CountGuard<'a>(&'a Cell<usize>);

impl<'a> CountGuard<'a> {
    fn new(c: &'a Cell<usize>) -> Self {
        c.set(c.get() + 1);
        CountGuard(c)
    }
}

/// Counts in `c` until the guard is dropped.
pub(crate) fn count(c: &Cell<usize>) -> CountGuard<'_> {
    CountGuard::new(c)
}

impl Drop for CountGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Armed while a request is answered: dropped armed after the shutdown's grace ran out (its
/// task dropped with the runtime, the answer unfinished), it says so on stderr, one line per
/// cut answer, so that an operator knows which download a stop cut.
struct CutGuard<'a> {
    sh: &'a Shared,
    stream: &'a Transport,
    request: Option<(crate::parse::Method, &'a [u8])>,
    armed: bool,
}

impl<'a> CutGuard<'a> {
    fn new(
        sh: &'a Shared,
        stream: &'a Transport,
        request: Option<(crate::parse::Method, &'a [u8])>,
    ) -> CutGuard<'a> {
        CutGuard {
            sh,
            stream,
            request,
            armed: true,
        }
    }

    /// The answer finished (or the connection failed on its own): nothing to say.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CutGuard<'_> {
    fn drop(&mut self) {
        if !self.armed || !self.sh.gave_up.get() {
            return;
        }
        let what = match self.request {
            Some((method, target)) => {
                let method = match method {
                    crate::parse::Method::Get => "GET",
                    crate::parse::Method::Head => "HEAD",
                    crate::parse::Method::Other => "a request for",
                };
                format!("{method} {}", String::from_utf8_lossy(target))
            }
            None => "a request".to_string(),
        };
        let to = match self.stream.peer_addr() {
            Ok(a) => format!(" from {a}"),
            Err(_) => String::new(),
        };
        eprintln!(
            "hoop-http: shutdown grace of {} ms ran out: cut the answer to {what}{to}",
            self.sh.cfg.shutdown_grace.as_millis()
        );
    }
}

/// Bytes one single read asks for.
pub(crate) const READ_BYTES: usize = 16 * 1024;

/// One connection's state while it is served.
struct Conn<'a> {
    sh: &'a Shared,
    stream: &'a Transport,
    timer: &'a Timer,
    /// Responses not sent yet.
    out: Vec<u8>,
    /// The client's address, where known and logged.
    remote: Option<SocketAddr>,
    /// Body bytes of the file response being answered (for the access log).
    file_body: Cell<u64>,
    /// The `Cache-Control` line of the file or listing being answered (`page`), or empty.
    cache_control: &'a [u8],
    /// The parts of the `multipart/byteranges` answer whose head was just written, for its
    /// body sender to take (`parts`); `None` between responses.
    parts: Option<Box<crate::ranges::Multipart>>,
}
