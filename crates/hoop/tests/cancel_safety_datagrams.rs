//! Cancel safety of the datagram receives as tokio documents it: a receive whose future is
//! dropped in `select!` loses no datagram (its result goes to the next call), on UDP (connected
//! or not) and Unix datagram sockets, and a peek shows what the next receive gets. Each test
//! runs a `select!` loop of the receive against a 50 µs timer that usually wins, on io_uring
//! and on epoll, and counts the numbered datagrams the peer sent against those that arrived.
//! Loops are bounded by counts and `LIMIT`; nothing is asserted about speed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoop::net::{UdpSocket, UnixDatagram};
use hoop::time::{sleep, Instant};
use hoop_test_support as common;

mod cancel_safety_common;
use cancel_safety_common::*;

/// A sender thread sends `n` numbered datagrams through `send`, at most `window` ahead of
/// what the receiver counted (so the socket's queue never overflows: a loss is the
/// runtime's); the receiver checks each arrives exactly once.
fn numbered_sender(
    n: u32,
    received: Arc<AtomicUsize>,
    send: impl Fn(&[u8]) -> std::io::Result<usize> + Send + 'static,
) -> std::thread::JoinHandle<()> {
    common::spawn(move || {
        let end = std::time::Instant::now() + LIMIT;
        for seq in 0..n {
            while seq as usize >= received.load(Ordering::Acquire) + 32 {
                if std::time::Instant::now() > end {
                    return;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            let mut d = seq.to_le_bytes().to_vec();
            d.resize(4 + (seq as usize % 200), seq as u8);
            send(&d).unwrap();
        }
    })
}

/// Checks one datagram and records it; panics on a corrupt or repeated one.
fn record(seen: &mut [bool], d: &[u8], received: &AtomicUsize) {
    assert!(d.len() >= 4, "a datagram of {} bytes", d.len());
    let seq = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
    assert_eq!(
        d.len(),
        4 + (seq as usize % 200),
        "datagram {seq} truncated"
    );
    assert!(
        d[4..].iter().all(|&x| x == seq as u8),
        "datagram {seq} corrupt"
    );
    assert!(!seen[seq as usize], "datagram {seq} twice");
    seen[seq as usize] = true;
    received.fetch_add(1, Ordering::AcqRel);
}

const DATAGRAMS: u32 = 3000;

#[hoop::test]
async fn udp_recv_from_in_select_loses_no_datagram() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let std_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let from = std_sock.local_addr().unwrap();
    let sender = numbered_sender(DATAGRAMS, received.clone(), move |d| {
        std_sock.send_to(d, addr)
    });
    let mut seen = vec![false; DATAGRAMS as usize];
    let end = Instant::now() + LIMIT;
    while received.load(Ordering::Acquire) < DATAGRAMS as usize && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = sock.recv_from(Vec::with_capacity(512)) => match res {
                Ok((_, src)) => {
                    assert_eq!(src, from);
                    record(&mut seen, &b, &received);
                }
                Err(e) if retry(&e) => {}
                Err(e) => panic!("recv_from: {e}"),
            },
        }
    }
    sender.join().unwrap();
    assert_eq!(received.load(Ordering::Acquire), DATAGRAMS as usize);
}

#[hoop::test]
async fn udp_recv_in_select_loses_no_datagram() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let std_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(std_sock.local_addr().unwrap()).await.unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let sender = numbered_sender(DATAGRAMS, received.clone(), move |d| {
        std_sock.send_to(d, addr)
    });
    let mut seen = vec![false; DATAGRAMS as usize];
    let end = Instant::now() + LIMIT;
    let mut i = 0u32;
    while received.load(Ordering::Acquire) < DATAGRAMS as usize && Instant::now() < end {
        i += 1;
        // `recv` and `recv_from` take turns: one kept from either serves the other.
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = sock.recv(Vec::with_capacity(512)), if i.is_multiple_of(2) => match res {
                Ok(_) => record(&mut seen, &b, &received),
                Err(e) if retry(&e) => {}
                Err(e) => panic!("recv: {e}"),
            },
            (res, b) = sock.recv_from(Vec::with_capacity(512)), if !i.is_multiple_of(2) => match res {
                Ok(_) => record(&mut seen, &b, &received),
                Err(e) if retry(&e) => {}
                Err(e) => panic!("recv_from: {e}"),
            },
        }
    }
    sender.join().unwrap();
    assert_eq!(received.load(Ordering::Acquire), DATAGRAMS as usize);
}

