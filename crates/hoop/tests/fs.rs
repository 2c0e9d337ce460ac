//! hoop::fs against real files in a private temporary directory.
//!
//! Several tests count the process's open fds (entries of /proc/self/fd), which every thread
//! shares: every test takes one lock first (before it creates a file or a runtime) and holds it
//! to its end (after its temp dir is removed), so they run one at a time. Every test that uses a
//! runtime runs on each driver (io_uring, then epoll: files on its blocking pool), each run in a
//! temporary directory of its own.

use hoop_test_support as common;
use hoop_test_support::fd_count;

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{each_driver, DriverKind};
use hoop::fs::{self, File, OpenOptions};
use hoop::StaticBuf;

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A directory of its own under the system temp dir, removed on drop (also when a test fails).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("hoop-fs-test-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        TempDir(path)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `f` on a fresh runtime of `kind`, with a time limit. The caller holds the lock.
fn run<F: Future>(kind: DriverKind, f: F) -> F::Output {
    let rt = common::runtime(kind);
    rt.block_on(async {
        hoop::time::timeout(Duration::from_secs(30), f)
            .await
            .expect("test timed out")
    })
}

/// The fd count just after a runtime of `kind` was dropped, once the runtime's own fds are
/// closed. io_uring closes them in the drop. epoll's blocking-pool threads are not joined (one
/// may be stuck in a system call) and share the driver's wake-up eventfd, which the last of them
/// closes as it exits, a moment after the drop: wait for `expected`, up to 2 s (a leaked file
/// stays leaked however long we wait).
fn fd_count_after_runtime_drop(kind: DriverKind, expected: usize) -> usize {
    if kind == DriverKind::Epoll {
        let start = std::time::Instant::now();
        while fd_count() != expected && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    fd_count()
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

fn nul_path(dir: &TempDir) -> PathBuf {
    let mut s = dir.join("bad").into_os_string();
    s.push("\0name");
    PathBuf::from(s)
}

#[test]
fn open_missing_file_is_not_found() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("missing-{kind}"));
        run(kind, async {
            let e = File::open(dir.join("nope")).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
            let e = fs::metadata(dir.join("nope")).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
            let e = fs::remove_file(dir.join("nope")).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
            let e = fs::read(dir.join("nope")).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        });
    });
}

#[test]
fn create_new_on_existing_file_is_already_exists() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("create-new-{kind}"));
        let path = dir.join("f");
        run(kind, async {
            let f = File::options()
                .write(true)
                .create_new(true)
                .open(&path)
                .await
                .unwrap();
            f.close().await.unwrap();
            let e = File::options()
                .write(true)
                .create_new(true)
                .open(&path)
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        });
    });
}

#[test]
fn write_and_read_at_positions() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("rw-{kind}"));
        let path = dir.join("f");
        run(kind, async {
            let f = File::create(&path).await.unwrap();
            let (res, buf) = f.write_at(b"hello world".to_vec(), 0).await;
            assert_eq!(res.unwrap(), 11);
            assert_eq!(buf, b"hello world");
            let (res, _) = f.write_all_at(StaticBuf(b"HOOP"), 6).await;
            res.unwrap();
            f.sync_all().await.unwrap();
            f.sync_data().await.unwrap();
            f.close().await.unwrap();

            assert_eq!(std::fs::read(&path).unwrap(), b"hello HOOPd");

            let f = File::open(&path).await.unwrap();
            let (res, buf) = f.read_at(Vec::with_capacity(64), 0).await;
            assert_eq!(res.unwrap(), 11);
            assert_eq!(buf, b"hello HOOPd");
            let (res, buf) = f.read_at(Vec::with_capacity(4), 6).await;
            assert_eq!(res.unwrap(), 4);
            assert_eq!(buf, b"HOOP");
            let (res, buf) = f.read_at(Vec::with_capacity(4), 11).await;
            assert_eq!(res.unwrap(), 0, "read at EOF");
            assert!(buf.is_empty());
            let (res, buf) = f.read_exact_at(vec![0u8; 5], 3).await;
            res.unwrap();
            assert_eq!(&buf[..], b"lo HO");
            // Writing to a read-only file fails with the kernel's error, not a panic.
            let (res, _) = f.write_at(b"x".to_vec(), 0).await;
            assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EBADF));
            f.close().await.unwrap();
        });
    });
}

#[test]
fn read_exact_at_past_eof_is_unexpected_eof() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("eof-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        run(kind, async {
            let f = File::open(&path).await.unwrap();
            let (res, buf) = f.read_exact_at(vec![0u8; 8], 4).await;
            assert_eq!(res.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
            assert_eq!(buf, b"456789", "the bytes before EOF are kept");
            let (res, _) = f.read_exact_at(vec![0u8; 1], 10).await;
            assert_eq!(res.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
            let (res, buf) = f.read_exact_at(vec![0u8; 10], 0).await;
            res.unwrap();
            assert_eq!(buf, b"0123456789");
        });
    });
}

