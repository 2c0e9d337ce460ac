//! Teardown under load (also run under AddressSanitizer by `scripts/sanitize`):
//! a runtime dropped with 10,000 operations in flight, a runtime dropped from inside another
//! runtime's waker (and from a waker dropped by a shutdown), and a ring poisoned in the middle
//! of a load. Each must finish in bounded time, free or deliberately leak every buffer as
//! DESIGN.md says (no use after free, no double free: the sanitizer run checks), and give every
//! fd back.
//!
//! The tests count the process's fds, so they take one lock and run one at a time.

use hoop_test_support as common;
use hoop_test_support::{fd_count, serial};

use common::pipe;

use std::cell::RefCell;
use std::future::Future;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use common::{bounded, builder, each_driver, skip, DriverKind};
use hoop::{op, Op};

/// 10,000 reads of empty pipes in flight (each its own task, plus 1,000 no-op tasks and timers
/// racing them) when the runtime is shut down: every read is cancelled and reaped (none leaked),
/// the tasks are dropped with their buffers, and every fd comes back.
#[test]
fn shutdown_with_ten_thousand_ops_in_flight() {
    let _serial = serial();
    each_driver(|kind| {
        let before = fd_count();
        let report = bounded(120, move || {
            let rt = builder(kind).build().unwrap();
            let pipes: Vec<_> = (0..100).map(|_| pipe()).collect();
            let fds: Vec<i32> = pipes.iter().map(|(r, _)| r.as_raw_fd()).collect();
            rt.block_on(async move {
                for i in 0..10_000usize {
                    let fd = fds[i % fds.len()];
                    hoop::spawn(async move {
                        let (r, _) = Op::new(op::Read::new(fd, vec![0u8; 64], u64::MAX)).await;
                        if let Ok(n) = r {
                            panic!("a read of an empty pipe read {n} bytes");
                        }
                    });
                }
                for i in 0..1000u64 {
                    hoop::spawn(async move {
                        Op::new(op::Nop).await.unwrap();
                        hoop::time::sleep(Duration::from_millis(1 + i % 3)).await;
                    });
                }
                // Let every task push its read.
                for _ in 0..64 {
                    hoop::yield_now().await;
                }
                hoop::time::sleep(Duration::from_millis(20)).await;
                let in_flight = hoop::driver::Driver::current().unwrap().in_flight();
                assert!(in_flight >= 10_000, "only {in_flight} in flight");
            });
            let report = rt.shutdown();
            drop(pipes);
            report
        });
        // io_uring counts the reads its shutdown cancelled; epoll cancels a readiness wait at
        // once when its task is dropped, before the driver's shutdown, which then finds none.
        if kind == DriverKind::Uring {
            assert!(report.cancelled >= 10_000, "{kind}: {report:?}");
        }
        assert_eq!(report.leaked, 0, "{kind}: {report:?}");
        assert_eq!(report.still_in_flight, 0, "{kind}: {report:?}");
        assert_eq!(fd_count(), before, "{kind}: fds");
    });
}

thread_local! {
    /// Runtime B, which a waker of runtime A drops.
    static VICTIM: RefCell<Option<hoop::Runtime>> = const { RefCell::new(None) };
}

/// A waker that drops runtime B (from `VICTIM`) when woken, then wakes the real waker.
struct DropsVictim(Waker);

impl Wake for DropsVictim {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let victim = VICTIM.with(|v| v.borrow_mut().take());
        drop(victim);
        self.0.wake_by_ref();
    }
}

/// Runtime B (1,000 reads in flight) is dropped from inside runtime A's waker, on A's thread,
/// while A drains completions: B shuts down there (cancel, reap) without touching A, and A
/// goes on serving.
#[test]
fn a_runtime_dropped_from_inside_a_waker() {
    let _serial = serial();
    each_driver(|kind| {
        let before = fd_count();
        bounded(60, move || {
            let (r, w) = pipe();
            let rfd = r.as_raw_fd();
            let b = builder(kind).build().unwrap();
            b.block_on(async {
                for _ in 0..1000 {
                    hoop::spawn(async move {
                        let _ = Op::new(op::Read::new(rfd, vec![0u8; 8], u64::MAX)).await;
                    });
                }
                for _ in 0..16 {
                    hoop::yield_now().await;
                }
            });
            VICTIM.with(|v| *v.borrow_mut() = Some(b));
            let a = builder(kind).build().unwrap();
            a.block_on(async {
                // A read of A, polled with the waker that drops B when A wakes it; the byte it
                // reads is written once it is pending (on both drivers it then completes
                // through a wake, never inline).
                let (pr, pw) = pipe();
                let mut read = Box::pin(Op::new(op::Read::new(
                    pr.as_raw_fd(),
                    vec![0u8; 1],
                    u64::MAX,
                )));
                let mut written = false;
                let (res, _) = std::future::poll_fn(|cx| {
                    let w = Waker::from(Arc::new(DropsVictim(cx.waker().clone())));
                    let p = read.as_mut().poll(&mut Context::from_waker(&w));
                    if p.is_pending() && !written {
                        written = true;
                        // SAFETY: writes one byte from a local to a pipe we own.
                        let n = unsafe { libc::write(pw.as_raw_fd(), b"x".as_ptr().cast(), 1) };
                        assert_eq!(n, 1);
                    }
                    p
                })
                .await;
                assert_eq!(res.unwrap(), 1);
                assert!(VICTIM.with(|v| v.borrow().is_none()), "B was dropped");
                // A still works.
                let (_rx, tx) = pipe();
                let write = Op::new(op::Write::new(tx.as_raw_fd(), b"ok".to_vec(), u64::MAX));
                assert_eq!(write.await.0.unwrap(), 2);
            });
            drop(a);
            drop((r, w));
        });
        assert_eq!(fd_count(), before, "{kind}: fds");
    });
}

