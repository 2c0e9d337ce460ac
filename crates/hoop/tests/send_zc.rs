//! Zero-copy send: `TcpStream::send_zc`/`send_zc_all` and the `SendZc`
//! operation, on both drivers. The buffer belongs to the kernel until the notification CQE
//! (invariant 1), not merely until the send's result; the fallbacks (plain send: kernel without
//! `SEND_ZC`, epoll driver, forced, or a socket that refuses zero copy) complete once.

use hoop_test_support as common;
use hoop_test_support::fd_count;
use hoop_test_support::ReadRetry as _;
use std::cell::Cell;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use hoop::driver::op::SendZc;
use hoop::driver::MultiOp;
use hoop::net::TcpListener;
use hoop::{DriverKind, IoBuf};

/// The driver matrix, one test at a time (fd counts are per process).
fn each_driver(f: impl Fn(DriverKind)) {
    let _serial = common::serial();
    common::each_driver(f);
}

fn rt(kind: DriverKind) -> hoop::Runtime {
    common::runtime(kind)
}

/// Byte `i` of the test data: not periodic at 256, so a reordered or repeated chunk shows.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8 ^ (i >> 16) as u8
}

fn patterned(len: usize) -> Vec<u8> {
    (0..len).map(pattern).collect()
}

/// Whether a send started now on this thread's runtime would use `SEND_ZC` (the probe).
fn zero_copy_here() -> bool {
    SendZc::new(-1, Vec::new()).is_zero_copy()
}

fn path_name(kind: DriverKind) -> &'static str {
    match (kind, zero_copy_here()) {
        (_, true) => "io_uring SEND_ZC",
        (DriverKind::Epoll, _) => "epoll plain send (fallback)",
        _ => "io_uring plain send (no SEND_ZC in this kernel: fallback)",
    }
}

/// The receive buffer the lazy reader asks for: small enough that a peer that does not read
/// stops acknowledging long before a multi-MiB send is through, so a zero-copy send's pages
/// stay referenced (its notification pending) until the peer reads; large enough (over one
/// loopback MSS) that reading it afterwards is fast.
const PEER_RCVBUF: libc::c_int = 128 * 1024;

/// A client socket with a receive buffer of `PEER_RCVBUF`, connected to `addr`; also returns
/// the buffer size the kernel granted (`SO_RCVBUF` read back: at most this much data can be
/// acknowledged while nobody reads).
fn connect_small_rcvbuf(addr: SocketAddr) -> (std::net::TcpStream, usize) {
    let SocketAddr::V4(v4) = addr else {
        panic!("the tests bind 127.0.0.1")
    };
    // SAFETY: plain socket(2); the result is checked and owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a fresh socket nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let size: libc::c_int = PEER_RCVBUF;
    // SAFETY: a valid c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a valid sockaddr_in and its size; connect(2) only reads it.
    let r = unsafe {
        libc::connect(
            fd,
            (&sin as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    let mut granted: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid c_int and its length, both written by the kernel.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut granted as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
    (std::net::TcpStream::from(sock), granted as usize)
}

/// Reads until end of stream (or a 10 s stall), checking every byte against `pattern`;
/// returns the byte count.
fn read_and_check(mut c: std::net::TcpStream) -> usize {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        let n = c.read_retry(&mut buf).expect("client read (10 s timeout)");
        if n == 0 {
            return total;
        }
        for (k, &b) in buf[..n].iter().enumerate() {
            assert_eq!(b, pattern(total + k), "byte {} differs", total + k);
        }
        total += n;
    }
}

/// The lazy reader: the signal to start reading, its thread, and how much it can hold unread.
type LazyReader = (mpsc::Sender<()>, std::thread::JoinHandle<usize>, usize);

/// A client thread that connects with a small receive buffer, then waits for `go` before it
/// reads (and checks) everything until end of stream.
fn lazy_reader(addr: SocketAddr) -> LazyReader {
    let (c, rcvbuf) = connect_small_rcvbuf(addr);
    let (go, wait) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // Wait at most 20 s for the signal (a failed test drops the sender: read at once).
        let _ = wait.recv_timeout(Duration::from_secs(20));
        read_and_check(c)
    });
    (go, t, rcvbuf)
}

