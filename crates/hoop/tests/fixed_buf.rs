//! Registered buffers: `FixedBufPool`, `read_fixed`/`write_fixed` on files
//! and sockets, on both drivers. On io_uring a pool is the ring's registered table
//! (`READ_FIXED`/`WRITE_FIXED`); on epoll, and when forced with `new_unregistered`, the same
//! memory is used with plain reads and writes.

use hoop_test_support as common;
use std::cell::RefCell;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use hoop::driver::op;
use hoop::fs::File;
use hoop::net::{TcpListener, TcpStream};
use hoop::runtime::current_driver;
use hoop::time::{sleep, timeout};
use hoop::{DriverKind, FixedBuf, FixedBufPool, IoBuf};

const BLOCK: usize = 4096;
const LIMIT: Duration = Duration::from_secs(10);

fn is_uring() -> bool {
    current_driver() == Some(DriverKind::Uring)
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hoop-fixed-{}-{name}", std::process::id()))
}

/// A pattern that differs per block and per byte.
fn pattern(block: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (block * 31 + i * 7) as u8).collect()
}

/// Both pool modes: registered where the driver allows it, and the fallback, forced.
type MakePool = fn(u16, usize) -> std::io::Result<FixedBufPool>;
const MODES: [(&str, MakePool); 2] = [
    ("registered", FixedBufPool::new),
    ("unregistered", FixedBufPool::new_unregistered),
];

/// On io_uring a small pool is registered (one table per ring: each test makes its pools one
/// after the other), on epoll never; an op on its buffer says which path it takes.
async fn check_mode(pool: &FixedBufPool, mode: &str) {
    let expect = mode == "registered" && is_uring();
    assert_eq!(pool.is_registered(), expect, "{mode} pool");
    let buf = pool.try_take().unwrap();
    assert_eq!(op::ReadFixed::new(-1, buf, 0).is_fixed(), expect, "{mode}");
    assert_eq!(pool.available(), pool.count() as usize);
}

/// Blocks written out of order at their offsets with `write_fixed_at` come back with
/// `read_fixed_at`, and the file holds them (checked with std).
#[hoop::test]
async fn file_round_trip_at_offsets() {
    for (mode, make) in MODES {
        let path = temp_path(&format!("rt-{mode}-{:?}", current_driver()));
        let pool = make(8, BLOCK).unwrap();
        check_mode(&pool, mode).await;
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
            .unwrap();
        let order = [5usize, 0, 3, 1, 4, 2];
        for &blk in &order {
            let mut buf = pool.try_take().unwrap();
            assert_eq!((buf.len(), buf.capacity()), (0, BLOCK));
            assert_eq!(buf.copy_from(&pattern(blk, BLOCK)), BLOCK);
            let (res, buf) = file.write_fixed_at(buf, (blk * BLOCK) as u64).await;
            assert_eq!(res.unwrap(), BLOCK, "{mode}: write block {blk}");
            assert_eq!(buf.len(), BLOCK);
        }
        assert_eq!(pool.available(), 8, "{mode}: every buffer back");
        // Several reads in flight at once, each into its own buffer.
        let file = Rc::new(file);
        let reads: Vec<_> = order
            .iter()
            .map(|&blk| {
                let file = file.clone();
                let buf = pool.try_take().unwrap();
                hoop::spawn(
                    async move { (blk, file.read_fixed_at(buf, (blk * BLOCK) as u64).await) },
                )
            })
            .collect();
        let mut got = Vec::new();
        for r in reads {
            got.push(timeout(LIMIT, r).await.unwrap().unwrap());
        }
        let file = Rc::into_inner(file).unwrap();
        assert_eq!(pool.available(), 8 - order.len());
        for (blk, (res, buf)) in got {
            assert_eq!(res.unwrap(), BLOCK, "{mode}: read block {blk}");
            assert_eq!(&buf[..], &pattern(blk, BLOCK)[..], "{mode}: block {blk}");
        }
        assert_eq!(pool.available(), 8);
        // A slice of a buffer: write bytes 100..300 of a block at offset 10.
        let mut buf = pool.try_take().unwrap();
        buf.copy_from(&pattern(9, BLOCK));
        let (res, slice) = file.write_fixed_at(buf.slice(100..300), 10).await;
        assert_eq!(res.unwrap(), 200);
        drop(slice);
        // Reading past the end: a short read, then 0.
        let (res, buf) = file
            .read_fixed_at(pool.try_take().unwrap(), (6 * BLOCK - 100) as u64)
            .await;
        assert_eq!(res.unwrap(), 100);
        assert_eq!(buf.len(), 100);
        let (res, _) = file
            .read_fixed_at(pool.try_take().unwrap(), (6 * BLOCK) as u64)
            .await;
        assert_eq!(res.unwrap(), 0);
        file.close().await.unwrap();
        let disk = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(disk.len(), 6 * BLOCK);
        assert_eq!(&disk[10..210], &pattern(9, BLOCK)[100..300], "{mode}");
        for blk in 1..6 {
            assert_eq!(
                &disk[blk * BLOCK..(blk + 1) * BLOCK],
                &pattern(blk, BLOCK)[..],
                "{mode}: block {blk} on disk"
            );
        }
        drop(buf);
        assert_eq!(pool.available(), 8);
    }
}

