//! Regression tests for six driver defects a review found, each named with the rule it broke
//! (DESIGN.md, "Invariants: where each is kept and tested").
//! Each failed on the code before its fix.

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
use hoop_test_support::{resets, serial};

use common::pipe;

use std::future::Future;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use common::{bounded, builder, each_driver, skip, DriverKind};
use hoop::driver::{link, op, MultiOp, Op};

/// Polls `f` once (pushing its SQE, say) and gives it back.
async fn poll_once<F: Future + Unpin>(mut f: F) -> (Poll<F::Output>, F) {
    let p = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await;
    (p, f)
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("hoop-sound-{}-{name}", std::process::id()))
}

/// Defect 1 (memory handed to the kernel stays owned until its final completion, even on a poisoned
/// ring): a poisoned ring does not hand back a buffer that a recv still armed in the kernel may
/// write. The buffer freed after the error is replaced by a canary of the same size (the allocator
/// hands the same chunk back); data sent afterwards must not land in it, and must still be in the
/// socket.
#[test]
fn poisoned_ring_hands_back_no_memory_the_kernel_may_write() {
    let _serial = serial();
    let _faults = common::faults_off(
        &["econnreset"],
        "the recv must be armed in the kernel when the ring is poisoned: an injected reset \
         completes it without an SQE, and there is nothing left to check",
    );
    let kind = DriverKind::Uring;
    let Ok(rt) = builder(kind).build() else {
        skip(kind, "io_uring unavailable");
        return;
    };
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let afd = a.as_raw_fd();
    rt.block_on(async move {
        let driver = hoop::driver::Driver::current().unwrap();
        let (p, recv) = poll_once(Op::new(op::Recv::new(afd, vec![0u8; 64], 0))).await;
        assert!(p.is_pending());
        // A blocking turn submits the recv: it is armed in the kernel.
        hoop::time::sleep(Duration::from_millis(20)).await;
        driver.poison_for_test();
        let (res, buf) = recv.await;
        let e = res.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADR), "{e}");
        let freed = buf.as_ptr() as usize;
        drop(buf);
        #[allow(clippy::useless_vec)] // a heap chunk of the freed buffer's size
        let canary = vec![0xAAu8; 64];
        let reused = canary.as_ptr() as usize == freed;
        b.write_all(&[0x55; 64]).unwrap();
        // Turns of the loop (not sleeps: they need the ring): each 16th enters the ring,
        // which runs the kernel's deferred work, a still-armed recv's copy included.
        for _ in 0..200 {
            hoop::yield_now().await;
        }
        assert!(
            canary.iter().all(|&x| x == 0xAA),
            "the kernel wrote into memory handed back after EBADR (chunk reused: {reused})"
        );
        // Nothing was lost: the data is still in the socket.
        a.set_nonblocking(true).unwrap();
        let mut got = [0u8; 64];
        let n = (&a).read_retry(&mut got).unwrap();
        assert_eq!(&got[..n], &[0x55; 64][..n]);
        assert_eq!(n, 64);
    });
}

/// Pushes a write on `f` whose SQE stays unsubmitted and returns its future, which the caller
/// keeps, unpolled, until the end (a future that is neither polled nor dropped: the write
/// reaches the kernel at the next submission, and no cancel is queued that might catch it in
/// io-wq first, so the test stays exact; dropping it at the end frees its buffer once the
/// write's completion is in, so sanitizers see no leak).
async fn stale_write(f: &hoop::fs::File) -> hoop::Op<hoop::op::Write<Vec<u8>>> {
    let write = hoop::Op::new(hoop::op::Write::new(f.as_raw_fd(), vec![b'X'; 16], 0));
    let (p, write) = poll_once(write).await;
    assert!(p.is_pending());
    write
}

