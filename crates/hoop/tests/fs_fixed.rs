//! Registered files and aligned buffers: `AlignedBuf` with `O_DIRECT`,
//! `File::register`/`into_fixed` and the `FixedFile` operations, slot and fd accounting, many
//! concurrent reads through one registered file, and the plain-fd fallback (the epoll driver,
//! an IOPOLL ring).
//!
//! Each test's files live in a directory of its own under `std::env::temp_dir()` (ext4 here;
//! where `O_DIRECT` is refused the test says `skip on KIND: ...` and returns), and leak checks
//! count the process's open fds that refer to files in that directory, so tests running in
//! parallel (and their runtimes' own fds) do not disturb them. Every loop is bounded and every
//! body has a time limit.

use hoop_test_support as common;

use std::future::Future;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use hoop::driver::Driver;
use hoop::fs::{AlignedBuf, File, FixedFile, OpenOptions};
use hoop::runtime::current_driver;
use hoop::{DriverKind, FixedBufPool, IoBuf};

const BLOCK: usize = 4096;

fn kind() -> DriverKind {
    current_driver().expect("inside a runtime")
}

fn driver() -> Driver {
    Driver::current().expect("inside a runtime")
}

/// Whether a registered file is expected to land in a slot on this runtime.
fn expect_fixed() -> bool {
    let ok = driver().supports_registered_files();
    if kind() == DriverKind::Uring && !ok {
        common::skip(
            kind(),
            "slot checks: this kernel cannot put files into the fixed-file table (needs 5.19)",
        );
    }
    ok
}

/// Runs `f` with a time limit (a hang fails the test instead of blocking the suite).
async fn limit<F: Future>(f: F) -> F::Output {
    hoop::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("test body timed out")
}

use hoop_test_support::TempDir;

/// Open fds of this process that refer to files in `dir`. Counting only these (rather than
/// every entry of /proc/self/fd) keeps the check exact while other tests start and stop
/// runtimes, whose fds come and go concurrently.
fn open_fds(dir: &TempDir) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    entries
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(&dir.0))
        .count()
}

/// Waits (bounded, 5 s) until `cond` holds; returns whether it did.
async fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        hoop::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        let take = r.len().min(len - v.len());
        v.extend_from_slice(&r[..take]);
    }
    v
}

/// Opens `path` read-write with `O_DIRECT` (created, truncated), or `None` after a visible skip
/// line if the file system refuses `O_DIRECT` (`EINVAL`, e.g. an old tmpfs).
async fn open_direct(path: &std::path::Path) -> Option<File> {
    let res = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .await;
    match res {
        Ok(f) => Some(f),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            common::skip(
                kind(),
                &format!("O_DIRECT refused by the file system of {path:?}: {e}"),
            );
            None
        }
        Err(e) => panic!("open {path:?} with O_DIRECT: {e}"),
    }
}

