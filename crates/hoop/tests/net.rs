//! Network tests: TCP, UDP and Unix-domain sockets, error paths, and fd accounting when
//! accept futures are dropped or streams are closed from `Drop`.
//!
//! Several tests count the process's open fds, so every test here takes one lock and they run
//! one at a time. Every test runs on each driver (io_uring, then epoll).

use hoop_test_support as common;
use hoop_test_support::{fd_count, resets, serial};

use std::future::Future;
use std::io::{self, Read};
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::task::Poll;
use std::time::Duration;

use common::{each_driver, DriverKind};
use hoop::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};
use hoop::time::{sleep, timeout};

/// Runs `f` on a fresh runtime of `kind` with a 30 s limit, one test at a time.
fn run<F: Future>(kind: DriverKind, f: F) -> F::Output {
    let _serial = serial();
    let rt = common::runtime(kind);
    rt.block_on(async { timeout(Duration::from_secs(30), f).await })
        .expect("test timed out")
}

/// A deterministic xorshift64 generator.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!(
            "hoop-net-{tag}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads until end of stream.
async fn read_to_end(s: &TcpStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(8192);
    loop {
        buf.clear();
        let (res, b) = s.read(buf).await;
        buf = b;
        match res? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Echoes until end of stream, then closes.
async fn echo_tcp(s: TcpStream) -> io::Result<usize> {
    let mut total = 0;
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        buf.clear();
        let (res, b) = s.read(buf).await;
        let n = res?;
        if n == 0 {
            s.close().await?;
            return Ok(total);
        }
        let (res, b) = s.write_all(b).await;
        res?;
        total += n;
        buf = b;
    }
}

/// A connected pair: (client, server side).
async fn tcp_pair(l: &TcpListener) -> (TcpStream, TcpStream) {
    let addr = l.local_addr().unwrap();
    let c = hoop::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}

/// A blocking std read with a time limit: `Ok(0)` means the peer closed.
fn std_read_with_timeout(mut s: impl Read, set: impl FnOnce(Duration)) -> io::Result<usize> {
    set(Duration::from_millis(100));
    let mut b = [0u8; 16];
    s.read(&mut b)
}

fn assert_peer_closed(r: io::Result<usize>, what: &str) {
    match r {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("{what}: expected EOF or reset (server side closed), got {other:?}"),
    }
}

/// An accept loop until `stop`: each connection echoed by `echo`; returns the bytes the
/// echoes that ended well echoed and how many a reset ended (dropped, as a server does).
async fn echo_server<S: 'static>(
    accept: impl AsyncFnMut() -> io::Result<S>,
    echo: impl Fn(S) -> std::pin::Pin<Box<dyn Future<Output = io::Result<usize>>>>,
    stop: hoop::sync::CancellationToken,
) -> (usize, u32) {
    let mut accept = accept;
    let mut handlers = Vec::new();
    loop {
        hoop::select! {
            biased;
            _ = stop.cancelled() => break,
            r = accept() => handlers.push(hoop::spawn(echo(r.unwrap()))),
        }
    }
    let (mut total, mut reset) = (0, 0);
    for h in handlers {
        match h.await.unwrap() {
            Ok(n) => total += n,
            Err(e) => {
                resets::expect_reset("an echo", &e);
                reset += 1;
            }
        }
    }
    (total, reset)
}

/// The bytes the server echoed against the bytes the clients sent: equal, unless a reset
/// ended a connection (an echo a reset ended after its last byte went out still served its
/// client; a client that asked again was echoed twice).
fn assert_echoed((echoed, reset): (usize, u32), sent: usize, retried: u32) {
    if retried == 0 && reset == 0 {
        assert_eq!(echoed, sent);
    }
}

