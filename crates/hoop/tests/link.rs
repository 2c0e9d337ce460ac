//! Linked operations: per-operation deadlines (`IORING_OP_LINK_TIMEOUT`, the timer
//! heap on epoll) and chains (`IOSQE_IO_LINK`, sequential on epoll), on both drivers.

use common::{each_driver, pipe};
use hoop_test_support as common;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use hoop::driver::{link, op, Op};
use hoop::DriverKind;

fn rt(kind: DriverKind) -> hoop::Runtime {
    common::runtime(kind)
}

/// The deadline fires: a read that never gets data fails with TimedOut, and its buffer comes
/// back.
#[test]
fn link_timeout_fires() {
    each_driver(|kind| {
        let (r, _w) = pipe();
        let fd = r.as_raw_fd();
        rt(kind).block_on(async move {
            let t = Instant::now();
            let read = op::Read::new(fd, vec![0u8; 64], u64::MAX);
            let (res, buf) = Op::new(op::Deadline::new(read, Duration::from_millis(30))).await;
            let e = res.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "driver={kind}: {e}");
            assert!(t.elapsed() >= Duration::from_millis(25), "driver={kind}");
            assert_eq!(buf.capacity(), 64);
        });
    });
}

/// The deadline does not fire: the operation's result arrives untouched, and the runtime
/// keeps working (the timeout's own completion is accounted for).
#[test]
fn link_timeout_does_not_fire() {
    each_driver(|kind| {
        let (r, w) = pipe();
        let (rfd, wfd) = (r.as_raw_fd(), w.as_raw_fd());
        let runtime = rt(kind);
        runtime.block_on(async move {
            for i in 0..100u8 {
                let (res, _) = Op::new(op::Write::new(wfd, vec![i; 3], u64::MAX)).await;
                assert_eq!(res.unwrap(), 3);
                let read = op::Read::new(rfd, Vec::with_capacity(3), u64::MAX);
                let (res, buf) = Op::new(op::Deadline::new(read, Duration::from_secs(5))).await;
                assert_eq!(res.unwrap(), 3, "driver={kind}");
                assert_eq!(buf, vec![i; 3]);
            }
            hoop::time::sleep(Duration::from_millis(5)).await;
        });
        let c = runtime.counters();
        assert_eq!(c.stale_cqes, 0, "driver={kind}: {c:?}");
    });
}

/// A chain: write then fsync, both run, in order, from one submission on io_uring.
#[test]
fn chain_write_then_fsync() {
    each_driver(|kind| {
        let path = std::env::temp_dir().join(format!("hoop-link-{}-{kind}", std::process::id()));
        let runtime = rt(kind);
        let p = path.clone();
        runtime.block_on(async move {
            let f = hoop::fs::File::create(&p).await.unwrap();
            let fd = f.as_raw_fd();
            let (write, sync) = link(
                op::Write::new(fd, b"linked bytes".to_vec(), 0),
                op::Fsync::new(fd, false),
            )
            .await;
            assert_eq!(write.0.unwrap(), 12, "driver={kind}");
            sync.unwrap();
            f.close().await.unwrap();
        });
        assert_eq!(std::fs::read(&path).unwrap(), b"linked bytes");
        std::fs::remove_file(&path).unwrap();
    });
}

/// A chain whose first part fails: the second does not run (ECANCELED).
#[test]
fn chain_stops_after_a_failure() {
    each_driver(|kind| {
        let (r, w) = pipe();
        let wfd = w.as_raw_fd();
        drop(r);
        rt(kind).block_on(async move {
            // Writing to a pipe with no reader fails (EPIPE); the linked write must not run.
            let (first, second) = link(
                op::Write::new(wfd, b"x".to_vec(), u64::MAX),
                op::Write::new(wfd, b"y".to_vec(), u64::MAX),
            )
            .await;
            assert!(first.0.is_err(), "driver={kind}");
            let e = second.0.unwrap_err();
            assert_eq!(
                e.raw_os_error(),
                Some(libc::ECANCELED),
                "driver={kind}: {e}"
            );
        });
    });
}

/// A dropped chain cancels both parts and releases their data.
#[test]
fn dropped_chain_is_cancelled() {
    each_driver(|kind| {
        let (r, w) = pipe();
        let (rfd, wfd) = (r.as_raw_fd(), w.as_raw_fd());
        let runtime = rt(kind);
        runtime.block_on(async move {
            for _ in 0..50 {
                let chain = link(
                    op::Read::new(rfd, vec![0u8; 16], u64::MAX),
                    op::Write::new(wfd, b"after".to_vec(), u64::MAX),
                );
                let r = hoop::time::timeout(Duration::from_millis(1), chain).await;
                assert!(
                    r.is_err(),
                    "driver={kind}: nothing was written, the read must wait"
                );
            }
            hoop::time::sleep(Duration::from_millis(10)).await;
            // No linked write ran: the pipe is empty.
            let (res, _) = Op::new(op::Deadline::new(
                op::Read::new(rfd, vec![0u8; 16], u64::MAX),
                Duration::from_millis(20),
            ))
            .await;
            assert_eq!(
                res.unwrap_err().kind(),
                std::io::ErrorKind::TimedOut,
                "driver={kind}: a cancelled chain's second part ran"
            );
        });
        assert_eq!(runtime.counters().stale_cqes, 0);
    });
}