#[hoop::test]
async fn unix_datagram_recv_in_select_loses_no_datagram() {
    let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
    let sock = UnixDatagram::from_std(b);
    let received = Arc::new(AtomicUsize::new(0));
    let sender = numbered_sender(DATAGRAMS, received.clone(), move |d| a.send(d));
    let mut seen = vec![false; DATAGRAMS as usize];
    let end = Instant::now() + LIMIT;
    while received.load(Ordering::Acquire) < DATAGRAMS as usize && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = sock.recv(Vec::with_capacity(512)) => match res {
                Ok(_) => record(&mut seen, &b, &received),
                Err(e) if retry(&e) => {}
                Err(e) => panic!("recv: {e}"),
            },
        }
    }
    sender.join().unwrap();
    assert_eq!(received.load(Ordering::Acquire), DATAGRAMS as usize);
}

#[hoop::test]
async fn unix_datagram_recv_from_in_select_loses_no_datagram() {
    let dir = std::env::temp_dir().join(format!("hoop-cancel-dgram-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{:?}.sock", std::thread::current().id()));
    let _ = std::fs::remove_file(&path);
    let sock = UnixDatagram::bind(&path).unwrap();
    let from = dir.join(format!("{:?}.from", std::thread::current().id()));
    let _ = std::fs::remove_file(&from);
    let std_sock = std::os::unix::net::UnixDatagram::bind(&from).unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let to = path.clone();
    let sender = numbered_sender(DATAGRAMS, received.clone(), move |d| {
        std_sock.send_to(d, &to)
    });
    let mut seen = vec![false; DATAGRAMS as usize];
    let end = Instant::now() + LIMIT;
    while received.load(Ordering::Acquire) < DATAGRAMS as usize && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(TICK) => {}
            (res, b) = sock.recv_from(Vec::with_capacity(512)) => match res {
                Ok((_, src)) => {
                    assert_eq!(src.as_pathname(), Some(from.as_path()));
                    record(&mut seen, &b, &received);
                }
                Err(e) if retry(&e) => {}
                Err(e) => panic!("recv_from: {e}"),
            },
        }
    }
    sender.join().unwrap();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&from);
    // The last of the drivers' runs to finish removes the directory.
    let _ = std::fs::remove_dir(&dir);
    assert_eq!(received.load(Ordering::Acquire), DATAGRAMS as usize);
}

/// `UdpSocket::peek_from` between receives dropped in a `select!` loop: a peek shows the
/// datagram the next receive returns (one a dropped receive already took included), and takes
/// nothing.
#[hoop::test]
async fn udp_peek_from_shows_what_the_next_receive_gets() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let std_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let from = std_sock.local_addr().unwrap();
    let n = 500u32;
    let sender = numbered_sender(n, received.clone(), move |d| std_sock.send_to(d, addr));
    let mut seen = vec![false; n as usize];
    let end = Instant::now() + LIMIT;
    let mut peeked: Option<Vec<u8>> = None;
    while received.load(Ordering::Acquire) < n as usize && Instant::now() < end {
        hoop::select! {
            biased;
            _ = sleep(TICK) => {
                // Between rounds, a peek (it may wait for a parked receive).
                if peeked.is_none() {
                    let (res, b) = hoop::time::timeout(LIMIT, sock.peek_from(Vec::with_capacity(512)))
                        .await
                        .expect("peek_from stalled");
                    let (_, src) = res.unwrap();
                    assert_eq!(src, from);
                    peeked = Some(b);
                }
            }
            (res, b) = sock.recv_from(Vec::with_capacity(512)) => {
                let (_, src) = res.unwrap();
                assert_eq!(src, from);
                if let Some(p) = peeked.take() {
                    assert_eq!(p, b, "the peek showed another datagram than the receive got");
                }
                record(&mut seen, &b, &received);
            }
        }
    }
    sender.join().unwrap();
    assert_eq!(received.load(Ordering::Acquire), n as usize);
}
