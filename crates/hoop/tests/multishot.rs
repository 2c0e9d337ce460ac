//! Multishot operations: multishot accept as a stream, on both drivers (on epoll it
//! is a loop of single accepts).

use hoop_test_support as common;
use hoop_test_support::fd_count;
use std::io::Read;

use futures::FutureExt;
use std::time::Duration;

use hoop::DriverKind;

/// The driver matrix, one test at a time (fd counts are per process).
fn each_driver(f: impl Fn(DriverKind)) {
    let _serial = common::serial();
    common::each_driver(f);
}

fn rt(kind: DriverKind) -> hoop::Runtime {
    common::runtime(kind)
}

/// One multishot accept serves many connections; each accepted stream works.
#[test]
fn incoming_accepts_many_connections() {
    each_driver(|kind| {
        rt(kind).block_on(async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let clients = std::thread::spawn(move || {
                (0..50)
                    .map(|i| {
                        let mut c = std::net::TcpStream::connect(addr).unwrap();
                        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                        std::io::Write::write_all(&mut c, &[i as u8]).unwrap();
                        let mut b = [0u8; 1];
                        c.read_exact(&mut b).unwrap();
                        b[0]
                    })
                    .collect::<Vec<u8>>()
            });
            let mut incoming = l.incoming();
            for _ in 0..50 {
                let s = hoop::time::timeout(Duration::from_secs(10), incoming.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: no connection within 10 s"))
                    .expect("stream ended")
                    .unwrap();
                let (res, buf) = s.read(Vec::with_capacity(1)).await;
                assert_eq!(res.unwrap(), 1);
                let reply = vec![buf[0].wrapping_add(1)];
                let (res, _) = s.write_all(reply).await;
                res.unwrap();
            }
            let got = clients.join().unwrap();
            assert_eq!(
                got,
                (0..50u8).map(|i| i + 1).collect::<Vec<_>>(),
                "driver={kind}"
            );
        });
    });
}

/// Invariant 14: connections the kernel accepted for a dropped stream go to the listener's
/// next `accept`, none lost, and are closed with the listener, never leaked.
#[test]
fn dropped_incoming_leaks_no_fd() {
    each_driver(|kind| {
        let baseline = fd_count();
        let runtime = rt(kind);
        runtime.block_on(async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let inside = fd_count();
            for round in 0..20 {
                let mut incoming = l.incoming();
                // Arm it, then let connections arrive while nobody takes them.
                let _ = hoop::time::timeout(Duration::from_millis(1), incoming.next()).await;
                let clients: Vec<_> = (0..5)
                    .map(|_| std::net::TcpStream::connect(addr).unwrap())
                    .collect();
                hoop::time::sleep(Duration::from_millis(5)).await;
                drop(incoming);
                // What the dropped stream accepted is kept for the listener: the next accepts
                // get every connection (kept or still in the kernel's backlog), none lost.
                for i in 0..5 {
                    let accepted = hoop::time::timeout(Duration::from_secs(10), l.accept()).await;
                    let (s, _) = accepted
                        .unwrap_or_else(|_| {
                            panic!("driver={kind} round {round}: connection {i} lost")
                        })
                        .unwrap();
                    drop(s);
                }
                drop(clients);
            }
            hoop::time::sleep(Duration::from_millis(20)).await;
            // While the runtime still runs: every connection the dropped streams accepted was
            // handed out and closed (not kept, not leaked).
            assert_eq!(fd_count(), inside, "driver={kind}: accepted fds leaked");
            // Connections kept for a listener are closed with it.
            let mut incoming = l.incoming();
            let _ = hoop::time::timeout(Duration::from_millis(1), incoming.next()).await;
            let clients: Vec<_> = (0..5)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            hoop::time::sleep(Duration::from_millis(5)).await;
            drop(incoming);
            l.close().await.unwrap();
            drop(clients);
        });
        drop(runtime);
        assert_eq!(
            fd_count(),
            baseline,
            "driver={kind}: fds leaked by a dropped incoming()"
        );
    });
}