#[test]
fn interior_nul_is_invalid_input() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("nul-{kind}"));
        let bad = nul_path(&dir);
        let good = dir.join("good");
        std::fs::write(&good, b"x").unwrap();
        run(kind, async {
            let check = |r: io::Result<()>, what: &str| {
                let e = r.unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{what}: {e}");
            };
            check(File::open(&bad).await.map(drop), "open");
            check(File::create(&bad).await.map(drop), "create");
            check(
                OpenOptions::new().read(true).open(&bad).await.map(drop),
                "OpenOptions::open",
            );
            check(fs::metadata(&bad).await.map(drop), "metadata");
            check(
                fs::symlink_metadata(&bad).await.map(drop),
                "symlink_metadata",
            );
            check(fs::remove_file(&bad).await, "remove_file");
            check(fs::remove_dir(&bad).await, "remove_dir");
            check(fs::rename(&bad, dir.join("x")).await, "rename from");
            check(fs::rename(&good, &bad).await, "rename to");
            check(fs::create_dir(&bad).await, "create_dir");
            check(fs::create_dir_all(&bad).await, "create_dir_all");
            check(fs::read(&bad).await.map(drop), "read");
            check(fs::write(&bad, StaticBuf(b"x")).await, "write");
            check(fs::copy(&good, &bad).await.map(drop), "copy to");
            check(fs::copy(&bad, &good).await.map(drop), "copy from");
        });
        assert_eq!(std::fs::read(&good).unwrap(), b"x");
    });
}

#[test]
fn open_options_behave_like_std() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("options-{kind}"));
        let path = dir.join("f");
        run(kind, async {
            // Contradictions fail before touching the file system.
            for (opts, what) in [
                (OpenOptions::new(), "nothing"),
                (
                    OpenOptions::new().read(true).create(true).clone(),
                    "read+create",
                ),
                (
                    OpenOptions::new().read(true).truncate(true).clone(),
                    "read+truncate",
                ),
                (
                    OpenOptions::new().append(true).truncate(true).clone(),
                    "append+truncate",
                ),
            ] {
                let e = opts.open(&path).await.unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{what}: {e}");
            }
            assert!(!path.exists());

            // create + mode
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .mode(0o600)
                .open(&path)
                .await
                .unwrap();
            let (res, _) = f.write_all_at(StaticBuf(b"abc"), 0).await;
            res.unwrap();
            assert_eq!(f.metadata().await.unwrap().mode() & 0o777, 0o600);
            drop(f);

            // append: every write goes to the end, whatever position it names
            let f = OpenOptions::new().append(true).open(&path).await.unwrap();
            let (res, _) = f.write_all_at(StaticBuf(b"def"), 0).await;
            res.unwrap();
            f.close().await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), b"abcdef");

            // read + write without truncate keeps the contents
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .await
                .unwrap();
            let (res, _) = f.write_all_at(StaticBuf(b"X"), 1).await;
            res.unwrap();
            let (res, buf) = f.read_at(Vec::with_capacity(16), 0).await;
            res.unwrap();
            assert_eq!(buf, b"aXcdef");
            f.close().await.unwrap();

            // truncate empties it
            let f = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .await
                .unwrap();
            assert_eq!(f.metadata().await.unwrap().len(), 0);
            f.close().await.unwrap();

            // custom flags are passed: O_DIRECTORY on a file is ENOTDIR
            let e = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY)
                .open(&path)
                .await
                .unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR), "{e}");
        });
    });
}

#[test]
fn readv_writev_round_trip() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("vectored-{kind}"));
        let path = dir.join("f");
        run(kind, async {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(&path)
                .await
                .unwrap();
            let bufs = vec![b"one-".to_vec(), b"two-".to_vec(), b"three".to_vec()];
            let (res, bufs) = f.writev_at(bufs, 2).await;
            assert_eq!(res.unwrap(), 13);
            assert_eq!(bufs.len(), 3);
            let (res, _) = f.write_all_at(StaticBuf(b">>"), 0).await;
            res.unwrap();

            let bufs = vec![
                Vec::with_capacity(2),
                Vec::with_capacity(6),
                Vec::with_capacity(100),
            ];
            let (res, bufs) = f.readv_at(bufs, 0).await;
            assert_eq!(res.unwrap(), 15);
            assert_eq!(bufs[0], b">>");
            assert_eq!(bufs[1], b"one-tw");
            assert_eq!(bufs[2], b"o-three");
            f.close().await.unwrap();
        });
    });
}

#[test]
fn fallocate_grows_and_set_len_resizes() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("fallocate-{kind}"));
        let path = dir.join("f");
        run(kind, async {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(&path)
                .await
                .unwrap();
            assert_eq!(f.metadata().await.unwrap().len(), 0);
            f.fallocate(0, 1 << 20, 0).await.unwrap();
            let m = f.metadata().await.unwrap();
            assert_eq!(m.len(), 1 << 20);
            assert!(m.blocks() * 512 >= 1 << 20, "space allocated: {m:?}");
            // KEEP_SIZE allocates without growing.
            f.fallocate(1 << 20, 4096, libc::FALLOC_FL_KEEP_SIZE)
                .await
                .unwrap();
            assert_eq!(f.metadata().await.unwrap().len(), 1 << 20);
            // An invalid mode is the kernel's error.
            let e = f.fallocate(0, 0, 0).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");

            f.set_len(10).await.unwrap();
            assert_eq!(f.metadata().await.unwrap().len(), 10);
            f.set_len(4096).await.unwrap();
            assert_eq!(f.metadata().await.unwrap().len(), 4096);
            let (res, buf) = f.read_exact_at(vec![0u8; 4096], 0).await;
            res.unwrap();
            assert!(buf.iter().all(|&b| b == 0));
            f.close().await.unwrap();
        });
    });
}

