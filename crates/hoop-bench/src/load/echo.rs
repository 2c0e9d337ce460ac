//! The echo load generator, on a hoop runtime (one thread): rust_echo_bench's semantics, made
//! correct. Every reply is compared byte for byte with its request; a mismatch, an end of
//! stream or an error counts as an error, never as a request (a reset while resets are
//! injected counts as a reconnect instead: `load::resets`).

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use hdrhistogram::Histogram;
use hoop::net::TcpStream;
use hoop::time::{sleep, Instant};
use hoop::IoBuf;

use crate::load::resets::Streak;
use crate::load::thread::run_pinned;
use crate::measure::latency as stats;
use crate::measure::usage::thread_cpu;
use crate::measure::window::Window;

/// How long the connect phase may take before the window opens anyway.
const CONNECT_PHASE: Duration = Duration::from_secs(5);
/// Timeout of the first, synchronous connection that checks the server is there.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Failures (connect or request) after which a connection gives up.
pub(crate) const MAX_FAILURES: u32 = 100;
/// Pause before reconnecting after a failure.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(1);
/// Most memory the connections' buffers may take.
const MAX_BUFFER_BYTES: usize = 1 << 30;
/// How often the coordinating task looks at the connect phase and at dead connections.
const TICK: Duration = Duration::from_millis(5);

/// What to measure.
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    /// The echo server.
    pub addr: SocketAddr,
    /// Connections.
    pub conns: usize,
    /// Payload bytes per request.
    pub len: usize,
    /// Length of the window.
    pub secs: Duration,
}

/// What the client saw.
#[derive(Debug)]
pub(crate) struct ClientOutcome {
    /// Verified requests inside the window.
    pub requests: u64,
    /// Errors (connect failures, I/O errors, early ends of stream, mismatched replies).
    pub errors: u64,
    /// The first error, for the report.
    pub first_error: Option<String>,
    /// Reconnects after resets while resets were injected (not errors).
    pub reconnects: u64,
    /// Latency of verified requests, nanoseconds.
    pub hist: Histogram<u64>,
    /// Wall time from the window's opening to the client's stop.
    pub wall: Duration,
    /// Client thread CPU time (user + system) over the same span.
    pub cpu: Duration,
    /// Connections established when the window opened.
    pub connected: usize,
    /// The client ring's `io_uring_enter` calls over the window.
    pub enter_calls: Option<u64>,
}

/// Runs the client on a new thread (pinned to `pin` if given) with its own hoop runtime.
/// `on_start` runs on that thread right before the window opens (after the connect phase).
///
/// # Errors
/// `cannot connect to ADDR: ...` when a first plain connection fails; runtime setup errors.
pub(crate) fn run_client<F>(
    cfg: &ClientConfig,
    pin: Option<usize>,
    on_start: F,
) -> io::Result<ClientOutcome>
where
    F: FnOnce() + Send,
{
    let buffers = cfg.conns.saturating_mul(cfg.len).saturating_mul(2);
    if buffers > MAX_BUFFER_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "-c {} x -l {} needs {} MiB of buffers (2 per connection); the limit is {} MiB",
                cfg.conns,
                cfg.len,
                buffers >> 20,
                MAX_BUFFER_BYTES >> 20
            ),
        ));
    }
    // One plain connection first: an unreachable server is a clear error, not CONNS x errors.
    std::net::TcpStream::connect_timeout(&cfg.addr, PROBE_TIMEOUT)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {}: {e}", cfg.addr)))?;
    run_pinned("hoop-bench-client", "echo client", pin, || {
        run_on_runtime(cfg, on_start)
    })
}

/// SQ entries for `conns` connections: one operation in flight per connection.
fn ring_entries(conns: usize) -> u32 {
    let n = conns.clamp(256, 4096).next_power_of_two();
    u32::try_from(n).unwrap_or(4096)
}

