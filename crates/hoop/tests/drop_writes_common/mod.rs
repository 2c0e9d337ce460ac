//! What `drop_writes.rs` and `drop_writes_full.rs` share: the test data, the two ways to
//! `write_all` (futures' and tokio's), the socket pairs, and the peer that reads and checks
//! every byte (each file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;
use hoop_test_support::resets;
use hoop_test_support::ReadRetry as _;

use std::io::{self, Read};
use std::time::Duration;

/// What the peer read, checked against what was sent: every byte, then the end of the
/// stream. A byte that differs (or one too many) fails the test; a strict prefix then the end
/// is a connection that a reset ended (`resets::closed_early`), which `resets::retry` reruns
/// while resets are injected and fails otherwise.
pub fn prefix_then_end(got: &[u8], want: &[u8], what: &str) -> io::Result<()> {
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

pub const FILE_BYTES: usize = 300_000;

pub use hoop_test_support::TempDir;

/// Deterministic pseudo-random bytes (xorshift64*), different for each seed.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
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
pub enum Via {
    Futures,
    #[cfg(feature = "tokio")]
    Tokio,
}

pub async fn write_all<W>(w: &mut W, data: &[u8], via: Via) -> io::Result<()>
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
pub trait MaybeTokioWrite {
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

/// The bytes a stream test sends: several socket buffers' worth, so the last ones are still
/// the stream's write-behind when `write_all` returns.
pub const STREAM_BYTES: usize = 1 << 20;

/// [`STREAM_BYTES`], or a quarter of it while resets are injected: a case starts over after
/// a reset, and any of its sends (one per 16 KiB at least) may be one, so a case of 64 sends
/// would rarely get through at 5% of sends; 16 still take more than a socket buffer.
pub fn stream_bytes() -> usize {
    if resets::injected() {
        STREAM_BYTES / 4
    } else {
        STREAM_BYTES
    }
}

/// A std peer on its own thread: reads until end of stream (10 s at most without a byte).
pub fn reader<S: Read + Send + 'static>(s: S) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    read_with_pauses(s, Duration::ZERO)
}

/// [`reader`] pausing `pause` after each 16 KiB, so that writes of the other side stay in flight
/// for a while.
pub fn read_with_pauses<S: Read + Send + 'static>(
    mut s: S,
    pause: Duration,
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    common::spawn(move || {
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let n = s.read_retry(&mut chunk)?;
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
pub fn peer_read(peer: std::thread::JoinHandle<io::Result<Vec<u8>>>) -> io::Result<Vec<u8>> {
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
pub fn expect_all(
    peer: std::thread::JoinHandle<io::Result<Vec<u8>>>,
    seed: u64,
    what: &str,
) -> io::Result<()> {
    let got = peer_read(peer)?;
    prefix_then_end(&got, &bytes(stream_bytes(), seed), what)
}

pub fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (a, b)
}

pub fn unix_pair() -> (
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixStream,
) {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (a, b)
}

/// Sends `FILL` bytes without waiting (`MSG_DONTWAIT`) until the socket takes no more: its send
/// buffer and the peer's receive buffer are then full, so the next write waits in flight.
/// Returns the bytes sent.
pub fn fill(fd: std::os::fd::RawFd) -> usize {
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

pub const FILL: u8 = 0xa5;

/// One `poll_write`'s worth for a socket (its 16 KiB buffer): accepted at once, written later.
pub const LAST_BYTES: usize = 16 * 1024;

/// The peer's end of a full-buffer case: waits for `go`, then reads to the end.
pub fn peer_after(
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
