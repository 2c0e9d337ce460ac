//! `hoop::shared` inside tokio's multi-thread runtime: tokio's I/O traits on shared sockets and
//! files, tasks that migrate between workers while their operations are in flight, and hyper
//! serving on shared sockets (the `hyper_server` example), every future `Send + 'static` (the
//! constructors' too), and operations first polled on a thread that then exits. Needs feature
//! `tokio`. The tests count fds and slots in flight, so they run one at a time
//! (`common::serial`).

use hoop_test_support as common;

use std::collections::HashSet;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, SeekFrom, Write};
use std::path::Path;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use common::{poll_once, resets, serial, shared_recv_exact, shared_send_all, wait_until};

use futures::FutureExt;
use hoop::shared::{File, OpenOptions, Rings, TcpListener, TcpStream};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

fn rings() -> Option<Rings> {
    common::shared_rings(128)
}

/// tokio's multi-thread runtime, its workers under the calling test's fault opt-outs.
fn runtime() -> tokio::runtime::Runtime {
    let opted_out = hoop::fault::opted_out();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .on_thread_start(move || std::mem::forget(hoop::fault::opt_out_inherited(opted_out)))
        .enable_all()
        .build()
        .unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn sixty_four_tasks_migrate_between_workers_with_every_byte_verified() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let rt = runtime();
    let dir = std::env::temp_dir().join(format!("hoop-shared-tokio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = rt.block_on(async {
        let listener = TcpListener::bind(&rings, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Echo server: one task per connection, on hoop's shared sockets.
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    loop {
                        let (res, buf) = stream.read(Vec::with_capacity(8192)).await;
                        match res {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        tokio::task::yield_now().await;
                        if stream.write_all(buf).await.0.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let mut tasks = Vec::new();
        for t in 0..64u64 {
            let rings = rings.clone();
            let path = dir.join(format!("task-{t}"));
            tasks.push(tokio::spawn(async move {
                let mut threads = std::collections::HashSet::new();
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&rings, &path)
                    .await
                    .unwrap();
                // A step's echo that a reset cut is asked again on a new connection.
                let mut resumed = resets::Resumed::new(&format!("task {t}'s echoes"));
                let mut stream = None;
                // Echoes completed since the last reset: the progress `Resumed` counts.
                let mut done = 0;
                for i in 0..16u64 {
                    threads.insert(std::thread::current().id());
                    let data = pattern(t * 1000 + i, 3000 + (i as usize * 97));
                    let (res, _) = file.write_all_at(data.clone(), i * 8192).await;
                    res.unwrap();
                    tokio::task::yield_now().await;
                    threads.insert(std::thread::current().id());
                    let (res, back) = file.read_exact_at(vec![0u8; data.len()], i * 8192).await;
                    res.unwrap();
                    assert_eq!(back, data, "file bytes of task {t} step {i}");
                    loop {
                        let s = match stream.take() {
                            Some(s) => s,
                            None => TcpStream::connect(&rings, addr).await.unwrap(),
                        };
                        let (res, _) = s.write_all(data.clone()).await;
                        if let Err(e) = res {
                            resumed.after(e, std::mem::take(&mut done));
                            continue;
                        }
                        threads.insert(std::thread::current().id());
                        let (res, echoed) = s.read_exact(vec![0u8; data.len()]).await;
                        if let Err(e) = res {
                            resumed.after(e, std::mem::take(&mut done));
                            continue;
                        }
                        assert_eq!(echoed, data, "echoed bytes of task {t} step {i}");
                        done += 1;
                        stream = Some(s);
                        break;
                    }
                }
                threads.len()
            }));
        }
        let mut moved = 0;
        for task in tasks {
            if task.await.unwrap() > 1 {
                moved += 1;
            }
        }
        moved
    });
    eprintln!("{report} of 64 tasks ran on more than one worker thread");
    // Dropping the runtime drops the server's pending accept: its cancel frees the last slot.
    drop(rt);
    let start = Instant::now();
    while rings.in_flight() > 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rings.in_flight(), 0, "every slot freed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tokio_traits_on_a_shared_stream() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let rt = runtime();
    rt.block_on(async {
        let total = 1 << 20;
        let data = pattern(7, total);
        // The scenario is one connection's: a reset reruns it whole on a new one.
        let dropped = resets::retry_async("1 MiB through tokio's traits", |_| {
            let rings = rings.clone();
            let data = data.clone();
            async move {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                let expect = data.clone();
                let reader = std::thread::spawn(move || -> std::io::Result<()> {
                    let (mut s, _) = listener.accept()?;
                    // A slow reader: the writer's sends must wait.
                    std::thread::sleep(Duration::from_millis(100));
                    let mut got = Vec::new();
                    s.read_to_end(&mut got)?;
                    if got.len() < expect.len() {
                        // The writer's connection was reset before it sent everything.
                        return Err(resets::closed_early("the whole 1 MiB"));
                    }
                    assert!(
                        got == expect,
                        "bytes lost or duplicated ({} of {})",
                        got.len(),
                        expect.len()
                    );
                    s.write_all(b"done")
                });
                let client = async {
                    let mut stream = TcpStream::connect(&rings, addr).await?;
                    set_sndbuf(&stream, 4096);
                    // Write futures polled once and dropped: a `Ready(n)` took n bytes, a
                    // `Pending` took none; neither loses nor duplicates a byte.
                    let mut sent = 0;
                    let mut dropped = 0;
                    while sent < total {
                        let end = (sent + 5000).min(total);
                        match AsyncWriteExt::write(&mut stream, &data[sent..end]).now_or_never() {
                            Some(Ok(n)) => sent += n,
                            Some(Err(e)) => return Err(e),
                            None => {
                                dropped += 1;
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                    AsyncWriteExt::flush(&mut stream).await?;
                    AsyncWriteExt::shutdown(&mut stream).await?;
                    let mut done = String::new();
                    AsyncReadExt::read_to_string(&mut stream, &mut done).await?;
                    if done.is_empty() {
                        return Err(resets::closed_early("the reader's \"done\""));
                    }
                    assert_eq!(done, "done");
                    Ok(dropped)
                }
                .await;
                // The client's stream is closed here, so the reader has its end of stream.
                let read = tokio::task::spawn_blocking(move || reader.join().unwrap())
                    .await
                    .unwrap();
                let dropped = client?;
                read?;
                Ok(dropped)
            }
        })
        .await;
        eprintln!("{dropped} write futures dropped while pending");
        assert!(
            dropped > 0,
            "the send buffer never filled: the test proved nothing"
        );
    });
}

fn set_sndbuf(stream: &TcpStream, bytes: i32) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads an i32 from a live local.
    let r = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

#[test]
fn tokio_traits_on_a_shared_file_with_seeks() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let rt = runtime();
    let path = std::env::temp_dir().join(format!("hoop-shared-seek-{}", std::process::id()));
    rt.block_on(async {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&rings, &path)
            .await
            .unwrap();
        let data = pattern(3, 100_000);
        file.write_all(&data).await.unwrap();
        AsyncWriteExt::flush(&mut file).await.unwrap();
        assert_eq!(file.stream_position().await.unwrap(), 100_000);
        assert_eq!(file.seek(SeekFrom::Start(10)).await.unwrap(), 10);
        let mut head = [0u8; 20];
        AsyncReadExt::read_exact(&mut file, &mut head)
            .await
            .unwrap();
        assert_eq!(&head[..], &data[10..30]);
        // The read went ahead into the internal buffer: the position is still the caller's.
        assert_eq!(file.stream_position().await.unwrap(), 30);
        assert_eq!(file.seek(SeekFrom::Current(-5)).await.unwrap(), 25);
        let mut rest = Vec::new();
        AsyncReadExt::read_to_end(&mut file, &mut rest)
            .await
            .unwrap();
        assert!(rest == data[25..], "read_to_end from 25");
        assert_eq!(file.seek(SeekFrom::End(-1)).await.unwrap(), 99_999);
        let meta = file.metadata().await.unwrap();
        assert_eq!(meta.len(), 100_000);
        let whole = File::open(&rings, &path).await.unwrap();
        let (res, buf) = whole.read_exact_at(vec![0u8; 100_000], 0).await;
        res.unwrap();
        assert!(buf == data);
    });
    std::fs::remove_file(&path).unwrap();
}

/// The `hyper_server` example, built next to this test binary.
fn hyper_server() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|p| p.join("examples").join("hyper_server"))
        .unwrap();
    assert!(
        path.exists(),
        "{} is not built: run `cargo build --release -p hoop --features tokio --examples`",
        path.display()
    );
    path
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn hyper_serves_a_thousand_verified_requests_on_shared_sockets() {
    let _g = serial();
    if rings().is_none() {
        return;
    }
    let child = Command::new(hyper_server())
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr: std::net::SocketAddr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .parse()
        .unwrap();
    let start = Instant::now();
    let clients: Vec<_> = (0..50)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut ok = 0;
                for i in 0..20 {
                    let text = format!("c{c}r{i}");
                    write!(s, "GET /echo/{text} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
                    let mut status = String::new();
                    r.read_line(&mut status).unwrap();
                    assert!(status.starts_with("HTTP/1.1 200"), "status {status:?}");
                    let mut len = None;
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).unwrap();
                        if h == "\r\n" {
                            break;
                        }
                        let lower = h.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            len = v.trim().parse::<usize>().ok();
                        }
                    }
                    let mut body = vec![0u8; len.expect("content-length")];
                    r.read_exact(&mut body).unwrap();
                    assert_eq!(body, text.as_bytes());
                    ok += 1;
                }
                ok
            })
        })
        .collect();
    let ok: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(ok, 1000);
    eprintln!(
        "1000 verified requests from 50 connections in {:?}",
        start.elapsed()
    );
}

