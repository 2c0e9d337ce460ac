//! Direct descriptors: connections accepted straight into the ring's
//! registered file table, operations on the slot, and the close of the slot through the ring.
//! On the epoll driver `incoming_direct` falls back to plain sockets.

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
use hoop_test_support::{resets, serial};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::time::Duration;

use hoop::driver::Driver;
use hoop::net::{DirectTcpStream, TcpListener};
use hoop::DriverKind;

// Port and /proc checks are per host state: tests in this file run one at a time (`serial`).

fn rt(kind: DriverKind) -> hoop::Runtime {
    common::runtime(kind)
}

/// Whether `kind` cannot run here (io_uring unavailable, or below its kernel level): said on
/// stderr, and the caller skips it.
fn unavailable(kind: DriverKind) -> bool {
    match hoop::__private::uring_unavailable() {
        Some(reason) if kind == DriverKind::Uring => {
            common::skip(kind, &format!("io_uring unavailable here: {reason}"));
            true
        }
        _ => false,
    }
}

fn driver() -> Driver {
    Driver::current().expect("inside a runtime")
}

/// Whether the direct path is expected on this driver.
fn expect_direct(kind: DriverKind) -> bool {
    if kind == DriverKind::Epoll {
        return false;
    }
    let ok = driver().supports_direct_accept();
    if !ok {
        common::skip(
            kind,
            "direct checks need direct accept (FILE_INDEX_ALLOC, 5.19), absent here",
        );
    }
    ok
}

/// Lines of /proc/net/tcp and tcp6 whose local port is `port` and state is `state` (hex).
fn sockets_in_state(port: u16, state: &str) -> usize {
    let mut n = 0;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 {
                continue;
            }
            let local_port = f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) && f[3] == state {
                n += 1;
            }
        }
    }
    n
}

/// Waits (bounded) until no slot of the fixed-file table is occupied; returns the occupancy.
async fn settle_slots() -> usize {
    for _ in 0..200 {
        if driver().fixed_files_in_use() == 0 {
            return 0;
        }
        hoop::time::sleep(Duration::from_millis(10)).await;
    }
    driver().fixed_files_in_use()
}

/// Echoes until end of stream, then closes through the ring: awaited (`close`) or by drop.
async fn echo(s: DirectTcpStream, ring: Option<hoop::BufRing>, close: bool) {
    match ring {
        Some(ring) => {
            let mut rx = s.recv_stream(&ring);
            while let Some(Ok(b)) = rx.next().await {
                if s.write_all(b).await.0.is_err() {
                    break;
                }
            }
        }
        None => loop {
            let (res, buf) = s.read(Vec::with_capacity(256)).await;
            match res {
                Ok(n) if n > 0 => {
                    if s.write_all(buf).await.0.is_err() {
                        break;
                    }
                }
                _ => break,
            }
        },
    }
    if close {
        let _ = s.close().await;
    }
}

