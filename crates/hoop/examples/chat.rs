//! A line chat on every core: each line a client sends goes to every client.
//!
//! ```text
//! cargo run --release -p hoop --example chat -- 127.0.0.1:7070 [THREADS]
//! cargo run --release -p hoop --example chat -- --self-test [CLIENTS] [LINES]
//! cargo run --release -p hoop --example chat -- --self-test-rate CLIENTS SECS [WINDOW] [LAG]
//! ```
//!
//! Serve mode prints `listening on ADDR` and serves until SIGTERM or SIGINT, then writes
//! `bye` to every client, prints `said bye to N clients` and exits 0.
//!
//! What it shows, in hoop's shapes:
//! * one [`ReuseportGroup`] bound once with a socket per thread (port 0 works), a listener of it on every
//!   `run_per_core` thread; each thread's shutdown report at the end;
//! * a connection split into owned halves (`into_split`): a reader task with its deadline
//!   linked in the kernel (`read_timeout` is the idle timeout) and a writer loop that writes
//!   through the I/O traits (`AsyncWriteExt::write_all`, a flush when no line waits, within
//!   a `timeout` that drops a client that stops reading);
//! * lines fanned out over `tokio::sync::broadcast` (it needs no tokio runtime) across threads;
//! * a `CancellationToken` that signals cancel, and `select!` with `biased;` and guards.
//!
//! `--self-test CLIENTS LINES` (default 200 and 5) runs the server in this process and CLIENTS
//! clients on another thread: each sends LINES lines, every client checks it received every
//! client's every line exactly once (keeping its connection alive with `/ping`), one more
//! client stays silent and must be cut by the idle timeout, then the test raises SIGTERM and
//! every client must read `bye` and end of stream. It prints `verified N of M lines`,
//! `bye to N of N clients` and `idle client cut`, and exits non-zero if anything failed.
//!
//! `--self-test-rate CLIENTS SECS [WINDOW] [LAG]` (window default 4, lag default 256)
//! measures: the server in this process, CLIENTS clients on another thread, each sending
//! numbered lines for SECS seconds with at most WINDOW of them in flight (sent and not yet
//! back: the sender receives its own lines too) and at most LAG not yet received by every
//! client (the server's backlog is CLIENTS x LAG lines, so no client is ever cut for falling
//! behind); then every client must have received every line, in order per sender. It prints
//! `messages/s N`, `deliveries/s N` and `verified N of M deliveries, E errors`, and exits
//! non-zero on any loss or reordering.

use std::cell::Cell;
use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::io::AsyncWriteExt;
use hoop::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use hoop::net::{ReuseportGroup, TcpStream};
use hoop::signal::{signal, SignalKind};
use hoop::sync::CancellationToken;
use hoop::task::JoinSet;
use hoop::StaticBuf;
use tokio::sync::broadcast;

/// Limits and timeouts, in one place.
#[derive(Clone, Copy, Debug)]
struct Config {
    /// A client that sends nothing for this long is cut.
    idle: Duration,
    /// A write to a client that does not read for this long cuts it.
    write: Duration,
    /// Longest line; a longer one cuts the client.
    max_line_bytes: usize,
    /// Lines a slow client may fall behind before it is cut.
    backlog_lines: usize,
}

const CONFIG: Config = Config {
    idle: Duration::from_secs(60),
    write: Duration::from_secs(5),
    max_line_bytes: 4096,
    backlog_lines: 16 * 1024,
};

/// How a connection ended.
enum End {
    /// The server stopped and the client got its `bye`.
    SaidBye,
    /// The client sent nothing for `Config::idle`.
    Idle,
    /// The client left, broke a limit, or stopped reading.
    Gone,
}

/// Reads lines from `rd` with the idle deadline on every read and broadcasts each one.
/// Returns when the client leaves, stays silent past the deadline, or breaks the limits.
async fn read_lines(rd: OwnedReadHalf, tx: broadcast::Sender<Arc<str>>, config: Config) -> End {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        let (res, b) = rd.read_timeout(buf, config.idle).await;
        buf = b;
        match res {
            Ok(0) => return End::Gone,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return End::Idle,
            Err(_) => return End::Gone,
            Ok(_) => {}
        }
        pending.extend_from_slice(&buf);
        while let Some(nl) = pending.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line[..nl]);
            let text = text.trim_end_matches('\r');
            if text == "/ping" {
                continue;
            }
            // No receivers is not an error here: the sender itself left already.
            let _ = tx.send(Arc::from(format!("{text}\n")));
        }
        if pending.len() > config.max_line_bytes {
            return End::Gone;
        }
    }
}

