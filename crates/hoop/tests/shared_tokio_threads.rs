//! `hoop::shared` inside tokio's multi-thread runtime, across threads: sixty-four tasks move
//! between four workers with their operations in flight, and operations first polled on a
//! thread that then exits deliver and drop cleanly. Needs feature `tokio`. The tests count fds
//! and slots in flight, so they run one at a time (`common::serial`).

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;

use std::collections::HashSet;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::ThreadId;

use common::{poll_once, serial, shared_recv_exact, shared_send_all, wait_until};

use hoop::shared::{File, OpenOptions, TcpListener, TcpStream};

mod shared_tokio_common;
use shared_tokio_common::*;

/// A future that records the thread of each of its polls: in its own set (how many threads
/// one operation was polled on) and in its task's.
struct Tracked<F> {
    fut: F,
    threads: HashSet<ThreadId>,
    task: Arc<Mutex<HashSet<ThreadId>>>,
}

impl<F: Future + Unpin> Tracked<F> {
    fn new(fut: F, task: &Arc<Mutex<HashSet<ThreadId>>>) -> Tracked<F> {
        Tracked {
            fut,
            threads: HashSet::new(),
            task: task.clone(),
        }
    }
}

impl<F: Future + Unpin> Future for Tracked<F> {
    /// The operation's output and the number of threads it was polled on.
    type Output = (F::Output, usize);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = std::thread::current().id();
        self.threads.insert(me);
        self.task.lock().unwrap().insert(me);
        match Pin::new(&mut self.fut).poll(cx) {
            Poll::Ready(v) => Poll::Ready((v, self.threads.len())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// One task of the migration test: `ROUNDS` rounds of a file write, a file read and a TCP
/// echo on `hoop::shared`, each operation started (polled once) in one task and finished in
/// another, with yields and `block_in_place` between them. Returns how many threads the task
/// was polled on and how many of its operations were polled on more than one.
async fn migrating_task(file: File, addr: std::net::SocketAddr, t: u64) -> (usize, usize) {
    const ROUNDS: u64 = 8;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let note = || {
        seen.lock().unwrap().insert(std::thread::current().id());
    };
    let mut moved_ops = 0;
    let stream = TcpStream::connect(file.rings(), addr).await.unwrap();
    for i in 0..ROUNDS {
        note();
        let data = pattern(t * 1000 + i, 1000 + ((t * 37 + i * 101) % 3000) as usize);
        let pos = (t * ROUNDS + i) * 4096;
        // A write pushed here and finished by a new task.
        let write = poll_once(Tracked::new(file.write_at(data.clone(), pos), &seen));
        let ((res, _), threads) = tokio::spawn(finish(write)).await.unwrap();
        moved_ops += usize::from(threads > 1);
        let n = res.unwrap();
        if n < data.len() {
            let (res, _) = file.write_all_at(data[n..].to_vec(), pos + n as u64).await;
            res.unwrap();
        }
        tokio::task::yield_now().await;
        note();
        // A read pushed by a new task and finished here.
        let read = {
            let file = file.clone();
            let seen = seen.clone();
            let len = data.len();
            tokio::spawn(async move {
                poll_once(Tracked::new(
                    file.read_at(Vec::with_capacity(len), pos),
                    &seen,
                ))
            })
            .await
            .unwrap()
        };
        let ((res, mut back), threads) = finish(read).await;
        moved_ops += usize::from(threads > 1);
        let n = res.unwrap();
        back.truncate(n);
        if n < data.len() {
            let rest = vec![0u8; data.len() - n];
            let (res, rest) = file.read_exact_at(rest, pos + n as u64).await;
            res.unwrap();
            back.extend_from_slice(&rest);
        }
        assert!(back == data, "file bytes of task {t} round {i}");
        tokio::task::block_in_place(note);
        tokio::task::yield_now().await;
        note();
        // A receive started before its data exists (pending), moved through a channel to
        // another task while in flight, then the data sent (echoed back by the server).
        let mut tries = 0;
        let recv = loop {
            match poll_once(Tracked::new(stream.read(Vec::with_capacity(8192)), &seen)) {
                Err(pending) => break pending,
                // (An injected error: the receive did not run.)
                Ok(((Err(e), _), _)) if common::injected_error(&e) && tries < 100 => tries += 1,
                Ok(((res, _), _)) => panic!("a receive finished before any data was sent: {res:?}"),
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<Tracked<_>>();
        let receiver = tokio::spawn(async move { rx.await.unwrap().await });
        tx.send(recv).ok().unwrap();
        shared_send_all(&stream, &data).await;
        let ((res, buf), threads) = receiver.await.unwrap();
        moved_ops += usize::from(threads > 1);
        let mut got = match res {
            Ok(n) => buf[..n].to_vec(),
            Err(e) if common::injected_error(&e) => Vec::new(),
            Err(e) => panic!("receive of task {t} round {i}: {e}"),
        };
        assert!(got.len() <= data.len(), "more bytes than were sent");
        got.extend(shared_recv_exact(&stream, data.len() - got.len()).await);
        assert!(got == data, "echoed bytes of task {t} round {i}");
    }
    let threads = seen.lock().unwrap().len();
    (threads, moved_ops)
}

/// An echo server on `hoop::shared` sockets for `conns` connections (one task each); returns
/// when every connection has ended.
async fn shared_echo_server(listener: TcpListener, conns: usize) {
    let mut handles = Vec::new();
    for _ in 0..conns {
        let (stream, _) = listener.accept().await.unwrap();
        handles.push(tokio::spawn(async move {
            let mut retries = 0;
            loop {
                let (res, buf) = stream.read(Vec::with_capacity(8192)).await;
                match res {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if common::injected_error(&e) && retries < 1000 => {
                        retries += 1;
                        continue;
                    }
                    Err(e) => panic!("echo server receive: {e}"),
                }
                tokio::task::yield_now().await;
                shared_send_all(&stream, &buf).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

#[test]
fn sixty_four_tasks_move_between_four_workers_with_operations_in_flight() {
    let _g = serial();
    let Some(rings) = common::shared_rings(256) else {
        return;
    };
    let before = common::fd_set();
    let path = std::env::temp_dir().join(format!("hoop-shared-move-{}", std::process::id()));
    let (threads, moved_ops) = common::bounded(60, {
        let rings = rings.clone();
        let path = path.clone();
        move || {
            let rt = runtime();
            let out = rt.block_on(async {
                let listener = TcpListener::bind(&rings, "127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let server = tokio::spawn(shared_echo_server(listener, 64));
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&rings, &path)
                    .await
                    .unwrap();
                let tasks: Vec<_> = (0..64)
                    .map(|t| tokio::spawn(migrating_task(file.clone(), addr, t)))
                    .collect();
                let mut out = Vec::new();
                for task in tasks {
                    out.push(task.await.unwrap());
                }
                server.await.unwrap();
                out
            });
            drop(rt);
            let tasks = out.iter().filter(|(threads, _)| *threads > 1).count();
            let ops: usize = out.iter().map(|(_, ops)| ops).sum();
            (tasks, ops)
        }
    });
    eprintln!(
        "{threads} of 64 tasks ran on more than one thread; {moved_ops} operations were polled \
         on more than one"
    );
    let injected: Vec<_> = hoop::fault::counts()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    if !injected.is_empty() {
        eprintln!("faults injected so far in this process: {injected:?}");
    }
    assert!(
        threads > 0,
        "no task changed threads: the test proved nothing"
    );
    assert!(
        moved_ops > 0,
        "no operation changed threads: the test proved nothing"
    );
    wait_until("every slot freed", 10, || rings.in_flight() == 0);
    common::assert_no_new_fds(&before, 10);
    std::fs::remove_file(&path).unwrap();
}

/// Reads until `want` bytes came from a shared pipe or file (short reads continue).
async fn read_rest(file: &File, mut got: Vec<u8>, want: usize) -> Vec<u8> {
    while got.len() < want {
        let (res, buf) = file.read_at(Vec::with_capacity(want - got.len()), 0).await;
        let n = res.unwrap();
        assert!(n > 0, "end of data after {} of {want} bytes", got.len());
        got.extend_from_slice(&buf);
    }
    got
}

#[test]
fn operations_first_polled_on_a_thread_that_exits_deliver_and_drop_cleanly() {
    let _g = serial();
    // Before the rings: their fds go too, with the last handle.
    let before = common::fd_set();
    let Some(rings) = common::shared_rings(64) else {
        return;
    };
    common::bounded(60, move || {
        let pair = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mine, _) = l.accept().unwrap();
            (TcpStream::from_std(&rings, mine), peer)
        };
        let pipe = || {
            let (r, w) = common::pipe();
            (
                File::from_std(&rings, std::fs::File::from(r)),
                std::fs::File::from(w),
            )
        };
        let (stream, mut peer) = pair();
        let (spare_stream, mut spare_peer) = pair();
        let (pipe_in, mut pipe_out) = pipe();
        let (spare_pipe_in, mut spare_pipe_out) = pipe();
        let path = std::env::temp_dir().join(format!("hoop-shared-exit-{}", std::process::id()));
        let data = pattern(5, 50_000);
        std::fs::write(&path, &data).unwrap();
        let file = File::from_std(&rings, std::fs::File::open(&path).unwrap());

        // Thread 1 starts every operation (a file read may finish there: regular files never
        // wait) and exits; the kernel cancels what it submitted.
        let (recv, pipe_read, file_read, spare_recv, spare_pipe_read) = std::thread::spawn({
            let (stream, spare_stream) = (stream.clone(), spare_stream.clone());
            let (pipe_in, spare_pipe_in, file) =
                (pipe_in.clone(), spare_pipe_in.clone(), file.clone());
            move || {
                let recv = start(|| Box::pin(stream.read(Vec::with_capacity(64))), "recv");
                let pipe_read = start(
                    || Box::pin(pipe_in.read_at(Vec::with_capacity(64), 0)),
                    "pipe read",
                );
                let file_read =
                    poll_once(Box::pin(file.read_at(vec![0u8; 50_000], 0))).map_err(poll_once);
                let spare_recv = start(
                    || Box::pin(spare_stream.read(Vec::with_capacity(64))),
                    "spare recv",
                );
                let spare_pipe_read = start(
                    || Box::pin(spare_pipe_in.read_at(Vec::with_capacity(64), 0)),
                    "spare pipe read",
                );
                (recv, pipe_read, file_read, spare_recv, spare_pipe_read)
            }
        })
        .join()
        .unwrap();
        if !hoop::fault::enabled() {
            // (Under faults an injected `ECANCELED` may have sent one back to wait for its
            // resubmit, out of its slot.)
            assert!(rings.in_flight() >= 4, "the started operations hold slots");
        }

        // Thread 3 drops two of them: cancelled, their slots freed, and their fds closed with
        // the last handle.
        std::thread::spawn(move || drop((spare_recv, spare_pipe_read)))
            .join()
            .unwrap();
        drop((spare_stream, spare_pipe_in));
        let mut b = [0u8; 1];
        assert_eq!(
            spare_peer.read_retry(&mut b).unwrap(),
            0,
            "the spare stream's fd closed"
        );
        // (Closed after the cancelled read's final CQE, which may come later: `late`.)
        wait_until("the spare pipe's read end closed", 10, || {
            spare_pipe_out.write(b"x").is_err()
        });

        // The data comes now; the others finish on this thread's runtime.
        peer.write_all(b"hello from the peer").unwrap();
        pipe_out.write_all(b"through the pipe").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (res, buf) = recv.await;
            let got = match res {
                Ok(n) => buf[..n].to_vec(),
                Err(e) if common::injected_error(&e) => Vec::new(),
                Err(e) => panic!("recv: {e}"),
            };
            let want = b"hello from the peer";
            let mut got = got;
            got.extend(shared_recv_exact(&stream, want.len() - got.len()).await);
            assert_eq!(got, want);
            let (res, buf) = pipe_read.await;
            let n = res.unwrap();
            let got = read_rest(&pipe_in, buf[..n].to_vec(), 16).await;
            assert_eq!(got, b"through the pipe");
            let (res, mut buf) = match file_read {
                Ok(done) => done,
                Err(Ok(done)) => done,
                Err(Err(pending)) => pending.await,
            };
            let n = res.unwrap();
            buf.truncate(n);
            if n < data.len() {
                let (res, rest) = file
                    .read_exact_at(vec![0u8; data.len() - n], n as u64)
                    .await;
                res.unwrap();
                buf.extend_from_slice(&rest);
            }
            assert!(buf == data, "file bytes");
        });
        drop(rt);
        drop((stream, pipe_in, file, peer, pipe_out));
        wait_until("every slot freed", 10, || rings.in_flight() == 0);
        std::fs::remove_file(&path).unwrap();
        drop(rings);
    });
    common::assert_no_new_fds(&before, 10);
}
