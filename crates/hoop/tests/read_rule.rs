//! The read rule (crate docs): a read sets the buffer's length to exactly the bytes it
//! delivered (0 on error), `read_exact` fills exactly the buffer's length or a slice's view.
//! Every case runs on io_uring and on epoll (`#[hoop::test]`), with reused buffers that hold
//! bytes of an earlier use, so a stale byte inside the length fails the test.

use std::io::{self, Write as _};
use std::time::Duration;

use hoop::fs::File;
use hoop::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixStream};
use hoop::time::timeout;
use hoop::{AlignedBuf, BufRing, FixedBufPool, IoBuf};
use hoop_test_support::resets;

const LIMIT: Duration = Duration::from_secs(20);

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (c, s) = futures_join(TcpStream::connect(addr), l.accept()).await;
    (c.unwrap(), s.unwrap().0)
}

/// Both futures to completion (no external crate needed here).
async fn futures_join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    let (mut a, mut b) = (Box::pin(a), Box::pin(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let std::task::Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    (ra.unwrap(), rb.unwrap())
}

fn stale() -> Vec<u8> {
    b"0123456789".to_vec()
}

/// The case that showed the stale bytes, on TCP: "abc" into a buffer that held "0123456789" is
/// "abc", not "abc3456789"; then read_exact into a reused `Vec::with_capacity(4096)` through
/// `slice(..100)` reads exactly 100 bytes (and does not wait for 4096).
#[hoop::test]
async fn tcp_read_never_shows_stale_bytes() {
    // A pair a reset ended: the whole case again on a new one.
    timeout(
        LIMIT,
        resets::retry_async("tcp read never shows stale bytes", |_| async {
            let (c, s) = tcp_pair().await;
            let (res, _) = c.write_all(b"abc".to_vec()).await;
            res?;
            let (res, buf) = s.read(stale()).await;
            assert_eq!(res?, 3);
            assert_eq!(buf, b"abc");

            let mut reused: Vec<u8> = Vec::with_capacity(4096);
            reused.extend_from_slice(&[0xEE; 4000]);
            let payload: Vec<u8> = (0..100u8).collect();
            let (res, _) = c.write_all(payload.clone()).await;
            res?;
            let (res, got) = s.read_exact(reused.slice(..100)).await;
            res?;
            let got = got.into_inner();
            assert_eq!(
                got, payload,
                "exactly the 100 bytes, nothing stale after them"
            );

            // read_exact fills exactly the length of a vec![0; n] (std's rule).
            let (res, _) = c.write_all(b"0123456789ABCDEF".to_vec()).await;
            res?;
            let (res, got) = s.read_exact(vec![0u8; 10]).await;
            res?;
            assert_eq!(got, b"0123456789");
            // The rest is still there for the next read, into the same (reused) buffer.
            let (res, got) = s.read(got).await;
            assert_eq!(res?, 6);
            assert_eq!(got, b"ABCDEF");

            // read_exact that meets end of stream: UnexpectedEof, length = what arrived.
            let (res, _) = c.write_all(b"xyz".to_vec()).await;
            res?;
            c.shutdown_with(std::net::Shutdown::Write).await?;
            let (res, got) = s.read_exact(b"0123456789".to_vec()).await;
            match res {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {}
                Err(e) => return Err(e),
                Ok(()) => panic!("read_exact past the end of stream"),
            }
            assert_eq!(got, b"xyz");
            // A read at end of stream: length 0.
            let (res, got) = s.read(stale()).await;
            assert_eq!(res?, 0);
            assert!(got.is_empty());
            Ok(())
        }),
    )
    .await
    .expect("test timed out");
}

/// A slice read keeps the bytes before the slice and cuts everything after what arrived.
#[hoop::test]
async fn slice_read_appends_exactly() {
    // A pair a reset ended: the whole case again on a new one.
    timeout(
        LIMIT,
        resets::retry_async("slice read appends exactly", |_| async {
            let (c, s) = tcp_pair().await;
            let (res, _) = c.write_all(b"de".to_vec()).await;
            res?;
            let mut buf = Vec::with_capacity(64);
            buf.extend_from_slice(b"abc0123456789");
            let (res, slice) = s.read(buf.slice(3..)).await;
            assert_eq!(res?, 2);
            assert_eq!(slice.into_inner(), b"abcde");
            Ok(())
        }),
    )
    .await
    .expect("test timed out");
}

/// Unix stream and datagram sockets, and UDP's recv_from.
#[hoop::test]
async fn sockets_recv_sets_exact_length() {
    // A pair a reset ended: the whole case again on a new one.
    timeout(
        LIMIT,
        resets::retry_async("sockets recv sets exact length", |_| async {
            let (a, b) = UnixStream::pair().unwrap();
            let (res, _) = a.write_all(b"abc".to_vec()).await;
            res?;
            let (res, buf) = b.read(stale()).await;
            assert_eq!(res?, 3);
            assert_eq!(buf, b"abc");

            let (a, b) = UnixDatagram::pair().unwrap();
            let (res, _) = a.send(b"ab".to_vec()).await;
            res?;
            let (res, buf) = b.recv(stale()).await;
            assert_eq!(res?, 2);
            assert_eq!(buf, b"ab");
            let (res, _) = a.send(b"xyz".to_vec()).await;
            res?;
            let (res, buf) = b.recv_from(stale()).await;
            assert_eq!(res?.0, 3);
            assert_eq!(buf, b"xyz");

            let u1 = UdpSocket::bind("127.0.0.1:0").await?;
            let u2 = UdpSocket::bind("127.0.0.1:0").await?;
            let (res, _) = u1.send_to(b"abc".to_vec(), u2.local_addr().unwrap()).await;
            res?;
            let (res, buf) = u2.recv_from(stale()).await;
            let (n, from) = res?;
            assert_eq!((n, from), (3, u1.local_addr().unwrap()));
            assert_eq!(buf, b"abc");
            Ok(())
        }),
    )
    .await
    .expect("test timed out");
}

/// Files: read_at, read_exact_at with a reused buffer, readv_at, an error (length 0), and an
/// aligned buffer.
#[hoop::test]
async fn file_reads_set_exact_length() {
    let path = std::env::temp_dir().join(format!(
        "hoop-read-rule-{}-{:?}",
        std::process::id(),
        hoop::runtime::current_driver()
    ));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(b"abc")
        .unwrap();
    let f = File::open(&path).await.unwrap();
    let (res, buf) = f.read_at(stale(), 0).await;
    assert_eq!(res.unwrap(), 3);
    assert_eq!(buf, b"abc");

    let mut reused: Vec<u8> = Vec::with_capacity(4096);
    reused.extend_from_slice(&[0xEE; 4000]);
    let (res, got) = f.read_exact_at(reused.slice(..2), 1).await;
    res.unwrap();
    assert_eq!(got.into_inner(), b"bc");
    let (res, got) = f.read_exact_at(stale(), 0).await;
    assert_eq!(res.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(got, b"abc", "the length is what arrived before the end");

    let (res, bufs) = f.readv_at(vec![b"01".to_vec(), stale(), stale()], 0).await;
    assert_eq!(res.unwrap(), 3);
    assert_eq!(bufs, vec![b"ab".to_vec(), b"c".to_vec(), Vec::new()]);

    let mut ab = AlignedBuf::new(4096, 512).unwrap();
    ab.copy_from(b"0123456789");
    let (res, ab) = f.read_at(ab, 0).await;
    assert_eq!(res.unwrap(), 3);
    assert_eq!(&ab[..], b"abc");

    // An error (the fd is write-only): the buffer comes back empty.
    let w = hoop::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .await
        .unwrap();
    let (res, buf) = w.read_at(stale(), 0).await;
    assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EBADF));
    assert!(buf.is_empty(), "no stale byte after an error");
    drop((f, w));
    let _ = std::fs::remove_file(&path);
}

