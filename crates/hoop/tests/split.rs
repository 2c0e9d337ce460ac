//! Split streams: `into_split` and `split` for TCP and Unix streams, on io_uring
//! and on epoll (`#[hoop::test]`). The halves keep the owned-buffer methods, the deadlines and
//! the I/O traits; bytes read ahead or accepted for writing go with their half and come back.

use hoop_test_support::resets;

use std::time::Duration;

use futures::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use futures::StreamExt;
use hoop::net::{tcp, unix, TcpListener, TcpStream, UnixStream};

const SECS_5: Duration = Duration::from_secs(5);

/// A read that was to time out: `Ok` if it did, its error if another ended it (a reset: the
/// caller starts over); a read that returned fails the test.
fn timed_out<T: std::fmt::Debug>(res: std::io::Result<T>) -> std::io::Result<()> {
    match res {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Ok(()),
        Err(e) => Err(e),
        Ok(v) => panic!("expected a timeout, got {v:?}"),
    }
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

#[test]
fn halves_are_send_and_sync() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<tcp::OwnedReadHalf>();
    send_sync::<tcp::OwnedWriteHalf>();
    send_sync::<unix::OwnedReadHalf>();
    send_sync::<unix::OwnedWriteHalf>();
    send_sync::<tcp::ReuniteError>();
}

/// Lines read through `AsyncBufRead` on the read half in one task while another task writes
/// owned buffers on the write half; then the halves make the stream again.
#[hoop::test]
async fn tcp_owned_halves_read_lines_while_writing_then_reunite() {
    // A pair a reset ended: the case again on a new one.
    resets::retry_async("lines on owned halves", |_| async {
        let (client, server) = tcp_pair().await;
        let (rd, wr) = server.into_split();
        let reader = hoop::spawn(async move {
            let mut reader = BufReader::new(rd);
            let mut got = Vec::new();
            {
                let mut lines = (&mut reader).lines();
                for _ in 0..3 {
                    match hoop::time::timeout(SECS_5, lines.next()).await {
                        Ok(Some(Ok(line))) => got.push(line),
                        Ok(Some(Err(e))) => return Err(e),
                        other => panic!("a line: {other:?}"),
                    }
                }
            }
            Ok::<_, std::io::Error>((got, reader.into_inner()))
        });
        let writer = hoop::spawn(async move {
            for i in 0..3 {
                let (res, _) = wr
                    .write_all_timeout(format!("to client {i}\n").into_bytes(), SECS_5)
                    .await;
                res?;
            }
            Ok::<_, std::io::Error>(wr)
        });
        let (res, _) = client.write_all(b"one\ntwo\nthree\n".to_vec()).await;
        res?;
        // The writer first: a reset that ended it would leave the read below waiting.
        let wr = writer.await.unwrap()?;
        let (res, buf) = client.read_exact_timeout(vec![0u8; 36], SECS_5).await;
        res?;
        assert_eq!(&buf[..], b"to client 0\nto client 1\nto client 2\n");
        let (lines, rd) = reader.await.unwrap()?;
        assert_eq!(lines, ["one", "two", "three"]);
        assert_eq!(rd.peer_addr().unwrap(), client.local_addr().unwrap());
        assert_eq!(wr.local_addr().unwrap(), client.peer_addr().unwrap());

        // Reunited, the stream works whole, through the traits too.
        let mut server = rd.reunite(wr).expect("the halves of one stream");
        server.write_all(b"again".to_vec()).await.0?;
        let (res, buf) = client.read_exact_timeout(vec![0u8; 5], SECS_5).await;
        res?;
        assert_eq!(&buf[..], b"again");
        AsyncWriteExt::write_all(&mut server, b"traits").await?;
        AsyncWriteExt::flush(&mut server).await?;
        let (res, buf) = client.read_exact_timeout(vec![0u8; 6], SECS_5).await;
        res?;
        assert_eq!(&buf[..], b"traits");
        Ok(())
    })
    .await;
}

/// Dropping the owned write half shuts down the write direction: the peer reads end of stream
/// while the read half still reads. `forget` skips that; the socket closes with the last half.
#[hoop::test]
async fn dropping_the_write_half_shuts_down_writing_only() {
    // A pair a reset ended: the case again on a new one.
    resets::retry_async("a dropped write half", |_| async {
        let (client, server) = tcp_pair().await;
        let (rd, wr) = server.into_split();
        drop(wr);
        let (res, _) = client.read_timeout(Vec::with_capacity(8), SECS_5).await;
        assert_eq!(res?, 0, "end of stream after the write half was dropped");
        // The read half still reads.
        client.write_all(b"still".to_vec()).await.0?;
        let (res, buf) = rd.read_exact_timeout(vec![0u8; 5], SECS_5).await;
        res?;
        assert_eq!(&buf[..], b"still");
        drop(rd);

        // `forget`: no end of stream until the read half is gone too.
        let (client, server) = tcp_pair().await;
        let (rd, wr) = server.into_split();
        wr.forget();
        let (res, _) = client
            .read_timeout(Vec::with_capacity(8), Duration::from_millis(50))
            .await;
        // A forgotten write half shuts nothing down.
        timed_out(res)?;
        drop(rd);
        let (res, _) = client.read_timeout(Vec::with_capacity(8), SECS_5).await;
        assert_eq!(res?, 0, "the last half closed the socket");
        Ok(())
    })
    .await;
}

#[hoop::test]
async fn reunite_refuses_halves_of_two_streams() {
    let (_c1, s1) = tcp_pair().await;
    let (_c2, s2) = tcp_pair().await;
    let (r1, w1) = s1.into_split();
    let (r2, w2) = s2.into_split();
    let err = r1.reunite(w2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tried to reunite halves that are not from the same socket"
    );
    let tcp::ReuniteError(r1, w2) = err;
    // Both halves came back whole: each pairs with its own.
    r1.reunite(w1).expect("r1 and w1");
    w2.reunite(r2).expect("w2 and r2");
}

