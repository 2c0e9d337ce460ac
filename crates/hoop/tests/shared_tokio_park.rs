//! `hoop::shared` inside tokio's multi-thread runtime, the work a runtime leaves to its park:
//! a runtime without I/O leaves the waiting to the reapers, reads by readiness wake for the
//! bytes after a short read, and writes deferred to the park (or to a flush polled without
//! parking) arrive whole on both engines. Needs feature `tokio`. The tests count fds and slots
//! in flight, so they run one at a time (`common::serial`).

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use common::{resets, serial};

use futures::FutureExt;
use hoop::shared::{Rings, TcpStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod shared_tokio_common;
use shared_tokio_common::*;

/// A tokio runtime built without I/O cannot take a ring fd (tokio panics in the registration,
/// which hoop catches quietly): the rings' reapers keep the waiting and everything completes.
#[test]
fn a_runtime_without_io_leaves_the_waiting_to_the_reapers() {
    let _g = serial();
    let Some(rings) = common::shared_rings(64) else {
        return;
    };
    // A read that a reset ended is asked again on a new pair (and a new runtime).
    let got = resets::retry("a read on a runtime without I/O", |_| {
        let opted_out = hoop::fault::opted_out();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_start(move || std::mem::forget(hoop::fault::opt_out_inherited(opted_out)))
            .build()
            .unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let stream = {
            use std::os::fd::{FromRawFd, IntoRawFd};
            // SAFETY: a connected stream socket we own; TcpStream only wraps it for recv/send.
            TcpStream::from_std(&rings, unsafe {
                std::net::TcpStream::from_raw_fd(a.into_raw_fd())
            })
        };
        let read = rt.spawn(async move {
            let (res, buf) = stream.read(vec![0u8; 16]).await;
            res.map(|n| buf[..n].to_vec())
        });
        std::thread::sleep(Duration::from_millis(50));
        if let Err(e) = b.write_all(b"no io driver") {
            // The read was reset first and its stream closed.
            resets::expect_reset("the peer's write", &e);
        }
        common::bounded(10, move || rt.block_on(read).unwrap())
    });
    assert_eq!(got, b"no io driver");
}

/// Rings of `kind` for a test that runs on both engines; `None` (with a line) where the kind
/// cannot be built here.
fn rings_of(kind: hoop::DriverKind) -> Option<Rings> {
    let _setup = hoop::fault::opt_out_quietly(&["setup"]);
    match Rings::builder().rings(2).entries(128).driver(kind).build() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("SKIP: shared rings on {kind:?}: {e}");
            None
        }
    }
}

/// tokio's `poll_read` on a shared stream reads by readiness, and a read shorter than its
/// buffer clears the readiness it saw (the receive queue is empty then, as tokio assumes): the
/// bytes that arrive after it must still wake the next read, on both engines, pieces and end
/// of stream alike.
#[test]
fn reads_by_readiness_wake_for_bytes_after_a_short_read() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let rt = runtime();
        // The pieces are one connection's: a reset reruns them all on a new one.
        rt.block_on(resets::retry_async(&format!("{kind:?}: 20 pieces"), |_| {
            let rings = rings.clone();
            async move {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                let peer = std::thread::spawn(move || {
                    let (mut s, _) = listener.accept().unwrap();
                    for i in 0..20u8 {
                        // Wait until the reader took the piece before, so each read is short
                        // and each piece lands on a socket whose readiness was cleared.
                        if go_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                            return;
                        }
                        if let Err(e) = s.write_all(&[i; 3]) {
                            // The reader's connection was reset and closed.
                            resets::expect_reset("a piece", &e);
                            return;
                        }
                    }
                });
                let read_all = async {
                    let mut stream = TcpStream::connect(&rings, addr).await?;
                    let mut buf = [0u8; 64];
                    for i in 0..20u8 {
                        go_tx.send(()).unwrap();
                        let mut got = Vec::new();
                        while got.len() < 3 {
                            let n = tokio::time::timeout(
                                Duration::from_secs(10),
                                AsyncReadExt::read(&mut stream, &mut buf),
                            )
                            .await
                            .unwrap_or_else(|_| {
                                panic!("{kind:?}: piece {i} never woke the read")
                            })?;
                            if n == 0 {
                                return Err(resets::closed_early(&format!("piece {i}")));
                            }
                            got.extend_from_slice(&buf[..n]);
                        }
                        assert_eq!(got, [i; 3], "{kind:?}: piece {i}");
                    }
                    let n = tokio::time::timeout(
                        Duration::from_secs(10),
                        AsyncReadExt::read(&mut stream, &mut buf),
                    )
                    .await
                    .expect("the end of stream never woke the read")?;
                    assert_eq!(n, 0, "{kind:?}: end of stream");
                    Ok(())
                }
                .await;
                drop(go_tx);
                tokio::task::spawn_blocking(move || peer.join().unwrap())
                    .await
                    .unwrap();
                read_all
            }
        }));
    }
}

