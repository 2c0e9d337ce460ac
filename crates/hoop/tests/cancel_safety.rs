//! Cancel safety as tokio documents it: a receive whose future is dropped in `select!` loses
//! nothing (its result goes to the next call). Each test runs a `select!` loop of the receive
//! against a 50 µs timer that usually wins, on io_uring and on epoll, and counts what the peer
//! sent against what arrived: connections, bytes (in order). Loops are bounded by counts and
//! `LIMIT`; nothing is asserted about speed. The datagram receives:
//! `cancel_safety_datagrams.rs`.
//!
//! Under injected resets a connection may end early: a client that is not served reconnects
//! (a lost connection is still a client that waits in vain), and a stream of megabytes goes
//! on over a new connection from the byte where a reset cut it (`resets::Resumed`), every
//! byte checked in order on each connection; a reset is an error there, never a silent loss.

use hoop_test_support::ReadRetry as _;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoop::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use hoop::time::{sleep, Instant};
use hoop_test_support as common;
use hoop_test_support::resets;

mod cancel_safety_common;
use cancel_safety_common::*;

/// The byte at offset `i` of the streams the writers send.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8 ^ (i >> 12) as u8
}

/// Sets the flag when dropped: the clients are done, served or failed.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// `n` clients connect one after another, each waiting (at most `LIMIT`) for one byte:
/// returns how many were served. A connection the server lost fails the test (its read times
/// out); one a reset ended (no byte, the end of the stream) connects again.
fn connecting_clients(
    n: usize,
    connect: impl Fn() -> std::io::Result<Box<dyn Read + Send>> + Send + 'static,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    common::spawn(move || {
        let _done = SetOnDrop(done);
        for i in 0..n {
            resets::retry(&format!("client {i} of {n}"), |_| {
                let mut s = connect()?;
                let mut b = [0u8; 1];
                match s.read_retry(&mut b)? {
                    1 => Ok(()),
                    _ => Err(resets::closed_early("its byte")),
                }
            });
        }
        n
    })
}

/// The server's answer to an accepted connection: one byte. A reset ends the connection,
/// which the server drops (its client connects again).
async fn serve(write: impl std::future::Future<Output = hoop::BufResult<(), Vec<u8>>>) {
    if let (Err(e), _) = write.await {
        resets::expect_reset("the server's write", &e);
    }
}

/// [`connecting_clients`] over TCP to `addr`.
fn tcp_clients(
    n: usize,
    addr: std::net::SocketAddr,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let connect = move || {
        let s = std::net::TcpStream::connect(addr)?;
        s.set_read_timeout(Some(LIMIT))?;
        Ok(Box::new(s) as Box<dyn Read + Send>)
    };
    connecting_clients(n, connect, done)
}

#[hoop::test]
async fn tcp_accept_in_select_loses_no_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let clients = tcp_clients(400, addr, done.clone());
    let (mut ticks, end) = (0u64, Instant::now() + LIMIT);
    while !done.load(Ordering::Acquire) && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(TICK) => ticks += 1,
            res = listener.accept() => match res {
                Ok((s, _)) => serve(s.write_all(vec![7u8])).await,
                Err(e) if retry(&e) => {}
                Err(e) => panic!("accept: {e}"),
            },
        }
    }
    let served = clients.join().unwrap();
    assert_eq!(served, 400, "after {ticks} timer wins");
}

#[hoop::test]
async fn unix_accept_in_select_loses_no_connection() {
    let dir = std::env::temp_dir().join(format!("hoop-cancel-accept-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{:?}.sock", std::thread::current().id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).await.unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let p = path.clone();
    let clients = connecting_clients(
        300,
        move || {
            let s = std::os::unix::net::UnixStream::connect(&p)?;
            s.set_read_timeout(Some(LIMIT))?;
            Ok(Box::new(s) as Box<dyn Read + Send>)
        },
        done.clone(),
    );
    let end = Instant::now() + LIMIT;
    while !done.load(Ordering::Acquire) && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            res = listener.accept() => match res {
                Ok((s, _)) => serve(s.write_all(vec![7u8])).await,
                Err(e) if retry(&e) => {}
                Err(e) => panic!("accept: {e}"),
            },
        }
    }
    let served = clients.join().unwrap();
    let _ = std::fs::remove_file(&path);
    // The last of the drivers' runs to finish removes the directory (it fails while the
    // other's socket is still there).
    let _ = std::fs::remove_dir(&dir);
    assert_eq!(served, 300);
}