/// Both ring modes where they exist: kernel-registered (io_uring on 6.0+) and the user-space
/// free list (the fallback, forced).
type MakeRing = fn(u16, usize) -> std::io::Result<hoop::BufRing>;

fn ring_modes() -> [(&'static str, MakeRing); 5] {
    [
        ("kernel", hoop::BufRing::new),
        ("user", hoop::BufRing::new_user),
        ("incremental", hoop::BufRing::new_incremental),
        ("bundles", bundles),
        ("incremental+bundles", incremental_bundles),
    ]
}

/// A kernel ring whose receives use bundles where the kernel has them.
fn bundles(entries: u16, len: usize) -> std::io::Result<hoop::BufRing> {
    let r = hoop::BufRing::new(entries, len)?;
    r.set_bundles(true);
    Ok(r)
}

/// An incremental ring whose receives use bundles where the kernel has them.
fn incremental_bundles(entries: u16, len: usize) -> std::io::Result<hoop::BufRing> {
    let r = hoop::BufRing::new_incremental(entries, len)?;
    r.set_bundles(true);
    Ok(r)
}

/// Says (once per test and mode) when a mode asked for runs as a plainer one here: the
/// feature is absent (epoll, or an older kernel).
fn note_mode(kind: DriverKind, mode: &str, ring: &hoop::BufRing) {
    let want_inc = mode.starts_with("incremental");
    let want_bundles = mode.ends_with("bundles");
    if (want_inc && !ring.is_incremental()) || (want_bundles && !ring.bundles()) {
        eprintln!(
            "driver={kind} ring={mode}: runs as kernel={} incremental={} bundles={} (feature \
             absent here)",
            ring.is_kernel(),
            ring.is_incremental(),
            ring.bundles()
        );
    }
}

/// Every buffer is back (an incremental ring's partly filled one aside: the kernel keeps it).
fn all_back(ring: &hoop::BufRing) -> bool {
    ring.available() + ring.filling() == ring.entries() as usize
}

/// A multishot recv on a buffer ring delivers every byte, in order.
#[test]
fn recv_stream_delivers_everything_in_order() {
    each_driver(|kind| {
        for (mode, make) in ring_modes() {
            rt(kind).block_on(async move {
                let ring = make(16, 1024).unwrap();
                if mode == "kernel" && kind == DriverKind::Uring && !ring.is_kernel() {
                    common::skip(
                        kind,
                        "the kernel buffer ring needs multishot receive (6.0): runs on the \
                         user-space ring instead",
                    );
                }
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
                let sent = payload.clone();
                let writer = std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    std::io::Write::write_all(&mut c, &sent).unwrap();
                });
                let (s, _) = l.accept().await.unwrap();
                let mut got = Vec::new();
                let mut stream = s.recv_stream(&ring);
                while let Some(buf) = hoop::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind} ring={mode}: stalled"))
                {
                    let buf = buf.unwrap();
                    assert!(buf.len() <= 1024);
                    got.extend_from_slice(&buf);
                }
                writer.join().unwrap();
                assert!(got == payload, "driver={kind} ring={mode}: data differs");
                drop(stream);
                assert!(all_back(&ring), "driver={kind} ring={mode}: {ring:?}");
            });
        }
    });
}