/// One client: the reader task broadcasts what it sends; this loop writes what everyone sends
/// until the client leaves or the server stops, when it writes `bye`.
async fn serve_client(
    stream: TcpStream,
    tx: broadcast::Sender<Arc<str>>,
    shutdown: CancellationToken,
    config: Config,
) -> End {
    let _ = stream.set_nodelay(true);
    // Subscribed before the welcome: a client that read it misses no later line.
    let mut rx = tx.subscribe();
    let (rd, mut wr): (OwnedReadHalf, OwnedWriteHalf) = stream.into_split();
    let (res, _) = wr
        .write_all_timeout(StaticBuf(b"welcome\n"), config.write)
        .await;
    if res.is_err() {
        return End::Gone;
    }
    let mut reader = hoop::spawn(read_lines(rd, tx, config));
    let end = loop {
        hoop::select! {
            biased;
            _ = shutdown.cancelled() => {
                let (res, _) = wr.write_all_timeout(StaticBuf(b"bye\n"), config.write).await;
                break if res.is_ok() { End::SaidBye } else { End::Gone };
            }
            end = &mut reader => break end.unwrap_or(End::Gone),
            line = rx.recv() => match line {
                Ok(line) => {
                    // Through `AsyncWrite`, as a tokio program writes: `write_all` of each
                    // line (hoop copies it into the stream's buffer, sends it and returns),
                    // and a flush once no line is queued behind it.
                    let write = async {
                        AsyncWriteExt::write_all(&mut wr, line.as_bytes()).await?;
                        if rx.is_empty() {
                            AsyncWriteExt::flush(&mut wr).await?;
                        }
                        Ok::<_, io::Error>(())
                    };
                    if !matches!(hoop::time::timeout(config.write, write).await, Ok(Ok(()))) {
                        break End::Gone;
                    }
                }
                // Fell further behind than the backlog: cut it rather than lose lines silently.
                Err(broadcast::error::RecvError::Lagged(_)) => break End::Gone,
                Err(broadcast::error::RecvError::Closed) => break End::Gone,
            },
        }
    };
    reader.abort();
    if let End::Idle = end {
        let _ = wr
            .write_all_timeout(StaticBuf(b"idle timeout\n"), config.write)
            .await;
    }
    end
}

/// One core: its listener of the group, a task per client, until `shutdown`; then waits for
/// every client task to write its `bye`. Returns how many said bye.
async fn serve_core(
    core: usize,
    group: ReuseportGroup,
    tx: broadcast::Sender<Arc<str>>,
    shutdown: CancellationToken,
    config: Config,
) -> io::Result<usize> {
    let listener = group.listener()?;
    if core == 0 {
        // One watcher for the whole server: SIGTERM or SIGINT cancels every core.
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let token = shutdown.clone();
        hoop::spawn(async move {
            hoop::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = token.cancelled() => {}
            }
            token.cancel();
        });
    }
    let mut clients = JoinSet::new();
    loop {
        hoop::select! {
            biased;
            _ = shutdown.cancelled() => break,
            // Reap finished clients; the guard keeps an empty set from ending the loop.
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
            conn = listener.accept() => match conn {
                Ok((stream, _)) => {
                    clients.spawn(serve_client(stream, tx.clone(), shutdown.clone(), config));
                }
                Err(e) => eprintln!("chat: accept failed: {e}"),
            },
        }
    }
    let mut byes = 0;
    while let Some(end) = clients.join_next().await {
        if let Ok(End::SaidBye) = end {
            byes += 1;
        }
    }
    Ok(byes)
}

