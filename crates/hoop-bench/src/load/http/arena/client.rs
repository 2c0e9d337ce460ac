//! The arena profiles' load generator: keep-alive connections (baseline, pipelined, json,
//! upload) or connections of 10 requests each (short-lived), on one thread's hoop runtime.
//! Every answer is checked (status 200 and the exact body: a sum, `ok`, a byte count, or the
//! json profile's items against the dataset); anything else is an error counted by kind, and
//! only answers verified inside the window count, after a keep-alive connection's warm-up
//! exchange (checked, not counted).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use hoop::net::TcpStream;
use hoop::time::{sleep, Instant};
use hoop::IoBuf;

use crate::load::http::arena::dataset;
use crate::load::http::arena::reader::{Failure, Reader};
use crate::load::http::arena::requests::{Exchange, Expect, Requests, Shape, SHORT_LIVED_REQUESTS};
use crate::load::http::arena::response::Head;
use crate::load::http::client::HttpOutcome;
use crate::load::http::tally::Tally;
use crate::load::resets::Streak;
use crate::load::thread::run_pinned;

/// How long the connect phase (connects and warm-ups) may take before the window opens
/// (longer than the static client's: 256 uploads of 500 KB warm up first).
const CONNECT_PHASE: Duration = Duration::from_secs(10);
/// Failures after which a connection gives up.
const MAX_FAILURES: u32 = 1000;
/// Pause before reconnecting after a failure.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(1);
/// How long a server may take to close after answering `Connection: close`.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// What to load.
#[derive(Debug, Clone)]
pub(crate) struct ArenaLoad {
    /// The server.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// Connections.
    pub conns: usize,
    /// Length of the window.
    pub secs: Duration,
    /// What each connection sends.
    pub shape: Shape,
}

/// The run's counters and what its connection tasks share.
struct Shared {
    cfg: ArenaLoad,
    tally: Tally,
    /// Reconnects after resets while resets are injected (not errors).
    reconnects: Cell<u64>,
    /// The json answers verified so far, by (count, m): the same bytes again are the same
    /// answer, checked with a compare instead of a parse (a pinned client parsing 50 items per
    /// request would measure itself).
    json_seen: JsonSeen,
}

/// Verified json bodies by (count, m).
pub(crate) type JsonSeen = RefCell<HashMap<(usize, u64), Vec<u8>>>;

impl Shared {
    /// Counts an error (none once the window closed: a run cut short is not an error).
    fn error(&self, f: &Failure) {
        self.tally.error(f.kind, || f.what.clone());
    }

    /// A failed exchange: a reconnect if `streak` excuses it (the connection was lost while
    /// resets are injected), else an error.
    fn failed(&self, f: &Failure, streak: &mut Streak) {
        if f.lost && streak.excuses() {
            if !self.tally.window.over() {
                self.reconnects.set(self.reconnects.get() + 1);
            }
            return;
        }
        self.error(f);
    }
}

/// Runs the load on a new thread (pinned to `pin` if given) with its own hoop runtime;
/// `on_start` runs there right before the window opens.
pub(crate) fn run_arena<F>(
    cfg: &ArenaLoad,
    pin: Option<usize>,
    on_start: F,
) -> io::Result<HttpOutcome>
where
    F: FnOnce() + Send,
{
    std::net::TcpStream::connect_timeout(&cfg.addr, Duration::from_secs(3))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {}: {e}", cfg.addr)))?;
    run_pinned("hoop-bench-arena", "arena client", pin, || {
        let cfg = cfg.clone();
        let entries = (cfg.conns * 2).clamp(256, 4096);
        let rt = hoop::Runtime::builder()
            .entries(entries.next_power_of_two() as u32)
            .driver(hoop::DriverKind::Epoll)
            .build()?;
        let sh = Rc::new(Shared {
            cfg,
            tally: Tally::new()?,
            reconnects: Cell::new(0),
            json_seen: RefCell::new(HashMap::new()),
        });
        let outcome = rt.block_on(async {
            let (conns, secs) = (sh.cfg.conns, sh.cfg.secs);
            let spawn = |id| drop(hoop::spawn(connection(id, sh.clone())));
            let mut outcome = sh
                .tally
                .run(conns, secs, CONNECT_PHASE, on_start, spawn)
                .await;
            outcome.reconnects = sh.reconnects.get();
            outcome
        });
        drop(rt);
        Ok(outcome)
    })
}

