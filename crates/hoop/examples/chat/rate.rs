//! `--self-test-rate CLIENTS SECS [WINDOW] [LAG]`: the server in this process, numbered lines
//! with a window in flight, and every delivery checked in order per sender.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::self_test::*;
use crate::server::*;
use hoop::net::tcp::OwnedReadHalf;
use hoop::net::ReuseportGroup;

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
pub(crate) fn rate_test(clients_n: usize, secs: u64, window: u64, lag: u64) -> io::Result<()> {
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
