//! Network tests: TCP and UDP, and fd accounting when accept futures are dropped or streams
//! are closed from `Drop`. TCP's error paths: `net_tcp_errors.rs`; Unix-domain sockets:
//! `net_unix.rs`.

use hoop_test_support as common;
use hoop_test_support::{fd_count, resets};

use std::io;
use std::net::Shutdown;
use std::rc::Rc;

use std::time::Duration;

use common::each_driver;
use hoop::net::{TcpListener, TcpStream, UdpSocket};
use hoop::time::sleep;

mod net_common;
use net_common::*;

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
                                s.shutdown_with(Shutdown::Write).await
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

/// A receive made with `poll_first` (the socket believed empty: `IORING_RECVSEND_POLL_FIRST`
/// on io_uring from 5.19) gets bytes that are there already, and bytes that come later; a
/// kernel that refused the flag would fail it with `EINVAL`.
#[test]
fn recv_poll_first_gets_bytes_there_already_and_bytes_to_come() {
    use hoop::driver::{op, Op};
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    let _faults = common::faults_off(
        &["econnreset", "short_io", "ecanceled"],
        "it checks what one receive returns, byte for byte",
    );
    each_driver(|kind| {
        run(kind, async {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            let fd = a.as_raw_fd();
            b.write_all(b"there").unwrap();
            let (res, buf) = Op::new(op::Recv::new(fd, vec![0u8; 64], 0).poll_first(true)).await;
            assert_eq!(res.unwrap(), 5, "driver={kind}");
            assert_eq!(&buf[..], b"there");
            let later = hoop::spawn(Op::new(
                op::Recv::new(fd, vec![0u8; 64], 0).poll_first(true),
            ));
            sleep(Duration::from_millis(20)).await;
            b.write_all(b"later").unwrap();
            let (res, buf) = later.await.unwrap();
            assert_eq!(res.unwrap(), 5, "driver={kind}");
            assert_eq!(&buf[..], b"later");
        });
    });
}
