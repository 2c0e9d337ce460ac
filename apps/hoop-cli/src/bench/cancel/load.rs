//! The std side of `hoop bench cancel`'s scenarios, on plain threads, and the counting: shared
//! by the runtimes of the `hoop` binary (hoop, hoop-epoll, tokio) and by the peers
//! (`hoop-peer cancel`, which includes this very file), so every runtime meets the same load
//! and is counted the same way. std and libc only.
//!
//! * accept: [`accept_clients`], clients one after another, each waiting for one byte.
//! * read: [`tcp_writer`], a writer of a verifiable byte stream, and [`Verifier`].
//! * udp_recv_from, unix_recv: [`datagrams`], numbered datagrams paced so that the receiving
//!   socket's queue never overflows, and [`Seen`].
//! * drop_after_write: [`file_data`] and [`count_files`], the bytes that reached the files.
//! * stream_drop_after_write: [`stream_reader`], the bytes that reached the other end of TCP
//!   streams dropped right after their write-all.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The timer every select loop races its I/O against (as in the trial).
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
/// The longest the sender waits for the receiving queue to empty before it gives up.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

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
    raise_nofile_limit();
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

/// Raises the soft limit on open descriptors to the hard limit (best effort).
fn raise_nofile_limit() {
    // SAFETY: rlimit is plain old data; all-zero is valid.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into a valid pointer; setrlimit reads one.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
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

/// The datagram sender of a scenario, on a thread of its own.
pub(crate) struct Sender {
    done: Arc<AtomicBool>,
    handle: JoinHandle<Counts>,
}

/// A UDP socket on 127.0.0.1:0 for a runtime to take over (non-blocking, with a large
/// receive buffer), and a blocking std socket connected to it.
pub(crate) fn udp_pair() -> io::Result<(UdpSocket, UdpSocket)> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    rx.set_nonblocking(true)?;
    grow_rcvbuf(rx.as_raw_fd());
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    tx.connect(rx.local_addr()?)?;
    Ok((rx, tx))
}

/// A Unix datagram pair: the first end for a runtime (non-blocking), the second blocking.
pub(crate) fn unix_pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
    let (rx, tx) = UnixDatagram::pair()?;
    rx.set_nonblocking(true)?;
    grow_rcvbuf(rx.as_raw_fd());
    Ok((rx, tx))
}

fn grow_rcvbuf(fd: RawFd) {
    let size: libc::c_int = 4 << 20;
    // SAFETY: setsockopt reads one c_int from a valid pointer; a refusal (the limit is
    // net.core.rmem_max) only leaves the default size, which the pacing respects anyway.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Bytes queued on `fd` for reading (for a datagram socket: the next datagram's size, 0 when
/// the queue is empty); `None` if the ioctl fails.
fn queued(fd: RawFd) -> Option<libc::c_int> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int into a valid pointer.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n as *mut libc::c_int) };
    (r == 0).then_some(n)
}

/// Waits until the receiving socket's queue is empty; false if it did not empty in time.
fn wait_drained(rx_fd: RawFd) -> bool {
    let until = Instant::now() + DRAIN_WAIT;
    loop {
        match queued(rx_fd) {
            Some(0) | None => return true,
            Some(_) if Instant::now() >= until => return false,
            Some(_) => thread::sleep(Duration::from_micros(20)),
        }
    }
}

/// Sends `n` numbered datagrams through `send`, [`WINDOW`] at a time, each window once the
/// socket `rx_fd` (the receiving end, owned by the runtime under test) has an empty queue: so
/// no datagram is dropped for want of room, and what the receiver misses is the runtime's.
/// `rx_fd` must stay open until [`Sender::join`].
pub(crate) fn datagrams<S>(n: u64, rx_fd: RawFd, mut send: S) -> Sender
where
    S: FnMut(&[u8]) -> io::Result<usize> + Send + 'static,
{
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let handle = thread::spawn(move || {
        let start = Instant::now();
        let mut c = Counts::default();
        let mut buf = [0u8; DGRAM];
        'all: for seq in 0..n {
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            loop {
                match send(&buf) {
                    Ok(_) => break,
                    Err(e)
                        if (retryable(&e) || e.raw_os_error() == Some(libc::ENOBUFS))
                            && start.elapsed() < BUDGET =>
                    {
                        thread::sleep(Duration::from_micros(50))
                    }
                    Err(e) => {
                        c.add_note(format!("sending stopped after {} datagrams: {e}", c.sent));
                        break 'all;
                    }
                }
            }
            c.sent += 1;
            if c.sent % WINDOW == 0 && !wait_drained(rx_fd) {
                c.add_note(format!(
                    "sending stopped after {} datagrams: the receiver left its queue full for {} s",
                    c.sent,
                    DRAIN_WAIT.as_secs()
                ));
                break;
            }
        }
        wait_drained(rx_fd);
        flag.store(true, Ordering::Release);
        c
    });
    Sender { done, handle }
}

impl Sender {
    /// Whether every datagram was sent and the receiving queue emptied.
    pub(crate) fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// What the sender counted (`sent`, and a note if it stopped early).
    pub(crate) fn join(self) -> Counts {
        self.handle.join().unwrap_or_else(|_| Counts {
            note: Some("the sender thread panicked".into()),
            ..Counts::default()
        })
    }
}

/// The distinct numbered datagrams that arrived.
#[derive(Debug)]
pub(crate) struct Seen {
    bits: Vec<bool>,
    distinct: u64,
}

impl Seen {
    /// For datagrams numbered `0..n`.
    pub(crate) fn new(n: u64) -> Seen {
        Seen {
            bits: vec![false; usize::try_from(n).unwrap_or(0)],
            distinct: 0,
        }
    }