/// A writer thread sends the bytes of `pattern` from `*got` to `total`; the stream is read
/// with owned buffers of several sizes in a `select!` loop against the timer. Every byte must
/// arrive, in order; a reset is returned (the caller goes on over a new connection from
/// `*got`).
async fn read_all_in_select<S>(
    stream: &S,
    got: &mut usize,
    total: usize,
    read: impl AsyncReadOwned<S>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(8192);
    let end = Instant::now() + LIMIT;
    let mut caps = [512usize, 8192, 100, 3000].into_iter().cycle();
    while *got < total && Instant::now() < end {
        // Buffers of several sizes: bytes a dropped read got must fit the next one's or stay.
        let cap = caps.next().unwrap_or(512);
        buf.clear();
        buf.reserve_exact(cap);
        let b = std::mem::take(&mut buf);
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = read.read(stream, b) => {
                match res {
                    Ok(0) => panic!("end of stream after {got} of {total} bytes"),
                    Ok(n) => {
                        for (i, &x) in b[..n].iter().enumerate() {
                            assert_eq!(x, pattern(*got + i), "byte {} differs", *got + i);
                        }
                        *got += n;
                    }
                    Err(e) if retry(&e) => {}
                    Err(e) => return Err(e),
                }
                buf = b;
            }
        }
    }
    assert_eq!(*got, total, "bytes received");
    Ok(())
}

/// Runs `part` (a connection's share of a transfer of `total` bytes, from the byte it is
/// given, which it moves on) until the whole transfer is done, over a new connection after
/// each reset.
async fn resuming<F>(what: &str, total: usize, mut part: impl FnMut(usize) -> F)
where
    F: std::future::Future<Output = (std::io::Result<()>, usize)>,
{
    let mut resumed = resets::Resumed::new(what);
    let mut got = 0;
    while got < total {
        let (res, now) = part(got).await;
        assert!(now >= got);
        if let Err(e) = res {
            resumed.after(e, now - got);
        }
        got = now;
    }
}

/// The owned-buffer `read` of a stream type (TCP, Unix).
trait AsyncReadOwned<S> {
    fn read(
        &self,
        s: &S,
        buf: Vec<u8>,
    ) -> impl std::future::Future<Output = (std::io::Result<usize>, Vec<u8>)>;
}

struct Tcp;

impl AsyncReadOwned<TcpStream> for Tcp {
    async fn read(&self, s: &TcpStream, buf: Vec<u8>) -> (std::io::Result<usize>, Vec<u8>) {
        s.read(buf).await
    }
}

struct Unix;

impl AsyncReadOwned<UnixStream> for Unix {
    async fn read(&self, s: &UnixStream, buf: Vec<u8>) -> (std::io::Result<usize>, Vec<u8>) {
        s.read(buf).await
    }
}

/// Writes the bytes of `pattern` from `from` to `total`; stops at an error (the reader is gone).
fn write_pattern(mut w: impl Write, from: usize, total: usize) {
    let data: Vec<u8> = (from..total).map(pattern).collect();
    for chunk in data.chunks(7000) {
        if w.write_all(chunk).is_err() {
            return;
        }
    }
}

const STREAM_BYTES: usize = 4 << 20;

#[hoop::test]
async fn tcp_read_in_select_loses_no_byte() {
    resuming("4 MiB over TCP", STREAM_BYTES, |from| async move {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = common::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            write_pattern(s, from, STREAM_BYTES);
        });
        let mut got = from;
        let stream = match TcpStream::connect(addr).await {
            Ok(s) => s,
            Err(e) => return (Err(e), got),
        };
        let read = read_all_in_select(&stream, &mut got, STREAM_BYTES, Tcp).await;
        // Closed before the writer is waited for: a writer cut short by a reset then ends.
        let _ = stream.close().await;
        writer.join().unwrap();
        (read, got)
    })
    .await;
}

#[hoop::test]
async fn unix_read_in_select_loses_no_byte() {
    resuming(
        "4 MiB over a Unix stream",
        STREAM_BYTES,
        |from| async move {
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let writer = common::spawn(move || write_pattern(a, from, STREAM_BYTES));
            let stream = UnixStream::from_std(b);
            let mut got = from;
            let read = read_all_in_select(&stream, &mut got, STREAM_BYTES, Unix).await;
            let _ = stream.close().await;
            writer.join().unwrap();
            (read, got)
        },
    )
    .await;
}

/// A read dropped while in flight, then the stream dropped: the parked read is cancelled with
/// the socket (no fd or slot left behind), and the runtime shuts down clean.
#[test]
fn dropping_a_stream_with_a_parked_read_leaks_nothing() {
    common::each_driver(|kind| {
        let rt = common::runtime(kind);
        rt.block_on(async {
            let (a, b) = UnixStream::pair().unwrap();
            for _ in 0..50 {
                hoop::select! {
                    biased;
                    _ = sleep(Duration::from_micros(1)) => {}
                    (res, _) = b.read(Vec::with_capacity(64)) => match res {
                        // A reset read parks nothing: the round is one without.
                        Err(e) => resets::expect_reset("a read of nothing", &e),
                        Ok(n) => panic!("nothing was written, {n} bytes read"),
                    },
                }
            }
            drop(b);
            // The peer sees the close: its read ends (a reset ends it too).
            let (res, _) = a.read(Vec::with_capacity(64)).await;
            match res {
                Err(e) => resets::expect_reset("the peer's read", &e),
                Ok(n) => assert_eq!(n, 0),
            }
        });
        let report = rt.shutdown();
        assert_eq!(report.leaked, 0, "{report:?}");
        assert_eq!(report.still_in_flight, 0, "{report:?}");
    });
}