/// Runs the server on `threads` cores until a signal; returns the byes said.
fn serve(group: ReuseportGroup, threads: usize, config: Config) -> io::Result<usize> {
    let (tx, _) = broadcast::channel(config.backlog_lines);
    let shutdown = CancellationToken::new();
    let out = hoop::run_per_core_reports(threads, move |core| {
        serve_core(core, group.clone(), tx.clone(), shutdown.clone(), config)
    })?;
    let mut byes = 0;
    for (core, (res, report)) in out.into_iter().enumerate() {
        byes += res?;
        if report.leaked > 0 || report.still_in_flight > 0 || report.unfinished_writes > 0 {
            eprintln!("chat: core {core} shut down with {report:?}");
        }
    }
    Ok(byes)
}

/// Reads lines from `rd` until end of stream (or the deadline passes between reads); once
/// `wanted` lines starting with `c` arrived, adds one to `done`. Returns every line.
async fn read_all_lines(
    rd: OwnedReadHalf,
    deadline: Duration,
    wanted: usize,
    done: Rc<Cell<usize>>,
) -> io::Result<Vec<String>> {
    let mut data = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut chat_lines = 0;
    let mut counted = false;
    loop {
        let (res, b) = rd.read_timeout(buf, deadline).await;
        buf = b;
        if res? == 0 {
            break;
        }
        for (i, &c) in buf.iter().enumerate() {
            let starts_line = if i == 0 {
                data.last().is_none_or(|&last| last == b'\n')
            } else {
                buf[i - 1] == b'\n'
            };
            if c == b'c' && starts_line {
                chat_lines += 1;
            }
        }
        data.extend_from_slice(&buf);
        if !counted && chat_lines >= wanted {
            counted = true;
            done.set(done.get() + 1);
        }
    }
    Ok(String::from_utf8_lossy(&data)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// A connection that read its `welcome` (so the server subscribed it to the chat).
async fn connect_welcomed(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    let (res, buf) = s
        .read_exact_timeout(vec![0u8; 8], Duration::from_secs(10))
        .await;
    res?;
    if &buf[..] != b"welcome\n" {
        return Err(io::Error::other("no welcome"));
    }
    Ok(s)
}

/// What the self-test's clients saw.
struct Seen {
    verified: usize,
    wanted: usize,
    byes: usize,
    idle_cut: bool,
}

/// The self-test's clients, on their own runtime: every line to everyone, the idle cut, then
/// SIGTERM and the byes.
async fn clients(
    addr: SocketAddr,
    clients: usize,
    lines: usize,
    idle: Duration,
) -> io::Result<Seen> {
    // The silent client first: the idle timeout must cut it.
    let silent = connect_welcomed(addr).await?;
    let (silent_rd, _silent_wr) = silent.into_split();
    let silent_lines = hoop::spawn(read_all_lines(silent_rd, idle * 4, 0, Rc::default()));

    // Everyone connected and welcomed (so subscribed) before anyone speaks.
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(connect_welcomed(addr).await?.into_split());
    }
    let stop = CancellationToken::new();
    let wanted_each = clients * lines;
    let done: Rc<Cell<usize>> = Rc::default();
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for (id, (rd, wr)) in conns.into_iter().enumerate() {
        readers.push(hoop::spawn(read_all_lines(
            rd,
            Duration::from_secs(30),
            wanted_each,
            done.clone(),
        )));
        let stop = stop.clone();
        writers.push(hoop::spawn(async move {
            for n in 0..lines {
                let (res, _) = wr.write_all(format!("c{id} l{n}\n").into_bytes()).await;
                res?;
            }
            // Keep the connection alive under the idle timeout until the test ends.
            loop {
                hoop::select! {
                    _ = stop.cancelled() => break,
                    _ = hoop::time::sleep(idle / 4) => {
                        let (res, _) = wr.write_all(StaticBuf(b"/ping\n")).await;
                        res?;
                    }
                }
            }
            Ok::<_, io::Error>(wr)
        }));
    }
    let idle_cut = {
        let got = silent_lines.await.map_err(io::Error::other)??;
        got.iter().any(|l| l == "idle timeout")
    };
    // Every line reached every client (bounded wait; the check below counts what arrived).
    for _ in 0..3000 {
        if done.get() == clients {
            break;
        }
        hoop::time::sleep(Duration::from_millis(10)).await;
    }
    // SAFETY: kill(2) on our own pid with a signal the server listens for; no pointers.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    let mut verified = 0;
    let mut byes = 0;
    for (id, r) in readers.into_iter().enumerate() {
        let got = r.await.map_err(io::Error::other)??;
        let chat: HashSet<&str> = got
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with('c'))
            .collect();
        let count = got.iter().filter(|l| l.starts_with('c')).count();
        let mut ok = 0;
        for c in 0..clients {
            for n in 0..lines {
                if chat.contains(format!("c{c} l{n}").as_str()) {
                    ok += 1;
                }
            }
        }
        if count != ok {
            eprintln!("client {id}: {count} chat lines, {ok} expected ones (duplicates?)");
        }
        verified += ok.min(count);
        if got.last().map(String::as_str) == Some("bye") {
            byes += 1;
        }
    }
    stop.cancel();
    for w in writers {
        // A writer may fail once the server closed: the byes above are what counts.
        let _ = w.await;
    }
    Ok(Seen {
        verified,
        wanted: clients * wanted_each,
        byes,
        idle_cut,
    })
}

