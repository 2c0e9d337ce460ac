//! End-to-end tests of `hoop serve echo`: the real binary on 127.0.0.1:0, real clients.
//!
//! Every server is a child process owned by a guard that kills it on drop, so a failing test
//! leaves nothing behind. Every client operation is bounded: socket timeouts for the std
//! clients, `hoop::time::timeout` for the hoop ones, a deadline for every wait.

mod support;

use hoop_test_support as common;
use hoop_test_support::resets;
use std::cell::Cell;
use std::future::Future;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::pin::pin;
use std::process::{Child, ChildStdout, ExitStatus, Stdio};
use std::sync::mpsc;
use std::task::Poll;
use std::time::{Duration, Instant};

/// Longest wait for the `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Read/write timeout of the std clients.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ===== the server process =====

/// A running `hoop serve echo`, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    /// The rest of stdout (after the first line), for the "exactly one line" check.
    stdout: Option<BufReader<ChildStdout>>,
}

impl Server {
    /// Starts `hoop serve echo --addr 127.0.0.1:0 <extra>` and reads its first line.
    fn start(extra: &[&str]) -> Server {
        let mut child = support::spawn_server(
            common::command(env!("CARGO_BIN_EXE_hoop"))
                .args(["serve", "echo", "--addr", "127.0.0.1:0"])
                .args(extra),
            Stdio::inherit(),
        );
        let stdout = child.stdout.take().expect("piped stdout");
        // Guard first: a failure below still kills the child.
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout: None,
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let res = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send((res, reader));
        });
        let (line, reader) = rx
            .recv_timeout(START_TIMEOUT)
            .expect("no `listening on` line within the time limit");
        let line = line.expect("read the server's stdout");
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|s| s.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        server.addr = addr.parse().expect("an IP:PORT after `listening on `");
        assert_eq!(server.addr.ip().to_string(), "127.0.0.1");
        assert_ne!(server.addr.port(), 0, "the real port, not 0");
        server.stdout = Some(reader);
        server
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits in i32")
    }

    /// Sends `sig` to the server.
    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) with the pid of our own child (not reaped yet, so not reused).
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(r, 0, "kill: {}", io::Error::last_os_error());
    }

    /// Waits up to `limit` for the server to exit.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(status.is_none(), "server exited: {status:?}");
    }

    /// What the server wrote on stdout after the first line (call once it exited).
    fn rest_of_stdout(&mut self) -> String {
        let mut rest = String::new();
        if let Some(mut r) = self.stdout.take() {
            r.read_to_string(&mut rest).expect("read stdout");
        }
        rest
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ===== helpers =====

/// xorshift64*: deterministic payloads without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// Raises this process's soft open-file limit to the hard limit (1,000 clients need it).
fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid rlimit above.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads the valid rlimit above.
        let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        assert_eq!(r, 0, "setrlimit: {}", io::Error::last_os_error());
    }
    assert!(
        lim.rlim_cur >= 2300,
        "RLIMIT_NOFILE hard limit {} is too low for two tests of 1,000 connections",
        lim.rlim_max
    );
}

/// A blocking std client with timeouts on everything.
fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s
}

/// Sends `payload` on `stream` (from a second thread, so neither side can block the other)
/// and reads the same number of bytes back.
fn echo_std(stream: &TcpStream, payload: &[u8]) -> io::Result<Vec<u8>> {
    support::echo_on(stream, payload)
}

/// One fresh connection, one echo of `len` random bytes (retried after resets); fails the
/// test unless it comes back intact.
fn check_echo(addr: SocketAddr, len: usize, seed: u64) {
    support::check_echo(addr, &Rng::new(seed).bytes(len));
}

/// Echoes on two connections open at once, used out of order (`second` on the one opened
/// last first), retried together on two fresh ones after a reset.
fn check_two_at_once(addr: SocketAddr, first: &[u8], second: &[u8]) {
    resets::retry("two connections at once", |_| {
        let a = support::try_connect(addr)?;
        let b = support::try_connect(addr)?;
        if echo_std(&b, second)? != second {
            return Err(support::wrong("the second echo came back different"));
        }
        if echo_std(&a, first)? != first {
            return Err(support::wrong("the first echo came back different"));
        }
        Ok(())
    });
}

/// `SO_LINGER` 0: closing the socket sends a reset instead of a FIN.
fn set_linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads a valid linger struct of the size given, on an open socket.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER: {}", io::Error::last_os_error());
}

/// Asserts the server closed `s`: end of stream or a reset, within the read timeout.
fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close the connection, got {other:?}"),
    }
}

