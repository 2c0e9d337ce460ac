//! `hoop serve fanout`: a line chat server, every line forwarded to every connected client in
//! the order read, written the way a newcomer would write it once on hoop and once on tokio
//! (one thread, one `tokio::sync::broadcast` channel, a reader and a writer task per
//! connection), the two as alike as the runtimes allow. DESIGN.md, "Fan-out benchmark", says
//! why each choice is what it is.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hoop::net::{TcpListener, TcpStream};
use hoop::{BufResult, IoBuf, Slice};
use tokio::sync::broadcast;

use super::driver::DriverArg;
use super::echo::run_baseline;
use super::threads::{raise_nofile_limit, run_threads, settle_driver, until_stopped, AcceptPacing};
use hoop_flags::signal::Signals;

/// Longest line the server takes; a longer one closes its connection.
pub(crate) const MAX_LINE: usize = 1024 * 1024;
/// Bytes a read may fill beyond a partial line already held.
const READ_BYTES: usize = 64 * 1024;
/// Most bytes a writer gathers into one write.
const WRITE_BATCH: usize = 64 * 1024;

/// One line, newline included, shared by every connection it goes to.
type Line = Arc<[u8]>;

/// Which runtime serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FanoutServer {
    /// hoop, one runtime thread, on the driver `--driver` picks.
    Hoop,
    /// tokio's current-thread runtime (epoll).
    Tokio,
}

/// Arguments of `hoop serve fanout`.
#[derive(Debug, clap::Args)]
pub struct FanoutArgs {
    #[command(flatten)]
    pub config: hoop_flags::config_file::ConfigArg,
    /// Address to listen on; port 0 picks a free port (the first line printed says which).
    #[arg(long, default_value = "127.0.0.1:7001")]
    pub addr: String,
    #[command(flatten)]
    pub backlog: hoop_flags::backlog::BacklogArg,
    /// Which runtime serves the connections (each on one thread).
    #[arg(long, value_enum, default_value_t = FanoutServer::Hoop)]
    pub server: FanoutServer,
    /// hoop's driver: uring, epoll, or auto (io_uring, else epoll). Default: $HOOP_DRIVER when
    /// set, else auto.
    #[arg(long, value_enum, value_name = "DRIVER")]
    pub driver: Option<DriverArg>,
    /// Lines the broadcast channel keeps for a connection that is behind.
    #[arg(long, value_name = "LINES", default_value_t = 65536)]
    pub capacity: usize,
    /// How hoop's writer writes: through the I/O traits as a tokio user does (`traits`), or
    /// with owned-buffer writes (`owned`). Default: $HOOP_FANOUT_WRITER when set, else traits.
    #[arg(long, value_enum, value_name = "WRITER")]
    pub writer: Option<FanoutWriter>,
}

/// How hoop's fan-out writer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FanoutWriter {
    /// `AsyncWriteExt::write_all(&mut write_half, &out)`, as the tokio server writes.
    Traits,
    /// `stream.write_all(out)` of the owned buffer.
    Owned,
}

/// Most lines `--capacity` accepts.
const MAX_CAPACITY: usize = 1 << 24;

/// Runs the chat server until SIGINT or SIGTERM.
pub fn run(args: FanoutArgs) -> io::Result<()> {
    if args.capacity == 0 || args.capacity > MAX_CAPACITY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--capacity must be between 1 and {MAX_CAPACITY} lines, not {}",
                args.capacity
            ),
        ));
    }
    if args.server == FanoutServer::Tokio && args.driver.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--driver applies to the hoop server only, not to tokio",
        ));
    }
    // Before any thread exists, so that every thread inherits the mask.
    let signals = Signals::block()?;
    raise_nofile_limit();
    let capacity = args.capacity;
    let writer = match args.writer {
        Some(w) => w,
        None => match std::env::var("HOOP_FANOUT_WRITER").as_deref() {
            Ok("owned") => FanoutWriter::Owned,
            Ok("traits") | Err(_) => FanoutWriter::Traits,
            Ok(other) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("HOOP_FANOUT_WRITER must be traits or owned, not {other}"),
                ))
            }
        },
    };
    match args.server {
        FanoutServer::Hoop => {
            let kind = settle_driver("fanout", args.driver)?;
            let serve: super::threads::Serve = Arc::new(move |i, listener, stop| {
                let accept: Pin<Box<dyn Future<Output = ()>>> =
                    Box::pin(hoop_accept_loop(listener, i, capacity, writer));
                Box::pin(async move { until_stopped(&stop, accept).await })
            });
            run_threads(
                "fanout",
                (&args.addr, args.backlog.backlog),
                1,
                kind,
                &signals,
                serve,
            )
        }
        FanoutServer::Tokio => run_baseline(
            (&args.addr, args.backlog.backlog),
            "tokio",
            Box::new(move |l| run_tokio_fanout(l, capacity)),
            &signals,
        ),
    }
}