#[test]
fn metadata_fields_match_std() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("metadata-{kind}"));
        let path = dir.join("f");
        let link = dir.join("link");
        std::fs::write(&path, vec![7u8; 12345]).unwrap();
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let std_meta = std::fs::metadata(&path).unwrap();
        run(kind, async {
            let m = fs::metadata(&path).await.unwrap();
            assert_eq!(m.len(), 12345);
            assert!(m.is_file() && !m.is_dir() && !m.is_symlink());
            assert_eq!(m.ino(), std_meta.ino());
            assert_eq!(m.dev(), std_meta.dev());
            assert_eq!(m.mode(), std_meta.mode());
            assert_eq!(m.nlink(), std_meta.nlink());
            assert_eq!(m.uid(), std_meta.uid());
            assert_eq!(m.gid(), std_meta.gid());
            assert_eq!(m.blksize(), std_meta.blksize());
            assert_eq!(m.blocks(), std_meta.blocks());
            assert_eq!(m.permissions(), std_meta.permissions());
            assert_eq!(m.modified().unwrap(), std_meta.modified().unwrap());
            assert_eq!(m.accessed().unwrap(), std_meta.accessed().unwrap());
            match m.created() {
                Ok(t) => assert_eq!(t, std_meta.created().unwrap()),
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::Unsupported),
            }

            // Through the fd (statx with AT_EMPTY_PATH): the same file.
            let f = File::open(&path).await.unwrap();
            let fm = f.metadata().await.unwrap();
            assert_eq!((fm.ino(), fm.dev(), fm.len()), (m.ino(), m.dev(), m.len()));

            // A link is followed by metadata, not by symlink_metadata.
            let lm = fs::metadata(&link).await.unwrap();
            assert!(lm.is_file());
            assert_eq!(lm.ino(), m.ino());
            let sm = fs::symlink_metadata(&link).await.unwrap();
            assert!(sm.is_symlink() && !sm.is_file());
            assert_ne!(sm.ino(), m.ino());

            let dm = fs::metadata(&dir.0).await.unwrap();
            assert!(dm.is_dir() && !dm.is_file());
            assert!(format!("{dm:?}").contains("Metadata"));
        });
    });
}

#[test]
fn directories_rename_and_remove() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("dirs-{kind}"));
        run(kind, async {
            let a = dir.join("a");
            fs::create_dir(&a).await.unwrap();
            assert!(fs::metadata(&a).await.unwrap().is_dir());
            let e = fs::create_dir(&a).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
            let e = fs::create_dir(dir.join("no/such/parent"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");

            let deep = dir.join("x/y/z/w");
            fs::create_dir_all(&deep).await.unwrap();
            assert!(std::fs::metadata(&deep).unwrap().is_dir());
            fs::create_dir_all(&deep).await.unwrap(); // exists already: fine
            fs::create_dir_all(dir.join("x/y/q")).await.unwrap();
            assert!(dir.join("x/y/q").is_dir());
            // A file in the way is an error.
            fs::write(dir.join("x/file"), StaticBuf(b"f"))
                .await
                .unwrap();
            assert!(fs::create_dir_all(dir.join("x/file/sub")).await.is_err());
            assert!(fs::create_dir_all(dir.join("x/file")).await.is_err());

            // rename a file, then a directory
            let f1 = dir.join("f1");
            let f2 = a.join("f2");
            fs::write(&f1, StaticBuf(b"data")).await.unwrap();
            fs::rename(&f1, &f2).await.unwrap();
            assert_eq!(
                fs::metadata(&f1).await.unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            assert_eq!(fs::read(&f2).await.unwrap(), b"data");
            let b = dir.join("b");
            fs::rename(&a, &b).await.unwrap();
            assert!(!a.exists());
            assert_eq!(std::fs::read(b.join("f2")).unwrap(), b"data");
            let e = fs::rename(dir.join("missing"), dir.join("m2"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");

            // remove: a non-empty directory fails, remove_file on a directory fails
            let e = fs::remove_dir(&b).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::DirectoryNotEmpty, "{e}");
            assert!(fs::remove_file(&b).await.is_err());
            assert!(fs::remove_dir(b.join("f2")).await.is_err());
            fs::remove_file(b.join("f2")).await.unwrap();
            fs::remove_dir(&b).await.unwrap();
            assert!(!b.exists());
            fs::remove_dir(&deep).await.unwrap();
            assert!(!deep.exists());
        });
    });
}

#[test]
fn read_and_write_helpers() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("helpers-{kind}"));
        let path = dir.join("f");
        run(kind, async {
            fs::write(&path, String::from("first version, longer"))
                .await
                .unwrap();
            fs::write(&path, StaticBuf(b"second")).await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), b"second", "write truncates");
            fs::write(&path, Vec::new()).await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), b"");
            let big = random_bytes(300_000, 7);
            fs::write(&path, big.clone()).await.unwrap();
            assert_eq!(fs::read(&path).await.unwrap(), big);
            // A file whose size says 0 is still read to its end.
            let stat = fs::read("/proc/self/stat").await.unwrap();
            assert!(!stat.is_empty());
            assert!(stat.starts_with(std::process::id().to_string().as_bytes()));
        });
    });
}

