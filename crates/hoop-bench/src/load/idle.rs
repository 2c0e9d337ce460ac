//! The idle connections of `hoop bench idle`: held by helper processes (`hoop bench
//! idle-client`, this very binary re-invoked), as many as one process's open-file limit allows
//! each; the helper's side ([`run_idle_client`]) and the bench's (`Holders`).

use std::io::{self, BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::plan::idle::IdleClientPlan;

/// Connections per 127.0.0.x source address (a fifth of Linux's default ephemeral range).
pub(crate) const PER_SOURCE: usize = 5000;
/// Connects in flight at a time in one helper (the listen backlog never overflows).
const CONNECT_IN_FLIGHT: usize = 256;
/// Longest one connect may take (the kernel retries a dropped SYN after 1 s and 3 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);
/// Longest the whole connect phase of one helper may take.
pub(crate) const CONNECT_PHASE: Duration = Duration::from_secs(60);
/// Longest a sampled connection's echo may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a helper may take to answer `check`, or to exit once its stdin ended.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// What a helper opened (its first line).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Opened {
    /// Connections open.
    pub opened: usize,
    /// Connections that could not be opened (refused, timed out, not tried within the phase).
    pub connect_failed: usize,
    /// Open connections whose echo was checked.
    pub sampled: usize,
    /// Of those, the ones with no or a wrong reply within the timeout.
    pub sample_failed: usize,
    /// The first error, for the report.
    pub first_error: Option<String>,
    /// Seconds the connect phase took.
    pub connect_secs: f64,
}

/// The connections still open when asked (its answer to `check`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct Still {
    /// Connections the server has not closed.
    pub still_open: usize,
}

/// Source address number `i` of a run whose first is 127.0.0.`first`.
pub(crate) fn source_addr(first: u8, i: usize) -> io::Result<Ipv4Addr> {
    let x = usize::from(first) + i / PER_SOURCE;
    let x = u8::try_from(x)
        .ok()
        .filter(|&x| x < 255)
        .ok_or_else(|| io::Error::other("out of 127.0.0.x source addresses"))?;
    Ok(Ipv4Addr::new(127, 0, 0, x))
}

/// Source addresses `count` connections take.
pub(crate) fn sources_for(count: usize) -> usize {
    count.div_ceil(PER_SOURCE).max(1)
}

/// Source addresses one server's `count` connections take, at most `per_client` per helper
/// (each helper starting on a fresh one).
pub(crate) fn sources_needed(count: usize, per_client: usize) -> usize {
    let per = per_client.max(1);
    let rest = count % per;
    count / per * sources_for(per) + if rest > 0 { sources_for(rest) } else { 0 }
}

/// Which of `opened` connections are sampled: `sample` of them evenly spread, the last one
/// (the likeliest to be refused service) always included.
pub(crate) fn sample_indices(opened: usize, sample: usize) -> Vec<usize> {
    let k = sample.min(opened);
    if k == 0 {
        return Vec::new();
    }
    (1..=k).map(|j| j * opened / k - 1).collect()
}

/// The 16 bytes sampled connection `i` sends.
fn probe_message(i: usize) -> [u8; 16] {
    let mut m = *b"idle-0000000000\n";
    let digits = format!("{:010}", i % 10_000_000_000);
    m[5..15].copy_from_slice(digits.as_bytes());
    m
}