/// Running out of buffers while data keeps arriving pauses the stream and loses nothing: it
/// resumes when the held buffers are returned (invariant 12's ENOBUFS rule).
#[test]
fn buffer_exhaustion_loses_no_data() {
    each_driver(|kind| {
        for (mode, make) in ring_modes() {
            rt(kind).block_on(async move {
                let ring = make(4, 256).unwrap();
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let payload: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
                let sent = payload.clone();
                let writer = std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    for chunk in sent.chunks(1000) {
                        std::io::Write::write_all(&mut c, chunk).unwrap();
                        std::thread::sleep(Duration::from_micros(200));
                    }
                });
                let (s, _) = l.accept().await.unwrap();
                let mut stream = s.recv_stream(&ring);
                let mut held = Vec::new();
                let mut got = Vec::new();
                loop {
                    let next = hoop::time::timeout(Duration::from_millis(300), stream.next()).await;
                    match next {
                        Ok(Some(buf)) => held.push(buf.unwrap()),
                        Ok(None) => break,
                        // Every buffer is held: the stream waits. Give them back.
                        Err(_) => {
                            assert_eq!(
                                ring.available(),
                                0,
                                "driver={kind} ring={mode}: stalled with free buffers"
                            );
                        }
                    }
                    if held.len() == 4 || ring.available() == 0 {
                        hoop::time::sleep(Duration::from_millis(5)).await;
                        for b in held.drain(..) {
                            got.extend_from_slice(&b);
                        }
                    }
                }
                for b in held.drain(..) {
                    got.extend_from_slice(&b);
                }
                writer.join().unwrap();
                assert_eq!(got.len(), payload.len(), "driver={kind} ring={mode}");
                assert!(got == payload, "driver={kind} ring={mode}: data differs");
                assert!(ring.available() <= ring.entries() as usize);
            });
        }
    });
}

/// A multishot stream's late items are released and buffer ids go back exactly once: a stream
/// dropped with buffers outstanding and data still arriving gives every buffer back exactly
/// once.
#[test]
fn dropped_recv_stream_returns_every_buffer() {
    each_driver(|kind| {
        for (mode, make) in ring_modes() {
            rt(kind).block_on(async move {
                let ring = make(8, 128).unwrap();
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                let (s, _) = l.accept().await.unwrap();
                for round in 0..20 {
                    let mut stream = s.recv_stream(&ring);
                    std::io::Write::write_all(&mut c, &[round as u8; 300]).unwrap();
                    let first = hoop::time::timeout(Duration::from_secs(5), stream.next())
                        .await
                        .unwrap()
                        .unwrap()
                        .unwrap();
                    // More data arrives for the armed stream, then it is dropped.
                    std::io::Write::write_all(&mut c, &[0xee; 500]).unwrap();
                    hoop::time::sleep(Duration::from_millis(2)).await;
                    drop(stream);
                    drop(first);
                    hoop::time::sleep(Duration::from_millis(2)).await;
                    assert!(
                        all_back(&ring),
                        "driver={kind} ring={mode} round {round}: buffers not returned: {ring:?}"
                    );
                }
            });
        }
    });
}

/// A received buffer can be sent as it is (it is an IoBuf): the echo path without a copy.
#[test]
fn ring_buffers_can_be_sent_back() {
    each_driver(|kind| {
        rt(kind).block_on(async move {
            let ring = hoop::BufRing::new(8, 512).unwrap();
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                std::io::Write::write_all(&mut c, b"echo me").unwrap();
                let mut b = [0u8; 7];
                c.read_exact(&mut b).unwrap();
                b
            });
            let (s, _) = l.accept().await.unwrap();
            let mut stream = s.recv_stream(&ring);
            let mut n = 0;
            while n < 7 {
                let buf = stream.next().await.unwrap().unwrap();
                n += buf.len();
                let (res, _) = s.write_all(buf).await;
                res.unwrap();
            }
            assert_eq!(&client.join().unwrap(), b"echo me");
            drop(stream);
            assert_eq!(ring.available(), 8);
        });
    });
}

