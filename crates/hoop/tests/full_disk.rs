//! Full disks, for real (DESIGN.md, "Full disks"), on io_uring and on epoll: a tmpfs of 1 MiB
//! (`hoop_test_support::fullfs::SmallFs`) filled by a filler file, then written by hoop.
//!
//! Every write API returns `ENOSPC` and never `Ok` for bytes that did not land; how many
//! landed is the file's length (the error is the kernel's `io::Error`, as in tokio and std: a
//! `write_all` error cannot carry a count), and the file holds exactly those bytes, the right
//! ones: `write_at` (its `Ok(n)` counts match the file's growth), `write_all_at`,
//! `hoop::fs::write`, `hoop::fs::copy`, `write_all` through the `AsyncWrite` traits (the error
//! comes from the write, `flush` or `close`; once), and a `File` dropped after `write_all`
//! (its detached writer's error is counted in the `ShutdownReport`, never lost silently).
//! After the filler is removed, the rest is written and the file is whole. `/dev/full` does
//! the same on a character device (writes fail with `ENOSPC`, reads give zeros), and
//! `sync_all`/`sync_data` report a failed writeback (`EIO`, from a loop device whose backing
//! tmpfs is full: `fullfs::FailingDisk`) once, as the kernel does.
//!
//! Root only (mounts); elsewhere each test prints `skip TEST: REASON` and passes. No fault kind
//! makes up an `ENOSPC` or an `EIO`, and the writes retry what the injected kinds make up, so
//! no test here opts out of a kind, except where said.

use hoop_test_support as common;

use common::fullfs::{is_enospc, FailingDisk, SmallFs};
use common::http::bytes;
use hoop::fs::File;
use hoop::DriverKind;

/// The tmpfs's size, the filler's, and the bytes a test writes: the write fails about half
/// way; once the filler is gone, the rest fits.
const FS_BYTES: u64 = 1 << 20;
const FILLER_BYTES: u64 = 768 << 10;
const DATA_BYTES: usize = 512 << 10;

/// A 1 MiB tmpfs for test `test` on `kind`, with its filler written; `None` (said) where it
/// cannot be mounted.
fn full_fs(test: &str, kind: DriverKind) -> Option<SmallFs> {
    let fs = SmallFs::new(&format!("{test}-{kind}"), FS_BYTES)?;
    let filled = fs.fill("filler", FILLER_BYTES);
    assert_eq!(filled, FILLER_BYTES, "the filler fits");
    Some(fs)
}

/// Frees the filler's space.
fn free(fs: &SmallFs) {
    std::fs::remove_file(fs.join("filler")).unwrap();
}

/// `write_at`'s `Ok(n)`s add up to the file's length, then `ENOSPC`; once space is freed,
/// the writes go on where they stopped.
#[test]
fn write_at_counts_what_landed_then_enospc() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("write_at", kind) else {
            return;
        };
        let path = fs.join("f");
        let data = bytes(DATA_BYTES, 1);
        let rt = common::runtime(kind);
        let (claimed, err) = rt.block_on(async {
            let f = File::create(&path).await.unwrap();
            let mut at = 0usize;
            // Bounded: each round lands a byte or ends.
            for _ in 0..DATA_BYTES {
                let (res, _) = f.write_at(data[at..].to_vec(), at as u64).await;
                match res {
                    Ok(0) => panic!("write_at took no byte at {at}"),
                    Ok(n) => at += n,
                    Err(e) => return (at, e),
                }
                assert!(at < DATA_BYTES, "every byte landed on a full disk");
            }
            unreachable!("more rounds than bytes")
        });
        assert!(is_enospc(&err), "{err:?}");
        assert_eq!(
            fs.landed_prefix(&path, &data),
            claimed,
            "Ok counts vs file length"
        );
        free(&fs);
        rt.block_on(async {
            let f = File::options().write(true).open(&path).await.unwrap();
            let (res, _) = f
                .write_all_at(data[claimed..].to_vec(), claimed as u64)
                .await;
            res.unwrap();
            f.close().await.unwrap();
        });
        assert!(std::fs::read(&path).unwrap() == data);
    });
}