/// A waker whose drop drops runtime B, held by an operation of runtime A that A's shutdown
/// cancels: B is dropped from inside A's shutdown.
#[test]
fn a_runtime_dropped_by_a_waker_dropped_in_a_shutdown() {
    struct DropOnDrop;
    impl Wake for DropOnDrop {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for DropOnDrop {
        fn drop(&mut self) {
            let victim = VICTIM.with(|v| v.borrow_mut().take());
            drop(victim);
        }
    }
    let _serial = serial();
    each_driver(|kind| {
        let before = fd_count();
        bounded(60, move || {
            let (r, w) = pipe();
            let rfd = r.as_raw_fd();
            let b = builder(kind).build().unwrap();
            b.block_on(async {
                for _ in 0..100 {
                    hoop::spawn(async move {
                        let _ = Op::new(op::Read::new(rfd, vec![0u8; 8], u64::MAX)).await;
                    });
                }
                hoop::yield_now().await;
            });
            VICTIM.with(|v| *v.borrow_mut() = Some(b));
            let a = builder(kind).build().unwrap();
            a.block_on(async move {
                hoop::spawn(async move {
                    let mut read = Box::pin(Op::new(op::Read::new(rfd, vec![0u8; 8], u64::MAX)));
                    // Poll once with the booby-trapped waker (the op keeps it), then wait
                    // for ever on the real one: A's shutdown drops the task and its op.
                    let w = Waker::from(Arc::new(DropOnDrop));
                    assert!(read
                        .as_mut()
                        .poll(&mut Context::from_waker(&w))
                        .is_pending());
                    drop(w);
                    let _ = read.await;
                });
                hoop::time::sleep(Duration::from_millis(10)).await;
            });
            let report = a.shutdown();
            assert_eq!(report.leaked, 0, "{report:?}");
            assert!(VICTIM.with(|v| v.borrow().is_none()), "B was dropped");
            drop((r, w));
        });
        assert_eq!(fd_count(), before, "{kind}: fds");
    });
}

/// io_uring: the ring is poisoned (as after `-EBADR`) while 2,000 operations of every family
/// are in flight or queued: each future completes (EBADR, or its real result), every buffer
/// comes back, new operations fail at once, the runtime drops cleanly, fds come back.
#[test]
fn a_ring_poisoned_mid_load() {
    let _serial = serial();
    let kind = DriverKind::Uring;
    if let Some(reason) = hoop::__private::uring_unavailable() {
        skip(kind, reason);
        return;
    }
    let before = fd_count();
    bounded(60, move || {
        let rt = builder(kind).build().unwrap();
        // Reads of a pipe nobody writes (they can only end by the poison), writes to another.
        let (r, w) = pipe();
        let (r2, w2) = pipe();
        let (rfd, wfd) = (r.as_raw_fd(), w2.as_raw_fd());
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for i in 0..2000u32 {
                tasks.push(hoop::spawn(async move {
                    match i % 4 {
                        0 => Op::new(op::Read::new(rfd, vec![0u8; 16], u64::MAX))
                            .await
                            .0
                            .map(drop),
                        1 => Op::new(op::Write::new(wfd, vec![1u8; 4], u64::MAX))
                            .await
                            .0
                            .map(drop),
                        2 => Op::new(op::Nop).await.map(drop),
                        _ => {
                            hoop::time::sleep(Duration::from_millis(5)).await;
                            Ok(())
                        }
                    }
                }));
            }
            for _ in 0..8 {
                hoop::yield_now().await;
            }
            hoop::driver::Driver::current().unwrap().poison_for_test();
            // Every read ends with an error: EBADR (no CQE came), or ECANCELED (the poison's
            // synchronous cancel reached it); the rest may have completed for real first.
            let mut failed = 0;
            for (i, t) in tasks.into_iter().enumerate() {
                match t.await.unwrap() {
                    Err(e) => {
                        let errno = e.raw_os_error();
                        assert!(
                            errno == Some(libc::EBADR) || errno == Some(libc::ECANCELED),
                            "{e}"
                        );
                        failed += 1;
                    }
                    Ok(()) => assert_ne!(i % 4, 0, "a read of an unwritten pipe succeeded"),
                }
            }
            assert!(failed >= 500, "only {failed} operations failed");
            let e = Op::new(op::Nop).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EBADR));
        });
        drop(rt);
        drop((r, w, r2, w2));
    });
    assert_eq!(fd_count(), before, "fds");
}
