//! Fault injection in the ordinary suite: every kind on its own, at a high rate,
//! through a plan set for the test's thread (`hoop::fault::set_thread_plan`, no `HOOP_FAULTS`
//! needed; the test builds carry the `fault-injection` feature). Under each kind a TCP echo, a
//! buffer-ring receive, file writes and reads, and a crowd of timers and dropped reads must keep
//! every byte intact, give every fd back and finish in bounded time, and the kind must really
//! have been injected. Injected errors (`ECANCELED`, `ECONNRESET`, `ENOBUFS`) mean the
//! operation did not run, so the workload retries them; anything else fails the test.
//!
//! The tests count the process's fds and read the process-wide fault counters, so they take
//! one lock and run one at a time.

use hoop_test_support as common;
use hoop_test_support::{block_on, fd_count, serial};

use std::io;

use std::time::Duration;

use common::{bounded, DriverKind};
use hoop::net::{TcpListener, TcpStream};

fn injected(kind: &str) -> u64 {
    hoop::fault::counts()
        .into_iter()
        .find(|(k, _)| *k == kind)
        .map_or(0, |(_, n)| n)
}

/// An error an injected fault makes up for an operation that did not run: try again.
fn injected_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECANCELED) | Some(libc::ECONNRESET) | Some(libc::ENOBUFS)
    )
}

/// Retries an operation while it fails with an injected error (bounded).
macro_rules! retry {
    ($what:expr, $op:expr) => {{
        let mut tries = 0;
        loop {
            match $op {
                Err(e) if injected_error(&e) && tries < 1000 => tries += 1,
                other => break other.unwrap_or_else(|e| panic!("{}: {e}", $what)),
            }
        }
    }};
}

fn payload(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// Writes all of `data`, retrying injected errors (which sent nothing).
async fn send_all(s: &TcpStream, data: &[u8]) {
    let mut at = 0;
    while at < data.len() {
        let end = (at + 16 * 1024).min(data.len());
        match s.write(data[at..end].to_vec()).await.0 {
            Ok(n) => at += n,
            Err(e) if injected_error(&e) => {}
            Err(e) => panic!("write: {e}"),
        }
    }
}

/// Reads exactly `len` bytes, retrying injected errors.
async fn recv_exact(s: &TcpStream, len: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(len);
    while got.len() < len {
        let (r, buf) = s.read(vec![0u8; 4096]).await;
        let n = match r {
            Ok(n) => n,
            Err(e) if injected_error(&e) => continue,
            Err(e) => panic!("read: {e}"),
        };
        assert!(n > 0, "early EOF after {} of {len} bytes", got.len());
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// The echo server's side of one connection: a plain read loop, or a buffer-ring receive
/// stream (`ring`), writing everything back until EOF.
async fn echo(s: TcpStream, ring: Option<hoop::BufRing>) {
    match ring {
        None => loop {
            let (r, buf) = s.read(vec![0u8; 8192]).await;
            let n = match r {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if injected_error(&e) => continue,
                Err(e) => panic!("server read: {e}"),
            };
            send_all(&s, &buf[..n]).await;
        },
        Some(ring) => {
            // ENOBUFS and ECANCELED end one arm of the stream; a new stream goes on where it
            // stopped (no data is lost: an injected error received nothing).
            'arms: loop {
                let mut stream = s.recv_stream(&ring);
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(buf) => {
                            let data = buf.to_vec();
                            drop(buf);
                            send_all(&s, &data).await;
                        }
                        Err(e) if injected_error(&e) => continue 'arms,
                        Err(e) => panic!("server recv stream: {e}"),
                    }
                }
                break;
            }
        }
    }
}

/// The echo server's receive path in the workload.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Recv {
    /// Plain reads.
    Read,
    /// A receive stream on an ordinary buffer ring.
    Ring,
    /// A receive stream on an incrementally consumed ring with bundles (each where the
    /// kernel has it: 6.12 and 6.10).
    IncrementalBundles,
}