/// Writes every initialized byte of `buf` with `write_fixed` (re-sending the rest after a
/// short write).
async fn write_fixed_all(s: &TcpStream, buf: FixedBuf) -> FixedBuf {
    let total = buf.len();
    let mut sent = 0;
    let mut buf = buf;
    while sent < total {
        let (res, slice) = s.write_fixed(buf.slice(sent..total)).await;
        buf = slice.into_inner();
        let n = res.unwrap();
        assert!(n > 0, "write_fixed wrote nothing");
        sent += n;
    }
    buf
}

/// 1 MiB goes from one hoop stream to another through `write_fixed`/`read_fixed`, in order,
/// with both ends on the same pool (so both take the fixed path on io_uring).
#[hoop::test]
async fn socket_round_trip() {
    for (mode, make) in MODES {
        const CHUNK: usize = 16 * 1024;
        const TOTAL: usize = 1024 * 1024;
        let pool = make(8, CHUNK).unwrap();
        check_mode(&pool, mode).await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = {
            let pool = pool.clone();
            hoop::spawn(async move {
                let (s, _) = listener.accept().await.unwrap();
                let mut got = Vec::with_capacity(TOTAL);
                while got.len() < TOTAL {
                    let buf = pool.take().await;
                    let (res, buf) = s.read_fixed(buf).await;
                    let n = res.unwrap();
                    assert!(n > 0, "end of stream after {} bytes", got.len());
                    assert_eq!(buf.len(), n);
                    got.extend_from_slice(&buf);
                }
                got
            })
        };
        let data = pattern(1, TOTAL);
        let client = TcpStream::connect(addr).await.unwrap();
        let send = async {
            for chunk in data.chunks(CHUNK - 1000) {
                let mut buf = pool.take().await;
                buf.copy_from(chunk);
                drop(write_fixed_all(&client, buf).await);
            }
        };
        timeout(LIMIT, send).await.expect("send within 10 s");
        let got = timeout(LIMIT, reader)
            .await
            .expect("receive within 10 s")
            .unwrap();
        assert!(got == data, "{mode}: received bytes differ");
        assert_eq!(pool.available(), 8, "{mode}");
    }
}

/// A std peer: what `write_fixed` sends arrives, and what the peer sends `read_fixed` reads.
#[hoop::test]
async fn socket_with_std_peer() {
    let pool = FixedBufPool::new(2, BLOCK).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut b = vec![0u8; 3000];
        s.read_exact(&mut b).unwrap();
        // Echo it back, reversed.
        b.reverse();
        s.write_all(&b).unwrap();
        b
    });
    let s = TcpStream::connect(addr).await.unwrap();
    let mut buf = pool.try_take().unwrap();
    buf.copy_from(&pattern(3, 3000));
    drop(timeout(LIMIT, write_fixed_all(&s, buf)).await.unwrap());
    let mut got = Vec::new();
    while got.len() < 3000 {
        let (res, buf) = timeout(LIMIT, s.read_fixed(pool.try_take().unwrap()))
            .await
            .unwrap();
        let n = res.unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let mut expect = pattern(3, 3000);
    expect.reverse();
    assert_eq!(got, expect);
    assert_eq!(peer.join().unwrap(), expect);
}

