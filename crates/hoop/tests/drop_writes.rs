//! Writes accepted are written (DESIGN.md, "Writes accepted are written"), on io_uring and on
//! epoll: a `File`, a `TcpStream`, a `UnixStream` or an owned write half dropped right after
//! `AsyncWriteExt::write_all` (no flush) still writes every byte it accepted, in order, then
//! closes (a peer reads every byte, then end of stream, while the runtime is idle); a runtime
//! whose detached writes cannot finish waits for them up to its shutdown timeout and reports
//! them in its `ShutdownReport`. With the socket's buffers full, and a close after writes:
//! `drop_writes_full.rs`.
//!
//! Under injected resets (`HOOP_FAULTS` with `econnreset`) a detached write of a stream may fail
//! with nobody left to report it to: the runtime closes the stream, so its peer reads a strict
//! prefix of the bytes, then the end of the stream. A stream case then counts as reset and runs
//! again on a new pair (`resets::retry`); a byte that is not the next expected one still fails
//! at once, and without injected resets any short read fails.

use hoop_test_support as common;
use hoop_test_support::resets;

use std::io::{self};
use std::time::Duration;

use hoop::fs::File;
use hoop::net::{TcpStream, UnixStream};
use hoop::DriverKind;

mod drop_writes_common;
use drop_writes_common::*;

const FILES: usize = 200;

/// 200 files of 300,000 bytes, each dropped right after `write_all` without a flush, then the
/// runtime is dropped as `main`'s would be: every file has every byte, the right ones.
fn files_dropped_unflushed(kind: DriverKind, via: Via) {
    let dir = TempDir::new("drop-writes", &format!("{kind}-{via:?}"));
    let rt = common::runtime(kind);
    let base = dir.0.clone();
    rt.block_on(async move {
        for i in 0..FILES {
            let mut f = File::create(base.join(format!("f{i}"))).await.unwrap();
            write_all(&mut f, &bytes(FILE_BYTES, i as u64), via)
                .await
                .unwrap();
            // Dropped here: its write-behind is still in flight.
        }
    });
    let report = rt.shutdown();
    assert_eq!(report.unfinished_writes, 0, "{report:?}");
    let mut short = Vec::new();
    for i in 0..FILES {
        let got = std::fs::read(dir.0.join(format!("f{i}"))).unwrap();
        if got.len() != FILE_BYTES {
            short.push((i, got.len()));
        } else {
            assert!(
                got == bytes(FILE_BYTES, i as u64),
                "file {i}: wrong content"
            );
        }
    }
    assert!(
        short.is_empty(),
        "{} of {FILES} files short (index, length): {:?}",
        short.len(),
        &short[..short.len().min(8)]
    );
}

#[test]
fn files_dropped_after_futures_write_all_have_every_byte() {
    common::each_driver(|kind| {
        common::bounded(120, move || files_dropped_unflushed(kind, Via::Futures))
    });
}

#[cfg(feature = "tokio")]
#[test]
fn files_dropped_after_tokio_write_all_have_every_byte() {
    common::each_driver(|kind| {
        common::bounded(120, move || files_dropped_unflushed(kind, Via::Tokio))
    });
}

/// A file dropped unflushed inside `block_on` is complete when `block_on` returns, while the
/// runtime lives on (idle).
#[test]
fn file_is_complete_when_block_on_returns() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            let dir = TempDir::new("drop-writes", &format!("{kind}-idle"));
            let path = dir.0.join("f");
            let rt = common::runtime(kind);
            let p = path.clone();
            rt.block_on(async move {
                let mut f = File::create(&p).await.unwrap();
                write_all(&mut f, &bytes(3 * FILE_BYTES, 7), Via::Futures)
                    .await
                    .unwrap();
                drop(f);
                // The writer finishing it is hoop's own task: the program's count is 0.
                assert_eq!(hoop::runtime::task_count(), 0);
            });
            let got = std::fs::read(&path).unwrap();
            assert_eq!(got.len(), 3 * FILE_BYTES);
            assert!(got == bytes(3 * FILE_BYTES, 7), "wrong content");
            drop(rt);
        })
    });
}

/// The resets injected so far in this process (by any thread).
fn injected_resets() -> u64 {
    hoop::fault::counts()
        .into_iter()
        .find(|(kind, _)| *kind == "econnreset")
        .map_or(0, |(_, n)| n)
}

