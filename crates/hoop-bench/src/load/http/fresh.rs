//! The fresh client of `hoop bench http --attack`: every 100 ms a new connection asks for the
//! file with `Connection: close` and reads the answer to its end, as curl would, so a server
//! that stops accepting shows even when its established connections are served.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::http::client;

/// A fresh client asks this often while the attackers connect and during the attacked run,
/// and waits at most this long.
const FRESH_EVERY: Duration = Duration::from_millis(100);
const FRESH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the fresh client saw.
#[derive(Debug, Default)]
pub(crate) struct Fresh {
    /// Requests answered with the file.
    pub ok: u64,
    /// Requests that failed or timed out.
    pub failed: u64,
    /// The slowest request.
    pub max: Option<Duration>,
    /// The slowest connect (a SYN the kernel dropped, its accept queue full, costs 1 s).
    pub connect_max: Option<Duration>,
}

/// A client that, every [`FRESH_EVERY`], connects, asks for the file with `Connection:
/// close` and reads the answer to its end (as curl would), each within [`FRESH_TIMEOUT`].
pub(crate) struct FreshClient {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Fresh>>,
}

impl FreshClient {
    pub(crate) fn start(
        addr: SocketAddr,
        path: String,
        len: usize,
        cpu: Option<usize>,
    ) -> FreshClient {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                let _ = hoop::runtime::pin_to_cpu(cpu);
            }
            let mut f = Fresh::default();
            let request = client::request_bytes(&addr.to_string(), &path, true);
            // Bounded: at most an hour of asks (the bench stops it after one run).
            for _ in 0..36_000 {
                if stop2.load(Ordering::Acquire) {
                    break;
                }
                let t0 = Instant::now();
                let mut connect = Duration::ZERO;
                let ok = fresh_once(addr, &request, len, &mut connect).unwrap_or(false);
                f.connect_max = Some(f.connect_max.map_or(connect, |m| m.max(connect)));
                let took = t0.elapsed();
                if ok {
                    f.ok += 1;
                } else {
                    f.failed += 1;
                }
                f.max = Some(f.max.map_or(took, |m| m.max(took)));
                std::thread::sleep(FRESH_EVERY.saturating_sub(took));
            }
            f
        });
        FreshClient {
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn finish(mut self) -> Fresh {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for FreshClient {
    /// Stopped on every path (a measurement that failed half-way included).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One fresh request: whether a 200 with the file's length came back in time.
fn fresh_once(
    addr: SocketAddr,
    request: &[u8],
    len: usize,
    connect: &mut Duration,
) -> io::Result<bool> {
    let t0 = Instant::now();
    let deadline = t0 + FRESH_TIMEOUT;
    let s = std::net::TcpStream::connect_timeout(&addr, FRESH_TIMEOUT);
    *connect = t0.elapsed();
    let mut s = s?;
    s.write_all(request)?;
    let mut got = Vec::with_capacity(len + 512);
    let mut buf = [0u8; 8192];
    // Bounded by the deadline, and by size.
    while got.len() <= len + 64 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    Ok(match resp.parse(&got) {
        Ok(httparse::Status::Complete(n)) => resp.code == Some(200) && got.len() - n == len,
        _ => false,
    })
}