/// `write_all_at`: `ENOSPC`, the file's length is what landed; the rest after freeing.
#[test]
fn write_all_at_fails_with_enospc_and_the_file_holds_what_landed() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("write_all_at", kind) else {
            return;
        };
        let path = fs.join("f");
        let data = bytes(DATA_BYTES, 2);
        let rt = common::runtime(kind);
        let err = rt.block_on(async {
            let f = File::create(&path).await.unwrap();
            let (res, _) = f.write_all_at(data.clone(), 0).await;
            let err = res.expect_err("write_all_at on a full disk");
            // The length hoop sees is the one std sees.
            let len = f.metadata().await.unwrap().len();
            assert_eq!(len, std::fs::metadata(&path).unwrap().len());
            f.close().await.unwrap();
            err
        });
        assert!(is_enospc(&err), "{err:?}");
        let landed = fs.landed_prefix(&path, &data);
        free(&fs);
        rt.block_on(async {
            let f = File::options().write(true).open(&path).await.unwrap();
            let (res, _) = f.write_all_at(data[landed..].to_vec(), landed as u64).await;
            res.unwrap();
            f.sync_all().await.unwrap();
            f.close().await.unwrap();
        });
        assert!(std::fs::read(&path).unwrap() == data);
    });
}

/// `hoop::fs::write`: `ENOSPC`; after freeing, the same call succeeds.
#[test]
fn fs_write_fails_with_enospc_then_succeeds_once_space_is_freed() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("fs_write", kind) else {
            return;
        };
        let path = fs.join("f");
        let data = bytes(DATA_BYTES, 3);
        let rt = common::runtime(kind);
        let err = rt
            .block_on(hoop::fs::write(path.clone(), data.clone()))
            .expect_err("fs::write on a full disk");
        assert!(is_enospc(&err), "{err:?}");
        fs.landed_prefix(&path, &data);
        free(&fs);
        rt.block_on(hoop::fs::write(path.clone(), data.clone()))
            .unwrap();
        assert!(std::fs::read(&path).unwrap() == data);
    });
}

/// `hoop::fs::copy` into the full tmpfs: `ENOSPC` (never `Ok`), whichever of its chunks in
/// flight hits it; after freeing, the copy is whole.
#[test]
fn fs_copy_fails_with_enospc_then_succeeds_once_space_is_freed() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("fs_copy", kind) else {
            return;
        };
        let src_dir = common::TempDir::new("full-disk-copy", &kind.to_string());
        let src = src_dir.0.join("src");
        let data = bytes(DATA_BYTES, 4);
        std::fs::write(&src, &data).unwrap();
        let dst = fs.join("dst");
        let rt = common::runtime(kind);
        let err = rt
            .block_on(hoop::fs::copy(src.clone(), dst.clone()))
            .expect_err("fs::copy onto a full disk");
        assert!(is_enospc(&err), "{err:?}");
        // Its chunks land in parallel: what the partial copy holds is documented as
        // unspecified (as std's), but never more than the source.
        assert!(std::fs::metadata(&dst).unwrap().len() <= DATA_BYTES as u64);
        free(&fs);
        let copied = rt
            .block_on(hoop::fs::copy(src.clone(), dst.clone()))
            .unwrap();
        assert_eq!(copied, DATA_BYTES as u64);
        assert!(std::fs::read(&dst).unwrap() == data);
    });
}

/// How a test writes through the traits.
#[derive(Clone, Copy, Debug)]
enum Via {
    Futures,
    #[cfg(feature = "tokio")]
    Tokio,
}

const VIAS: &[Via] = &[
    Via::Futures,
    #[cfg(feature = "tokio")]
    Via::Tokio,
];