#[test]
fn tcp_echo_random_payloads_20_concurrent_clients() {
    const CLIENTS: u64 = 20;
    each_driver(|kind| {
        run(kind, async {
            let l = Rc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
            let addr = l.local_addr().unwrap();
            let stop = hoop::sync::CancellationToken::new();
            let server = hoop::spawn(echo_server(
                async move || l.accept().await.map(|(s, _)| s),
                |s| Box::pin(echo_tcp(s)),
                stop.clone(),
            ));
            let retried = Rc::new(std::cell::Cell::new(0));
            let mut clients = Vec::new();
            for i in 0..CLIENTS {
                let retried = retried.clone();
                clients.push(hoop::spawn(async move {
                    let mut rng = XorShift::new(i + 1);
                    let size = 1 + (rng.next() % (64 * 1024)) as usize;
                    let payload = rng.bytes(size);
                    // An exchange a reset ended goes again on a new connection.
                    resets::retry_async(&format!("client {i}"), |n| {
                        retried.set(retried.get() + n.min(1));
                        let payload = payload.clone();
                        async move {
                            let s = TcpStream::connect(addr).await?;
                            // Write and read at once, so neither side waits on a full socket
                            // buffer.
                            let write = async {
                                let (res, _) = s.write_all(payload.clone()).await;
                                res?;
                                s.shutdown_with(Shutdown::Write).await.map_err(reset_first)
                            };
                            let echoed = write_while_reading(write, read_to_end(&s)).await?;
                            if echoed.len() < payload.len() {
                                return Err(resets::closed_early("the whole echo"));
                            }
                            assert_eq!(echoed.len(), payload.len(), "client {i}");
                            assert!(echoed == payload, "client {i}: echoed bytes differ");
                            Ok(size)
                        }
                    })
                    .await
                }));
            }
            let mut sent = 0;
            for c in clients {
                sent += c.await.unwrap();
            }
            stop.cancel();
            assert_echoed(server.await.unwrap(), sent, retried.get());
            assert!(sent > CLIENTS as usize);
        });
    });
}

#[test]
fn tcp_read_returns_zero_when_peer_closes() {
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            // A pair a reset ended: the case again on a new one.
            resets::retry_async("last words", |_| async {
                let (c, s) = tcp_pair(&l).await;
                let (res, _) = c.write_all(b"last words".to_vec()).await;
                res?;
                c.close().await?;
                let (res, buf) = s.read_exact(vec![0u8; 10]).await;
                res?;
                assert_eq!(&buf[..], b"last words");
                let (res, buf) = s.read(Vec::with_capacity(64)).await;
                assert_eq!(res?, 0);
                assert!(buf.is_empty());
                // read_exact on a closed stream is UnexpectedEof.
                let (res, _) = s.read_exact(vec![0u8; 4]).await;
                match res {
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
                    Err(e) => Err(e),
                    Ok(()) => panic!("read_exact read past the end of stream"),
                }
            })
            .await;
        });
    });
}

#[test]
fn tcp_half_close_then_read_the_rest() {
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            // A pair a reset ended: the case again on a new one.
            resets::retry_async("a question after a half close", |_| async {
                let (c, s) = tcp_pair(&l).await;
                let server = hoop::spawn(async move {
                    let request = read_to_end(&s).await?;
                    // The client's write half is shut; ours still works.
                    let mut reply = b"got: ".to_vec();
                    reply.extend_from_slice(&request);
                    let (res, _) = s.write_all(reply).await;
                    res?;
                    s.close().await?;
                    Ok::<_, io::Error>(request.len())
                });
                let (res, _) = c.write_all(b"question".to_vec()).await;
                res?;
                c.shutdown_with(Shutdown::Write).await?;
                let reply = read_to_end(&c).await?;
                assert_eq!(server.await.unwrap()?, 8);
                assert_eq!(&reply[..], b"got: question");
                // Writing after shutdown(Write) fails (an injected reset, a write that did
                // not run, is tried again).
                for _ in 0..resets::MAX_RETRIES {
                    let (res, _) = c.write(b"more".to_vec()).await;
                    let e = res.unwrap_err();
                    if e.kind() == io::ErrorKind::BrokenPipe {
                        return Ok(());
                    }
                    resets::expect_reset("a write after shutdown", &e);
                }
                panic!("a write after shutdown never said BrokenPipe");
            })
            .await;
        });
    });
}

#[test]
fn tcp_connect_to_closed_port_is_refused() {
    each_driver(|kind| {
        run(kind, async {
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            };
            let err = TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        });
    });
}

