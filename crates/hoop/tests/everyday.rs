//! The everyday pieces: `JoinSet`, `interval` (with tokio's missed-tick behaviours),
//! `sleep_until`, `select!`/`join!`, and `JoinError` into `io::Error`. Each runs on io_uring
//! and on epoll (`#[hoop::test]`). Time is only asserted as lower bounds and schedules (the
//! deadlines an interval returns), never as speed.

use std::io;
use std::time::Duration;

use hoop::task::{JoinError, JoinSet};
use hoop::time::{interval, interval_at, sleep, sleep_until, timeout, Instant, MissedTickBehavior};

const LIMIT: Duration = Duration::from_secs(20);

#[hoop::test]
async fn join_set_returns_outputs_as_tasks_finish() {
    let mut set = JoinSet::new();
    for i in 0..5u64 {
        set.spawn(async move {
            sleep(Duration::from_millis(5 * (5 - i))).await;
            i
        });
    }
    assert_eq!(set.len(), 5);
    let mut order = Vec::new();
    while let Some(res) = timeout(LIMIT, set.join_next()).await.unwrap() {
        order.push(res.unwrap());
    }
    assert_eq!(order, vec![4, 3, 2, 1, 0], "shortest sleep first");
    assert!(set.is_empty());
    assert!(set.join_next().await.is_none());
}

#[hoop::test]
async fn join_set_abort_panic_and_drop() {
    let mut set = JoinSet::new();
    let pending = set.spawn(async { std::future::pending::<u32>().await });
    set.spawn(async { panic!("boom") });
    set.spawn(async { 7u32 });
    assert!(!pending.is_finished());
    let (mut ok, mut panicked) = (0, 0);
    for _ in 0..2 {
        match timeout(LIMIT, set.join_next()).await.unwrap().unwrap() {
            Ok(v) => {
                assert_eq!(v, 7);
                ok += 1;
            }
            Err(e) => {
                assert!(e.is_panic());
                assert!(e.to_string().contains("boom"), "{e}");
                panicked += 1;
            }
        }
    }
    assert_eq!((ok, panicked), (1, 1));
    pending.abort();
    let e = set.join_next().await.unwrap().unwrap_err();
    assert!(e.is_cancelled());
    assert!(pending.is_finished());
    set.abort_all();
    assert!(set.try_join_next().is_none());

    // Dropping a set aborts what is in it: the task's future is dropped (its guard runs).
    struct Flag(std::rc::Rc<std::cell::Cell<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let dropped = std::rc::Rc::new(std::cell::Cell::new(false));
    let mut set = JoinSet::new();
    let flag = Flag(dropped.clone());
    set.spawn(async move {
        let _flag = flag;
        std::future::pending::<()>().await
    });
    hoop::yield_now().await;
    drop(set);
    for _ in 0..4 {
        hoop::yield_now().await;
    }
    assert!(dropped.get(), "the aborted task's future was dropped");

    let set: JoinSet<u8> = JoinSet::new();
    assert!(set.join_all().await.is_empty());
}

#[hoop::test]
async fn join_error_is_send_sync_and_an_io_error() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<JoinError>();
    async fn run() -> io::Result<u32> {
        let v = hoop::spawn(async { 5u32 }).await?;
        let e = hoop::spawn(async { panic!("kaput") }).await;
        let e: io::Error = e.map(|()| 0u32).unwrap_err().into();
        assert!(e.to_string().contains("kaput"), "{e}");
        let h = hoop::spawn(std::future::pending::<u32>());
        h.abort();
        let w = h.await?;
        Ok(v + w)
    }
    let e = run().await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Other);
    assert_eq!(e.to_string(), "task was cancelled");
}

/// The first tick is immediate; later ones keep the schedule `start + k * period`.
#[hoop::test]
async fn interval_ticks_on_schedule() {
    let period = Duration::from_millis(15);
    let mut every = interval(period);
    let t0 = timeout(LIMIT, every.tick()).await.unwrap();
    assert!(t0.elapsed() < LIMIT);
    for k in 1..4u32 {
        let t = timeout(LIMIT, every.tick()).await.unwrap();
        assert_eq!(t, t0 + period * k);
        assert!(Instant::now() >= t, "never before its deadline");
    }
    assert_eq!(every.missed_tick_behavior(), MissedTickBehavior::Burst);
    assert_eq!(every.period(), period);
}

/// A busy task misses ticks: Burst returns every missed deadline, Delay shifts the schedule,
/// Skip jumps to the next deadline of the original schedule.
#[hoop::test]
async fn interval_missed_tick_behaviours() {
    let period = Duration::from_millis(10);
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        let start = Instant::now();
        let mut every = interval_at(start, period);
        every.set_missed_tick_behavior(behavior);
        assert_eq!(every.tick().await, start);
        // Busy for 3.5 periods: the tick at start + 10 ms is late.
        std::thread::sleep(Duration::from_millis(35));
        let late = every.tick().await;
        assert_eq!(
            late,
            start + period,
            "{behavior:?}: the missed tick comes first"
        );
        let after = Instant::now();
        let next = timeout(LIMIT, every.tick()).await.unwrap();
        match behavior {
            MissedTickBehavior::Burst => assert_eq!(next, start + 2 * period),
            MissedTickBehavior::Delay => {
                assert!(
                    next >= after + period - Duration::from_millis(1),
                    "{behavior:?}"
                );
            }
            MissedTickBehavior::Skip => {
                let k = (next - start).as_nanos() / period.as_nanos();
                assert_eq!((next - start).as_nanos() % period.as_nanos(), 0);
                assert!(k >= 4, "{behavior:?}: skipped to tick {k}");
            }
        }
    }
}