/// The same through an owned read half, with `read_timeout` (a deadline linked to each read)
/// taking turns with `read`: a read dropped with its deadline pending is kept too.
#[hoop::test]
async fn read_half_and_read_timeout_in_select_lose_no_byte() {
    let total = 1 << 20;
    resuming("1 MiB through a read half", total, |from| async move {
        let mut got = from;
        let res = read_half_part(&mut got, total).await;
        (res, got)
    })
    .await;
}

/// A connection's share of [`read_half_and_read_timeout_in_select_lose_no_byte`], from byte
/// `*got`: a reset ends it (the writer, cut short, ends when the pair is dropped).
async fn read_half_part(got: &mut usize, total: usize) -> std::io::Result<()> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    let from = *got;
    let writer = common::spawn(move || write_pattern(a, from, total));
    let (read, _write) = UnixStream::from_std(b).into_split();
    let mut i = 0u32;
    let end = Instant::now() + LIMIT;
    while *got < total && Instant::now() < end {
        i += 1;
        let turn = i.is_multiple_of(2);
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = read.read(Vec::with_capacity(1000)), if turn => {
                let n = res?;
                assert!(b[..n].iter().enumerate().all(|(k, &x)| x == pattern(*got + k)));
                *got += n;
            }
            (res, b) = read.read_timeout(Vec::with_capacity(1000), LIMIT), if !turn => {
                let n = res?;
                assert!(b[..n].iter().enumerate().all(|(k, &x)| x == pattern(*got + k)));
                *got += n;
            }
        }
    }
    writer.join().unwrap();
    assert_eq!(*got, total);
    Ok(())
}

/// `JoinSet::join_next` in `select!`: a result that completed for a dropped call stays in the
/// set for the next one.
#[hoop::test]
async fn join_next_in_select_loses_no_result() {
    let mut set = hoop::task::JoinSet::new();
    for i in 0..300u32 {
        set.spawn(async move {
            for _ in 0..i % 7 {
                hoop::task::yield_now().await;
            }
            i
        });
    }
    let mut seen = vec![false; 300];
    let end = Instant::now() + LIMIT;
    while seen.iter().any(|s| !s) && Instant::now() < end {
        hoop::select! {
            biased;
            _ = hoop::task::yield_now() => {}
            Some(r) = set.join_next() => {
                let i = r.unwrap() as usize;
                assert!(!seen[i], "result {i} twice");
                seen[i] = true;
            }
        }
    }
    assert!(seen.iter().all(|s| *s), "results lost");
    assert!(set.join_next().await.is_none());
}

/// `Interval::tick` in `select!`: a tick a dropped call would have returned comes with the
/// next call (with the default `Burst`, ticks are exactly one period apart: a lost one would
/// leave a gap of two).
#[hoop::test]
async fn interval_tick_in_select_loses_no_tick() {
    let period = Duration::from_micros(300);
    let mut every = hoop::time::interval(period);
    let mut ticks = Vec::new();
    let end = Instant::now() + LIMIT;
    while ticks.len() < 100 && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(Duration::from_micros(100)) => {}
            t = every.tick() => ticks.push(t),
        }
    }
    assert_eq!(ticks.len(), 100);
    for w in ticks.windows(2) {
        assert_eq!(w[1] - w[0], period, "a tick was lost");
    }
}

/// A multishot `incoming()` made anew in each round of a `select!` loop (each one dropped when
/// the timer wins): connections the kernel accepted for a dropped stream go to the listener's
/// next `accept` or `incoming()`.
#[hoop::test]
async fn incoming_dropped_in_select_loses_no_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let clients = tcp_clients(300, addr, done.clone());
    let (end, mut i) = (Instant::now() + LIMIT, 0u32);
    while !done.load(Ordering::Acquire) && Instant::now() < end {
        i += 1;
        let mut incoming = listener.incoming();
        // `incoming()` and `accept` take turns: each serves what the other's drop kept.
        let conn = hoop::select! {
            biased;
            _ = sleep(TICK) => None,
            r = incoming.next(), if !i.is_multiple_of(3) => r,
            r = listener.accept(), if i.is_multiple_of(3) => Some(r.map(|(s, _)| s)),
        };
        match conn {
            Some(Ok(s)) => serve(s.write_all(vec![7u8])).await,
            Some(Err(e)) if retry(&e) => {}
            Some(Err(e)) => panic!("accept: {e}"),
            None => {}
        }
    }
    let served = clients.join().unwrap();
    assert_eq!(served, 300);
}