/// `hoop bench idle-client`: open, check, hold, close.
///
/// The helper connects its `count` connections from its own 127.0.0.x source addresses
/// (`PER_SOURCE` per address, so no address runs short of ephemeral ports, and each server
/// of a run gets fresh addresses so the previous one's TIME_WAIT sockets are never in the way),
/// at most `CONNECT_IN_FLIGHT` connects at a time, each bounded by `CONNECT_TIMEOUT`, the
/// whole phase by `CONNECT_PHASE`. Then it checks a sample of the open ones: a unique
/// 16-byte message each, whose echo must come back whole within `REPLY_TIMEOUT`. It prints
/// one JSON line (`Opened`) and holds every connection, silent, until its stdin says `check`
/// (it answers with the connections still open: `Still`) or ends (it closes them all and
/// exits). A connection that could not be opened, or a sampled one that got no reply, is
/// counted, never waited for without bound.
pub fn run_idle_client(args: IdleClientPlan) -> io::Result<()> {
    crate::machine::raise_nofile_limit();
    if let Some(cpu) = args.cpu {
        hoop::runtime::pin_to_cpu(cpu)?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (streams, opened) = rt.block_on(open_all(&args));
    let mut stdout = io::stdout().lock();
    let line = serde_json::to_string(&opened).map_err(io::Error::other)?;
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    for line in io::stdin().lock().lines() {
        if line?.trim() == "check" {
            let still = Still {
                still_open: streams.iter().filter(|s| still_open(s)).count(),
            };
            let line = serde_json::to_string(&still).map_err(io::Error::other)?;
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
        }
    }
    // Stdin ended: the bench is done with these connections.
    rt.block_on(async move { drop(streams) });
    Ok(())
}

async fn open_all(args: &IdleClientPlan) -> (Vec<tokio::net::TcpStream>, Opened) {
    let t0 = Instant::now();
    let give_up = tokio::time::Instant::now() + CONNECT_PHASE;
    let addr = args.addr;
    let source = args.source;
    let results: Vec<io::Result<tokio::net::TcpStream>> =
        futures::stream::iter((0..args.count).map(|i| async move {
            if tokio::time::Instant::now() >= give_up {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "not tried within the {} s connect phase",
                        CONNECT_PHASE.as_secs()
                    ),
                ));
            }
            let src = source_addr(source, i)?;
            tokio::time::timeout(CONNECT_TIMEOUT, connect_from(src, addr))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connect from {src} timed out after {CONNECT_TIMEOUT:?}"),
                    )
                })?
        }))
        .buffer_unordered(CONNECT_IN_FLIGHT)
        .collect()
        .await;
    let mut o = Opened::default();
    let mut streams = Vec::with_capacity(args.count);
    for r in results {
        match r {
            Ok(s) => streams.push(s),
            Err(e) => {
                o.connect_failed += 1;
                o.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    o.opened = streams.len();
    o.connect_secs = t0.elapsed().as_secs_f64();
    let picks = sample_indices(streams.len(), args.sample);
    o.sampled = picks.len();
    let checks: Vec<Result<(), String>> = futures::stream::iter(picks.into_iter().map(|i| {
        let s = &streams[i];
        async move {
            tokio::time::timeout(REPLY_TIMEOUT, echo_once(s, i))
                .await
                .map_err(|_| format!("no echo within {REPLY_TIMEOUT:?} on idle connection {i}"))?
        }
    }))
    .buffer_unordered(CONNECT_IN_FLIGHT)
    .collect()
    .await;
    for c in checks {
        if let Err(e) = c {
            o.sample_failed += 1;
            o.first_error.get_or_insert(e);
        }
    }
    (streams, o)
}

async fn connect_from(src: Ipv4Addr, addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    let sock = tokio::net::TcpSocket::new_v4()?;
    sock.bind(SocketAddr::new(IpAddr::V4(src), 0))
        .map_err(|e| io::Error::new(e.kind(), format!("bind {src}: {e}")))?;
    sock.connect(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("connect from {src}: {e}")))
}

/// One message on connection `i`, and its echo, compared.
async fn echo_once(s: &tokio::net::TcpStream, i: usize) -> Result<(), String> {
    let msg = probe_message(i);
    let mut sent = 0;
    while sent < msg.len() {
        s.writable()
            .await
            .map_err(|e| format!("idle connection {i}: {e}"))?;
        match s.try_write(&msg[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("idle connection {i}: write: {e}")),
        }
    }
    let mut got = [0u8; 16];
    let mut have = 0;
    while have < got.len() {
        s.readable()
            .await
            .map_err(|e| format!("idle connection {i}: {e}"))?;
        match s.try_read(&mut got[have..]) {
            Ok(0) => return Err(format!("idle connection {i}: closed by the server")),
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("idle connection {i}: read: {e}")),
        }
    }
    if got != msg {
        return Err(format!("idle connection {i}: the echo differs"));
    }
    Ok(())
}

/// Whether the server still holds the connection: a peek ends in "nothing yet".
fn still_open(s: &tokio::net::TcpStream) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: `b` is valid for writes of its length for the call; the fd is the stream's, open
    // while it is borrowed.
    let r = unsafe {
        libc::recv(
            s.as_raw_fd(),
            b.as_mut_ptr().cast(),
            b.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    r > 0 || (r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock)
}

/// One helper process, seen from the bench.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<io::Result<String>>,
    count: usize,
}

impl Helper {
    fn next_line(&self, timeout: Duration) -> io::Result<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("an idle-client helper said nothing within {timeout:?}"),
            )),
        }
    }
}

/// The helpers holding one server's idle connections. Dropping them closes every connection
/// (their stdin ends; a helper that does not exit in time is killed).
pub(crate) struct Holders {
    helpers: Vec<Helper>,
}

