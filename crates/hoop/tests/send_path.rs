//! The send path of stream sockets (DESIGN.md, "The send path"), on io_uring and on epoll: a
//! send tried inline first falls back to the ring when the socket is full and the bytes stay in
//! order (owned writes and the traits); short sends; the traits' staging buffer (a
//! `poll_write` behind a send in flight takes at most its bound, and a `Pending` one took
//! nothing); a stream dropped with staged bytes still writes them; an error of a staged write
//! is reported by the next flush; the write direction pushes itself (a write half that writes
//! without flushing and then awaits only its read half still gets its bytes out, in order; a
//! write half dropped while its pusher runs still sends everything). Under `HOOP_FAULTS` the inline send also meets injected
//! `EAGAIN` and short sends, and injected resets: a case a reset ended (a write, flush or close
//! that failed on it, or a peer that read a strict prefix of the bytes, then the end of the
//! stream) runs again on a new pair (`resets::retry`); a byte out of order still fails at once,
//! and without injected resets any short read fails.

use hoop_test_support as common;
use hoop_test_support::resets;
use hoop_test_support::ReadRetry as _;

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::time::Duration;

use futures::io::AsyncWriteExt;
use futures::FutureExt;
use hoop::net::TcpStream;

/// Every send path (`HOOP_SEND_OWNED`, `HOOP_SEND_PATH` values): the defaults and each
/// alternative, chosen per test thread.
const PATHS: [(&str, &str); 5] = [
    ("ring", "adaptive"),
    ("ring", "staging"),
    ("inline", "inline"),
    ("ring", "both"),
    ("ring", "ring"),
];

/// Runs `f` on both drivers, on every send path (`f` gets the driver; its thread has the
/// path set), each until it ends without a reset (`resets::retry`: a reset is retried only
/// while resets are injected).
fn each_path(
    what: &'static str,
    f: impl Fn(hoop::DriverKind) -> io::Result<()> + Copy + Send + 'static,
) {
    common::each_driver(|kind| {
        for path in PATHS {
            common::bounded(60, move || {
                hoop::__private::set_send_path(Some(path));
                resets::retry(&format!("{what} ({kind}, send path {path:?})"), |_| f(kind));
            })
        }
    });
}

/// The largest buffer of a socket's trait writes (`poll_io`'s socket `max_buf`).
const SOCKET_BUF: usize = 16 * 1024;

/// `n`, or an eighth of it while resets are injected: a case starts over after a reset, and
/// any of its sends may be one, so a case of hundreds of sends (the small socket buffers cut
/// them short) would rarely get through at 5% of sends; an eighth still overfills the
/// buffers. (Cases that only fill the socket until `Pending` are bounded by the buffers.)
fn scaled(n: usize) -> usize {
    if resets::injected() {
        n / 8
    } else {
        n
    }
}

/// Deterministic bytes, different at every offset for a long way (a reordering shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ (i / 251) as u8)
        .collect()
}

fn set_buf(fd: i32, opt: i32, bytes: i32) {
    // SAFETY: setsockopt(2) on an open socket with a pointer to a live i32 and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt");
}

/// Bytes queued in a socket: `TIOCOUTQ` (sent and not acknowledged, or not sent) or
/// `FIONREAD` (received and not read).
fn queued(fd: i32, request: libc::c_ulong) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: the ioctl writes one c_int to the live `n`.
    let r = unsafe { libc::ioctl(fd, request, &mut n) };
    assert_eq!(r, 0, "ioctl");
    n as usize
}

/// A connected pair with small socket buffers (so that a few hundred KiB fill them): ours, to
/// become a hoop stream, and the peer, std, with a read timeout.
fn small_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // Inherited by the accepted socket, and set before the handshake fixes the window scale.
    set_buf(l.as_raw_fd(), libc::SO_RCVBUF, 16 * 1024);
    let ours = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    set_buf(ours.as_raw_fd(), libc::SO_SNDBUF, 16 * 1024);
    let (peer, _) = l.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (ours, peer)
}