fn self_test(clients_n: usize, lines: usize) -> io::Result<()> {
    let config = Config {
        idle: Duration::from_millis(1500),
        ..CONFIG
    };
    let group = ReuseportGroup::bind_n("127.0.0.1:0", 2)?;
    let addr = group.local_addr();
    let client_thread = std::thread::spawn(move || -> io::Result<Seen> {
        // SIGTERM is for the server's listener: this thread must never take it.
        // SAFETY: a sigset on the stack, filled by sigemptyset/sigaddset, passed to
        // pthread_sigmask for this thread only.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        hoop::Runtime::new()?.block_on(clients(addr, clients_n, lines, config.idle))
    });
    let said_bye = serve(group, 2, config)?;
    let seen = client_thread
        .join()
        .map_err(|_| io::Error::other("the client thread panicked"))??;
    println!("verified {} of {} lines", seen.verified, seen.wanted);
    println!("bye to {} of {} clients", seen.byes, clients_n);
    if seen.idle_cut {
        println!("idle client cut");
    }
    eprintln!("server said bye {said_bye} times");
    if seen.verified == seen.wanted && seen.byes == clients_n && seen.idle_cut {
        Ok(())
    } else {
        Err(io::Error::other("self-test failed"))
    }
}

/// What the rate test's clients saw.
struct Rate {
    /// Lines sent while the window was open.
    sent: u64,
    /// Deliveries every receiver verified (in order per sender, none missing).
    verified: u64,
    /// Deliveries out of order, missing or malformed.
    errors: u64,
}

/// One rate sender's lines in flight, shared by every reader of the rate test (one thread).
struct InFlight {
    /// Its lines its own client received (the window counts these).
    echoed: Cell<u64>,
    /// Its lines every client received (the lag counts these).
    everywhere: Cell<u64>,
    /// How many clients received line `seq`, at `seq % lag` (at most `lag` lines of a sender
    /// are ever in flight, so a slot is free again before its next line is sent).
    receivers: Vec<Cell<usize>>,
    /// Woken when `echoed` or `everywhere` moves.
    room: tokio::sync::Notify,
}

impl InFlight {
    fn new(lag: u64) -> Self {
        InFlight {
            echoed: Cell::new(0),
            everywhere: Cell::new(0),
            receivers: (0..lag).map(|_| Cell::new(0)).collect(),
            room: tokio::sync::Notify::new(),
        }
    }

    /// One more client received line `seq` (each client receives a sender's lines in order);
    /// `own` if that client is the sender.
    fn received(&self, seq: u64, clients: usize, own: bool) {
        if own {
            self.echoed.set(seq + 1);
            self.room.notify_one();
        }
        let slot = &self.receivers[(seq % self.receivers.len() as u64) as usize];
        slot.set(slot.get() + 1);
        if slot.get() == clients {
            // The last client to receive `seq` has every line before it too.
            slot.set(0);
            self.everywhere.set(seq + 1);
            self.room.notify_one();
        }
    }
}

