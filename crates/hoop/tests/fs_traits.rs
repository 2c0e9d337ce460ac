//! hoop::fs's `File` through the I/O traits (futures' `AsyncRead`/`AsyncWrite`/`AsyncSeek`, and
//! tokio's with feature `tokio`), against std on the same file: copies with any buffer size,
//! reads, writes and seeks interleaved, dropped futures that lose and duplicate nothing, and a
//! failed write-behind reported once.
//!
//! Several tests count the process's open fds, so every test takes one lock first and holds it
//! to its end. Every test runs on each driver, each run in a temporary directory of its own.

use hoop_test_support as common;

use common::each_driver;
use hoop::fs::{File, OpenOptions};

use futures::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use futures::FutureExt;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};

mod fs_common;
use fs_common::*;

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
        let dir = TempDir::new("fs-test", &format!("traits-copy-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("traits-seq-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("traits-drop-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("traits-zero-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("traits-tokio-{kind}"));
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
        let dir = TempDir::new("fs-test", &format!("traits-err-{kind}"));
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
