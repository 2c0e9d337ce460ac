//! Unix-domain sockets: streams through a listener and as a pair, echoed intact; datagrams
//! that round-trip; and an accept future dropped before it completes leaks no fd.
//!
//! Several tests count the process's open fds, so every test here takes one lock and they run
//! one at a time. Every test runs on each driver (io_uring, then epoll).

use hoop_test_support as common;
use hoop_test_support::{fd_count, resets};

use std::io;
use std::net::Shutdown;
use std::path::Path;
use std::rc::Rc;

use std::time::Duration;

use common::each_driver;
use hoop::net::{UnixDatagram, UnixListener, UnixStream};
use hoop::time::sleep;

mod net_common;
use net_common::*;

use hoop_test_support::TempDir;

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

/// Writes `payload` and shuts down the write half while reading the echo to the end; a
/// reset (or an echo cut short) is an error.
async fn unix_echo_client(s: UnixStream, payload: Vec<u8>) -> io::Result<Vec<u8>> {
    let len = payload.len();
    let write = async {
        let (res, _) = s.write_all(payload).await;
        res?;
        s.shutdown_with(Shutdown::Write).await
    };
    let echoed = write_while_reading(write, unix_read_to_end(&s)).await?;
    if echoed.len() < len {
        return Err(resets::closed_early("the whole echo"));
    }
    Ok(echoed)
}

#[test]
fn unix_stream_echo_via_listener() {
    let dir = TempDir::new("net-unix", "echo");
    each_driver(|kind| {
        // A path per driver: the first run's socket file stays (nothing unlinks it).
        let path = dir.join(&format!("echo-{kind}.sock"));
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
            let e = UnixStream::connect(dir.join("nobody.sock"))
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
    let dir = TempDir::new("net-unix", "dgram");
    each_driver(|kind| {
        // Paths per driver: the first run's socket files stay (nothing unlinks them).
        let (pa, pb) = (
            dir.join(&format!("a-{kind}.sock")),
            dir.join(&format!("b-{kind}.sock")),
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
    let dir = TempDir::new("net-unix", "cancel");
    each_driver(|kind| {
        let path = dir.join(&format!("cancel-{kind}.sock"));
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
