//! `hoop::shared`: rings any thread submits to. These tests use plain OS threads and a minimal
//! `block_on` (no runtime at all); the tokio tests are in `shared_tokio.rs`, the rings' setups
//! (reapers, SQPOLL, IOPOLL) in `shared_rings.rs`. They run one at a time (`common::serial`:
//! several count fds), and the whole file runs again on the epoll engine in a child process
//! (`shared_common`).

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
use hoop_test_support::{block_on, resets};

use std::io::{Read, Write};

use std::time::{Duration, Instant};

use common::{fd_count, serial};
use hoop::shared::{Rings, TcpListener, TcpStream};

mod shared_common;
use shared_common::*;

#[test]
fn nops_from_eight_threads_all_complete() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let rings = rings.clone();
            common::spawn(move || {
                let mut ok = 0;
                for _ in 0..200 {
                    let batch: Vec<_> = (0..16).map(|_| rings.nop()).collect();
                    for r in block_on(futures::future::join_all(batch)) {
                        r.expect("nop");
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 8 * 200 * 16);
    assert_eq!(rings.in_flight(), 0);
}

#[test]
fn a_full_slot_table_makes_futures_wait_not_fail() {
    let _g = serial();
    let rings = match Rings::builder()
        .rings(1)
        .entries(8)
        .max_in_flight(4)
        .build()
    {
        Ok(r) => r,
        Err(e) => return eprintln!("SKIP: {e}"),
    };
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let rings = rings.clone();
            common::spawn(move || {
                let batch: Vec<_> = (0..250).map(|_| rings.nop()).collect();
                block_on(futures::future::join_all(batch))
                    .into_iter()
                    .filter(|r| r.is_ok())
                    .count()
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 1000, "every no-op waited for a slot and completed");
    assert_eq!(rings.in_flight(), 0);
}

#[test]
fn files_written_and_read_from_many_threads() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let dir = std::env::temp_dir().join(format!("hoop-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data.bin");
    let before = fd_count();
    let file = block_on(
        hoop::shared::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&rings, &path),
    )
    .unwrap();
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            let file = file.clone();
            common::spawn(move || {
                for i in 0..32u64 {
                    let chunk = vec![t.wrapping_mul(31).wrapping_add(i as u8); 4096];
                    let pos = (u64::from(t) * 32 + i) * 4096;
                    let (res, _) = block_on(file.write_all_at(chunk, pos));
                    res.unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    block_on(file.sync_data()).unwrap();
    assert_eq!(block_on(file.metadata()).unwrap().len(), 8 * 32 * 4096);
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            let file = file.clone();
            common::spawn(move || {
                for i in 0..32u64 {
                    let pos = (u64::from(t) * 32 + i) * 4096;
                    let (res, buf) = block_on(file.read_exact_at(vec![0u8; 4096], pos));
                    res.unwrap();
                    let want = t.wrapping_mul(31).wrapping_add(i as u8);
                    assert!(buf.iter().all(|&b| b == want), "bytes at {pos}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let whole = block_on(hoop::shared::fs::read(&rings, &path)).unwrap();
    assert_eq!(whole.len(), 8 * 32 * 4096);
    drop(file);
    assert_eq!(fd_count(), before, "the file's fd was closed");
    block_on(hoop::shared::fs::write(
        &rings,
        dir.join("b"),
        b"hello".to_vec(),
    ))
    .unwrap();
    assert_eq!(std::fs::read(dir.join("b")).unwrap(), b"hello");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tcp_echo_across_threads() {
    let _g = serial();
    // Regression: a read another thread queued was submitted by a client thread that then
    // exited, and the kernel cancelled it with that thread (ECANCELED); shared ops now
    // resubmit a cancel their owner did not ask for. Refused and short submits under faults
    // (which leave SQEs for other threads to submit) made it likely; no opt-out needed now.
    let Some(rings) = rings() else { return };
    let listener = block_on(TcpListener::bind(&rings, "127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    // Connections until the clients are done (a reset makes one more); a connection a reset
    // ended is dropped, as a server does.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = common::spawn({
        let done = done.clone();
        move || loop {
            let (stream, _) = block_on(listener.accept()).unwrap();
            if done.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            common::spawn(move || loop {
                let (res, buf) = block_on(stream.read(Vec::with_capacity(4096)));
                match res {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        resets::expect_reset("the server's read", &e);
                        break;
                    }
                }
                let (res, _) = block_on(stream.write_all(buf));
                if let Err(e) = res {
                    resets::expect_reset("the server's write", &e);
                    break;
                }
            });
        }
    });
    let clients: Vec<_> = (0..4u8)
        .map(|c| {
            let rings = rings.clone();
            common::spawn(move || {
                // Over a new connection from the message where a reset cut the last.
                let mut resumed = resets::Resumed::new(&format!("client {c}"));
                let mut next = 0u32;
                while next < 100 {
                    let from = next;
                    if let Err(e) = echo_messages(&rings, addr, c, &mut next) {
                        resumed.after(e, (next - from) as usize);
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    // Wakes the accept loop, which sees it is done.
    drop(std::net::TcpStream::connect(addr));
    server.join().unwrap();
}

/// Client `c`'s messages from `*next` to 100 on a new connection, each echoed and checked.
fn echo_messages(
    rings: &Rings,
    addr: std::net::SocketAddr,
    c: u8,
    next: &mut u32,
) -> std::io::Result<()> {
    let stream = block_on(TcpStream::connect(rings, addr))?;
    while *next < 100 {
        let msg = format!("client {c} message {next}").into_bytes();
        let (res, _) = block_on(stream.write_all(msg.clone()));
        res?;
        let (res, back) = block_on(stream.read_exact(vec![0u8; msg.len()]));
        res?;
        assert_eq!(back, msg);
        *next += 1;
    }
    block_on(stream.shutdown_with(std::net::Shutdown::Write))
}

#[test]
fn a_thousand_ops_dropped_on_other_threads_leave_no_fd_or_slot() {
    // Under injected resets a read may end at its submission with a made-up ECONNRESET (about
    // 18 of 900 at 2%): it holds no slot, and its result goes to the stream's next read. The
    // counts below allow one op fewer per reset injected meanwhile, and the next reads take
    // those results first; without faults they are exact.
    let _g = serial();
    // The test counts 1,000 slots in use after one poll each: a submit the kernel refuses
    // leaves a full SQ, and the ops that then found no room wait in the FIFO, not in a slot.
    let _refused = common::faults_off(
        &["eagain", "ebusy", "short_submit"],
        "counts slots in use after one poll each: a refused submit leaves ops waiting for room",
    );
    let Some(rings) = rings() else { return };
    let before = fd_count();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut peers = Vec::new();
    let mut streams = Vec::new();
    for _ in 0..10 {
        let s = block_on(TcpStream::connect(&rings, addr)).unwrap();
        peers.push(listener.accept().unwrap().0);
        streams.push(s);
    }
    let shared_listener = TcpListener::from_std(&rings, listener);
    // 1,000 operations in flight: reads that no data will complete, and accepts no client
    // will satisfy, each pushed from this thread and dropped on another one.
    let mut pending: Vec<Box<dyn Send + Unpin>> = Vec::new();
    let resets_before = injected_resets();
    for i in 0..1000 {
        if i % 10 == 0 {
            pending.push(Box::new(poll_once(Box::pin(shared_listener.accept()))));
        } else {
            let s = &streams[i % streams.len()];
            pending.push(Box::new(poll_once(Box::pin(s.read(vec![0u8; 64])))));
        }
    }
    // Submit what the first polls queued.
    block_on(rings.nop()).unwrap();
    let ended_by_resets = || injected_resets().saturating_sub(resets_before) as usize;
    assert!(rings.in_flight() + ended_by_resets() >= 1000);
    let halves: Vec<Vec<_>> = {
        let second = pending.split_off(500);
        vec![pending, second]
    };
    let droppers: Vec<_> = halves
        .into_iter()
        .map(|ops| common::spawn(move || drop(ops)))
        .collect();
    for d in droppers {
        d.join().unwrap();
    }
    // Dropped while in flight, the reads and accepts are parked on their stream or listener
    // (cancel safety: what they receive goes to the next call), not cancelled: still in
    // flight. The streams still work: the next read takes what a parked one received, and
    // nothing was lost or half-read.
    assert!(
        rings.in_flight() + ended_by_resets() >= 1000,
        "the dropped operations stay parked"
    );
    for (s, p) in streams.iter().zip(peers.iter_mut()) {
        p.write_all(b"ping").unwrap();
        // A parked read a made-up reset ended hands its error to the next read (bounded:
        // at most one per parked read).
        let mut made_up = 0;
        let (res, buf) = loop {
            let (res, buf) = block_on(s.read(vec![0u8; 16]));
            let made_up_reset = matches!(&res, Err(e)
                if common::resets::injected() && common::injected_error(e));
            if made_up_reset && made_up < 100 {
                made_up += 1;
                continue;
            }
            break (res, buf);
        };
        assert_eq!(res.unwrap(), 4);
        assert_eq!(&buf[..], b"ping");
    }
    // Dropping the streams and the listener (on another thread) cancels what is parked.
    let owners = common::spawn(move || drop((streams, shared_listener)));
    owners.join().unwrap();
    let start = Instant::now();
    while rings.in_flight() > 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rings.in_flight(), 0, "every cancelled op freed its slot");
    for mut p in peers {
        let mut b = [0u8; 1];
        assert_eq!(
            p.read_retry(&mut b).unwrap(),
            0,
            "the stream's fd was closed"
        );
    }
    assert_eq!(fd_count(), before, "fds back to baseline");
}

#[test]
fn dropping_the_last_handle_cancels_and_reaps_everything() {
    let _faults = common::faults_off(
        &["econnreset", "ecanceled"],
        "counts the reads shutdown cancels: a made-up result ends one before",
    );
    let _g = serial();
    // The report must count 100 cancelled ops after one poll each: a submit the kernel
    // refuses would leave some of them waiting for room instead of in a slot.
    let _refused = common::faults_off(
        &["eagain", "ebusy", "short_submit"],
        "counts slots in use after one poll each: a refused submit leaves ops waiting for room",
    );
    let before = fd_count();
    let Some(rings) = rings() else { return };
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let stream = TcpStream::from_std(&rings, unsafe_tcp(a));
    let reads: Vec<_> = (0..100)
        .map(|_| poll_once(Box::pin(stream.read(vec![0u8; 64]))))
        .collect();
    block_on(rings.nop()).unwrap();
    let report = rings.shutdown();
    assert_eq!(report.cancelled, 100);
    assert_eq!(report.leaked, 0);
    for r in reads {
        let (res, buf) = block_on(r);
        assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::ECANCELED));
        assert_eq!(buf.len(), 0);
    }
    let (res, _) = block_on(stream.read(vec![0u8; 8]));
    assert!(res.is_err(), "no operation starts after shutdown");
    drop(stream);
    drop(rings);
    drop(b);
    assert_eq!(fd_count(), before);
}

#[test]
fn connect_resolves_a_host_name_off_the_calling_thread() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // A write that an injected reset failed is made again on a new connection.
    resets::retry("the write after connecting to localhost", |_| {
        let stream = block_on(TcpStream::connect(&rings, format!("localhost:{port}")));
        match stream {
            Ok(s) => {
                let (mut peer, _) = listener.accept().unwrap();
                let (res, _) = block_on(s.write_all(b"hi".to_vec()));
                res?;
                let mut b = [0u8; 2];
                peer.read_exact(&mut b).unwrap();
                assert_eq!(&b, b"hi");
                Ok(())
            }
            // "localhost" may resolve to ::1 first on a host without IPv6 loopback listeners:
            // connection refused on every address is possible only if it never named
            // 127.0.0.1.
            Err(e) => panic!("connect to localhost:{port}: {e}"),
        }
    });
}

/// Cancel safety on shared rings: a read and an accept dropped after the kernel completed them
/// hand their results to the next call (the bytes, the connection), as tokio's do.
#[test]
fn dropped_read_and_accept_hand_their_results_to_the_next_call() {
    let _g = serial();
    let before = fd_count();
    let Some(rings) = rings() else { return };
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let listener = TcpListener::from_std(&rings, std_listener);
    // Bounded: on a runtime that loses the results, the next call waits for ever.
    let (rings, listener) = common::bounded(60, move || {
        for round in 0..20 {
            // A round that a reset ended is run again with a new client: its two drops are
            // the subject, on each connection.
            resets::retry(&format!("round {round}"), |_| {
                // An accept dropped after the kernel accepted a client.
                let accept = poll_once(Box::pin(listener.accept()));
                block_on(rings.nop()).unwrap();
                let mut client = std::net::TcpStream::connect(addr).unwrap();
                client
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                std::thread::sleep(Duration::from_millis(2));
                block_on(rings.nop()).unwrap();
                drop(accept);
                let (server, _) = block_on(listener.accept()).unwrap();
                // A read dropped after the bytes came.
                let read = poll_once(Box::pin(server.read(vec![0u8; 64])));
                block_on(rings.nop()).unwrap();
                client
                    .write_all(format!("round {round}").as_bytes())
                    .unwrap();
                std::thread::sleep(Duration::from_millis(2));
                block_on(rings.nop()).unwrap();
                drop(read);
                let (res, buf) = block_on(server.read(Vec::with_capacity(64)));
                let n = res?;
                assert_eq!(&buf[..n], format!("round {round}").as_bytes());
                let (res, _) = block_on(server.write_all(b"ok".to_vec()));
                res?;
                let mut b = [0u8; 2];
                client.read_exact(&mut b).unwrap();
                assert_eq!(&b, b"ok", "round {round}: the client was served");
                Ok(())
            });
        }
        (rings, listener)
    });
    drop(listener);
    let start = Instant::now();
    while rings.in_flight() > 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(rings);
    assert_eq!(fd_count(), before, "fds back to baseline");
}

/// Resets injected in this process so far (every thread's: an upper bound on this test's).
fn injected_resets() -> u64 {
    hoop::fault::counts()
        .iter()
        .find(|(kind, _)| *kind == "econnreset")
        .map_or(0, |(_, n)| *n)
}
