//! hoop::fs against real files in a private temporary directory: opening (and its errors),
//! reads and writes at positions, the open options, vectored I/O, sizes, metadata,
//! directories, the whole-file helpers and copies. The fds: `fs_fds.rs`; the I/O traits:
//! `fs_traits.rs`; the driver's own file operations: `fs_ops.rs`.
//!
//! Every test takes one lock first (before it creates a file or a runtime) and holds it to its
//! end (after its temp dir is removed), so they run one at a time. Every test that uses a
//! runtime runs on each driver (io_uring, then epoll: files on its blocking pool), each run in a
//! temporary directory of its own.

use hoop_test_support as common;

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use common::each_driver;
use hoop::fs::{self, File, OpenOptions};
use hoop::StaticBuf;

mod fs_common;
use fs_common::*;

fn nul_path(dir: &TempDir) -> PathBuf {
    let mut s = dir.join("bad").into_os_string();
    s.push("\0name");
    PathBuf::from(s)
}

#[test]
fn open_missing_file_is_not_found() {
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("missing-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("create-new-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("rw-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("eof-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("nul-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("options-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("vectored-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("fallocate-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("metadata-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("dirs-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("helpers-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("copy-{kind}"));
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
