//! The thread-per-core runtime from other threads: `Handle::spawn` from
//! many threads, both wake paths (MSG_RING and the eventfd), spawns before `block_on` and after
//! the runtime is gone, `spawn_blocking` (bounded pool, panics, keep-alive, from a `Handle`),
//! and `TcpStream::connect` with a host name. Every test runs on io_uring and epoll.

use hoop_test_support as common;
use hoop_test_support::block_on;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{bounded, builder, each_driver, runtime, skip};
use hoop::net::{TcpListener, TcpStream};
use hoop::runtime::WakePath;
use hoop::time::{sleep, timeout};
use hoop::{DriverKind, Handle};

const LIMIT: Duration = Duration::from_secs(30);

/// Whether this kernel posts a MSG_RING message without a source ring (6.13+).
fn kernel_has_sync_msg() -> bool {
    hoop::driver::setup::kernel_at_least(6, 13)
}

/// 8 threads x `per_thread` spawns through `handle`; every task runs on the runtime's thread
/// and every result comes back to the thread that spawned it.
async fn many_threads_spawn(handle: Handle, per_thread: u64) {
    let runtime_thread = std::thread::current().id();
    let mut done = Vec::new();
    for t in 0..8u64 {
        let handle = handle.clone();
        let (tx, rx) = futures::channel::oneshot::channel();
        std::thread::spawn(move || {
            let handles: Vec<_> = (0..per_thread)
                .map(|i| {
                    let n = t * per_thread + i;
                    handle.spawn(async move {
                        assert_eq!(std::thread::current().id(), runtime_thread);
                        if n.is_multiple_of(7) {
                            hoop::yield_now().await;
                        }
                        n * 2
                    })
                })
                .collect();
            let mut checked = 0u64;
            for (i, h) in handles.into_iter().enumerate() {
                let v = block_on(h).expect("remote task failed");
                assert_eq!(v, (t * per_thread + i as u64) * 2);
                checked += 1;
            }
            let _ = tx.send(checked);
        });
        done.push(rx);
    }
    let mut total = 0;
    for rx in done {
        total += rx.await.expect("a spawning thread panicked");
    }
    assert_eq!(total, 8 * per_thread);
}

#[hoop::test]
async fn spawn_from_8_threads_x_1000() {
    timeout(LIMIT, many_threads_spawn(Handle::current(), 1000))
        .await
        .expect("remote spawns did not finish in time");
}

#[test]
fn wake_paths_both_carry_remote_spawns() {
    bounded(60, || {
        each_driver(|kind| {
            for msg_ring in [true, false] {
                let rt = builder(kind).msg_ring_wake(msg_ring).build().unwrap();
                let path = rt.handle().wake_path();
                match kind {
                    DriverKind::Uring if msg_ring && kernel_has_sync_msg() => {
                        assert_eq!(path, WakePath::MsgRing)
                    }
                    DriverKind::Uring if msg_ring => {
                        skip(
                            kind,
                            "no IORING_REGISTER_SEND_MSG_RING before 6.13: eventfd",
                        );
                        assert_eq!(path, WakePath::EventFd)
                    }
                    _ => assert_eq!(path, WakePath::EventFd),
                }
                rt.block_on(async {
                    timeout(LIMIT, many_threads_spawn(Handle::current(), 200))
                        .await
                        .unwrap_or_else(|_| panic!("driver={kind} {path:?}: remote spawns hung"));
                });
            }
        })
    });
}

#[test]
fn remote_spawn_wakes_an_idle_runtime_on_its_thread() {
    bounded(60, || {
        each_driver(|kind| {
            let (tx, rx) = mpsc::channel();
            let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
            let runner = std::thread::spawn(move || {
                let rt = runtime(kind);
                tx.send(rt.handle()).unwrap();
                // Idle in the kernel until the stop message comes from another thread.
                rt.block_on(async {
                    let _ = stop_rx.await;
                });
            });
            let handle = rx.recv().unwrap();
            for i in 0..100u32 {
                let h = handle.spawn(async move { i + 1 });
                assert_eq!(block_on(h).unwrap(), i + 1);
            }
            // A remote task's result awaited by another hoop runtime.
            let other = runtime(kind);
            let v = other.block_on(async {
                let h = handle.spawn(async {
                    sleep(Duration::from_millis(2)).await;
                    "slept"
                });
                h.await.unwrap()
            });
            assert_eq!(v, "slept");
            stop_tx.send(()).unwrap();
            runner.join().unwrap();
        })
    });
}