/// With every buffer out, `try_take` fails and `take().await` waits until one is dropped;
/// waiters are served in order; a waiter dropped after being woken passes its turn on.
#[hoop::test]
async fn exhausted_pool_waits_for_a_buffer() {
    let pool = FixedBufPool::new(2, BLOCK).unwrap();
    let a = pool.try_take().unwrap();
    let b = pool.try_take().unwrap();
    assert_ne!(a.index(), b.index());
    assert!(pool.try_take().is_none());
    assert_eq!(pool.available(), 0);
    // Nothing comes back: take() waits (until the timeout gives up).
    assert!(timeout(Duration::from_millis(20), pool.take())
        .await
        .is_err());

    // A buffer dropped later wakes the waiter.
    let dropper = hoop::spawn(async move {
        sleep(Duration::from_millis(30)).await;
        drop(a);
    });
    let c = timeout(LIMIT, pool.take())
        .await
        .expect("take after a drop");
    dropper.await.unwrap();
    assert_eq!(pool.available(), 0);

    // First come, first served: three waiters queue in order.
    let order = Rc::new(RefCell::new(Vec::new()));
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let (pool, order) = (pool.clone(), order.clone());
            hoop::spawn(async move {
                let buf = timeout(LIMIT, pool.take()).await.expect("waiter served");
                order.borrow_mut().push(i);
                sleep(Duration::from_millis(5)).await;
                drop(buf);
            })
        })
        .collect();
    // Let all three queue up.
    sleep(Duration::from_millis(10)).await;
    assert!(order.borrow().is_empty());
    drop(c);
    drop(b);
    for w in waiters {
        timeout(LIMIT, w).await.unwrap().unwrap();
    }
    assert_eq!(*order.borrow(), vec![0, 1, 2]);
    assert_eq!(pool.available(), 2);

    // A woken waiter that is dropped before it runs hands its turn to the next one.
    let x = pool.try_take().unwrap();
    let y = pool.try_take().unwrap();
    let mut first = Box::pin(pool.take());
    assert!(futures_poll_once(first.as_mut()).await.is_none());
    let second = {
        let pool = pool.clone();
        hoop::spawn(async move { timeout(LIMIT, pool.take()).await.is_ok() })
    };
    sleep(Duration::from_millis(5)).await;
    drop(x); // wakes `first`
    drop(first); // which never takes it
    assert!(second.await.unwrap(), "the second waiter was never served");
    drop(y);
    assert_eq!(pool.available(), 2);
}

/// Polls `fut` once; `Some` if it completed.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut fut: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

/// Invariant 1: a `read_fixed` dropped in flight (a socket with no data, then a pipe) keeps
/// its buffer until the driver reaped the cancel; only then does the buffer return to the
/// pool. The stream still works afterwards.
#[hoop::test]
async fn dropped_read_returns_buffer_after_cancel() {
    let pool = FixedBufPool::new(4, BLOCK).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = TcpStream::connect(addr).await.unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let before = hoop::runtime::current_counters().unwrap().cancels_submitted;
    for round in 0..5 {
        let buf = pool.try_take().unwrap();
        let r = timeout(Duration::from_millis(10), server.read_fixed(buf)).await;
        assert!(r.is_err(), "round {round}: read completed without data");
        // Dropped, but the operation still owns the buffer: its cancel is not reaped yet.
        assert_eq!(
            pool.available(),
            3,
            "round {round}: buffer returned before the cancel"
        );
        sleep(Duration::from_millis(10)).await;
        assert_eq!(pool.available(), 4, "round {round}: buffer not returned");
    }
    let after = hoop::runtime::current_counters().unwrap().cancels_submitted;
    assert!(after - before >= 5, "{} cancels", after - before);
    // The connection is intact: data sent now is read whole.
    let mut out = pool.try_take().unwrap();
    out.copy_from(b"after the cancels");
    let (res, _) = client.write_fixed(out).await;
    res.unwrap();
    let (res, buf) = timeout(LIMIT, server.read_fixed(pool.try_take().unwrap()))
        .await
        .unwrap();
    assert_eq!(res.unwrap(), 17);
    assert_eq!(&buf[..], b"after the cancels");
    drop(buf);

    // The same on a pipe, read at its current position.
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both fds are new and owned by nothing else.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (rx, tx) = (File::from(rx), File::from(tx));
    let buf = pool.try_take().unwrap();
    let r = timeout(
        Duration::from_millis(10),
        rx.read_fixed_at(buf, op::CURRENT_POS),
    )
    .await;
    assert!(r.is_err(), "pipe read completed without data");
    assert_eq!(
        pool.available(),
        3,
        "pipe: buffer returned before the cancel"
    );
    sleep(Duration::from_millis(10)).await;
    assert_eq!(pool.available(), 4, "pipe: buffer not returned");
    let mut out = pool.try_take().unwrap();
    out.copy_from(b"pipe");
    let (res, _) = tx.write_fixed_at(out, op::CURRENT_POS).await;
    assert_eq!(res.unwrap(), 4);
    let (res, buf) = timeout(
        LIMIT,
        rx.read_fixed_at(pool.try_take().unwrap(), op::CURRENT_POS),
    )
    .await
    .unwrap();
    assert_eq!(res.unwrap(), 4);
    assert_eq!(&buf[..], b"pipe");
}