async fn write_all(f: &mut File, data: &[u8], via: Via) -> std::io::Result<()> {
    match via {
        Via::Futures => futures::io::AsyncWriteExt::write_all(f, data).await,
        #[cfg(feature = "tokio")]
        Via::Tokio => tokio::io::AsyncWriteExt::write_all(f, data).await,
    }
}

async fn flush(f: &mut File, via: Via) -> std::io::Result<()> {
    match via {
        Via::Futures => futures::io::AsyncWriteExt::flush(f).await,
        #[cfg(feature = "tokio")]
        Via::Tokio => tokio::io::AsyncWriteExt::flush(f).await,
    }
}

async fn seek_to(f: &mut File, pos: u64, via: Via) -> u64 {
    let to = std::io::SeekFrom::Start(pos);
    match via {
        Via::Futures => futures::io::AsyncSeekExt::seek(f, to).await.unwrap(),
        #[cfg(feature = "tokio")]
        Via::Tokio => tokio::io::AsyncSeekExt::seek(f, to).await.unwrap(),
    }
}

/// `write_all` then `flush` through the traits: the write-behind's `ENOSPC` comes from one of
/// them (a write accepts bytes before they land), once; the file holds what landed. After
/// freeing, a seek to the file's length and the rest complete it.
#[test]
fn trait_write_all_and_flush_report_enospc_once() {
    common::each_driver(|kind| {
        for &via in VIAS {
            let Some(fs) = full_fs(&format!("traits-{via:?}"), kind) else {
                return;
            };
            let path = fs.join("f");
            let data = bytes(DATA_BYTES, 5);
            let rt = common::runtime(kind);
            let landed = rt.block_on(async {
                let mut f = File::create(&path).await.unwrap();
                let wrote = write_all(&mut f, &data, via).await;
                let flushed = flush(&mut f, via).await;
                let err = match (wrote, flushed) {
                    (Err(e), Ok(())) | (Ok(()), Err(e)) => e,
                    (Ok(()), Ok(())) => panic!("{via:?}: write_all and flush Ok on a full disk"),
                    (Err(w), Err(f)) => panic!("{via:?}: reported twice: {w:?}, then {f:?}"),
                };
                assert!(is_enospc(&err), "{via:?}: {err:?}");
                // Reported once: the next flush has nothing left to report.
                flush(&mut f, via).await.unwrap();
                let landed = fs.landed_prefix(&path, &data);
                free(&fs);
                // The cursor is where the kernel left it; the caller picks up at the length.
                assert_eq!(seek_to(&mut f, landed as u64, via).await, landed as u64);
                write_all(&mut f, &data[landed..], via).await.unwrap();
                flush(&mut f, via).await.unwrap();
                f.close().await.unwrap();
                landed
            });
            assert!(landed > 0);
            assert!(std::fs::read(&path).unwrap() == data, "{via:?}");
        }
    });
}

/// `write_all` through the traits, then `File::close` without a flush: `close` writes what
/// was accepted and reports its `ENOSPC`.
#[test]
fn close_reports_the_enospc_of_the_write_behind() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("close", kind) else {
            return;
        };
        let path = fs.join("f");
        let data = bytes(DATA_BYTES, 6);
        let rt = common::runtime(kind);
        let err = rt.block_on(async {
            let mut f = File::create(&path).await.unwrap();
            match write_all(&mut f, &data, Via::Futures).await {
                // Failed at once: the file still closes cleanly.
                Err(e) => {
                    f.close().await.unwrap();
                    e
                }
                Ok(()) => f
                    .close()
                    .await
                    .expect_err("close after write_all on a full disk"),
            }
        });
        assert!(is_enospc(&err), "{err:?}");
        fs.landed_prefix(&path, &data);
    });
}