#[test]
fn tcp_peer_reset_is_an_error_or_eof_on_read() {
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (c, s) = tcp_pair(&l).await;
            c.set_linger(Some(Duration::ZERO)).unwrap();
            c.close().await.unwrap(); // SO_LINGER 0: close sends RST
            let (res, _) = s.read(Vec::with_capacity(64)).await;
            match res {
                Ok(0) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
                other => panic!("read after peer reset: {other:?}"),
            }
            // And writing to it now fails without a SIGPIPE.
            let (res, _) = s.write(b"anyone?".to_vec()).await;
            let e = res.unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ),
                "{e:?}"
            );
        });
    });
}

static SIGPIPES: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count_sigpipe(_: libc::c_int) {
    SIGPIPES.fetch_add(1, Ordering::SeqCst);
}

/// Counts SIGPIPEs (Rust ignores them by default, which would hide a missing `MSG_NOSIGNAL`)
/// until dropped, then restores the previous disposition.
struct SigpipeCounter(libc::sighandler_t);

impl SigpipeCounter {
    fn install() -> SigpipeCounter {
        SIGPIPES.store(0, Ordering::SeqCst);
        let handler: extern "C" fn(libc::c_int) = count_sigpipe;
        // SAFETY: the handler only touches an atomic, which is async-signal-safe.
        let prev = unsafe { libc::signal(libc::SIGPIPE, handler as libc::sighandler_t) };
        assert_ne!(prev, libc::SIG_ERR);
        SigpipeCounter(prev)
    }
}

impl Drop for SigpipeCounter {
    fn drop(&mut self) {
        // SAFETY: restores the disposition `install` replaced.
        unsafe { libc::signal(libc::SIGPIPE, self.0) };
    }
}

#[test]
fn tcp_write_to_reset_peer_fails_without_sigpipe() {
    each_driver(|kind| {
        run(kind, async {
            let _counter = SigpipeCounter::install();
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (c, s) = tcp_pair(&l).await;
            c.set_linger(Some(Duration::ZERO)).unwrap();
            drop(c); // close from Drop, through the ring: SO_LINGER 0 sends RST
            let mut buf = vec![7u8; 32 * 1024];
            let mut errors = Vec::new();
            // The first error may be ECONNRESET; the ones after it are EPIPE, which is where a
            // send without MSG_NOSIGNAL raises SIGPIPE.
            for _ in 0..100 {
                let (res, b) = s.write(buf).await;
                buf = b;
                match res {
                    Ok(_) => sleep(Duration::from_millis(5)).await,
                    Err(e) => {
                        errors.push(e);
                        if errors.len() == 3 {
                            break;
                        }
                    }
                }
            }
            assert_eq!(errors.len(), 3, "writes to a reset peer kept succeeding");
            for e in &errors {
                assert!(
                    matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                    ),
                    "{e:?}"
                );
            }
            assert_eq!(errors[2].kind(), io::ErrorKind::BrokenPipe);
            assert_eq!(SIGPIPES.load(Ordering::SeqCst), 0, "a write raised SIGPIPE");
        });
    });
}

#[test]
fn tcp_nodelay_round_trips() {
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (c, _s) = tcp_pair(&l).await;
            c.set_nodelay(true).unwrap();
            assert!(c.nodelay().unwrap());
            c.set_nodelay(false).unwrap();
            assert!(!c.nodelay().unwrap());
        });
    });
}

#[test]
fn tcp_local_and_peer_addrs_agree() {
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let laddr = l.local_addr().unwrap();
            assert_ne!(laddr.port(), 0);
            let c = hoop::spawn(async move { TcpStream::connect(laddr).await.unwrap() });
            let (s, from) = l.accept().await.unwrap();
            let c = c.await.unwrap();
            assert_eq!(c.peer_addr().unwrap(), laddr);
            assert_eq!(s.local_addr().unwrap(), laddr);
            assert_eq!(c.local_addr().unwrap(), from);
            assert_eq!(s.peer_addr().unwrap(), from);
            assert_ne!(from.port(), laddr.port());
        });
    });
}

