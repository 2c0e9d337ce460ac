//! First checks of the runtime core: nops, timers, spawn, TCP round trip.

use std::time::{Duration, Instant};

use hoop::driver::{op, Op};

#[test]
fn nop_batch_completes() {
    let rt = hoop::Runtime::new().unwrap();
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
}

#[test]
fn sleep_waits() {
    let rt = hoop::Runtime::new().unwrap();
    let t = Instant::now();
    rt.block_on(hoop::time::sleep(Duration::from_millis(30)));
    assert!(t.elapsed() >= Duration::from_millis(30));
}

#[test]
fn timeout_elapses_and_passes() {
    let rt = hoop::Runtime::new().unwrap();
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
}

#[test]
fn spawn_and_join() {
    let rt = hoop::Runtime::new().unwrap();
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
}

#[test]
fn tcp_round_trip() {
    let rt = hoop::Runtime::new().unwrap();
    rt.block_on(async {
        let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = hoop::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let (res, buf) = s.read(Vec::with_capacity(64)).await;
            let n = res.unwrap();
            assert_eq!(n, buf.len());
            let (res, _) = s.write_all(buf).await;
            res.unwrap();
        });
        let c = hoop::net::TcpStream::connect(addr).await.unwrap();
        let (res, _) = c.write_all(b"hello hoop".to_vec()).await;
        res.unwrap();
        let (res, buf) = c.read_exact(Vec::with_capacity(10)).await;
        res.unwrap();
        assert_eq!(&buf[..], b"hello hoop");
        server.await.unwrap();
    });
}