fn run_on_runtime<F: FnOnce()>(cfg: &ClientConfig, on_start: F) -> io::Result<ClientOutcome> {
    let rt = hoop::Runtime::builder()
        .entries(ring_entries(cfg.conns))
        .build()?;
    let shared = Rc::new(Shared {
        len: cfg.len,
        window: Window::new(),
        settled: Cell::new(0),
        alive: Cell::new(0),
        connected: Cell::new(0),
        requests: Cell::new(0),
        errors: Cell::new(0),
        reconnects: Cell::new(0),
        first_error: RefCell::new(None),
        hist: RefCell::new(stats::new_histogram()?),
    });
    let outcome = rt.block_on(drive(cfg.clone(), shared.clone(), on_start));
    // Dropping the runtime cancels the requests still in flight and closes every socket.
    drop(rt);
    Ok(outcome)
}

/// The coordinating task: spawns the connections, opens the window, closes it.
///
/// Every connection connects first (up to [`CONNECT_PHASE`]); then the window opens for
/// exactly `cfg.secs`. Only requests that complete inside the window are counted; requests
/// still in flight at the deadline are dropped (their operations cancelled) and not counted.
async fn drive<F: FnOnce()>(cfg: ClientConfig, sh: Rc<Shared>, on_start: F) -> ClientOutcome {
    for id in 0..cfg.conns {
        sh.alive.set(sh.alive.get() + 1);
        drop(hoop::spawn(connection(id, cfg.addr, sh.clone())));
    }
    let connect_deadline = Instant::now() + CONNECT_PHASE;
    while sh.settled.get() < cfg.conns && Instant::now() < connect_deadline {
        sleep(TICK).await;
    }
    on_start();
    let counters0 = hoop::runtime::current_counters();
    let cpu0 = thread_cpu();
    let connected = sh.connected.get();
    let deadline = sh.window.open(cfg.secs);
    let start = deadline - cfg.secs;
    // Wait for the deadline; stop early only if every connection gave up.
    sh.window
        .wait_out(deadline, TICK * 20, || sh.alive.get() > 0)
        .await;
    let cpu = thread_cpu().saturating_sub(cpu0);
    let wall = start.elapsed();
    let enter_calls = match (counters0, hoop::runtime::current_counters()) {
        (Some(a), Some(b)) => Some(b.enter_calls.saturating_sub(a.enter_calls)),
        _ => None,
    };
    let hist = sh.hist.borrow().clone();
    ClientOutcome {
        requests: sh.requests.get(),
        errors: sh.errors.get(),
        first_error: sh.first_error.borrow().clone(),
        reconnects: sh.reconnects.get(),
        hist,
        wall,
        cpu,
        connected,
        enter_calls,
    }
}

/// State shared by the connection tasks (one thread: cells suffice).
struct Shared {
    len: usize,
    /// When replies count.
    window: Window,
    /// Connections that connected or gave up (the connect phase waits for all).
    settled: Cell<usize>,
    /// Connections still running.
    alive: Cell<usize>,
    /// Connections established before the window opened.
    connected: Cell<usize>,
    requests: Cell<u64>,
    errors: Cell<u64>,
    reconnects: Cell<u64>,
    first_error: RefCell<Option<String>>,
    hist: RefCell<Histogram<u64>>,
}

impl Shared {
    /// One error, described by `what` if it is the first (not counted once the window closed).
    fn error(&self, what: impl FnOnce() -> String) {
        if self.window.over() {
            return;
        }
        self.errors.set(self.errors.get() + 1);
        let mut first = self.first_error.borrow_mut();
        if first.is_none() {
            *first = Some(what());
        }
    }

    /// A failed request: a reconnect if `streak` excuses it (a reset while resets are
    /// injected), else an error described by `what`. Returns whether it was excused.
    fn failed(&self, e: &io::Error, streak: &mut Streak, what: impl FnOnce() -> String) -> bool {
        if streak.excuses_error(e) {
            if !self.window.over() {
                self.reconnects.set(self.reconnects.get() + 1);
            }
            return true;
        }
        self.error(what);
        false
    }
}

/// The payload of connection `id`: a fixed per-connection pattern (stamped per request).
fn pattern(id: usize, len: usize) -> Box<[u8]> {
    (0..len)
        .map(|i| (i.wrapping_mul(131).wrapping_add(id.wrapping_mul(7)) % 251) as u8)
        .collect()
}

