//! A socket leaves hoop (`into_std`, `OwnedFd::from`) while a receive a dropped call parked on
//! it is still in flight: the receive is ended before the fd leaves, so the new owner gets
//! every byte (and every connection) that arrives afterwards. On io_uring the parked receive
//! is cancelled synchronously; before that, its cancel waited for the next driver turn and the
//! kernel gave the new owner's bytes to the abandoned receive.

use std::io::{Read, Write};
use std::time::Duration;

use hoop::net::{TcpListener, UdpSocket, UnixStream};
use hoop::time::timeout;
use hoop_test_support::resets;

/// How long the dropped call waits before it is abandoned (its receive then parked).
const PARK: Duration = Duration::from_millis(20);
/// How long the new owner waits for the bytes sent after the fd left.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// A receive abandoned by a timeout, `into_std`, then bytes from the peer and a turn of the
/// runtime: the std stream reads them all.
#[hoop::test]
async fn a_parked_tcp_read_takes_nothing_after_into_std() {
    parked_tcp_read_then_into_std().await;
}

/// The same on a ring without `DEFER_TASKRUN` (as before Linux 6.1): there the kernel runs a
/// receive whose data arrived at the thread's next system call, so only a cancel that has
/// ended the receive before the fd leaves keeps the bytes for the new owner.
#[test]
fn a_parked_tcp_read_takes_nothing_after_into_std_without_taskrun_flags() {
    hoop_test_support::each_driver(|kind| {
        let rt = hoop_test_support::builder(kind)
            .taskrun_flags(false)
            .build()
            .unwrap();
        rt.block_on(parked_tcp_read_then_into_std());
    });
}

async fn parked_tcp_read_then_into_std() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = resets::retry_async("a parked read, then into_std", |_| async {
        let mut client = std::net::TcpStream::connect(addr)?;
        let (server, _) = listener.accept().await?;
        // The read finds nothing and is dropped in flight: parked on the socket.
        if let Ok((res, _)) = timeout(PARK, server.read(Vec::with_capacity(64))).await {
            // Only an injected reset ends it early (nothing was sent).
            res?;
            panic!("a read of a silent socket completed");
        }
        let mut std_stream = server.into_std()?;
        std_stream.set_nonblocking(false)?;
        std_stream.set_read_timeout(Some(READ_LIMIT))?;
        client.write_all(b"for the new owner")?;
        // The runtime turns (other tasks of the program go on): an abandoned receive still in
        // the kernel would take the bytes now.
        hoop::time::sleep(PARK).await;
        let mut buf = [0u8; 17];
        std_stream.read_exact(&mut buf).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("the new owner did not get the bytes (a parked receive took them?): {e}"),
            )
        })?;
        Ok(buf)
    })
    .await;
    assert_eq!(&got, b"for the new owner");
}

/// The same through `OwnedFd::from` on a Unix stream, and for a datagram socket through
/// `into_std`.
#[hoop::test]
async fn parked_unix_and_udp_receives_take_nothing_after_the_fd_leaves() {
    let got = resets::retry_async("a parked unix read, then OwnedFd::from", |_| async {
        let (a, b) = UnixStream::pair()?;
        if let Ok((res, _)) = timeout(PARK, a.read(Vec::with_capacity(64))).await {
            res?;
            panic!("a read of a silent socket completed");
        }
        let mut a = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(a));
        a.set_nonblocking(false)?;
        a.set_read_timeout(Some(READ_LIMIT))?;
        let (res, _) = b.write_all(b"unix bytes".to_vec()).await;
        res?;
        hoop::time::sleep(PARK).await;
        let mut buf = [0u8; 10];
        a.read_exact(&mut buf)?;
        Ok(buf)
    })
    .await;
    assert_eq!(&got, b"unix bytes");

    let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let to = rx.local_addr().unwrap();
    let parked = timeout(PARK, rx.recv_from(Vec::with_capacity(64))).await;
    assert!(parked.is_err(), "a receive on a silent socket completed");
    let rx = rx.into_std().unwrap();
    rx.set_nonblocking(false).unwrap();
    rx.set_read_timeout(Some(READ_LIMIT)).unwrap();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"one datagram", to).unwrap();
    hoop::time::sleep(PARK).await;
    let mut buf = [0u8; 64];
    let (n, _) = rx
        .recv_from(&mut buf)
        .expect("the new owner gets the datagram sent after the fd left");
    assert_eq!(&buf[..n], b"one datagram");
}
