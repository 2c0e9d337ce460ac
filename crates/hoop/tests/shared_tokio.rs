//! `hoop::shared` inside tokio's multi-thread runtime: tokio's I/O traits on shared sockets and
//! files, tasks that migrate between workers with every byte verified, hyper serving on shared
//! sockets (the `hyper_server` example), and every future `Send + 'static` (the constructors'
//! too). Across threads: `shared_tokio_threads.rs`; the work left to the park:
//! `shared_tokio_park.rs`. Needs feature `tokio`. The tests count fds and slots in flight, so
//! they run one at a time (`common::serial`).

use hoop_test_support as common;

use std::future::Future;
use std::io::{BufRead, BufReader, Read, SeekFrom, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{resets, serial, shared_recv_exact, shared_send_all, wait_until};

use futures::FutureExt;
use hoop::shared::{File, OpenOptions, Rings, TcpListener, TcpStream};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

mod shared_tokio_common;
use shared_tokio_common::*;

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

/// A wait the kernel interrupted (`EINTR`, injected into a tenth of the epoll driver's waits)
/// loses no readiness on the shared rings' reactor path: 50 clients on std threads, each
/// accepted by a shared listener inside tokio and echoed, all get their answer. Before, an
/// interrupted wait had taken the epoll fd's edge from tokio's reactor with the events still
/// queued, and a client waited for ever (here: until its 10 s read timeout).
#[test]
fn interrupted_waits_lose_no_readiness_on_the_reactor_path() {
    let _g = serial();
    let _plan = hoop::fault::set_thread_plan("seed=7,rate=0.1,kinds=eintr").unwrap();
    let rings = Rings::builder()
        .driver(hoop::DriverKind::Epoll)
        .build()
        .unwrap();
    let rt = runtime();
    let listener = rt
        .block_on(TcpListener::bind(&rings, "127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await?;
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let n = AsyncReadExt::read(&mut s, &mut buf).await?;
                AsyncWriteExt::write_all(&mut s, &buf[..n]).await?;
                AsyncWriteExt::shutdown(&mut s).await
            });
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    });
    for i in 0..50u32 {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(&i.to_le_bytes()).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap_or_else(|e| {
            panic!("client {i}: no answer ({e}): readiness lost after an interrupted wait")
        });
        assert_eq!(got, i.to_le_bytes(), "client {i}");
    }
    server.abort();
    drop(rt);
}
