//! `futures::io::{AsyncRead, AsyncWrite}` (and tokio's, with feature `tokio`) on TcpStream,
//! UnixStream and File, on io_uring and on epoll: BufReader::lines, large transfers checked
//! byte for byte, and write futures dropped while pending (no byte lost or duplicated).

use std::time::Duration;

use futures::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use futures::{FutureExt, StreamExt};
use hoop::net::{TcpListener, TcpStream, UnixStream};
use hoop::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) as u8) ^ seed)
        .collect()
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = hoop::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (s, _) = l.accept().await.unwrap();
    (c.await.unwrap(), s)
}

#[hoop::test]
async fn tcp_lines_and_large_transfer() {
    timeout(LIMIT, async {
        let (mut c, s) = tcp_pair().await;
        let server = hoop::spawn(async move {
            let mut lines = BufReader::new(s).lines();
            let mut got = Vec::new();
            while let Some(line) = lines.next().await {
                got.push(line.unwrap());
            }
            got
        });
        for i in 0..100 {
            AsyncWriteExt::write_all(&mut c, format!("line {i}\n").as_bytes())
                .await
                .unwrap();
        }
        AsyncWriteExt::close(&mut c).await.unwrap(); // flush, then shut down the write half
        let got = server.await.unwrap();
        assert_eq!(got.len(), 100);
        assert_eq!(got[42], "line 42");

        // 1 MiB each way at once, through the internal buffers.
        let (mut a, mut b) = tcp_pair().await;
        let data = pattern(1 << 20, 7);
        let expect = data.clone();
        let echo = hoop::spawn(async move {
            let mut back = vec![0u8; 1 << 20];
            AsyncReadExt::read_exact(&mut b, &mut back).await.unwrap();
            AsyncWriteExt::write_all(&mut b, &back).await.unwrap();
            b.flush().await.unwrap();
            b
        });
        AsyncWriteExt::write_all(&mut a, &data).await.unwrap();
        a.flush().await.unwrap();
        let mut back = Vec::new();
        let mut chunk = [0u8; 3000];
        while back.len() < expect.len() {
            let n = AsyncReadExt::read(&mut a, &mut chunk).await.unwrap();
            assert!(n > 0, "early end of stream");
            back.extend_from_slice(&chunk[..n]);
        }
        assert!(back == expect, "echoed bytes differ");
        drop(echo.await.unwrap());
    })
    .await
    .expect("timed out");
}

/// `write` futures polled once and dropped while pending: what was accepted arrives once, in
/// order; what was not is written by a later call.
#[hoop::test]
async fn dropped_write_futures_lose_and_duplicate_nothing() {
    timeout(LIMIT, async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let data = pattern(300_000, 3);
        let n = data.len();
        let reader = hoop::spawn(async move {
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut sent = 0;
        let mut dropped = 0;
        while sent < n {
            match AsyncWriteExt::write(&mut a, &data[sent..]).now_or_never() {
                Some(Ok(k)) => sent += k,
                Some(Err(e)) => panic!("write failed: {e}"),
                None => {
                    dropped += 1;
                    hoop::yield_now().await;
                }
            }
        }
        AsyncWriteExt::close(&mut a).await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got.len(), n, "{dropped} futures dropped");
        assert!(got == data, "bytes differ");
        assert!(dropped > 0, "the test dropped no pending write future");
    })
    .await
    .expect("timed out");
}

#[hoop::test]
async fn file_async_read_write() {
    let path = std::env::temp_dir().join(format!(
        "hoop-poll-io-{}-{:?}",
        std::process::id(),
        hoop::runtime::current_driver()
    ));
    let data = pattern(100_000, 9);
    let mut f = hoop::fs::File::create(&path).await.unwrap();
    AsyncWriteExt::write_all(&mut f, &data).await.unwrap();
    AsyncWriteExt::close(&mut f).await.unwrap();
    drop(f);
    let mut f = hoop::fs::File::open(&path).await.unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).await.unwrap();
    assert!(back == data);
    let f = hoop::fs::File::open(&path).await.unwrap();
    let mut lines = BufReader::new(f).lines();
    assert!(lines.next().await.is_some());
    let _ = std::fs::remove_file(&path);
}

#[cfg(feature = "tokio")]
#[hoop::test]
async fn tokio_traits() {
    timeout(LIMIT, async {
        let (mut a, mut b) = tcp_pair().await;
        tokio::io::AsyncWriteExt::write_all(&mut a, b"tokio says hi")
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::shutdown(&mut a).await.unwrap();
        let mut got = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut b, &mut got)
            .await
            .unwrap();
        assert_eq!(got, "tokio says hi");
    })
    .await
    .expect("timed out");
}

/// The poll-based state keeps the types `Send + Sync` (listeners and streams move between
/// threads as before).
#[test]
fn types_stay_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<TcpStream>();
    send_sync::<UnixStream>();
    send_sync::<hoop::fs::File>();
    send_sync::<TcpListener>();
}