/// The peer: waits `delay` (the writer meanwhile fills the socket), then reads to end of
/// stream, pausing `pause` after each read.
fn peer_reader(
    mut s: std::net::TcpStream,
    delay: Duration,
    pause: Duration,
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    common::spawn(move || {
        std::thread::sleep(delay);
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 8 * 1024];
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
/// else (a read timeout: no end of stream came), which fails the test.
fn peer_read(peer: std::thread::JoinHandle<io::Result<Vec<u8>>>) -> io::Result<Vec<u8>> {
    peer.join().unwrap().map_err(|e| {
        if resets::is_reset(&e) {
            e
        } else {
            io::Error::new(e.kind(), format!("the peer reads to end of stream: {e}"))
        }
    })
}

/// The peer read `want`, then the end of the stream. A byte out of order (or one too many)
/// fails at once; a strict prefix then the end is a connection a reset ended
/// (`resets::closed_early`: retried under injected resets, a failure otherwise).
fn expect_bytes(peer: std::thread::JoinHandle<io::Result<Vec<u8>>>, want: &[u8]) -> io::Result<()> {
    let got = peer_read(peer)?;
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("byte {i} differs: the bytes are out of order");
    }
    assert!(
        got.len() <= want.len(),
        "the peer read {} bytes, {} were sent",
        got.len(),
        want.len()
    );
    if got.len() < want.len() {
        return Err(resets::closed_early(&format!(
            "the peer read {} of {} bytes",
            got.len(),
            want.len()
        )));
    }
    Ok(())
}

/// SQEs this thread's driver submitted so far (0 on epoll).
fn sqes() -> u64 {
    match hoop_driver::Driver::current() {
        Some(d) if d.kind() == hoop::DriverKind::Uring => d.counters().sqes_submitted,
        _ => 0,
    }
}

/// Owned `write_all`s into a socket the peer does not read yet: the first go inline, then the
/// socket is full and the rest wait on the ring; every byte arrives once, in order.
/// Writes `data` from its start through the traits in pieces of `chunk_bytes`, letting the
/// runtime turn between attempts, until the socket and hoop's buffers are full (20 `Pending`s
/// in a row) or everything was accepted; returns the bytes accepted and the `Pending`s at the
/// end (20 when the writes waited).
async fn fill_until_pending<W: futures::io::AsyncWrite + Unpin>(
    w: &mut W,
    data: &[u8],
    chunk_bytes: usize,
) -> io::Result<(usize, usize)> {
    let mut at = 0;
    let mut pendings = 0;
    for _ in 0..10_000 {
        let end = (at + chunk_bytes).min(data.len());
        match AsyncWriteExt::write(w, &data[at..end]).now_or_never() {
            Some(Ok(n)) => {
                at += n;
                pendings = 0;
            }
            Some(Err(e)) => return Err(e),
            None => {
                pendings += 1;
                if pendings == 20 {
                    break;
                }
            }
        }
        hoop::yield_now().await;
    }
    Ok((at, pendings))
}

#[test]
fn owned_writes_inline_then_ring_keep_order() {
    each_path("owned inline then ring", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(scaled(600_000));
        let reader = peer_reader(peer, Duration::from_millis(200), Duration::ZERO);
        let rt = common::runtime(kind);
        let sent = data.clone();
        let wrote = rt.block_on(async move {
            let s = TcpStream::from_std(ours);
            let before = sqes();
            let mut at = 0;
            let mut step = 1;
            while at < sent.len() {
                // Sizes from 1 byte to 20 KiB: some fit, some are cut short.
                let end = (at + step).min(sent.len());
                let (res, _) = s.write_all(sent[at..end].to_vec()).await;
                res?;
                at = end;
                step = step * 7 % 20_011 + 1;
            }
            let used = sqes() - before;
            drop(s);
            Ok(used)
        });
        let read = expect_bytes(reader, &data);
        let ring_sqes = wrote.and_then(|used| read.map(|()| used))?;
        if kind == hoop::DriverKind::Uring && !hoop::fault::enabled() {
            assert!(ring_sqes > 0, "no send waited on the ring");
        }
        drop(rt);
        Ok(())
    });
}

