//! The file's cursor (`CURRENT_POS`) on a full disk, for real (a 1 MiB tmpfs filled by a
//! filler file, as in `full_disk.rs`), on io_uring and on epoll: writes at the cursor through
//! a `File` and through a `FixedFile` (its registered slot has no position of its own) leave
//! the cursor after the bytes that landed, and reads at the cursor leave it after the bytes
//! they read, however short each transfer is (an injected `short_io` makes them shorter).
//!
//! Root only (mounts); elsewhere each test prints `skip TEST: REASON` and passes.

use hoop_test_support as common;

use std::os::fd::AsRawFd;

use common::fullfs::{is_enospc, SmallFs};
use common::http::bytes;
use hoop::fs::File;
use hoop::DriverKind;

/// The tmpfs's size, the filler's, and the bytes a test writes: the write fails about half
/// way.
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

/// `IORING_OP_FIXED_FD_INSTALL` (linux/io_uring.h).
const FIXED_FD_INSTALL: u8 = 54;

/// The position of `fd`'s open file.
fn cursor(fd: &impl AsRawFd) -> u64 {
    // SAFETY: lseek(2) on an fd the caller keeps open.
    let at = unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_CUR) };
    u64::try_from(at).expect("lseek")
}

/// At the cursor (`CURRENT_POS`): a short write on a full disk leaves the cursor after the
/// bytes it wrote, and `write_all_at(.., CURRENT_POS)` fails rather than writing the rest on
/// top of them. (io_uring on Linux 6.18 leaves the cursor where it was when the second try of
/// a short write fails: `hoop::fs`'s cursor fix; before it, this `write_all_at` returned `Ok`
/// with the second half of the data in place of the first.)
#[test]
fn writes_at_the_cursor_move_it_past_what_landed() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("cursor", kind) else {
            return;
        };
        let data = bytes(DATA_BYTES, 11);
        let rt = common::runtime(kind);
        rt.block_on(async {
            let path = fs.join("one");
            let f = File::create(&path).await.unwrap();
            // Until the disk is full (an injected `short_io` may cut a write shorter).
            let mut at = 0usize;
            let err = loop {
                let (res, _) = f.write_at(data[at..].to_vec(), hoop::op::CURRENT_POS).await;
                match res {
                    Ok(n) => {
                        assert!(n > 0 && at + n < DATA_BYTES, "{at} + {n} on a full disk");
                        at += n;
                        // SAFETY: lseek(2) on the file's own fd.
                        let cursor = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_CUR) };
                        assert_eq!(cursor, at as libc::off_t, "the cursor after {at} bytes");
                    }
                    Err(e) => break e,
                }
            };
            assert!(is_enospc(&err), "{err:?}");
            f.close().await.unwrap();
            assert_eq!(fs.landed_prefix(&path, &data), at);
            std::fs::remove_file(&path).unwrap();

            let path = fs.join("all");
            let f = File::create(&path).await.unwrap();
            let (res, _) = f.write_all_at(data.clone(), hoop::op::CURRENT_POS).await;
            assert!(is_enospc(&res.unwrap_err()));
            f.close().await.unwrap();
            fs.landed_prefix(&path, &data);
        });
    });
}

/// A `FixedFile` (in a registered slot on io_uring, a plain fd on epoll) at the cursor: its
/// `write_all_at(.., CURRENT_POS)` fails with `ENOSPC` on a full disk and the file holds
/// exactly the bytes that landed (before the `FixedFile` kept an fd for its cursor, the slot's
/// short writes left the cursor behind and the rest overwrote them: `Ok` with the wrong bytes).
/// Then reads at the cursor, through the `FixedFile` and through the `File` that shares its
/// open file, each leave the cursor right after the bytes they read.
#[test]
fn fixed_file_writes_and_reads_at_the_cursor() {
    common::each_driver(|kind| {
        let Some(fs) = full_fs("fixed-cursor", kind) else {
            return;
        };
        let data = bytes(DATA_BYTES, 13);
        let rt = common::runtime(kind);
        rt.block_on(async {
            let path = fs.join("fixed");
            let file = hoop::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .await
                .unwrap();
            let fixed = file.register().await.unwrap();
            println!("driver={kind}: in a slot: {}", fixed.is_fixed());
            // A slot's cursor is read through an fd installed from it (6.8).
            let install = hoop::driver::Driver::current()
                .is_some_and(|d| d.supports_opcode(FIXED_FD_INSTALL));
            if fixed.is_fixed() && !install {
                common::skip(
                    kind,
                    "no IORING_OP_FIXED_FD_INSTALL (6.8): a slot's cursor goes unfixed",
                );
                return;
            }
            let (res, _) = fixed
                .write_all_at(data.clone(), hoop::op::CURRENT_POS)
                .await;
            let err = res.expect_err("a write_all of 512 KiB fit on a full disk");
            assert!(is_enospc(&err), "driver={kind}: {err:?}");
            let landed = fs.landed_prefix(&path, &data);
            assert_eq!(
                cursor(&file),
                landed as u64,
                "driver={kind}: the cursor after the bytes that landed"
            );

            // Reads at the cursor, from the start, in pieces of odd sizes, alternating between
            // the `FixedFile` and the `File` (one open file, one cursor).
            // SAFETY: lseek(2) on the file's own fd.
            let rewound = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_SET) };
            assert_eq!(rewound, 0);
            let mut read = Vec::with_capacity(landed);
            let mut turn = 0usize;
            loop {
                let want = 1000 + 4093 * (turn % 7);
                let (res, buf) = if turn.is_multiple_of(2) {
                    fixed
                        .read_at(Vec::with_capacity(want), hoop::op::CURRENT_POS)
                        .await
                } else {
                    file.read_at(Vec::with_capacity(want), hoop::op::CURRENT_POS)
                        .await
                };
                let n = res.unwrap();
                if n == 0 {
                    break;
                }
                read.extend_from_slice(&buf[..n]);
                assert_eq!(
                    cursor(&file),
                    read.len() as u64,
                    "driver={kind}: the cursor after {} bytes read",
                    read.len()
                );
                turn += 1;
            }
            assert!(read == data[..landed], "driver={kind}: the bytes read back");
            fixed.close().await.unwrap();
            file.close().await.unwrap();
        });
    });
}
