//! The chat server: a listener of the reuseport group on every core, each connection split
//! into a reader task and a writer loop, lines fanned out over a broadcast channel, and the
//! goodbye at shutdown.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures::io::AsyncWriteExt;
use hoop::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use hoop::net::{ReuseportGroup, TcpStream};
use hoop::signal::{signal, SignalKind};
use hoop::sync::CancellationToken;
use hoop::task::JoinSet;
use hoop::StaticBuf;
use tokio::sync::broadcast;

/// Limits and timeouts, in one place.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// A client that sends nothing for this long is cut.
    pub(crate) idle: Duration,
    /// A write to a client that does not read for this long cuts it.
    pub(crate) write: Duration,
    /// Longest line; a longer one cuts the client.
    pub(crate) max_line_bytes: usize,
    /// Lines a slow client may fall behind before it is cut.
    pub(crate) backlog_lines: usize,
}

pub(crate) const CONFIG: Config = Config {
    idle: Duration::from_secs(60),
    write: Duration::from_secs(5),
    max_line_bytes: 4096,
    backlog_lines: 16 * 1024,
};

/// How a connection ended.
pub(crate) enum End {
    /// The server stopped and the client got its `bye`.
    SaidBye,
    /// The client sent nothing for `Config::idle`.
    Idle,
    /// The client left, broke a limit, or stopped reading.
    Gone,
}

/// Reads lines from `rd` with the idle deadline on every read and broadcasts each one.
/// Returns when the client leaves, stays silent past the deadline, or breaks the limits.
async fn read_lines(rd: OwnedReadHalf, tx: broadcast::Sender<Arc<str>>, config: Config) -> End {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        let (res, b) = rd.read_timeout(buf, config.idle).await;
        buf = b;
        match res {
            Ok(0) => return End::Gone,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return End::Idle,
            Err(_) => return End::Gone,
            Ok(_) => {}
        }
        pending.extend_from_slice(&buf);
        while let Some(nl) = pending.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line[..nl]);
            let text = text.trim_end_matches('\r');
            if text == "/ping" {
                continue;
            }
            // No receivers is not an error here: the sender itself left already.
            let _ = tx.send(Arc::from(format!("{text}\n")));
        }
        if pending.len() > config.max_line_bytes {
            return End::Gone;
        }
    }
}

/// One client: the reader task broadcasts what it sends; this loop writes what everyone sends
/// until the client leaves or the server stops, when it writes `bye`.
async fn serve_client(
    stream: TcpStream,
    tx: broadcast::Sender<Arc<str>>,
    shutdown: CancellationToken,
    config: Config,
) -> End {
    let _ = stream.set_nodelay(true);
    // Subscribed before the welcome: a client that read it misses no later line.
    let mut rx = tx.subscribe();
    let (rd, mut wr): (OwnedReadHalf, OwnedWriteHalf) = stream.into_split();
    let (res, _) = wr
        .write_all_timeout(StaticBuf(b"welcome\n"), config.write)
        .await;
    if res.is_err() {
        return End::Gone;
    }
    let mut reader = hoop::spawn(read_lines(rd, tx, config));
    let end = loop {
        hoop::select! {
            biased;
            _ = shutdown.cancelled() => {
                let (res, _) = wr.write_all_timeout(StaticBuf(b"bye\n"), config.write).await;
                break if res.is_ok() { End::SaidBye } else { End::Gone };
            }
            end = &mut reader => break end.unwrap_or(End::Gone),
            line = rx.recv() => match line {
                Ok(line) => {
                    // Through `AsyncWrite`, as a tokio program writes: `write_all` of each
                    // line (hoop copies it into the stream's buffer, sends it and returns),
                    // and a flush once no line is queued behind it.
                    let write = async {
                        AsyncWriteExt::write_all(&mut wr, line.as_bytes()).await?;
                        if rx.is_empty() {
                            AsyncWriteExt::flush(&mut wr).await?;
                        }
                        Ok::<_, io::Error>(())
                    };
                    if !matches!(hoop::time::timeout(config.write, write).await, Ok(Ok(()))) {
                        break End::Gone;
                    }
                }
                // Fell further behind than the backlog: cut it rather than lose lines silently.
                Err(broadcast::error::RecvError::Lagged(_)) => break End::Gone,
                Err(broadcast::error::RecvError::Closed) => break End::Gone,
            },
        }
    };
    reader.abort();
    if let End::Idle = end {
        let _ = wr
            .write_all_timeout(StaticBuf(b"idle timeout\n"), config.write)
            .await;
    }
    end
}

/// One core: its listener of the group, a task per client, until `shutdown`; then waits for
/// every client task to write its `bye`. Returns how many said bye.
async fn serve_core(
    core: usize,
    group: ReuseportGroup,
    tx: broadcast::Sender<Arc<str>>,
    shutdown: CancellationToken,
    config: Config,
) -> io::Result<usize> {
    let listener = group.listener()?;
    if core == 0 {
        // One watcher for the whole server: SIGTERM or SIGINT cancels every core.
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let token = shutdown.clone();
        hoop::spawn(async move {
            hoop::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
                _ = token.cancelled() => {}
            }
            token.cancel();
        });
    }
    let mut clients = JoinSet::new();
    loop {
        hoop::select! {
            biased;
            _ = shutdown.cancelled() => break,
            // Reap finished clients; the guard keeps an empty set from ending the loop.
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
            conn = listener.accept() => match conn {
                Ok((stream, _)) => {
                    clients.spawn(serve_client(stream, tx.clone(), shutdown.clone(), config));
                }
                Err(e) => eprintln!("chat: accept failed: {e}"),
            },
        }
    }
    let mut byes = 0;
    while let Some(end) = clients.join_next().await {
        if let Ok(End::SaidBye) = end {
            byes += 1;
        }
    }
    Ok(byes)
}

/// Runs the server on `threads` cores until a signal; returns the byes said.
pub(crate) fn serve(group: ReuseportGroup, threads: usize, config: Config) -> io::Result<usize> {
    let (tx, _) = broadcast::channel(config.backlog_lines);
    let shutdown = CancellationToken::new();
    let out = hoop::run_per_core_reports(threads, move |core| {
        serve_core(core, group.clone(), tx.clone(), shutdown.clone(), config)
    })?;
    let mut byes = 0;
    for (core, (res, report)) in out.into_iter().enumerate() {
        byes += res?;
        if report.leaked > 0 || report.still_in_flight > 0 || report.unfinished_writes > 0 {
            eprintln!("chat: core {core} shut down with {report:?}");
        }
    }
    Ok(byes)
}