#[test]
fn spawn_before_block_on_is_queued_until_it_runs() {
    bounded(60, || {
        each_driver(|kind| {
            let rt = runtime(kind);
            let handle = rt.handle();
            let h = std::thread::spawn(move || handle.spawn(async { 41 + 1 }))
                .join()
                .unwrap();
            assert!(!h.is_finished(), "driver={kind}: ran without a block_on");
            assert_eq!(rt.block_on(h).unwrap(), 42);
        })
    });
}

/// Sets its flag when dropped (to see that a refused future is dropped, not leaked).
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn spawn_after_the_runtime_is_gone_resolves_cancelled() {
    bounded(60, || {
        each_driver(|kind| {
            let rt = runtime(kind);
            let handle = rt.handle();
            // Queued but never run: dropped with the runtime.
            let queued_dropped = Arc::new(AtomicBool::new(false));
            let flag = DropFlag(queued_dropped.clone());
            let queued = handle.spawn(async move {
                let _flag = flag;
                1
            });
            // Running (pending) when the runtime shuts down.
            let running_dropped = Arc::new(AtomicBool::new(false));
            let flag = DropFlag(running_dropped.clone());
            let running = handle.spawn(async move {
                let _flag = flag;
                std::future::pending::<()>().await;
            });
            rt.block_on(async {
                // Let the remote spawns become tasks and start.
                for _ in 0..4 {
                    hoop::yield_now().await;
                }
            });
            let still_queued = handle.spawn(async { 3 });
            drop(rt);
            assert!(running_dropped.load(Ordering::SeqCst));
            assert!(block_on(running).unwrap_err().is_cancelled());
            assert_eq!(block_on(queued).unwrap(), 1);
            assert!(queued_dropped.load(Ordering::SeqCst));
            assert!(block_on(still_queued).unwrap_err().is_cancelled());

            // After the drop: refused at once, the future dropped on this thread.
            let late_dropped = Arc::new(AtomicBool::new(false));
            let flag = DropFlag(late_dropped.clone());
            let late = handle.spawn(async move {
                let _flag = flag;
                2
            });
            assert!(late_dropped.load(Ordering::SeqCst));
            assert!(late.is_finished());
            assert!(block_on(late).unwrap_err().is_cancelled());
            let blocking = handle.spawn_blocking(|| 5);
            assert!(block_on(blocking).unwrap_err().is_cancelled());
        })
    });
}

#[hoop::test]
async fn remote_task_panic_and_abort_are_join_errors() {
    let handle = Handle::current();
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::spawn(move || {
        let panicked = block_on(handle.spawn(async {
            if std::hint::black_box(true) {
                panic!("remote boom");
            }
        }));
        let aborted = handle.spawn(std::future::pending::<()>());
        aborted.abort();
        let aborted = block_on(aborted);
        let _ = tx.send((panicked, aborted));
    });
    let (panicked, aborted) = timeout(LIMIT, rx).await.unwrap().unwrap();
    let e = panicked.unwrap_err();
    assert!(e.is_panic() && e.to_string().contains("remote boom"), "{e}");
    assert!(aborted.unwrap_err().is_cancelled());
    // The runtime goes on.
    assert_eq!(hoop::spawn(async { 7 }).await.unwrap(), 7);
}

#[hoop::test]
async fn spawn_blocking_does_not_block_the_ring_thread() {
    // The blocking call waits for a value that only a task of this runtime sends: if the
    // runtime's thread were blocked in the call, this would hang (and the timeout fail).
    let (tx, rx) = mpsc::channel::<u32>();
    let call = hoop::spawn_blocking(move || rx.recv().map(|v| v * 3));
    let sender = hoop::spawn(async move {
        sleep(Duration::from_millis(5)).await;
        tx.send(14).unwrap();
    });
    let v = timeout(LIMIT, call).await.unwrap().unwrap().unwrap();
    assert_eq!(v, 42);
    sender.await.unwrap();

    // A panic becomes a JoinError; the runtime goes on.
    let e = hoop::spawn_blocking(|| {
        if std::hint::black_box(true) {
            panic!("blocking boom");
        }
    })
    .await
    .unwrap_err();
    assert!(
        e.is_panic() && e.to_string().contains("blocking boom"),
        "{e}"
    );
    assert_eq!(hoop::spawn_blocking(|| 1).await.unwrap(), 1);
}