/// The buffers are page-aligned, so an `O_DIRECT` file reads straight into them (skipped, with
/// a printed reason, where the file system refuses `O_DIRECT`).
#[hoop::test]
async fn o_direct_read_into_fixed_buf() {
    let _whole = common::faults_off(
        &["short_io"],
        "it checks each O_DIRECT read's exact length, the real short read at the end of the \
         file included",
    );
    let pool = FixedBufPool::new(4, 2 * BLOCK).unwrap();
    let all: Vec<FixedBuf> = (0..4).map(|_| pool.try_take().unwrap()).collect();
    for b in &all {
        let addr = b.stable_ptr() as usize;
        assert_eq!(addr % BLOCK, 0, "buffer {} not page-aligned", b.index());
    }
    drop(all);
    let path = temp_path(&format!("direct-{:?}", current_driver()));
    let data = pattern(7, 8 * BLOCK);
    std::fs::write(&path, &data).unwrap();
    let opened = File::options()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .await;
    let file = match opened {
        Ok(f) => f,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            eprintln!(
                "skip O_DIRECT: {} refuses it: {e}",
                std::env::temp_dir().display()
            );
            return;
        }
    };
    let (res, buf) = file
        .read_fixed_at(pool.try_take().unwrap(), (3 * BLOCK) as u64)
        .await;
    let n = match res {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let _ = std::fs::remove_file(&path);
            eprintln!("skip O_DIRECT: reads refused: {e}");
            return;
        }
        Err(e) => panic!("O_DIRECT read failed: {e}"),
    };
    assert_eq!(n, 2 * BLOCK);
    assert_eq!(&buf[..], &data[3 * BLOCK..5 * BLOCK]);
    // The last block: a short read at the end of the file.
    let (res, buf) = file
        .read_fixed_at(pool.try_take().unwrap(), (7 * BLOCK) as u64)
        .await;
    assert_eq!(res.unwrap(), BLOCK);
    assert_eq!(&buf[..], &data[7 * BLOCK..]);
    drop(buf);
    file.close().await.unwrap();
    std::fs::remove_file(&path).unwrap();
}