/// One rate client's reader: checks every chat line (`c<sender> <seq>`) against the next
/// sequence number expected from that sender, counts the verified ones in `delivered`, and
/// records each one in its sender's [`InFlight`] so that sender may send more.
async fn rate_reader(
    rd: OwnedReadHalf,
    me: usize,
    in_flight: Rc<Vec<InFlight>>,
    delivered: Rc<Cell<u64>>,
    errors: Rc<Cell<u64>>,
) {
    let clients = in_flight.len();
    let mut next = vec![0u64; clients];
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut said_bye = false;
    loop {
        let (res, b) = rd.read_timeout(buf, Duration::from_secs(30)).await;
        buf = b;
        if !matches!(res, Ok(n) if n > 0) {
            if !said_bye {
                // The server cut this client (or it failed): its missing lines say so too.
                eprintln!(
                    "chat: client {me}'s connection ended before the bye ({res:?}) after {} deliveries",
                    delivered.get()
                );
            }
            return;
        }
        pending.extend_from_slice(&buf);
        let mut start = 0;
        while let Some(n) = pending[start..].iter().position(|&c| c == b'\n') {
            let line = &pending[start..start + n];
            start += n + 1;
            if line == b"bye" {
                said_bye = true;
                continue;
            }
            let parsed = std::str::from_utf8(line).ok().and_then(|l| {
                let (who, seq) = l.strip_prefix('c')?.split_once(' ')?;
                Some((who.parse::<usize>().ok()?, seq.parse::<u64>().ok()?))
            });
            match parsed {
                Some((who, seq)) if who < clients && seq == next[who] => {
                    next[who] += 1;
                    delivered.set(delivered.get() + 1);
                    in_flight[who].received(seq, clients, who == me);
                }
                _ => errors.set(errors.get() + 1),
            }
        }
        pending.drain(..start);
    }
}

/// The rate test's clients: each keeps at most `window` of its lines in flight (sent and not
/// yet back from the server: the sender is among the receivers) and at most `lag` not yet
/// received by every client, for `secs`; then every receiver must get every line sent, in
/// order per sender.
///
/// The window alone would not do: the server's writers run on two threads, and the senders
/// served by one thread could run ahead of the other thread's writers without bound (when
/// the machine gives that thread less CPU), until those writers fell past the broadcast's
/// backlog and were cut. With the lag, no writer is ever more than `clients * lag` lines
/// behind, and that is the server's backlog.
async fn rate_clients(
    addr: SocketAddr,
    clients: usize,
    secs: u64,
    window: u64,
    lag: u64,
) -> io::Result<Rate> {
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(connect_welcomed(addr).await?.into_split());
    }
    let stop = Rc::new(Cell::new(false));
    let delivered: Vec<Rc<Cell<u64>>> = (0..clients).map(|_| Rc::default()).collect();
    let sent: Vec<Rc<Cell<u64>>> = (0..clients).map(|_| Rc::default()).collect();
    let errors: Rc<Cell<u64>> = Rc::default();
    let in_flight: Rc<Vec<InFlight>> = Rc::new((0..clients).map(|_| InFlight::new(lag)).collect());
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for (me, (rd, wr)) in conns.into_iter().enumerate() {
        readers.push(hoop::spawn(rate_reader(
            rd,
            me,
            in_flight.clone(),
            delivered[me].clone(),
            errors.clone(),
        )));
        let (stop, sent, in_flight) = (stop.clone(), sent[me].clone(), in_flight.clone());
        writers.push(hoop::spawn(async move {
            let mine = &in_flight[me];
            while !stop.get() {
                if sent.get() - mine.echoed.get() >= window
                    || sent.get() - mine.everywhere.get() >= lag
                {
                    // The readers say when a line came back or reached the last client (a
                    // bounded wait: the window's end is checked at least every 10 ms).
                    let _ =
                        hoop::time::timeout(Duration::from_millis(10), mine.room.notified()).await;
                    continue;
                }
                let line = format!("c{me} {}\n", sent.get()).into_bytes();
                let (res, _) = wr.write_all(line).await;
                res?;
                sent.set(sent.get() + 1);
            }
            Ok::<_, io::Error>(wr)
        }));
    }
    hoop::time::sleep(Duration::from_secs(secs)).await;
    stop.set(true);
    let mut halves = Vec::new();
    for w in writers {
        halves.push(w.await.map_err(io::Error::other)??);
    }
    let total: u64 = sent.iter().map(|s| s.get()).sum();
    // Every receiver gets every line (bounded wait).
    for _ in 0..2000 {
        if delivered.iter().all(|d| d.get() >= total) {
            break;
        }
        hoop::time::sleep(Duration::from_millis(10)).await;
    }
    let verified = delivered.iter().map(|d| d.get()).sum();
    // SAFETY: kill(2) on our own pid with a signal the server listens for; no pointers.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    for r in readers {
        let _ = r.await;
    }
    drop(halves);
    Ok(Rate {
        sent: total,
        verified,
        errors: errors.get(),
    })
}