#[test]
fn copy_of_a_1mib_random_file_matches() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("copy-{kind}"));
        let src = dir.join("src");
        let dst = dir.join("dst");
        let data = random_bytes((1 << 20) + 123, 0x5eed);
        std::fs::write(&src, &data).unwrap();
        std::fs::set_permissions(&src, std::os::unix::fs::PermissionsExt::from_mode(0o640))
            .unwrap();
        // An existing, longer destination is truncated.
        std::fs::write(&dst, vec![1u8; 2 << 20]).unwrap();
        let n = run(kind, async { fs::copy(&src, &dst).await.unwrap() });
        assert_eq!(n, data.len() as u64);
        let copied = std::fs::read(&dst).unwrap();
        assert!(copied == data, "copy differs");
        let mode = std::fs::metadata(&dst).unwrap().mode();
        assert_eq!(mode & 0o777, 0o640);
        // Copying a directory is refused.
        let e = run(kind, async {
            fs::copy(&dir.0, dir.join("d")).await.unwrap_err()
        });
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        let e = run(kind, async {
            fs::copy(dir.join("missing"), dir.join("d"))
                .await
                .unwrap_err()
        });
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    });
}

#[test]
fn std_conversions_and_raw_fds() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("std-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"std").unwrap();
        let std_file = std::fs::File::open(&path).unwrap();
        run(kind, async {
            let f = File::from_std(std_file);
            let (res, buf) = f.read_at(Vec::with_capacity(8), 0).await;
            res.unwrap();
            assert_eq!(buf, b"std");
            let raw = f.into_raw_fd();
            // SAFETY: `raw` was just given up by `f`, and nothing else owns it.
            let f = unsafe { File::from_raw_fd(raw) };
            assert_eq!(f.as_raw_fd(), raw);
            let mut s = f.into_std();
            let mut out = String::new();
            std::io::Read::read_to_string(&mut s, &mut out).unwrap();
            assert_eq!(out, "std");
        });
    });
}

/// A waker that records that it was woken: the op's completion was reaped.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

type OpenFuture<'a> = Pin<Box<dyn Future<Output = io::Result<File>> + 'a>>;

/// Polls `fut` exactly once with a waker of its own (so the open is pushed to the ring) and
/// returns that waker's flag.
fn poll_once(fut: &mut OpenFuture<'_>) -> Arc<Flag> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(
        matches!(fut.as_mut().poll(&mut cx), Poll::Pending),
        "an open completes no earlier than the next turn of the driver (io_uring: the ring; \
         epoll: the blocking pool's result is collected by a turn)"
    );
    flag
}

/// Sleeps a millisecond at a time until `cond` holds, at most `limit`.
async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            return false;
        }
        hoop::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

#[test]
fn dropped_open_futures_leak_no_fd() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("cancel-open-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        let before_rt = fd_count();
        let rt = common::runtime(kind);
        rt.block_on(async {
            let before = fd_count();
            let (mut unreaped, mut reaped) = (0, 0);
            for i in 0..200 {
                // Before its CQE was reaped: pushed by one poll, then dropped, at once or after a
                // yield (the flag says whether the CQE was reaped meanwhile; it must not be most
                // of the time).
                let mut fut: OpenFuture<'_> = Box::pin(File::open(&path));
                let flag = poll_once(&mut fut);
                if i % 2 == 1 {
                    hoop::yield_now().await;
                }
                if !flag.0.load(Ordering::SeqCst) {
                    unreaped += 1;
                }
                drop(fut);

                // After its CQE was reaped: the file is open, owned by the op's slot, when the
                // future is dropped.
                let mut fut: OpenFuture<'_> = Box::pin(File::open(&path));
                let flag = poll_once(&mut fut);
                assert!(
                    wait_until(Duration::from_secs(5), || flag.0.load(Ordering::SeqCst)).await,
                    "the open never completed"
                );
                reaped += 1;
                drop(fut);
            }
            assert!(unreaped >= 100, "{unreaped} opens dropped before their CQE");
            assert_eq!(reaped, 200);
            // Let the ring reap the cancelled opens; a leak stays a leak however long we wait.
            wait_until(Duration::from_secs(2), || fd_count() == before).await;
            hoop::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(fd_count(), before, "fds leaked by dropped open futures");
        });
        drop(rt);
        assert_eq!(
            fd_count_after_runtime_drop(kind, before_rt),
            before_rt,
            "fds left after the runtime was dropped"
        );
    });
}