/// Echo over `incoming_direct` on both drivers: with io_uring the connections are direct
/// descriptors (read/write, and a multishot recv on a buffer ring), an awaited close frees the
/// slot at once, and fd-only operations say Unsupported; on epoll they are plain sockets.
#[test]
fn echo_over_direct_descriptors() {
    let _s = serial();
    // A loop over named drivers: the driver matrix's opt-outs.
    let _faults = common::matrix_faults_off();
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        if unavailable(kind) {
            continue;
        }
        rt(kind).block_on(async move {
            let direct = expect_direct(kind);
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let mut inc = l.incoming_direct();
            assert_eq!(inc.is_direct(), direct, "driver={kind}");
            let ring = hoop::BufRing::new(8, 256).unwrap();
            let clients = common::spawn(move || {
                (0..2)
                    .map(|i| {
                        // A connection a reset ended (the server dropped it) starts over.
                        resets::retry(&format!("client {i}"), |_| {
                            let mut c = std::net::TcpStream::connect(addr)?;
                            c.set_read_timeout(Some(Duration::from_secs(10)))?;
                            let mut got = Vec::new();
                            for round in 0..3u8 {
                                let msg = [i, round, 7, 9];
                                c.write_all(&msg)?;
                                let mut b = [0u8; 4];
                                c.read_exact(&mut b)?;
                                got.push(b == msg);
                            }
                            c.shutdown(std::net::Shutdown::Write)?;
                            let mut rest = Vec::new();
                            // The server closes after our end of stream: EOF, nothing more.
                            c.read_to_end(&mut rest)?;
                            got.push(rest.is_empty());
                            Ok(got.iter().all(|&b| b))
                        })
                    })
                    .collect::<Vec<bool>>()
            });
            // Connections until the clients are done (a reset makes one more).
            let (mut i, mut waits) = (0u32, 0);
            while !clients.is_finished() {
                let Ok(next) = hoop::time::timeout(Duration::from_millis(100), inc.next()).await
                else {
                    waits += 1;
                    assert!(waits < 300, "driver={kind}: no connection after {i}");
                    continue;
                };
                let s = next.expect("stream ended").unwrap();
                assert_eq!(s.is_direct(), direct, "driver={kind}");
                if direct {
                    assert_eq!(driver().fixed_files_in_use(), 1);
                    assert!(s.slot().is_some());
                    let e = s.peer_addr().unwrap_err();
                    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
                    let e = s.set_nodelay(true).unwrap_err();
                    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
                } else {
                    assert!(s.peer_addr().is_ok());
                    assert!(s.slot().is_none());
                }
                let ring = (!i.is_multiple_of(2)).then(|| ring.clone());
                hoop::time::timeout(Duration::from_secs(10), echo(s, ring, true))
                    .await
                    .expect("echo did not finish");
                // The awaited close completed: the slot is free already.
                assert_eq!(driver().fixed_files_in_use(), 0, "driver={kind}");
                i += 1;
            }
            assert_eq!(clients.join().unwrap(), vec![true, true], "driver={kind}");
        });
    }
}

/// The TinyWebServer-with-liburing bug: 10,000 connections opened, echoed and closed (client
/// first, then the server closes its direct descriptor through the ring). Afterwards no
/// socket of the server port is left in CLOSE_WAIT and no slot of the table is occupied.
#[test]
fn ten_thousand_connections_leave_no_close_wait_and_no_slot() {
    const CONNS: usize = 10_000;
    const THREADS: usize = 20;
    let _s = serial();
    // A loop over named drivers: the driver matrix's opt-outs.
    let _faults = common::matrix_faults_off();
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        if unavailable(kind) {
            continue;
        }
        rt(kind).block_on(async move {
            let direct = expect_direct(kind);
            let l = Rc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
            let port = l.local_addr().unwrap().port();
            let addr = l.local_addr().unwrap();
            let ring = hoop::BufRing::new(64, 256).unwrap();
            let served = Rc::new(std::cell::Cell::new(0usize));
            let saw_direct = Rc::new(std::cell::Cell::new(0usize));
            // Every connection the clients make (a reset makes one more), until they are done.
            let accepted = Rc::new(std::cell::Cell::new(0usize));
            let server = {
                let (l, served, saw_direct) = (l.clone(), served.clone(), saw_direct.clone());
                let accepted = accepted.clone();
                hoop::spawn(async move {
                    let mut inc = l.incoming_direct();
                    loop {
                        let Some(Ok(s)) = inc.next().await else {
                            break;
                        };
                        let i = accepted.get();
                        accepted.set(i + 1);
                        if s.is_direct() {
                            saw_direct.set(saw_direct.get() + 1);
                        }
                        let ring = i.is_multiple_of(2).then(|| ring.clone());
                        let served = served.clone();
                        hoop::spawn(async move {
                            echo(s, ring, i % 4 < 2).await;
                            served.set(served.get() + 1);
                        });
                    }
                })
            };
            // 20 client threads, each opening and closing its share sequentially: at most 20
            // connections at a time.
            let clients: Vec<_> = (0..THREADS)
                .map(|t| {
                    std::thread::spawn(move || {
                        let mut ok = 0usize;
                        for i in 0..CONNS / THREADS {
                            // An exchange a reset ended goes again on a new connection.
                            let echoed = resets::retry(&format!("client {t}.{i}"), |_| {
                                let mut c = std::net::TcpStream::connect(addr)?;
                                c.set_read_timeout(Some(Duration::from_secs(10)))?;
                                let msg = [(t as u8), (i % 251) as u8, 1, 2, 3, 4, 5, 6];
                                let mut b = [0u8; 8];
                                c.write_all(&msg)?;
                                c.read_exact(&mut b)?;
                                Ok(b == msg)
                            });
                            ok += usize::from(echoed);
                        }
                        ok
                    })
                })
                .collect();
            // Wait (bounded) for the clients without blocking the runtime.
            for _ in 0..6000 {
                if clients.iter().all(|c| c.is_finished()) {
                    break;
                }
                hoop::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(
                clients.iter().all(|c| c.is_finished()),
                "driver={kind}: clients did not finish within 60 s"
            );
            let ok: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
            assert_eq!(ok, CONNS, "driver={kind}: echoed connections");
            // Every server connection saw the client's end of stream (or a reset) and closed
            // its side.
            for _ in 0..500 {
                if served.get() == accepted.get() && sockets_in_state(port, "08") == 0 {
                    break;
                }
                hoop::time::sleep(Duration::from_millis(10)).await;
            }
            server.abort();
            assert!(
                accepted.get() >= CONNS,
                "driver={kind}: connections accepted"
            );
            assert_eq!(
                served.get(),
                accepted.get(),
                "driver={kind}: server connections closed"
            );
            if direct {
                assert_eq!(
                    saw_direct.get(),
                    accepted.get(),
                    "connections were direct descriptors"
                );
            }
            assert_eq!(
                sockets_in_state(port, "08"),
                0,
                "driver={kind}: sockets of port {port} left in CLOSE_WAIT"
            );
            assert_eq!(
                settle_slots().await,
                0,
                "driver={kind}: occupied slots left"
            );
        });
    }
}

