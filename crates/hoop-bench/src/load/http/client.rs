//! The HTTP load generator: keep-alive connections sending `pipeline` requests at a time, or a
//! connection per request, on one thread's hoop runtime. Every response is checked (status 200,
//! `Content-Length`, the whole body, byte for byte when verifying; in the static mix the
//! identity file or exactly its `.gz` variant); anything else is an error counted by kind, and
//! only requests completed inside the window count, after a keep-alive connection's warm-up
//! exchange (checked, not counted). A reset while resets are injected is a reconnect.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use hoop::net::TcpStream;
use hoop::time::{sleep, Instant};

use crate::load::http::mix::MixFile;
use crate::load::http::recv::RecvBuf;
pub(crate) use crate::load::http::request::{mix_request_bytes, request_bytes};
use crate::load::http::tally::Tally;
use crate::load::resets::Streak;
use crate::load::thread::run_pinned;

/// How long the connect phase (connects and warm-ups) may take before the window opens.
const CONNECT_PHASE: Duration = Duration::from_secs(5);
/// Failures after which a connection gives up (keep-alive mode).
const MAX_FAILURES: u32 = 1000;
/// Pause before reconnecting after a failure.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(1);

/// What to measure.
#[derive(Debug, Clone)]
pub(crate) struct HttpClientConfig {
    /// The server.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// The request path.
    pub path: String,
    /// Connections.
    pub conns: usize,
    /// Length of the window.
    pub secs: Duration,
    /// A connection per request.
    pub close: bool,
    /// Requests in flight per connection (keep-alive).
    pub pipeline: usize,
    /// The expected body size.
    pub file_bytes: u64,
    /// The expected body, when verifying.
    pub verify: Option<Arc<[u8]>>,
    /// The static mix: its files requested in turn (`path`, `file_bytes` and `verify` then
    /// only name the run: every body is verified against the mix's files).
    pub mix: Option<Arc<[MixFile]>>,
}

/// What the client saw.
#[derive(Debug)]
pub(crate) struct HttpOutcome {
    /// Verified requests inside the window.
    pub requests: u64,
    /// Body bytes of verified requests.
    pub body_bytes: u64,
    /// Errors by kind.
    pub errors: BTreeMap<String, u64>,
    /// The first error, for the report.
    pub first_error: Option<String>,
    /// Reconnects after resets while resets were injected (not errors).
    pub reconnects: u64,
    /// Latency of verified requests, nanoseconds.
    pub hist: Histogram<u64>,
    /// Wall time of the window.
    pub wall: Duration,
    /// Client thread CPU over the window.
    pub cpu: Duration,
    /// Connections established when the window opened.
    pub connected: usize,
    /// The static mix: verified requests by response encoding ("identity", "gzip").
    pub by_encoding: Option<BTreeMap<String, u64>>,
    /// Verified requests completed in each whole second of the window (the last entry may
    /// be a partial second).
    pub per_second: Vec<u64>,
    /// Latency of the requests completed in the window's first second, nanoseconds.
    pub hist_first_second: Histogram<u64>,
}

impl HttpOutcome {
    /// All errors.
    pub(crate) fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// What one request asks for, and how its response is checked.
struct Target {
    /// The request bytes.
    request: Vec<u8>,
    /// The identity body's length.
    len: u64,
    /// The identity body, when verifying.
    identity: Option<Arc<[u8]>>,
    /// The `.gz` variant, the body of a `Content-Encoding: gzip` response.
    gzip: Option<Arc<[u8]>>,
}

/// How a verified response was encoded.
#[derive(Clone, Copy)]
enum Encoding {
    Identity,
    Gzip,
}

/// The run's counters and what its connection tasks share.
struct Shared {
    cfg: HttpClientConfig,
    /// One target, or the mix's files.
    targets: Vec<Target>,
    tally: Tally,
    gzip_requests: Cell<u64>,
    reconnects: Cell<u64>,
}

impl Shared {
    /// Counts one verified request, completed at `t1`.
    fn count(&self, body: u64, enc: Encoding, t1: Instant, latency_ns: u128) {
        if let Encoding::Gzip = enc {
            self.gzip_requests.set(self.gzip_requests.get() + 1);
        }
        self.tally.count(body, t1, latency_ns);
    }