impl Holders {
    /// Starts helpers for `count` connections to `addr`, at most `per_client` each, from
    /// source addresses 127.0.0.`source` on, `sample` of them checked; waits until each has
    /// opened its share and checked its sample. A helper that fails counts its share as not
    /// opened, with why.
    pub(crate) fn open(
        addr: SocketAddr,
        count: usize,
        per_client: usize,
        source: u8,
        sample: usize,
        cpu: Option<usize>,
    ) -> io::Result<(Holders, Opened)> {
        let exe = std::env::current_exe()?;
        let mut helpers = Vec::new();
        let per = per_client.max(1);
        // Connections handed out, and the source slot the next helper starts at: each helper
        // starts on a fresh source address, so no two share one.
        let (mut done, mut slot) = (0, 0);
        while done < count {
            let n = per.min(count - done);
            let src = source_addr(source, slot)?;
            let share = (sample * n).div_ceil(count.max(1));
            let mut cmd = Command::new(&exe);
            cmd.args(["bench", "idle-client", "--addr", &addr.to_string()])
                .args(["--count", &n.to_string()])
                .args(["--source", &src.octets()[3].to_string()])
                .args(["--sample", &share.to_string()]);
            if let Some(cpu) = cpu {
                cmd.args(["--cpu", &cpu.to_string()]);
            }
            let mut child = cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| io::Error::new(e.kind(), format!("cannot start a helper: {e}")))?;
            let stdin = child.stdin.take();
            let (tx, rx) = mpsc::channel();
            if let Some(out) = child.stdout.take() {
                std::thread::spawn(move || {
                    for line in BufReader::new(out).lines() {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                });
            }
            helpers.push(Helper {
                child,
                stdin,
                lines: rx,
                count: n,
            });
            done += n;
            slot += sources_for(n) * PER_SOURCE;
        }
        let holders = Holders { helpers };
        let wait = CONNECT_PHASE + CONNECT_TIMEOUT + REPLY_TIMEOUT * 2 + ANSWER_TIMEOUT;
        let mut sum = Opened::default();
        let t0 = Instant::now();
        for h in &holders.helpers {
            let left = wait.saturating_sub(t0.elapsed());
            let got = h.next_line(left).and_then(|l| {
                serde_json::from_str::<Opened>(&l)
                    .map_err(|e| io::Error::other(format!("an idle-client helper said {l:?}: {e}")))
            });
            match got {
                Ok(o) => {
                    sum.opened += o.opened;
                    sum.connect_failed += o.connect_failed;
                    sum.sampled += o.sampled;
                    sum.sample_failed += o.sample_failed;
                    sum.connect_secs = sum.connect_secs.max(o.connect_secs);
                    if sum.first_error.is_none() {
                        sum.first_error = o.first_error;
                    }
                }
                Err(e) => {
                    sum.connect_failed += h.count;
                    sum.first_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
        Ok((holders, sum))
    }

    /// The connections still open, by each helper's count (none from a helper that fails to
    /// answer).
    pub(crate) fn still_open(&mut self) -> usize {
        let mut n = 0;
        for h in &mut self.helpers {
            let Some(stdin) = h.stdin.as_mut() else {
                continue;
            };
            if writeln!(stdin, "check")
                .and_then(|()| stdin.flush())
                .is_err()
            {
                continue;
            }
            if let Ok(Ok(s)) = h
                .next_line(ANSWER_TIMEOUT)
                .map(|l| serde_json::from_str::<Still>(&l))
            {
                n += s.still_open;
            }
        }
        n
    }

    /// Closes every connection: each helper's stdin ends; each is waited for (bounded).
    pub(crate) fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        for h in &mut self.helpers {
            h.stdin = None;
        }
        let until = Instant::now() + ANSWER_TIMEOUT;
        for h in &mut self.helpers {
            while Instant::now() < until {
                match h.child.try_wait() {
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                    _ => break,
                }
            }
            if let Ok(None) = h.child.try_wait() {
                let _ = h.child.kill();
            }
            let _ = h.child.wait();
        }
        self.helpers.clear();
    }
}

impl Drop for Holders {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_spread_and_end_at_the_last() {
        assert_eq!(sample_indices(10, 3), [2, 5, 9]);
        assert_eq!(sample_indices(3, 10), [0, 1, 2]);
        assert!(sample_indices(0, 5).is_empty());
        assert!(sample_indices(5, 0).is_empty());
        let s = sample_indices(19_500, 1000);
        assert_eq!(s.len(), 1000);
        assert_eq!(s.last(), Some(&19_499));
    }

    #[test]
    fn sources_advance_every_per_source() {
        assert_eq!(source_addr(2, 0).unwrap(), Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(
            source_addr(2, PER_SOURCE).unwrap(),
            Ipv4Addr::new(127, 0, 0, 3)
        );
        assert!(source_addr(254, PER_SOURCE).is_err());
        assert_eq!(sources_for(19_500), 4);
        assert_eq!(sources_for(1), 1);
        assert_eq!(sources_needed(19_500, 19_744), 4);
        assert_eq!(sources_needed(500, 200), 3);
        assert_eq!(sources_needed(100_000, 19_744), 21);
    }

    #[test]
    fn probes_differ() {
        assert_ne!(probe_message(1), probe_message(2));
        assert_eq!(&probe_message(42)[..], b"idle-0000000042\n");
    }
}