/// Polls the accept `f` exactly once. It may complete then: on epoll the accept is tried at
/// once, and on either driver a connection kept from an earlier dropped accept is served at
/// once. The accepted stream is then dropped here (closed from `Drop`), and the test still
/// checks that no fd leaks.
async fn poll_once<F: Future>(_kind: DriverKind, f: std::pin::Pin<&mut F>) {
    let mut f = Some(f);
    std::future::poll_fn(|cx| {
        if let Some(f) = f.take() {
            let _ = f.poll(cx).is_ready();
        }
        Poll::Ready(())
    })
    .await
}

#[test]
fn tcp_dropped_accept_leaks_no_fd() {
    const ROUNDS: usize = 200;
    each_driver(|kind| {
        run(kind, async {
            let baseline = fd_count();
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let mut clients = Vec::with_capacity(ROUNDS);
            for i in 0..ROUNDS {
                clients.push(
                    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap(),
                );
                let mut accept = Box::pin(l.accept());
                poll_once(kind, accept.as_mut()).await;
                if i % 2 == 0 {
                    // After: let the runtime submit and reap the CQE, so the slot holds the fd.
                    sleep(Duration::from_millis(2)).await;
                }
                // Before (odd rounds): dropped right away, the accept and its cancel race.
                drop(accept);
            }
            sleep(Duration::from_millis(50)).await;
            // Connections still in the backlog, and those accepted for dropped accepts and kept
            // for the next one, are closed with the listener.
            l.close().await.unwrap();
            for (i, c) in clients.iter().enumerate() {
                let r = std_read_with_timeout(c, |d| c.set_read_timeout(Some(d)).unwrap());
                assert_peer_closed(r, &format!("client {i}"));
            }
            drop(clients);
            sleep(Duration::from_millis(10)).await;
            assert_eq!(fd_count(), baseline, "fds leaked by dropped accepts");
        });
    });
}

#[test]
fn tcp_close_from_drop_is_submitted_on_the_same_tick() {
    // Its subject is that the close goes out with this tick's submission: an injected failed
    // or short `io_uring_enter` leaves it queued for the next one, as it should.
    let _faults = common::faults_off(
        &["eagain", "ebusy", "eintr", "short_submit"],
        "the close must be submitted on this tick, and a failed submit defers it",
    );
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let client =
                std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            let baseline = fd_count();
            let (s, _) = l.accept().await.unwrap();
            assert_eq!(fd_count(), baseline + 1);
            drop(s);
            hoop::yield_now().await;
            // The runtime does not turn while this blocks: the close must already be done.
            let r = std_read_with_timeout(&client, |d| client.set_read_timeout(Some(d)).unwrap());
            assert!(matches!(r, Ok(0)), "client did not see EOF: {r:?}");
            assert_eq!(fd_count(), baseline);
        });
    });
}

#[test]
fn udp_send_to_recv_from_round_trip() {
    each_driver(|kind| {
        run(kind, async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            assert_ne!(a_addr.port(), 0);
            let (res, _) = a.send_to(b"ping".to_vec(), b_addr).await;
            assert_eq!(res.unwrap(), 4);
            let (res, buf) = b.recv_from(Vec::with_capacity(1500)).await;
            let (n, from) = res.unwrap();
            assert_eq!((&buf[..n], from), (&b"ping"[..], a_addr));
            let mut rng = XorShift::new(99);
            let payload = rng.bytes(1200);
            let (res, _) = b.send_to(payload.clone(), from).await;
            assert_eq!(res.unwrap(), payload.len());
            let (res, buf) = a.recv_from(Vec::with_capacity(1500)).await;
            let (n, from) = res.unwrap();
            assert_eq!(from, b_addr);
            assert!(buf[..n] == payload[..], "datagram differs");
            // An unconnected socket has no peer.
            assert_eq!(
                a.peer_addr().unwrap_err().kind(),
                io::ErrorKind::NotConnected
            );
        });
    });
}