/// The same through the traits (`AsyncWriteExt::write_all`, then `close`).
/// The default path (`adaptive`): a writer that answers (one write, then a flush) sends each
/// answer inline, with no SQE, once its first flush covered a single write; a writer that
/// writes several times per flush keeps the staging path (its next cycles' writes go to the
/// ring); every byte arrives in order either way. The SQE counts are io_uring's (on epoll a
/// send runs inside the submit: only the bytes are checked there).
#[test]
fn answers_go_inline_and_bursts_stay_on_the_ring() {
    // An injected EAGAIN or short send moves an answer to the ring: the count is exact only
    // without them.
    let _faults = common::faults_off(
        &["eagain", "short_io"],
        "it counts the SQEs of answers that a socket with room sends inline",
    );
    common::each_driver(|kind| {
        common::bounded(60, move || {
            hoop::__private::set_send_path(Some(("ring", "adaptive")));
            resets::retry(&format!("answers and bursts ({kind})"), |_| {
                let (ours, peer) = small_pair();
                let answer = pattern(100);
                let mut want = Vec::new();
                for _ in 0..10 {
                    want.extend_from_slice(&answer);
                }
                for _ in 0..10 {
                    for _ in 0..3 {
                        want.extend_from_slice(&answer);
                    }
                }
                let reader = peer_reader(peer, Duration::ZERO, Duration::ZERO);
                let rt = common::runtime(kind);
                let a = answer.clone();
                let counted = rt.block_on(async move {
                    let mut s = TcpStream::from_std(ours);
                    let before = sqes();
                    for _ in 0..10 {
                        AsyncWriteExt::write_all(&mut s, &a).await?;
                        AsyncWriteExt::flush(&mut s).await?;
                    }
                    let answers = sqes() - before;
                    let before = sqes();
                    for _ in 0..10 {
                        for _ in 0..3 {
                            AsyncWriteExt::write_all(&mut s, &a).await?;
                        }
                        AsyncWriteExt::flush(&mut s).await?;
                    }
                    let bursts = sqes() - before;
                    AsyncWriteExt::close(&mut s).await?;
                    Ok::<_, io::Error>((answers, bursts))
                });
                let read = expect_bytes(reader, &want);
                drop(rt);
                let (answers, bursts) = counted?;
                read?;
                if kind == hoop::DriverKind::Uring {
                    assert_eq!(
                        answers, 0,
                        "an answer after a one-write flush went to the ring"
                    );
                    assert!(
                        bursts >= 9,
                        "bursts sent inline: {bursts} SQEs for 10 cycles"
                    );
                }
                Ok(())
            });
        })
    });
}

#[test]
fn trait_writes_inline_then_ring_keep_order() {
    each_path("trait inline then ring", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(scaled(600_000));
        let reader = peer_reader(peer, Duration::from_millis(200), Duration::ZERO);
        let rt = common::runtime(kind);
        let sent = data.clone();
        let wrote = rt.block_on(async move {
            let mut s = TcpStream::from_std(ours);
            let mut at = 0;
            let mut step = 1;
            while at < sent.len() {
                let end = (at + step).min(sent.len());
                AsyncWriteExt::write_all(&mut s, &sent[at..end]).await?;
                at = end;
                step = step * 7 % 20_011 + 1;
            }
            AsyncWriteExt::close(&mut s).await
        });
        let read = expect_bytes(reader, &data);
        drop(rt);
        wrote.and(read)
    });
}

/// Owned `write`s of 64 KiB into a socket with a 16 KiB send buffer, read slowly: sends
/// come back short (inline, or on the ring), and the caller's loop keeps the bytes in order.
#[test]
fn short_sends_keep_order() {
    each_path("short sends", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(scaled(400_000));
        let reader = peer_reader(peer, Duration::ZERO, Duration::from_micros(200));
        let rt = common::runtime(kind);
        let sent = data.clone();
        let wrote = rt.block_on(async move {
            let s = TcpStream::from_std(ours);
            let mut at = 0;
            let mut shorts = 0;
            while at < sent.len() {
                let end = (at + 64 * 1024).min(sent.len());
                let (res, _) = s.write(sent[at..end].to_vec()).await;
                let n = res?;
                assert!(n > 0 && n <= end - at, "write of {} said {n}", end - at);
                if n < end - at {
                    shorts += 1;
                }
                at += n;
            }
            drop(s);
            Ok(shorts)
        });
        let read = expect_bytes(reader, &data);
        let shorts = wrote.and_then(|shorts| read.map(|()| shorts))?;
        assert!(shorts > 0, "no send was short");
        drop(rt);
        Ok(())
    });
}