/// tokio's multi-thread runtime with hoop's park hook: each worker submits the socket writes
/// its tasks deferred, all of a turn in one `io_uring_enter`, before it sleeps.
fn runtime_with_park_submit() -> tokio::runtime::Runtime {
    let opted_out = hoop::fault::opted_out();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .on_thread_start(move || std::mem::forget(hoop::fault::opt_out_inherited(opted_out)))
        .on_thread_park(hoop::shared::submit_deferred)
        .enable_all()
        .build()
        .unwrap()
}

/// A std echo server, one thread per connection, echoing until end of stream; it accepts
/// until [`EchoServer::join`] (a client that a reset cut comes back on a new connection).
fn std_echo() -> (std::net::SocketAddr, EchoServer) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut peers = Vec::new();
        // Bounded: the clients' connections plus their retries.
        for _ in 0..10_000 {
            let (mut s, _) = listener.accept().unwrap();
            if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            peers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                loop {
                    match s.read_retry(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            }));
        }
        for p in peers {
            let _ = p.join();
        }
    });
    (addr, EchoServer { addr, stop, thread })
}

/// The echo server of [`std_echo`].
struct EchoServer {
    addr: std::net::SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl EchoServer {
    /// Stops accepting (a last connection wakes the accept) and waits for every connection's
    /// end of stream.
    fn join(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
        self.thread.join().unwrap();
    }
}

/// Writes deferred to the workers' park (tokio's `on_thread_park` calling
/// `hoop::shared::submit_deferred`) arrive whole and in order, on both engines: small and
/// large messages (larger than the 16 KiB write-behind: a second write in one poll), flushed
/// or not before the reply is read (then only the park sends them), from 8 tasks on 4 workers.
/// Under injected resets every message either comes back whole or its exchange gets an error
/// (then it reruns on a new connection): a deferred send's reset must be reported by a later
/// write or by the flush, never dropped (the io_uring engine once lost it when the next write
/// found it already failed, and `write_all` returned `Ok` for a message missing 16 KiB, whose
/// echo then never came).
#[test]
fn writes_deferred_to_the_park_arrive_whole_on_both_engines() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let conns = 8;
        let (addr, server) = std_echo();
        let rt = runtime_with_park_submit();
        rt.block_on(async {
            let tasks: Vec<_> = (0..conns as u64)
                .map(|t| {
                    let rings = rings.clone();
                    tokio::spawn(async move {
                        // A round that a reset cut is sent again on a new connection.
                        let mut resumed = resets::Resumed::new(&format!("{kind:?}: task {t}"));
                        let mut done = 0;
                        let mut conn = None;
                        let sizes = [1usize, 100, 1024, 20_000, 40_000];
                        for round in 0..20u64 {
                            let size = sizes[(round as usize + t as usize) % sizes.len()];
                            let msg = pattern(t * 1000 + round, size);
                            loop {
                                let mut stream = match conn.take() {
                                    Some(s) => s,
                                    None => TcpStream::connect(&rings, addr).await.unwrap(),
                                };
                                let exchange = async {
                                    AsyncWriteExt::write_all(&mut stream, &msg).await?;
                                    if round % 2 == 0 {
                                        AsyncWriteExt::flush(&mut stream).await?;
                                    }
                                    read_echo(&mut stream, size).await
                                };
                                match exchange.await {
                                    Ok(got) => {
                                        assert!(
                                            got == msg,
                                            "{kind:?}: task {t} round {round}: bytes differ"
                                        );
                                        done += 1;
                                        conn = Some(stream);
                                        break;
                                    }
                                    Err(e) => resumed.after(e, std::mem::take(&mut done)),
                                }
                            }
                        }
                        if let Some(mut stream) = conn {
                            if let Err(e) = AsyncWriteExt::shutdown(&mut stream).await {
                                resets::expect_reset("the shutdown", &e);
                            }
                        }
                    })
                })
                .collect();
            for task in tasks {
                tokio::time::timeout(Duration::from_secs(30), task)
                    .await
                    .unwrap_or_else(|_| panic!("{kind:?}: a deferred write never left"))
                    .unwrap();
            }
        });
        server.join();
        drop(rt);
        assert_eq!(rings.in_flight(), 0, "{kind:?}: every slot freed");
    }
}

/// A caller that polls a flush without ever letting the worker park (`now_or_never` in a
/// `yield_now` loop) still gets its deferred bytes sent: a flush that would wait a second time
/// submits them itself. Both engines; the peer checks every byte.
#[test]
fn a_flush_polled_without_parking_still_sends_deferred_writes() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let (addr, server) = std_echo();
        let rt = runtime_with_park_submit();
        rt.block_on(async {
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(&rings, addr).await.unwrap();
                // Let this worker park once, so its writes are deferred from now on.
                tokio::time::sleep(Duration::from_millis(20)).await;
                // A round that a reset cut is sent again on a new connection.
                let mut resumed = resets::Resumed::new(&format!("{kind:?}: flushed rounds"));
                let mut done = 0;
                for round in 0..10u64 {
                    let msg = pattern(round, 3000);
                    loop {
                        match flushed_round(kind, &mut stream, &msg).await {
                            Ok(got) => {
                                assert!(got == msg, "{kind:?}: round {round}: bytes differ");
                                done += 1;
                                break;
                            }
                            Err(e) => {
                                resumed.after(e, std::mem::take(&mut done));
                                stream = TcpStream::connect(&rings, addr).await.unwrap();
                            }
                        }
                    }
                }
            })
            .await
            .unwrap();
        });
        server.join();
    }
}

