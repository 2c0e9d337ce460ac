//! `hoop::shared` inside tokio's multi-thread runtime: tokio's I/O traits on shared sockets and
//! files, tasks that migrate between workers while their operations are in flight, and hyper
//! serving on shared sockets (the `hyper_server` example). Needs feature `tokio`.

use std::io::{BufRead, BufReader, Read, SeekFrom, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::FutureExt;
use hoop::shared::{File, OpenOptions, Rings, TcpListener, TcpStream};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

fn rings() -> Option<Rings> {
    match Rings::builder().rings(2).entries(128).build() {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("SKIP: io_uring unavailable for shared rings: {e}");
            None
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
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
                let stream = TcpStream::connect(&rings, addr).await.unwrap();
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
                    let (res, _) = stream.write_all(data.clone()).await;
                    res.unwrap();
                    threads.insert(std::thread::current().id());
                    let (res, echoed) = stream.read_exact(vec![0u8; data.len()]).await;
                    res.unwrap();
                    assert_eq!(echoed, data, "echoed bytes of task {t} step {i}");
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
    let Some(rings) = rings() else { return };
    let rt = runtime();
    rt.block_on(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let total = 1 << 20;
        let data = pattern(7, total);
        let expect = data.clone();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // A slow reader: the writer's sends must wait.
            std::thread::sleep(Duration::from_millis(100));
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            assert!(
                got == expect,
                "bytes lost or duplicated ({} of {})",
                got.len(),
                expect.len()
            );
            s.write_all(b"done").unwrap();
        });
        let mut stream = TcpStream::connect(&rings, addr).await.unwrap();
        set_sndbuf(&stream, 4096);
        // Write futures polled once and dropped: a `Ready(n)` took n bytes, a `Pending` took
        // none; neither loses nor duplicates a byte.
        let mut sent = 0;
        let mut dropped = 0;
        while sent < total {
            let end = (sent + 5000).min(total);
            match AsyncWriteExt::write(&mut stream, &data[sent..end]).now_or_never() {
                Some(Ok(n)) => sent += n,
                Some(Err(e)) => panic!("write: {e}"),
                None => {
                    dropped += 1;
                    tokio::task::yield_now().await;
                }
            }
        }
        AsyncWriteExt::flush(&mut stream).await.unwrap();
        AsyncWriteExt::shutdown(&mut stream).await.unwrap();
        let mut done = String::new();
        AsyncReadExt::read_to_string(&mut stream, &mut done)
            .await
            .unwrap();
        assert_eq!(done, "done");
        eprintln!("{dropped} write futures dropped while pending");
        assert!(
            dropped > 0,
            "the send buffer never filled: the test proved nothing"
        );
        tokio::task::spawn_blocking(move || reader.join().unwrap())
            .await
            .unwrap();
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