#[test]
fn udp_connected_send_recv() {
    each_driver(|kind| {
        run(kind, async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            a.connect(b_addr).await.unwrap();
            b.connect(a_addr).await.unwrap();
            assert_eq!(a.peer_addr().unwrap(), b_addr);
            for i in 0..10u8 {
                let (res, _) = a.send(vec![i; 100 + usize::from(i)]).await;
                assert_eq!(res.unwrap(), 100 + usize::from(i));
                let (res, buf) = b.recv(Vec::with_capacity(512)).await;
                let n = res.unwrap();
                assert_eq!(n, 100 + usize::from(i));
                assert!(buf.iter().all(|&x| x == i));
            }
            let (res, _) = b.send(b"back".to_vec()).await;
            res.unwrap();
            let (res, buf) = a.recv(Vec::with_capacity(16)).await;
            assert_eq!(&buf[..res.unwrap()], b"back");
            a.set_broadcast(true).unwrap();
            assert!(a.broadcast().unwrap());
            a.set_broadcast(false).unwrap();
            assert!(!a.broadcast().unwrap());
        });
    });
}

/// Echoes until end of stream, then closes.
async fn echo_unix(s: UnixStream) -> io::Result<usize> {
    let mut total = 0;
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        buf.clear();
        let (res, b) = s.read(buf).await;
        let n = res?;
        if n == 0 {
            s.close().await?;
            return Ok(total);
        }
        let (res, b) = s.write_all(b).await;
        res?;
        total += n;
        buf = b;
    }
}