#[test]
fn tcp_stream_dropped_after_write_all_sends_every_byte_then_eof() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            resets::retry(
                &format!("{kind}: a TcpStream dropped after write_all"),
                |_| {
                    let (ours, theirs) = tcp_pair();
                    let peer = reader(theirs);
                    let rt = common::runtime(kind);
                    let wrote = rt.block_on(async move {
                        let mut s = TcpStream::from_std(ours);
                        write_all(&mut s, &bytes(stream_bytes(), 1), Via::Futures).await
                    });
                    let read = expect_all(peer, 1, "TcpStream");
                    drop(rt);
                    wrote.and(read)
                },
            )
        })
    });
}

#[test]
fn unix_stream_dropped_after_write_all_sends_every_byte_then_eof() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            resets::retry(
                &format!("{kind}: a UnixStream dropped after write_all"),
                |_| {
                    let (ours, theirs) = unix_pair();
                    let peer = reader(theirs);
                    let rt = common::runtime(kind);
                    let wrote = rt.block_on(async move {
                        let mut s = UnixStream::from_std(ours);
                        write_all(&mut s, &bytes(stream_bytes(), 2), Via::Futures).await
                    });
                    let read = expect_all(peer, 2, "UnixStream");
                    drop(rt);
                    wrote.and(read)
                },
            )
        })
    });
}

/// An owned write half dropped after `write_all`: its bytes, then the write direction's end,
/// while the read half lives on.
#[test]
fn owned_write_halves_dropped_after_write_all_send_every_byte_then_eof() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            let rt = common::runtime(kind);
            let mut read_halves: Vec<Box<dyn std::any::Any>> = Vec::new();
            resets::retry(&format!("{kind}: a TcpStream write half dropped"), |_| {
                let (ours, theirs) = tcp_pair();
                let peer = reader(theirs);
                let (read_half, wrote) = rt.block_on(async move {
                    let (rd, mut wr) = TcpStream::from_std(ours).into_split();
                    let wrote = write_all(&mut wr, &bytes(stream_bytes(), 3), Via::Futures).await;
                    (rd, wrote)
                });
                let read = expect_all(peer, 3, "TcpStream write half");
                read_halves.push(Box::new(read_half));
                wrote.and(read)
            });
            resets::retry(&format!("{kind}: a UnixStream write half dropped"), |_| {
                let (ours, theirs) = unix_pair();
                let peer = reader(theirs);
                let (read_half, wrote) = rt.block_on(async move {
                    let (rd, mut wr) = UnixStream::from_std(ours).into_split();
                    let wrote = write_all(&mut wr, &bytes(stream_bytes(), 4), Via::Futures).await;
                    (rd, wrote)
                });
                let read = expect_all(peer, 4, "UnixStream write half");
                read_halves.push(Box::new(read_half));
                wrote.and(read)
            });
            drop(read_halves);
            drop(rt);
        })
    });
}

/// Streams and files dropped inside tasks that the shutdown drops: their writes are finished
/// by the shutdown.
#[test]
fn writes_of_tasks_dropped_at_shutdown_are_finished() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            resets::retry(
                &format!("{kind}: a stream of a task dropped at shutdown"),
                |_| {
                    let (ours, theirs) = unix_pair();
                    // Slow: the stream's last write is still in flight when the shutdown drops it.
                    let peer = read_with_pauses(theirs, Duration::from_millis(2));
                    let rt = common::runtime(kind);
                    let (wrote_tx, wrote_rx) =
                        futures::channel::oneshot::channel::<io::Result<()>>();
                    // Kept until after the shutdown: the task waits on it forever.
                    let (hold_tx, hold_rx) = futures::channel::oneshot::channel::<()>();
                    let wrote = rt.block_on(async move {
                        hoop::spawn(async move {
                            let mut s = UnixStream::from_std(ours);
                            let wrote =
                                write_all(&mut s, &bytes(stream_bytes(), 5), Via::Futures).await;
                            let _ = wrote_tx.send(wrote);
                            let _ = hold_rx.await;
                            drop(s);
                        });
                        wrote_rx.await.unwrap()
                    });
                    // The task is still alive, holding the stream: no EOF yet.
                    let report = rt.shutdown();
                    drop(hold_tx);
                    assert_eq!(report.unfinished_writes, 0, "{report:?}");
                    let read = expect_all(peer, 5, "UnixStream of a dropped task");
                    wrote.and(read)
                },
            )
        })
    });
}

