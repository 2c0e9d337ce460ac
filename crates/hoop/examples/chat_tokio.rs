//! A chat written the way a tokio user writes one, run on hoop: the measure of hoop's task
//! path under many tasks that wake each other (not tuned for hoop; the `chat` example is).
//!
//! ```text
//! cargo run --release -p hoop --features tokio --example chat_tokio -- [CLIENTS] [LINES] [THREADS]
//! HOOP_DRIVER=epoll cargo run --release -p hoop --features tokio --example chat_tokio
//! ```
//!
//! The server: `run_per_core(THREADS)` (default 2) on one [`ReuseportGroup`], each connection
//! split into owned halves; the read half through tokio's `BufReader::lines()`, every line sent
//! on one `tokio::sync::broadcast` channel shared by the threads; the write half written with
//! tokio's `AsyncWriteExt::write_all`, each line on its own inside `hoop::time::timeout`, no
//! flush (a tokio stream has nothing to flush). The clients (CLIENTS, default 200) run on a
//! tokio current-thread runtime of their own thread, so the server's driver is the only thing
//! `HOOP_DRIVER` changes: each waits for the server's `welcome` (it is subscribed then), and
//! once all have it each sends LINES lines (default 100) at once, and reads until it has
//! every client's every line, checking that each sender's lines come in order, exactly once.
//! Prints `messages/s N`, `deliveries/s N`, `verified N of M deliveries`, and exits non-zero
//! on any loss, duplicate or disorder.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hoop::net::ReuseportGroup;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::broadcast;

/// A client that does not take a line for this long is cut.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole run's bound.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// One connection: its reader task broadcasts every line; this loop writes every line.
async fn serve_client(stream: hoop::net::TcpStream, tx: broadcast::Sender<Arc<str>>) {
    let _ = stream.set_nodelay(true);
    // Subscribed before the welcome: a client that read it misses no line sent after.
    let mut rx = tx.subscribe();
    let (rd, mut wr) = stream.into_split();
    if AsyncWriteExt::write_all(&mut wr, b"welcome\n")
        .await
        .is_err()
    {
        return;
    }
    let reader = hoop::spawn(async move {
        let mut lines = BufReader::new(rd).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(Arc::from(format!("{line}\n")));
        }
    });
    while let Ok(line) = rx.recv().await {
        // The trait's `write_all` (hoop's own takes an owned buffer: the compiler says so
        // and names this spelling).
        let write = AsyncWriteExt::write_all(&mut wr, line.as_bytes());
        if !matches!(hoop::time::timeout(WRITE_TIMEOUT, write).await, Ok(Ok(()))) {
            break;
        }
    }
    reader.abort();
}

/// One server thread: its listener of the group, a task per connection.
async fn serve_core(group: ReuseportGroup, tx: broadcast::Sender<Arc<str>>) -> io::Result<()> {
    let listener = group.listener()?;
    loop {
        let (stream, _) = listener.accept().await?;
        hoop::spawn(serve_client(stream, tx.clone()));
    }
}

/// One client: sends its lines, then reads until it has `clients * lines` lines; returns the
/// deliveries it verified and the errors it saw.
async fn client(
    addr: std::net::SocketAddr,
    id: usize,
    clients: usize,
    lines: usize,
    go: Arc<tokio::sync::Barrier>,
) -> io::Result<(u64, u64)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd).lines();
    // Every client is subscribed before any sends.
    if rd.next_line().await?.as_deref() != Some("welcome") {
        return Err(io::Error::other(format!("client {id}: no welcome")));
    }
    go.wait().await;
    let text: String = (0..lines).map(|seq| format!("{id} {seq}\n")).collect();
    let writer = tokio::spawn(async move {
        wr.write_all(text.as_bytes()).await?;
        // Kept open until the reader is done: a closed client would end its server task.
        Ok::<_, io::Error>(wr)
    });
    let mut next = vec![0usize; clients];
    let (mut verified, mut errors) = (0u64, 0u64);
    let want = (clients * lines) as u64;
    while verified + errors < want {
        let Some(line) = rd.next_line().await? else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("client {id}: the server closed after {verified} lines"),
            ));
        };
        let mut parts = line.split(' ').map(|s| s.parse::<usize>());
        match (parts.next(), parts.next()) {
            (Some(Ok(from)), Some(Ok(seq))) if from < clients && next[from] == seq => {
                next[from] += 1;
                verified += 1;
            }
            _ => errors += 1,
        }
    }
    drop(writer.await.map_err(io::Error::other)??);
    Ok((verified, errors))
}

fn main() -> io::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| {
            s.parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{s}: {e}")))
        })
        .collect::<io::Result<_>>()?;
    let clients = args.first().copied().unwrap_or(200).max(1);
    let lines = args.get(1).copied().unwrap_or(100).max(1);
    let threads = args.get(2).copied().unwrap_or(2).max(1);
    let group = ReuseportGroup::bind_n("127.0.0.1:0", threads)?;
    let addr = group.local_addr();
    // Room for every line of the run: no client is cut for falling behind.
    let (tx, _) = broadcast::channel::<Arc<str>>((clients * lines).next_power_of_two());
    std::thread::spawn(move || {
        let _ = hoop::run_per_core(threads, move |_| serve_core(group.clone(), tx.clone()));
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (elapsed, verified, errors) = rt.block_on(async move {
        let go = Arc::new(tokio::sync::Barrier::new(clients + 1));
        let tasks: Vec<_> = (0..clients)
            .map(|id| tokio::spawn(client(addr, id, clients, lines, go.clone())))
            .collect();
        go.wait().await;
        let start = Instant::now();
        let (mut verified, mut errors) = (0u64, 0u64);
        for t in tasks {
            match tokio::time::timeout(RUN_LIMIT, t).await {
                Ok(Ok(Ok((v, e)))) => {
                    verified += v;
                    errors += e;
                }
                Ok(Ok(Err(e))) => return Err(e),
                Ok(Err(e)) => return Err(io::Error::other(e)),
                Err(_) => return Err(io::Error::other("a client did not finish in 60 s")),
            }
        }
        Ok::<_, io::Error>((start.elapsed(), verified, errors))
    })?;
    let want = (clients * clients * lines) as u64;
    let secs = elapsed.as_secs_f64();
    println!(
        "driver: {}",
        std::env::var("HOOP_DRIVER").unwrap_or_else(|_| "auto".into())
    );
    println!("messages/s {:.0}", (clients * lines) as f64 / secs);
    println!("deliveries/s {:.0}", verified as f64 / secs);
    println!("verified {verified} of {want} deliveries, {errors} errors");
    if verified != want || errors > 0 {
        return Err(io::Error::other(
            "lines were lost, duplicated or out of order",
        ));
    }
    Ok(())
}
