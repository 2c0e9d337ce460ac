//! `tokio::sync` (mpsc, oneshot, Notify, Mutex) and `futures::channel` (mpsc, oneshot) on hoop
//! runtimes: across tasks of one runtime (each driver), across runtimes on plain threads (each
//! driver), and across `run_per_core` threads. None of them needs a tokio runtime.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use hoop::time::{sleep, timeout};
use hoop::DriverKind;

const LIMIT: Duration = Duration::from_secs(20);

#[hoop::test]
async fn tokio_sync_across_tasks() {
    timeout(LIMIT, async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
        let producer = hoop::spawn(async move {
            for i in 0..100 {
                tx.send(i).await.unwrap();
            }
        });
        let mut sum = 0;
        while let Some(v) = rx.recv().await {
            sum += v;
        }
        producer.await.unwrap();
        assert_eq!(sum, 4950);

        let (tx, rx) = tokio::sync::oneshot::channel();
        hoop::spawn(async move {
            sleep(Duration::from_millis(2)).await;
            let _ = tx.send("done");
        });
        assert_eq!(rx.await.unwrap(), "done");

        let notify = std::rc::Rc::new(tokio::sync::Notify::new());
        let n2 = notify.clone();
        let waiter = hoop::spawn(async move { n2.notified().await });
        hoop::yield_now().await;
        notify.notify_one();
        waiter.await.unwrap();

        let m = std::rc::Rc::new(tokio::sync::Mutex::new(0u32));
        let mut hs = Vec::new();
        for _ in 0..10 {
            let m = m.clone();
            hs.push(hoop::spawn(async move {
                for _ in 0..10 {
                    let mut g = m.lock().await;
                    let v = *g;
                    hoop::yield_now().await; // held across a yield
                    *g = v + 1;
                }
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
        assert_eq!(*m.lock().await, 100);
    })
    .await
    .expect("timed out");
}

#[hoop::test]
async fn futures_channel_across_tasks() {
    timeout(LIMIT, async {
        let (mut tx, mut rx) = futures::channel::mpsc::channel::<u32>(2);
        hoop::spawn(async move {
            for i in 0..50 {
                tx.send(i).await.unwrap();
            }
        });
        let got: Vec<u32> = (&mut rx).collect().await;
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        let (tx, rx) = futures::channel::oneshot::channel();
        hoop::spawn(async move {
            let _ = tx.send(5u8);
        });
        assert_eq!(rx.await.unwrap(), 5);
    })
    .await
    .expect("timed out");
}

/// Two runtimes of `kind` on two threads talk through every primitive.
fn across_threads(kind: DriverKind) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
    let (otx, orx) = tokio::sync::oneshot::channel::<u32>();
    let notify = Arc::new(tokio::sync::Notify::new());
    let mutex = Arc::new(tokio::sync::Mutex::new(0u32));
    let (mut ftx, mut frx) = futures::channel::mpsc::channel::<u32>(1);
    let (n2, m2) = (notify.clone(), mutex.clone());
    let other = std::thread::spawn(move || {
        let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
        rt.block_on(async move {
            for i in 0..20 {
                tx.send(i).await.unwrap();
                ftx.send(i).await.unwrap();
                *m2.lock().await += 1;
            }
            n2.notified().await;
            otx.send(99).unwrap();
        })
    });
    let rt = hoop::Runtime::builder().driver(kind).build().unwrap();
    rt.block_on(async {
        timeout(LIMIT, async {
            let mut sum = 0;
            for _ in 0..20 {
                sum += rx.recv().await.unwrap();
                sum += frx.next().await.unwrap();
            }
            assert_eq!(sum, 2 * 190);
            // notify_one stores a permit if the other thread is not waiting yet.
            notify.notify_one();
            assert_eq!(orx.await.unwrap(), 99);
            assert_eq!(*mutex.lock().await, 20);
        })
        .await
        .expect("timed out");
    });
    other.join().unwrap();
}

#[test]
fn sync_primitives_across_runtime_threads() {
    hoop::__private::each_driver(
        &[DriverKind::Uring, DriverKind::Epoll],
        false,
        across_threads,
    );
}

/// Every `run_per_core` thread sends to thread 0 over tokio's mpsc and futures' mpsc; thread 0
/// answers each over a oneshot; a `Notify` and a `Mutex` are shared by all.
#[test]
fn sync_primitives_across_run_per_core() {
    const THREADS: usize = 3;
    let (tx, rx) =
        tokio::sync::mpsc::unbounded_channel::<(usize, tokio::sync::oneshot::Sender<usize>)>();
    let (ftx, frx) = futures::channel::mpsc::unbounded::<usize>();
    let rx = Arc::new(std::sync::Mutex::new(Some((rx, frx))));
    let mutex = Arc::new(tokio::sync::Mutex::new(0usize));
    let notify = Arc::new(tokio::sync::Notify::new());
    let out = hoop::run_per_core(THREADS, move |i| {
        let (tx, ftx, rx, mutex, notify) = (
            tx.clone(),
            ftx.clone(),
            rx.clone(),
            mutex.clone(),
            notify.clone(),
        );
        async move {
            timeout(LIMIT, async move {
                if i == 0 {
                    let (mut rx, mut frx) = rx.lock().unwrap().take().unwrap();
                    drop((tx, ftx));
                    let mut seen = 0;
                    for _ in 1..THREADS {
                        let (from, reply) = rx.recv().await.unwrap();
                        reply.send(from * 10).unwrap();
                        seen += frx.next().await.unwrap();
                    }
                    assert_eq!(seen, (1..THREADS).sum::<usize>());
                    // Wait until every other thread counted itself, then release them.
                    while *mutex.lock().await < THREADS - 1 {
                        sleep(Duration::from_millis(1)).await;
                    }
                    for _ in 1..THREADS {
                        notify.notify_one();
                    }
                    0
                } else {
                    let (otx, orx) = tokio::sync::oneshot::channel();
                    tx.send((i, otx)).unwrap();
                    ftx.unbounded_send(i).unwrap();
                    let answer = orx.await.unwrap();
                    *mutex.lock().await += 1;
                    notify.notified().await;
                    answer
                }
            })
            .await
            .expect("timed out")
        }
    })
    .unwrap();
    assert_eq!(out, vec![0, 10, 20]);
}
