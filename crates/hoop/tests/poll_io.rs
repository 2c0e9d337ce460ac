//! `futures::io::{AsyncRead, AsyncWrite}` (and tokio's, with feature `tokio`) on TcpStream,
//! UnixStream and File, on io_uring and on epoll: BufReader::lines, large transfers checked
//! byte for byte, and write futures dropped while pending (no byte lost or duplicated).

use std::time::Duration;

use futures::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use futures::{FutureExt, StreamExt};
use hoop::net::{TcpListener, TcpStream, UnixStream};
use hoop::time::timeout;
use hoop_test_support::resets;

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
    // Under injected resets the megabyte goes over dozens of connections, 64 KiB ahead of its
    // echo at most: on a loaded 2-core machine (CI's background builds) that took over 20 s
    // once. The bound is for a hang, not for speed.
    let limit = if resets::injected() { LIMIT * 4 } else { LIMIT };
    timeout(limit, async {
        // Over a new pair from the line where a reset cut the last.
        let mut got = Vec::new();
        let mut resumed = resets::Resumed::new("100 lines");
        while got.len() < 100 {
            let from = got.len();
            if let Err(e) = lines_part(&mut got).await {
                resumed.after(e, got.len() - from);
            }
        }
        assert_eq!(got.len(), 100);
        assert_eq!(got[42], "line 42");

        // 1 MiB each way at once, through the internal buffers: over a new pair from where a
        // reset cut the echo.
        let data = pattern(1 << 20, 7);
        let mut resumed = resets::Resumed::new("1 MiB echoed");
        let mut back = Vec::new();
        while back.len() < data.len() {
            let from = back.len();
            if let Err(e) = echo_part(&data, &mut back).await {
                resumed.after(e, back.len() - from);
            }
        }
        assert!(back == data, "echoed bytes differ");
    })
    .await
    .expect("timed out");
}

/// Lines from `got.len()` to 100 through `BufReader::lines` on a new pair, the ones that
/// arrived onto `got`: each is checked; a reset ends the pair (the last line the server got
/// may then be a part of one, which is left out).
async fn lines_part(got: &mut Vec<String>) -> std::io::Result<()> {
    let (mut c, s) = tcp_pair().await;
    let from = got.len();
    let server = hoop::spawn(async move {
        let mut lines = BufReader::new(s).lines();
        let mut got = Vec::new();
        while let Some(line) = lines.next().await {
            match line {
                Ok(line) => got.push(line),
                Err(e) => return (got, Err(e)),
            }
        }
        (got, Ok(()))
    });
    let mut res = Ok(());
    for i in from..100 {
        res = AsyncWriteExt::write_all(&mut c, format!("line {i}\n").as_bytes()).await;
        if res.is_err() {
            break;
        }
    }
    if res.is_ok() {
        res = AsyncWriteExt::close(&mut c).await; // flush, then shut down the write half
    }
    drop(c);
    let (lines, read) = server.await.unwrap();
    for (k, line) in lines.iter().enumerate() {
        let want = format!("line {}", from + k);
        if *line != want && k + 1 == lines.len() && (res.is_err() || read.is_err()) {
            // Cut by the reset: the part of a line before the end of the stream.
            assert!(want.starts_with(line.as_str()), "{line:?} is not {want:?}");
            break;
        }
        assert_eq!(*line, want);
        got.push(want);
    }
    res?;
    read?;
    Ok(())
}

/// Sends `data[back.len()..]` through an echo on a new pair while reading the echo onto
/// `back`, every byte checked; a reset (on either side) ends it.
async fn echo_part(data: &[u8], back: &mut Vec<u8>) -> std::io::Result<()> {
    let (mut a, mut b) = tcp_pair().await;
    let from = back.len();
    let echo = hoop::spawn(async move {
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = AsyncReadExt::read(&mut b, &mut chunk).await?;
            if n == 0 {
                return b.flush().await;
            }
            AsyncWriteExt::write_all(&mut b, &chunk[..n]).await?;
        }
    });
    {
        let (mut rd, mut wr) = AsyncReadExt::split(&mut a);
        // Under injected resets the writer keeps at most 64 KiB ahead of the echo (else a
        // reset among the hundreds of sends of 1 MiB, made before the echo comes back,
        // would end every pair before any progress); otherwise it writes all at once.
        let window = if resets::injected() {
            64 << 10
        } else {
            data.len()
        };
        let echoed = std::cell::Cell::new(from);
        let write = async {
            let mut sent = from;
            while sent < data.len() {
                while sent >= echoed.get() + window {
                    hoop::time::sleep(Duration::from_micros(100)).await;
                }
                let end = (echoed.get() + window).min(data.len());
                AsyncWriteExt::write_all(&mut wr, &data[sent..end]).await?;
                wr.flush().await?;
                sent = end;
            }
            Ok::<_, std::io::Error>(())
        };
        let read = async {
            let mut chunk = [0u8; 3000];
            while back.len() < data.len() {
                let n = AsyncReadExt::read(&mut rd, &mut chunk).await?;
                if n == 0 {
                    return Err(resets::closed_early("the whole echo"));
                }
                let at = back.len();
                assert!(
                    chunk[..n] == data[at..at + n],
                    "echoed bytes differ at {at}"
                );
                back.extend_from_slice(&chunk[..n]);
                echoed.set(back.len());
            }
            Ok(())
        };
        // A reset on either ends the part at once (the other may wait for ever on it).
        match futures::future::select(std::pin::pin!(write), std::pin::pin!(read)).await {
            futures::future::Either::Left((w, read)) => {
                w?;
                read.await?;
            }
            // Every byte came back: the write is done.
            futures::future::Either::Right((r, _)) => r?,
        };
    }
    drop(a);
    if let Err(e) = echo.await.unwrap() {
        // Everything came back; the echo's end may still see the close as a reset.
        resets::expect_reset("the echo", &e);
    }
    Ok(())
}

