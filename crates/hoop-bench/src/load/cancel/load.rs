//! The std side of `hoop bench cancel`'s scenarios, on plain threads, and their counting: the
//! scenarios and their sizes, `Counts`, the accept clients (`accept_clients`), the read
//! scenario's writer (`tcp_writer`) and `Verifier`. std and libc only: the peers' binary
//! includes it (with `dgram.rs` and `sink.rs`, which use it), so every runtime meets the same
//! load and is counted the same way.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The timer every select loop races its I/O against.
pub(crate) const TICK: Duration = Duration::from_micros(50);
/// The buffer of each read and receive.
pub(crate) const CHUNK: usize = 64 * 1024;
/// How long the clients still waiting for their byte wait after the last client, before they
/// count as lost (a runtime that keeps connections it never hands out open).
pub(crate) const CLIENT_WAIT: Duration = Duration::from_secs(1);
/// How long a client waits for its byte before the next client goes (it waits on after the
/// last one, up to [`CLIENT_WAIT`]).
pub(crate) const CLIENT_STEP: Duration = Duration::from_millis(2);
/// After this many clients in a row without their byte within [`CLIENT_STEP`], the clients
/// stop (the server stopped answering: more clients would only add to the wait).
pub(crate) const STUCK: u64 = 100;
/// The longest one scenario's load runs: clients and senders stop starting new work after it.
pub(crate) const BUDGET: Duration = Duration::from_secs(60);
/// At the end of a datagram run, the receiver stops after this long without a datagram.
pub(crate) const DRAIN: Duration = Duration::from_millis(20);
/// Datagrams sent before the sender waits for the receiving socket's queue to empty.
pub(crate) const WINDOW: u64 = 32;
/// Bytes of each datagram: its number (8 bytes, little-endian), then padding.
pub(crate) const DGRAM: usize = 64;

/// The scenarios, in the order they run, with the unit each one counts.
pub(crate) const SCENARIOS: [(&str, &str); 6] = [
    ("accept", "connections"),
    ("read", "bytes"),
    ("udp_recv_from", "datagrams"),
    ("unix_recv", "datagrams"),
    ("drop_after_write", "bytes"),
    ("stream_drop_after_write", "bytes"),
];

/// The unit `scenario` counts.
pub(crate) fn unit_of(scenario: &str) -> &'static str {
    SCENARIOS
        .iter()
        .find(|(s, _)| *s == scenario)
        .map_or("", |(_, u)| u)
}

/// How much work each scenario does.
#[derive(Debug, Clone)]
pub(crate) struct Sizes {
    /// accept: clients.
    pub clients: u64,
    /// read: bytes.
    pub bytes: u64,
    /// udp_recv_from and unix_recv: datagrams.
    pub datagrams: u64,
    /// drop_after_write: files.
    pub files: u64,
    /// drop_after_write: bytes per file.
    pub file_bytes: u64,
    /// drop_after_write: where the files go (a directory of their own is made inside).
    pub dir: PathBuf,
    /// stream_drop_after_write: TCP streams.
    pub streams: u64,
    /// stream_drop_after_write: bytes per stream.
    pub stream_bytes: u64,
}

/// What one scenario counted: `sent` units went out, `received` arrived; the rest were lost.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    /// Units the load sent (connections made, bytes written, datagrams sent, bytes that
    /// write-all reported written).
    pub sent: u64,
    /// Units that arrived, each once, in order where order is checked.
    pub received: u64,
    /// What else happened (the kinds of losses, an error that ended the run early).
    pub note: Option<String>,
}

impl Counts {
    /// `sent - received`.
    pub(crate) fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// Adds `more` to the note.
    pub(crate) fn add_note(&mut self, more: impl Into<String>) {
        let more = more.into();
        self.note = Some(match self.note.take() {
            Some(n) => format!("{n}; {more}"),
            None => more,
        });
    }
}

/// Whether an I/O error only asks to try again (nothing was consumed).
pub(crate) fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(libc::ECANCELED)
}

/// The byte at position `pos` of every verifiable stream: each 8-byte word holds a mix
/// (splitmix64's) of its own index, so a gap or a repeat of any length shows within a word
/// (a lost first read of 64 KiB included, whose next word would share low bytes with the
/// plain index).
fn pattern_byte(pos: u64) -> u8 {
    let mut z = (pos / 8).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).to_le_bytes()[(pos % 8) as usize]
}

/// `len` bytes of the pattern from position 0.
pub(crate) fn file_data(len: u64) -> Vec<u8> {
    (0..len).map(pattern_byte).collect()
}

/// Checks a byte stream against the pattern: bytes count while they arrive in order; after
/// the first wrong byte nothing more does (the rest of the stream counts as lost).
#[derive(Debug, Default)]
pub(crate) struct Verifier {
    pos: u64,
    broken: bool,
    total: u64,
}