/// A buffer ring dropped right after its recv stream is freed once the stream's final CQE has
/// come (it used to be dropped inside the drain, where unregistering it failed, so the ring
/// and its buffers leaked: LeakSanitizer's 4,224 bytes in `ring_buffers_can_be_sent_back`).
#[test]
fn a_ring_dropped_right_after_its_stream_is_freed() {
    each_driver(|kind| {
        rt(kind).block_on(async move {
            let before = hoop::BufRing::live_on_this_thread();
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                std::io::Write::write_all(&mut c, b"x").unwrap();
                c
            });
            let (s, _) = l.accept().await.unwrap();
            for _ in 0..3 {
                let ring = hoop::BufRing::new(8, 512).unwrap();
                let mut stream = s.recv_stream(&ring);
                if let Some(first) = stream.next().now_or_never() {
                    drop(first);
                }
                drop(stream);
                drop(ring);
            }
            // Let the cancels' final CQEs come back.
            for _ in 0..50 {
                if hoop::BufRing::live_on_this_thread() == before {
                    break;
                }
                hoop::time::sleep(Duration::from_millis(2)).await;
            }
            assert_eq!(hoop::BufRing::live_on_this_thread(), before, "rings leaked");
            drop(client.join().unwrap());
        });
    });
}

/// The multishot-accept fallback forced on io_uring: a loop of single-shot accepts (what a
/// kernel before 5.19 gets) serves connections the same way.
#[test]
fn single_shot_accept_loop_fallback() {
    each_driver(|kind| {
        rt(kind).block_on(async move {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let clients: Vec<_> = (0..20)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
            let accept = hoop::driver::op::AcceptMulti::single_shot(fd);
            assert!(!accept.is_multishot());
            let mut stream = hoop::driver::MultiOp::new(accept);
            for i in 0..20 {
                let fd = hoop::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: connection {i} not accepted"))
                    .expect("the loop re-arms")
                    .unwrap();
                drop(fd);
            }
            drop(stream);
            drop(clients);
        });
    });
}

/// Odd-sized messages, back to back: a receive (a bundle, or a part of an incremental buffer)
/// ends mid-message again and again; the chunks, in order, are the stream's bytes.
fn odd_messages(n: usize, seed: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = [1usize, 7, 61, 255, 256, 257, 999, 1500, 4097][(i + seed as usize) % 9];
            (0..len)
                .map(|j| ((i * 31 + j * 7) as u32 ^ seed) as u8)
                .collect()
        })
        .collect()
}

/// Every mode: many odd-sized messages over buffers of 256 bytes, so bundles and incremental
/// parts end mid-message; the concatenation of the chunks is what was sent, in order, and
/// every buffer comes back.
#[test]
fn chunks_ending_mid_message_keep_the_stream_intact() {
    each_driver(|kind| {
        for (mode, make) in ring_modes() {
            rt(kind).block_on(async move {
                let ring = make(16, 256).unwrap();
                note_mode(kind, mode, &ring);
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let messages = odd_messages(400, 3);
                let sent: Vec<u8> = messages.concat();
                let writer = common::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    for m in &messages {
                        std::io::Write::write_all(&mut c, m).unwrap();
                    }
                });
                let (s, _) = l.accept().await.unwrap();
                let mut stream = s.recv_stream(&ring);
                let mut got = Vec::with_capacity(sent.len());
                let mut chunks = 0usize;
                while let Some(buf) = hoop::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind} ring={mode}: stalled"))
                {
                    let buf = buf.unwrap_or_else(|e| panic!("driver={kind} ring={mode}: {e}"));
                    assert!(!buf.is_empty() && buf.len() <= 256);
                    got.extend_from_slice(&buf);
                    chunks += 1;
                }
                writer.join().unwrap();
                assert_eq!(got.len(), sent.len(), "driver={kind} ring={mode}");
                assert!(got == sent, "driver={kind} ring={mode}: bytes differ");
                assert!(chunks >= sent.len() / 256, "driver={kind} ring={mode}");
                if ring.bundles() {
                    eprintln!(
                        "driver={kind} ring={mode}: {} of {chunks} chunks came in bundles of \
                         several buffers",
                        ring.multi_buffer_receives()
                    );
                }
                drop(stream);
                assert!(all_back(&ring), "driver={kind} ring={mode}: {ring:?}");
            });
        }
    });
}

