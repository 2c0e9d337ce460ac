//! hoop::fs and the fds: std conversions and raw fds, open futures dropped before or after
//! they complete, files dropped with work in flight, operations outside a runtime, and closes
//! that never reach a ring: no fd is ever leaked.
//!
//! The tests count the process's open fds (entries of /proc/self/fd), which every thread
//! shares: every test takes one lock first and holds it to its end, so they run one at a time.
//! Every test that uses a runtime runs on each driver, each run in a temporary directory of its
//! own.

use hoop_test_support as common;
use hoop_test_support::fd_count;

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{each_driver, DriverKind};
use hoop::fs::File;

mod fs_common;
use fs_common::*;

/// The fd count just after a runtime of `kind` was dropped, once the runtime's own fds are
/// closed. io_uring closes them in the drop. epoll's blocking-pool threads are not joined (one
/// may be stuck in a system call) and share the driver's wake-up eventfd, which the last of them
/// closes as it exits, a moment after the drop: wait for `expected`, up to 2 s (a leaked file
/// stays leaked however long we wait).
fn fd_count_after_runtime_drop(kind: DriverKind, expected: usize) -> usize {
    if kind == DriverKind::Epoll {
        let start = std::time::Instant::now();
        while fd_count() != expected && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    fd_count()
}

#[test]
fn std_conversions_and_raw_fds() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("std-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"std").unwrap();
        let std_file = std::fs::File::open(&path).unwrap();
        run(kind, async {
            let f = File::from_std(std_file);
            let (res, buf) = f.read_at(Vec::with_capacity(8), 0).await;
            res.unwrap();
            assert_eq!(buf, b"std");
            let raw = f.into_raw_fd();
            // SAFETY: `raw` was just given up by `f`, and nothing else owns it.
            let f = unsafe { File::from_raw_fd(raw) };
            assert_eq!(f.as_raw_fd(), raw);
            let mut s = f.into_std();
            let mut out = String::new();
            std::io::Read::read_to_string(&mut s, &mut out).unwrap();
            assert_eq!(out, "std");
        });
    });
}

/// A waker that records that it was woken: the op's completion was reaped.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

type OpenFuture<'a> = Pin<Box<dyn Future<Output = io::Result<File>> + 'a>>;

/// Polls `fut` exactly once with a waker of its own (so the open is pushed to the ring) and
/// returns that waker's flag.
fn poll_once(fut: &mut OpenFuture<'_>) -> Arc<Flag> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(
        matches!(fut.as_mut().poll(&mut cx), Poll::Pending),
        "an open completes no earlier than the next turn of the driver (io_uring: the ring; \
         epoll: the blocking pool's result is collected by a turn)"
    );
    flag
}

/// Sleeps a millisecond at a time until `cond` holds, at most `limit`.
async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            return false;
        }
        hoop::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

#[test]
fn dropped_open_futures_leak_no_fd() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("cancel-open-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        let before_rt = fd_count();
        let rt = common::runtime(kind);
        rt.block_on(async {
            let before = fd_count();
            let (mut unreaped, mut reaped) = (0, 0);
            for i in 0..200 {
                // Before its CQE was reaped: pushed by one poll, then dropped, at once or after a
                // yield (the flag says whether the CQE was reaped meanwhile; it must not be most
                // of the time).
                let mut fut: OpenFuture<'_> = Box::pin(File::open(&path));
                let flag = poll_once(&mut fut);
                if i % 2 == 1 {
                    hoop::yield_now().await;
                }
                if !flag.0.load(Ordering::SeqCst) {
                    unreaped += 1;
                }
                drop(fut);

                // After its CQE was reaped: the file is open, owned by the op's slot, when the
                // future is dropped.
                let mut fut: OpenFuture<'_> = Box::pin(File::open(&path));
                let flag = poll_once(&mut fut);
                assert!(
                    wait_until(Duration::from_secs(5), || flag.0.load(Ordering::SeqCst)).await,
                    "the open never completed"
                );
                reaped += 1;
                drop(fut);
            }
            assert!(unreaped >= 100, "{unreaped} opens dropped before their CQE");
            assert_eq!(reaped, 200);
            // Let the ring reap the cancelled opens; a leak stays a leak however long we wait.
            wait_until(Duration::from_secs(2), || fd_count() == before).await;
            hoop::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(fd_count(), before, "fds leaked by dropped open futures");
        });
        drop(rt);
        assert_eq!(
            fd_count_after_runtime_drop(kind, before_rt),
            before_rt,
            "fds left after the runtime was dropped"
        );
    });
}