impl Verifier {
    /// Takes the next bytes of the stream.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.broken {
            return;
        }
        for &b in bytes {
            if b != pattern_byte(self.pos) {
                self.broken = true;
                return;
            }
            self.pos += 1;
        }
    }

    /// The bytes that arrived in order before any gap.
    pub(crate) fn received(&self) -> u64 {
        self.pos
    }

    /// The writer's count (`sent`) with this reader's, and `note`.
    pub(crate) fn counts(&self, sent: u64, note: Option<String>) -> Counts {
        let mut c = Counts {
            sent,
            received: self.pos,
            note,
        };
        if self.broken {
            c.add_note(format!(
                "a gap after {} bytes: what follows counts as lost ({} bytes arrived in all)",
                self.pos, self.total
            ));
        }
        c
    }
}

/// The clients of the accept scenario, on a thread of their own.
pub(crate) struct Clients {
    done: Arc<AtomicBool>,
    handle: JoinHandle<Counts>,
}

/// Starts `n` clients to `addr`, one after another: each connects and waits up to
/// [`CLIENT_STEP`] for one byte; one without its byte by then stays open while the next ones
/// go, and gets until [`CLIENT_WAIT`] after the last one (so a runtime that keeps
/// connections it never hands out costs seconds, not one wait per connection); after
/// [`STUCK`] such clients in a row the rest are not started. Received: the
/// clients that got their byte; lost: those that read an end of stream, a reset, or nothing
/// in time.
pub(crate) fn accept_clients(addr: SocketAddr, n: u64) -> Clients {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    // The clients left waiting and the connections a runtime keeps are two descriptors each.
    crate::machine::raise_nofile_limit();
    let handle = thread::spawn(move || {
        let start = Instant::now();
        let mut c = Counts::default();
        let (mut eof, mut reset, mut silent, mut refused) = (0u64, 0u64, 0u64, 0u64);
        let mut pending: Vec<TcpStream> = Vec::new();
        // Clients in a row left without their byte within the step.
        let mut streak = 0u64;
        let mut one = |s: &mut TcpStream, wait: Duration, c: &mut Counts| -> bool {
            let _ = s.set_read_timeout(Some(wait.max(Duration::from_millis(1))));
            let mut b = [0u8; 1];
            match s.read(&mut b) {
                Ok(1) => c.received += 1,
                Ok(_) => eof += 1,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => reset += 1,
            }
            true
        };
        for _ in 0..n {
            if start.elapsed() > BUDGET {
                c.add_note(format!(
                    "stopped after {} clients: over {} s",
                    c.sent,
                    BUDGET.as_secs()
                ));
                break;
            }
            if streak >= STUCK {
                c.add_note(format!(
                    "stopped after {} clients: the last {STUCK} had no answer within {} ms \
                     (the server stopped answering)",
                    c.sent,
                    CLIENT_STEP.as_millis()
                ));
                break;
            }
            c.sent += 1;
            match TcpStream::connect_timeout(&addr, CLIENT_WAIT) {
                Ok(mut s) => {
                    if one(&mut s, CLIENT_STEP, &mut c) {
                        streak = 0;
                    } else {
                        pending.push(s);
                        streak += 1;
                    }
                }
                Err(_) => refused += 1,
            }
        }
        let until = Instant::now() + CLIENT_WAIT;
        for mut s in pending {
            let left = until.saturating_duration_since(Instant::now());
            if !one(&mut s, left, &mut c) {
                silent += 1;
            }
        }
        if c.lost() > 0 {
            c.add_note(format!(
                "lost: {eof} closed unanswered, {reset} reset, {silent} unanswered after {} s, \
                 {refused} could not connect",
                CLIENT_WAIT.as_secs()
            ));
        }
        flag.store(true, Ordering::Release);
        c
    });
    Clients { done, handle }
}

impl Clients {
    /// Whether every client finished.
    pub(crate) fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// What the clients counted.
    pub(crate) fn join(self) -> Counts {
        self.handle.join().unwrap_or_else(|_| Counts {
            note: Some("the client thread panicked".into()),
            ..Counts::default()
        })
    }
}

/// A listener on 127.0.0.1:0 for a runtime to take over (non-blocking), and its address.
pub(crate) fn listener() -> io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    l.set_nonblocking(true)?;
    let addr = l.local_addr()?;
    Ok((l, addr))
}

/// The read scenario's load: a connected stream for the runtime to read (non-blocking), and a
/// thread that writes `bytes` of the pattern into its other end and closes it. The thread
/// returns the bytes it wrote.
pub(crate) fn tcp_writer(bytes: u64) -> io::Result<(TcpStream, JoinHandle<u64>)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let mut w = TcpStream::connect(addr)?;
    let (r, _) = l.accept()?;
    r.set_nonblocking(true)?;
    let handle = thread::spawn(move || {
        let mut pos = 0u64;
        let mut buf = Vec::with_capacity(CHUNK);
        while pos < bytes {
            let n = (bytes - pos).min(CHUNK as u64);
            buf.clear();
            buf.extend((pos..pos + n).map(pattern_byte));
            if w.write_all(&buf).is_err() {
                // The reader is gone: what it did not take is lost either way.
                break;
            }
            pos += n;
        }
        pos
    });
    Ok((r, handle))
}