/// `O_DIRECT` round trip: aligned blocks written with `write_all_at` at aligned offsets come
/// back with `read_exact_at`, through the `File` and through a registered `FixedFile`, and the
/// file holds them (checked with std).
#[hoop::test]
async fn o_direct_round_trip_with_aligned_buf() {
    limit(async {
        let dir = TempDir::new("fs-fixed", "direct");
        let path = dir.join("data");
        let Some(file) = open_direct(&path).await else {
            return;
        };
        let data = random_bytes(8 * BLOCK, 11);
        // Written block by block, out of order.
        for blk in [3usize, 0, 7, 5, 1, 6, 2, 4] {
            let mut buf = AlignedBuf::for_direct_io(BLOCK).unwrap();
            assert_eq!(buf.stable_ptr() as usize % BLOCK, 0);
            buf.copy_from(&data[blk * BLOCK..(blk + 1) * BLOCK]);
            let (res, buf) = file.write_all_at(buf, (blk * BLOCK) as u64).await;
            res.unwrap_or_else(|e| panic!("O_DIRECT write of block {blk}: {e}"));
            assert_eq!(buf.len(), BLOCK);
        }
        // One read of the whole file into a big aligned buffer.
        let (res, buf) = file
            .read_exact_at(AlignedBuf::for_direct_io(8 * BLOCK).unwrap().slice(..), 0)
            .await;
        res.unwrap();
        let buf = buf.into_inner();
        assert!(buf[..] == data[..], "O_DIRECT read through the File");
        // The same through a registered file (which shares the O_DIRECT open file).
        let fixed = file.register().await.unwrap();
        assert_eq!(fixed.is_fixed(), expect_fixed());
        let mut buf = AlignedBuf::new(2 * BLOCK, 512).unwrap();
        for blk in (0..8).step_by(2) {
            let cap = buf.capacity();
            buf.set_len(cap); // read_exact fills the length
            let (res, b) = fixed.read_exact_at(buf, (blk * BLOCK) as u64).await;
            buf = b;
            res.unwrap();
            assert!(
                buf[..] == data[blk * BLOCK..(blk + 2) * BLOCK],
                "O_DIRECT read of blocks {blk}.. through the FixedFile"
            );
        }
        // Writes through the slot, read back with std (O_DIRECT bypasses the page cache, so
        // what std reads comes from the device).
        let new = AlignedBuf::zeroed(BLOCK, BLOCK).unwrap();
        let (res, _) = fixed.write_all_at(new, 0).await;
        res.unwrap();
        fixed.sync_all().await.unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len(), 8 * BLOCK);
        assert!(on_disk[..BLOCK].iter().all(|&b| b == 0));
        assert!(on_disk[BLOCK..] == data[BLOCK..]);
        fixed.close().await.unwrap();
        file.close().await.unwrap();
    })
    .await
}

