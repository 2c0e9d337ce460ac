//! The driver's in-flight cap: the default holds one operation per descriptor the process may
//! open, idle receives beyond the cap leave room for a new client, and uncapped receives whose
//! completions overflow the CQ lose nothing. Each test runs on each driver (io_uring, then
//! epoll) unless it checks what only io_uring has.

use hoop_test_support as common;
use hoop_test_support::resets;

use std::time::Duration;

use common::{bounded, builder, each_driver, runtime, DriverKind};

/// The default in-flight cap holds one operation per descriptor the process may open: each
/// idle connection keeps a receive in flight, so a cap below the descriptor limit (it was
/// 15,359 with a CQ of 16384, under a limit of 20,000) left the next client's accept waiting
/// behind idle connections, connected by the kernel's backlog and never answered.
#[test]
fn default_cap_covers_the_descriptor_limit() {
    // An injected tiny CQ is exactly what this test must not see.
    let _f = common::faults_off(&["cq_overflow"], "the test reads the ring's real CQ size");
    let want = descriptor_limit();
    let default_cq = hoop::driver::default_cq_entries(256);
    assert!(default_cq >= 16384, "{default_cq}");
    assert!(
        cap(default_cq) >= want,
        "CQ {default_cq} for a limit of {want}"
    );
    each_driver(|kind| {
        // Set up at its full size (a growable ring reaches it under load: the next test).
        let rt = builder(kind).resize_rings(false).build().unwrap();
        match kind {
            DriverKind::Uring => {
                let (_, cq) = rt.ring_sizes();
                assert!(cap(cq) >= want, "CQ {cq} for a limit of {want}");
            }
            _ => common::skip(kind, "no CQ: its cap is computed from the same default"),
        }
    });
}

/// The in-flight cap a CQ of `cq` entries allows (the driver's rule).
fn cap(cq: u32) -> u64 {
    cq as u64 - u64::from((cq / 16).max(1)) - 1
}

/// The descriptors this process may open, at most 61439 (the cap of the kernel's largest CQ,
/// 65536 entries).
fn descriptor_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit above.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur.min(61439)
}