/// `write` futures polled once and dropped while pending: what was accepted arrives once, in
/// order; what was not is written by a later call. A reset ends a pair: what the reader got
/// is checked, and the rest goes over a new pair.
#[hoop::test]
async fn dropped_write_futures_lose_and_duplicate_nothing() {
    timeout(LIMIT, async {
        let data = pattern(300_000, 3);
        let mut dropped = 0;
        // Resets may cut every pair short of a full socket (where writes wait): then the whole
        // transfer again, a few times, until a pending write future was dropped.
        let rounds = if resets::injected() { 5 } else { 1 };
        for _ in 0..rounds {
            let mut got = Vec::new();
            let mut resumed = resets::Resumed::new("300 KB through dropped writes");
            while got.len() < data.len() {
                let from = got.len();
                if let Err(e) = dropped_writes_part(&data, &mut got, &mut dropped).await {
                    resumed.after(e, got.len() - from);
                }
            }
            assert_eq!(got.len(), data.len(), "{dropped} futures dropped");
            assert!(got == data, "bytes differ");
            if dropped > 0 {
                break;
            }
        }
        assert!(dropped > 0, "the test dropped no pending write future");
    })
    .await
    .expect("timed out");
}

/// Writes `data[got.len()..]` on a new pair through write futures dropped while pending;
/// the reader's bytes go onto `got` (checked against `data` by the caller).
async fn dropped_writes_part(
    data: &[u8],
    got: &mut Vec<u8>,
    dropped: &mut usize,
) -> std::io::Result<()> {
    let (mut a, mut b) = UnixStream::pair()?;
    let from = got.len();
    let reader = hoop::spawn(async move {
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 16 << 10];
        loop {
            match AsyncReadExt::read(&mut b, &mut chunk).await {
                Ok(0) => return (got, Ok(())),
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) => return (got, Err(e)),
            }
        }
    });
    let mut sent = from;
    let mut res = Ok(());
    while sent < data.len() {
        match AsyncWriteExt::write(&mut a, &data[sent..]).now_or_never() {
            Some(Ok(k)) => sent += k,
            Some(Err(e)) => {
                res = Err(e);
                break;
            }
            None => {
                *dropped += 1;
                hoop::yield_now().await;
            }
        }
    }
    if res.is_ok() {
        res = AsyncWriteExt::close(&mut a).await;
    }
    drop(a);
    let (part, read) = reader.await.unwrap();
    assert!(
        part[..] == data[from..from + part.len()],
        "bytes differ after byte {from}"
    );
    got.extend_from_slice(&part);
    res?;
    read?;
    if got.len() < data.len() {
        return Err(resets::closed_early("every byte"));
    }
    Ok(())
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
        // A reset (injected) ends the exchange: again over a new pair.
        let got = resets::retry_async("tokio's traits over a TCP pair", |_| async {
            let (mut a, mut b) = tcp_pair().await;
            tokio::io::AsyncWriteExt::write_all(&mut a, b"tokio says hi").await?;
            tokio::io::AsyncWriteExt::shutdown(&mut a).await?;
            let mut got = String::new();
            tokio::io::AsyncReadExt::read_to_string(&mut b, &mut got).await?;
            if got != "tokio says hi" {
                // Cut short (a reset on the writer's side): a prefix, never other bytes.
                assert!("tokio says hi".starts_with(&got), "wrong bytes: {got:?}");
                return Err(resets::closed_early("the whole greeting"));
            }
            Ok(got)
        })
        .await;
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