async fn unix_read_to_end(s: &UnixStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(8192);
    loop {
        buf.clear();
        let (res, b) = s.read(buf).await;
        buf = b;
        match res? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// A shutdown of a connection the peer reset first says `ENOTCONN` (the reset closed it):
/// that is the reset, as the client sees it.
fn reset_first(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ENOTCONN) {
        io::Error::new(io::ErrorKind::ConnectionReset, format!("reset before: {e}"))
    } else {
        e
    }
}

/// Runs `write` while `read` reads the echo to its end: the echo, or the first error of either
/// (a reset ends both: the other may wait for ever on it, so it is dropped with the stream).
async fn write_while_reading(
    write: impl Future<Output = io::Result<()>>,
    read: impl Future<Output = io::Result<Vec<u8>>>,
) -> io::Result<Vec<u8>> {
    use futures::future::{select, Either};
    match select(std::pin::pin!(write), std::pin::pin!(read)).await {
        Either::Left((w, read)) => {
            w?;
            read.await
        }
        // The echo's end came after our end of stream: the write is done.
        Either::Right((r, _)) => r,
    }
}

/// Writes `payload` and shuts down the write half while reading the echo to the end; a
/// reset (or an echo cut short) is an error.
async fn unix_echo_client(s: UnixStream, payload: Vec<u8>) -> io::Result<Vec<u8>> {
    let len = payload.len();
    let write = async {
        let (res, _) = s.write_all(payload).await;
        res?;
        s.shutdown_with(Shutdown::Write).await.map_err(reset_first)
    };
    let echoed = write_while_reading(write, unix_read_to_end(&s)).await?;
    if echoed.len() < len {
        return Err(resets::closed_early("the whole echo"));
    }
    Ok(echoed)
}

#[test]
fn unix_stream_echo_via_listener() {
    let dir = TempDir::new("echo");
    each_driver(|kind| {
        // A path per driver: the first run's socket file stays (nothing unlinks it).
        let path = dir.path(&format!("echo-{kind}.sock"));
        run(kind, async {
            let l = UnixListener::bind(&path).await.unwrap();
            assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
            // Like std: an existing file is an error, nothing is unlinked.
            let e = UnixListener::bind(&path).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
            let l = Rc::new(l);
            let stop = hoop::sync::CancellationToken::new();
            let server = hoop::spawn(echo_server(
                async move || {
                    let (s, from) = l.accept().await?;
                    assert!(from.is_unnamed(), "{from:?}");
                    Ok(s)
                },
                |s| Box::pin(echo_unix(s)),
                stop.clone(),
            ));
            let mut sent = 0;
            let mut retried = 0;
            for i in 0..3u64 {
                let mut rng = XorShift::new(1000 + i);
                let size = 1 + (rng.next() % (64 * 1024)) as usize;
                let payload = rng.bytes(size);
                // An exchange a reset ended goes again on a new connection.
                let echoed = resets::retry_async(&format!("round {i}"), |n| {
                    retried += n.min(1);
                    let (path, payload) = (&path, payload.clone());
                    async move {
                        let c = UnixStream::connect(path).await?;
                        assert!(c.local_addr().unwrap().is_unnamed());
                        assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
                        unix_echo_client(c, payload).await
                    }
                })
                .await;
                assert!(echoed == payload, "round {i}: echoed bytes differ");
                sent += payload.len();
            }
            stop.cancel();
            assert_echoed(server.await.unwrap(), sent, retried);
            let e = UnixStream::connect(dir.path("nobody.sock"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        });
    });
}

#[test]
fn unix_stream_pair_echo() {
    each_driver(|kind| {
        run(kind, async {
            let payload = XorShift::new(7).bytes(100_000);
            // A pair a reset ended: the echo again on a new one.
            resets::retry_async("100 KB echoed", |_| {
                let payload = payload.clone();
                async move {
                    let (a, b) = UnixStream::pair()?;
                    assert!(a.local_addr().unwrap().is_unnamed());
                    assert!(b.peer_addr().unwrap().is_unnamed());
                    let server = hoop::spawn(echo_unix(b));
                    // (After a reset the echo is left: it ends with its pair.)
                    let echoed = unix_echo_client(a, payload.clone()).await?;
                    let served = server.await.unwrap();
                    assert!(echoed == payload, "echoed bytes differ");
                    match served {
                        Ok(n) => assert_eq!(n, payload.len()),
                        // Everything came back; the echo's end saw the close as a reset.
                        Err(e) => resets::expect_reset("the echo", &e),
                    }
                    Ok(())
                }
            })
            .await;
        });
    });
}

#[test]
fn unix_datagram_round_trips() {
    let dir = TempDir::new("dgram");
    each_driver(|kind| {
        // Paths per driver: the first run's socket files stay (nothing unlinks them).
        let (pa, pb) = (
            dir.path(&format!("a-{kind}.sock")),
            dir.path(&format!("b-{kind}.sock")),
        );
        run(kind, async {
            let a = UnixDatagram::bind(&pa).unwrap();
            let b = UnixDatagram::bind(&pb).unwrap();
            let (res, _) = a.send_to(b"to b".to_vec(), &pb).await;
            assert_eq!(res.unwrap(), 4);
            let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
            let (n, from) = res.unwrap();
            assert_eq!(&buf[..n], b"to b");
            assert_eq!(from.as_pathname(), Some(pa.as_path()));
            // From an unbound socket: the sender is unnamed.
            let u = UnixDatagram::unbound().unwrap();
            let (res, _) = u.send_to(b"anon".to_vec(), &pa).await;
            res.unwrap();
            let (res, buf) = a.recv_from(Vec::with_capacity(64)).await;
            let (n, from) = res.unwrap();
            assert_eq!(&buf[..n], b"anon");
            assert!(from.is_unnamed(), "{from:?}");
            assert!(from.as_pathname().is_none());
            // Connected, and a pair.
            u.connect(&pb).await.unwrap();
            assert_eq!(u.peer_addr().unwrap().as_pathname(), Some(pb.as_path()));
            let (res, _) = u.send(b"conn".to_vec()).await;
            res.unwrap();
            let (res, buf) = b.recv(Vec::with_capacity(64)).await;
            assert_eq!(&buf[..res.unwrap()], b"conn");
            let (x, y) = UnixDatagram::pair().unwrap();
            let (res, _) = x.send(b"pair".to_vec()).await;
            res.unwrap();
            let (res, buf) = y.recv(Vec::with_capacity(64)).await;
            assert_eq!(&buf[..res.unwrap()], b"pair");
        });
    });
}

#[test]
fn unix_dropped_accept_leaks_no_fd() {
    const ROUNDS: usize = 50;
    let dir = TempDir::new("cancel");
    each_driver(|kind| {
        let path = dir.path(&format!("cancel-{kind}.sock"));
        run(kind, async {
            let baseline = fd_count();
            let l = UnixListener::bind(&path).await.unwrap();
            let mut clients = Vec::with_capacity(ROUNDS);
            for i in 0..ROUNDS {
                clients.push(std::os::unix::net::UnixStream::connect(&path).unwrap());
                let mut accept = Box::pin(l.accept());
                poll_once(kind, accept.as_mut()).await;
                if i % 2 == 0 {
                    sleep(Duration::from_millis(2)).await;
                }
                drop(accept);
            }
            sleep(Duration::from_millis(50)).await;
            l.close().await.unwrap();
            for (i, c) in clients.iter().enumerate() {
                let r = std_read_with_timeout(c, |d| c.set_read_timeout(Some(d)).unwrap());
                assert_peer_closed(r, &format!("client {i}"));
            }
            drop(clients);
            sleep(Duration::from_millis(10)).await;
            assert_eq!(fd_count(), baseline, "fds leaked by dropped accepts");
        });
        assert!(Path::new(&path).exists(), "the listener unlinks nothing");
    });
}

/// `send_file` moves a file bigger than both socket buffers while the reader sleeps first: the
/// socket fills, the send waits through the driver for room (several calls, each partial) and
/// every byte arrives in order; a range from an offset sends only that range.
#[test]
fn tcp_send_file_waits_for_room_and_sends_every_byte() {
    const LEN: usize = 16 << 20;
    let mut rng = XorShift::new(7);
    let data: Vec<u8> = (0..LEN / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let path = std::env::temp_dir().join(format!("hoop-sendfile-{}.bin", std::process::id()));
    each_driver(|kind| {
        // Inside `run`, under its lock: the other tests here count the process's fds.
        run(kind, async {
            std::fs::write(&path, &data).unwrap();
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (c, s) = tcp_pair(&l).await;
            let file = std::fs::File::open(&path).unwrap();
            let sender = hoop::spawn(async move {
                let (mut pos, mut calls) = (0usize, 0u32);
                while pos < LEN {
                    calls += 1;
                    assert!(calls < 100_000, "no progress");
                    match s.send_file(&file, pos as u64, LEN - pos).await {
                        Ok(0) => panic!("end of file at {pos}"),
                        Ok(n) => pos += n,
                        Err(e) if common::injected_error(&e) => {}
                        Err(e) => panic!("send_file: {e}"),
                    }
                }
                // A range: 10 bytes from the middle.
                loop {
                    match s.send_file(&file, 1000, 10).await {
                        Ok(n) => break assert_eq!(n, 10),
                        Err(e) if common::injected_error(&e) => {}
                        Err(e) => panic!("send_file: {e}"),
                    }
                }
                calls
            });
            sleep(Duration::from_millis(50)).await;
            let mut got = Vec::with_capacity(LEN + 10);
            let mut buf = Vec::with_capacity(1 << 16);
            while got.len() < LEN + 10 {
                buf.clear();
                let (res, b) = c.read(buf).await;
                buf = b;
                match res {
                    Ok(0) => panic!("closed after {} bytes", got.len()),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if common::injected_error(&e) => {}
                    Err(e) => panic!("read: {e}"),
                }
            }
            let calls = sender.await.unwrap();
            assert!(
                calls > 1,
                "one call sent {LEN} bytes: the socket never filled"
            );
            assert!(got[..LEN] == data[..], "{kind:?}: the bytes differ");
            assert_eq!(&got[LEN..], &data[1000..1010]);
            let _ = std::fs::remove_file(&path);
        });
    });
}

/// A task parked in a read holds room for the largest future it may await next: reads and
/// writes without a deadline leave the deadline's branch out, and `write_all` is the socket's
/// own future with no `async fn` around it, so an idle connection's task stays small (the
/// bound is loose: 184, 152 and 208 bytes today; `write_all` took 648 before).
#[test]
fn reads_and_writes_without_a_deadline_stay_small() {
    each_driver(|kind| {
        run(kind, async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let c = TcpStream::connect(addr).await.unwrap();
            let write_all = c.write_all(Vec::<u8>::new());
            let write = c.write(Vec::<u8>::new());
            let read = c.read(Vec::<u8>::new());
            let sizes = [
                std::mem::size_of_val(&write_all),
                std::mem::size_of_val(&write),
                std::mem::size_of_val(&read),
            ];
            eprintln!("{kind}: write_all, write, read futures: {sizes:?} bytes");
            assert!(sizes.iter().all(|&s| s <= 400), "{kind}: {sizes:?}");
        });
    });
}
