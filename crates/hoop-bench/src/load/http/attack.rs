//! The attackers of `hoop bench http --attack`, on a thread with a hoop runtime of their own:
//! slowloris connections sending a request head that never ends, one byte every 2 s, and idle
//! keep-alive connections that ask once and then stay silent. Connects go out in waves, at most
//! `in_flight` at a time (256 by default, far below the servers' listen backlog).

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::http::client;
use crate::load::http::files::file_name;

/// The file every request asks for.
pub(crate) const FILE_BYTES: u64 = 1024;
/// How long the attackers may take to connect (and the idle ones to be answered).
const CONNECT_PHASE: Duration = Duration::from_secs(30);
/// A slowloris attacker sends one more byte of its head this often.
const SLOW_TICK: Duration = Duration::from_secs(2);

/// What the attackers got when they connected.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Connected {
    /// Slowloris attackers connected.
    pub slowloris: usize,
    /// Idle attackers connected.
    pub idle: usize,
    /// Idle attackers whose request was answered with the file.
    pub idle_answered: usize,
    /// How long connecting took, seconds.
    pub secs: f64,
}

/// Attackers still connected when asked to leave.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Held {
    /// Slowloris attackers still connected.
    pub slowloris: usize,
    /// Idle attackers still connected.
    pub idle: usize,
}

enum Report {
    Connected(Connected),
    Held(Held),
    Failed(String),
}

/// The attackers: a thread with a hoop runtime of its own holding every attacking connection.
pub(crate) struct Attacker {
    stop: Arc<AtomicBool>,
    rx: mpsc::Receiver<Report>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Attacker {
    pub(crate) fn start(
        addr: SocketAddr,
        (slowloris, idle, in_flight): (usize, usize, usize),
        cpu: Option<usize>,
    ) -> io::Result<Attacker> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("hoop-bench-attack".into())
            .spawn(move || {
                let fail = |e: io::Error| {
                    let _ = tx.send(Report::Failed(e.to_string()));
                };
                if let Some(cpu) = cpu {
                    if let Err(e) = hoop::runtime::pin_to_cpu(cpu) {
                        return fail(e);
                    }
                }
                let rt = match hoop::Runtime::builder().entries(4096).build() {
                    Ok(rt) => rt,
                    Err(e) => return fail(e),
                };
                rt.block_on(attack(
                    addr,
                    (slowloris, idle, in_flight),
                    stop2,
                    tx.clone(),
                ));
            })?;
        Ok(Attacker {
            stop,
            rx,
            thread: Some(thread),
        })
    }

    /// Waits until every attacker connected (or gave up).
    pub(crate) fn connected(&self) -> io::Result<Connected> {
        match self
            .rx
            .recv_timeout(CONNECT_PHASE + Duration::from_secs(10))
        {
            Ok(Report::Connected(c)) => Ok(c),
            Ok(Report::Failed(e)) => Err(io::Error::other(format!("the attackers failed: {e}"))),
            Ok(Report::Held(_)) => Err(io::Error::other("the attackers reported out of turn")),
            Err(_) => Err(io::Error::other("the attackers did not connect in time")),
        }
    }