/// An fd leaving hoop before its SQEs are submitted, on io_uring: a file with a stale write in the
/// SQ is given up by `give_up` (which closes its fd number), a new file is opened, and after a turn
/// of the ring the new file must be empty. With `must_reuse`, the new file must have the old number
/// (the giving up closed it at once); otherwise the number is only reported.
fn stale_write_scenario(name: &str, give_up: fn(hoop::fs::File), must_reuse: bool) {
    let kind = DriverKind::Uring;
    let Ok(rt) = builder(kind).build() else {
        skip(kind, "io_uring unavailable");
        return;
    };
    skip(
        DriverKind::Epoll,
        "no SQ: a write is handed to the pool when pushed",
    );
    let (p1, p2) = (tmp(&format!("{name}-1")), tmp(&format!("{name}-2")));
    let (q1, q2) = (p1.clone(), p2.clone());
    rt.block_on(async move {
        let f = hoop::fs::File::create(&q1).await.unwrap();
        let pending_write = stale_write(&f).await;
        let num = f.as_raw_fd();
        give_up(f);
        let f2 = std::fs::File::create(&q2).unwrap();
        let reused = f2.as_raw_fd() == num;
        if must_reuse {
            assert!(reused, "the number is reused");
        }
        hoop::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            std::fs::read(&q2).unwrap().len(),
            0,
            "stale write reached the new file (number reused: {reused})"
        );
        drop(pending_write);
    });
    let _ = std::fs::remove_file(p1);
    let _ = std::fs::remove_file(p2);
}

/// Defect 2 (an fd leaves hoop only after its SQEs are submitted): `into_std` while a dropped
/// write's SQE is still unsubmitted; the fd number is closed and reused by a new file, which must
/// not receive the stale write.
#[test]
fn into_std_after_a_dropped_write_leaves_the_next_file_alone() {
    let _serial = serial();
    stale_write_scenario("into-std", |f| drop(f.into_std()), true);
}

/// Defect 2 (an fd leaves hoop only after its SQEs are submitted): a `Send` file dropped on another
/// thread while a dropped write's SQE is still unsubmitted on its home ring.
#[test]
fn file_dropped_on_another_thread_leaves_the_next_file_alone() {
    let _serial = serial();
    stale_write_scenario(
        "xthread",
        |f| std::thread::spawn(move || drop(f)).join().unwrap(),
        false,
    );
}

fn sqpoll_runtime() -> Option<hoop::Runtime> {
    let kind = DriverKind::Uring;
    let rt = match builder(kind).sqpoll(Duration::from_millis(10)).build() {
        Ok(rt) => rt,
        Err(e) => {
            skip(kind, &format!("no SQPOLL ring: {e}"));
            return None;
        }
    };
    if !rt.setup_flags().contains("SQPOLL") {
        skip(kind, "the kernel refused SQPOLL");
        return None;
    }
    Some(rt)
}