/// A buffer that records when it is dropped.
struct TrackedBuf {
    data: Vec<u8>,
    dropped: Rc<Cell<bool>>,
}

impl Drop for TrackedBuf {
    fn drop(&mut self) {
        self.dropped.set(true);
    }
}

// SAFETY: the bytes live in the Vec's heap allocation, which never grows or moves while the
// value exists (the Vec is never touched after construction), even when the value is moved.
unsafe impl IoBuf for TrackedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.data.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.data.len()
    }
    fn bytes_total(&self) -> usize {
        self.data.len()
    }
}

/// 1 MiB of patterned data arrives whole and in order through `send_zc_all`, and the buffer
/// comes back.
#[test]
fn send_zc_all_round_trip_1mib() {
    each_driver(|kind| {
        let baseline = fd_count();
        let runtime = rt(kind);
        runtime.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            println!("driver={kind}: {}", path_name(kind));
            // A send a reset (injected) ended: the transfer again on a new connection (its
            // client, which checked the bytes up to the reset, is left to end with it).
            let got = hoop_test_support::resets::retry_async("1 MiB by send_zc_all", |_| async {
                let client = std::thread::spawn(move || {
                    read_and_check(std::net::TcpStream::connect(addr).unwrap())
                });
                let (s, _) = l.accept().await?;
                let data = patterned(1 << 20);
                let send = s.send_zc_all(data);
                let (res, back) = hoop::time::timeout(Duration::from_secs(20), send)
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: send_zc_all took over 20 s"));
                assert_eq!(
                    back.len(),
                    1 << 20,
                    "driver={kind}: buffer not given back whole"
                );
                assert!(back.iter().enumerate().all(|(i, &b)| b == pattern(i)));
                s.close().await?;
                if let Err(e) = res {
                    let _ = client.join();
                    return Err(e);
                }
                Ok(client.join().unwrap())
            })
            .await;
            assert_eq!(got, 1 << 20, "driver={kind}");
            l.close().await.unwrap();
        });
        drop(runtime);
        assert_eq!(fd_count(), baseline, "driver={kind}: fds leaked");
    });
}