/// A runtime thread starts with at most 1 MiB of ring memory (36 KiB where the kernel resizes
/// rings, 6.13), and its CQ grows under load (`IORING_REGISTER_RESIZE_RINGS`) to hold what is
/// in flight: 6,000 reads of one byte wait on a socket at once, far past the cap of the ring's
/// first CQ, and every one gets its byte once they are written (nothing lost or repeated
/// across the resizes, no CQE for a dead operation). The growth is asserted where the kernel
/// (or the kernel level) resizes; elsewhere the same reads run on a ring set up at full size,
/// and on epoll.
#[test]
fn the_cq_starts_small_and_grows_under_load() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    const READS: usize = 6000;
    let _f = common::faults_off(&["cq_overflow"], "the test reads the ring's real CQ size");
    each_driver(|kind| {
        let (got, counters, start, end, flags) = bounded(60, move || {
            let rt = runtime(kind);
            let start = (rt.ring_sizes(), rt.ring_bytes());
            let mut fds = [0; 2];
            // SAFETY: socketpair writes two new fds into the array.
            let r = unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                    0,
                    fds.as_mut_ptr(),
                )
            };
            assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
            // SAFETY: socketpair returned two new fds that nothing else owns.
            let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            let got = rt.block_on(async move {
                let fd = a.as_raw_fd();
                let readers: Vec<_> = (0..READS)
                    .map(|_| {
                        hoop::spawn(async move {
                            // An injected ECANCELED ends a read that never ran: read again.
                            loop {
                                let read = hoop::driver::Op::new(hoop::driver::op::Read::new(
                                    fd,
                                    vec![0u8; 1],
                                    u64::MAX,
                                ));
                                match read.await {
                                    (Ok(1), buf) => return buf[0],
                                    (Err(e), _) if e.raw_os_error() == Some(libc::ECANCELED) => {}
                                    (other, _) => panic!("read: {other:?}"),
                                }
                            }
                        })
                    })
                    .collect();
                // Let every reader reach the kernel (or the room FIFO) before any byte comes.
                for _ in 0..20 {
                    hoop::yield_now().await;
                }
                let bytes: Vec<u8> = (0..READS).map(|i| (i % 251) as u8).collect();
                let mut w = std::fs::File::from(b);
                std::io::Write::write_all(&mut w, &bytes).unwrap();
                let mut got = vec![0usize; 251];
                for r in readers {
                    got[usize::from(r.await.unwrap())] += 1;
                }
                drop((a, w));
                got
            });
            let end = (rt.ring_sizes(), rt.ring_bytes());
            (got, rt.counters(), start, end, rt.setup_flags())
        });
        // Each byte value was read as many times as it was written.
        let want: Vec<usize> = (0..251)
            .map(|v| (0..READS).filter(|i| i % 251 == v).count())
            .collect();
        assert_eq!(got, want, "bytes read by value");
        assert_eq!(counters.stale_cqes, 0, "{counters:?}");
        if kind != DriverKind::Uring {
            return;
        }
        let ((_, start_cq), start_bytes) = start;
        let ((_, end_cq), end_bytes) = end;
        assert!(
            start_bytes <= 1 << 20,
            "{start_bytes} bytes of rings at start"
        );
        let resizes = hoop::setup::kernel_at_least(6, 13) && flags.contains("DEFER_TASKRUN");
        if !resizes {
            common::skip(
                kind,
                &format!(
                    "growth not checked (CQ {start_cq}, {start_bytes} bytes, setup flags \
                     {flags}): resizing needs Linux 6.13 (or a kernel level that has it) and \
                     DEFER_TASKRUN"
                ),
            );
            assert_eq!((counters.ring_resizes, start_cq), (0, end_cq));
            return;
        }
        assert!(counters.ring_resizes > 0, "{counters:?}");
        assert!(
            start_bytes <= 64 << 10,
            "{start_bytes} bytes of rings at start"
        );
        assert!(
            cap(end_cq) >= READS as u64 && end_bytes > start_bytes,
            "CQ {start_cq} -> {end_cq}, {start_bytes} -> {end_bytes} bytes"
        );
    });
}

/// More idle connections than the in-flight cap, each waiting in a multishot receive, do not
/// keep a new client from being accepted and served: a receive that waits for a peer takes a
/// slot outside the cap (before, the 65th idle receive made the next accept wait for room, and
/// its client was connected by the backlog and never answered).
#[test]
fn idle_receives_beyond_the_cap_leave_room_for_a_new_client() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::sync::Arc;
    const CAP: u32 = 64;
    const IDLE: usize = 80;
    each_driver(|kind| {
        bounded(60, move || {
            let rt = builder(kind).max_in_flight(CAP).build().unwrap();
            // 0: running, 1: the new client got its echo, 2: it did not.
            let outcome = Arc::new(AtomicU8::new(0));
            let client = rt.block_on(async {
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let mut ring = hoop::BufRing::new(8, 256).unwrap();
                if kind == DriverKind::Uring && !ring.is_kernel() {
                    // Below 6.0 (no multishot receive) each armed receive holds a buffer of the
                    // user-space ring: the idle connections would take all 8, which is not the
                    // cap this test is about. Room for every connection (128 > 80 + 1).
                    ring = hoop::BufRing::new(128, 256).unwrap();
                }
                // Detached: it ends with the runtime.
                drop(hoop::spawn(async move {
                    loop {
                        let Ok((s, _)) = l.accept().await else {
                            continue;
                        };
                        let ring = ring.clone();
                        drop(hoop::spawn(async move {
                            let mut rx = s.recv_stream(&ring);
                            while let Some(Ok(buf)) = rx.next().await {
                                let bytes = buf.to_vec();
                                if s.write_all(bytes).await.0.is_err() {
                                    break;
                                }
                            }
                        }));
                    }
                }));
                let out = outcome.clone();
                let client = common::spawn(move || {
                    let idle: Vec<_> = (0..IDLE)
                        .map(|_| std::net::TcpStream::connect(addr).unwrap())
                        .collect();
                    // An echo a reset ended is asked again by another new client.
                    let ok = resets::retry("the new client", |_| {
                        let mut c = std::net::TcpStream::connect(addr)?;
                        c.set_read_timeout(Some(Duration::from_secs(10)))?;
                        c.write_all(b"x")?;
                        let mut b = [0u8; 1];
                        c.read_exact(&mut b)?;
                        Ok(b == *b"x")
                    });
                    out.store(if ok { 1 } else { 2 }, Ordering::SeqCst);
                    drop(idle);
                });
                for _ in 0..3000 {
                    if outcome.load(Ordering::SeqCst) != 0 || client.is_finished() {
                        break;
                    }
                    hoop::time::sleep(Duration::from_millis(10)).await;
                }
                client
            });
            client.join().unwrap();
            assert_eq!(
                outcome.load(Ordering::SeqCst),
                1,
                "the new client got no echo with {IDLE} idle connections and a cap of {CAP}"
            );
        })
    });
}