/// Defect 3 (a chain's SQEs become visible together): on an SQPOLL ring every LINK_TIMEOUT deadline
/// fires (10,000 of them): the SQ thread never takes an operation without its timeout.
#[test]
fn sqpoll_deadlines_all_fire() {
    let _serial = serial();
    bounded(120, || {
        let Some(rt) = sqpoll_runtime() else { return };
        let (r, _w) = pipe();
        let fd = r.as_raw_fd();
        let timed_out = Arc::new(AtomicUsize::new(0));
        let t = timed_out.clone();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for _ in 0..32 {
                let t = t.clone();
                tasks.push(hoop::spawn(async move {
                    for _ in 0..313 {
                        let read = op::Read::new(fd, vec![0u8; 8], u64::MAX);
                        let dl = Op::new(op::Deadline::new(read, Duration::from_millis(1)));
                        let (res, _) = dl.await;
                        if res.is_err_and(|e| e.kind() == std::io::ErrorKind::TimedOut) {
                            t.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
        });
        assert_eq!(timed_out.load(Ordering::Relaxed), 32 * 313);
    });
}

/// Defect 3 (a chain's SQEs become visible together): on an SQPOLL ring, `link(a, b)` never runs
/// `b` after `a` failed (10,000 chains): the SQ thread takes both SQEs together.
#[test]
fn sqpoll_chains_never_run_b_after_a_failed() {
    let _serial = serial();
    bounded(120, || {
        let Some(rt) = sqpoll_runtime() else { return };
        let (r, w) = pipe();
        let wfd = w.as_raw_fd();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for _ in 0..32 {
                tasks.push(hoop::spawn(async move {
                    let mut b_ran = 0;
                    for _ in 0..313 {
                        // `a` fails at once (a bad fd); `b` writes one byte to the pipe.
                        let a = op::Read::new(-1, vec![0u8; 8], u64::MAX);
                        let b = op::Write::new(wfd, vec![1u8], u64::MAX);
                        let ((ra, _), (rb, _)) = link(a, b).await;
                        assert!(ra.is_err());
                        if rb.is_ok() {
                            b_ran += 1;
                        }
                    }
                    b_ran
                }));
            }
            let mut b_ran = 0;
            for task in tasks {
                b_ran += task.await.unwrap();
            }
            assert_eq!(b_ran, 0, "b ran after a failed");
        });
        let mut r = std::fs::File::from(r);
        // SAFETY: fcntl on an fd we own.
        unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut buf = [0u8; 64];
        assert!(r.read_retry(&mut buf).is_err(), "the pipe got bytes from b");
    });
}

/// Defect 4 (a cancel is never dropped, nor starved): with 2,000 `op_timeout` reads pending,
/// cancels of 100 other dropped reads complete within a few driver ticks (counted, not timed).
#[test]
fn cancels_do_not_starve_behind_link_timeouts() {
    let _serial = serial();
    each_driver(|kind| {
        let rt = builder(kind).build().unwrap();
        let (r1, _w1) = pipe();
        let (r2, _w2) = pipe();
        let (fd1, fd2) = (r1.as_raw_fd(), r2.as_raw_fd());
        rt.block_on(async move {
            let driver = hoop::driver::Driver::current().unwrap();
            let plain: Vec<_> = (0..100)
                .map(|_| {
                    hoop::spawn(async move {
                        let _ = Op::new(op::Read::new(fd2, vec![0u8; 8], u64::MAX)).await;
                    })
                })
                .collect();
            let deadlines: Vec<_> = (0..2000)
                .map(|_| {
                    hoop::spawn(async move {
                        let read = op::Read::new(fd1, vec![0u8; 8], u64::MAX);
                        let _ = hoop::time::op_timeout(Duration::from_secs(60), read).await;
                    })
                })
                .collect();
            // Let every task push its operation.
            for _ in 0..64 {
                hoop::yield_now().await;
            }
            let before = driver.in_flight();
            for t in &plain {
                t.abort();
            }
            // A tick: one turn of the loop that waits in the driver (a 1 ms sleep).
            let mut ticks = 0;
            while driver.in_flight() + 100 > before {
                hoop::time::sleep(Duration::from_millis(1)).await;
                ticks += 1;
                assert!(
                    ticks <= 20,
                    "driver={kind}: cancels still pending after {ticks} ticks \
                     (in flight {} of {before})",
                    driver.in_flight()
                );
            }
            eprintln!("driver={kind}: 100 cancels done in {ticks} ticks");
            for t in &deadlines {
                t.abort();
            }
        });
    });
}

/// Defect 5 (buffer ids are returned exactly once): in buffer-ring fallback mode, 200 receive
/// streams dropped while waiting for room lose no buffer id: a stream still receives afterwards.
#[test]
fn dropped_streams_waiting_for_room_lose_no_buffer() {
    let _serial = serial();
    each_driver(|kind| {
        let rt = builder(kind).max_in_flight(4).build().unwrap();
        rt.block_on(async move {
            let ring = hoop::driver::BufRing::new_user(4, 256).unwrap();
            let listener = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let client = std::net::TcpStream::connect(addr).unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let sfd = server.as_raw_fd();
            // Fill every slot with reads that wait on an empty pipe.
            let (r, w) = pipe();
            let rfd = r.as_raw_fd();
            let blockers: Vec<_> = (0..4)
                .map(|_| {
                    hoop::spawn(async move {
                        let _ = Op::new(op::Read::new(rfd, vec![0u8; 8], u64::MAX)).await;
                    })
                })
                .collect();
            for _ in 0..8 {
                hoop::yield_now().await;
            }
            for _ in 0..200 {
                let mut s = MultiOp::new(op::RecvMulti::new(sfd, ring.clone()));
                let p = std::future::poll_fn(|cx| match s.poll_next(cx) {
                    Poll::Pending => Poll::Ready(true),
                    // A receive a reset ended at once (it took no buffer either).
                    Poll::Ready(Some(Err(e))) if resets::is_reset(&e) && resets::injected() => {
                        Poll::Ready(true)
                    }
                    Poll::Ready(_) => Poll::Ready(false),
                })
                .await;
                assert!(p, "driver={kind}: the stream waits for room");
                drop(s);
            }
            drop(w);
            for t in blockers {
                let _ = t.await;
            }
            assert_eq!(ring.available(), 4, "driver={kind}: buffer ids lost");
            // The ring still serves a receive (on a new connection if a reset ended this one).
            let conn = std::cell::RefCell::new(Some((client, server)));
            resets::retry_async("a receive afterwards", |_| async {
                let taken = conn.borrow_mut().take();
                let (client, server) = match taken {
                    Some(pair) => pair,
                    None => {
                        let c = std::net::TcpStream::connect(addr)?;
                        (c, listener.accept().await?.0)
                    }
                };
                (&client).write_all(b"still here")?;
                let mut s = server.recv_stream(&ring);
                let got = hoop::time::timeout(Duration::from_secs(5), s.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: the stream stalled"));
                let buf = got.unwrap()?;
                assert_eq!(&buf[..], b"still here");
                Ok(())
            })
            .await;
        });
    });
}

/// Defect 6 (nothing blocks the runtime thread): a sleep on an IOPOLL ring (which refuses timeouts)
/// does not block the thread: a task beside it keeps running.
#[test]
fn sleep_on_iopoll_ring_does_not_block_the_thread() {
    let _serial = serial();
    let kind = DriverKind::Uring;
    skip(DriverKind::Epoll, "IOPOLL is an io_uring setup flag");
    bounded(30, move || {
        let rt = match builder(kind).iopoll(true).build() {
            Ok(rt) if rt.setup_flags().contains("IOPOLL") => rt,
            _ => {
                skip(kind, "no IOPOLL ring");
                return;
            }
        };
        rt.block_on(async {
            let spins = Arc::new(AtomicUsize::new(0));
            let stop = Arc::new(AtomicUsize::new(0));
            let (s, st) = (spins.clone(), stop.clone());
            let busy = hoop::spawn(async move {
                while st.load(Ordering::Relaxed) == 0 {
                    s.fetch_add(1, Ordering::Relaxed);
                    hoop::yield_now().await;
                }
            });
            hoop::time::sleep(Duration::from_millis(300)).await;
            stop.store(1, Ordering::Relaxed);
            busy.await.unwrap();
            let n = spins.load(Ordering::Relaxed);
            assert!(
                n >= 100,
                "the busy task ran only {n} times during the sleep"
            );
        });
    });
}

/// Defect 6 (nothing blocks the runtime thread), both drivers: a sleep beside a busy task, and a
/// sleep polled where no runtime runs (it completes, woken from hoop's timer thread, without
/// blocking the poller).
#[test]
fn sleep_never_blocks_the_thread() {
    let _serial = serial();
    each_driver(|kind| {
        let rt = builder(kind).build().unwrap();
        rt.block_on(async {
            let spins = Arc::new(AtomicUsize::new(0));
            let s = spins.clone();
            let busy = hoop::spawn(async move {
                loop {
                    s.fetch_add(1, Ordering::Relaxed);
                    hoop::yield_now().await;
                }
            });
            hoop::time::sleep(Duration::from_millis(100)).await;
            busy.abort();
            assert!(spins.load(Ordering::Relaxed) >= 100, "driver={kind}");
        });
    });
    // Outside any runtime: the first poll returns at once, the waker fires after the deadline.
    let mut sleep = Box::pin(hoop::time::sleep(Duration::from_millis(30)));
    let thread = std::thread::current();
    let waker = Arc::new(Unparker(thread)).into();
    let mut cx = Context::from_waker(&waker);
    let start = std::time::Instant::now();
    let mut polls = 0;
    while sleep.as_mut().poll(&mut cx).is_pending() {
        polls += 1;
        assert!(polls < 1000, "woken too often");
        std::thread::park_timeout(Duration::from_secs(5));
        assert!(start.elapsed() < Duration::from_secs(10), "never woken");
    }
    assert!(start.elapsed() >= Duration::from_millis(30));
}

struct Unparker(std::thread::Thread);

impl std::task::Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}