/// `register` leaves the `File` usable; `read_exact_at`, `write_all_at`, `read_fixed_at`,
/// `write_fixed_at` (registered buffers), `sync_all`/`sync_data` through the `FixedFile` see and
/// make the same bytes as the `File`; `close` frees the slot and the duplicate fd.
#[hoop::test]
async fn register_reads_and_writes_through_the_slot() {
    limit(async {
        let dir = TempDir::new("fs-fixed", "register");
        let path = dir.join("f");
        let before = open_fds(&dir);
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
            .unwrap();
        let fixed = file.register().await.unwrap();
        let expect = expect_fixed();
        assert_eq!(fixed.is_fixed(), expect);
        assert_eq!(fixed.slot().is_some(), expect);
        assert_eq!(fixed.fallback_reason().is_none(), expect);
        assert_eq!(fixed.as_file().is_none(), expect);
        if expect {
            assert_eq!(driver().fixed_files_in_use(), 1);
            // The duplicate fd was closed once the slot held the file.
            assert_eq!(open_fds(&dir), before + 1);
        } else {
            let e = fixed.fallback_reason().unwrap();
            if kind() == DriverKind::Epoll {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
            }
            // The fallback keeps the duplicate.
            assert_eq!(open_fds(&dir), before + 2);
        }

        // write_all_at / read_exact_at, both ways between File and FixedFile.
        let a = random_bytes(3 * BLOCK + 100, 1);
        let (res, _) = fixed.write_all_at(a.clone(), 0).await;
        res.unwrap();
        let (res, got) = file.read_exact_at(vec![0u8; a.len()], 0).await;
        res.unwrap();
        assert!(got == a, "File reads what the FixedFile wrote");
        let b = random_bytes(1000, 2);
        let (res, _) = file.write_all_at(b.clone(), 50).await;
        res.unwrap();
        let (res, got) = fixed.read_exact_at(vec![0u8; 1000], 50).await;
        res.unwrap();
        assert!(got == b, "FixedFile reads what the File wrote");
        let (res, _) = fixed
            .read_exact_at(vec![0u8; BLOCK], a.len() as u64 - 10)
            .await;
        assert_eq!(res.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        let (res, buf) = fixed.read_at(vec![0u8; 16], 1 << 30).await;
        assert_eq!(res.unwrap(), 0, "read past the end");
        drop(buf);

        // Registered buffers on a registered file.
        let pool = FixedBufPool::new(4, BLOCK).unwrap();
        assert_eq!(pool.is_registered(), kind() == DriverKind::Uring);
        let c = random_bytes(2 * BLOCK, 3);
        for blk in [1usize, 0] {
            let mut buf = pool.try_take().unwrap();
            buf.copy_from(&c[blk * BLOCK..(blk + 1) * BLOCK]);
            let (res, _) = fixed
                .write_fixed_at(buf, (4 + blk) as u64 * BLOCK as u64)
                .await;
            assert_eq!(res.unwrap(), BLOCK);
        }
        for blk in [0usize, 1] {
            let (res, buf) = fixed
                .read_fixed_at(pool.try_take().unwrap(), (4 + blk) as u64 * BLOCK as u64)
                .await;
            assert_eq!(res.unwrap(), BLOCK);
            assert!(buf[..] == c[blk * BLOCK..(blk + 1) * BLOCK], "block {blk}");
        }
        assert_eq!(pool.available(), 4);
        fixed.sync_data().await.unwrap();
        fixed.sync_all().await.unwrap();

        // std sees all of it.
        let mut expected = a.clone();
        expected[50..1050].copy_from_slice(&b);
        expected.resize(4 * BLOCK, 0);
        expected.extend_from_slice(&c);
        assert!(std::fs::read(&path).unwrap() == expected, "file contents");

        fixed.close().await.unwrap();
        assert_eq!(driver().fixed_files_in_use(), 0, "close frees the slot");
        assert_eq!(open_fds(&dir), before + 1, "only the File is left");
        file.close().await.unwrap();
        assert_eq!(open_fds(&dir), before);
    })
    .await
}

/// `into_fixed` closes the original fd (the fd count is back to where it was before the open)
/// and dropping the `FixedFile` frees its slot; the same for a dropped `register`ed file, whose
/// `File` stays open. A `register` future dropped in flight leaks neither a slot nor an fd.
#[hoop::test]
async fn into_fixed_closes_the_fd_and_drop_frees_the_slot() {
    limit(async {
        let dir = TempDir::new("fs-fixed", "into");
        let path = dir.join("f");
        std::fs::write(&path, b"into fixed").unwrap();
        let expect = expect_fixed();
        let before = open_fds(&dir);

        let file = File::open(&path).await.unwrap();
        assert_eq!(open_fds(&dir), before + 1);
        let fixed = file.into_fixed().await.unwrap();
        assert_eq!(fixed.is_fixed(), expect);
        if expect {
            assert_eq!(open_fds(&dir), before, "into_fixed closed the fd");
            assert_eq!(driver().fixed_files_in_use(), 1);
        } else {
            assert_eq!(open_fds(&dir), before + 1, "the fallback keeps the fd");
        }
        let (res, buf) = fixed.read_at(Vec::with_capacity(64), 0).await;
        assert_eq!(&buf[..res.unwrap()], b"into fixed");
        drop(fixed);
        assert!(
            wait_until(|| driver().fixed_files_in_use() == 0 && open_fds(&dir) == before).await,
            "dropped FixedFile: {} slots in use, {} fds (expected {before})",
            driver().fixed_files_in_use(),
            open_fds(&dir)
        );

        // Many at once: each gets its own slot, and all are freed.
        let mut all = Vec::new();
        for _ in 0..20 {
            let f = File::open(&path).await.unwrap();
            all.push(f.into_fixed().await.unwrap());
        }
        if expect {
            let mut slots: Vec<u32> = all.iter().filter_map(FixedFile::slot).collect();
            slots.sort_unstable();
            slots.dedup();
            assert_eq!(slots.len(), 20, "distinct slots");
            assert_eq!(driver().fixed_files_in_use(), 20);
            assert_eq!(open_fds(&dir), before);
        }
        drop(all);
        assert!(
            wait_until(|| driver().fixed_files_in_use() == 0 && open_fds(&dir) == before).await,
            "20 dropped FixedFiles: {} slots in use, {} fds (expected {before})",
            driver().fixed_files_in_use(),
            open_fds(&dir)
        );

        // register: the File stays; dropping the FixedFile frees the slot (or the duplicate).
        let file = File::open(&path).await.unwrap();
        let fixed = file.register().await.unwrap();
        drop(fixed);
        assert!(
            wait_until(|| driver().fixed_files_in_use() == 0 && open_fds(&dir) == before + 1).await,
            "dropped registered file"
        );
        let (res, buf) = file.read_at(Vec::with_capacity(64), 0).await;
        assert_eq!(
            &buf[..res.unwrap()],
            b"into fixed",
            "the File is still usable"
        );

        // A register future polled once (its files update is in flight) and dropped.
        {
            let mut fut = pin!(file.register());
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                drop(r.unwrap());
            }
        }
        assert!(
            wait_until(|| driver().fixed_files_in_use() == 0 && open_fds(&dir) == before + 1).await,
            "dropped register future: {} slots in use, {} fds (expected {})",
            driver().fixed_files_in_use(),
            open_fds(&dir),
            before + 1
        );
        file.close().await.unwrap();
        assert_eq!(open_fds(&dir), before);
    })
    .await
}