/// Invariant 1 for SEND_ZC, through the operation itself: after the send's result the buffer
/// is still the kernel's (the stream has not ended, `into_data` refuses) while the peer does not
/// read; the notification CQE ends the stream once the data was acknowledged, and only then
/// does the buffer come back.
#[test]
fn notification_cqe_ends_a_zero_copy_send() {
    let _serial = common::serial();
    if let Some(reason) = hoop::__private::uring_unavailable() {
        common::skip(
            DriverKind::Uring,
            &format!("io_uring unavailable here: {reason}"),
        );
        return;
    }
    rt(DriverKind::Uring).block_on(async {
        if !zero_copy_here() {
            common::skip(
                DriverKind::Uring,
                "needs SEND_ZC (6.0), absent in the probe",
            );
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (go, client, peer_holds) = lazy_reader(l.local_addr().unwrap());
        let (s, _) = l.accept().await.unwrap();
        let total = 8 << 20;
        let mut op = MultiOp::new(SendZc::new(s.as_raw_fd(), patterned(total)));
        let first = hoop::time::timeout(Duration::from_secs(10), op.next())
            .await
            .expect("no send result within 10 s")
            .expect("the stream ended without the send's result");
        let n = first.unwrap();
        assert!(n > 0 && n <= total, "sent {n}");
        assert!(op.get_ref().unwrap().is_zero_copy());
        if n > peer_holds {
            // The peer reads nothing and cannot hold all `n` bytes: some stay unacknowledged,
            // the pages referenced, the notification pending.
            let pending = hoop::time::timeout(Duration::from_millis(200), op.next()).await;
            assert!(
                pending.is_err(),
                "the stream ended while the peer had read nothing: {:?}",
                pending.ok().map(|i| i.is_some())
            );
            assert!(!op.is_done());
            assert!(!op.get_ref().unwrap().notified());
            op = match op.into_data() {
                Ok(_) => panic!("into_data gave the buffer back before the notification CQE"),
                Err(op) => op,
            };
        } else {
            println!(
                "not checked: all {n} bytes fit in the peer's {peer_holds}-byte receive \
                 buffer, so the notification may come before the peer reads"
            );
        }
        // The peer reads: the data is acknowledged, the kernel lets go of the pages.
        go.send(()).unwrap();
        let end = hoop::time::timeout(Duration::from_secs(10), op.next())
            .await
            .expect("no notification within 10 s after the peer read");
        assert!(end.is_none(), "a second item after the send's result");
        assert!(op.is_done());
        let data = match op.into_data() {
            Ok(d) => d,
            Err(_) => panic!("into_data refused after the final CQE"),
        };
        assert!(data.notified(), "the final CQE was not the notification");
        let (res, buf) = data.into_result();
        assert_eq!(res.unwrap(), n);
        assert_eq!(buf.len(), total);
        s.close().await.unwrap();
        assert_eq!(client.join().unwrap(), n);
        l.close().await.unwrap();
    });
}

/// A `send_zc` future dropped in flight (by a timeout) leaves its buffer with the driver until
/// the notification CQE: not dropped at the drop, nor after the cancel, while the peer does not
/// read; dropped by the orphan handler once the peer reads. On the fallbacks the send completes
/// at once and gives the buffer back.
#[test]
fn dropped_send_zc_keeps_its_buffer_until_the_notification() {
    each_driver(|kind| {
        let baseline = fd_count();
        let runtime = rt(kind);
        runtime.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            // A send an injected reset ended: the case again on a new connection.
            hoop_test_support::resets::retry_async("a dropped send_zc", |_| async {
                let (go, client, peer_holds) = lazy_reader(l.local_addr().unwrap());
                let (s, _) = l.accept().await?;
                let zc = zero_copy_here();
                println!("driver={kind}: {}", path_name(kind));
                let dropped = Rc::new(Cell::new(false));
                let buf = TrackedBuf {
                    data: patterned(8 << 20),
                    dropped: dropped.clone(),
                };
                let r = hoop::time::timeout(Duration::from_millis(200), s.send_zc(buf)).await;
                match r {
                    Err(_) => {
                        assert!(
                            zc,
                            "driver={kind}: a plain send to a fresh socket did not finish"
                        );
                        // The future is gone, the peer has not read: the kernel still holds the
                        // pages, so the driver must still hold the buffer.
                        assert!(
                            !dropped.get(),
                            "driver={kind}: buffer freed when the future was dropped"
                        );
                        hoop::time::sleep(Duration::from_millis(100)).await;
                        assert!(
                            !dropped.get(),
                            "driver={kind}: buffer freed before the notification CQE"
                        );
                    }
                    Ok((res, buf)) => {
                        let n = match res {
                            Ok(n) => n,
                            Err(e) => {
                                // A reset (injected: the send never ran) ends the case on this
                                // connection: the buffer came back with the result, and the case
                                // runs again on a new one.
                                drop(buf);
                                drop(go);
                                let _ = client.join();
                                let _ = s.close().await;
                                return Err(e);
                            }
                        };
                        println!("driver={kind}: completed before the timeout: {n} bytes sent");
                        assert!(n > 0);
                        if zc {
                            // The notification came although the peer read nothing: only possible
                            // if the peer could take (and acknowledge) everything sent.
                            assert!(
                                n <= peer_holds,
                                "driver={kind}: a SEND_ZC of {n} bytes completed while the peer \
                                 (receive buffer {peer_holds}) read nothing"
                            );
                            println!(
                                "driver={kind}: not checked: all {n} bytes fit in the peer's \
                                 receive buffer, so the send finished before the timeout"
                            );
                        }
                        assert!(!dropped.get());
                        drop(buf);
                        assert!(dropped.get());
                    }
                }
                go.send(()).unwrap();
                let mut waited = 0;
                while !dropped.get() && waited < 2000 {
                    hoop::time::sleep(Duration::from_millis(5)).await;
                    waited += 1;
                }
                assert!(
                    dropped.get(),
                    "driver={kind}: the orphaned buffer was never released after the peer read"
                );
                s.close().await.unwrap();
                let got = client.join().unwrap();
                assert!(got > 0, "driver={kind}: the peer got nothing");
                Ok(())
            })
            .await;
            l.close().await.unwrap();
        });
        drop(runtime);
        assert_eq!(fd_count(), baseline, "driver={kind}: fds leaked");
    });
}