#[test]
fn open_future_dropped_after_completion_closes_its_fd_at_once() {
    let _faults = common::faults_off(
        &["ecanceled"],
        "counts the fd a reaped open holds: a made-up ECANCELED completes it with none (the \
         open goes in again on its next poll)",
    );
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("cancel-open-reaped-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        run(kind, async {
            let before = fd_count();
            for _ in 0..20 {
                let mut fut: OpenFuture<'_> = Box::pin(File::open(&path));
                let flag = poll_once(&mut fut);
                assert!(wait_until(Duration::from_secs(5), || flag.0.load(Ordering::SeqCst)).await);
                // Completed and reaped, not yet claimed: the fd is open, owned by the op.
                assert_eq!(fd_count(), before + 1);
                drop(fut);
                assert_eq!(
                    fd_count(),
                    before,
                    "the fd must be closed when the future drops"
                );
            }
        });
    });
}

#[test]
fn dropped_file_is_closed_on_the_same_tick() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("drop-close-{kind}"));
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        let before_rt = fd_count();
        let rt = common::runtime(kind);
        rt.block_on(async {
            let before = fd_count();
            // IORING_OP_CLOSE completes inline when submitted, except for files whose file system
            // has a `flush` (overlayfs, NFS, FUSE): the kernel then punts it to a worker. So the
            // strict "closed after one tick" check uses /dev/null, whatever the temp dir is on.
            // (A tick: the driver submits queued SQEs when the runtime runs out of ready tasks, so
            // the test parks on a short sleep rather than a `yield_now`, after which the task is
            // ready again at once.) On epoll, close runs at once on the runtime's thread.
            for _ in 0..50 {
                let f = File::open("/dev/null").await.unwrap();
                assert_eq!(fd_count(), before + 1);
                drop(f);
                hoop::time::sleep(Duration::from_millis(1)).await;
                assert_eq!(
                    fd_count(),
                    before,
                    "close from Drop not done after one tick"
                );
            }
            // A file in the temp dir: its close is submitted on the next tick, and done soon.
            for _ in 0..20 {
                let f = File::open(&path).await.unwrap();
                assert_eq!(fd_count(), before + 1);
                let submitted = hoop::runtime::current_counters().unwrap().sqes_submitted;
                drop(f);
                hoop::time::sleep(Duration::from_millis(1)).await;
                let now = hoop::runtime::current_counters().unwrap().sqes_submitted;
                // On epoll the close is a close(2) at once (no submission to count).
                assert!(
                    kind == DriverKind::Epoll || now > submitted,
                    "close from Drop not submitted on this tick"
                );
                assert!(
                    wait_until(Duration::from_secs(5), || fd_count() == before).await,
                    "close from Drop never done"
                );
            }
            // close() reports and is done when it returns.
            let f = File::open(&path).await.unwrap();
            assert_eq!(fd_count(), before + 1);
            f.close().await.unwrap();
            assert_eq!(fd_count(), before);
        });

        // Outside a runtime, Drop closes at once.
        let before = fd_count();
        let f = rt.block_on(File::open(&path)).unwrap();
        assert_eq!(fd_count(), before + 1);
        drop(f);
        assert_eq!(fd_count(), before);
        // And a file that outlives its runtime too.
        let f = rt.block_on(File::open(&path)).unwrap();
        drop(rt);
        let n = fd_count_after_runtime_drop(kind, before_rt + 1);
        assert_eq!(n, before_rt + 1, "only the file is left open");
        drop(f);
        assert_eq!(fd_count(), n - 1);
    });
}

#[test]
fn operations_outside_a_runtime_fail_cleanly() {
    let _g = lock();
    let dir = TempDir::new("no-runtime");
    let path = dir.join("f");
    std::fs::write(&path, b"x").unwrap();
    // Polled with no runtime on the thread: an error, not a panic or a hang.
    let fut = File::open(&path);
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Err(_)) => {}
        other => panic!("expected an error outside a runtime, got {other:?}"),
    }
    assert!(Path::new(&path).exists());
}

#[test]
fn close_that_never_reaches_a_ring_still_closes_the_fd() {
    let _g = lock();
    let dir = TempDir::new("close-no-runtime");
    let path = dir.join("f");
    std::fs::write(&path, b"x").unwrap();
    let file = File::from_std(std::fs::File::open(&path).unwrap());
    let raw = file.as_raw_fd();
    let before = fd_count();
    // Polled with no runtime on the thread the close op cannot be submitted: it must close
    // the fd itself (and report success), not leak it.
    let fut = file.close();
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(res) => res.expect("close(2) of an open fd succeeds"),
        Poll::Pending => panic!("a close outside a runtime cannot wait for a ring"),
    }
    assert_eq!(fd_count(), before - 1, "fd {raw} is closed");
}

#[test]
fn close_op_dropped_before_it_is_polled_still_closes_the_fd() {
    let _g = lock();
    let dir = TempDir::new("close-unpolled");
    let path = dir.join("f");
    std::fs::write(&path, b"x").unwrap();
    let fd = std::os::fd::OwnedFd::from(std::fs::File::open(&path).unwrap());
    let before = fd_count();
    let op = hoop::driver::Op::new(hoop::driver::op::Close::new(fd));
    assert_eq!(fd_count(), before, "the op owns the fd, still open");
    drop(op);
    assert_eq!(fd_count(), before - 1, "dropping the op closed the fd");
}