fn assert_send_static<F: Future + Send + 'static>(_: &F) {}

/// Compile-time half of the next test: every future `hoop::shared` returns is `Send +
/// 'static` although its arguments are borrowed (never called: type-checking it is the test).
#[allow(dead_code)]
fn every_future_type_is_send_and_static(
    rings: &Rings,
    path: &Path,
    file: &File,
    stream: &TcpStream,
    listener: &TcpListener,
) {
    let host = String::from("localhost:1");
    assert_send_static(&File::open(rings, path));
    assert_send_static(&File::create(rings, path));
    assert_send_static(&OpenOptions::new().read(true).open(rings, path));
    assert_send_static(&hoop::shared::fs::read(rings, path));
    assert_send_static(&hoop::shared::fs::write(rings, path, vec![1u8]));
    assert_send_static(&file.read_at(vec![0u8; 1], 0));
    assert_send_static(&file.write_at(vec![0u8; 1], 0));
    assert_send_static(&file.read_exact_at(vec![0u8; 1], 0));
    assert_send_static(&file.write_all_at(vec![0u8; 1], 0));
    assert_send_static(&file.sync_all());
    assert_send_static(&file.sync_data());
    assert_send_static(&file.metadata());
    assert_send_static(&TcpStream::connect(rings, host.as_str()));
    assert_send_static(&TcpStream::connect(rings, &listener.local_addr().unwrap()));
    assert_send_static(&TcpListener::bind(rings, host.as_str()));
    assert_send_static(&listener.accept());
    assert_send_static(&stream.read(vec![0u8; 1]));
    assert_send_static(&stream.read_exact(vec![0u8; 1]));
    assert_send_static(&stream.write(vec![0u8; 1]));
    assert_send_static(&stream.write_all(vec![0u8; 1]));
    assert_send_static(&stream.shutdown_with(std::net::Shutdown::Write));
}