/// Trait writes polled once each (no waiting) into a socket the peer does not read: they are
/// taken while the socket has room, then while a send is in flight up to the staging bound,
/// then `Pending`, taking nothing. The bytes hoop holds (accepted, neither in our send queue
/// nor in the peer's receive queue) stay within the write buffer and the staging buffer.
#[test]
fn staging_is_bounded_and_pending_takes_nothing() {
    each_path("staging bound", |kind| {
        let (ours, peer) = small_pair();
        let peer_fd = peer.as_raw_fd();
        let data = pattern(2_000_000);
        let rt = common::runtime(kind);
        let sent = data.clone();
        let (accepted, reader, closed) = rt.block_on(async move {
            let mut s = TcpStream::from_std(ours);
            let fd = s.as_raw_fd();
            let (mut at, pendings) = fill_until_pending(&mut s, &sent, 3000).await?;
            assert_eq!(pendings, 20, "the writes never waited");
            let in_kernel = queued(fd, libc::TIOCOUTQ) + queued(peer_fd, libc::FIONREAD);
            let held = at.saturating_sub(in_kernel);
            assert!(
                held <= 2 * SOCKET_BUF,
                "hoop holds {held} accepted bytes, more than its two {SOCKET_BUF}-byte buffers"
            );
            // Polled without a turn between, `Pending` again: nothing taken.
            for _ in 0..10 {
                let end = (at + 10).min(sent.len());
                if let Some(r) = AsyncWriteExt::write(&mut s, &sent[at..end]).now_or_never() {
                    at += r?;
                }
            }
            let reader = peer_reader(peer, Duration::ZERO, Duration::ZERO);
            let closed = AsyncWriteExt::close(&mut s).await;
            Ok::<_, io::Error>((at, reader, closed))
        })?;
        let read = expect_bytes(reader, &data[..accepted]);
        drop(rt);
        closed.and(read)
    });
}

/// A stream dropped while bytes are staged behind a send in flight (no flush): a detached
/// writer sends them all, in order, then closes.
#[test]
fn drop_with_staged_bytes_sends_them() {
    each_path("drop with staged bytes", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(2_000_000);
        let reader = peer_reader(peer, Duration::from_millis(300), Duration::ZERO);
        let rt = common::runtime(kind);
        let sent = data.clone();
        let filled = rt.block_on(async move {
            let mut s = TcpStream::from_std(ours);
            let filled = fill_until_pending(&mut s, &sent, 5000).await;
            drop(s);
            filled
        });
        match filled {
            Ok((accepted, _)) => {
                let read = expect_bytes(reader, &data[..accepted]);
                drop(rt);
                read
            }
            Err(e) => {
                // Ended by a reset: what the peer read must still be a prefix.
                let _ = expect_bytes(reader, &data);
                Err(e)
            }
        }
    });
}

/// The peer resets the connection while a send is in flight and bytes are staged behind it:
/// the next flush reports the error.
#[test]
fn error_of_a_staged_write_is_reported_by_the_next_flush() {
    each_path("staged write error at flush", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(2_000_000);
        let rt = common::runtime(kind);
        rt.block_on(async move {
            let mut s = TcpStream::from_std(ours);
            fill_until_pending(&mut s, &data, 5000).await?;
            // A reset: SO_LINGER 0, then close with unread bytes.
            let l = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: setsockopt(2) with a pointer to a live linger and its size.
            let r = unsafe {
                libc::setsockopt(
                    peer.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&l as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                )
            };
            assert_eq!(r, 0);
            drop(peer);
            let err = AsyncWriteExt::flush(&mut s)
                .await
                .expect_err("flush after the peer's reset");
            assert!(
                matches!(
                    err.raw_os_error(),
                    Some(libc::ECONNRESET) | Some(libc::EPIPE)
                ),
                "flush said {err}"
            );
            Ok::<_, io::Error>(())
        })?;
        drop(rt);
        Ok(())
    });
}