/// A `File` dropped after `write_all` (no flush): its detached writer hits `ENOSPC`; nobody is
/// left to return it to, so the runtime counts it (`ShutdownReport::failed_writes`, with the
/// bytes it did not write), and the file holds what landed.
#[test]
fn a_dropped_files_enospc_is_counted_not_lost() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("dropped", kind) else {
            return;
        };
        let path = fs.join("f");
        let data = bytes(DATA_BYTES, 7);
        let rt = common::runtime(kind);
        let accepted = rt.block_on(async {
            let mut f = File::create(&path).await.unwrap();
            // The write-behind accepts at most its buffers' worth at once: all of it here.
            write_all(&mut f, &data, Via::Futures).await.is_ok()
        });
        let report = rt.shutdown();
        let landed = fs.landed_prefix(&path, &data);
        if accepted {
            assert_eq!(report.failed_writes, 1, "{report:?}");
            assert_eq!(
                report.failed_write_bytes,
                (DATA_BYTES - landed) as u64,
                "{report:?}"
            );
        }
        assert_eq!(report.unfinished_writes, 0, "{report:?}");
    });
}

/// `/dev/full`: every write API fails with `ENOSPC` (none says `Ok`), reads give zeros.
#[test]
fn dev_full_refuses_writes_and_reads_zeros() {
    if !std::path::Path::new("/dev/full").exists() {
        common::fullfs::skip_test("dev_full_refuses_writes_and_reads_zeros", "no /dev/full");
        return;
    }
    common::each_driver(|kind| {
        let rt = common::runtime(kind);
        rt.block_on(async {
            let mut f = File::options()
                .read(true)
                .write(true)
                .open("/dev/full")
                .await
                .unwrap();
            let (res, _) = f.write_at(vec![1u8; 4096], 0).await;
            assert!(is_enospc(&res.unwrap_err()));
            let (res, _) = f.write_all_at(vec![1u8; 100_000], 0).await;
            assert!(is_enospc(&res.unwrap_err()));
            let (res, _) = f.write_at(vec![1u8; 10], hoop::op::CURRENT_POS).await;
            assert!(is_enospc(&res.unwrap_err()));
            // The traits: from the write itself or from the flush, once.
            let wrote = write_all(&mut f, &[1u8; 100_000], Via::Futures).await;
            let flushed = flush(&mut f, Via::Futures).await;
            match (wrote, flushed) {
                (Err(e), Ok(())) | (Ok(()), Err(e)) => assert!(is_enospc(&e), "{e:?}"),
                other => panic!("traits on /dev/full: {other:?}"),
            }
            // Reads give zeros, positional and through the traits.
            let (res, buf) = f.read_at(vec![7u8; 4096], 0).await;
            assert_eq!(res.unwrap(), 4096);
            assert!(buf.iter().all(|&b| b == 0));
            let mut buf = vec![7u8; 70_000];
            futures::io::AsyncReadExt::read_exact(&mut f, &mut buf)
                .await
                .unwrap();
            assert!(buf.iter().all(|&b| b == 0));
            f.close().await.unwrap();
            let err = hoop::fs::write("/dev/full", vec![1u8; 10])
                .await
                .unwrap_err();
            assert!(is_enospc(&err), "{err:?}");
        });
    });
}

/// `hoop::fs::copy` onto a character device that refuses writes (a private `/dev/full` node,
/// so that a regression cannot change the system's): `ENOSPC`, and the device's mode is left
/// as it was (as `std::fs::copy` does, only a regular destination takes the source's mode).
#[test]
fn fs_copy_onto_a_full_device_fails_and_keeps_its_mode() {
    let name = "fs_copy_onto_a_full_device_fails_and_keeps_its_mode";
    let dir = common::TempDir::new("full-disk-dev", "copy");
    let node = dir.0.join("full");
    let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: mknod(2) with a valid C string.
    let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        common::fullfs::skip_test(name, &format!("cannot make a /dev/full node: {e}"));
        return;
    }
    // mknod's mode went through the umask.
    std::fs::set_permissions(&node, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    if std::fs::OpenOptions::new().write(true).open(&node).is_err() {
        common::fullfs::skip_test(name, "the temp dir is mounted nodev");
        return;
    }
    let src = dir.0.join("src");
    std::fs::write(&src, bytes(100_000, 8)).unwrap();
    std::fs::set_permissions(&src, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o7777
    };
    common::each_driver(|kind| {
        let rt = common::runtime(kind);
        let err = rt
            .block_on(hoop::fs::copy(src.clone(), node.clone()))
            .unwrap_err();
        assert!(is_enospc(&err), "{err:?}");
        assert_eq!(mode(&node), 0o666, "the device's mode changed");
    });
}

