//! First checks of the runtime core: nops, timers, spawn, TCP round trip — on each driver.

use hoop_test_support as common;

use std::time::{Duration, Instant};

use common::{each_driver, runtime};
use hoop::driver::{op, Op};

#[test]
fn nop_batch_completes() {
    each_driver(|kind| {
        let rt = runtime(kind);
        rt.block_on(async {
            for _ in 0..100 {
                let ops: Vec<_> = (0..32).map(|_| Op::new(op::Nop)).collect();
                for o in ops {
                    o.await.unwrap();
                }
            }
        });
        let c = rt.counters();
        assert!(c.cqes_reaped >= 3200, "{c:?}");
    });
}

#[test]
fn sleep_waits() {
    each_driver(|kind| {
        let rt = runtime(kind);
        let t = Instant::now();
        rt.block_on(hoop::time::sleep(Duration::from_millis(30)));
        assert!(t.elapsed() >= Duration::from_millis(30));
    });
}

#[test]
fn timeout_elapses_and_passes() {
    each_driver(|kind| {
        let rt = runtime(kind);
        rt.block_on(async {
            let r = hoop::time::timeout(
                Duration::from_millis(10),
                hoop::time::sleep(Duration::from_secs(5)),
            )
            .await;
            assert!(r.is_err());
            let r = hoop::time::timeout(Duration::from_secs(5), async { 7 }).await;
            assert_eq!(r.unwrap(), 7);
        });
    });
}

#[test]
fn spawn_and_join() {
    each_driver(|kind| {
        let rt = runtime(kind);
        let v = rt.block_on(async {
            let hs: Vec<_> = (0..100u64)
                .map(|i| hoop::spawn(async move { i * 2 }))
                .collect();
            let mut sum = 0;
            for h in hs {
                sum += h.await.unwrap();
            }
            sum
        });
        assert_eq!(v, 9900);
    });
}

#[test]
fn tcp_round_trip() {
    each_driver(|kind| {
        let rt = runtime(kind);
        rt.block_on(async {
            hoop::time::timeout(Duration::from_secs(30), async {
                let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let l = std::rc::Rc::new(l);
                // A pair a reset ended: the round trip again on a new one.
                common::resets::retry_async("a round trip", |_| async {
                    let server = hoop::spawn({
                        let l = l.clone();
                        async move {
                            let (s, _) = l.accept().await?;
                            let (res, buf) = s.read(Vec::with_capacity(64)).await;
                            let n = res?;
                            assert_eq!(n, buf.len());
                            let (res, _) = s.write_all(buf).await;
                            res
                        }
                    });
                    let c = hoop::net::TcpStream::connect(addr).await?;
                    let (res, _) = c.write_all(b"hello hoop".to_vec()).await;
                    res?;
                    let (res, buf) = c.read_exact(vec![0u8; 10]).await;
                    res?;
                    assert_eq!(&buf[..], b"hello hoop");
                    server.await.unwrap()
                })
                .await;
            })
            .await
            .expect("tcp round trip timed out");
        });
    });
}

/// The harness itself: a test runs on both drivers, in order, and a failure names its driver.
#[test]
fn each_driver_runs_both_and_names_the_failing_one() {
    let mut seen = Vec::new();
    each_driver(|kind| {
        let rt = runtime(kind);
        seen.push(rt.block_on(async { hoop::runtime::current_driver() }));
    });
    if hoop::__private::uring_unavailable().is_none() {
        assert_eq!(
            seen,
            [
                Some(common::DriverKind::Uring),
                Some(common::DriverKind::Epoll)
            ]
        );
    } else {
        assert_eq!(seen, [Some(common::DriverKind::Epoll)]);
    }

    let panic = std::panic::catch_unwind(|| {
        each_driver(|kind| assert_ne!(kind, common::DriverKind::Epoll, "deliberate"));
    })
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.starts_with("driver=Epoll: "), "{msg}");
    assert!(msg.contains("deliberate"), "{msg}");
}