/// `op::OpenAt2` with `RESOLVE_BENEATH`: a path inside the directory opens; `..` and a symlink
/// leading out are refused by the kernel with `EXDEV`, on both drivers.
#[test]
fn openat2_resolve_beneath_keeps_paths_inside() {
    use hoop::driver::{op, Op};
    use std::ffi::CString;
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("openat2-{kind}"));
        std::fs::create_dir(dir.join("root")).unwrap();
        std::fs::write(dir.join("root/in.txt"), b"inside").unwrap();
        std::fs::write(dir.join("out.txt"), b"outside").unwrap();
        std::os::unix::fs::symlink("../out.txt", dir.join("root/link")).unwrap();
        let root = std::fs::File::open(dir.join("root")).unwrap();
        let rootfd = root.as_raw_fd();
        run(kind, async move {
            let open = |p: &str| {
                Op::new(op::OpenAt2::new(
                    rootfd,
                    CString::new(p).unwrap(),
                    libc::O_RDONLY,
                    0,
                    libc::RESOLVE_BENEATH,
                ))
            };
            let lacks = hoop::driver::Driver::current().is_some_and(|d| {
                d.kind() == DriverKind::Uring && !d.supported_opcodes().contains(&"OPENAT2")
            });
            if lacks {
                eprintln!("skip on {kind}: this kernel's io_uring has no OPENAT2");
                return;
            }
            match open("in.txt").await {
                Ok(fd) => {
                    let f = File::from(fd);
                    let (res, buf) = f.read_at(Vec::with_capacity(16), 0).await;
                    assert_eq!(&buf[..res.unwrap()], b"inside");
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    eprintln!("skip on {kind}: openat2 not in this kernel");
                    return;
                }
                Err(e) => panic!("open in.txt: {e}"),
            }
            for p in ["../out.txt", "link", "/etc/hostname"] {
                let e = open(p).await.unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{p}: {e}");
            }
        });
        drop(root);
    });
}

/// `op::Splice`: file -> pipe at an offset, then pipe -> socket, on both drivers; the bytes
/// arrive intact and a pipe-to-socket splice on an empty pipe is not needed to end the test.
#[test]
fn splice_moves_file_bytes_through_a_pipe_to_a_socket() {
    use hoop::driver::{op, Op};
    use std::io::Read;
    use std::os::fd::OwnedFd;
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("splice-{kind}"));
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(dir.join("f"), &data).unwrap();
        let file = std::fs::File::open(dir.join("f")).unwrap();
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two new fds into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both fds are new and owned by nothing else.
        let (pr, pw) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (mut rx, tx) = std::os::unix::net::UnixStream::pair().unwrap();
        tx.set_nonblocking(true).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (ffd, prfd, pwfd, txfd) = (
            file.as_raw_fd(),
            pr.as_raw_fd(),
            pw.as_raw_fd(),
            tx.as_raw_fd(),
        );
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 50_000];
            rx.read_exact(&mut got).map(|_| got)
        });
        let ran = run(kind, async move {
            let lacks = hoop::driver::Driver::current().is_some_and(|d| {
                d.kind() == DriverKind::Uring && !d.supported_opcodes().contains(&"SPLICE")
            });
            if lacks {
                eprintln!("skip on {kind}: this kernel's io_uring has no SPLICE");
                return false;
            }
            let n = Op::new(op::Splice::new(ffd, Some(1000), pwfd, None, 50_000, 0))
                .await
                .unwrap();
            assert!(n > 0 && n <= 50_000, "{n}");
            let mut filled = n;
            let mut sent = 0;
            while sent < 50_000 {
                if filled == sent {
                    let want = (50_000 - filled) as u32;
                    let off = 1000 + filled as u64;
                    filled += Op::new(op::Splice::new(ffd, Some(off), pwfd, None, want, 0))
                        .await
                        .unwrap();
                }
                let want = (filled - sent) as u32;
                let m = Op::new(op::Splice::new(prfd, None, txfd, None, want, 0))
                    .await
                    .unwrap();
                assert!(m > 0);
                sent += m;
            }
            true
        });
        if !ran {
            drop(tx);
            let _ = reader.join();
            return;
        }
        let got = reader.join().unwrap().unwrap();
        assert!(got == data[1000..51_000], "the spliced bytes differ");
        drop((pr, pw, tx, file));
    });
}

// ---- `File` through the poll-based traits: read-ahead, write staging, seeks ----

use futures::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use futures::FutureExt;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};

/// Reads until `want` bytes or the end of the file, through the traits.
async fn read_up_to(f: &mut File, want: usize) -> Vec<u8> {
    let mut got = vec![0u8; want];
    let mut n = 0;
    while n < want {
        let k = AsyncReadExt::read(f, &mut got[n..]).await.unwrap();
        if k == 0 {
            break;
        }
        n += k;
    }
    got.truncate(n);
    got
}

/// Reads until `want` bytes or the end of the file, with std.
fn std_read_up_to(f: &mut std::fs::File, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    f.take(want as u64).read_to_end(&mut got).unwrap();
    got
}

/// One step of a sequence run on a `hoop::fs::File` through the traits and on a std file.
#[derive(Debug, Clone, Copy)]
enum Step {
    Read(usize),
    Write(usize, u64),
    Seek(SeekFrom),
    /// A read future polled once and dropped: whatever it handed out, std reads too.
    DroppedRead(usize),
    /// `stream_position` (a seek to `Current(0)`, which gives back what was read ahead).
    Position,
}