/// Every mode: a small ring shared by many connections runs dry while they all send; every
/// connection's bytes arrive whole and in order (`ENOBUFS` pauses a receive, which resumes
/// when buffers come back), and every buffer comes back.
#[test]
fn a_dry_ring_shared_by_many_connections_loses_no_byte() {
    const CONNS: usize = 12;
    const BYTES: usize = 24 * 1024;
    each_driver(|kind| {
        for (mode, make) in ring_modes() {
            rt(kind).block_on(async move {
                let ring = make(4, 512).unwrap();
                note_mode(kind, mode, &ring);
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let payload = |c: usize| -> Vec<u8> {
                    (0..BYTES).map(|i| (i * 13 + c * 101) as u8).collect()
                };
                let writers: Vec<_> = (0..CONNS)
                    .map(|c| {
                        let data = payload(c);
                        common::spawn(move || {
                            let mut s = std::net::TcpStream::connect(addr).unwrap();
                            std::io::Write::write_all(&mut s, &(c as u32).to_le_bytes()).unwrap();
                            for chunk in data.chunks(3000) {
                                std::io::Write::write_all(&mut s, chunk).unwrap();
                            }
                        })
                    })
                    .collect();
                let mut tasks = Vec::new();
                for _ in 0..CONNS {
                    let (s, _) = hoop::time::timeout(Duration::from_secs(10), l.accept())
                        .await
                        .unwrap_or_else(|_| panic!("driver={kind} ring={mode}: no connection"))
                        .unwrap();
                    let ring = ring.clone();
                    tasks.push(hoop::spawn(async move {
                        let mut stream = s.recv_stream(&ring);
                        let mut got = Vec::new();
                        let mut n = 0u32;
                        loop {
                            let next =
                                hoop::time::timeout(Duration::from_secs(20), stream.next()).await;
                            let next = next.unwrap_or_else(|_| {
                                panic!("driver={kind} ring={mode}: a receive stalled: {ring:?}")
                            });
                            match next {
                                Some(buf) => {
                                    let buf = buf.expect("receive");
                                    got.extend_from_slice(&buf);
                                    // Hold some buffers a while: the ring runs dry. (Never
                                    // while waiting for the next: tasks holding every buffer
                                    // while they wait for another would wait for ever.)
                                    n += 1;
                                    if n.is_multiple_of(3) {
                                        hoop::time::sleep(Duration::from_millis(1)).await;
                                    }
                                    drop(buf);
                                }
                                None => break,
                            }
                        }
                        got
                    }));
                }
                for t in tasks {
                    let got = t.await.unwrap();
                    let c = u32::from_le_bytes(got[..4].try_into().unwrap()) as usize;
                    assert!(c < CONNS);
                    assert_eq!(got.len(), 4 + BYTES, "driver={kind} ring={mode} conn {c}");
                    assert!(
                        got[4..] == payload(c)[..],
                        "driver={kind} ring={mode} conn {c}"
                    );
                }
                for w in writers {
                    w.join().unwrap();
                }
                assert!(all_back(&ring), "driver={kind} ring={mode}: {ring:?}");
            });
        }
    });
}

