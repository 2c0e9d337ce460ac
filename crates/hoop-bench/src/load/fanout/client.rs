//! The fan-out load generator: CONNS chat clients on one hoop runtime (one thread), each a
//! sender that keeps at most WINDOW of its messages in flight and a receiver that verifies
//! every delivery (per sender, in order, every byte).

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use hdrhistogram::Histogram;
use hoop::net::TcpStream;
use hoop::time::{sleep, Instant};
use hoop::IoBuf;

use crate::load::fanout::state::{SenderState, Shared};
use crate::load::fanout::verify::{Format, Verdict, Verifier, PROBE_SENDER, REJOIN_PROBES};
use crate::load::resets::{self, Streak};
use crate::load::thread::run_pinned;
use crate::measure::latency as stats;
use crate::measure::usage::thread_cpu;
use crate::measure::window::Window;

/// Longest the connect phase may take.
const CONNECT_PHASE: Duration = Duration::from_secs(10);
/// Timeout of each connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest the probe phase may take.
const PROBE_PHASE: Duration = Duration::from_secs(5);
/// Pause between two probes.
const PROBE_EVERY: Duration = Duration::from_millis(2);
/// A message not delivered to every connection this long after it was sent is an error.
pub(crate) const STALL: Duration = Duration::from_secs(1);
/// Bytes each read may fill (beyond a partial message left from the last one).
const READ_BYTES: usize = 64 * 1024;
/// How often the coordinating task looks at the clock and at dead connections.
const TICK: Duration = Duration::from_millis(100);

/// What to measure.
#[derive(Debug, Clone)]
pub(crate) struct FanoutConfig {
    /// The server.
    pub addr: SocketAddr,
    /// Connections.
    pub conns: usize,
    /// Bytes per message, newline included.
    pub len: usize,
    /// Messages each connection keeps in flight (sent, not yet delivered to every connection).
    pub window: u32,
    /// Length of the window.
    pub secs: Duration,
}

/// What the client saw.
#[derive(Debug)]
pub(crate) struct FanoutOutcome {
    /// Verified deliveries inside the window (over all receiving connections).
    pub deliveries: u64,
    /// Messages sent inside the window.
    pub messages: u64,
    /// Errors: missing, reordered or corrupt deliveries, stalled messages, I/O errors.
    pub errors: u64,
    /// The first error, for the report.
    pub first_error: Option<String>,
    /// Delivery latency (send to verified receipt) of every 4th delivery, nanoseconds.
    pub hist: Histogram<u64>,
    /// Wall time of the window.
    pub wall: Duration,
    /// Client thread CPU time (user + system) over the window.
    pub cpu: Duration,
    /// Connections established and subscribed when the window opened.
    pub connected: usize,
    /// Rejoins after resets while resets are injected (see [`crate::load::resets`]).
    pub reconnects: u64,
}

/// Runs the client on a new thread (pinned to `pin` if given) with its own hoop runtime.
/// `on_start` runs on that thread right before the window opens.
///
/// # Errors
/// When the server cannot be reached, a connection cannot be made, or the server does not
/// forward the probes to every connection in time; runtime setup errors.
pub(crate) fn run_client<F>(
    cfg: &FanoutConfig,
    pin: Option<usize>,
    on_start: F,
) -> io::Result<FanoutOutcome>
where
    F: FnOnce() + Send,
{
    run_pinned("hoop-bench-fanout", "fan-out client", pin, || {
        let rt = hoop::Runtime::builder()
            .entries(ring_entries(cfg.conns))
            .build()?;
        let outcome = rt.block_on(drive(cfg.clone(), on_start));
        // Dropping the runtime cancels the reads and writes in flight and closes every socket.
        drop(rt);
        outcome
    })
}

/// SQ entries: a read and a write in flight per connection.
fn ring_entries(conns: usize) -> u32 {
    let n = conns.saturating_mul(2).clamp(256, 4096).next_power_of_two();
    u32::try_from(n).unwrap_or(4096)
}