#[test]
fn constructors_spawn_on_tokio_with_the_rings_and_paths_dropped_after_the_call() {
    let _g = serial();
    let Some(rings) = common::shared_rings(64) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("hoop-shared-static-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = runtime();
    rt.block_on(async {
        let data = pattern(11, 10_000);
        // Each call borrows a handle and a path that die at the end of their block, before the
        // spawned task runs: the futures own what they need, or this would not compile
        // (E0597, a borrow that does not live long enough).
        let write = {
            let rings = rings.clone();
            let path = dir.join("a");
            tokio::spawn(hoop::shared::fs::write(&rings, &path, data.clone()))
        };
        write.await.unwrap().unwrap();
        let read = {
            let rings = rings.clone();
            let path = dir.join("a");
            tokio::spawn(hoop::shared::fs::read(&rings, &path))
        };
        let open = {
            let rings = rings.clone();
            let path = dir.join("a");
            tokio::spawn(File::open(&rings, path.as_path()))
        };
        let create = {
            let rings = rings.clone();
            let path = dir.join("b");
            tokio::spawn(File::create(&rings, &path))
        };
        assert!(read.await.unwrap().unwrap() == data, "fs::read");
        let file = open.await.unwrap().unwrap();
        let (res, back) = file.read_exact_at(vec![0u8; data.len()], 0).await;
        res.unwrap();
        assert!(back == data, "File::open then read_exact_at");
        let created = create.await.unwrap().unwrap();
        created.write_all_at(b"b".to_vec(), 0).await.0.unwrap();
        let listener = {
            let rings = rings.clone();
            let addr = String::from("127.0.0.1:0");
            tokio::spawn(TcpListener::bind(&rings, addr.as_str()))
        };
        let listener = listener.await.unwrap().unwrap();
        let port = listener.local_addr().unwrap().port();
        let connect = {
            let rings = rings.clone();
            // A host name: resolved on hoop's blocking pool when the task runs.
            let addr = format!("localhost:{port}");
            tokio::spawn(TcpStream::connect(&rings, addr.as_str()))
        };
        let accept = tokio::spawn(listener.accept());
        let client = connect.await.unwrap().unwrap();
        let (server, _) = accept.await.unwrap().unwrap();
        shared_send_all(&client, b"ping").await;
        assert_eq!(shared_recv_exact(&server, 4).await, b"ping");
    });
    drop(rt);
    wait_until("every slot freed", 10, || rings.in_flight() == 0);
    assert_eq!(std::fs::read(dir.join("b")).unwrap(), b"b");
    std::fs::remove_dir_all(&dir).unwrap();
}

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

/// Runs an operation future started elsewhere (`poll_once`'s result) to its end.
async fn finish<F: Future + Unpin>(started: Result<F::Output, F>) -> F::Output {
    match started {
        Ok(v) => v,
        Err(f) => f.await,
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

/// Makes a read with `make` and polls it twice on this thread (the first poll queues its SQE,
/// the second submits it), expecting it to stay pending: there is no data. One that an
/// injected error ended (it did not run) is made again.
fn start<B, F>(mut make: impl FnMut() -> F, what: &str) -> F
where
    F: Future<Output = (std::io::Result<usize>, B)> + Unpin,
{
    for _ in 0..100 {
        let f = poll_once(make())
            .err()
            .unwrap_or_else(|| panic!("{what} finished at its first poll"));
        match poll_once(f) {
            Err(pending) => return pending,
            Ok((Err(e), _)) if common::injected_error(&e) => continue,
            Ok((res, _)) => panic!("{what} finished with no data to read: {res:?}"),
        }
    }
    panic!("{what}: 100 injected errors in a row")
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
            spare_peer.read(&mut b).unwrap(),
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

/// A tokio runtime built without I/O cannot take a ring fd (tokio panics in the registration,
/// which hoop catches quietly): the rings' reapers keep the waiting and everything completes.
#[test]
fn a_runtime_without_io_leaves_the_waiting_to_the_reapers() {
    let _g = serial();
    let Some(rings) = common::shared_rings(64) else {
        return;
    };
    // A read that a reset ended is asked again on a new pair (and a new runtime).
    let got = resets::retry("a read on a runtime without I/O", |_| {
        let opted_out = hoop::fault::opted_out();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_start(move || std::mem::forget(hoop::fault::opt_out_inherited(opted_out)))
            .build()
            .unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let stream = {
            use std::os::fd::{FromRawFd, IntoRawFd};
            // SAFETY: a connected stream socket we own; TcpStream only wraps it for recv/send.
            TcpStream::from_std(&rings, unsafe {
                std::net::TcpStream::from_raw_fd(a.into_raw_fd())
            })
        };
        let read = rt.spawn(async move {
            let (res, buf) = stream.read(vec![0u8; 16]).await;
            res.map(|n| buf[..n].to_vec())
        });
        std::thread::sleep(Duration::from_millis(50));
        if let Err(e) = b.write_all(b"no io driver") {
            // The read was reset first and its stream closed.
            resets::expect_reset("the peer's write", &e);
        }
        common::bounded(10, move || rt.block_on(read).unwrap())
    });
    assert_eq!(got, b"no io driver");
}

/// Rings of `kind` for a test that runs on both engines; `None` (with a line) where the kind
/// cannot be built here.
fn rings_of(kind: hoop::DriverKind) -> Option<Rings> {
    let _setup = hoop::fault::opt_out_quietly(&["setup"]);
    match Rings::builder().rings(2).entries(128).driver(kind).build() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("SKIP: shared rings on {kind:?}: {e}");
            None
        }
    }
}

/// tokio's `poll_read` on a shared stream reads by readiness, and a read shorter than its
/// buffer clears the readiness it saw (the receive queue is empty then, as tokio assumes): the
/// bytes that arrive after it must still wake the next read, on both engines, pieces and end
/// of stream alike.
#[test]
fn reads_by_readiness_wake_for_bytes_after_a_short_read() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let rt = runtime();
        // The pieces are one connection's: a reset reruns them all on a new one.
        rt.block_on(resets::retry_async(&format!("{kind:?}: 20 pieces"), |_| {
            let rings = rings.clone();
            async move {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                let peer = std::thread::spawn(move || {
                    let (mut s, _) = listener.accept().unwrap();
                    for i in 0..20u8 {
                        // Wait until the reader took the piece before, so each read is short
                        // and each piece lands on a socket whose readiness was cleared.
                        if go_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                            return;
                        }
                        if let Err(e) = s.write_all(&[i; 3]) {
                            // The reader's connection was reset and closed.
                            resets::expect_reset("a piece", &e);
                            return;
                        }
                    }
                });
                let read_all = async {
                    let mut stream = TcpStream::connect(&rings, addr).await?;
                    let mut buf = [0u8; 64];
                    for i in 0..20u8 {
                        go_tx.send(()).unwrap();
                        let mut got = Vec::new();
                        while got.len() < 3 {
                            let n = tokio::time::timeout(
                                Duration::from_secs(10),
                                AsyncReadExt::read(&mut stream, &mut buf),
                            )
                            .await
                            .unwrap_or_else(|_| {
                                panic!("{kind:?}: piece {i} never woke the read")
                            })?;
                            if n == 0 {
                                return Err(resets::closed_early(&format!("piece {i}")));
                            }
                            got.extend_from_slice(&buf[..n]);
                        }
                        assert_eq!(got, [i; 3], "{kind:?}: piece {i}");
                    }
                    let n = tokio::time::timeout(
                        Duration::from_secs(10),
                        AsyncReadExt::read(&mut stream, &mut buf),
                    )
                    .await
                    .expect("the end of stream never woke the read")?;
                    assert_eq!(n, 0, "{kind:?}: end of stream");
                    Ok(())
                }
                .await;
                drop(go_tx);
                tokio::task::spawn_blocking(move || peer.join().unwrap())
                    .await
                    .unwrap();
                read_all
            }
        }));
    }
}