/// Polls both futures until both succeed or one fails (a minimal `try_join`): a write that
/// failed (an injected reset: nothing was sent) must not leave the read waiting for an echo
/// of bytes never sent.
async fn try_join2<A, B>(
    a: impl Future<Output = io::Result<A>>,
    b: impl Future<Output = io::Result<B>>,
) -> io::Result<(A, B)> {
    let mut a = pin!(a);
    let mut b = pin!(b);
    let mut ra = None;
    let mut rb = None;
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v?);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v?);
            }
        }
        match (ra.take(), rb.take()) {
            (Some(x), Some(y)) => Poll::Ready(Ok((x, y))),
            (x, y) => {
                ra = x;
                rb = y;
                Poll::Pending
            }
        }
    })
    .await
}

/// One hoop client's exchange: connects, writes what is left of `payload` (from byte `done`)
/// while reading it back and checking each byte as it arrives (`done` counts them), then
/// half-closes and expects end of stream (nothing extra). After a reset the next attempt goes
/// on from `done` on a fresh connection, as a client resuming a transfer does.
async fn hoop_exchange(addr: SocketAddr, payload: &[u8], done: &Cell<usize>) -> io::Result<()> {
    let rest = &payload[done.get()..];
    let stream = hoop::net::TcpStream::connect(addr).await?;
    let write = async {
        if rest.is_empty() {
            return Ok(());
        }
        stream.write_all(rest.to_vec()).await.0
    };
    let read = async {
        let mut at = 0;
        while at < rest.len() {
            let want = (rest.len() - at).min(64 * 1024);
            let (res, buf) = stream.read(Vec::with_capacity(want)).await;
            let n = res?;
            if n == 0 {
                return Err(resets::closed_early("the whole echo"));
            }
            if buf[..n] != rest[at..at + n] {
                return Err(support::wrong(format!(
                    "the echo of {} bytes differs within bytes {}..{}",
                    payload.len(),
                    done.get(),
                    done.get() + n
                )));
            }
            at += n;
            done.set(done.get() + n);
        }
        Ok(())
    };
    try_join2(write, read).await?;
    stream.shutdown_with(Shutdown::Write).await?;
    let (res, extra) = stream.read(vec![0u8; 16]).await;
    match res? {
        0 => Ok(()),
        n => Err(support::wrong(format!(
            "{n} unexpected bytes after the echo: {:?}",
            &extra[..n]
        ))),
    }
}

/// One hoop client: a random payload of 1..=65536 bytes echoed intact, on fresh connections
/// after resets (while resets are injected, on either side); a wrong echo fails the test.
async fn hoop_client(addr: SocketAddr, seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let len = (rng.next() % 65536) as usize + 1;
    let payload = rng.bytes(len);
    let done = Cell::new(0);
    resets::retry_async(&format!("hoop client {seed}"), |_| {
        hoop_exchange(addr, &payload, &done)
    })
    .await;
    len
}

/// `conns` concurrent hoop clients against `addr`, all within 60 s.
fn many_clients(addr: SocketAddr, conns: u64) {
    raise_nofile_limit();
    let rt = hoop::Runtime::new().expect("hoop runtime");
    let outcome = rt.block_on(hoop::time::timeout(Duration::from_secs(60), async move {
        let handles: Vec<_> = (0..conns)
            .map(|i| hoop::spawn(hoop_client(addr, 1000 + i)))
            .collect();
        let mut failures = Vec::new();
        let mut bytes = 0;
        for (i, h) in handles.into_iter().enumerate() {
            match h.await {
                Ok(n) => bytes += n,
                Err(e) => failures.push(format!("client {i}: {e}")),
            }
        }
        (failures, bytes)
    }));
    let (failures, bytes) = outcome.expect("1,000 echoes did not finish within 60 s");
    assert!(
        failures.is_empty(),
        "{} of {conns} clients failed, first: {}",
        failures.len(),
        failures[0]
    );
    assert!(
        bytes >= conns as usize,
        "every client echoed at least a byte"
    );
}

// ===== tests =====

/// The test: 1,000 concurrent connections with random payloads up to 64 KiB, all
/// echoed intact (and each closed by the server after the client's half-close).
#[test]
fn thousand_concurrent_connections_echo_intact() {
    let mut server = Server::start(&[]);
    many_clients(server.addr, 1000);
    server.assert_running();
}

/// The same with two runtime threads sharing the port through `SO_REUSEPORT`.
#[test]
fn thousand_concurrent_connections_echo_intact_two_threads() {
    let mut server = Server::start(&["--threads", "2"]);
    many_clients(server.addr, 1000);
    server.assert_running();
}

/// The test on the epoll driver: the same server code, the same 1,000 connections.
#[test]
fn thousand_concurrent_connections_echo_intact_epoll() {
    let mut server = Server::start(&["--driver", "epoll"]);
    many_clients(server.addr, 1000);
    server.assert_running();
}