/// A dropped `incoming_direct` stream with connections it accepted but never handed out
/// (orphans, closed inside the driver's completion drain) leaks no slot, and every client sees
/// end of stream or a reset.
#[test]
fn dropped_incoming_direct_leaks_no_slot() {
    let _s = serial();
    if unavailable(DriverKind::Uring) {
        return;
    }
    rt(DriverKind::Uring).block_on(async {
        if !expect_direct(DriverKind::Uring) {
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let mut inc = l.incoming_direct();
        assert!(inc.is_direct());
        let first = std::net::TcpStream::connect(addr).unwrap();
        let s0 = hoop::time::timeout(Duration::from_secs(10), inc.next())
            .await
            .expect("no connection within 10 s")
            .expect("stream ended")
            .unwrap();
        // The multishot accept stays armed: these land in slots nobody takes out of the stream.
        let mut clients = vec![first];
        for _ in 0..5 {
            clients.push(std::net::TcpStream::connect(addr).unwrap());
        }
        // Let the kernel accept them (their CQEs wait in the stream, unread).
        hoop::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            driver().fixed_files_in_use(),
            1,
            "only the connection handed out"
        );
        drop(inc);
        drop(s0);
        l.close().await.unwrap();
        assert_eq!(
            settle_slots().await,
            0,
            "slots leaked by the dropped stream"
        );
        for mut c in clients {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut b = [0u8; 1];
            match c.read_retry(&mut b) {
                Ok(0) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                // A leaked slot keeps the connection open: the read times out.
                other => panic!("client did not see EOF or reset: {other:?}"),
            }
        }
    });
}

/// Linux accepted sockets inherit `TCP_NODELAY` from the listener (which is why direct
/// descriptors, that cannot be set one by one, are covered by `TcpListener::set_nodelay`).
#[test]
fn listener_nodelay_is_inherited() {
    let _s = serial();
    // A loop over named drivers: the driver matrix's opt-outs.
    let _faults = common::matrix_faults_off();
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        if unavailable(kind) {
            continue;
        }
        rt(kind).block_on(async move {
            for on in [false, true] {
                let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
                l.set_nodelay(on).unwrap();
                let addr = l.local_addr().unwrap();
                let _c = std::net::TcpStream::connect(addr).unwrap();
                let (s, _) = hoop::time::timeout(Duration::from_secs(10), l.accept())
                    .await
                    .expect("no connection within 10 s")
                    .unwrap();
                // SAFETY: the fd comes from into_raw_fd; the std stream now owns it.
                let std = unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) };
                assert_eq!(std.nodelay().unwrap(), on, "driver={kind}");
            }
        });
    }
}