/// tokio's multi-thread runtime with hoop's park hook: each worker submits the socket writes
/// its tasks deferred, all of a turn in one `io_uring_enter`, before it sleeps.
fn runtime_with_park_submit() -> tokio::runtime::Runtime {
    let opted_out = hoop::fault::opted_out();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .on_thread_start(move || std::mem::forget(hoop::fault::opt_out_inherited(opted_out)))
        .on_thread_park(hoop::shared::submit_deferred)
        .enable_all()
        .build()
        .unwrap()
}

/// A std echo server, one thread per connection, echoing until end of stream; it accepts
/// until [`EchoServer::join`] (a client that a reset cut comes back on a new connection).
fn std_echo() -> (std::net::SocketAddr, EchoServer) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut peers = Vec::new();
        // Bounded: the clients' connections plus their retries.
        for _ in 0..10_000 {
            let (mut s, _) = listener.accept().unwrap();
            if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            peers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            }));
        }
        for p in peers {
            let _ = p.join();
        }
    });
    (addr, EchoServer { addr, stop, thread })
}

/// The echo server of [`std_echo`].
struct EchoServer {
    addr: std::net::SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl EchoServer {
    /// Stops accepting (a last connection wakes the accept) and waits for every connection's
    /// end of stream.
    fn join(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
        self.thread.join().unwrap();
    }
}

/// Writes deferred to the workers' park (tokio's `on_thread_park` calling
/// `hoop::shared::submit_deferred`) arrive whole and in order, on both engines: small and
/// large messages (larger than the 16 KiB write-behind: a second write in one poll), flushed
/// or not before the reply is read (then only the park sends them), from 8 tasks on 4 workers.
/// Under injected resets every message either comes back whole or its exchange gets an error
/// (then it reruns on a new connection): a deferred send's reset must be reported by a later
/// write or by the flush, never dropped (the io_uring engine once lost it when the next write
/// found it already failed, and `write_all` returned `Ok` for a message missing 16 KiB, whose
/// echo then never came).
#[test]
fn writes_deferred_to_the_park_arrive_whole_on_both_engines() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let conns = 8;
        let (addr, server) = std_echo();
        let rt = runtime_with_park_submit();
        rt.block_on(async {
            let tasks: Vec<_> = (0..conns as u64)
                .map(|t| {
                    let rings = rings.clone();
                    tokio::spawn(async move {
                        // A round that a reset cut is sent again on a new connection.
                        let mut resumed = resets::Resumed::new(&format!("{kind:?}: task {t}"));
                        let mut done = 0;
                        let mut conn = None;
                        let sizes = [1usize, 100, 1024, 20_000, 40_000];
                        for round in 0..20u64 {
                            let size = sizes[(round as usize + t as usize) % sizes.len()];
                            let msg = pattern(t * 1000 + round, size);
                            loop {
                                let mut stream = match conn.take() {
                                    Some(s) => s,
                                    None => TcpStream::connect(&rings, addr).await.unwrap(),
                                };
                                let exchange = async {
                                    AsyncWriteExt::write_all(&mut stream, &msg).await?;
                                    if round % 2 == 0 {
                                        AsyncWriteExt::flush(&mut stream).await?;
                                    }
                                    read_echo(&mut stream, size).await
                                };
                                match exchange.await {
                                    Ok(got) => {
                                        assert!(
                                            got == msg,
                                            "{kind:?}: task {t} round {round}: bytes differ"
                                        );
                                        done += 1;
                                        conn = Some(stream);
                                        break;
                                    }
                                    Err(e) => resumed.after(e, std::mem::take(&mut done)),
                                }
                            }
                        }
                        if let Some(mut stream) = conn {
                            if let Err(e) = AsyncWriteExt::shutdown(&mut stream).await {
                                resets::expect_reset("the shutdown", &e);
                            }
                        }
                    })
                })
                .collect();
            for task in tasks {
                tokio::time::timeout(Duration::from_secs(30), task)
                    .await
                    .unwrap_or_else(|_| panic!("{kind:?}: a deferred write never left"))
                    .unwrap();
            }
        });
        server.join();
        drop(rt);
        assert_eq!(rings.in_flight(), 0, "{kind:?}: every slot freed");
    }
}