/// One connection task: connects, warms up (keep-alive), then exchanges until the window
/// closes; a short-lived one reconnects after every 10 requests.
async fn connection(id: usize, sh: Rc<Shared>) {
    let short = matches!(sh.cfg.shape, Shape::ShortLived);
    let mut reqs = Requests::new(&sh.cfg.shape, id, &sh.cfg.host);
    let mut reader = Reader::default();
    let mut failures = 0;
    let mut settled = false;
    let mut streak = Streak::default();
    if short {
        // Every connection is new anyway: no warm-up, all connects inside the window.
        sh.tally.settle(&mut settled);
        sh.tally.window.wait_open().await;
    }
    while !sh.tally.window.over() && failures < MAX_FAILURES {
        let stream = match TcpStream::connect(sh.cfg.addr).await {
            Ok(s) => s,
            Err(e) => {
                let f = Failure::io("connect", &e);
                sh.failed(
                    &Failure {
                        what: format!("{}: {e}", sh.cfg.addr),
                        ..f
                    },
                    &mut streak,
                );
                failures += 1;
                sleep(RECONNECT_BACKOFF).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        reader.reset();
        if !short && !sh.tally.window.opened() {
            let warm = reqs.warm_up();
            if let Err(f) = exchange(&stream, &mut reader, &sh, &warm, false).await {
                sh.failed(&f, &mut streak);
                failures += 1;
                sleep(RECONNECT_BACKOFF).await;
                continue;
            }
            streak.verified();
            sh.tally.settle(&mut settled);
            sh.tally.window.wait_open().await;
        }
        let mut made = 0u32;
        let mut failed = false;
        while !sh.tally.window.over() {
            let close = short && made + 1 == SHORT_LIVED_REQUESTS;
            let ex = reqs.next(close);
            match exchange(&stream, &mut reader, &sh, &ex, true).await {
                Ok(true) => streak.verified(),
                Ok(false) => break,
                Err(f) => {
                    sh.failed(&f, &mut streak);
                    failed = true;
                    break;
                }
            }
            made += 1;
            if close {
                if let Err(f) = reader.expect_close(&stream, CLOSE_WAIT).await {
                    sh.failed(&f, &mut streak);
                    failed = true;
                }
                break;
            }
        }
        if sh.tally.window.over() {
            break;
        }
        if failed {
            failures += 1;
            sleep(RECONNECT_BACKOFF).await;
        }
    }
    sh.tally.finish(&mut settled);
}

/// Writes `ex` and reads and checks its answers, counting each verified one when `counted`
/// and the window is open: `Ok(false)` once one completed past the window.
async fn exchange(
    stream: &TcpStream,
    reader: &mut Reader,
    sh: &Shared,
    ex: &Exchange,
    counted: bool,
) -> Result<bool, Failure> {
    let t0 = Instant::now();
    let (res, _) = stream.write_all(ex.bytes.clone()).await;
    res.map_err(|e| Failure::io("write", &e))?;
    if ex.upload_bytes > 0 {
        let Shape::Upload(body) = &sh.cfg.shape else {
            return Err(Failure::new("write", "an upload without the upload body"));
        };
        // The shared buffer itself, no copy: the kernel reads it as often as it is sent.
        let (res, _) = stream
            .write_all(body.clone().slice(0..ex.upload_bytes))
            .await;
        res.map_err(|e| Failure::io("write", &e))?;
    }
    for expect in &ex.expects {
        let head = reader.response(stream).await?;
        check(expect, &head, &reader.body, &sh.cfg.shape, &sh.json_seen)?;
        if !counted {
            continue;
        }
        let t1 = Instant::now();
        if !sh.tally.window.counts_at(t1) {
            return Ok(false);
        }
        let bytes = if ex.upload_bytes > 0 {
            ex.upload_bytes
        } else {
            reader.body.len()
        };
        sh.tally.count(bytes as u64, t1, (t1 - t0).as_nanos());
    }
    Ok(true)
}

/// Checks one answer: status 200 and the expected body (json: parsed and checked, or the very
/// bytes of an answer already checked for the same request).
pub(crate) fn check(
    expect: &Expect,
    head: &Head,
    body: &[u8],
    shape: &Shape,
    json_seen: &JsonSeen,
) -> Result<(), Failure> {
    if head.status != 200 {
        return Err(Failure::new(
            "status",
            format!(
                "status {}, not 200 (body {:?})",
                head.status,
                String::from_utf8_lossy(&body[..body.len().min(80)])
            ),
        ));
    }
    let want: &[u8] = match expect {
        Expect::Static(b) => b,
        Expect::Text(t) => t.as_bytes(),
        Expect::Json { count, m } => {
            let Shape::Json(items) = shape else {
                return Err(Failure::new("json", "a json answer without the dataset"));
            };
            let key = (*count, *m);
            if json_seen.borrow().get(&key).is_some_and(|b| b == body) {
                return Ok(());
            }
            dataset::check(body, items, *count, *m).map_err(|e| Failure::new("json", e))?;
            json_seen.borrow_mut().insert(key, body.to_vec());
            return Ok(());
        }
    };
    if body != want {
        return Err(Failure::new(
            "body",
            format!(
                "body {:?}, expected {:?}",
                String::from_utf8_lossy(&body[..body.len().min(80)]),
                String::from_utf8_lossy(want)
            ),
        ));
    }
    Ok(())
}