#[test]
fn blocking_pool_is_bounded_and_idle_threads_exit() {
    bounded(60, || {
        each_driver(|kind| {
            let rt = builder(kind)
                .max_blocking_threads(2)
                .blocking_keep_alive(Duration::from_millis(50))
                .build()
                .unwrap();
            let handle = rt.handle();
            rt.block_on(async {
                let now = Arc::new(AtomicUsize::new(0));
                let peak = Arc::new(Mutex::new(0usize));
                let calls: Vec<_> = (0..8usize)
                    .map(|i| {
                        let (now, peak) = (now.clone(), peak.clone());
                        hoop::spawn_blocking(move || {
                            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                            {
                                let mut p = peak.lock().unwrap();
                                *p = (*p).max(n);
                            }
                            std::thread::sleep(Duration::from_millis(5));
                            now.fetch_sub(1, Ordering::SeqCst);
                            i * 10
                        })
                    })
                    .collect();
                assert!(handle.blocking_threads() <= 2);
                for (i, c) in calls.into_iter().enumerate() {
                    assert_eq!(timeout(LIMIT, c).await.unwrap().unwrap(), i * 10);
                }
                let peak = *peak.lock().unwrap();
                assert!(
                    (1..=2).contains(&peak),
                    "driver={kind}: {peak} calls at once"
                );
                // Idle threads exit after the keep-alive (bounded wait: 10 s).
                for _ in 0..1000 {
                    if handle.blocking_threads() == 0 {
                        break;
                    }
                    sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(handle.blocking_threads(), 0, "driver={kind}");
            });
        })
    });
}

#[test]
fn spawn_blocking_from_a_handle_on_another_thread() {
    bounded(60, || {
        each_driver(|kind| {
            let rt = builder(kind).max_blocking_threads(3).build().unwrap();
            let handle = rt.handle();
            let results = std::thread::spawn(move || {
                let calls: Vec<_> = (0..20u64)
                    .map(|i| handle.spawn_blocking(move || i * i))
                    .collect();
                calls
                    .into_iter()
                    .map(|c| block_on(c).unwrap())
                    .collect::<Vec<_>>()
            })
            .join()
            .unwrap();
            assert_eq!(results, (0..20u64).map(|i| i * i).collect::<Vec<_>>());
            drop(rt);
        })
    });
}

#[hoop::test]
async fn connect_resolves_a_host_name_on_the_pool() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = Handle::current();

    // A literal address takes no pool trip (this test's runtime has started no thread yet).
    let literal = TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    let (_a, _) = listener.accept().await.unwrap();
    assert_eq!(
        handle.blocking_threads(),
        0,
        "a literal address used the pool"
    );
    drop(literal);

    // A host name is resolved on the pool (which then has a thread, kept alive 10 s).
    // "localhost" may resolve to ::1 first: connect tries each address in turn.
    let named = timeout(LIMIT, TcpStream::connect(format!("localhost:{port}")))
        .await
        .unwrap()
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    assert!(
        handle.blocking_threads() >= 1,
        "the host name was not resolved on the pool"
    );
    assert_eq!(
        named.peer_addr().unwrap(),
        server.local_addr().unwrap(),
        "connected to the wrong listener"
    );
    let named2 = TcpStream::connect(("localhost", port)).await.unwrap();
    let _ = listener.accept().await.unwrap();
    drop(named2);
    let named3 = TcpStream::connect_timeout(format!("localhost:{port}"), LIMIT)
        .await
        .unwrap();
    let _ = listener.accept().await.unwrap();
    drop(named3);

    // A bad address is an error from the pool, not a hang or a panic (no DNS query: the port
    // is refused before any lookup, so this needs no network).
    let e = TcpStream::connect("localhost:no-port").await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
}

#[test]
fn remote_spawns_reach_an_sqpoll_ring() {
    bounded(60, || {
        each_driver(|kind| {
            if kind == DriverKind::Epoll {
                skip(kind, "SQPOLL is an io_uring setup flag");
                return;
            }
            let rt = builder(kind)
                .sqpoll(Duration::from_millis(5))
                .build()
                .unwrap();
            rt.block_on(async {
                // Long enough idle for the SQ thread to sleep between the spawns.
                sleep(Duration::from_millis(20)).await;
                timeout(LIMIT, many_threads_spawn(Handle::current(), 100))
                    .await
                    .expect("remote spawns on an SQPOLL ring hung");
            });
        })
    });
}