/// 32 tasks x 50 reads of random 4 KiB blocks (some with registered buffers) through one
/// `FixedFile`, each checked against the file's contents.
#[hoop::test]
async fn many_concurrent_reads_through_one_fixed_file() {
    limit(async {
        const TASKS: usize = 32;
        const READS: usize = 50;
        const BLOCKS: usize = 64;
        let dir = TempDir::new("fs-fixed", "concurrent");
        let path = dir.join("f");
        let data = Rc::new(random_bytes(BLOCKS * BLOCK, 42));
        std::fs::write(&path, &data[..]).unwrap();
        let fixed = Rc::new(File::open(&path).await.unwrap().into_fixed().await.unwrap());
        assert_eq!(fixed.is_fixed(), expect_fixed());
        let pool = FixedBufPool::new(8, BLOCK).unwrap();
        let mut handles = Vec::new();
        for t in 0..TASKS {
            let (fixed, data, pool) = (fixed.clone(), data.clone(), pool.clone());
            handles.push(hoop::spawn(async move {
                let mut seed = t as u64 * 7919 + 1;
                let mut buf = Vec::with_capacity(BLOCK);
                for i in 0..READS {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let blk = (seed >> 33) as usize % BLOCKS;
                    let want = &data[blk * BLOCK..(blk + 1) * BLOCK];
                    if i % 5 == 4 {
                        let fb = pool.take().await;
                        let (res, fb) = fixed.read_fixed_at(fb, (blk * BLOCK) as u64).await;
                        assert_eq!(res.unwrap(), BLOCK, "task {t} read {i}");
                        assert!(
                            fb[..] == *want,
                            "task {t} read {i}: block {blk} (fixed buf)"
                        );
                    } else {
                        buf.resize(BLOCK, 0); // read_exact fills the length
                        let (res, b) = fixed.read_exact_at(buf, (blk * BLOCK) as u64).await;
                        buf = b;
                        res.unwrap();
                        assert!(buf[..] == *want, "task {t} read {i}: block {blk}");
                    }
                }
                READS
            }));
        }
        let mut total = 0;
        for h in handles {
            total += h.await.unwrap();
        }
        assert_eq!(total, TASKS * READS);
        let fixed = Rc::try_unwrap(fixed).expect("every task is done");
        fixed.close().await.unwrap();
        assert_eq!(driver().fixed_files_in_use(), 0);
    })
    .await
}

