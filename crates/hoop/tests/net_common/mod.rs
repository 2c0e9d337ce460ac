//! What `net.rs`, `net_tcp_errors.rs` and `net_unix.rs` share: the runtime per driver, test
//! data, the echo servers and the checks of what a peer sees (each file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
use hoop_test_support::{resets, serial};

use std::future::Future;
use std::io::{self, Read};

use std::task::Poll;
use std::time::Duration;

use common::DriverKind;
use hoop::net::{TcpListener, TcpStream};
use hoop::time::timeout;

/// Runs `f` on a fresh runtime of `kind` with a 30 s limit, one test at a time.
pub fn run<F: Future>(kind: DriverKind, f: F) -> F::Output {
    let _serial = serial();
    let rt = common::runtime(kind);
    rt.block_on(async { timeout(Duration::from_secs(30), f).await })
        .expect("test timed out")
}

/// A deterministic xorshift64 generator.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A blocking std read with a time limit: `Ok(0)` means the peer closed.
pub fn std_read_with_timeout(mut s: impl Read, set: impl FnOnce(Duration)) -> io::Result<usize> {
    set(Duration::from_millis(100));
    let mut b = [0u8; 16];
    s.read_retry(&mut b)
}

pub fn assert_peer_closed(r: io::Result<usize>, what: &str) {
    match r {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("{what}: expected EOF or reset (server side closed), got {other:?}"),
    }
}

/// An accept loop until `stop`: each connection echoed by `echo`; returns the bytes the
/// echoes that ended well echoed and how many a reset ended (dropped, as a server does).
pub async fn echo_server<S: 'static>(
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
pub fn assert_echoed((echoed, reset): (usize, u32), sent: usize, retried: u32) {
    if retried == 0 && reset == 0 {
        assert_eq!(echoed, sent);
    }
}

/// Polls the accept `f` exactly once. It may complete then: on epoll the accept is tried at
/// once, and on either driver a connection kept from an earlier dropped accept is served at
/// once. The accepted stream is then dropped here (closed from `Drop`), and the test still
/// checks that no fd leaks.
pub async fn poll_once<F: Future>(_kind: DriverKind, f: std::pin::Pin<&mut F>) {
    let mut f = Some(f);
    std::future::poll_fn(|cx| {
        if let Some(f) = f.take() {
            let _ = f.poll(cx).is_ready();
        }
        Poll::Ready(())
    })
    .await
}

/// Runs `write` while `read` reads the echo to its end: the echo, or the first error of either
/// (a reset ends both: the other may wait for ever on it, so it is dropped with the stream).
pub async fn write_while_reading(
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

/// A connected pair: (client, server side).
pub async fn tcp_pair(l: &TcpListener) -> (TcpStream, TcpStream) {
    let addr = l.local_addr().unwrap();
    let c = hoop::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}