/// `sync_all`/`sync_data` on a device whose writeback fails (a loop device over a full
/// tmpfs): the kernel's `EIO` comes back from the first sync after the failure, once (a
/// second sync has nothing new to report), and a new failure is reported again: hoop neither
/// swallows nor repeats it.
#[test]
fn sync_errors_surface_once() {
    common::each_driver(|kind| {
        let Some(disk) = FailingDisk::new(
            &format!("sync_errors_surface_once-{kind}"),
            8 << 20,
            1 << 20,
        ) else {
            return;
        };
        let rt = common::runtime(kind);
        rt.block_on(async {
            let f = File::options()
                .read(true)
                .write(true)
                .open(disk.path())
                .await
                .unwrap();
            // 3 MiB into the device's page cache: accepted, its writeback cannot land.
            let (res, _) = f.write_all_at(bytes(3 << 20, 9), 0).await;
            res.unwrap();
            let err = f
                .sync_all()
                .await
                .expect_err("sync_all after a failed writeback");
            assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err:?}");
            f.sync_all().await.expect("the failure was reported once");
            let (res, _) = f.write_all_at(bytes(1 << 20, 10), 4 << 20).await;
            res.unwrap();
            let err = f
                .sync_data()
                .await
                .expect_err("sync_data after a new failure");
            assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err:?}");
            f.sync_data().await.expect("the failure was reported once");
            f.close().await.unwrap();
        });
        drop(rt);
        drop(disk);
    });
}

/// `hoop::shared`'s `File` through the traits, with no runtime (woken by the rings), on both
/// engines: `write_all` then `flush` report `ENOSPC` once, the file holds what landed (its
/// cursor writes take the same fix as the runtime's), and after freeing the rest completes it.
#[test]
fn shared_file_write_all_and_flush_report_enospc() {
    for kind in common::DRIVERS {
        let Some(fs) = full_fs("shared", kind) else {
            return;
        };
        let rings = {
            let _setup = hoop::fault::opt_out_quietly(&["setup"]);
            match hoop::shared::Rings::builder()
                .rings(2)
                .entries(64)
                .driver(kind)
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    common::skip(kind, &format!("no shared rings: {e}"));
                    continue;
                }
            }
        };
        let path = fs.join("f");
        let data = bytes(DATA_BYTES, 12);
        let mut f = common::block_on(hoop::shared::File::create(&rings, &path)).unwrap();
        let wrote = common::block_on(futures::io::AsyncWriteExt::write_all(&mut f, &data));
        let flushed = common::block_on(futures::io::AsyncWriteExt::flush(&mut f));
        match (wrote, flushed) {
            (Err(e), Ok(())) | (Ok(()), Err(e)) => assert!(is_enospc(&e), "{kind}: {e:?}"),
            other => panic!("{kind}: shared File on a full disk: {other:?}"),
        }
        let landed = fs.landed_prefix(&path, &data);
        free(&fs);
        let to = std::io::SeekFrom::Start(landed as u64);
        common::block_on(futures::io::AsyncSeekExt::seek(&mut f, to)).unwrap();
        common::block_on(futures::io::AsyncWriteExt::write_all(
            &mut f,
            &data[landed..],
        ))
        .unwrap();
        common::block_on(futures::io::AsyncWriteExt::flush(&mut f)).unwrap();
        drop(f);
        assert!(std::fs::read(&path).unwrap() == data, "{kind}");
        drop(rings);
    }
}