/// The fallback, forced by an IOPOLL ring (which refuses `IORING_OP_CLOSE`, so hoop keeps
/// registered files out of its table): the `FixedFile` holds the plain fd and `O_DIRECT`
/// reads through it work. Skipped, visibly, where the ring or `O_DIRECT` is refused, or where
/// the device has no poll queues (the read fails with `EOPNOTSUPP`).
#[test]
fn fallback_on_an_iopoll_ring_still_works() {
    if let Some(reason) = hoop::__private::uring_unavailable() {
        common::skip(
            DriverKind::Uring,
            &format!("io_uring unavailable: {reason}"),
        );
        return;
    }
    let dir = TempDir::new("fs-fixed", "iopoll");
    let path = dir.join("f");
    let data = random_bytes(4 * BLOCK, 9);
    std::fs::write(&path, &data).unwrap();
    let before = open_fds(&dir);
    let outcome = common::bounded(60, move || {
        let rt = match common::builder(DriverKind::Uring).iopoll(true).build() {
            Ok(rt) => rt,
            Err(e) => return Err(format!("no IOPOLL ring here: {e}")),
        };
        rt.block_on(async move {
            assert!(!driver().supports_registered_files(), "IOPOLL ring");
            // Opened with std: an IOPOLL ring refuses IORING_OP_OPENAT.
            let file = match std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
            {
                Ok(f) => File::from_std(f),
                Err(e) => return Err(format!("O_DIRECT refused in {path:?}: {e}")),
            };
            let fixed = file.into_fixed().await.unwrap();
            assert!(!fixed.is_fixed());
            assert_eq!(fixed.slot(), None);
            assert!(fixed.as_file().is_some());
            let e = fixed.fallback_reason().expect("a reason");
            assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
            let mut buf = AlignedBuf::for_direct_io(BLOCK).unwrap();
            let mut outcome = Ok(());
            for blk in 0..4 {
                let cap = buf.capacity();
                buf.set_len(cap); // read_exact fills the length
                let (res, b) = fixed.read_exact_at(buf, (blk * BLOCK) as u64).await;
                buf = b;
                match res {
                    Ok(()) => {}
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP)) => {
                        outcome = Err(format!("reads: the device has no poll queues: {e}"));
                        break;
                    }
                    Err(e) => panic!("O_DIRECT read on the IOPOLL ring: {e}"),
                }
                assert!(
                    buf[..] == data[blk * BLOCK..(blk + 1) * BLOCK],
                    "block {blk}"
                );
            }
            // An IOPOLL ring refuses IORING_OP_CLOSE: the fallback's close is a close(2), and
            // it closes the fd (checked below).
            fixed.close().await.unwrap();
            outcome
        })
    });
    if let Err(reason) = outcome {
        common::skip(DriverKind::Uring, &format!("IOPOLL fallback: {reason}"));
    }
    assert_eq!(open_fds(&dir), before, "no fd leaked");
}

/// An operation on a slot the table does not hold (io_uring), or on any slot on the epoll
/// driver (which has no table), fails with an `io::Error`, never a panic.
#[hoop::test]
async fn operations_on_a_bad_slot_are_errors() {
    use hoop::driver::op::{self, Target};
    use hoop::driver::Op;
    limit(async {
        // A slot number past any table hoop registers (at most 131,072 slots).
        let slot = Target::Fixed(1 << 20);
        let (res, _) = Op::new(op::Read::new(slot, vec![0u8; 16], 0)).await;
        let e = res.unwrap_err();
        let (res, _) = Op::new(op::Write::new(slot, b"x".to_vec(), 0)).await;
        let e2 = res.unwrap_err();
        let e3 = Op::new(op::Fsync::new(slot, false)).await.unwrap_err();
        if kind() == DriverKind::Epoll {
            for e in [&e, &e2, &e3] {
                assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
            }
        } else {
            // EBADF, or ENXIO before any table was registered.
            for e in [&e, &e2, &e3] {
                assert!(
                    matches!(e.raw_os_error(), Some(libc::EBADF | libc::ENXIO)),
                    "{e}"
                );
            }
        }
    })
    .await
}