/// The coordinating task: connects, probes, opens the window, closes it.
///
/// In flight means "not yet delivered to every connection": the load is bounded by CONNS x
/// WINDOW messages in the whole system, whatever the server's speed, so the server's broadcast
/// queue never has to hold more. A delivery counts only when the [`Verifier`] passes it; a gap,
/// a reordering, a wrong byte, an I/O error or an end of stream is an error.
///
/// Phases: connect every connection (one after the other, [`CONNECT_PHASE`] at most); then
/// probe: connection 0 sends probe lines every [`PROBE_EVERY`] until every connection has
/// received one ([`PROBE_PHASE`] at most), which proves the server has subscribed all of them
/// (a server only forwards to connections it has accepted, and a connection accepted once stays
/// subscribed); then the window opens for exactly `cfg.secs` and every connection starts
/// sending. Deliveries and sent messages count only inside the window. At its end, a message
/// still not delivered to every connection although it was sent more than [`STALL`] earlier is
/// an error (a delivery that never came, even with no later message of its sender to reveal the
/// gap).
async fn drive<F: FnOnce()>(cfg: FanoutConfig, on_start: F) -> io::Result<FanoutOutcome> {
    let fmt = Format::new(cfg.len, cfg.conns);
    let window = u64::from(cfg.window.max(1));
    let slots = window.next_power_of_two();
    let epoch = Instant::now();
    let sh = Rc::new(Shared {
        fmt: fmt.clone(),
        addr: cfg.addr,
        conns: cfg.conns,
        window,
        mask: slots - 1,
        epoch,
        counting: Window::new(),
        senders: RefCell::new(
            (0..cfg.conns)
                .map(|_| SenderState {
                    next: 0,
                    done: 0,
                    remaining: vec![0; slots as usize].into(),
                    sent_at: vec![0; slots as usize].into(),
                    waker: None,
                })
                .collect(),
        ),
        probed: RefCell::new(vec![false; cfg.conns]),
        probed_count: Cell::new(0),
        alive: Cell::new(0),
        streams: RefCell::new(vec![None; cfg.conns]),
        gone_since: RefCell::new(vec![None; cfg.conns]),
        present: Cell::new(u32::try_from(cfg.conns).unwrap_or(u32::MAX)),
        resumes: RefCell::new(vec![Vec::new(); cfg.conns]),
        next_rejoin: Cell::new(REJOIN_PROBES),
        reconnects: Cell::new(0),
        deliveries: Cell::new(0),
        messages: Cell::new(0),
        errors: Cell::new(0),
        first_error: RefCell::new(None),
        hist: RefCell::new(stats::new_histogram()?),
    });

    // Connect, one after the other.
    let connect_deadline = Instant::now() + CONNECT_PHASE;
    let mut streams = Vec::with_capacity(cfg.conns);
    for i in 0..cfg.conns {
        if Instant::now() >= connect_deadline {
            return Err(io::Error::other(format!(
                "only {i} of {} connections made in {} s",
                cfg.conns,
                CONNECT_PHASE.as_secs()
            )));
        }
        let s = TcpStream::connect_timeout(cfg.addr, CONNECT_TIMEOUT)
            .await
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot connect to {} (connection {i}): {e}", cfg.addr),
                )
            })?;
        // Best effort: without it only latency suffers.
        let _ = s.set_nodelay(true);
        streams.push(Rc::new(s));
    }
    *sh.streams.borrow_mut() = streams.iter().cloned().map(Some).collect();
    for (i, s) in streams.into_iter().enumerate() {
        sh.alive.set(sh.alive.get() + 1);
        drop(hoop::spawn(receiver(i, s, sh.clone())));
    }

    // Probe until every connection received one.
    let probe_deadline = Instant::now() + PROBE_PHASE;
    let mut probe: u64 = 0;
    let mut pbuf: Vec<u8> = Vec::with_capacity(cfg.len);
    while sh.probed_count.get() < cfg.conns {
        if Instant::now() >= probe_deadline || sh.alive.get() < cfg.conns {
            let first = sh.first_error.borrow().clone();
            return Err(io::Error::other(format!(
                "the server forwarded no probe to {} of {} connections within {} s{}",
                cfg.conns - sh.probed_count.get(),
                cfg.conns,
                PROBE_PHASE.as_secs(),
                first.map_or(String::new(), |e| format!(" (first error: {e})"))
            )));
        }
        pbuf.clear();
        fmt.encode(&mut pbuf, PROBE_SENDER, probe);
        probe += 1;
        // Connection 0 sends them (while it rejoins after a reset, none is sent).
        let s0 = sh.streams.borrow()[0].clone();
        if let Some(s0) = s0 {
            // Bounded: a server that stops reading cannot hold the client here.
            let (res, b) = s0.write_all_timeout(pbuf, PROBE_PHASE).await;
            pbuf = b;
            if let Err(e) = res {
                if !broke(&s0, &e).await {
                    return Err(io::Error::new(e.kind(), format!("sending a probe: {e}")));
                }
            }
        }
        sleep(PROBE_EVERY).await;
    }
    // Errors before the window (none should happen) are not the measurement's.
    sh.errors.set(0);
    sh.first_error.borrow_mut().take();

    on_start();
    let cpu0 = thread_cpu();
    let deadline = sh.counting.open(cfg.secs);
    let start = deadline - cfg.secs;
    for i in 0..cfg.conns {
        drop(hoop::spawn(sender(i, sh.clone())));
    }
    // Wait for the deadline; stop early only if every connection died.
    while Instant::now() < deadline && sh.alive.get() > 0 {
        let next = (Instant::now() + TICK).min(deadline);
        hoop::time::sleep_until(next).await;
    }
    let deliveries = || sh.deliveries.get();
    let deadline = sh
        .counting
        .hold_for_first(deadline, TICK, || sh.alive.get() > 0, deliveries)
        .await;
    let wall = start.elapsed();
    let cpu = thread_cpu().saturating_sub(cpu0);
    // Messages that should have reached everyone by now.
    let stalled: Vec<(u32, u64)> = sh
        .senders
        .borrow()
        .iter()
        .enumerate()
        .filter(|(_, st)| st.done < st.next)
        .filter(|(_, st)| {
            let sent = st.sent_at[(st.done & (slots - 1)) as usize];
            sh.ns(deadline).saturating_sub(sent) > STALL.as_nanos() as u64
        })
        .map(|(i, st)| (i as u32, st.done))
        .collect();
    // Connections that did not rejoin after a reset although they had time to.
    let gone = sh
        .gone_since
        .borrow()
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.filter(|t| deadline.saturating_duration_since(*t) > STALL)
                .map(|_| i)
        })
        .collect::<Vec<_>>();
    if let Some(&i) = gone.first() {
        sh.errors(gone.len() as u64, || {
            format!(
                "connection {i} did not rejoin within {} s of a reset",
                STALL.as_secs_f64()
            )
        });
    }
    if let Some(&(s, q)) = stalled.first() {
        sh.errors(stalled.len() as u64, || {
            format!(
                "message {s}/{q} not delivered to every connection within {} s",
                STALL.as_secs_f64()
            )
        });
    }
    sh.counting.stop();
    let hist = sh.hist.borrow().clone();
    let first_error = sh.first_error.borrow().clone();
    Ok(FanoutOutcome {
        deliveries: sh.deliveries.get(),
        messages: sh.messages.get(),
        errors: sh.errors.get(),
        first_error,
        hist,
        wall,
        cpu,
        connected: cfg.conns,
        reconnects: sh.reconnects.get(),
    })
}