/// The case pushers exist for: a split write half writes a request without flushing, then its
/// task awaits only its read half while the peer waits for the whole request before it
/// replies. The bytes staged behind a send in flight (and the rest of a short send) go out
/// anyway, in order: the write direction pushes itself. A hang fails (the read is bounded by
/// a timeout). Small writes (staged behind a ring send on the staging path) and large ones
/// (staged behind a full socket on every path, both drivers).
#[test]
fn unflushed_request_goes_out_while_the_reader_waits() {
    for (what, request_len, chunk) in [
        ("unflushed small writes", scaled(20_000), 100),
        ("unflushed large writes", scaled(600_000), 5_000),
    ] {
        each_path(what, move |kind| {
            let (ours, mut peer) = small_pair();
            let data = pattern(request_len);
            let want = data.clone();
            let replier = common::spawn(move || -> std::io::Result<Vec<u8>> {
                let mut got = vec![0u8; want.len()];
                peer.read_exact(&mut got)?;
                std::io::Write::write_all(&mut peer, b"reply")?;
                // Held until the client has read the reply.
                let mut end = [0u8; 1];
                let _ = peer.read_retry(&mut end);
                Ok(got)
            });
            let rt = common::runtime(kind);
            let request = data.clone();
            let asked = rt.block_on(async move {
                let (mut r, mut w) = TcpStream::from_std(ours).into_split();
                for c in request.chunks(chunk) {
                    AsyncWriteExt::write_all(&mut w, c).await?;
                }
                // No flush: from here the task awaits only the read half.
                let mut reply = [0u8; 5];
                let read = futures::io::AsyncReadExt::read_exact(&mut r, &mut reply);
                match hoop::time::timeout(Duration::from_secs(20), read).await {
                    Ok(Ok(())) => assert_eq!(&reply, b"reply"),
                    Ok(Err(e)) => return Err(e),
                    Err(_) => panic!(
                        "no reply in 20 s: bytes written and not flushed were never sent \
                         ({request_len} bytes in writes of {chunk})"
                    ),
                }
                // Every accepted byte was written: the flush has nothing left to wait for.
                AsyncWriteExt::flush(&mut w).await?;
                AsyncWriteExt::close(&mut w).await
            });
            // The peer reads the whole request (`read_exact`: all of it, or an error).
            let got = replier.join().unwrap();
            if let Ok(got) = &got {
                if let Some(i) = got.iter().zip(&data).position(|(a, b)| a != b) {
                    panic!("byte {i} differs: the request's bytes are out of order");
                }
            }
            drop(rt);
            asked.and(got.map(drop))
        });
    }
}

/// A write half dropped right after writes staged behind a send in flight (no flush), while
/// its pusher runs: the detached writer takes the writes back and sends every byte in order,
/// then shuts the write direction down (the peer reads to end of stream).
#[test]
fn dropped_write_half_with_a_pusher_sends_everything() {
    each_path("dropped write half with a pusher", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(scaled(300_000));
        let reader = peer_reader(peer, Duration::from_millis(100), Duration::ZERO);
        let rt = common::runtime(kind);
        let sent = data.clone();
        let wrote = rt.block_on(async move {
            let (r, mut w) = TcpStream::from_std(ours).into_split();
            for c in sent.chunks(3_000) {
                AsyncWriteExt::write_all(&mut w, c).await?;
            }
            drop(w);
            drop(r);
            Ok(())
        });
        let read = expect_bytes(reader, &data);
        drop(rt);
        wrote.and(read)
    });
}

/// A write half moved to another thread and dropped there while its pusher runs (bytes
/// staged behind a send in flight, the socket full): the pusher, on the runtime's thread,
/// sends nothing more (the fd is closed behind the drop and its number may be reused): the
/// peer reads a prefix of the bytes, in order, then end of stream; the runtime runs on.
#[test]
fn write_half_dropped_on_another_thread_stops_its_pusher() {
    each_path("write half dropped on another thread", |kind| {
        let (ours, peer) = small_pair();
        let data = pattern(2_000_000);
        let reader = peer_reader(peer, Duration::from_millis(200), Duration::ZERO);
        let rt = common::runtime(kind);
        let sent = data.clone();
        let (r, w, filled) = rt.block_on(async move {
            let (r, mut w) = TcpStream::from_std(ours).into_split();
            let filled = fill_until_pending(&mut w, &sent, 5000).await;
            (r, w, filled)
        });
        common::spawn(move || drop(w)).join().unwrap();
        drop(r);
        // The runtime runs on: the pusher sees the drop and ends.
        rt.block_on(async {
            hoop::time::sleep(Duration::from_millis(100)).await;
            hoop::yield_now().await;
        });
        let got = peer_read(reader)?;
        assert!(got.len() <= data.len());
        if let Some(i) = got.iter().zip(&data).position(|(a, b)| a != b) {
            panic!("byte {i} differs: the bytes are out of order");
        }
        drop(rt);
        filled.map(drop)
    });
}