/// The fallback forced on every driver: one plain send, one completion, no notification.
#[test]
fn forced_copy_fallback_is_one_plain_send() {
    each_driver(|kind| {
        rt(kind).block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            // A send a reset ended: the case again on a new connection (its client, which
            // saw the bytes up to the reset, is left to end with it).
            let (s, client, n, data) =
                hoop_test_support::resets::retry_async("one plain send", |_| async {
                    let client = common::spawn(move || {
                        read_and_check(std::net::TcpStream::connect(addr).unwrap())
                    });
                    let (s, _) = l.accept().await.unwrap();
                    let mut op = MultiOp::new(SendZc::copying(s.as_raw_fd(), patterned(100_000)));
                    let n = hoop::time::timeout(Duration::from_secs(10), op.next())
                        .await
                        .expect("no send result within 10 s")
                        .expect("the stream ended without a result")?;
                    assert!(n > 0);
                    // A plain send's only CQE was the last: the stream is over.
                    assert!(op.next().await.is_none());
                    let data = match op.into_data() {
                        Ok(d) => d,
                        Err(_) => panic!("driver={kind}: into_data refused after the only CQE"),
                    };
                    Ok((s, client, n, data))
                })
                .await;
            assert!(!data.is_zero_copy());
            assert!(
                !data.notified(),
                "driver={kind}: a plain send had a notification"
            );
            let (res, buf) = data.into_result();
            assert_eq!(res.unwrap(), n);
            assert_eq!(buf.len(), 100_000);
            s.close().await.unwrap();
            assert_eq!(client.join().unwrap(), n, "driver={kind}");
            l.close().await.unwrap();
        });
    });
}

/// A socket that refuses zero copy (a Unix socket: `EOPNOTSUPP`) gets a plain send instead.
#[test]
fn socket_without_zero_copy_falls_back_to_send() {
    each_driver(|kind| {
        rt(kind).block_on(async {
            let zc = zero_copy_here();
            // A send a reset (injected) ended: again over a new pair.
            let (mut op, mut b, _a) =
                hoop_test_support::resets::retry_async("a send on a Unix pair", |_| async {
                    let (a, b) = std::os::unix::net::UnixStream::pair()?;
                    let mut op = MultiOp::new(SendZc::new(a.as_raw_fd(), b"hello, world".to_vec()));
                    let first = hoop::time::timeout(Duration::from_secs(10), op.next())
                        .await
                        .expect("no send result within 10 s")
                        .expect("the stream ended without a result");
                    assert_eq!(first?, 12, "driver={kind}");
                    Ok((op, b, a))
                })
                .await;
            assert!(op.next().await.is_none());
            let data = match op.into_data() {
                Ok(d) => d,
                Err(_) => panic!("driver={kind}: into_data refused after the end"),
            };
            println!(
                "driver={kind}: zero copy offered: {zc}; used: {}",
                data.is_zero_copy()
            );
            assert!(
                !data.is_zero_copy(),
                "driver={kind}: a Unix socket did zero copy"
            );
            let mut got = [0u8; 12];
            b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            b.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"hello, world");
        });
    });
}

/// A send to a peer that reset the connection is an error (with the notification reaped on
/// io_uring: the stream ends), not a hang.
#[test]
fn send_zc_to_a_reset_peer_is_an_error() {
    each_driver(|kind| {
        rt(kind).block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().await.unwrap();
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: a valid linger struct and its size on an open socket.
            let r = unsafe {
                libc::setsockopt(
                    c.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                )
            };
            assert_eq!(r, 0);
            drop(c); // RST
            hoop::time::sleep(Duration::from_millis(20)).await;
            let mut err = None;
            for _ in 0..50 {
                let (res, _) =
                    hoop::time::timeout(Duration::from_secs(10), s.send_zc(patterned(64 * 1024)))
                        .await
                        .unwrap_or_else(|_| panic!("driver={kind}: send_zc hung on a reset peer"));
                if let Err(e) = res {
                    err = Some(e);
                    break;
                }
            }
            let e = err.unwrap_or_else(|| panic!("driver={kind}: 50 sends to a reset peer worked"));
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ),
                "driver={kind}: {e}"
            );
            drop(s);
            l.close().await.unwrap();
        });
    });
}