/// A write that cannot finish (the peer never reads, the socket buffer is full): `block_on`'s
/// end and the shutdown wait for it only up to the shutdown timeout, and the report counts it
/// with its bytes not written.
#[test]
fn unfinished_write_is_reported_after_the_shutdown_timeout() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            resets::retry(&format!("{kind}: an unfinished write"), |_| {
                let (ours, theirs) = unix_pair();
                let rt = common::builder(kind)
                    .shutdown_timeout(Duration::from_millis(200))
                    .build()
                    .unwrap();
                let resets_before = injected_resets();
                let wrote = rt.block_on(async move {
                    let mut s = UnixStream::from_std(ours);
                    let big = bytes(16 << 20, 6);
                    // Fills the socket buffer; the last bytes accepted stay in flight.
                    let r = hoop::time::timeout(
                        Duration::from_millis(200),
                        futures::io::AsyncWriteExt::write_all(&mut s, &big),
                    )
                    .await;
                    match r {
                        Err(_elapsed) => Ok(()),
                        Ok(Err(e)) => Err(e),
                        Ok(Ok(())) => panic!("16 MiB fit a socket buffer nobody reads"),
                    }
                });
                let report = rt.shutdown();
                drop(theirs);
                wrote?;
                if report.unfinished_writes == 0
                    && resets::injected()
                    && injected_resets() > resets_before
                {
                    // The write in flight failed on an injected reset: nothing was left.
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        format!("no unfinished write after an injected reset: {report:?}"),
                    ));
                }
                assert_eq!(report.unfinished_writes, 1, "{report:?}");
                assert!(report.unfinished_write_bytes > 0, "{report:?}");
                Ok(())
            })
        })
    });
}

/// `hoop::shared`'s `File` and `TcpStream` dropped after `write_all` with writes pending: their
/// self-driven writers finish the writes (the files become complete, the peer reads every
/// byte and then the end of the stream) with no runtime at all, woken by the rings.
#[test]
fn shared_values_dropped_after_write_all_write_every_byte() {
    const SHARED_FILES: usize = 20;
    for kind in common::DRIVERS {
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
        let dir = TempDir::new("drop-writes", &format!("{kind}-shared"));
        let base = dir.0.clone();
        let r = rings.clone();
        common::block_on(async move {
            for i in 0..SHARED_FILES {
                let path = base.join(format!("f{i}"));
                let mut f = hoop::shared::File::create(&r, path).await.unwrap();
                write_all(&mut f, &bytes(FILE_BYTES, 100 + i as u64), Via::Futures)
                    .await
                    .unwrap();
            }
        });
        common::wait_until(&format!("{kind}: shared files complete"), 20, || {
            (0..SHARED_FILES).all(|i| {
                std::fs::metadata(dir.0.join(format!("f{i}")))
                    .is_ok_and(|m| m.len() == FILE_BYTES as u64)
            })
        });
        for i in 0..SHARED_FILES {
            let got = std::fs::read(dir.0.join(format!("f{i}"))).unwrap();
            assert!(got == bytes(FILE_BYTES, 100 + i as u64), "{kind}: file {i}");
        }

        resets::retry(&format!("{kind}: a shared TcpStream dropped"), |_| {
            let (ours, theirs) = tcp_pair();
            let (go_tx, go_rx) = std::sync::mpsc::channel();
            let peer = peer_after(theirs, go_rx);
            let last = bytes(LAST_BYTES, 11);
            let data = last.clone();
            let r = rings.clone();
            let (filled, wrote) = common::block_on(async move {
                let mut s = hoop::shared::TcpStream::from_std(&r, ours);
                let filled = fill(std::os::fd::AsRawFd::as_raw_fd(&s));
                let wrote = write_all(&mut s, &data, Via::Futures).await;
                (filled, wrote)
            });
            let _ = go_tx.send(());
            let got = peer_read(peer)?;
            let mut want = vec![FILL; filled];
            want.extend_from_slice(&last);
            let read = prefix_then_end(&got, &want, &format!("{kind}: shared TcpStream"));
            wrote.and(read)
        });
        drop(rings);
    }
}