/// Sends every complete line at the start of `buf` into the channel; returns how many bytes
/// that took (the rest is a partial line).
fn send_lines(buf: &[u8], tx: &broadcast::Sender<Line>) -> usize {
    let mut start = 0;
    while let Some(n) = buf[start..].iter().position(|&b| b == b'\n') {
        let end = start + n + 1;
        // An error only means nobody is subscribed.
        let _ = tx.send(Line::from(&buf[start..end]));
        start = end;
    }
    start
}

/// Reads lines into the channel until the connection ends, a read fails or a line passes
/// [`MAX_LINE`]; `read` is one owned-buffer read of the connection (its read half, or the
/// stream the writer shares).
async fn read_lines<F, Fut>(mut read: F, tx: &broadcast::Sender<Line>)
where
    F: FnMut(Slice<Vec<u8>>) -> Fut,
    Fut: Future<Output = BufResult<usize, Slice<Vec<u8>>>>,
{
    let mut buf: Vec<u8> = Vec::with_capacity(READ_BYTES);
    loop {
        buf.reserve(READ_BYTES);
        // Appends after the partial line kept from the last read.
        let filled = buf.len();
        let (res, b) = read(buf.slice(filled..)).await;
        buf = b.into_inner();
        match res {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let used = send_lines(&buf, tx);
        buf.drain(..used);
        if buf.len() > MAX_LINE {
            break;
        }
    }
}

/// Writes what the channel brings through tokio's I/O traits until the channel closes or a
/// write fails: the lines gathered ([`next_lines`]), then one `write_all` into the write half,
/// no flush. The tokio server's writer, and hoop's `--writer traits` one (the trait's
/// `write_all`, as a tokio user spells it; hoop's own takes owned buffers).
async fn write_lines<W>(mut wr: W, mut rx: broadcast::Receiver<Line>)
where
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;

    let mut out: Vec<u8> = Vec::with_capacity(WRITE_BATCH);
    let mut lagged = false;
    while next_lines(&mut rx, &mut out, &mut lagged).await {
        if wr.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// Waits for the next line, then takes it and every line already queued behind it (up to
/// [`WRITE_BATCH`] bytes) into `out`, emptied first. `false`: the channel is closed. Lines lost
/// to lagging are reported once per connection (`lagged`).
async fn next_lines(
    rx: &mut broadcast::Receiver<Line>,
    out: &mut Vec<u8>,
    lagged: &mut bool,
) -> bool {
    use broadcast::error::{RecvError, TryRecvError};
    out.clear();
    let mut lost = 0u64;
    while out.is_empty() {
        match rx.recv().await {
            Ok(line) => out.extend_from_slice(&line),
            Err(RecvError::Lagged(n)) => lost += n,
            Err(RecvError::Closed) => return false,
        }
    }
    while out.len() < WRITE_BATCH {
        match rx.try_recv() {
            Ok(line) => out.extend_from_slice(&line),
            Err(TryRecvError::Lagged(n)) => lost += n,
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    if lost > 0 && !*lagged {
        *lagged = true;
        eprintln!("fanout: a connection fell behind and lost {lost} line(s)");
    }
    true
}

// ===== hoop =====

/// Accepts forever; every connection subscribes to the one channel.
async fn hoop_accept_loop(
    listener: TcpListener,
    worker: usize,
    capacity: usize,
    writer: FanoutWriter,
) {
    let (tx, _) = broadcast::channel::<Line>(capacity);
    let mut pacing = AcceptPacing::new("fanout", worker);
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                pacing.accepted().await;
                // Detached: the task runs until its connection ends or the runtime drops.
                match writer {
                    FanoutWriter::Traits => drop(hoop::spawn(hoop_conn(stream, tx.clone()))),
                    FanoutWriter::Owned => drop(hoop::spawn(hoop_conn_owned(stream, tx.clone()))),
                }
            }
            Err(e) => pacing.failed(e).await,
        }
    }
}

/// One connection: subscribe, write what the channel brings on one task through the I/O
/// traits (as the tokio server does: `write_all` of the gathered lines into the owned write
/// half, no flush), read lines into the channel on this one; when reading ends, the writer is
/// stopped too.
async fn hoop_conn(stream: TcpStream, tx: broadcast::Sender<Line>) {
    // Best effort: without it only latency suffers.
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let writer = hoop::spawn(write_lines(wr, tx.subscribe()));
    read_lines(|b| rd.read(b), &tx).await;
    writer.abort();
}

/// [`hoop_conn`] with owned-buffer writes (`--writer owned`): the stream shared by the two
/// tasks through an `Rc`, the writer's `write_all` of its owned buffer.
async fn hoop_conn_owned(stream: TcpStream, tx: broadcast::Sender<Line>) {
    // Best effort: without it only latency suffers.
    let _ = stream.set_nodelay(true);
    let stream = Rc::new(stream);
    let rx = tx.subscribe();
    let writer = hoop::spawn(hoop_writer(stream.clone(), rx));
    read_lines(|b| stream.read(b), &tx).await;
    writer.abort();
}

async fn hoop_writer(stream: Rc<TcpStream>, mut rx: broadcast::Receiver<Line>) {
    let mut out: Vec<u8> = Vec::with_capacity(WRITE_BATCH);
    let mut lagged = false;
    while next_lines(&mut rx, &mut out, &mut lagged).await {
        let (res, b) = stream.write_all(out).await;
        out = b;
        if res.is_err() {
            return;
        }
    }
}

// ===== tokio =====

/// Pause after `accept` failed for want of descriptors or memory.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(1);

/// Serves the chat on `listener` with tokio's current-thread runtime, forever (the process is
/// stopped by a signal).
fn run_tokio_fanout(listener: std::net::TcpListener, capacity: usize) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // `from_std` must run inside the runtime (it registers with the reactor).
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (tx, _) = broadcast::channel::<Line>(capacity);
        loop {
            match listener.accept().await {
                Ok((stream, _peer)) => {
                    tokio::spawn(tokio_conn(stream, tx.clone()));
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT) => {
                        return Err(e)
                    }
                    _ => {
                        eprintln!("tokio fanout: accept failed: {e}; retrying");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
    })
}

async fn tokio_conn(stream: tokio::net::TcpStream, tx: broadcast::Sender<Line>) {
    use tokio::io::AsyncReadExt;

    // Best effort: without it only latency suffers.
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let writer = tokio::spawn(write_lines(wr, tx.subscribe()));
    let mut buf: Vec<u8> = Vec::with_capacity(READ_BYTES);
    loop {
        buf.reserve(READ_BYTES);
        // Appends after the partial line kept from the last read.
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let used = send_lines(&buf, &tx);
        buf.drain(..used);
        if buf.len() > MAX_LINE {
            break;
        }
    }
    writer.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_lines_go_out_and_a_partial_one_stays() {
        let (tx, mut rx) = broadcast::channel::<Line>(8);
        let used = send_lines(b"ab\ncd\nef", &tx);
        assert_eq!(used, 6);
        assert_eq!(&*rx.try_recv().unwrap(), b"ab\n");
        assert_eq!(&*rx.try_recv().unwrap(), b"cd\n");
        assert!(rx.try_recv().is_err());
        assert_eq!(send_lines(b"no newline", &tx), 0);
    }
}