/// Writes the connection index and the request counter into the payload's first bytes.
fn stamp(buf: &mut [u8], id: usize, counter: u64) {
    let tag = ((id as u64) << 40) ^ counter;
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&tag.to_le_bytes()[..n]);
}

/// One connection: connect, then request after request until the window closes.
///
/// Each request writes LEN bytes and reads until LEN bytes came back. The payload differs per
/// connection and per request (a tag with the connection index and a request counter in its
/// first bytes), so a server that replays an old reply or mixes connections is caught. After
/// an error the connection closes and reconnects, at most [`MAX_FAILURES`] times (a reset
/// while resets are injected is a reconnect, not a failure).
async fn connection(id: usize, addr: SocketAddr, sh: Rc<Shared>) {
    let mut wbuf = pattern(id, sh.len);
    // A reply fills exactly `sh.len` bytes of this buffer (a `slice(..len)`, so even after a
    // failed read shortened it), and its length is exactly what arrived: a short or stale
    // reply can never compare equal.
    let mut rbuf: Vec<u8> = Vec::with_capacity(sh.len);
    let mut counter: u64 = 0;
    let mut failures: u32 = 0;
    let mut streak = Streak::default();
    let mut settled = false;
    while !sh.window.over() && failures < MAX_FAILURES {
        let stream = match TcpStream::connect(addr).await {
            Ok(s) => s,
            Err(e) => {
                sh.error(|| format!("connect to {addr}: {e}"));
                failures += 1;
                sleep(RECONNECT_BACKOFF).await;
                continue;
            }
        };
        // Best effort: without it only latency suffers, not correctness.
        let _ = stream.set_nodelay(true);
        if !settled {
            settled = true;
            if !sh.window.opened() {
                sh.connected.set(sh.connected.get() + 1);
            }
            sh.settled.set(sh.settled.get() + 1);
        }
        sh.window.wait_open().await;
        let mut excused = false;
        loop {
            if sh.window.over() {
                break;
            }
            counter += 1;
            stamp(&mut wbuf, id, counter);
            let t0 = Instant::now();
            let (res, b) = stream.write_all(wbuf).await;
            wbuf = b;
            if let Err(e) = res {
                excused = sh.failed(&e, &mut streak, || format!("write: {e}"));
                break;
            }
            let (res, b) = stream.read_exact(rbuf.slice(..sh.len)).await;
            rbuf = b.into_inner();
            let t1 = Instant::now();
            if let Err(e) = res {
                excused = sh.failed(&e, &mut streak, || format!("read: {e}"));
                break;
            }
            if !sh.window.counts_at(t1) {
                break;
            }
            if rbuf[..] != wbuf[..] {
                sh.error(|| {
                    let at = rbuf.iter().zip(wbuf.iter()).position(|(a, b)| a != b);
                    format!(
                        "reply differs from the request (first at byte {})",
                        at.unwrap_or(0)
                    )
                });
                break;
            }
            streak.verified();
            sh.requests.set(sh.requests.get() + 1);
            stats::record_ns(&mut sh.hist.borrow_mut(), (t1 - t0).as_nanos());
        }
        if sh.window.over() {
            break;
        }
        if !excused {
            failures += 1;
        }
        drop(stream);
        sleep(RECONNECT_BACKOFF).await;
    }
    if !settled {
        sh.settled.set(sh.settled.get() + 1);
    }
    sh.alive.set(sh.alive.get() - 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_differ_per_request_and_connection() {
        let mut a = pattern(1, 16);
        let mut b = pattern(2, 16);
        stamp(&mut a, 1, 1);
        stamp(&mut b, 2, 1);
        assert_ne!(a, b);
        let first = a.clone();
        stamp(&mut a, 1, 2);
        assert_ne!(first, a);
        let mut tiny = pattern(0, 3);
        stamp(&mut tiny, 0, 0x0003_0201);
        assert_eq!(&tiny[..], &[1, 2, 3]);
    }

    #[test]
    fn ring_entries_are_powers_of_two_in_bounds() {
        assert_eq!(ring_entries(1), 256);
        assert_eq!(ring_entries(500), 512);
        assert_eq!(ring_entries(1000), 1024);
        assert_eq!(ring_entries(100_000), 4096);
    }
}
