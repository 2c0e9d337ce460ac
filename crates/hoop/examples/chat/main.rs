//! A line chat on every core: each line a client sends goes to every client.
//!
//! ```text
//! cargo run --release -p hoop --example chat -- 127.0.0.1:7070 [THREADS]
//! cargo run --release -p hoop --example chat -- --self-test [CLIENTS] [LINES]
//! cargo run --release -p hoop --example chat -- --self-test-rate CLIENTS SECS [WINDOW] [LAG]
//! ```
//!
//! Serve mode prints `listening on ADDR` and serves until SIGTERM or SIGINT, then writes
//! `bye` to every client, prints `said bye to N clients` and exits 0.
//!
//! What it shows, in hoop's shapes:
//! * one [`ReuseportGroup`] bound once with a socket per thread (port 0 works), a listener of it on every
//!   `run_per_core` thread; each thread's shutdown report at the end;
//! * a connection split into owned halves (`into_split`): a reader task with its deadline
//!   linked in the kernel (`read_timeout` is the idle timeout) and a writer loop that writes
//!   through the I/O traits (`AsyncWriteExt::write_all`, a flush when no line waits, within
//!   a `timeout` that drops a client that stops reading);
//! * lines fanned out over `tokio::sync::broadcast` (it needs no tokio runtime) across threads;
//! * a `CancellationToken` that signals cancel, and `select!` with `biased;` and guards.
//!
//! `--self-test CLIENTS LINES` (default 200 and 5) runs the server in this process and CLIENTS
//! clients on another thread: each sends LINES lines, every client checks it received every
//! client's every line exactly once (keeping its connection alive with `/ping`), one more
//! client stays silent and must be cut by the idle timeout, then the test raises SIGTERM and
//! every client must read `bye` and end of stream. It prints `verified N of M lines`,
//! `bye to N of N clients` and `idle client cut`, and exits non-zero if anything failed.
//!
//! `--self-test-rate CLIENTS SECS [WINDOW] [LAG]` (window default 4, lag default 256)
//! measures: the server in this process, CLIENTS clients on another thread, each sending
//! numbered lines for SECS seconds with at most WINDOW of them in flight (sent and not yet
//! back: the sender receives its own lines too) and at most LAG not yet received by every
//! client (the server's backlog is CLIENTS x LAG lines, so no client is ever cut for falling
//! behind); then every client must have received every line, in order per sender. It prints
//! `messages/s N`, `deliveries/s N` and `verified N of M deliveries, E errors`, and exits
//! non-zero on any loss or reordering.

mod rate;
mod self_test;
mod server;

use std::io;

use hoop::net::ReuseportGroup;

use rate::rate_test;
use self_test::self_test;
use server::{serve, CONFIG};

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |s: &str| -> io::Result<usize> {
        s.parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{s}: {e}")))
    };
    match args.as_slice() {
        [flag, clients, secs, rest @ ..] if flag == "--self-test-rate" => {
            let window = rest.first().map_or(Ok(4), |s| num(s))?.max(1);
            let lag = rest.get(1).map_or(Ok(256), |s| num(s))?.max(window);
            rate_test(num(clients)?, num(secs)? as u64, window as u64, lag as u64)
        }
        [flag, rest @ ..] if flag == "--self-test" => {
            let clients = rest.first().map_or(Ok(200), |s| num(s))?;
            let lines = rest.get(1).map_or(Ok(5), |s| num(s))?;
            self_test(clients, lines)
        }
        [addr, rest @ ..] => {
            let threads = rest.first().map_or(Ok(2), |s| num(s))?;
            let group = ReuseportGroup::bind_n(addr.as_str(), threads)?;
            println!("listening on {}", group.local_addr());
            let byes = serve(group, threads, CONFIG)?;
            println!("said bye to {byes} clients");
            Ok(())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: chat ADDR [THREADS] | chat --self-test [CLIENTS] [LINES] \
             | chat --self-test-rate CLIENTS SECS [WINDOW] [LAG]",
        )),
    }
}
