//! Datagrams on both drivers: a receive loop gets every datagram already queued (a datagram
//! shorter than the buffer does not mean the socket is drained), and a fast sender to a slower
//! receiver never reports a short or empty send nor delivers a truncated or empty datagram.
//!
//! Every test runs on each driver (io_uring, then epoll). Datagram lengths stay under 512
//! bytes and receive buffers at 511, so injected short I/O (which spares transfers under 512
//! bytes) never truncates one; an injected error on an operation that did not run is retried.

use hoop_test_support as common;

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{each_driver, DriverKind};
use hoop::net::{UdpSocket, UnixDatagram};
use hoop::time::{sleep, timeout};

/// Datagrams queued before the receive loop starts.
const QUEUED: usize = 64;
/// Datagrams a fast sender sends to a slower receiver.
const FLOOD: u32 = 5_000;
/// The receive buffer: longer than every datagram, under the short-I/O fault's 512 bytes.
const BUF: usize = 511;

/// Runs `f` on a fresh runtime of `kind`, within `secs` (a hang fails the test).
fn run<F: Future<Output = ()> + 'static>(
    kind: DriverKind,
    secs: u64,
    f: impl FnOnce() -> F + Send + 'static,
) {
    common::bounded(secs, move || {
        let _faults = common::matrix_faults_off();
        common::runtime(kind).block_on(f());
    });
}

/// The length of datagram `seq`: 4 to 500 bytes (room for the sequence number).
fn len_of(seq: u32) -> usize {
    let h = seq.wrapping_mul(0x9E37_79B9).rotate_left(7);
    4 + (h % 497) as usize
}

/// Datagram `seq`: its sequence number, then bytes derived from it.
fn datagram(seq: u32) -> Vec<u8> {
    let mut d = seq.to_le_bytes().to_vec();
    d.extend((4..len_of(seq)).map(|i| (seq as usize * 31 + i * 7) as u8));
    d
}

/// Checks a received datagram: its length and content are those of the sequence number it
/// carries. Returns the sequence number.
fn check(got: &[u8]) -> u32 {
    assert!(got.len() >= 4, "an empty or truncated datagram: {got:?}");
    let seq = u32::from_le_bytes(got[..4].try_into().unwrap());
    assert!(seq < FLOOD, "not a datagram of the test: seq {seq}");
    assert_eq!(got.len(), len_of(seq), "datagram {seq} truncated");
    assert!(got == datagram(seq), "datagram {seq}: wrong content");
    seq
}

/// A receive retried while an injected error says it did not run.
async fn retried<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = io::Result<T>>,
{
    for _ in 0..1000 {
        match f().await {
            Ok(v) => return v,
            Err(e) if common::injected_error(&e) => {}
            Err(e) => panic!("{what}: {e}"),
        }
    }
    panic!("{what}: 1000 injected errors in a row")
}

/// How a test receives: each call returns one datagram's bytes.
type RecvFn<S> = fn(&S, Vec<u8>) -> std::pin::Pin<Box<dyn Future<Output = RecvOut> + '_>>;
type RecvOut = (io::Result<usize>, Vec<u8>);

fn unix_recv(
    s: &UnixDatagram,
    b: Vec<u8>,
) -> std::pin::Pin<Box<dyn Future<Output = RecvOut> + '_>> {
    Box::pin(s.recv(b))
}

fn unix_recv_from(
    s: &UnixDatagram,
    b: Vec<u8>,
) -> std::pin::Pin<Box<dyn Future<Output = RecvOut> + '_>> {
    Box::pin(async move {
        let (r, b) = s.recv_from(b).await;
        (r.map(|(n, _)| n), b)
    })
}

fn udp_recv(s: &UdpSocket, b: Vec<u8>) -> std::pin::Pin<Box<dyn Future<Output = RecvOut> + '_>> {
    Box::pin(s.recv(b))
}

fn udp_recv_from(
    s: &UdpSocket,
    b: Vec<u8>,
) -> std::pin::Pin<Box<dyn Future<Output = RecvOut> + '_>> {
    Box::pin(async move {
        let (r, b) = s.recv_from(b).await;
        (r.map(|(n, _)| n), b)
    })
}

/// Receives `QUEUED` datagrams, each within 2 s (they are all queued already), in order.
async fn receive_queued<S>(s: &S, recv: RecvFn<S>, what: &str) {
    for seq in 0..QUEUED as u32 {
        let got = timeout(Duration::from_secs(2), async {
            retried(what, || async {
                let (r, b) = recv(s, Vec::with_capacity(BUF)).await;
                r.map(|n| b[..n].to_vec())
            })
            .await
        })
        .await
        .unwrap_or_else(|_| panic!("{what}: datagram {seq} of {QUEUED} queued never came"));
        assert_eq!(check(&got), seq, "{what}: out of order");
    }
}