    /// Asks the attackers which connections are still open, then closes them all.
    pub(crate) fn leave(mut self) -> io::Result<Held> {
        self.stop.store(true, Ordering::Release);
        let r = match self.rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Report::Held(h)) => Ok(h),
            Ok(Report::Failed(e)) => Err(io::Error::other(format!("the attackers failed: {e}"))),
            Ok(Report::Connected(_)) => Err(io::Error::other("the attackers reported out of turn")),
            Err(_) => Err(io::Error::other("the attackers did not report in time")),
        };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        r
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The head a slowloris attacker sends, one byte every [`SLOW_TICK`], and never finishes (past
/// its end it repeats `a`, the value of the last header).
const SLOW_HEAD: &[u8] = b"GET /f1024.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slowloris: ";

/// A connected attacker, and (idle ones) whether its request was answered with the file.
type Attacking = (hoop::net::TcpStream, bool);

fn slow_byte(i: usize) -> u8 {
    SLOW_HEAD.get(i).copied().unwrap_or(b'a')
}

async fn attack(
    addr: SocketAddr,
    (slowloris, idle, in_flight): (usize, usize, usize),
    stop: Arc<AtomicBool>,
    tx: mpsc::Sender<Report>,
) {
    let t0 = Instant::now();
    let give_up = t0 + CONNECT_PHASE;
    let request = Rc::new(client::request_bytes(
        &addr.to_string(),
        &format!("/{}", file_name(FILE_BYTES)),
        false,
    ));
    let total = slowloris + idle;
    let mut slow: Vec<hoop::net::TcpStream> = Vec::with_capacity(slowloris);
    let mut quiet: Vec<hoop::net::TcpStream> = Vec::with_capacity(idle);
    let mut answered = 0;
    let mut next = 0;
    // Connect in waves of at most CONNECT_IN_FLIGHT, slowloris first, then idle.
    while next < total && Instant::now() < give_up && !stop.load(Ordering::Acquire) {
        let wave: Vec<(bool, hoop::JoinHandle<Option<Attacking>>)> = (next..total
            .min(next + in_flight))
            .map(|i| {
                let is_slow = i < slowloris;
                let request = request.clone();
                let left = give_up.saturating_duration_since(Instant::now());
                (
                    is_slow,
                    hoop::spawn(async move {
                        hoop::time::timeout(left, connect_one(addr, is_slow, request))
                            .await
                            .ok()
                            .flatten()
                    }),
                )
            })
            .collect();
        next += wave.len();
        for (is_slow, h) in wave {
            if let Ok(Some((s, ok))) = h.await {
                if is_slow {
                    slow.push(s);
                } else {
                    answered += usize::from(ok);
                    quiet.push(s);
                }
            }
        }
    }
    let _ = tx.send(Report::Connected(Connected {
        slowloris: slow.len(),
        idle: quiet.len(),
        idle_answered: answered,
        secs: t0.elapsed().as_secs_f64(),
    }));
    // One more byte of every slowloris head every SLOW_TICK, until told to stop (at most an
    // hour: the bench asks well before).
    let hard_stop = Instant::now() + Duration::from_secs(3600);
    let mut sent = 1;
    let mut next_tick = Instant::now() + SLOW_TICK;
    let mut open: Vec<bool> = vec![true; slow.len()];
    while !stop.load(Ordering::Acquire) && Instant::now() < hard_stop {
        hoop::time::sleep(Duration::from_millis(10)).await;
        if Instant::now() < next_tick {
            continue;
        }
        next_tick += SLOW_TICK;
        let b = [slow_byte(sent)];
        sent += 1;
        for (s, open) in slow.iter().zip(open.iter_mut()) {
            if *open && !send_now(s, &b) {
                *open = false;
            }
        }
    }
    let held = Held {
        slowloris: slow
            .iter()
            .zip(&open)
            .filter(|(s, o)| **o && still_open(s))
            .count(),
        idle: quiet.iter().filter(|s| still_open(s)).count(),
    };
    let _ = tx.send(Report::Held(held));
    drop(slow);
    drop(quiet);
}

/// Connects one attacker: a slowloris one sends the first byte of its head; an idle one its
/// whole request, and reads the response (whether it was a 200 with the body).
async fn connect_one(addr: SocketAddr, slow: bool, request: Rc<Vec<u8>>) -> Option<Attacking> {
    let s = hoop::net::TcpStream::connect(addr).await.ok()?;
    if slow {
        let (r, _) = s.write_all(vec![slow_byte(0)]).await;
        r.ok()?;
        return Some((s, true));
    }
    let (r, _) = s.write_all(request.to_vec()).await;
    r.ok()?;
    let mut got: Vec<u8> = Vec::with_capacity(4096);
    // At most 64 reads: a 1 KiB answer comes in one or two.
    for _ in 0..64 {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = resp.parse(&got) {
            let len = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                });
            if let Some(len) = len {
                if got.len() >= n + len {
                    return Some((s, resp.code == Some(200) && len as u64 == FILE_BYTES));
                }
            }
        }
        if got.len() > 64 * 1024 {
            break;
        }
        let buf = Vec::with_capacity(8192);
        let (r, buf) = s.read(buf).await;
        match r {
            Ok(n) if n > 0 => got.extend_from_slice(&buf),
            _ => return Some((s, false)),
        }
    }
    Some((s, false))
}

/// Sends `b` now, without waiting (one byte fits any socket buffer); false if the connection
/// is gone.
fn send_now(s: &hoop::net::TcpStream, b: &[u8]) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `b` is valid for reads of its length for the call; the fd is the stream's, open
    // while it is borrowed.
    let r = unsafe {
        libc::send(
            s.as_raw_fd(),
            b.as_ptr().cast(),
            b.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    r >= 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN)
}

/// Whether the server still holds the connection: reading what it sent (at most 64 reads)
/// ends in "nothing more yet", not at its end or an error.
fn still_open(s: &hoop::net::TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 4096];
    for _ in 0..64 {
        // SAFETY: `buf` is valid for writes of its length for the call; the fd is the
        // stream's, open while it is borrowed.
        let r = unsafe {
            libc::recv(
                s.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r > 0 {
            continue;
        }
        return r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowloris_head_never_ends() {
        let head: Vec<u8> = (0..10_000).map(slow_byte).collect();
        assert!(head.starts_with(b"GET /f1024.bin HTTP/1.1\r\n"));
        assert!(!head.windows(4).any(|w| w == b"\r\n\r\n"));
        assert_eq!(file_name(FILE_BYTES), "f1024.bin");
    }
}