/// Reads an echo of `size` bytes. An unflushed write's error waits in its handle for the next
/// write or flush: when the echo is slow while resets are injected, a flush asks whether a
/// reset ended the write the echo waits for (the read goes on where it was if not).
async fn read_echo(stream: &mut TcpStream, size: usize) -> std::io::Result<Vec<u8>> {
    let mut got = vec![0u8; size];
    let mut have = 0;
    let start = Instant::now();
    while have < size {
        let wait = if resets::injected() {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(30)
        };
        match tokio::time::timeout(wait, AsyncReadExt::read(stream, &mut got[have..])).await {
            Ok(Ok(0)) => return Err(resets::closed_early("the whole echo")),
            Ok(Ok(n)) => have += n,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the echo never came ({have} of {size} bytes)"
                );
                AsyncWriteExt::flush(stream).await?;
            }
        }
    }
    Ok(got)
}

/// One round of [`a_flush_polled_without_parking_still_sends_deferred_writes`]: `msg` written
/// and flushed by futures polled once in a `yield_now` loop, then its echo read back.
async fn flushed_round(
    kind: hoop::DriverKind,
    stream: &mut TcpStream,
    msg: &[u8],
) -> std::io::Result<Vec<u8>> {
    let mut sent = 0;
    let mut spins = 0u32;
    while sent < msg.len() {
        match AsyncWriteExt::write(stream, &msg[sent..]).now_or_never() {
            Some(r) => sent += r?,
            None => tokio::task::yield_now().await,
        }
        spins += 1;
        assert!(spins < 100_000, "{kind:?}: the write never went on");
    }
    let mut spins = 0u32;
    loop {
        match AsyncWriteExt::flush(stream).now_or_never() {
            Some(r) => break r?,
            None => tokio::task::yield_now().await,
        }
        spins += 1;
        assert!(spins < 100_000, "{kind:?}: the flush never finished");
    }
    let mut got = vec![0u8; msg.len()];
    tokio::time::timeout(
        Duration::from_secs(10),
        AsyncReadExt::read_exact(stream, &mut got),
    )
    .await
    .expect("the echo never came")?;
    Ok(got)
}

/// The driver's side: a deferred operation is pushed by its first poll and submitted by the
/// thread's next `submit_deferred` (a park), which wakes its task; on a thread whose park
/// never called it, the same operation is an ordinary one. Both engines.
#[test]
fn a_deferred_operation_waits_for_the_park_then_completes() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let t = std::thread::spawn(move || {
            // Not yet a deferring thread: an ordinary operation.
            let finish = |op: &mut hoop::shared::SharedOp<_>, cx: &mut Context<'_>| {
                for _ in 0..1000 {
                    if let Poll::Ready(r) = Pin::new(&mut *op).poll(cx) {
                        return r;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                panic!("{kind:?}: the no-op never completed");
            };
            let woken = Arc::new(CountWake::default());
            let waker = std::task::Waker::from(woken.clone());
            let mut cx = Context::from_waker(&waker);
            let mut op = rings.nop().deferred();
            let r: std::io::Result<_> = finish(&mut op, &mut cx);
            assert!(
                r.is_ok() || common::injected_error(r.as_ref().unwrap_err()),
                "{kind:?}: {r:?}"
            );
            hoop::shared::submit_deferred();
            // io_uring's waits in the SQ for the submit; the epoll engine may run a no-op in
            // the push itself, and then the first poll has its result.
            let before = woken.0.load(std::sync::atomic::Ordering::SeqCst);
            let mut op = rings.nop().deferred();
            let first = Pin::new(&mut op).poll(&mut cx);
            if kind == hoop::DriverKind::Uring {
                assert!(first.is_pending(), "submitted before the park");
            }
            let r = match first {
                Poll::Ready(r) => r,
                Poll::Pending => {
                    hoop::shared::submit_deferred();
                    let r = finish(&mut op, &mut cx);
                    assert!(
                        woken.0.load(std::sync::atomic::Ordering::SeqCst) > before,
                        "{kind:?}: the completion woke nobody"
                    );
                    r
                }
            };
            assert!(
                r.is_ok() || common::injected_error(r.as_ref().unwrap_err()),
                "{kind:?}: {r:?}"
            );
        });
        t.join().unwrap();
    }
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountWake(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}
