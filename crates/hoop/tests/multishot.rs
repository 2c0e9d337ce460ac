//! Multishot receives as a stream on a buffer ring, in every ring mode and on both drivers:
//! every byte in order, buffer exhaustion losing nothing, every buffer back after a dropped
//! stream, buffers sent back, a ring dropped right after its stream, and chunks that end in
//! the middle of a message. Multishot accept: `multishot_accept.rs`; a ring many connections
//! share: `multishot_shared_ring.rs`.

use hoop_test_support as common;
use hoop_test_support::resets;
use std::io::Read;

use futures::FutureExt;
use std::time::Duration;

use hoop::DriverKind;

mod multishot_common;
use multishot_common::*;

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
                let sent = std::sync::Arc::new(payload.clone());
                let got = resuming("200 KB", payload.len(), |from, mut got| {
                    let (l, ring, sent) = (&l, &ring, sent.clone());
                    async move {
                        let writer = writer(addr, sent, from, 1 << 20, Duration::ZERO);
                        let (s, _) = l.accept().await.unwrap();
                        let mut stream = s.recv_stream(ring);
                        let mut res = Ok(());
                        while let Some(buf) =
                            hoop::time::timeout(Duration::from_secs(10), stream.next())
                                .await
                                .unwrap_or_else(|_| panic!("driver={kind} ring={mode}: stalled"))
                        {
                            match buf {
                                Ok(buf) => {
                                    assert!(buf.len() <= 1024);
                                    got.extend_from_slice(&buf);
                                }
                                Err(e) => res = Err(e),
                            }
                        }
                        drop(stream);
                        // A stream a reset ended gives its buffers back too.
                        assert!(all_back(ring), "driver={kind} ring={mode}: {ring:?}");
                        let _ = s.close().await;
                        writer.join().unwrap();
                        (res, got)
                    }
                })
                .await;
                assert!(got == payload, "driver={kind} ring={mode}: data differs");
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
                let sent = std::sync::Arc::new(payload.clone());
                let got = resuming("64 KiB", payload.len(), |from, mut got| {
                    let (l, ring, sent) = (&l, &ring, sent.clone());
                    async move {
                        let writer = writer(addr, sent, from, 1000, Duration::from_micros(200));
                        let (s, _) = l.accept().await.unwrap();
                        let mut stream = s.recv_stream(ring);
                        let mut held = Vec::new();
                        let mut res = Ok(());
                        loop {
                            let next =
                                hoop::time::timeout(Duration::from_millis(300), stream.next())
                                    .await;
                            match next {
                                Ok(Some(Ok(buf))) => held.push(buf),
                                Ok(Some(Err(e))) => res = Err(e),
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
                        drop(stream);
                        let _ = s.close().await;
                        writer.join().unwrap();
                        (res, got)
                    }
                })
                .await;
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
                // The connection, made anew for a round a reset ended.
                let conn = std::cell::RefCell::new(None);
                for round in 0..20 {
                    resets::retry_async(&format!("round {round}"), |_| async {
                        let taken = conn.borrow_mut().take();
                        let (mut c, s) = match taken {
                            Some(pair) => pair,
                            None => {
                                let c = std::net::TcpStream::connect(addr)?;
                                (c, l.accept().await?.0)
                            }
                        };
                        let mut stream = s.recv_stream(&ring);
                        std::io::Write::write_all(&mut c, &[round as u8; 300])?;
                        let first = hoop::time::timeout(Duration::from_secs(5), stream.next())
                            .await
                            .unwrap()
                            .unwrap();
                        // More data arrives for the armed stream, then it is dropped.
                        std::io::Write::write_all(&mut c, &[0xee; 500])?;
                        hoop::time::sleep(Duration::from_millis(2)).await;
                        drop(stream);
                        let first = first.map(drop);
                        hoop::time::sleep(Duration::from_millis(2)).await;
                        // A stream a reset ended gives every buffer back too.
                        assert!(
                            all_back(&ring),
                            "driver={kind} ring={mode} round {round}: buffers not returned: \
                             {ring:?}"
                        );
                        first?;
                        *conn.borrow_mut() = Some((c, s));
                        Ok(())
                    })
                    .await;
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
            // A reset (injected) ends the exchange: again on a new connection.
            let echoed = common::resets::retry_async("an echo from ring buffers", |_| async {
                let client = std::thread::spawn(move || -> std::io::Result<[u8; 7]> {
                    let mut c = std::net::TcpStream::connect(addr)?;
                    c.set_read_timeout(Some(Duration::from_secs(10)))?;
                    std::io::Write::write_all(&mut c, b"echo me")?;
                    let mut b = [0u8; 7];
                    c.read_exact(&mut b)?;
                    Ok(b)
                });
                let (s, _) = l.accept().await?;
                let mut stream = s.recv_stream(&ring);
                let mut n = 0;
                let mut served = Ok(());
                while n < 7 {
                    let buf = match stream.next().await {
                        Some(Ok(buf)) => buf,
                        Some(Err(e)) => {
                            served = Err(e);
                            break;
                        }
                        None => {
                            served = Err(common::resets::closed_early("the echo"));
                            break;
                        }
                    };
                    n += buf.len();
                    let (res, _) = s.write_all(buf).await;
                    if let Err(e) = res {
                        served = Err(e);
                        break;
                    }
                }
                drop(stream);
                drop(s);
                let got = client.join().expect("the client thread");
                served?;
                got
            })
            .await;
            assert_eq!(&echoed, b"echo me");
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
                let shared = std::sync::Arc::new(sent.clone());
                let chunks = std::cell::Cell::new(0usize);
                let got = resuming("odd messages", sent.len(), |from, mut got| {
                    let (l, ring, shared, chunks) = (&l, &ring, shared.clone(), &chunks);
                    async move {
                        // Written in odd pieces (a message's sizes, from `from` on).
                        let writer = writer(addr, shared, from, 999, Duration::ZERO);
                        let (s, _) = l.accept().await.unwrap();
                        let mut stream = s.recv_stream(ring);
                        let mut res = Ok(());
                        while let Some(buf) =
                            hoop::time::timeout(Duration::from_secs(10), stream.next())
                                .await
                                .unwrap_or_else(|_| panic!("driver={kind} ring={mode}: stalled"))
                        {
                            match buf {
                                Ok(buf) => {
                                    assert!(!buf.is_empty() && buf.len() <= 256);
                                    got.extend_from_slice(&buf);
                                    chunks.set(chunks.get() + 1);
                                }
                                Err(e) => res = Err(e),
                            }
                        }
                        drop(stream);
                        let _ = s.close().await;
                        writer.join().unwrap();
                        (res, got)
                    }
                })
                .await;
                assert_eq!(got.len(), sent.len(), "driver={kind} ring={mode}");
                assert!(got == sent, "driver={kind} ring={mode}: bytes differ");
                let chunks = chunks.get();
                assert!(chunks >= sent.len() / 256, "driver={kind} ring={mode}");
                if ring.bundles() {
                    eprintln!(
                        "driver={kind} ring={mode}: {} of {chunks} chunks came in bundles of \
                         several buffers",
                        ring.multi_buffer_receives()
                    );
                }
                assert!(all_back(&ring), "driver={kind} ring={mode}: {ring:?}");
            });
        }
    });
}
