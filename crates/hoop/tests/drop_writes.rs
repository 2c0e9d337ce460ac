//! Writes accepted are written (DESIGN.md, "Writes accepted are written"), on io_uring and on
//! epoll: a `File`, a `TcpStream`, a `UnixStream` or an owned write half dropped right after
//! `AsyncWriteExt::write_all` (no flush) still writes every byte it accepted, in order, then
//! closes (a peer reads every byte, then end of stream, while the runtime is idle); a runtime
//! whose detached writes cannot finish waits for them up to its shutdown timeout and reports
//! them in its `ShutdownReport`.
//!
//! Under injected resets (`HOOP_FAULTS` with `econnreset`) a detached write of a stream may fail
//! with nobody left to report it to: the runtime closes the stream, so its peer reads a strict
//! prefix of the bytes, then the end of the stream. A stream case then counts as reset and runs
//! again on a new pair (`resets::retry`); a byte that is not the next expected one still fails
//! at once, and without injected resets any short read fails.

use hoop_test_support as common;
use hoop_test_support::resets;

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hoop::fs::File;
use hoop::net::{TcpStream, UnixStream};
use hoop::DriverKind;

/// What the peer read, checked against what was sent: every byte, then the end of the
/// stream. A byte that differs (or one too many) fails the test; a strict prefix then the end
/// is a connection that a reset ended (`resets::closed_early`), which `resets::retry` reruns
/// while resets are injected and fails otherwise.
fn prefix_then_end(got: &[u8], want: &[u8], what: &str) -> io::Result<()> {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: byte {i} of {} differs", want.len());
    }
    assert!(
        got.len() <= want.len(),
        "{what}: the peer read {} bytes, {} were sent",
        got.len(),
        want.len()
    );
    if got.len() < want.len() {
        return Err(resets::closed_early(&format!(
            "{what}: {} of {} bytes",
            got.len(),
            want.len()
        )));
    }
    Ok(())
}

const FILES: usize = 200;
const FILE_BYTES: usize = 300_000;

/// A directory of its own under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("hoop-drop-writes-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic pseudo-random bytes (xorshift64*), different for each seed.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
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

/// How a test writes through the traits.
#[derive(Clone, Copy, Debug)]
enum Via {
    Futures,
    #[cfg(feature = "tokio")]
    Tokio,
}

async fn write_all<W>(w: &mut W, data: &[u8], via: Via) -> io::Result<()>
where
    W: futures::io::AsyncWrite + Unpin,
    W: MaybeTokioWrite,
{
    match via {
        Via::Futures => futures::io::AsyncWriteExt::write_all(w, data).await,
        #[cfg(feature = "tokio")]
        Via::Tokio => w.tokio_write_all(data).await,
    }
}

/// tokio's `AsyncWriteExt::write_all`, with feature `tokio`.
trait MaybeTokioWrite {
    #[cfg(feature = "tokio")]
    fn tokio_write_all(&mut self, data: &[u8])
        -> impl std::future::Future<Output = io::Result<()>>;
}

#[cfg(feature = "tokio")]
impl<T: tokio::io::AsyncWrite + Unpin> MaybeTokioWrite for T {
    async fn tokio_write_all(&mut self, data: &[u8]) -> io::Result<()> {
        tokio::io::AsyncWriteExt::write_all(self, data).await
    }
}

#[cfg(not(feature = "tokio"))]
impl<T> MaybeTokioWrite for T {}

/// 200 files of 300,000 bytes, each dropped right after `write_all` without a flush, then the
/// runtime is dropped as `main`'s would be: every file has every byte, the right ones.
fn files_dropped_unflushed(kind: DriverKind, via: Via) {
    let dir = TempDir::new(&format!("{kind}-{via:?}"));
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
            let dir = TempDir::new(&format!("{kind}-idle"));
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

/// The bytes a stream test sends: several socket buffers' worth, so the last ones are still
/// the stream's write-behind when `write_all` returns.
const STREAM_BYTES: usize = 1 << 20;

/// [`STREAM_BYTES`], or a quarter of it while resets are injected: a case starts over after
/// a reset, and any of its sends (one per 16 KiB at least) may be one, so a case of 64 sends
/// would rarely get through at 5% of sends; 16 still take more than a socket buffer.
fn stream_bytes() -> usize {
    if resets::injected() {
        STREAM_BYTES / 4
    } else {
        STREAM_BYTES
    }
}

/// A std peer on its own thread: reads until end of stream (10 s at most without a byte).
fn reader<S: Read + Send + 'static>(s: S) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    read_with_pauses(s, Duration::ZERO)
}