#[test]
fn open_future_dropped_after_completion_closes_its_fd_at_once() {
    let _faults = common::faults_off(
        &["ecanceled"],
        "counts the fd a reaped open holds: a made-up ECANCELED completes it with none (the \
         open goes in again on its next poll)",
    );
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("cancel-open-reaped-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        run(kind, async {
            let before = fd_count();
            for _ in 0..20 {
                let mut fut: OpenFuture<'_> = Box::pin(File::open(&path));
                let flag = poll_once(&mut fut);
                assert!(wait_until(Duration::from_secs(5), || flag.0.load(Ordering::SeqCst)).await);
                // Completed and reaped, not yet claimed: the fd is open, owned by the op.
                assert_eq!(fd_count(), before + 1);
                drop(fut);
                assert_eq!(
                    fd_count(),
                    before,
                    "the fd must be closed when the future drops"
                );
            }
        });
    });
}

#[test]
fn dropped_file_is_closed_on_the_same_tick() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("drop-close-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        let before_rt = fd_count();
        let rt = common::runtime(kind);
        rt.block_on(async {
            let before = fd_count();
            // IORING_OP_CLOSE completes inline when submitted, except for files whose file system
            // has a `flush` (overlayfs, NFS, FUSE): the kernel then punts it to a worker. So the
            // strict "closed after one tick" check uses /dev/null, whatever the temp dir is on.
            // (A tick: the driver submits queued SQEs when the runtime runs out of ready tasks, so
            // the test parks on a short sleep rather than a `yield_now`, after which the task is
            // ready again at once.) On epoll, close runs at once on the runtime's thread.
            for _ in 0..50 {
                let f = File::open("/dev/null").await.unwrap();
                assert_eq!(fd_count(), before + 1);
                drop(f);
                hoop::time::sleep(Duration::from_millis(1)).await;
                assert_eq!(
                    fd_count(),
                    before,
                    "close from Drop not done after one tick"
                );
            }
            // A file in the temp dir: its close is submitted on the next tick, and done soon.
            for _ in 0..20 {
                let f = File::open(&path).await.unwrap();
                assert_eq!(fd_count(), before + 1);
                let submitted = hoop::runtime::current_counters().unwrap().sqes_submitted;
                drop(f);
                hoop::time::sleep(Duration::from_millis(1)).await;
                let now = hoop::runtime::current_counters().unwrap().sqes_submitted;
                // On epoll the close is a close(2) at once (no submission to count).
                assert!(
                    kind == DriverKind::Epoll || now > submitted,
                    "close from Drop not submitted on this tick"
                );
                assert!(
                    wait_until(Duration::from_secs(5), || fd_count() == before).await,
                    "close from Drop never done"
                );
            }
            // close() reports and is done when it returns.
            let f = File::open(&path).await.unwrap();
            assert_eq!(fd_count(), before + 1);
            f.close().await.unwrap();
            assert_eq!(fd_count(), before);
        });

        // Outside a runtime, Drop closes at once.
        let before = fd_count();
        let f = rt.block_on(File::open(&path)).unwrap();
        assert_eq!(fd_count(), before + 1);
        drop(f);
        assert_eq!(fd_count(), before);
        // And a file that outlives its runtime too.
        let f = rt.block_on(File::open(&path)).unwrap();
        drop(rt);
        let n = fd_count_after_runtime_drop(kind, before_rt + 1);
        assert_eq!(n, before_rt + 1, "only the file is left open");
        drop(f);
        assert_eq!(fd_count(), n - 1);
    });
}

#[test]
fn operations_outside_a_runtime_fail_cleanly() {
    let _g = lock();
    let dir = TempDir::new("fs-test", "no-runtime");
    let path = dir.join("f");
    std::fs::write(&path, b"x").unwrap();
    // Polled with no runtime on the thread: an error, not a panic or a hang.
    let fut = File::open(&path);
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Err(_)) => {}
        other => panic!("expected an error outside a runtime, got {other:?}"),
    }
    assert!(Path::new(&path).exists());
}

#[test]
fn close_that_never_reaches_a_ring_still_closes_the_fd() {
    let _g = lock();
    let dir = TempDir::new("fs-test", "close-no-runtime");
    let path = dir.join("f");
    std::fs::write(&path, b"x").unwrap();
    let file = File::from_std(std::fs::File::open(&path).unwrap());
    let raw = file.as_raw_fd();
    let before = fd_count();
    // Polled with no runtime on the thread the close op cannot be submitted: it must close
    // the fd itself (and report success), not leak it.
    let fut = file.close();
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(res) => res.expect("close(2) of an open fd succeeds"),
        Poll::Pending => panic!("a close outside a runtime cannot wait for a ring"),
    }
    assert_eq!(fd_count(), before - 1, "fd {raw} is closed");
}

#[test]
fn close_op_dropped_before_it_is_polled_still_closes_the_fd() {
    let _g = lock();
    let dir = TempDir::new("fs-test", "close-unpolled");
    let path = dir.join("f");
    std::fs::write(&path, b"x").unwrap();
    let fd = std::os::fd::OwnedFd::from(std::fs::File::open(&path).unwrap());
    let before = fd_count();
    let op = hoop::driver::Op::new(hoop::driver::op::Close::new(fd));
    assert_eq!(fd_count(), before, "the op owns the fd, still open");
    drop(op);
    assert_eq!(fd_count(), before - 1, "dropping the op closed the fd");
}