/// The workload every kind runs: an echo of 256 KiB through a server on the same runtime,
/// file writes and read-backs, and 200 timers and reads dropped while in flight.
async fn workload(kind: DriverKind, recv: Recv) {
    // TCP echo.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = hoop::spawn(async move {
        let (s, _) = retry!("accept", listener.accept().await);
        let ring = match recv {
            Recv::Read => None,
            Recv::Ring => Some(hoop::BufRing::new(8, 2048).unwrap()),
            Recv::IncrementalBundles => {
                let r = hoop::BufRing::new_incremental(2, 1024).unwrap();
                r.set_bundles(true);
                Some(r)
            }
        };
        echo(s, ring).await;
    });
    let client = retry!("connect", TcpStream::connect(addr).await);
    let data = payload(256 * 1024, 7);
    let writer = {
        let sent = data.clone();
        let client = std::rc::Rc::new(client);
        let c2 = client.clone();
        let w = hoop::spawn(async move {
            send_all(&c2, &sent).await;
            c2.shutdown_with(std::net::Shutdown::Write).await.unwrap();
        });
        let got = recv_exact(&client, data.len()).await;
        assert!(got == data, "driver={kind}: echoed bytes differ");
        w
    };
    writer.await.unwrap();
    server.await.unwrap();

    // Files: write 192 KiB in pieces, read it back in other pieces.
    let dir = std::env::temp_dir().join(format!("hoop-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{kind}-{recv:?}"));
    let file = retry!(
        "open",
        hoop::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
    );
    let content = payload(192 * 1024, 11);
    let mut at = 0;
    while at < content.len() {
        let end = (at + 20_000).min(content.len());
        match file.write_at(content[at..end].to_vec(), at as u64).await.0 {
            Ok(n) => at += n,
            Err(e) if injected_error(&e) => {}
            Err(e) => panic!("write_at: {e}"),
        }
    }
    let mut back = Vec::new();
    while back.len() < content.len() {
        let (r, buf) = file.read_at(vec![0u8; 12_288], back.len() as u64).await;
        let n = match r {
            Ok(n) => n,
            Err(e) if injected_error(&e) => continue,
            Err(e) => panic!("read_at: {e}"),
        };
        assert!(n > 0, "driver={kind}: early EOF at {}", back.len());
        back.extend_from_slice(&buf[..n]);
    }
    assert!(back == content, "driver={kind}: file bytes differ");
    drop(file);
    let _ = std::fs::remove_file(&path);
    // The last of the parallel runs to finish removes the directory (it fails while another
    // run's file is still there).
    let _ = std::fs::remove_dir(&dir);

    // A crowd: timers that complete, reads that are dropped while in flight.
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = std::rc::Rc::new(hoop::net::UnixStream::from_std(a));
    let mut tasks = Vec::new();
    for i in 0..100u64 {
        tasks.push(hoop::spawn(async move {
            hoop::time::sleep(Duration::from_micros(50 * (i % 7))).await;
        }));
        let a = a.clone();
        tasks.push(hoop::spawn(async move {
            // Nothing is ever written: the read is dropped by the timeout, in flight.
            let _ =
                hoop::time::timeout(Duration::from_millis(1 + i % 5), a.read(vec![0u8; 64])).await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Runs the workload on `driver` under `spec`, on its own thread with a time bound; checks
/// fds and that `kind` was injected.
fn under(driver: DriverKind, kind: &'static str, spec: String, recv: Recv) {
    let before_fds = fd_count();
    let before = injected(kind);
    bounded(120, move || {
        let _plan = hoop::fault::set_thread_plan(&spec).unwrap();
        let rt = common::runtime(driver);
        rt.block_on(async {
            hoop::time::timeout(Duration::from_secs(90), workload(driver, recv))
                .await
                .unwrap_or_else(|_| panic!("driver={driver} HOOP_FAULTS={spec}: hung"))
        });
        let report = rt.shutdown();
        assert_eq!(report.leaked, 0, "driver={driver} HOOP_FAULTS={spec}");
    });
    assert_eq!(fd_count(), before_fds, "driver={driver} kind={kind}: fds");
    eprintln!(
        "driver={driver} kind={kind}: {} injected",
        injected(kind) - before
    );
    assert!(
        injected(kind) > before,
        "driver={driver}: no {kind} fault was injected"
    );
}

/// The kinds each driver injects (the rest do not exist there: epoll has no SQ, no CQ and
/// no kernel buffer ring).
fn kinds(driver: DriverKind) -> &'static [&'static str] {
    match driver {
        DriverKind::Uring => &[
            "eagain",
            "ebusy",
            "eintr",
            "short_submit",
            "short_io",
            "ecanceled",
            "econnreset",
            "late",
        ],
        _ => &["eintr", "short_io", "ecanceled", "econnreset", "late"],
    }
}

#[test]
fn every_kind_keeps_the_bytes_and_the_fds() {
    let _serial = serial();
    for driver in common::DRIVERS {
        if driver == DriverKind::Uring {
            if let Some(reason) = hoop::__private::uring_unavailable() {
                common::skip(driver, reason);
                continue;
            }
        }
        for (i, kind) in kinds(driver).iter().enumerate() {
            under(
                driver,
                kind,
                format!("seed={i},rate=0.3,kinds={kind}"),
                Recv::Read,
            );
        }
        // All of them at once.
        let all = kinds(driver).join("+");
        under(
            driver,
            "late",
            format!("seed=99,rate=0.1,kinds={all}"),
            Recv::Read,
        );
    }
}

#[test]
fn buffer_ring_receives_survive_enobufs() {
    let _serial = serial();
    if let Some(reason) = hoop::__private::uring_unavailable() {
        common::skip(DriverKind::Uring, reason);
        return;
    }
    under(
        DriverKind::Uring,
        "enobufs",
        "seed=5,rate=0.3,kinds=enobufs+ecanceled".into(),
        Recv::Ring,
    );
}

/// The same on an incrementally consumed ring with bundles (where the kernel has them), with
/// completions also held back and reordered and receives capped short: the driver settles each buffer's bytes in the
/// kernel's order whatever order the receive sees them in.
#[test]
fn incremental_bundled_receives_survive_enobufs_and_late_completions() {
    let _serial = serial();
    if let Some(reason) = hoop::__private::uring_unavailable() {
        common::skip(DriverKind::Uring, reason);
        return;
    }
    under(
        DriverKind::Uring,
        "enobufs",
        "seed=6,rate=0.3,kinds=enobufs+ecanceled+late+short_io".into(),
        Recv::IncrementalBundles,
    );
}

#[test]
fn a_tiny_cq_overflows_and_loses_nothing() {
    let _serial = serial();
    if let Some(reason) = hoop::__private::uring_unavailable() {
        common::skip(DriverKind::Uring, reason);
        return;
    }
    let before = hoop::fault::counts()
        .into_iter()
        .find(|(k, _)| *k == "cq_overflow")
        .map_or(0, |(_, n)| n);
    bounded(60, move || {
        let _plan = hoop::fault::set_thread_plan("seed=3,rate=1,kinds=cq_overflow").unwrap();
        let rt = common::runtime(DriverKind::Uring);
        assert_eq!(rt.ring_sizes(), (8, 16), "the injected ring is tiny");
        rt.block_on(async {
            // 2,000 no-ops at once: far more completions than the 16-entry CQ holds before
            // the next drain.
            let mut tasks = Vec::new();
            for i in 0..2000u64 {
                tasks.push(hoop::spawn(async move {
                    hoop::Op::new(hoop::op::Nop).await.unwrap();
                    i
                }));
            }
            let mut sum = 0;
            for t in tasks {
                sum += t.await.unwrap();
            }
            assert_eq!(sum, 1999 * 2000 / 2);
            workload(DriverKind::Uring, Recv::Read).await;
        });
        assert!(rt.counters().overflow_events > 0, "the CQ never overflowed");
    });
    assert!(injected("cq_overflow") > before);
}

#[test]
fn setup_failures_are_classified_and_auto_falls_back() {
    let _serial = serial();
    bounded(60, || {
        let _plan = hoop::fault::set_thread_plan("seed=8,rate=1,kinds=setup").unwrap();
        let mut seen = Vec::new();
        for _ in 0..40 {
            let e = match hoop::Runtime::builder().driver(DriverKind::Uring).build() {
                Ok(_) => panic!("an injected setup failure let the ring start"),
                Err(e) => e,
            };
            let msg = e.to_string();
            assert!(!msg.is_empty());
            if !seen.contains(&e.kind()) {
                seen.push(e.kind());
            }
        }
        for want in [
            io::ErrorKind::Unsupported,
            io::ErrorKind::PermissionDenied,
            io::ErrorKind::OutOfMemory,
            io::ErrorKind::InvalidInput,
        ] {
            assert!(seen.contains(&want), "{want:?} never injected: {seen:?}");
        }
        // The default builder falls back to epoll, which works.
        let rt = hoop::Runtime::builder().build().unwrap();
        assert_eq!(rt.driver_kind(), DriverKind::Epoll);
        rt.block_on(async { hoop::time::sleep(Duration::from_millis(1)).await });
    });
}

/// Regression (found under HOOP_FAULTS): a shared ring whose submit the kernel refused or cut
/// short kept those SQEs in its SQ with nobody to submit them (the reaper parked: no CQE was
/// owed), a lost wake-up. Half of all submits refused or cut here; 1,000 no-ops from 4 threads
/// must all complete.
#[test]
fn shared_rings_submit_what_a_refused_submit_left() {
    let _serial = serial();
    bounded(60, || {
        let _plan = hoop::fault::set_thread_plan("seed=4,rate=0.5,kinds=eagain+ebusy+short_submit")
            .unwrap();
        let rings = match hoop::shared::Rings::builder().rings(1).entries(8).build() {
            Ok(r) => r,
            Err(e) => {
                common::skip(DriverKind::Uring, &format!("no shared rings: {e}"));
                return;
            }
        };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let rings = rings.clone();
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        block_on(rings.nop()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(rings.in_flight(), 0);
    });
}

/// Regression (found under HOOP_FAULTS): a multishot recv ended by a cancel its owner did not
/// ask for looked like the peer's EOF (the stream just ended). It now yields the error first.
#[test]
fn an_unasked_cancel_ends_a_recv_stream_with_an_error() {
    let _serial = serial();
    common::each_driver(|kind| {
        bounded(30, move || {
            let _plan = hoop::fault::set_thread_plan("seed=2,rate=1,kinds=ecanceled").unwrap();
            let rt = common::runtime(kind);
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().unwrap();
            std::io::Write::write_all(&mut peer, b"data").unwrap();
            rt.block_on(async move {
                let s = TcpStream::from_std(s);
                let ring = hoop::BufRing::new(4, 64).unwrap();
                let mut stream = s.recv_stream(&ring);
                let first = stream.next().await;
                match first {
                    Some(Err(e)) => assert_eq!(e.raw_os_error(), Some(libc::ECANCELED)),
                    other => {
                        panic!("driver={kind}: expected the cancel as an error, got {other:?}")
                    }
                }
                assert!(stream.next().await.is_none(), "the stream ends after it");
            });
        });
    });
}

/// Injected resets come only where a kernel resets: every TCP and Unix stream send and receive
/// fails with `ECONNRESET` at rate 1, while UDP and Unix datagram sockets (which Linux never
/// resets: their errors are `ECONNREFUSED` and ICMP's) send and receive as ever.
#[test]
fn resets_are_injected_on_streams_only() {
    let _serial = serial();
    common::each_driver(|kind| {
        bounded(30, move || {
            let _plan = hoop::fault::set_thread_plan("seed=5,rate=1,kinds=econnreset").unwrap();
            let rt = common::runtime(kind);
            rt.block_on(async move {
                let reset = |r: io::Result<usize>, what: &str| match r {
                    Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {}
                    other => panic!("driver={kind}: {what}: expected a reset, got {other:?}"),
                };
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let tcp = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
                let (mut peer, _) = l.accept().unwrap();
                std::io::Write::write_all(&mut peer, b"x").unwrap();
                reset(tcp.write_all(vec![1u8; 8]).await.0.map(|_| 0), "TCP send");
                reset(tcp.read(Vec::with_capacity(8)).await.0, "TCP receive");
                let (a, _b) = hoop::net::UnixStream::pair().unwrap();
                reset(a.write_all(vec![1u8; 8]).await.0.map(|_| 0), "Unix send");

                let u = hoop::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let to = u.local_addr().unwrap();
                for i in 0..20u8 {
                    let (r, _) = u.send_to(vec![i; 3], to).await;
                    assert_eq!(r.unwrap(), 3, "driver={kind}: UDP send");
                    let (r, b) = u.recv_from(Vec::with_capacity(8)).await;
                    assert_eq!(r.unwrap().0, 3, "driver={kind}: UDP receive");
                    assert_eq!(b, vec![i; 3]);
                }
                let (a, b) = hoop::net::UnixDatagram::pair().unwrap();
                for i in 0..20u8 {
                    let (r, _) = a.send(vec![i; 3]).await;
                    assert_eq!(r.unwrap(), 3, "driver={kind}: Unix datagram send");
                    let (r, got) = b.recv(Vec::with_capacity(8)).await;
                    assert_eq!(r.unwrap(), 3, "driver={kind}: Unix datagram receive");
                    assert_eq!(got, vec![i; 3]);
                }
            });
        });
    });
}