/// On epoll with two runtime threads (`SO_REUSEPORT`).
#[test]
fn thousand_concurrent_connections_echo_intact_epoll_two_threads() {
    let mut server = Server::start(&["--driver", "epoll", "--threads", "2"]);
    many_clients(server.addr, 1000);
    server.assert_running();
}

/// Clients that reset (before and in the middle of an echo), half-close, or send nothing do
/// not disturb the server: it keeps echoing for everyone else.
#[test]
fn survives_resetting_half_closing_and_silent_clients() {
    survives_misbehaving_clients(&[]);
}

/// The same on the epoll driver.
#[test]
fn survives_resetting_half_closing_and_silent_clients_epoll() {
    survives_misbehaving_clients(&["--driver", "epoll"]);
}

fn survives_misbehaving_clients(extra: &[&str]) {
    let mut server = Server::start(extra);
    let addr = server.addr;
    check_echo(addr, 1000, 1);

    // Reset right after connecting (the server may accept an already reset connection).
    for _ in 0..5 {
        let s = connect(addr);
        set_linger_zero(&s);
        drop(s);
    }

    // Reset mid-stream: 256 KiB sent without reading most of the echo, so the server is in
    // the middle of writing when the reset arrives.
    for seed in 0..3 {
        let payload = Rng::new(100 + seed).bytes(256 * 1024);
        support::exchange("an echo that starts, then a reset", addr, |s| {
            s.set_write_timeout(Some(Duration::from_secs(1)))?;
            // A full peer may make this time out; the reset is what matters.
            let _ = s.write_all(&payload);
            let mut first = vec![0u8; 1000];
            s.read_exact(&mut first)?;
            if first != payload[..1000] {
                return Err(support::wrong("echo prefix differs"));
            }
            set_linger_zero(s);
            Ok(())
        });
    }

    // Half-close: 200 KB, then shutdown(Write); the whole echo comes back, then end of stream.
    let payload = Rng::new(7).bytes(200_000);
    support::echo_resuming("an echo, then a half-close", addr, &payload, true);

    // Half-close without sending anything: end of stream straight away.
    support::exchange("a half-close without a byte", addr, |s| {
        s.shutdown(Shutdown::Write)?;
        let mut buf = [0u8; 16];
        match s.read(&mut buf)? {
            0 => Ok(()),
            n => Err(support::wrong(format!(
                "{n} bytes instead of end of stream"
            ))),
        }
    });

    // Connect and close without a byte, at once and after a pause.
    for _ in 0..5 {
        drop(connect(addr));
    }
    let idle = connect(addr);
    std::thread::sleep(Duration::from_millis(100));
    drop(idle);

    // Still serving, new and concurrent connections alike.
    server.assert_running();
    check_echo(addr, 65536, 2);
    check_two_at_once(addr, b"first", b"second");
    server.assert_running();
}

/// Starts a server, opens connections (some mid-echo, some idle), sends `sig`, and expects
/// exit status 0 within 5 s, every connection closed, and nothing more on stdout.
fn exits_zero_on(sig: i32, extra: &[&str]) {
    let mut server = Server::start(extra);
    let addr = server.addr;
    let mut open = Vec::new();
    for i in 0..4u64 {
        let payload = Rng::new(i).bytes(4096);
        let s = support::exchange("an echo before the signal", addr, |s| {
            if echo_std(s, &payload)? != payload {
                return Err(support::wrong("the echo before the signal differs"));
            }
            s.try_clone()
        });
        open.push(s);
    }
    // One with data sent but not read back, one that never sent anything.
    let mut pending = connect(addr);
    pending.write_all(&[7u8; 1000]).expect("write");
    open.push(pending);
    open.push(connect(addr));
    // Let the server accept the last two.
    std::thread::sleep(Duration::from_millis(100));

    server.signal(sig);
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("the server did not exit within 5 s of the signal");
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    for s in &mut open[..4] {
        assert_closed(s);
    }
    assert_eq!(server.rest_of_stdout(), "", "exactly one line on stdout");
}

/// SIGTERM with open connections: exit 0 within 5 s (one runtime thread).
#[test]
fn sigterm_exits_zero_with_open_connections() {
    exits_zero_on(libc::SIGTERM, &[]);
}

/// SIGINT with open connections: exit 0 within 5 s (two runtime threads).
#[test]
fn sigint_exits_zero_with_open_connections_two_threads() {
    exits_zero_on(libc::SIGINT, &["--threads", "2"]);
}

/// SIGTERM on one thread of several: the same through the multi-thread stop path.
#[test]
fn sigterm_exits_zero_two_threads() {
    exits_zero_on(libc::SIGTERM, &["--threads", "2"]);
}