    fn error(&self, kind: &str, what: impl FnOnce() -> String) {
        self.tally.error(kind, what);
    }

    /// A failed request: a reconnect if `streak` excuses `e` (a reset while resets are
    /// injected), else an error of `kind` described by `what`. Returns whether it was excused.
    fn failed(
        &self,
        kind: &str,
        e: &io::Error,
        streak: &mut Streak,
        what: impl FnOnce() -> String,
    ) -> bool {
        if streak.excuses_error(e) {
            if !self.tally.window.over() {
                self.reconnects.set(self.reconnects.get() + 1);
            }
            return true;
        }
        self.error(kind, what);
        false
    }
}

/// The targets of a run: the one file, or every file of the mix.
fn targets(cfg: &HttpClientConfig) -> Vec<Target> {
    match &cfg.mix {
        Some(files) => files
            .iter()
            .map(|f| Target {
                request: mix_request_bytes(&cfg.host, &f.path, cfg.close),
                len: f.identity.len() as u64,
                identity: Some(f.identity.clone()),
                gzip: f.gzip.clone(),
            })
            .collect(),
        None => vec![Target {
            request: request_bytes(&cfg.host, &cfg.path, cfg.close),
            len: cfg.file_bytes,
            identity: cfg.verify.clone(),
            gzip: None,
        }],
    }
}

/// Runs the client on a new thread (pinned to `pin` if given) with its own hoop runtime;
/// `on_start` runs there right before the window opens.
pub(crate) fn run_client<F>(
    cfg: &HttpClientConfig,
    pin: Option<usize>,
    on_start: F,
) -> io::Result<HttpOutcome>
where
    F: FnOnce() + Send,
{
    std::net::TcpStream::connect_timeout(&cfg.addr, Duration::from_secs(3))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {}: {e}", cfg.addr)))?;
    run_pinned("hoop-bench-http", "http client", pin, || {
        let cfg = cfg.clone();
        let entries = (cfg.conns * cfg.pipeline.max(1)).clamp(256, 4096);
        let rt = hoop::Runtime::builder()
            .entries(entries.next_power_of_two() as u32)
            .build()?;
        if cfg.mix.as_ref().is_some_and(|m| m.is_empty()) {
            return Err(io::Error::other("the static mix has no file"));
        }
        let sh = Rc::new(Shared {
            targets: targets(&cfg),
            cfg,
            tally: Tally::new()?,
            gzip_requests: Cell::new(0),
            reconnects: Cell::new(0),
        });
        let outcome = rt.block_on(drive(&sh, on_start));
        drop(rt);
        Ok(outcome)
    })
}

/// Runs the connection tasks through the window; adds the reconnects and, for the mix, the
/// verified requests by encoding.
async fn drive<F: FnOnce()>(sh: &Rc<Shared>, on_start: F) -> HttpOutcome {
    let (conns, secs) = (sh.cfg.conns, sh.cfg.secs);
    let spawn = |id| drop(hoop::spawn(connection(id, sh.clone())));
    let mut outcome = sh
        .tally
        .run(conns, secs, CONNECT_PHASE, on_start, spawn)
        .await;
    outcome.reconnects = sh.reconnects.get();
    outcome.by_encoding = sh.cfg.mix.as_ref().map(|_| {
        let gzip = sh.gzip_requests.get();
        BTreeMap::from([
            ("gzip".to_string(), gzip),
            ("identity".to_string(), outcome.requests - gzip),
        ])
    });
    outcome
}

/// One connection task: keep-alive (reconnecting after failures) or a connection per request.
async fn connection(id: usize, sh: Rc<Shared>) {
    let addr = sh.cfg.addr;
    // The next target: the mix's files in turn, from an offset of this connection's.
    let n = sh.targets.len();
    let mut next = id % n;
    let mut reader = Reader::default();
    let mut failures = 0;
    let mut settled = false;
    if sh.cfg.close {
        sh.tally.settle(&mut settled);
        sh.tally.window.wait_open().await;
        while !sh.tally.window.over() {
            let t0 = Instant::now();
            let stream = match TcpStream::connect(addr).await {
                Ok(s) => s,
                Err(e) => {
                    sh.error("connect", || format!("{addr}: {e}"));
                    sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            reader.reset();
            let target = &sh.targets[next];
            next = (next + 1) % n;
            let (res, _) = stream.write_all(target.request.clone()).await;
            if let Err(e) = res {
                sh.failed("write", &e, &mut reader.streak, || e.to_string());
                continue;
            }
            if let Some((body, enc)) = reader.response(&stream, &sh, target).await {
                reader.streak.verified();
                let t1 = Instant::now();
                if sh.tally.window.counts_at(t1) {
                    sh.count(body, enc, t1, (t1 - t0).as_nanos());
                }
            }
        }
    } else {
        let depth = sh.cfg.pipeline.max(1);
        // One target: the same batch every time.
        let same: Option<Vec<u8>> = (n == 1).then(|| sh.targets[0].request.repeat(depth));
        while !sh.tally.window.over() && failures < MAX_FAILURES {
            let stream = match TcpStream::connect(addr).await {
                Ok(s) => s,
                Err(e) => {
                    sh.error("connect", || format!("{addr}: {e}"));
                    failures += 1;
                    sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            reader.reset();
            // A warm-up first: a cold server may start a thread per request (tokio's pool).
            if !sh.tally.window.opened()
                && !warm_up(&stream, &mut reader, &sh, &sh.targets[next]).await
            {
                if !reader.excused {
                    failures += 1;
                }
                sleep(RECONNECT_BACKOFF).await;
                continue;
            }
            sh.tally.settle(&mut settled);
            sh.tally.window.wait_open().await;
            'conn: while !sh.tally.window.over() {
                let first = next;
                let batch = match &same {
                    Some(b) => b.clone(),
                    None => (0..depth)
                        .flat_map(|k| sh.targets[(first + k) % n].request.iter().copied())
                        .collect(),
                };
                let t0 = Instant::now();
                let (res, _) = stream.write_all(batch).await;
                if let Err(e) = res {
                    reader.excused = sh.failed("write", &e, &mut reader.streak, || e.to_string());
                    break;
                }
                for k in 0..depth {
                    let target = &sh.targets[(first + k) % n];
                    next = (first + k + 1) % n;
                    let Some((body, enc)) = reader.response(&stream, &sh, target).await else {
                        break 'conn;
                    };
                    reader.streak.verified();
                    let t1 = Instant::now();
                    if !sh.tally.window.counts_at(t1) {
                        break 'conn;
                    }
                    sh.count(body, enc, t1, (t1 - t0).as_nanos());
                }
            }
            if sh.tally.window.over() {
                break;
            }
            if !reader.excused {
                failures += 1;
            }
            sleep(RECONNECT_BACKOFF).await;
        }
    }
    sh.tally.finish(&mut settled);
}

/// A keep-alive connection's warm-up: one checked exchange before the window, not counted.
async fn warm_up(stream: &TcpStream, reader: &mut Reader, sh: &Shared, target: &Target) -> bool {
    let (res, _) = stream.write_all(target.request.clone()).await;
    if let Err(e) = res {
        reader.excused = sh.failed("write", &e, &mut reader.streak, || e.to_string());
        return false;
    }
    let ok = reader.response(stream, sh, target).await.is_some();
    if ok {
        reader.streak.verified();
    }
    ok
}

/// A connection's receive buffer and its resets.
#[derive(Default)]
struct Reader {
    recv: RecvBuf,
    /// The connection's resets in a row (it lasts over reconnects).
    streak: Streak,
    /// Whether the last failure on this connection was an excused reset (a reconnect).
    excused: bool,
}

impl Reader {
    /// Empties the buffer for a new connection.
    fn reset(&mut self) {
        self.recv.reset();
        self.excused = false;
    }

    /// Reads more; false at end of stream or on an error (counted).
    async fn fill(&mut self, stream: &TcpStream, sh: &Shared, what: &str) -> bool {
        match self.recv.read_more(stream).await {
            Ok(0) => {
                let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
                self.excused = sh.failed("eof", &eof, &mut self.streak, || {
                    format!("the server closed the connection in {what}")
                });
                false
            }
            Ok(_) => true,
            Err(e) => {
                self.excused = sh.failed("read", &e, &mut self.streak, || e.to_string());
                false
            }
        }
    }

    /// Reads and checks one response to `target`; returns its body length and encoding, or
    /// `None` after an error (counted).
    async fn response(
        &mut self,
        stream: &TcpStream,
        sh: &Shared,
        target: &Target,
    ) -> Option<(u64, Encoding)> {
        // The head.
        let (status, len, coding, head_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(self.recv.unread()) {
                Ok(httparse::Status::Complete(n)) => {
                    let len = resp
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    let coding = resp
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-encoding"))
                        .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase());
                    break (resp.code.unwrap_or(0), len, coding, n);
                }
                Ok(httparse::Status::Partial) => {
                    if self.recv.unread().len() > 64 * 1024 {
                        sh.error("parse", || "a response head over 64 KiB".into());
                        return None;
                    }
                    if !self.fill(stream, sh, "a response head").await {
                        return None;
                    }
                }
                Err(e) => {
                    sh.error("parse", || format!("bad response head: {e}"));
                    return None;
                }
            }
        };
        self.recv.consume(head_len);
        if status != 200 {
            sh.error("status", || format!("status {status}, not 200"));
            return None;
        }
        let (expected, verify, enc) = match coding.as_deref() {
            None | Some("identity") => (target.len, &target.identity, Encoding::Identity),
            Some("gzip") => match &target.gzip {
                Some(gz) => (gz.len() as u64, &target.gzip, Encoding::Gzip),
                None => {
                    sh.error("encoding", || {
                        "Content-Encoding gzip, but no .gz variant to compare with".into()
                    });
                    return None;
                }
            },
            Some(other) => {
                sh.error("encoding", || {
                    format!("Content-Encoding {other}: no variant to compare with")
                });
                return None;
            }
        };
        match len {
            Some(l) if l == expected => {}
            Some(l) => {
                sh.error("length", || {
                    let what = match enc {
                        Encoding::Identity => "the file",
                        Encoding::Gzip => "its .gz variant",
                    };
                    format!("Content-Length {l}, {what} has {expected}")
                });
                return None;
            }
            None => {
                sh.error("length", || "no Content-Length".into());
                return None;
            }
        }
        // The body.
        let mut got: u64 = 0;
        while got < expected {
            if self.recv.unread().is_empty() && !self.fill(stream, sh, "a body").await {
                return None;
            }
            let avail = self.recv.unread().len() as u64;
            let take = avail.min(expected - got) as usize;
            if let Some(file) = verify {
                let want = &file[got as usize..got as usize + take];
                if &self.recv.unread()[..take] != want {
                    sh.error("body", || {
                        let what = match enc {
                            Encoding::Identity => "the file",
                            Encoding::Gzip => "its .gz variant",
                        };
                        format!("body differs from {what} near byte {got}")
                    });
                    return None;
                }
            }
            self.recv.consume(take);
            got += take as u64;
        }
        Some((expected, enc))
    }
}