/// A `recv_stream` started while a dropped read's bytes are kept does not overtake them: it
/// waits while that read is in flight, then fails with `InvalidInput` until `read` took them;
/// a `recv_stream` made after that delivers the bytes after them, in order.
#[hoop::test]
async fn recv_stream_never_overtakes_kept_bytes() {
    resets::retry_async("a kept read, then a recv_stream", |_| overtake_attempt()).await;
}

/// One run of [`recv_stream_never_overtakes_kept_bytes`] on a new connection: a reset ends it.
async fn overtake_attempt() -> std::io::Result<()> {
    let total = 256 << 10;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let writer = common::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            write_pattern(s, 0, total);
        }
    });
    let stream = TcpStream::connect(addr).await?;
    let ring = hoop::BufRing::new(8, 4096).unwrap();
    let check = |b: &[u8], got: usize| {
        for (k, &x) in b.iter().enumerate() {
            assert_eq!(x, pattern(got + k), "byte {} differs", got + k);
        }
    };
    // A read dropped once it is in flight: parked, its bytes kept. (On epoll a read with
    // bytes waiting completes at once: those count, and the next one is tried.)
    let mut got = 0usize;
    let mut parked = false;
    for _ in 0..1000 {
        hoop::select! {
            biased;
            _ = hoop::task::yield_now() => {
                parked = true;
            }
            (res, b) = stream.read(Vec::with_capacity(100)) => {
                let n = res?;
                check(&b[..n], got);
                got += n;
            }
        }
        if parked {
            break;
        }
    }
    let mut rs = stream.recv_stream(&ring);
    match hoop::time::timeout(LIMIT, rs.next()).await.unwrap() {
        Some(Err(e)) if resets::is_reset(&e) => return Err(e),
        Some(Err(e)) if parked => {
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}")
        }
        Some(Ok(buf)) if !parked => {
            // Nothing was kept: the stream delivers the next bytes.
            check(&buf, got);
            return Ok(());
        }
        other => panic!("parked={parked}: {other:?}"),
    }
    drop(rs);
    let (res, b) = stream.read(Vec::with_capacity(100)).await;
    let n = res?;
    assert!(n > 0);
    check(&b[..n], got);
    got += n;
    let mut rs = stream.recv_stream(&ring);
    let buf = hoop::time::timeout(LIMIT, rs.next()).await.unwrap();
    let buf = buf.expect("a buffer")?;
    check(&buf, got);
    drop(rs);
    drop(stream);
    drop(writer);
    Ok(())
}

/// Owned-buffer reads in a `select!` loop and `AsyncRead` (futures') reads take turns on one
/// stream: the bytes an owned read dropped in flight received come from the next read of
/// either kind, in order.
#[hoop::test]
async fn trait_reads_take_what_dropped_owned_reads_kept() {
    let total = 1 << 20;
    resuming(
        "1 MiB through owned and trait reads",
        total,
        |from| async move {
            let mut got = from;
            let res = trait_reads_part(&mut got, total).await;
            (res, got)
        },
    )
    .await;
}

/// A connection's share of [`trait_reads_take_what_dropped_owned_reads_kept`], from byte
/// `*got`: a reset ends it (the writer, cut short, ends when the pair is dropped).
async fn trait_reads_part(got: &mut usize, total: usize) -> std::io::Result<()> {
    use futures::AsyncReadExt;
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    let from = *got;
    let writer = common::spawn(move || write_pattern(a, from, total));
    let mut stream = UnixStream::from_std(b);
    let mut i = 0u32;
    let mut scratch = vec![0u8; 700];
    let end = Instant::now() + LIMIT;
    while *got < total && Instant::now() < end {
        i += 1;
        if i.is_multiple_of(3) {
            let n = AsyncReadExt::read(&mut stream, &mut scratch).await?;
            assert!(n > 0, "end of stream after {got} bytes");
            for (k, &x) in scratch[..n].iter().enumerate() {
                assert_eq!(
                    x,
                    pattern(*got + k),
                    "byte {} differs (trait read)",
                    *got + k
                );
            }
            *got += n;
            continue;
        }
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = stream.read(Vec::with_capacity(900)) => {
                let n = res?;
                assert!(n > 0, "end of stream after {got} bytes");
                for (k, &x) in b[..n].iter().enumerate() {
                    assert_eq!(x, pattern(*got + k), "byte {} differs", *got + k);
                }
                *got += n;
            }
        }
    }
    writer.join().unwrap();
    assert_eq!(*got, total);
    Ok(())
}