#[test]
fn traits_copy_with_non_default_buffer_sizes_gives_identical_bytes() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("traits-copy-{kind}"));
        let data = random_bytes((1 << 20) + 123, 0x7ea);
        std::fs::write(dir.join("src"), &data).unwrap();
        for (from_size, to_size) in [(12_345, 5_000), (3 << 20, 4096)] {
            let _ = std::fs::remove_file(dir.join("dst"));
            run(kind, async {
                let mut from = File::open(dir.join("src")).await.unwrap();
                let mut to = File::create(dir.join("dst")).await.unwrap();
                assert_eq!(from.max_buf_size(), 1 << 20, "the default for files");
                from.set_max_buf_size(from_size);
                to.set_max_buf_size(to_size);
                assert_eq!(from.max_buf_size(), from_size);
                let n = futures::io::copy(&mut from, &mut to).await.unwrap();
                assert_eq!(n, data.len() as u64);
                AsyncWriteExt::close(&mut to).await.unwrap();
                // The position the caller has seen is the end, whatever was read ahead.
                assert_eq!(from.stream_position().await.unwrap(), n);
            });
            let copied = std::fs::read(dir.join("dst")).unwrap();
            assert!(copied == data, "copy with {from_size}/{to_size} differs");
        }
    });
}

/// Reads, writes and seeks through the traits land where std's `File` puts them, whatever was
/// read ahead, staged or left in flight.
#[test]
fn traits_reads_writes_and_seeks_match_std() {
    use Step::*;
    // Writes right after reads (no seek between: the write gives the read-ahead back),
    // reads right after writes, dropped reads, and positions asked after read-ahead.
    let steps = [
        Read(100),
        Position,
        Read(5000),
        Write(300, 1),
        Read(10),
        Position,
        Seek(SeekFrom::Current(-50)),
        Write(20, 2),
        Seek(SeekFrom::End(-10)),
        Read(100),
        Position,
        Seek(SeekFrom::Start(7)),
        Write(3, 3),
        Read(5),
        Read(70_000),
        DroppedRead(1000),
        Write(5, 4),
        Read(20),
        DroppedRead(10),
        Seek(SeekFrom::Current(3)),
        Read(9000),
        Write(7, 8),
        Read(1 << 20),
        Write(100_000, 5),
        Seek(SeekFrom::Start(150_000)),
        Read(100),
        Seek(SeekFrom::Current(0)),
        Write(10, 6),
        Read(30_000),
        Position,
        Seek(SeekFrom::End(0)),
        Write(1, 7),
        Position,
    ];
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("traits-seq-{kind}"));
        let data = random_bytes(200_000, 0x5e9);
        for size in [None, Some(4096), Some(70_001)] {
            let (ours, theirs) = (dir.join("ours"), dir.join("theirs"));
            std::fs::write(&ours, &data).unwrap();
            std::fs::write(&theirs, &data).unwrap();
            let mut s = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&theirs)
                .unwrap();
            run(kind, async {
                let mut f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&ours)
                    .await
                    .unwrap();
                if let Some(n) = size {
                    f.set_max_buf_size(n);
                }
                for (i, step) in steps.iter().enumerate() {
                    let at = format!("step {i} {step:?}, buffer {size:?}");
                    match *step {
                        Position => {
                            let ours = f.stream_position().await.unwrap();
                            assert_eq!(ours, s.stream_position().unwrap(), "{at}");
                        }
                        Read(n) => {
                            let got = read_up_to(&mut f, n).await;
                            assert!(got == std_read_up_to(&mut s, n), "{at}: bytes differ");
                        }
                        Write(n, seed) => {
                            let b = random_bytes(n, seed);
                            AsyncWriteExt::write_all(&mut f, &b).await.unwrap();
                            s.write_all(&b).unwrap();
                        }
                        Seek(to) => {
                            let p = AsyncSeekExt::seek(&mut f, to).await.unwrap();
                            assert_eq!(p, s.seek(to).unwrap(), "{at}");
                        }
                        DroppedRead(n) => {
                            let mut b = vec![0u8; n];
                            if let Some(r) = AsyncReadExt::read(&mut f, &mut b).now_or_never() {
                                let k = r.unwrap();
                                assert!(b[..k] == std_read_up_to(&mut s, k)[..], "{at}");
                            }
                        }
                    }
                }
                AsyncWriteExt::close(&mut f).await.unwrap();
            });
            let (a, b) = (
                std::fs::read(&ours).unwrap(),
                std::fs::read(&theirs).unwrap(),
            );
            assert_eq!(a.len(), b.len(), "buffer {size:?}");
            assert!(a == b, "the files differ (buffer {size:?})");
        }
    });
}

