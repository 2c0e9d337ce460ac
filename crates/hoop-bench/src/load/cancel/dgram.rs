//! The datagram scenarios' load (udp_recv_from, unix_recv): numbered datagrams from a std
//! socket, paced so the receiving queue never overflows, and the distinct numbers that arrived.
//! std and libc only: the peers' binary includes it too.

use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::load::cancel::load::{retryable, Counts, BUDGET, DGRAM, WINDOW};

/// The longest the sender waits for the receiving queue to empty before it gives up.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

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
