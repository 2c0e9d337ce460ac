//! Deadlines on hoop's own futures: linked to the operation in the
//! kernel (the timer heap on epoll), the buffer comes back, and the error says which deadline.

use hoop_test_support as common;

use std::io::Write;
use std::time::Duration;

use common::{bounded, each_driver, runtime};
use hoop::net::{TcpListener, TcpStream, UdpSocket};

const MS_50: Duration = Duration::from_millis(50);

fn is_deadline(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::TimedOut && e.to_string() == "deadline of 50 ms passed"
}

#[test]
fn tcp_read_write_accept_connect_deadlines() {
    bounded(60, || {
        each_driver(|kind| {
            runtime(kind).block_on(async {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                // Nobody connects: the accept's deadline passes.
                let e = listener.accept_timeout(MS_50).await.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");

                // A pair a reset ended: the rest again on a new one.
                common::resets::retry_async("deadlines on a TCP pair", |_| {
                    tcp_deadlines(kind, &listener, addr)
                })
                .await;
            });
        });
    });
}

/// `res` failed by its deadline: `Ok`; by a reset: the error (the caller starts over); any
/// other outcome fails the test.
fn by_deadline<T: std::fmt::Debug>(
    kind: common::DriverKind,
    res: std::io::Result<T>,
) -> std::io::Result<()> {
    match res {
        Err(e) if is_deadline(&e) => Ok(()),
        Err(e) if common::resets::is_reset(&e) => Err(e),
        other => panic!("driver={kind}: expected the deadline, got {other:?}"),
    }
}

async fn tcp_deadlines(
    kind: common::DriverKind,
    listener: &TcpListener,
    addr: std::net::SocketAddr,
) -> std::io::Result<()> {
    let client = TcpStream::connect_timeout(addr, Duration::from_secs(5))
        .await
        .unwrap();
    let (server, _) = listener.accept_timeout(MS_50).await.unwrap();

    // Nothing to read: the read is cancelled, the buffer comes back.
    let (res, buf) = server.read_timeout(Vec::with_capacity(64), MS_50).await;
    by_deadline(kind, res)?;
    assert_eq!((buf.len(), buf.capacity()), (0, 64));

    // Data that arrives in time is read as usual.
    let (res, _) = client.write_timeout(b"hello".to_vec(), MS_50).await;
    assert_eq!(res?, 5);
    let (res, buf) = server.read_timeout(buf, Duration::from_secs(5)).await;
    assert_eq!(res?, 5);
    assert_eq!(&buf[..], b"hello");

    // read_exact: 3 of 10 bytes arrive; the deadline covers the whole buffer.
    let (res, _) = client.write_all_timeout(b"abc".to_vec(), MS_50).await;
    res?;
    let (res, buf) = server.read_exact_timeout(vec![0u8; 10], MS_50).await;
    by_deadline(kind, res)?;
    assert_eq!(&buf[..], b"abc");

    // write_all to a peer that never reads: the socket buffers fill, the deadline passes, and
    // the buffer comes back whole.
    let big = vec![7u8; 64 << 20];
    let (res, big) = client.write_all_timeout(big, MS_50).await;
    by_deadline(kind, res)?;
    assert_eq!(big.len(), 64 << 20);
    Ok(())
}

#[test]
fn udp_deadlines() {
    bounded(60, || {
        each_driver(|kind| {
            runtime(kind).block_on(async {
                let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let (res, buf) = a.recv_from_timeout(Vec::with_capacity(32), MS_50).await;
                let e = res.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");
                assert_eq!(buf.capacity(), 32);
                let to = a.local_addr().unwrap();
                let (res, _) = b.send_to_timeout(b"ping".to_vec(), to, MS_50).await;
                assert_eq!(res.unwrap(), 4);
                let (res, buf) = a.recv_from_timeout(buf, Duration::from_secs(5)).await;
                let (n, from) = res.unwrap();
                assert_eq!((&buf[..n], from), (&b"ping"[..], b.local_addr().unwrap()));
            });
        });
    });
}

#[test]
fn file_read_deadline_on_a_pipe() {
    bounded(60, || {
        each_driver(|kind| {
            let (r, mut w) = std::io::pipe().unwrap();
            runtime(kind).block_on(async move {
                let f = hoop::fs::File::from(std::os::fd::OwnedFd::from(r));
                let pos = hoop::driver::op::CURRENT_POS;
                let (res, buf) = f.read_at_timeout(Vec::with_capacity(16), pos, MS_50).await;
                let e = res.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");
                w.write_all(b"late").unwrap();
                let (res, buf) = f.read_at_timeout(buf, pos, Duration::from_secs(5)).await;
                assert_eq!(res.unwrap(), 4);
                assert_eq!(&buf[..], b"late");
            });
        });
    });
}

