//! The executor's rules under the loads apps put on it, on io_uring and on epoll
//! (`#[hoop::test]`, so also under CI's fault plans): a task that is always ready starves
//! neither I/O nor timers; a storm of wakes from other threads loses, repeats and reorders no
//! message; a write per message wrapped in `timeout`, from many tasks woken by one broadcast,
//! loses and duplicates nothing.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::io::AsyncWriteExt;
use hoop::net::{TcpListener, TcpStream};
use hoop::time::{sleep, timeout};
use hoop_test_support::resets;

/// A bound on each part, so a starved or lost wake fails the test instead of hanging it (not
/// a speed check: each part takes milliseconds).
const LIMIT: Duration = Duration::from_secs(30);

/// Always ready: every poll wakes the task again, until `stop`.
struct Spinner {
    stop: Rc<Cell<bool>>,
    polls: Rc<Cell<u64>>,
}

impl Future for Spinner {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.stop.get() {
            return Poll::Ready(());
        }
        self.polls.set(self.polls.get() + 1);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// One round trip over a new loopback TCP connection between two tasks of this runtime, with
/// the owned-buffer calls, each of which ends when the kernel took or gave its bytes (so an
/// injected reset ends the exchange on both sides, and the caller starts over).
async fn round_trip(n: u64) -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = hoop::spawn(async move {
        let (s, _) = listener.accept().await?;
        let (res, buf) = s.read_exact(vec![0u8; 8]).await;
        res?;
        s.write_all(buf).await.0
    });
    let c = TcpStream::connect(addr).await?;
    c.write_all(n.to_le_bytes().to_vec()).await.0?;
    let (res, buf) = c.read_exact(vec![0u8; 8]).await;
    res?;
    assert_eq!(
        buf[..],
        n.to_le_bytes(),
        "round trip {n} got another's bytes"
    );
    server.await.expect("the echo task")
}

/// Four tasks that are ready on every poll run beside timers and socket I/O: the sleeps end,
/// the round trips complete, and the spinners keep running meanwhile (the loop turns the
/// driver between batches however many tasks stay ready).
#[hoop::test]
async fn an_always_ready_task_starves_neither_io_nor_timers() {
    let stop = Rc::new(Cell::new(false));
    let polls = Rc::new(Cell::new(0));
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            hoop::spawn(Spinner {
                stop: stop.clone(),
                polls: polls.clone(),
            })
        })
        .collect();
    let before = polls.get();
    let timers = timeout(LIMIT, async {
        for _ in 0..20 {
            sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(
        timers.is_ok(),
        "20 sleeps of 1 ms did not end beside ready tasks"
    );
    let io = timeout(LIMIT, async {
        for n in 0..20 {
            resets::retry_async("a round trip beside ready tasks", |_| round_trip(n)).await;
        }
    })
    .await;
    assert!(io.is_ok(), "20 round trips did not end beside ready tasks");
    assert!(
        polls.get() - before >= 20,
        "the ready tasks did not run meanwhile ({} polls)",
        polls.get() - before
    );
    stop.set(true);
    for s in spinners {
        s.await.expect("a spinner");
    }
}

/// 64 tasks each receive numbered messages from 4 threads through bounded channels (each
/// send from a thread wakes a task here, each receive here wakes a thread blocked on a full
/// channel): every task gets each thread's messages once, in order, and all of them.
#[hoop::test]
async fn a_storm_of_wakes_from_other_threads_loses_none() {
    const TASKS: usize = 64;
    const THREADS: usize = 4;
    const MESSAGES: u32 = 500;
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(usize, u32)>(4);
        senders.push(tx);
        tasks.push(hoop::spawn(async move {
            let mut next = [0u32; THREADS];
            while let Some((thread, n)) = rx.recv().await {
                assert_eq!(
                    n, next[thread],
                    "thread {thread}'s messages lost, repeated or out of order"
                );
                next[thread] += 1;
            }
            next
        }));
    }
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let senders = senders.clone();
            hoop_test_support::spawn(move || {
                for n in 0..MESSAGES {
                    for tx in &senders {
                        tx.blocking_send((t, n)).expect("the task is receiving");
                    }
                }
            })
        })
        .collect();
    drop(senders);
    let all = timeout(LIMIT, async {
        let mut counts = Vec::new();
        for task in tasks {
            counts.push(task.await.expect("a receiving task"));
        }
        counts
    })
    .await
    .expect("every message delivered");
    for (i, next) in all.iter().enumerate() {
        assert_eq!(next, &[MESSAGES; THREADS], "task {i}'s count");
    }
    for t in threads {
        t.join().expect("a sending thread");
    }
}

/// The broadcast case: `CLIENTS` connections, each with a writer task woken by one
/// `tokio::sync::broadcast` channel, writing every line through the trait's `write_all` inside
/// `timeout` (the tokio way); each client, a plain thread, reads every line and checks their
/// numbers. Without injected resets every client gets every line; with them, a connection may
/// end early (its writer or its last write-behind got the reset), and what came before the end
/// is still each line once, in order.
#[hoop::test]
async fn timeout_wrapped_writes_from_a_broadcast_lose_and_duplicate_nothing() {
    const CLIENTS: usize = 16;
    const LINES: usize = 300;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            hoop_test_support::spawn(move || -> io::Result<()> {
                use std::io::{BufRead, BufReader};
                let s = std::net::TcpStream::connect(addr)?;
                s.set_read_timeout(Some(LIMIT))?;
                let mut reader = BufReader::new(s);
                let mut line = String::new();
                for want in 0..LINES {
                    line.clear();
                    reader.read_line(&mut line)?;
                    // A line cut by the end of the stream is the connection's end, not a line.
                    let Some(whole) = line.strip_suffix('\n') else {
                        return Err(resets::closed_early("every line"));
                    };
                    let n: usize = whole
                        .split(' ')
                        .nth(1)
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("a line not sent: {whole:?}"));
                    assert_eq!(n, want, "a line lost, repeated or out of order");
                }
                Ok(())
            })
        })
        .collect();
    let (tx, _) = tokio::sync::broadcast::channel::<Rc<str>>(LINES);
    let mut writers = Vec::new();
    for _ in 0..CLIENTS {
        let (stream, _) = listener.accept().await.expect("every client accepted");
        let (_rd, mut wr) = stream.into_split();
        let mut rx = tx.subscribe();
        writers.push(hoop::spawn(async move {
            for _ in 0..LINES {
                let line = rx
                    .recv()
                    .await
                    .expect("no line skipped (the channel holds them all)");
                let write = AsyncWriteExt::write_all(&mut wr, line.as_bytes());
                match timeout(LIMIT, write).await {
                    Ok(res) => res?,
                    Err(_) => panic!("a write of one line took {LIMIT:?}"),
                }
            }
            Ok::<_, io::Error>(())
        }));
    }
    // Sent in bursts, with the writers woken between them and while their writes wait.
    let padding = "x".repeat(200);
    for i in 0..LINES {
        let _ = tx.send(Rc::from(format!("line {i} {padding}\n")));
        if i % 10 == 9 {
            hoop::yield_now().await;
        }
    }
    for w in writers {
        if let Err(e) = w.await.expect("a writer task") {
            resets::expect_reset("a writer", &e);
        }
    }
    for c in clients {
        // Joined off the loop: a client may still be reading what the loop has to send.
        let joined = hoop::spawn_blocking(move || c.join()).await;
        if let Err(e) = joined.expect("the pool").expect("a client thread") {
            resets::expect_reset("a client", &e);
        }
    }
}
