//! A TCP proxy with a deadline on every operation, stopped by Ctrl-C.
//!
//! ```text
//! cargo run --release -p hoop --example proxy -- 127.0.0.1:8000 127.0.0.1:7000
//! cargo run --release -p hoop --example proxy -- --self-test 20 100
//! ```
//!
//! Serve mode prints `listening on ADDR` and forwards every connection to the upstream until
//! SIGINT (Ctrl-C), then exits 0. Each connect, read and write has its own deadline
//! (`hoop::time::timeout`): an idle or stuck peer is dropped instead of holding a task forever.
//! `--self-test CLIENTS MESSAGES` starts an echo upstream and the proxy in this process, runs
//! CLIENTS clients of MESSAGES round trips each through the proxy, checks every reply byte for
//! byte, prints `verified N of M messages` and exits (non-zero if any failed).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use hoop::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use hoop::net::{TcpListener, TcpStream};
use hoop::time::timeout;

/// Deadlines per operation.
const CONNECT: Duration = Duration::from_secs(5);
const IDLE: Duration = Duration::from_secs(30);
const WRITE: Duration = Duration::from_secs(10);

/// Copies `from` to `to` until end of stream, each read and write under its deadline; then
/// shuts down `to`'s write direction so the other side sees the end too. A deadline that
/// passes fails the same way either way: `TimedOut`, "deadline of 30000 ms passed" (a timer's
/// `Elapsed` converts with `?`).
async fn pump(from: OwnedReadHalf, mut to: OwnedWriteHalf) -> io::Result<()> {
    let mut buf = Vec::with_capacity(16 * 1024);
    let mode = deadlines();
    loop {
        let (res, b) = match mode {
            Deadlines::Off => from.read(buf).await,
            Deadlines::Timer => timeout(IDLE, from.read(buf)).await?,
            Deadlines::Linked => from.read_timeout(buf, IDLE).await,
        };
        buf = b;
        if res? == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        let (res, b) = match mode {
            Deadlines::Off => to.write_all(buf).await,
            Deadlines::Timer => timeout(WRITE, to.write_all(buf)).await?,
            Deadlines::Linked => to.write_all_timeout(buf, WRITE).await,
        };
        buf = b;
        res?;
    }
}

/// How the proxy's reads and writes get their deadlines (`HOOP_PROXY_DEADLINES`): `timer`
/// (the default: `hoop::time::timeout`), `linked` (`read_timeout`/`write_all_timeout`, linked
/// to the operation in the kernel), or `off` (none: the baseline for measuring their cost).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Deadlines {
    Off,
    Timer,
    Linked,
}

fn deadlines() -> Deadlines {
    match std::env::var("HOOP_PROXY_DEADLINES").as_deref() {
        Ok("off") => Deadlines::Off,
        Ok("linked") => Deadlines::Linked,
        _ => Deadlines::Timer,
    }
}

async fn proxy_one(client: TcpStream, upstream: SocketAddr) -> io::Result<()> {
    let server = timeout(CONNECT, TcpStream::connect(upstream)).await??;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Owned halves: each direction its own task, no `Rc`, no lock.
    let (client_rd, client_wr) = client.into_split();
    let (server_rd, server_wr) = server.into_split();
    let up = hoop::spawn(pump(client_rd, server_wr));
    let down = pump(server_rd, client_wr).await;
    let up = up.await?;
    down.and(up)
}

/// Accepts until the listener fails; each connection is its own task.
async fn serve(listener: TcpListener, upstream: SocketAddr) -> io::Result<()> {
    loop {
        let (client, _) = listener.accept().await?;
        hoop::spawn(async move {
            if let Err(e) = proxy_one(client, upstream).await {
                eprintln!("proxy: connection ended: {e}");
            }
        });
    }
}

async fn echo_upstream(listener: TcpListener) -> io::Result<()> {
    loop {
        let (s, _) = listener.accept().await?;
        hoop::spawn(async move {
            let mut buf = Vec::with_capacity(16 * 1024);
            loop {
                let (res, b) = s.read(buf).await;
                buf = b;
                if !matches!(res, Ok(n) if n > 0) {
                    return;
                }
                let (res, b) = s.write_all(buf).await;
                buf = b;
                if res.is_err() {
                    return;
                }
            }
        });
    }
}

/// One client: `messages` round trips of 64 bytes, each checked; returns how many matched.
async fn client(id: usize, proxy: SocketAddr, messages: usize) -> io::Result<usize> {
    let s = timeout(CONNECT, TcpStream::connect(proxy)).await??;
    let _ = s.set_nodelay(true);
    let mut ok = 0;
    let mut back = vec![0u8; 64];
    for m in 0..messages {
        let msg: Vec<u8> = (0..64).map(|i| (i + id * 31 + m * 7) as u8).collect();
        let (res, sent) = timeout(WRITE, s.write_all(msg)).await?;
        res?;
        // read_exact fills exactly the buffer's length (64): see the read rule.
        let (res, b) = timeout(IDLE, s.read_exact(back)).await?;
        back = b;
        res?;
        if back == sent {
            ok += 1;
        }
    }
    Ok(ok)
}

async fn self_test(clients: usize, messages: usize) -> io::Result<()> {
    let upstream = TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = upstream.local_addr()?;
    hoop::spawn(echo_upstream(upstream));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let proxy = listener.local_addr()?;
    hoop::spawn(serve(listener, upstream_addr));
    let started = std::time::Instant::now();
    let mut set = hoop::task::JoinSet::new();
    for id in 0..clients {
        set.spawn(client(id, proxy, messages));
    }
    let mut verified = 0;
    while let Some(res) = set.join_next().await {
        match res? {
            Ok(n) => verified += n,
            Err(e) => eprintln!("client failed: {e}"),
        }
    }
    let total = clients * messages;
    let secs = started.elapsed().as_secs_f64();
    println!("verified {verified} of {total} messages");
    eprintln!(
        "{:.0} messages/s ({secs:.2} s, deadlines: {})",
        verified as f64 / secs,
        std::env::var("HOOP_PROXY_DEADLINES").unwrap_or_else(|_| "timer".into())
    );
    if verified == total {
        Ok(())
    } else {
        Err(io::Error::other("some messages failed"))
    }
}

#[hoop::main]
async fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |s: &str| -> io::Result<usize> {
        s.parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{s}: {e}")))
    };
    match args.as_slice() {
        [flag, clients, messages] if flag == "--self-test" => {
            self_test(num(clients)?, num(messages)?).await
        }
        [listen, upstream] => {
            let upstream: SocketAddr = upstream
                .parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{e}")))?;
            // Made before anything else: SIGINT is blocked and counted from here on.
            let ctrl_c = hoop::signal::ctrl_c();
            let listener = TcpListener::bind(listen.as_str()).await?;
            println!("listening on {}", listener.local_addr()?);
            hoop::select! {
                r = serve(listener, upstream) => r,
                r = ctrl_c => {
                    r?;
                    println!("stopping on Ctrl-C");
                    Ok(())
                }
            }
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: proxy LISTEN UPSTREAM | proxy --self-test CLIENTS MESSAGES",
        )),
    }
}