/// Registered (fixed) buffers, registered or not, and buffer-ring receives.
#[hoop::test]
async fn fixed_and_ring_buffers_set_exact_length() {
    // A pair a reset ended: the whole case again on a new one.
    timeout(
        LIMIT,
        resets::retry_async("fixed and ring buffers set exact length", |_| async {
            let pool = FixedBufPool::new(2, 4096).unwrap();
            let (c, s) = tcp_pair().await;
            let (res, _) = c.write_all(b"abc".to_vec()).await;
            res?;
            let mut fb = pool.try_take().unwrap();
            fb.copy_from(b"0123456789");
            let (res, fb) = s.read_fixed(fb).await;
            assert_eq!(res?, 3);
            assert_eq!(&fb[..], b"abc");
            // read_exact into a slice of a fixed buffer: exactly the view.
            let (res, _) = c.write_all(b"hello".to_vec()).await;
            res?;
            let (res, fb) = s.read_exact(fb.slice(..5)).await;
            res?;
            assert_eq!(&fb.into_inner()[..], b"hello");

            let ring = BufRing::new(4, 64).unwrap();
            let (res, _) = c.write_all(b"xy".to_vec()).await;
            res?;
            let mut rx = s.recv_stream(&ring);
            let got = rx.next().await.unwrap()?;
            assert_eq!(&got[..], b"xy", "a ring buffer holds exactly what arrived");
            Ok(())
        }),
    )
    .await
    .expect("test timed out");
}