/// A caller that polls a flush without ever letting the worker park (`now_or_never` in a
/// `yield_now` loop) still gets its deferred bytes sent: a flush that would wait a second time
/// submits them itself. Both engines; the peer checks every byte.
#[test]
fn a_flush_polled_without_parking_still_sends_deferred_writes() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let (addr, server) = std_echo();
        let rt = runtime_with_park_submit();
        rt.block_on(async {
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(&rings, addr).await.unwrap();
                // Let this worker park once, so its writes are deferred from now on.
                tokio::time::sleep(Duration::from_millis(20)).await;
                // A round that a reset cut is sent again on a new connection.
                let mut resumed = resets::Resumed::new(&format!("{kind:?}: flushed rounds"));
                let mut done = 0;
                for round in 0..10u64 {
                    let msg = pattern(round, 3000);
                    loop {
                        match flushed_round(kind, &mut stream, &msg).await {
                            Ok(got) => {
                                assert!(got == msg, "{kind:?}: round {round}: bytes differ");
                                done += 1;
                                break;
                            }
                            Err(e) => {
                                resumed.after(e, std::mem::take(&mut done));
                                stream = TcpStream::connect(&rings, addr).await.unwrap();
                            }
                        }
                    }
                }
            })
            .await
            .unwrap();
        });
        server.join();
    }
}