/// A write on `stream` failed with `e`: whether it is a reset while resets are injected, in
/// which case the stream is shut down, so that its receiving side sees it end and rejoins
/// (that side's streak decides whether it is excused).
async fn broke(stream: &TcpStream, e: &io::Error) -> bool {
    if !(resets::injected() && resets::is_reset(e)) {
        return false;
    }
    // Best effort: a socket already gone wakes its reader anyway.
    let _ = stream.shutdown_with(std::net::Shutdown::Both).await;
    true
}

/// Connection `id`'s sending side: whenever its window has room, one write of as many
/// messages as fit, on the connection's current stream (while it rejoins after a reset, it
/// waits).
async fn sender(id: usize, sh: Rc<Shared>) {
    sh.counting.wait_open().await;
    let fmt = sh.fmt.clone();
    let w = sh.window;
    let mut out: Vec<u8> = Vec::with_capacity(fmt.len() * w as usize);
    // A stream a write found reset: not written to again.
    let mut broken: Option<Rc<TcpStream>> = None;
    loop {
        // A subscribed stream and room in the window?
        let ready = poll_fn(|cx| {
            if sh.counting.stopped() {
                return Poll::Ready(None);
            }
            let stream = sh.streams.borrow()[id].clone();
            let mut senders = sh.senders.borrow_mut();
            let st = &mut senders[id];
            let room = w - (st.next - st.done);
            match stream {
                Some(s) if room > 0 && !broken.as_ref().is_some_and(|b| Rc::ptr_eq(b, &s)) => {
                    Poll::Ready(Some((s, room)))
                }
                _ => {
                    st.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        let now = Instant::now();
        let Some((stream, room)) = ready.filter(|_| sh.counting.counts_at(now)) else {
            return;
        };
        out.clear();
        let now_ns = sh.ns(now);
        let present = sh.present.get();
        {
            let mut senders = sh.senders.borrow_mut();
            let st = &mut senders[id];
            for _ in 0..room {
                let seq = st.next;
                let slot = (seq & sh.mask) as usize;
                st.remaining[slot] = present;
                st.sent_at[slot] = now_ns;
                fmt.encode(&mut out, id as u32, seq);
                st.next += 1;
            }
        }
        sh.messages.set(sh.messages.get() + room);
        let (res, b) = stream.write_all(out).await;
        out = b;
        if let Err(e) = res {
            if broke(&stream, &e).await {
                broken = Some(stream);
                continue;
            }
            sh.errors(1, || format!("connection {id}: write: {e}"));
            return;
        }
    }
}

/// Connection `id`'s receiving side: reads, cuts the bytes into messages, checks each one.
///
/// While resets are injected, a stream that ends in a reset (or an end of stream: the server
/// closes a connection it found reset) is replaced, as long as the connection's [`Streak`]
/// excuses it: the connection reconnects and sends a rejoin probe, and once that comes back
/// it is subscribed again. What it missed meanwhile is not owed to it ([`Shared::left`]), so
/// on the new stream a sender's messages sent before it rejoined may be skipped; so may a
/// sender's last messages before a reset of its own connection (its stream then jumps to where
/// its next connection started, and those skipped may still come late). A wrong byte, a
/// duplicate or any other gap is an error as on the first stream.
async fn receiver(id: usize, first: Rc<TcpStream>, sh: Rc<Shared>) {
    let len = sh.fmt.len();
    let mut verifier = Verifier::new(sh.fmt.clone());
    let mut buf: Vec<u8> = Vec::with_capacity(READ_BYTES + len);
    let mut stream = first;
    let mut streak = Streak::default();
    // Per sender: the first message owed to this connection (u64::MAX: none, while it rejoins).
    let mut owed = vec![0u64; sh.conns];
    // While rejoining: the number of this connection's rejoin probe.
    let mut joining: Option<u64> = None;
    // Per sender, the jumps its resets excused: the messages skipped that may still come
    // late from its lost connections (the server may read what a lost one sent after the
    // new one's first messages, and two lost ones' in any order).
    let mut late: Vec<Vec<std::ops::Range<u64>>> = vec![Vec::new(); sh.conns];
    'stream: loop {
        let end = loop {
            buf.reserve(READ_BYTES);
            let filled = buf.len();
            let (res, b) = stream.read(buf.slice(filled..)).await;
            buf = b.into_inner();
            match res {
                Ok(0) => {
                    break (
                        io::Error::from(io::ErrorKind::UnexpectedEof),
                        "the server closed it".to_string(),
                    )
                }
                Err(e) => {
                    let what = format!("read: {e}");
                    break (e, what);
                }
                Ok(_) => {}
            }
            let now = Instant::now();
            let now_ns = sh.ns(now);
            let counts = sh.counting.counts_at(now);
            let whole = buf.len() / len * len;
            let mut framing_lost = false;
            // A verified delivery of (`sender`, `seq`).
            let deliver = |sender: u32, seq: u64, owed: &[u64]| {
                let sent = if seq >= owed[sender as usize] {
                    sh.delivered(sender, seq)
                } else {
                    None
                };
                if counts {
                    sh.deliveries.set(sh.deliveries.get() + 1);
                    // Every 4th delivery's latency, by sequence number and receiver (so
                    // every message and every receiver is sampled alike): a quarter of
                    // the histogram's cost, still millions of samples a second.
                    if let Some(sent) = sent.filter(|_| (seq ^ id as u64) & 3 == 0) {
                        let ns = now_ns.saturating_sub(sent);
                        stats::record_ns(&mut sh.hist.borrow_mut(), u128::from(ns));
                    }
                }
            };
            for msg in buf[..whole].chunks_exact(len) {
                match verifier.check(msg) {
                    Verdict::Probe => {
                        streak.verified();
                        if joining.is_none() {
                            sh.probe_seen(id);
                        }
                    }
                    Verdict::Rejoin { seq } => {
                        if joining == Some(seq) {
                            joining = None;
                            streak.verified();
                            sh.rejoined(id, &stream, &mut owed);
                        }
                    }
                    Verdict::Delivered { sender, seq } => {
                        streak.verified();
                        deliver(sender, seq, &owed);
                    }
                    Verdict::Gap {
                        sender,
                        seq,
                        missing,
                    } => {
                        let s = sender as usize;
                        // Messages not owed to this stream (sent before it subscribed) may
                        // be skipped, and so may the owed ones a lost connection sent last
                        // (the jump lands where the sender's next connection started).
                        let expected = seq - missing;
                        let floor = match joining {
                            Some(_) => u64::MAX,
                            None => expected.max(owed[s]),
                        };
                        if seq <= floor || sh.resumed_at(sender, seq) {
                            late[s].push(expected..seq);
                            streak.verified();
                            deliver(sender, seq, &owed);
                            continue;
                        }
                        if floor > expected {
                            late[s].push(expected..floor);
                        }
                        if seq >= owed[s] {
                            sh.delivered(sender, seq);
                        }
                        let missing = seq - floor;
                        sh.errors(missing, || {
                            format!(
                                "connection {id}: {missing} message(s) of sender {sender} \
                                 missing before {sender}/{seq}"
                            )
                        });
                    }
                    Verdict::OutOfOrder {
                        sender,
                        seq,
                        expected,
                    } => {
                        // Late from one of the sender's lost connections: owed to nobody.
                        if !late[sender as usize].iter().any(|r| r.contains(&seq)) {
                            sh.errors(1, || {
                                format!(
                                    "connection {id}: message {sender}/{seq} out of order \
                                     (expected {sender}/{expected})"
                                )
                            });
                        }
                    }
                    Verdict::Corrupt {
                        what,
                        framing_lost: lost,
                    } => {
                        sh.errors(1, || format!("connection {id}: {what}"));
                        if lost {
                            framing_lost = true;
                            break;
                        }
                    }
                }
            }
            if framing_lost {
                break 'stream;
            }
            buf.drain(..whole);
        };
        // The stream ended: a reset to survive, or an error.
        let (e, what) = end;
        if !streak.excuses_error(&e) {
            sh.errors(1, || format!("connection {id}: {what}"));
            break;
        }
        sh.reconnect();
        sh.left(id, joining.is_none(), &verifier, &owed);
        owed.fill(u64::MAX);
        buf.clear();
        drop(stream);
        match rejoin(id, &sh, &mut streak).await {
            Some((s, token)) => {
                stream = s;
                joining = Some(token);
            }
            None => break,
        }
    }
    sh.alive.set(sh.alive.get() - 1);
}

/// Reconnects connection `id` and sends its rejoin probe; again after each reset `streak`
/// excuses. Returns the new stream and the probe's number, or `None` after an error (counted).
async fn rejoin(id: usize, sh: &Shared, streak: &mut Streak) -> Option<(Rc<TcpStream>, u64)> {
    let mut pbuf: Vec<u8> = Vec::with_capacity(sh.fmt.len());
    loop {
        let s = match TcpStream::connect_timeout(sh.addr, CONNECT_TIMEOUT).await {
            Ok(s) => s,
            Err(e) => {
                sh.errors(1, || format!("connection {id}: reconnecting: {e}"));
                return None;
            }
        };
        // Best effort: without it only latency suffers.
        let _ = s.set_nodelay(true);
        let token = sh.next_rejoin.get();
        sh.next_rejoin.set(token + 1);
        pbuf.clear();
        sh.fmt.encode(&mut pbuf, PROBE_SENDER, token);
        let (res, b) = s.write_all_timeout(pbuf, PROBE_PHASE).await;
        pbuf = b;
        match res {
            Ok(()) => return Some((Rc::new(s), token)),
            Err(e) if streak.excuses_error(&e) => sh.reconnect(),
            Err(e) => {
                sh.errors(1, || {
                    format!("connection {id}: sending a rejoin probe: {e}")
                });
                return None;
            }
        }
    }
}