#[test]
fn queued_unix_datagrams_all_received() {
    each_driver(|kind| {
        run(kind, 30, || async {
            for (what, recv) in [
                ("recv", unix_recv as RecvFn<UnixDatagram>),
                ("recv_from", unix_recv_from),
            ] {
                let (tx, rx) = std::os::unix::net::UnixDatagram::pair().unwrap();
                for seq in 0..QUEUED as u32 {
                    tx.send(&datagram(seq)).unwrap();
                }
                let rx = UnixDatagram::from_std(rx);
                receive_queued(&rx, recv, what).await;
            }
        });
    });
}

#[test]
fn queued_udp_datagrams_all_received() {
    each_driver(|kind| {
        run(kind, 30, || async {
            for (what, recv, connect) in [
                ("connected recv", udp_recv as RecvFn<UdpSocket>, true),
                ("recv_from", udp_recv_from, false),
            ] {
                let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                if connect {
                    rx.connect(tx.local_addr().unwrap()).await.unwrap();
                }
                for seq in 0..QUEUED as u32 {
                    tx.send_to(&datagram(seq), rx.local_addr().unwrap())
                        .unwrap();
                }
                receive_queued(&rx, recv, what).await;
            }
        });
    });
}

/// How the flood's sender sends one datagram, and to what.
#[derive(Clone, Copy, Debug)]
enum How {
    /// `send` on a socketpair (each end the other's peer: no queue-length limit).
    PairSend,
    /// `send` on a socket connected to a bound receiver (which is not connected back: the
    /// receiver's queue-length limit applies).
    Send,
    /// `send_timeout`, likewise.
    SendTimeout,
    /// `send_to` from an unconnected socket to a bound receiver.
    SendTo,
}

/// Sends `FLOOD` datagrams as fast as it can; each send must report the whole datagram.
async fn flood_send<F, Fut>(mut send: F)
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: Future<Output = (io::Result<usize>, Vec<u8>)>,
{
    for seq in 0..FLOOD {
        let d = datagram(seq);
        let len = d.len();
        let mut tries = 0;
        loop {
            let (r, _) = send(d.clone()).await;
            match r {
                Ok(n) => {
                    assert_eq!(
                        n, len,
                        "send of datagram {seq}: {n} of {len} bytes reported"
                    );
                    break;
                }
                Err(e) if common::injected_error(&e) && tries < 1000 => tries += 1,
                Err(e) => panic!("send of datagram {seq}: {e}"),
            }
        }
    }
}

/// A slow receiver: a pause every 16 datagrams, so the sender fills its queue.
async fn pause(i: usize) {
    if i % 16 == 15 {
        sleep(Duration::from_micros(200)).await;
    }
}

/// The length of the next datagram queued on `s` (0: none).
fn queued_bytes(s: &UdpSocket) -> i32 {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into `n`.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(r, 0, "FIONREAD: {}", io::Error::last_os_error());
    n
}

fn temp_path(tag: &str, kind: DriverKind) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "hoop-dgram-{}-{tag}-{kind}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

#[test]
fn unix_flood_to_slower_receiver_arrives_whole() {
    each_driver(|kind| {
        for how in [How::PairSend, How::Send, How::SendTimeout, How::SendTo] {
            let (tx, rx, path) = match how {
                How::PairSend => {
                    let (tx, rx) = std::os::unix::net::UnixDatagram::pair().unwrap();
                    (tx, rx, None)
                }
                _ => {
                    let path = temp_path("flood", kind);
                    let rx = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
                    let tx = std::os::unix::net::UnixDatagram::unbound().unwrap();
                    if !matches!(how, How::SendTo) {
                        tx.connect(&path).unwrap();
                    }
                    (tx, rx, Some(path))
                }
            };
            let to = path.clone();
            let sender = common::spawn(move || {
                run(kind, 60, move || async move {
                    let tx = UnixDatagram::from_std(tx);
                    flood_send(|d| {
                        let (tx, to) = (&tx, to.clone());
                        async move {
                            match how {
                                How::PairSend | How::Send => tx.send(d).await,
                                How::SendTimeout => {
                                    tx.send_timeout(d, Duration::from_secs(10)).await
                                }
                                How::SendTo => tx.send_to(d, to.unwrap()).await,
                            }
                        }
                    })
                    .await;
                })
            });
            run(kind, 60, move || async move {
                let rx = UnixDatagram::from_std(rx);
                for i in 0..FLOOD as usize {
                    let got = timeout(Duration::from_secs(5), async {
                        retried("recv", || async {
                            let (r, b) = rx.recv(Vec::with_capacity(BUF)).await;
                            r.map(|n| b[..n].to_vec())
                        })
                        .await
                    })
                    .await
                    .unwrap_or_else(|_| panic!("{how:?}: datagram {i} never came"));
                    assert_eq!(check(&got), i as u32, "{how:?}: lost or reordered");
                    pause(i).await;
                }
            });
            sender.join().unwrap();
            if let Some(p) = path {
                let _ = std::fs::remove_file(p);
            }
        }
    });
}

