//! End-to-end tests of `hoop serve echo`: the real binary on 127.0.0.1:0, real clients, on
//! both drivers and on one thread or two: a thousand connections at once echo intact, and
//! misbehaving clients do not hurt the others. (Signals, the driver line, the baselines and
//! bad arguments: `echo_process.rs`.)
//!
//! Every server is a child process owned by a guard that kills it on drop, so a failing test
//! leaves nothing behind. Every client operation is bounded: socket timeouts for the std
//! clients, `hoop::time::timeout` for the hoop ones, a deadline for every wait.

mod echo_server;
mod support;

use echo_server::*;
use hoop_test_support::ReadRetry as _;

use hoop_test_support::resets;
use std::cell::Cell;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

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
        match s.read_retry(&mut buf)? {
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