#[hoop::test]
async fn sleep_until_and_reset() {
    let at = Instant::now() + Duration::from_millis(20);
    timeout(LIMIT, sleep_until(at)).await.unwrap();
    assert!(Instant::now() >= at);
    // A deadline in the past completes at once.
    timeout(LIMIT, sleep_until(Instant::now() - Duration::from_secs(1)))
        .await
        .unwrap();
    let mut every = interval(Duration::from_secs(3600));
    every.tick().await;
    let soon = Instant::now() + Duration::from_millis(5);
    every.reset_at(soon);
    assert_eq!(timeout(LIMIT, every.tick()).await.unwrap(), soon);
}

#[hoop::test]
async fn select_and_join_macros() {
    let (a, b) = hoop::join!(async { 1 }, async {
        sleep(Duration::from_millis(2)).await;
        2
    });
    assert_eq!(a + b, 3);
    let r: Result<(u8, u8), io::Error> = hoop::try_join!(async { Ok(1u8) }, async { Ok(2u8) });
    assert_eq!(r.unwrap(), (1, 2));
    // hoop::select! is tokio's: no `.fuse()`, no pinning.
    let won = hoop::select! {
        _ = sleep(Duration::from_secs(3600)) => "slow",
        _ = sleep(Duration::from_millis(2)) => "fast",
    };
    assert_eq!(won, "fast");
    // futures' own macro (a different one) takes hoop's fused types as they are.
    let mut ready = sleep(Duration::ZERO);
    let v = futures::select! { _ = ready => 9 };
    assert_eq!(v, 9);
}

/// `File::set_len` goes through the ring where the kernel has `IORING_OP_FTRUNCATE` (one SQE
/// more), through the epoll driver's pool otherwise; both grow and shrink the file, and a
/// read-only file is the kernel's error.
#[hoop::test]
async fn file_set_len_through_the_ring() {
    let path = std::env::temp_dir().join(format!(
        "hoop-set-len-{}-{:?}",
        std::process::id(),
        hoop::runtime::current_driver()
    ));
    let f = hoop::fs::File::create(&path).await.unwrap();
    let driver = hoop::driver::Driver::current().unwrap();
    let before = hoop::runtime::current_counters().unwrap().sqes_submitted;
    f.set_len(12345).await.unwrap();
    assert_eq!(f.metadata().await.unwrap().len(), 12345);
    let after = hoop::runtime::current_counters().unwrap().sqes_submitted;
    if driver.kind() == hoop::DriverKind::Uring {
        if driver.supports_opcode(hoop::driver::op::Ftruncate::OPCODE) {
            assert!(after > before, "set_len submitted an SQE");
        } else {
            hoop::__private::skip(driver.kind(), "no IORING_OP_FTRUNCATE (Linux < 6.9)");
        }
    }
    f.set_len(7).await.unwrap();
    assert_eq!(f.metadata().await.unwrap().len(), 7);
    let r = hoop::fs::File::open(&path).await.unwrap();
    let e = r.set_len(1).await.unwrap_err();
    assert!(
        matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EBADF)),
        "{e}"
    );
    let _ = std::fs::remove_file(&path);
}

/// `Incoming` is a `futures::Stream` of connections.
#[hoop::test]
async fn incoming_is_a_stream() {
    use futures::StreamExt;
    let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let clients = hoop::spawn(async move {
        for _ in 0..3 {
            let c = hoop::net::TcpStream::connect(addr).await.unwrap();
            drop(c);
        }
    });
    let got: Vec<_> = timeout(LIMIT, l.incoming().take(3).collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|c| c.is_ok()));
    clients.await.unwrap();
    // UnixListener::bind is async like TCP's and UDP's.
    let path = std::env::temp_dir().join(format!(
        "hoop-incoming-{}-{:?}.sock",
        std::process::id(),
        hoop::runtime::current_driver()
    ));
    let _ = std::fs::remove_file(&path);
    let ul = hoop::net::UnixListener::bind(&path).await.unwrap();
    drop(ul);
    let _ = std::fs::remove_file(&path);
}

/// `fs::copy` (splices through pipes, 8 chunks in flight) copies files of every shape: empty,
/// tiny, not a multiple of the chunk, several chunks.
#[hoop::test]
async fn fs_copy_sizes() {
    let dir = std::env::temp_dir();
    let tag = format!(
        "{}-{:?}",
        std::process::id(),
        hoop::runtime::current_driver()
    );
    for len in [0usize, 1, 4097, (3 << 20) + 5] {
        let src = dir.join(format!("hoop-copy-sizes-src-{tag}"));
        let dst = dir.join(format!("hoop-copy-sizes-dst-{tag}"));
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&src, &data).unwrap();
        let n = timeout(LIMIT, hoop::fs::copy(&src, &dst))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, len as u64);
        assert!(std::fs::read(&dst).unwrap() == data, "{len} bytes");
        let _ = std::fs::remove_file(&src);
        let _ = std::fs::remove_file(&dst);
    }
}