    /// Takes one datagram.
    pub(crate) fn record(&mut self, dgram: &[u8]) {
        let Some(head) = dgram.get(..8) else { return };
        let mut b = [0u8; 8];
        b.copy_from_slice(head);
        let seq = u64::from_le_bytes(b);
        if let Some(bit) = usize::try_from(seq).ok().and_then(|i| self.bits.get_mut(i)) {
            if !*bit {
                *bit = true;
                self.distinct += 1;
            }
        }
    }

    /// Distinct datagrams seen.
    pub(crate) fn distinct(&self) -> u64 {
        self.distinct
    }
}

/// The reader of stream_drop_after_write, on a thread of its own.
pub(crate) struct StreamReader {
    expected: Arc<std::sync::atomic::AtomicU64>,
    handle: JoinHandle<Counts>,
}

/// A listener on 127.0.0.1:0 and a thread that accepts connections one after another and reads
/// each to its end (or until nothing came for [`CLIENT_WAIT`]), counting in `received` the
/// bytes of each that hold the pattern from its start, at most `len`; it stops once it has
/// read as many connections as [`StreamReader::join`] says were made.
pub(crate) fn stream_reader(len: u64) -> io::Result<(SocketAddr, StreamReader)> {
    use std::sync::atomic::AtomicU64;
    let l = TcpListener::bind("127.0.0.1:0")?;
    l.set_nonblocking(true)?;
    // The runtime does not wait for this reader: its connections queue up meanwhile, beyond
    // std's backlog of 128 (where a dropped SYN would cost a 1 s retransmission).
    // SAFETY: listen() on a listening socket only sets its backlog (capped by somaxconn).
    unsafe { libc::listen(l.as_raw_fd(), 4096) };
    let addr = l.local_addr()?;
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let want = expected.clone();
    let handle = thread::spawn(move || {
        let start = Instant::now();
        let mut c = Counts::default();
        let (mut accepted, mut short) = (0u64, 0u64);
        let mut buf = vec![0u8; CHUNK];
        while accepted < want.load(Ordering::Acquire) {
            let mut s = match l.accept() {
                Ok((s, _)) => s,
                Err(_) if start.elapsed() < BUDGET => {
                    thread::sleep(Duration::from_micros(100));
                    continue;
                }
                Err(e) => {
                    c.add_note(format!("the reader stopped: {e}"));
                    break;
                }
            };
            accepted += 1;
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(CLIENT_WAIT));
            let mut v = Verifier::default();
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => v.feed(&buf[..n]),
                }
            }
            let got = v.received().min(len);
            if got < len {
                short += 1;
            }
            c.received += got;
        }
        if short > 0 {
            c.add_note(format!(
                "{short} of {accepted} streams short of {len} bytes"
            ));
        }
        c
    });
    Ok((addr, StreamReader { expected, handle }))
}

impl StreamReader {
    /// The reader's count once it read the `made` connections the runtime made (its `sent`
    /// is left to the caller).
    pub(crate) fn join(self, made: u64) -> Counts {
        self.expected.store(made, Ordering::Release);
        self.handle.join().unwrap_or_else(|_| Counts {
            note: Some("the reader thread panicked".into()),
            ..Counts::default()
        })
    }
}

/// stream_drop_after_write's count: `sent` bytes in `made` streams written, the writing's
/// error if it stopped early, and what the reader got.
pub(crate) fn stream_counts(
    reader: StreamReader,
    made: u64,
    sent: u64,
    err: Option<io::Error>,
) -> Counts {
    let mut c = reader.join(made);
    c.sent = sent;
    // A stream whose write-all failed counts nothing sent: what its reader got is not counted
    // either.
    c.received = c.received.min(sent);
    if let Some(e) = err {
        c.add_note(format!("writing stopped early: {e}"));
    }
    c
}

/// The sender's count (`sent`, its note) with the receiver's: the distinct datagrams `seen`
/// and the receive `errors`.
pub(crate) fn finish_datagrams(sender: Sender, seen: &Seen, errors: u64) -> Counts {
    let mut c = sender.join();
    c.received = seen.distinct();
    if errors > 0 {
        c.add_note(format!("{errors} receive errors"));
    }
    c
}

/// A fresh directory for `runtime`'s files inside `base`.
pub(crate) fn files_dir(base: &Path, runtime: &str) -> io::Result<PathBuf> {
    let dir = base.join(format!("hoop-cancel-{}-{runtime}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// The path of file `i` in `dir`.
pub(crate) fn file_path(dir: &Path, i: u64) -> PathBuf {
    dir.join(format!("f{i}"))
}

/// The bytes of the files written (`c.sent / len` of them, numbered from 0) in `dir` that hold
/// the pattern from their start (each file's verified prefix, at most `len`), summed into
/// `c.received`; then removes `dir`.
pub(crate) fn count_files(dir: &Path, len: u64, c: &mut Counts) {
    let files = c.sent.checked_div(len).unwrap_or(0);
    let (mut short, mut missing) = (0u64, 0u64);
    for i in 0..files {
        match std::fs::read(file_path(dir, i)) {
            Ok(bytes) => {
                let mut v = Verifier::default();
                v.feed(&bytes[..bytes.len().min(len as usize)]);
                if v.received() < len {
                    short += 1;
                }
                c.received += v.received();
            }
            Err(_) => missing += 1,
        }
    }
    if short + missing > 0 {
        c.add_note(format!(
            "{short} of {files} files short of {len} bytes, {missing} missing"
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
}
