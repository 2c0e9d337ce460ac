//! Writes accepted are written (DESIGN.md, "Writes accepted are written") when the socket's
//! buffers are full, on io_uring and on epoll: a stream or an owned write half dropped with a
//! write waiting for room writes it, then closes (the peer reads every byte, then end of
//! stream); and a close writes what was accepted first.
//!
//! Under injected resets a stream case counts as reset and runs again on a new pair
//! (`resets::retry`); a byte that is not the next expected one still fails at once.

use hoop_test_support as common;
use hoop_test_support::resets;

use std::io::{self};

use hoop::fs::File;
use hoop::net::{TcpStream, UnixStream};
use hoop::DriverKind;

mod drop_writes_common;
use drop_writes_common::*;

/// `close` writes what `AsyncWrite` accepted before it closes, for files and streams.
#[test]
fn close_writes_what_was_accepted_first() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            resets::retry(&format!("{kind}: close after write_all"), |_| {
                let dir = TempDir::new("drop-writes", &format!("{kind}-close"));
                let path = dir.0.join("f");
                let (ours, theirs) = tcp_pair();
                let peer = reader(theirs);
                let rt = common::runtime(kind);
                let p = path.clone();
                let wrote = rt.block_on(async move {
                    let mut f = File::create(&p).await.unwrap();
                    write_all(&mut f, &bytes(FILE_BYTES, 8), Via::Futures)
                        .await
                        .unwrap();
                    f.close().await.unwrap();
                    // Closed and complete before anything else runs.
                    assert_eq!(std::fs::metadata(&p).unwrap().len(), FILE_BYTES as u64);

                    let mut s = TcpStream::from_std(ours);
                    write_all(&mut s, &bytes(stream_bytes(), 9), Via::Futures).await?;
                    s.close().await
                });
                let read = expect_all(peer, 9, "a closed TcpStream");
                assert!(std::fs::read(&path).unwrap() == bytes(FILE_BYTES, 8));
                drop(rt);
                wrote.and(read)
            })
        })
    });
}

/// Which value a full-buffer case drops.
#[derive(Clone, Copy, Debug)]
enum Dropped {
    Tcp,
    Unix,
    TcpWriteHalf,
    UnixWriteHalf,
}

/// The socket buffers are full when `write_all` hands the stream its last 16 KiB, so that
/// write is surely still in flight at the drop (on epoll as on io_uring); the peer starts
/// reading only then, and must read every byte, then the end of the stream, while the runtime
/// is idle after `block_on`.
fn dropped_with_full_buffers(kind: DriverKind, what: Dropped, via: Via) -> io::Result<()> {
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let rt = common::runtime(kind);
    let last = bytes(LAST_BYTES, 10);
    let data = last.clone();
    let (peer, filled, read_half, wrote) = match what {
        Dropped::Tcp | Dropped::TcpWriteHalf => {
            let (ours, theirs) = tcp_pair();
            let peer = peer_after(theirs, go_rx);
            let (filled, keep, wrote) = rt.block_on(async move {
                let s = TcpStream::from_std(ours);
                let filled = fill(std::os::fd::AsRawFd::as_raw_fd(&s));
                let (keep, wrote) = if matches!(what, Dropped::Tcp) {
                    let mut s = s;
                    (None, write_all(&mut s, &data, via).await)
                } else {
                    let (rd, mut wr) = s.into_split();
                    let wrote = write_all(&mut wr, &data, via).await;
                    (Some(Box::new(rd) as Box<dyn std::any::Any>), wrote)
                };
                let _ = go_tx.send(());
                (filled, keep, wrote)
            });
            (peer, filled, keep, wrote)
        }
        Dropped::Unix | Dropped::UnixWriteHalf => {
            let (ours, theirs) = unix_pair();
            let peer = peer_after(theirs, go_rx);
            let (filled, keep, wrote) = rt.block_on(async move {
                let s = UnixStream::from_std(ours);
                let filled = fill(std::os::fd::AsRawFd::as_raw_fd(&s));
                let (keep, wrote) = if matches!(what, Dropped::Unix) {
                    let mut s = s;
                    (None, write_all(&mut s, &data, via).await)
                } else {
                    let (rd, mut wr) = s.into_split();
                    let wrote = write_all(&mut wr, &data, via).await;
                    (Some(Box::new(rd) as Box<dyn std::any::Any>), wrote)
                };
                let _ = go_tx.send(());
                (filled, keep, wrote)
            });
            (peer, filled, keep, wrote)
        }
    };
    // The read half (if any) is still alive: the end of stream comes from the write half's
    // shutdown.
    let got = peer_read(peer)?;
    assert!(filled > 0, "{what:?}: the socket took no bytes");
    let mut want = vec![FILL; filled];
    want.extend_from_slice(&last);
    let read = prefix_then_end(&got, &want, &format!("{what:?} ({via:?})"));
    drop(read_half);
    let report = rt.shutdown();
    assert_eq!(report.unfinished_writes, 0, "{report:?}");
    wrote.and(read)
}

#[test]
fn streams_and_write_halves_dropped_with_a_write_waiting_for_room_write_it_then_eof() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            for what in [
                Dropped::Tcp,
                Dropped::Unix,
                Dropped::TcpWriteHalf,
                Dropped::UnixWriteHalf,
            ] {
                resets::retry(&format!("{kind}: {what:?} dropped, full buffers"), |_| {
                    dropped_with_full_buffers(kind, what, Via::Futures)
                });
                #[cfg(feature = "tokio")]
                resets::retry(
                    &format!("{kind}: {what:?} dropped, full buffers, tokio"),
                    |_| dropped_with_full_buffers(kind, what, Via::Tokio),
                );
            }
        })
    });
}