#[test]
fn udp_flood_to_slower_receiver_is_never_truncated() {
    each_driver(|kind| {
        for connected in [true, false] {
            let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let to = rx.local_addr().unwrap();
            if connected {
                tx.connect(to).unwrap();
            }
            let done = Arc::new(AtomicBool::new(false));
            let sent = done.clone();
            let sender = common::spawn(move || {
                run(kind, 60, move || async move {
                    let tx = UdpSocket::from_std(tx);
                    flood_send(|d| {
                        let tx = &tx;
                        async move {
                            if connected {
                                tx.send(d).await
                            } else {
                                tx.send_to(d, to).await
                            }
                        }
                    })
                    .await;
                    sent.store(true, Ordering::Release);
                })
            });
            run(kind, 60, move || async move {
                let rx = UdpSocket::from_std(rx);
                let mut got_any = 0usize;
                // Losses are the protocol's: receive until the sender is done and nothing
                // more comes for a while.
                for i in 0..FLOOD as usize {
                    let r = timeout(Duration::from_millis(500), async {
                        retried("recv", || async {
                            let (r, b) = rx.recv(Vec::with_capacity(BUF)).await;
                            r.map(|n| b[..n].to_vec())
                        })
                        .await
                    })
                    .await;
                    match r {
                        Ok(got) => {
                            check(&got);
                            got_any += 1;
                        }
                        Err(_) if done.load(Ordering::Acquire) => break,
                        Err(_) => {}
                    }
                    pause(i).await;
                }
                assert!(got_any > 0, "connected={connected}: nothing received");
                // Whatever was lost, nothing is left queued once the receiver gave up waiting.
                assert_eq!(
                    queued_bytes(&rx),
                    0,
                    "connected={connected}: datagrams left queued after {got_any} received"
                );
            });
            sender.join().unwrap();
        }
    });
}

/// A `send_to` that finds its target's queue full of other senders' datagrams completes once
/// the target drains: nothing wakes an unconnected sender then (it is woken only when its own
/// datagrams leave a queue, or its connected peer drains), so the driver must try again of
/// its own accord, without spinning: a failed send's own buffer, freed, makes the socket
/// writable again at once, every time (epoll spun through 2,016 waits in 28 ms).
#[test]
fn unix_send_to_a_queue_filled_by_others_completes() {
    each_driver(|kind| {
        let path = temp_path("others", kind);
        let rx = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let filler = std::os::unix::net::UnixDatagram::unbound().unwrap();
        filler.set_nonblocking(true).unwrap();
        let mut filled = 0;
        while filler.send_to(&datagram(0), &path).is_ok() {
            filled += 1;
            assert!(filled < 100_000, "the queue never filled");
        }
        let to = path.clone();
        run(kind, 30, move || async move {
            let tx = UnixDatagram::unbound().unwrap();
            // The receiver drains the other sender's datagrams once the send below waits.
            let drain = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let mut buf = [0u8; BUF];
                for _ in 0..filled {
                    let n = rx.recv(&mut buf).unwrap();
                    check(&buf[..n]);
                }
                rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let n = rx.recv(&mut buf).unwrap();
                assert_eq!(check(&buf[..n]), 7);
            });
            let d = datagram(7);
            let len = d.len();
            let waits = || hoop::runtime::current_counters().unwrap().enter_calls;
            let before = waits();
            let (r, _) = timeout(Duration::from_secs(5), async {
                for _ in 0..1000 {
                    match tx.send_to(d.clone(), &to).await {
                        (Err(e), b) if common::injected_error(&e) => drop(b),
                        other => return other,
                    }
                }
                panic!("1000 injected errors in a row")
            })
            .await
            .expect("the send never completed after its target drained");
            assert_eq!(r.unwrap(), len);
            // Tries back off up to 2 ms apart: a few dozen waits over the 50 ms; spinning
            // takes thousands.
            let waits = waits() - before;
            assert!(waits < 1000, "{waits} waits for one send: the driver spins");
            drain.join().unwrap();
        });
        let _ = std::fs::remove_file(path);
    });
}