/// `write` futures polled once and dropped while pending, with writes staged behind the one in
/// flight: the file holds every accepted byte once, in order.
#[test]
fn dropped_write_futures_with_staging_lose_and_duplicate_nothing() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("traits-drop-{kind}"));
        let data = random_bytes(300_000, 0xd0);
        let path = dir.join("f");
        let dropped = run(kind, async {
            let mut f = File::create(&path).await.unwrap();
            f.set_max_buf_size(8192);
            let (mut sent, mut dropped, mut polls) = (0, 0, 0);
            while sent < data.len() {
                polls += 1;
                assert!(polls < 1_000_000, "no progress after {polls} polls");
                // Odd-sized chunks, so staged bytes fill the staging buffer unevenly.
                let end = (sent + 5000).min(data.len());
                match AsyncWriteExt::write(&mut f, &data[sent..end]).now_or_never() {
                    Some(Ok(k)) => sent += k,
                    Some(Err(e)) => panic!("write failed: {e}"),
                    None => {
                        dropped += 1;
                        hoop::yield_now().await;
                    }
                }
            }
            AsyncWriteExt::flush(&mut f).await.unwrap();
            assert_eq!(f.stream_position().await.unwrap(), data.len() as u64);
            dropped
        });
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes differ ({dropped} futures dropped)");
        assert!(dropped > 0, "the test dropped no pending write future");
    });
}

/// `set_max_buf_size(0)` is taken as 1 byte (reads and writes still work, one byte at a time);
/// sizes above 1 GiB are lowered to it.
#[test]
fn set_max_buf_size_zero_is_taken_as_one() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("traits-zero-{kind}"));
        let data = random_bytes(3000, 0x2e);
        let path = dir.join("f");
        run(kind, async {
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .await
                .unwrap();
            f.set_max_buf_size(usize::MAX);
            assert_eq!(f.max_buf_size(), 1 << 30);
            f.set_max_buf_size(0);
            assert_eq!(f.max_buf_size(), 1);
            AsyncWriteExt::write_all(&mut f, &data).await.unwrap();
            AsyncWriteExt::flush(&mut f).await.unwrap();
            assert_eq!(f.seek(SeekFrom::Start(10)).await.unwrap(), 10);
            let mut back = Vec::new();
            f.read_to_end(&mut back).await.unwrap();
            assert!(back == data[10..], "bytes differ");
            assert_eq!(f.stream_position().await.unwrap(), data.len() as u64);
        });
        assert!(std::fs::read(&path).unwrap() == data);
    });
}

/// tokio's `AsyncSeek`, `AsyncRead` and `AsyncWrite` on `hoop::fs::File`: `tokio::io::copy`
/// from a seeked position, and the position reported after read-ahead.
#[cfg(feature = "tokio")]
#[test]
fn tokio_seek_and_copy() {
    use tokio::io::{AsyncReadExt as TokioRead, AsyncSeekExt as TokioSeek};
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("traits-tokio-{kind}"));
        let data = random_bytes(500_000, 0x70);
        std::fs::write(dir.join("src"), &data).unwrap();
        run(kind, async {
            let mut from = File::open(dir.join("src")).await.unwrap();
            let mut head = [0u8; 10];
            TokioRead::read_exact(&mut from, &mut head).await.unwrap();
            assert!(head[..] == data[..10]);
            // The read may have read ahead: the position is still the caller's.
            assert_eq!(TokioSeek::stream_position(&mut from).await.unwrap(), 10);
            let p = TokioSeek::seek(&mut from, SeekFrom::Start(1000)).await;
            assert_eq!(p.unwrap(), 1000);
            let mut to = File::create(dir.join("dst")).await.unwrap();
            to.set_max_buf_size(64 << 10);
            let n = tokio::io::copy(&mut from, &mut to).await.unwrap();
            assert_eq!(n, data.len() as u64 - 1000);
            tokio::io::AsyncWriteExt::shutdown(&mut to).await.unwrap();
            assert_eq!(TokioSeek::stream_position(&mut to).await.unwrap(), n);
            let mut rest = Vec::new();
            TokioSeek::seek(&mut from, SeekFrom::End(-5)).await.unwrap();
            TokioRead::read_to_end(&mut from, &mut rest).await.unwrap();
            assert!(rest[..] == data[data.len() - 5..]);
        });
        assert!(std::fs::read(dir.join("dst")).unwrap() == data[1000..]);
    });
}

/// A write-behind that fails (the file is open read-only: `EBADF`) reports its error from the
/// next write or flush, once; the bytes staged behind it go with it (nothing reaches the file),
/// and the value works on afterwards.
#[test]
fn failed_write_behind_reports_once_and_drops_the_staged_bytes() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new(&format!("traits-err-{kind}"));
        let path = dir.join("f");
        let data = random_bytes(50_000, 0xe1);
        std::fs::write(&path, &data).unwrap();
        run(kind, async {
            let mut f = File::open(&path).await.unwrap();
            f.set_max_buf_size(4096);
            let chunk = [7u8; 3000];
            let mut errors = 0;
            for _ in 0..20 {
                if AsyncWriteExt::write(&mut f, &chunk).await.is_err() {
                    errors += 1;
                }
            }
            if AsyncWriteExt::flush(&mut f).await.is_err() {
                errors += 1;
            }
            assert!(errors > 0, "no write error reported");
            // Reported once each: a second flush has nothing left to report.
            AsyncWriteExt::flush(&mut f).await.unwrap();
            // Reads still work, at the position of the start (nothing was written).
            let mut back = Vec::new();
            f.read_to_end(&mut back).await.unwrap();
            assert!(back == data, "the file changed or the read missed bytes");
        });
        assert!(std::fs::read(&path).unwrap() == data);
    });
}