/// `--self-test-rate CLIENTS SECS [WINDOW] [LAG]`: the server in this process, CLIENTS
/// clients on another thread, each sending lines with at most WINDOW in flight and LAG not
/// yet everywhere for SECS; prints `messages/s`, `deliveries/s` and `verified N of M
/// deliveries`, and fails on any loss.
fn rate_test(clients_n: usize, secs: u64, window: u64, lag: u64) -> io::Result<()> {
    let config = Config {
        idle: Duration::from_secs(secs + 60),
        // The lag keeps every writer within this many lines of the broadcast (see
        // `rate_clients`), so no client is ever cut for falling behind.
        backlog_lines: clients_n.max(1) * lag as usize,
        ..CONFIG
    };
    let group = ReuseportGroup::bind_n("127.0.0.1:0", 2)?;
    let addr = group.local_addr();
    let client_thread = std::thread::spawn(move || -> io::Result<Rate> {
        // SIGTERM is for the server's listener: this thread must never take it.
        // SAFETY: a sigset on the stack, filled by sigemptyset/sigaddset, passed to
        // pthread_sigmask for this thread only.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        hoop::Runtime::new()?.block_on(rate_clients(addr, clients_n, secs, window, lag))
    });
    serve(group, 2, config)?;
    let rate = client_thread
        .join()
        .map_err(|_| io::Error::other("the client thread panicked"))??;
    let wanted = rate.sent * clients_n as u64;
    let secs_f = secs as f64;
    println!("clients {clients_n} window {window} secs {secs}");
    println!("messages/s {:.0}", rate.sent as f64 / secs_f);
    println!("deliveries/s {:.0}", wanted as f64 / secs_f);
    println!(
        "verified {} of {} deliveries, {} errors",
        rate.verified, wanted, rate.errors
    );
    if rate.sent > 0 && rate.verified == wanted && rate.errors == 0 {
        Ok(())
    } else {
        Err(io::Error::other(
            "rate test failed: deliveries lost or out of order",
        ))
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |s: &str| -> io::Result<usize> {
        s.parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{s}: {e}")))
    };
    match args.as_slice() {
        [flag, clients, secs, rest @ ..] if flag == "--self-test-rate" => {
            let window = rest.first().map_or(Ok(4), |s| num(s))?.max(1);
            let lag = rest.get(1).map_or(Ok(256), |s| num(s))?.max(window);
            rate_test(num(clients)?, num(secs)? as u64, window as u64, lag as u64)
        }
        [flag, rest @ ..] if flag == "--self-test" => {
            let clients = rest.first().map_or(Ok(200), |s| num(s))?;
            let lines = rest.get(1).map_or(Ok(5), |s| num(s))?;
            self_test(clients, lines)
        }
        [addr, rest @ ..] => {
            let threads = rest.first().map_or(Ok(2), |s| num(s))?;
            let group = ReuseportGroup::bind_n(addr.as_str(), threads)?;
            println!("listening on {}", group.local_addr());
            let byes = serve(group, threads, CONFIG)?;
            println!("said bye to {byes} clients");
            Ok(())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: chat ADDR [THREADS] | chat --self-test [CLIENTS] [LINES] \
             | chat --self-test-rate CLIENTS SECS [WINDOW] [LAG]",
        )),
    }
}