/// A ring has one registered table: a second pool falls back to unregistered mode (and still
/// works); once the first pool and all its buffers are gone, its table is unregistered and a
/// new pool registers again. Also reports whether a pool over RLIMIT_MEMLOCK (16 MiB here)
/// registers.
#[hoop::test]
async fn one_registered_table_per_ring() {
    let first = FixedBufPool::new(4, BLOCK).unwrap();
    let second = FixedBufPool::new(4, BLOCK).unwrap();
    assert_eq!(first.is_registered(), is_uring());
    assert!(!second.is_registered(), "two tables on one ring");
    let why = second.unregistered_reason().expect("a reason");
    if is_uring() {
        assert!(first.unregistered_reason().is_none());
        assert_eq!(why.raw_os_error(), Some(libc::EBUSY), "{why}");
    } else {
        assert_eq!(why.kind(), std::io::ErrorKind::Unsupported, "{why}");
    }
    // The second pool works, through plain reads and writes.
    let path = temp_path(&format!("second-{:?}", current_driver()));
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .await
        .unwrap();
    let mut buf = second.try_take().unwrap();
    buf.copy_from(b"second pool");
    let (res, _) = file.write_fixed_at(buf, 0).await;
    assert_eq!(res.unwrap(), 11);
    let (res, buf) = file.read_fixed_at(second.try_take().unwrap(), 0).await;
    assert_eq!(res.unwrap(), 11);
    assert_eq!(&buf[..], b"second pool");
    drop(buf);

    // A buffer keeps the pool (and its registration) alive after the pool handle is gone.
    let kept = first.try_take().unwrap();
    drop(first);
    assert!(!FixedBufPool::new(1, BLOCK).unwrap().is_registered());
    drop(kept);
    let third = FixedBufPool::new(4, BLOCK).unwrap();
    assert_eq!(third.is_registered(), is_uring(), "table not unregistered");
    drop(third);

    // Over RLIMIT_MEMLOCK: may be refused on old kernels only; works either way.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a local struct.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    // One fixed write and read of 64 KiB, each checked whole: the subject is the pool's
    // registration, not short transfers (the files' tests cover those).
    let _whole = common::faults_off(
        &["short_io"],
        "one 64 KiB fixed write and read of a 16 MiB pool are checked whole",
    );
    let big = FixedBufPool::new(256, 64 * 1024).unwrap();
    eprintln!(
        "driver={:?}: a 16 MiB pool (RLIMIT_MEMLOCK {} KiB) registered: {} ({:?})",
        current_driver(),
        lim.rlim_cur / 1024,
        big.is_registered(),
        big.unregistered_reason()
    );
    let mut buf = big.try_take().unwrap();
    buf.copy_from(&pattern(4, 64 * 1024));
    let (res, _) = file.write_fixed_at(buf, 0).await;
    assert_eq!(res.unwrap(), 64 * 1024);
    let (res, buf) = file.read_fixed_at(big.try_take().unwrap(), 0).await;
    assert_eq!(res.unwrap(), 64 * 1024);
    assert_eq!(&buf[..], &pattern(4, 64 * 1024)[..]);
    drop(buf);
    file.close().await.unwrap();
    std::fs::remove_file(&path).unwrap();
}

/// A `FixedBuf` is an ordinary `IoBuf`/`IoBufMut` too: `write`/`read` on a socket and
/// `write_at`/`read_at` on a file work with it.
#[hoop::test]
async fn fixed_buf_works_with_ordinary_ops() {
    let pool = FixedBufPool::new(2, BLOCK).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    // A reset (injected under a fault plan) ends the exchange: it runs again on a new
    // connection, and the buffers of the attempt go back to the pool with their futures.
    let got = common::resets::retry_async("plain ops on a TCP pair", |_| async {
        let client = TcpStream::connect(listener.local_addr()?).await?;
        let (server, _) = listener.accept().await?;
        let mut out = pool.try_take().expect("a free buffer");
        out.copy_from(b"plain ops");
        let (res, _out) = client.write_all(out).await;
        res?;
        let read = server.read_exact(pool.try_take().expect("a free buffer").slice(..9));
        let (res, buf) = timeout(LIMIT, read).await.expect("the read within LIMIT");
        res?;
        Ok(buf.into_inner()[..].to_vec())
    })
    .await;
    assert_eq!(&got[..], b"plain ops");

    let path = temp_path(&format!("plain-{:?}", current_driver()));
    let file = File::create(&path).await.unwrap();
    let mut out = pool.try_take().unwrap();
    out.copy_from(&pattern(5, BLOCK));
    let (res, _) = file.write_at(out, 0).await;
    assert_eq!(res.unwrap(), BLOCK);
    file.close().await.unwrap();
    let file = File::open(&path).await.unwrap();
    let (res, buf) = file.read_at(pool.try_take().unwrap(), 0).await;
    assert_eq!(res.unwrap(), BLOCK);
    assert_eq!(&buf[..], &pattern(5, BLOCK)[..]);
    std::fs::remove_file(&path).unwrap();
}

/// A pool (and a buffer) may outlive its runtime: dropping them afterwards unregisters and
/// frees the memory without touching a dead ring.
#[test]
fn pool_outlives_runtime() {
    // A loop over named drivers: the driver matrix's opt-outs.
    let _faults = common::matrix_faults_off();
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        let Ok(rt) = hoop::Runtime::builder().driver(kind).build() else {
            eprintln!("skip on {kind}: no runtime");
            continue;
        };
        let (pool, buf) = rt.block_on(async {
            let pool = FixedBufPool::new(2, BLOCK).unwrap();
            let mut buf = pool.try_take().unwrap();
            buf.copy_from(b"kept");
            (pool, buf)
        });
        drop(rt);
        assert_eq!(pool.available(), 1);
        assert_eq!(&buf[..], b"kept");
        drop(pool);
        drop(buf);
    }
}