/// Every socket type has its deadlines, with the one wording.
#[test]
fn unix_and_udp_deadlines_on_every_socket_type() {
    bounded(60, || {
        each_driver(|kind| {
            runtime(kind).block_on(async {
                // Unix listener and stream.
                let dir = std::env::temp_dir()
                    .join(format!("hoop-deadlines-{}-{kind}", std::process::id()));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join("s.sock");
                let listener = hoop::net::UnixListener::bind(&path).await.unwrap();
                let e = listener.accept_timeout(MS_50).await.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");
                let client = hoop::net::UnixStream::connect(&path).await.unwrap();
                let (server, _) = listener
                    .accept_timeout(Duration::from_secs(5))
                    .await
                    .unwrap();
                let (res, buf) = server.read_timeout(Vec::with_capacity(8), MS_50).await;
                let e = res.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");
                assert_eq!(buf.capacity(), 8);
                let (res, _) = client.write_all_timeout(b"abc".to_vec(), MS_50).await;
                res.unwrap();
                let (res, buf) = server.read_exact_timeout(vec![0u8; 5], MS_50).await;
                let e = res.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");
                assert_eq!(&buf[..], b"abc");
                let (res, _) = client.write_timeout(b"de".to_vec(), MS_50).await;
                assert_eq!(res.unwrap(), 2);
                let (res, buf) = server
                    .read_exact_timeout(vec![0u8; 2], Duration::from_secs(5))
                    .await;
                res.unwrap();
                assert_eq!(&buf[..], b"de");

                // Unix datagrams.
                let (a, b) = hoop::net::UnixDatagram::pair().unwrap();
                let (res, buf) = a.recv_timeout(Vec::with_capacity(8), MS_50).await;
                assert!(is_deadline(&res.unwrap_err()), "driver={kind}");
                let (res, _) = b.send_timeout(b"x".to_vec(), MS_50).await;
                assert_eq!(res.unwrap(), 1);
                let (res, buf) = a.recv_timeout(buf, Duration::from_secs(5)).await;
                assert_eq!(res.unwrap(), 1);
                assert_eq!(&buf[..], b"x");
                let (res, _) = a.recv_from_timeout(buf, MS_50).await;
                assert!(is_deadline(&res.unwrap_err()), "driver={kind}");
                let _ = std::fs::remove_dir_all(&dir);

                // UDP, connected: recv_timeout and send_timeout.
                let u1 = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let u2 = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                u1.connect(u2.local_addr().unwrap()).await.unwrap();
                u2.connect(u1.local_addr().unwrap()).await.unwrap();
                let (res, buf) = u1.recv_timeout(Vec::with_capacity(16), MS_50).await;
                assert!(is_deadline(&res.unwrap_err()), "driver={kind}");
                let (res, _) = u2.send_timeout(b"ping".to_vec(), MS_50).await;
                assert_eq!(res.unwrap(), 4);
                let (res, buf) = u1.recv_timeout(buf, Duration::from_secs(5)).await;
                assert_eq!(res.unwrap(), 4);
                assert_eq!(&buf[..], b"ping");
            })
        })
    })
}

/// `time::timeout` and a linked deadline fail with the same error, naming the
/// deadline; the io::Error of a linked deadline carries an `Elapsed`.
#[test]
fn one_deadline_error_for_timers_and_linked_deadlines() {
    bounded(60, || {
        each_driver(|kind| {
            runtime(kind).block_on(async {
                let elapsed = hoop::time::timeout(MS_50, std::future::pending::<()>())
                    .await
                    .unwrap_err();
                assert_eq!(elapsed.to_string(), "deadline of 50 ms passed");
                assert_eq!(elapsed.duration(), MS_50);
                let as_io: std::io::Error = elapsed.into();
                assert!(is_deadline(&as_io), "driver={kind}: {as_io}");

                let (a, _b) = hoop::net::UnixStream::pair().unwrap();
                let (res, _) = a.read_timeout(Vec::with_capacity(4), MS_50).await;
                let e = res.unwrap_err();
                assert!(is_deadline(&e), "driver={kind}: {e}");
                let inner = e
                    .get_ref()
                    .and_then(|i| i.downcast_ref::<hoop::time::Elapsed>())
                    .copied();
                assert_eq!(inner, Some(elapsed), "driver={kind}");
            })
        })
    })
}