/// Reads an echo of `size` bytes. An unflushed write's error waits in its handle for the next
/// write or flush: when the echo is slow while resets are injected, a flush asks whether a
/// reset ended the write the echo waits for (the read goes on where it was if not).
async fn read_echo(stream: &mut TcpStream, size: usize) -> std::io::Result<Vec<u8>> {
    let mut got = vec![0u8; size];
    let mut have = 0;
    let start = Instant::now();
    while have < size {
        let wait = if resets::injected() {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(30)
        };
        match tokio::time::timeout(wait, AsyncReadExt::read(stream, &mut got[have..])).await {
            Ok(Ok(0)) => return Err(resets::closed_early("the whole echo")),
            Ok(Ok(n)) => have += n,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the echo never came ({have} of {size} bytes)"
                );
                AsyncWriteExt::flush(stream).await?;
            }
        }
    }
    Ok(got)
}

/// One round of [`a_flush_polled_without_parking_still_sends_deferred_writes`]: `msg` written
/// and flushed by futures polled once in a `yield_now` loop, then its echo read back.
async fn flushed_round(
    kind: hoop::DriverKind,
    stream: &mut TcpStream,
    msg: &[u8],
) -> std::io::Result<Vec<u8>> {
    let mut sent = 0;
    let mut spins = 0u32;
    while sent < msg.len() {
        match AsyncWriteExt::write(stream, &msg[sent..]).now_or_never() {
            Some(r) => sent += r?,
            None => tokio::task::yield_now().await,
        }
        spins += 1;
        assert!(spins < 100_000, "{kind:?}: the write never went on");
    }
    let mut spins = 0u32;
    loop {
        match AsyncWriteExt::flush(stream).now_or_never() {
            Some(r) => break r?,
            None => tokio::task::yield_now().await,
        }
        spins += 1;
        assert!(spins < 100_000, "{kind:?}: the flush never finished");
    }
    let mut got = vec![0u8; msg.len()];
    tokio::time::timeout(
        Duration::from_secs(10),
        AsyncReadExt::read_exact(stream, &mut got),
    )
    .await
    .expect("the echo never came")?;
    Ok(got)
}