/// `split` borrows: both halves work at once in one task (a copy in each direction), and what
/// a half accepted for writing stays with the stream after the halves are dropped.
#[hoop::test]
async fn borrowed_halves_copy_both_ways_and_hand_state_back() {
    // A pair a reset ended: the case again on a new one.
    resets::retry_async("borrowed halves", |_| async {
        let (mut client, mut server) = tcp_pair().await;
        {
            // With futures' `AsyncReadExt` in scope, `server.split()` would be futures' (it takes
            // the stream by value, so method lookup finds it first): name the type's.
            let (mut srd, mut swr) = TcpStream::split(&mut server);
            let (mut crd, mut cwr) = TcpStream::split(&mut client);
            // Echo 64 KiB through the server's halves while the client writes and reads.
            let data: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
            let send = async {
                AsyncWriteExt::write_all(&mut cwr, &data).await?;
                cwr.flush().await
            };
            let echo = async {
                let mut buf = vec![0u8; 64 * 1024];
                AsyncReadExt::read_exact(&mut srd, &mut buf).await?;
                AsyncWriteExt::write_all(&mut swr, &buf).await?;
                swr.flush().await
            };
            let receive = async {
                let mut got = vec![0u8; 64 * 1024];
                AsyncReadExt::read_exact(&mut crd, &mut got).await?;
                Ok(got)
            };
            // The first error (a reset) ends all three.
            let ((), (), got) =
                hoop::time::timeout(SECS_5, async { futures::try_join!(send, echo, receive) })
                    .await
                    .expect("the copy ends")?;
            assert!(got == data, "echoed bytes");

            // Owned-buffer methods and deadlines on borrowed halves.
            let (res, _) = swr.write_all_timeout(b"owned".to_vec(), SECS_5).await;
            res?;
            let (res, buf) = crd.read_exact_timeout(vec![0u8; 5], SECS_5).await;
            res?;
            assert_eq!(&buf[..], b"owned");
            let (res, _) = srd
                .read_timeout(Vec::with_capacity(4), Duration::from_millis(20))
                .await;
            timed_out(res)?;

            // Accepted by the write half's write-behind, not flushed: it stays with the stream.
            AsyncWriteExt::write_all(&mut swr, b"behind").await?;
        }
        AsyncWriteExt::flush(&mut server).await?;
        let (res, buf) = client.read_exact_timeout(vec![0u8; 6], SECS_5).await;
        res?;
        assert_eq!(&buf[..], b"behind");

        // tokio's spelling of shutdown: flush, then the write direction.
        AsyncWriteExt::write_all(&mut server, b"last").await?;
        server.shutdown().await?;
        let mut rest = Vec::new();
        hoop::time::timeout(SECS_5, client.read_to_end(&mut rest))
            .await
            .expect("end of stream")?;
        assert_eq!(rest, b"last");
        Ok(())
    })
    .await;
}

/// Bytes the stream read ahead through its `AsyncRead` before `into_split` go with the read
/// half.
#[hoop::test]
async fn bytes_read_ahead_go_with_the_read_half() {
    // A pair a reset ended: the case again on a new one.
    resets::retry_async("bytes read ahead", |_| async {
        let (client, server) = tcp_pair().await;
        client.write_all(b"first\nsecond\n".to_vec()).await.0?;
        let mut reader = BufReader::new(server);
        let mut line = String::new();
        hoop::time::timeout(SECS_5, reader.read_line(&mut line))
            .await
            .unwrap()?;
        assert_eq!(line, "first\n");
        // BufReader holds "second\n" now; what it holds is its own. Take the rest of its buffer
        // and split the stream: nothing is lost either way.
        let held = reader.buffer().to_vec();
        let server = reader.into_inner();
        let (mut rd, _wr) = server.into_split();
        let mut rest = vec![0u8; 7 - held.len()];
        if !rest.is_empty() {
            hoop::time::timeout(SECS_5, AsyncReadExt::read_exact(&mut rd, &mut rest))
                .await
                .unwrap()?;
        }
        assert_eq!([held, rest].concat(), b"second\n");
        Ok(())
    })
    .await;
}

#[hoop::test]
async fn unix_halves_owned_and_borrowed() {
    // A pair a reset ended: the case again on a new one.
    resets::retry_async("Unix halves", |_| async {
        let (a, mut b) = UnixStream::pair().unwrap();
        let (rd, mut wr) = a.into_split();
        wr.write_all(b"ping".to_vec()).await.0?;
        AsyncWriteExt::write_all(&mut wr, b"+traits").await?;
        wr.flush().await?;
        {
            let (mut brd, bwr) = UnixStream::split(&mut b);
            let mut buf = vec![0u8; 11];
            hoop::time::timeout(SECS_5, AsyncReadExt::read_exact(&mut brd, &mut buf))
                .await
                .unwrap()?;
            assert_eq!(&buf[..], b"ping+traits");
            bwr.write_all_timeout(b"pong".to_vec(), SECS_5).await.0?;
        }
        let (res, buf) = rd.read_exact_timeout(vec![0u8; 4], SECS_5).await;
        res?;
        assert_eq!(&buf[..], b"pong");
        assert!(rd.peer_addr().unwrap().is_unnamed());
        let a = rd.reunite(wr).expect("one stream's halves");
        drop(a);
        let (res, _) = b.read_timeout(Vec::with_capacity(4), SECS_5).await;
        assert_eq!(res?, 0);
        Ok(())
    })
    .await;
}