/// N connections with a receive armed and nothing to read hold no buffer: `available()` does
/// not move. Data on one of them takes what it needs and gives it back.
#[test]
fn idle_connections_hold_no_receive_buffer() {
    const CONNS: usize = 40;
    each_driver(|kind| {
        for (mode, make) in ring_modes() {
            if mode == "user" && kind == DriverKind::Uring {
                // The fallback for kernels without buffer rings takes a buffer per armed
                // receive (a plain recv needs one): not this test's subject.
                eprintln!("skip ring=user on driver={kind}: an armed plain recv holds a buffer");
                continue;
            }
            rt(kind).block_on(async move {
                let ring = make(8, 4096).unwrap();
                if kind == DriverKind::Uring && !ring.is_kernel() {
                    // Below 6.0 (no multishot receive) the ring is the user-space fallback.
                    common::skip(
                        kind,
                        &format!(
                            "ring={mode} needs buffer rings with multishot receive (6.0): the \
                             fallback's armed plain recv holds a buffer"
                        ),
                    );
                    return;
                }
                note_mode(kind, mode, &ring);
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let mut clients = Vec::new();
                let mut servers = Vec::new();
                for _ in 0..CONNS {
                    clients.push(std::net::TcpStream::connect(addr).unwrap());
                    servers.push(l.accept().await.unwrap().0);
                }
                let before = ring.available();
                assert_eq!(before, 8, "driver={kind} ring={mode}");
                let mut streams: Vec<_> = servers.iter().map(|s| s.recv_stream(&ring)).collect();
                // Arm them all.
                for st in streams.iter_mut() {
                    assert!(st.next().now_or_never().is_none(), "nothing was sent");
                }
                hoop::time::sleep(Duration::from_millis(20)).await;
                for st in streams.iter_mut() {
                    assert!(st.next().now_or_never().is_none(), "nothing was sent");
                }
                assert_eq!(
                    ring.available(),
                    before,
                    "driver={kind} ring={mode}: idle receives hold buffers"
                );
                std::io::Write::write_all(&mut clients[7], b"hello").unwrap();
                let buf = hoop::time::timeout(Duration::from_secs(10), streams[7].next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind} ring={mode}: no data"))
                    .unwrap()
                    .unwrap();
                assert_eq!(&buf[..], b"hello");
                drop(buf);
                assert!(all_back(&ring), "driver={kind} ring={mode}: {ring:?}");
                drop(streams);
                drop(clients);
            });
        }
    });
}

/// An incremental ring (io_uring on 6.12+; skipped visibly elsewhere): receives share a
/// buffer, each view sees exactly its bytes at its offset, and a buffer the kernel is done with
/// is not given back while a view of it lives.
#[test]
fn incremental_views_keep_their_buffer_and_bytes() {
    each_driver(|kind| {
        rt(kind).block_on(async move {
            let ring = hoop::BufRing::new_incremental(2, 64).unwrap();
            // One receive per CQE, so that each view is one send's bytes.
            ring.set_bundles(false);
            if !ring.is_incremental() {
                common::skip(
                    kind,
                    "needs incremental buffer rings (PBUF_RING_INC, 6.12), absent here",
                );
                return;
            }
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().await.unwrap();
            let mut stream = s.recv_stream(&ring);
            let mut next = async || {
                hoop::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .expect("no data")
                    .expect("stream ended")
                    .expect("receive")
            };
            std::io::Write::write_all(&mut c, &[b'a'; 10]).unwrap();
            let a = next().await;
            assert_eq!((&a[..], a.offset()), (&[b'a'; 10][..], 0));
            assert_eq!((ring.available(), ring.filling()), (1, 1), "{ring:?}");
            std::io::Write::write_all(&mut c, &[b'b'; 20]).unwrap();
            let b = next().await;
            assert_eq!(
                (&b[..], b.bid(), b.offset()),
                (&[b'b'; 20][..], a.bid(), 10)
            );
            drop(a);
            // Fill the buffer to its end: the kernel is done with it, but `b` still views it.
            std::io::Write::write_all(&mut c, &[b'c'; 34]).unwrap();
            let mut got = Vec::new();
            let mut views = Vec::new();
            while got.len() < 34 {
                let v = next().await;
                got.extend_from_slice(&v);
                views.push(v);
            }
            assert_eq!(got, vec![b'c'; 34]);
            assert_eq!(views[0].bid(), b.bid());
            drop(views);
            assert_eq!(ring.filling(), 0, "{ring:?}");
            assert_eq!(
                ring.available(),
                1,
                "a view keeps the full buffer out: {ring:?}"
            );
            // More data goes to the other buffer; `b`'s bytes are untouched.
            std::io::Write::write_all(&mut c, &[b'd'; 5]).unwrap();
            let d = next().await;
            assert_ne!(d.bid(), b.bid());
            assert_eq!(&b[..], &[b'b'; 20][..]);
            drop(b);
            assert_eq!(ring.available(), 1, "the full buffer is back: {ring:?}");
            assert_eq!(ring.filling(), 1);
            drop(d);
            drop(stream);
        });
    });
}
