//! The echo load: a hoop echo server on each driver, in this process (so its fds, RSS and
//! in-flight operations can be sampled), and client threads that echo random messages, half-close,
//! reset, read slowly and churn connections, checking every byte that comes back.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use hoop::DriverKind;

use super::tally::{connect, linger_zero, Client, Rng, Tally};

/// A running in-process echo server.
pub(crate) struct EchoServer {
    pub addr: SocketAddr,
    /// The server runtime's operations in flight, sampled by a task every 250 ms.
    pub in_flight: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EchoServer {
    /// Starts the server on its own thread and runtime of `driver`; one connection in 20 has
    /// reads cancelled (dropped in flight after a random few microseconds), after which the
    /// server closes that connection (the client sees it cut and counts it).
    pub(crate) fn start(driver: DriverKind, seed: u64, tally: Arc<Tally>) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let (stop2, in_flight2) = (stop.clone(), in_flight.clone());
        let thread = std::thread::Builder::new()
            .name(format!("soak-echo-{driver}"))
            .spawn(move || {
                let rt = match hoop::Runtime::builder().driver(driver).build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(serve(tx, stop2, in_flight2, seed, tally));
            })?;
        let addr = rx
            .recv()
            .map_err(|_| io::Error::other("the echo server thread ended before listening"))??;
        Ok(EchoServer {
            addr,
            in_flight,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    ready: mpsc::Sender<io::Result<SocketAddr>>,
    stop: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
    seed: u64,
    tally: Arc<Tally>,
) {
    let listener = match hoop::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(listener.local_addr());
    let sampler = {
        let (stop, in_flight) = (stop.clone(), in_flight.clone());
        hoop::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(d) = hoop::driver::Driver::current() {
                    in_flight.store(d.in_flight(), Ordering::Relaxed);
                }
                hoop::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let mut conns = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept_timeout(Duration::from_millis(200)).await {
            Ok((s, _)) => {
                conns += 1;
                let rng = Rng::seeded(seed, 1_000_000 + conns);
                hoop::spawn(connection(s, rng, tally.clone()));
            }
            // A timeout (to look at `stop`), or an error an injected fault made: go on.
            Err(_) => continue,
        }
    }
    let _ = sampler.await;
}

async fn connection(s: hoop::net::TcpStream, mut rng: Rng, tally: Arc<Tally>) {
    let cancel_here = rng.below(20) == 0;
    loop {
        let read = s.read(Vec::with_capacity(16 * 1024));
        let (r, mut buf) = if cancel_here && rng.below(4) == 0 {
            let wait = Duration::from_micros(rng.below(300));
            match hoop::time::timeout(wait, read).await {
                Ok(done) => done,
                Err(_) => {
                    // The read was dropped in flight: what it may have taken is gone, so the
                    // connection ends here (the client sees it cut).
                    Tally::add(&tally.cancellations, 1);
                    return;
                }
            }
        } else {
            read.await
        };
        let n = match r {
            Ok(0) => return,
            Ok(n) => n,
            Err(_) => {
                Tally::add(&tally.errors, 1);
                return;
            }
        };
        buf.truncate(n);
        if s.write_all(buf).await.0.is_err() {
            Tally::add(&tally.errors, 1);
            return;
        }
    }
}

/// One client thread until `until`: connection by connection, a random mix of actions.
pub(crate) fn client(addr: SocketAddr, mut rng: Rng, c: Client<'_>) {
    let tally = c.tally;
    c.drive(|conn| {
        let action = rng.below(100);
        let res = if action < 60 {
            // Echo on a kept connection.
            let s = match conn.take() {
                Some(s) => s,
                None => match connect(addr) {
                    Ok(s) => s,
                    Err(_) => {
                        Tally::add(&tally.errors, 1);
                        return None;
                    }
                },
            };
            let len = 1 + rng.below(64 * 1024) as usize;
            let msg = rng.bytes(len);
            let r = echo_once(&s, &msg, tally);
            if matches!(r, Ok(true)) {
                *conn = Some(s);
            }
            r
        } else if action < 72 {
            let len = 1 + rng.below(128 * 1024) as usize;
            half_close(addr, &rng.bytes(len), tally)
        } else if action < 82 {
            let len = 1 + rng.below(32 * 1024) as usize;
            reset(addr, &rng.bytes(len), tally)
        } else if action < 90 {
            slow_reader(addr, &rng.bytes(256 * 1024), tally)
        } else {
            // Churn: connect and close at once.
            connect(addr).map(|_| true)
        };
        Some((res, c.name.to_string()))
    });
}

/// One checked echo on a fresh connection.
/// (Up to 10 tries: under injected faults the server may cut a connection.)
pub(crate) fn warm_up(addr: SocketAddr, tally: &Tally) -> io::Result<()> {
    for _ in 0..10 {
        let s = connect(addr)?;
        if echo_once(&s, b"warm-up", tally)? {
            return Ok(());
        }
    }
    Err(io::Error::other(
        "the echo server cut 10 warm-up connections",
    ))
}

/// Reads up to `want.len()` bytes, checking each against `want`. Returns how many came before
/// EOF (or a reset); a wrong byte is an `InvalidData` error.
fn read_checked(
    mut s: &TcpStream,
    want: &[u8],
    chunk: usize,
    pause: Duration,
) -> io::Result<usize> {
    let mut got = 0;
    let mut buf = vec![0u8; chunk];
    while got < want.len() {
        let room = (want.len() - got).min(chunk);
        let n = match s.read(&mut buf[..room]) {
            Ok(0) => return Ok(got),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => return Err(e),
        };
        if buf[..n] != want[got..got + n] {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "wrong byte in echo reply between offsets {got} and {}",
                    got + n
                ),
            ));
        }
        got += n;
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    Ok(got)
}

/// Writes `msg` on one thread while reading it back on this one. `Ok(true)`: all came back.
fn echo_once(s: &TcpStream, msg: &[u8], tally: &Tally) -> io::Result<bool> {
    echo_with(s, msg, tally, 16 * 1024, Duration::ZERO, false)
}

fn echo_with(
    s: &TcpStream,
    msg: &[u8],
    tally: &Tally,
    chunk: usize,
    pause: Duration,
    close_write: bool,
) -> io::Result<bool> {
    let got = std::thread::scope(|sc| {
        let writer = sc.spawn(|| -> io::Result<()> {
            let mut w = s;
            w.write_all(msg)?;
            if close_write {
                w.shutdown(Shutdown::Write)?;
            }
            Ok(())
        });
        let got = read_checked(s, msg, chunk, pause);
        // A write cut by the server's close is the same event as the short read.
        let _ = writer.join();
        got
    })?;
    Tally::add(&tally.bytes_verified, got as u64);
    if got < msg.len() {
        // Cut by a server-side cancellation or an injected fault: counted, not a failure.
        Tally::add(&tally.errors, 1);
        return Ok(false);
    }
    Ok(true)
}

/// Writes, half-closes, reads everything back, then expects EOF.
fn half_close(addr: SocketAddr, msg: &[u8], tally: &Tally) -> io::Result<bool> {
    let s = connect(addr)?;
    Tally::add(&tally.half_closes, 1);
    if !echo_with(&s, msg, tally, 16 * 1024, Duration::ZERO, true)? {
        return Ok(false);
    }
    let mut rest = [0u8; 1];
    match (&s).read(&mut rest) {
        Ok(0) => Ok(true),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bytes after the whole echo of a half-closed connection",
        )),
        Err(_) => Ok(false),
    }
}

/// Writes some bytes, then closes with SO_LINGER 0 (an RST) without reading.
fn reset(addr: SocketAddr, msg: &[u8], tally: &Tally) -> io::Result<bool> {
    let s = connect(addr)?;
    let _ = (&s).write_all(msg);
    linger_zero(&s);
    drop(s);
    Tally::add(&tally.resets, 1);
    Ok(true)
}

/// 256 KiB echoed to a reader that takes 4 KiB a millisecond: the server meets a full socket
/// buffer and must wait, not spin or drop.
fn slow_reader(addr: SocketAddr, msg: &[u8], tally: &Tally) -> io::Result<bool> {
    let s = connect(addr)?;
    Tally::add(&tally.slow_reads, 1);
    echo_with(&s, msg, tally, 4096, Duration::from_millis(1), false)
}