/// The CQ cap (overflowed CQEs are flushed, none lost) with receives outside the cap: on a CQ
/// of 16 (cap 14), 100 connections each wait in a multishot receive and all get a byte at
/// about the same time; their CQEs may overflow the CQ (the kernel keeps them, the drain
/// flushes them) and every byte is echoed.
#[test]
fn uncapped_receives_that_overflow_the_cq_lose_nothing() {
    use std::io::{Read, Write};
    const CONNS: usize = 100;
    each_driver(|kind| {
        let (echoed, overflows) = bounded(60, move || {
            let rt = builder(kind).entries(4).cq_entries(16).build().unwrap();
            let echoed = rt.block_on(async {
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let ring = hoop::BufRing::new(128, 64).unwrap();
                // Detached: it ends with the runtime.
                drop(hoop::spawn(async move {
                    loop {
                        let Ok((s, _)) = l.accept().await else {
                            continue;
                        };
                        let ring = ring.clone();
                        drop(hoop::spawn(async move {
                            let mut rx = s.recv_stream(&ring);
                            while let Some(Ok(buf)) = rx.next().await {
                                let bytes = buf.to_vec();
                                drop(buf);
                                if s.write_all(bytes).await.0.is_err() {
                                    break;
                                }
                            }
                        }));
                    }
                }));
                let client = common::spawn(move || {
                    let mut conns: Vec<_> = (0..CONNS)
                        .map(|_| std::net::TcpStream::connect(addr).unwrap())
                        .collect();
                    let wrote: Vec<_> = conns
                        .iter_mut()
                        .enumerate()
                        .map(|(i, c)| c.write_all(&[i as u8]))
                        .collect();
                    let mut ok = 0;
                    for ((i, c), mut wrote) in conns.iter_mut().enumerate().zip(wrote) {
                        // A connection a reset ended (the server dropped it) asks again on a
                        // new one.
                        let b = resets::retry(&format!("connection {i}"), |n| {
                            if n > 0 {
                                *c = std::net::TcpStream::connect(addr)?;
                                wrote = c.write_all(&[i as u8]);
                            }
                            std::mem::replace(&mut wrote, Ok(()))?;
                            c.set_read_timeout(Some(Duration::from_secs(10)))?;
                            let mut b = [0u8; 1];
                            c.read_exact(&mut b)?;
                            Ok(b[0])
                        });
                        if b == i as u8 {
                            ok += 1;
                        }
                    }
                    ok
                });
                for _ in 0..3000 {
                    if client.is_finished() {
                        break;
                    }
                    hoop::time::sleep(Duration::from_millis(10)).await;
                }
                client.join().unwrap()
            });
            (echoed, rt.counters().overflow_events)
        });
        eprintln!("{kind}: {echoed} of {CONNS} echoed, {overflows} CQ overflow events");
        assert_eq!(echoed, CONNS);
    });
}