/// [`reader`] pausing `pause` after each 16 KiB, so that writes of the other side stay in flight
/// for a while.
fn read_with_pauses<S: Read + Send + 'static>(
    mut s: S,
    pause: Duration,
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    common::spawn(move || {
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Ok(got);
            }
            got.extend_from_slice(&chunk[..n]);
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
    })
}

/// What the peer read, or why it stopped: a reset (retried under injected resets), or anything
/// else, which fails the test.
fn peer_read(peer: std::thread::JoinHandle<io::Result<Vec<u8>>>) -> io::Result<Vec<u8>> {
    peer.join().unwrap().map_err(|e| {
        if resets::is_reset(&e) {
            e
        } else {
            io::Error::new(
                e.kind(),
                format!("the peer reads to end of stream (a read timeout means no EOF came): {e}"),
            )
        }
    })
}

/// Joins the peer while the runtime is idle (not running): it must have read every byte and
/// then end of stream (under injected resets, a strict prefix then the end is a reset: see
/// [`prefix_then_end`]).
fn expect_all(
    peer: std::thread::JoinHandle<io::Result<Vec<u8>>>,
    seed: u64,
    what: &str,
) -> io::Result<()> {
    let got = peer_read(peer)?;
    prefix_then_end(&got, &bytes(stream_bytes(), seed), what)
}

/// The resets injected so far in this process (by any thread).
fn injected_resets() -> u64 {
    hoop::fault::counts()
        .into_iter()
        .find(|(kind, _)| *kind == "econnreset")
        .map_or(0, |(_, n)| n)
}

fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (a, b)
}

fn unix_pair() -> (
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixStream,
) {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (a, b)
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

/// `close` writes what `AsyncWrite` accepted before it closes, for files and streams.
#[test]
fn close_writes_what_was_accepted_first() {
    common::each_driver(|kind| {
        common::bounded(60, move || {
            resets::retry(&format!("{kind}: close after write_all"), |_| {
                let dir = TempDir::new(&format!("{kind}-close"));
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

/// Sends `FILL` bytes without waiting (`MSG_DONTWAIT`) until the socket takes no more: its send
/// buffer and the peer's receive buffer are then full, so the next write waits in flight.
/// Returns the bytes sent.
fn fill(fd: std::os::fd::RawFd) -> usize {
    let chunk = [FILL; 64 * 1024];
    let mut total = 0;
    // Bounded: loopback buffers take a few MiB at most.
    for _ in 0..16 * 1024 {
        // SAFETY: the pointer and length describe `chunk`, alive for the call.
        let r = unsafe {
            libc::send(
                fd,
                chunk.as_ptr().cast(),
                chunk.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r <= 0 {
            break;
        }
        total += r as usize;
    }
    total
}

const FILL: u8 = 0xa5;
/// One `poll_write`'s worth for a socket (its 16 KiB buffer): accepted at once, written later.
const LAST_BYTES: usize = 16 * 1024;

/// Which value a full-buffer case drops.
#[derive(Clone, Copy, Debug)]
enum Dropped {
    Tcp,
    Unix,
    TcpWriteHalf,
    UnixWriteHalf,
}

/// The peer's end of a full-buffer case: waits for `go`, then reads to the end.
fn peer_after(
    theirs: impl Read + Send + 'static,
    go: std::sync::mpsc::Receiver<()>,
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    common::spawn(move || {
        let _ = go.recv_timeout(Duration::from_secs(20));
        let mut s = theirs;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        Ok(got)
    })
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
        let dir = TempDir::new(&format!("{kind}-shared"));
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
