//! A small service that mixes TCP, UDP, a Unix socket, an interval and signals.
//!
//! ```text
//! cargo run --release -p hoop --example service            # run until SIGINT or SIGTERM
//! cargo run --release -p hoop --example service -- --self-test
//! ```
//!
//! * TCP echo and UDP echo on 127.0.0.1 (ports picked by the kernel, printed first);
//! * a Unix-domain status socket (in the temp dir) that answers one line of counters to each
//!   connection;
//! * an interval that prints the counters every 100 ms (ticks missed while busy are skipped);
//! * SIGINT or SIGTERM stop it: every loop ends, the socket file is removed, exit 0.
//!
//! `--self-test` talks to its own three endpoints, checks the answers, waits for two ticks and
//! sends itself SIGTERM, so the normal way out runs too.

use std::cell::Cell;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use hoop::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use hoop::signal::{signal, SignalKind};
use hoop::time::{interval, MissedTickBehavior};

#[derive(Default)]
struct Counters {
    tcp: Cell<u64>,
    udp: Cell<u64>,
    status: Cell<u64>,
    ticks: Cell<u64>,
}

impl Counters {
    fn line(&self) -> String {
        format!(
            "tcp={} udp={} status={} ticks={}",
            self.tcp.get(),
            self.udp.get(),
            self.status.get(),
            self.ticks.get()
        )
    }
}

/// An `accept` error that ends one connection (reset or aborted by its client before it was
/// accepted), after which the listener goes on.
fn lost_before_accept(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}

async fn tcp_echo(listener: TcpListener, c: Rc<Counters>) -> io::Result<()> {
    loop {
        let s = match listener.accept().await {
            Ok((s, _)) => s,
            // That connection is gone, not the listener: take the next one.
            Err(e) if lost_before_accept(&e) => continue,
            Err(e) => return Err(e),
        };
        let c = c.clone();
        hoop::spawn(async move {
            let mut buf = Vec::with_capacity(4096);
            loop {
                // An idle client is dropped: the deadline is linked to the read in the kernel.
                let (res, b) = s.read_timeout(buf, Duration::from_secs(30)).await;
                buf = b;
                if !matches!(res, Ok(n) if n > 0) {
                    return;
                }
                c.tcp.set(c.tcp.get() + 1);
                let (res, b) = s.write_all(buf).await;
                buf = b;
                if res.is_err() {
                    return;
                }
            }
        });
    }
}

async fn udp_echo(socket: UdpSocket, c: Rc<Counters>) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1500);
    loop {
        let (res, b) = socket.recv_from(buf).await;
        let (_, peer) = res?;
        c.udp.set(c.udp.get() + 1);
        let (res, b) = socket.send_to(b, peer).await;
        res?;
        buf = b;
    }
}

async fn status(listener: UnixListener, c: Rc<Counters>) -> io::Result<()> {
    loop {
        let s = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) if lost_before_accept(&e) => continue,
            Err(e) => return Err(e),
        };
        c.status.set(c.status.get() + 1);
        // A Unix stream has the same deadlines as TCP: a status reader that stops reading
        // cannot hold this loop.
        let (res, _) = s
            .write_all_timeout(format!("{}\n", c.line()), Duration::from_secs(1))
            .await;
        if let Err(e) = res {
            eprintln!("service: status client dropped: {e}");
        }
    }
}

async fn ticker(c: Rc<Counters>) -> io::Result<()> {
    let mut every = interval(Duration::from_millis(100));
    every.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        c.ticks.set(c.ticks.get() + 1);
        println!("tick: {}", c.line());
    }
}

fn check(ok: bool, what: &str) -> io::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(io::Error::other(format!("self-test: wrong {what}")))
    }
}

/// How many times in a row the self-test asks again after a reset.
const RECONNECTS: u64 = 20;

/// Runs `exchange` on fresh connections until one is not reset (at most [`RECONNECTS`] more
/// times); returns its answer and how many were reset.
async fn again_after_resets<T, F, Fut>(mut exchange: F) -> io::Result<(T, u64)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut resets = 0;
    loop {
        match exchange().await {
            Ok(answer) => return Ok((answer, resets)),
            Err(e) if hoop::net::connection_lost(&e) && resets < RECONNECTS => resets += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The counter `name=N` of a status line.
fn counter(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

async fn self_test(
    tcp: std::net::SocketAddr,
    udp: std::net::SocketAddr,
    unix: PathBuf,
) -> io::Result<()> {
    let (got, tcp_resets) = again_after_resets(|| async {
        let s = TcpStream::connect(tcp).await?;
        let (res, _) = s.write_all(b"ping".to_vec()).await;
        res?;
        let (res, got) = s.read_exact(vec![0u8; 4]).await;
        res?;
        Ok(got)
    })
    .await?;
    check(got == b"ping", "tcp echo")?;
    let u = UdpSocket::bind("127.0.0.1:0").await?;
    let (res, _) = u.send_to(b"dgram".to_vec(), udp).await;
    res?;
    let (res, got) = u.recv_from(Vec::with_capacity(64)).await;
    res?;
    check(got == b"dgram", "udp echo")?;
    let (line, status_resets) = again_after_resets(|| async {
        let st = UnixStream::connect(&unix).await?;
        let (res, line) = st.read(Vec::with_capacity(256)).await;
        if res? == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    })
    .await?;
    // One of each, unless resets cut some short: a reset connection's echo may or may not
    // have been counted, and each status connection is.
    let within = |name: &str, resets: u64| {
        counter(&line, name).is_some_and(|n| (1..=1 + resets).contains(&n))
    };
    check(
        within("tcp", tcp_resets) && within("udp", 0) && within("status", status_resets),
        "status line",
    )?;
    if tcp_resets + status_resets > 0 {
        eprintln!(
            "service: asked again {} times after resets",
            tcp_resets + status_resets
        );
    }
    println!("self-test: tcp, udp and status answered ({})", line.trim());
    // Two ticks, then the usual way out.
    hoop::time::sleep(Duration::from_millis(250)).await;
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    std::future::pending().await
}

#[hoop::main]
async fn main() -> io::Result<()> {
    let test = std::env::args().nth(1).as_deref() == Some("--self-test");
    // Listeners first: the signals are blocked from here on, before anything can arrive.
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let c = Rc::new(Counters::default());
    let tcp = TcpListener::bind("127.0.0.1:0").await?;
    let udp = UdpSocket::bind("127.0.0.1:0").await?;
    let path = std::env::temp_dir().join(format!("hoop-service-{}.sock", std::process::id()));
    let unix = UnixListener::bind(&path).await?;
    let (tcp_addr, udp_addr) = (tcp.local_addr()?, udp.local_addr()?);
    println!("tcp {tcp_addr} udp {udp_addr} status {}", path.display());
    let work = async {
        futures::try_join!(
            tcp_echo(tcp, c.clone()),
            udp_echo(udp, c.clone()),
            status(unix, c.clone()),
            ticker(c.clone()),
            async {
                if test {
                    self_test(tcp_addr, udp_addr, path.clone()).await
                } else {
                    std::future::pending().await
                }
            },
        )
        .map(drop)
    };
    let stopped_by = hoop::select! {
        r = work => { r?; "nothing" }
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    };
    let _ = std::fs::remove_file(&path);
    println!("stopped by {stopped_by}: {}", c.line());
    if test && c.ticks.get() < 2 {
        return Err(io::Error::other("fewer than two ticks"));
    }
    Ok(())
}