/// The driver's side: a deferred operation is pushed by its first poll and submitted by the
/// thread's next `submit_deferred` (a park), which wakes its task; on a thread whose park
/// never called it, the same operation is an ordinary one. Both engines.
#[test]
fn a_deferred_operation_waits_for_the_park_then_completes() {
    let _g = serial();
    for kind in [hoop::DriverKind::Uring, hoop::DriverKind::Epoll] {
        let Some(rings) = rings_of(kind) else {
            continue;
        };
        let t = std::thread::spawn(move || {
            // Not yet a deferring thread: an ordinary operation.
            let finish = |op: &mut hoop::shared::SharedOp<_>, cx: &mut Context<'_>| {
                for _ in 0..1000 {
                    if let Poll::Ready(r) = Pin::new(&mut *op).poll(cx) {
                        return r;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                panic!("{kind:?}: the no-op never completed");
            };
            let woken = Arc::new(CountWake::default());
            let waker = std::task::Waker::from(woken.clone());
            let mut cx = Context::from_waker(&waker);
            let mut op = rings.nop().deferred();
            let r: std::io::Result<_> = finish(&mut op, &mut cx);
            assert!(
                r.is_ok() || common::injected_error(r.as_ref().unwrap_err()),
                "{kind:?}: {r:?}"
            );
            hoop::shared::submit_deferred();
            // io_uring's waits in the SQ for the submit; the epoll engine may run a no-op in
            // the push itself, and then the first poll has its result.
            let before = woken.0.load(std::sync::atomic::Ordering::SeqCst);
            let mut op = rings.nop().deferred();
            let first = Pin::new(&mut op).poll(&mut cx);
            if kind == hoop::DriverKind::Uring {
                assert!(first.is_pending(), "submitted before the park");
            }
            let r = match first {
                Poll::Ready(r) => r,
                Poll::Pending => {
                    hoop::shared::submit_deferred();
                    let r = finish(&mut op, &mut cx);
                    assert!(
                        woken.0.load(std::sync::atomic::Ordering::SeqCst) > before,
                        "{kind:?}: the completion woke nobody"
                    );
                    r
                }
            };
            assert!(
                r.is_ok() || common::injected_error(r.as_ref().unwrap_err()),
                "{kind:?}: {r:?}"
            );
        });
        t.join().unwrap();
    }
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountWake(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}