/// SIGTERM with open connections on the epoll driver: exit 0 within 5 s.
#[test]
fn sigterm_exits_zero_with_open_connections_epoll() {
    exits_zero_on(libc::SIGTERM, &["--driver", "epoll"]);
}

/// SIGINT on the epoll driver with two runtime threads.
#[test]
fn sigint_exits_zero_with_open_connections_epoll_two_threads() {
    exits_zero_on(libc::SIGINT, &["--driver", "epoll", "--threads", "2"]);
}

/// `--driver` (and `HOOP_DRIVER` without it) decide the driver, which the server names once on
/// stderr before its `listening on` line; stdout's first line stays exactly that line.
#[test]
fn the_driver_is_named_on_stderr() {
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (&["--driver", "epoll"], None, "driver epoll"),
        (
            &["--driver", "epoll", "--threads", "2"],
            None,
            "driver epoll",
        ),
        (&[], Some("epoll"), "driver epoll"),
        // --driver wins over HOOP_DRIVER.
        (&["--driver", "epoll"], Some("uring"), "driver epoll"),
    ];
    for (args, env, needle) in cases {
        let mut cmd = common::command(env!("CARGO_BIN_EXE_hoop"));
        cmd.args(["serve", "echo", "--addr", "127.0.0.1:0"])
            .args(args)
            .env_remove("HOOP_DRIVER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(v) = env {
            cmd.env("HOOP_DRIVER", v);
        }
        let child = cmd.spawn().expect("spawn hoop");
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout: None,
        };
        let stdout = server.child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let res = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(res);
        });
        let line = rx
            .recv_timeout(START_TIMEOUT)
            .expect("no first line within the time limit")
            .expect("read stdout");
        assert!(
            line.starts_with("listening on 127.0.0.1:"),
            "{args:?}: {line:?}"
        );
        let addr: SocketAddr = line["listening on ".len()..]
            .trim_end()
            .parse()
            .expect("IP:PORT");
        check_echo(addr, 5000, 9);
        server.signal(libc::SIGTERM);
        let status = server
            .wait_exit(Duration::from_secs(5))
            .expect("exit after SIGTERM");
        assert_eq!(status.code(), Some(0), "{args:?}: {status:?}");
        let mut err = String::new();
        if let Some(e) = server.child.stderr.as_mut() {
            e.read_to_string(&mut err).expect("stderr");
        }
        assert!(err.contains(needle), "{args:?} {env:?}: {err}");
        assert_eq!(
            err.matches("hoop serve echo: driver").count(),
            1,
            "named once: {err}"
        );
    }
}

/// A baseline prints the line, echoes (several connections, a payload bigger than one read),
/// and exits 0 on SIGTERM.
fn baseline_echoes(server_kind: &str) {
    let mut server = Server::start(&["--server", server_kind]);
    let addr = server.addr;
    check_echo(addr, 1, 3);
    check_echo(addr, 200_000, 4);
    check_two_at_once(addr, b"world", b"hello");
    server.signal(libc::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("the baseline did not exit within 5 s of SIGTERM");
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
}

/// `--server tokio` prints the line and echoes correctly.
#[test]
fn tokio_baseline_echoes() {
    baseline_echoes("tokio");
}

/// `--server monoio` prints the line and echoes correctly.
#[test]
fn monoio_baseline_echoes() {
    baseline_echoes("monoio");
}

/// Invalid arguments fail with a message and never print the `listening on` line.
#[test]
fn invalid_arguments_are_refused() {
    for args in [
        &["--addr", "127.0.0.1:0", "--threads", "0"][..],
        &[
            "--addr",
            "127.0.0.1:0",
            "--server",
            "tokio",
            "--threads",
            "2",
        ],
        &["--addr", "127.0.0.1:0", "--server", "nginx"],
        &["--addr", "not-an-address"],
        &["--addr", "127.0.0.1:0", "--driver", "kqueue"],
        &[
            "--addr",
            "127.0.0.1:0",
            "--server",
            "tokio",
            "--driver",
            "epoll",
        ],
    ] {
        let child = support::spawn_server(
            common::command(env!("CARGO_BIN_EXE_hoop"))
                .args(["serve", "echo"])
                .args(args),
            Stdio::piped(),
        );
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout: None,
        };
        let status = server
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{args:?} did not exit"));
        assert!(!status.success(), "{args:?} succeeded");
        let mut out = String::new();
        let mut err = String::new();
        if let Some(o) = server.child.stdout.as_mut() {
            o.read_to_string(&mut out).expect("stdout");
        }
        if let Some(e) = server.child.stderr.as_mut() {
            e.read_to_string(&mut err).expect("stderr");
        }
        assert_eq!(out, "", "{args:?} printed on stdout");
        assert!(!err.trim().is_empty(), "{args:?} gave no message");
    }
}
