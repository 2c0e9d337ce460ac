//! `hoop-peer cancel --runtime monoio|compio|tokio-uring --scenario S [--clients N] [--bytes N]
//! [--datagrams N] [--files N] [--file-bytes N] [--dir DIR] [--streams N] [--stream-bytes N]`: one scenario of `hoop bench
//! cancel` on a peer's runtime, with the very load and counting hoop's runtimes get (the
//! `load.rs` of hoop's bench, included here). Each I/O future is raced against the runtime's
//! 50 µs sleep, the sleep polled first (a biased `select!` of two, [`race`]), and dropped when
//! the sleep wins. One JSON line: `runtime`, `scenario`, `supported`, `sent`, `received`,
//! `lost`, `note`; a runtime without the call prints `supported: false` and a note, the counts
//! null.
//!
//! * monoio 0.2 (io_uring driver, timer enabled): `TcpListener::accept`,
//!   `AsyncReadRent::read`, `UdpSocket::recv_from`, `UnixDatagram::recv`, `File::write_all_at`,
//!   `AsyncWriteRentExt::write_all` on a `TcpStream`.
//! * compio 0.19: `TcpListener::accept`, `AsyncRead::read`, `UdpSocket::recv_from`,
//!   `AsyncWriteAtExt::write_all_at`, `AsyncWriteExt::write_all`; no Unix datagram socket.
//! * tokio-uring 0.5: `TcpListener::accept`, `TcpStream::read`, `UdpSocket::recv_from`,
//!   `File::write_all_at`, `TcpStream::write_all`; no Unix datagram socket. Its sleep is
//!   tokio's.

use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::AsRawFd;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::{invalid, json_str, Flags};

use crate::load::cancel::load::{self, Counts, Sizes};
use crate::load::cancel::{dgram, sink};

/// The runtimes.
pub(crate) const CANCEL_RUNTIMES: [&str; 3] = ["monoio", "compio", "tokio-uring"];

/// Which branch of [`race`] completed first.
enum Won<A, B> {
    Sleep(A),
    Io(B),
}

/// A biased `select!` of two: polls `sleep`, then `io`; the first ready wins and the other is
/// dropped (cancelled) with this future.
async fn race<S: Future, I: Future>(sleep: S, io: I) -> Won<S::Output, I::Output> {
    let mut sleep = pin!(sleep);
    let mut io = pin!(io);
    poll_fn(|cx| {
        if let Poll::Ready(v) = sleep.as_mut().poll(cx) {
            return Poll::Ready(Won::Sleep(v));
        }
        if let Poll::Ready(v) = io.as_mut().poll(cx) {
            return Poll::Ready(Won::Io(v));
        }
        Poll::Pending
    })
    .await
}

/// A buffer result as a pair: monoio's and tokio-uring's are tuples, compio's a struct.
trait Pair<T, B> {
    fn pair(self) -> (io::Result<T>, B);
}

impl<T, B> Pair<T, B> for (io::Result<T>, B) {
    fn pair(self) -> (io::Result<T>, B) {
        self
    }
}

impl<T, B> Pair<T, B> for compio::BufResult<T, B> {
    fn pair(self) -> (io::Result<T>, B) {
        (self.0, self.1)
    }
}

/// The accept scenario's loop: `$accept` (a future of `io::Result<(stream, addr)>`) raced
/// against `$sleep(TICK)` until the clients are done; `$answer` writes the byte on `$s`.
macro_rules! accept_loop {
    ($sleep:expr, $clients:expr, $accept:expr, |$s:ident| $answer:expr) => {{
        let clients = $clients;
        let mut errors = 0u64;
        while !clients.done() {
            match race(($sleep)(load::TICK), $accept).await {
                Won::Sleep(_) => continue,
                Won::Io(Ok(($s, _))) => {
                    $answer;
                }
                Won::Io(Err(_)) => errors += 1,
            }
        }
        let mut c = clients.join();
        if errors > 0 {
            c.add_note(format!("{errors} accept errors"));
        }
        c
    }};
}

/// The read scenario's loop: `$read` (a read of `$buf`, an owned `Vec<u8>`) raced against
/// `$sleep(TICK)` until the end of the stream; gives the verifier and a note.
macro_rules! read_loop {
    ($sleep:expr, |$buf:ident| $read:expr) => {{
        let mut v = load::Verifier::default();
        let mut spare: Option<Vec<u8>> = None;
        let mut note = None;
        loop {
            let $buf = spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(load::CHUNK));
            match race(($sleep)(load::TICK), $read).await {
                Won::Sleep(_) => continue,
                Won::Io(r) => match r.pair() {
                    (Ok(0), _) => break,
                    (Ok(_), b) => {
                        v.feed(&b);
                        spare = Some(b);
                    }
                    (Err(e), b) if load::retryable(&e) => spare = Some(b),
                    (Err(e), _) => {
                        note = Some(format!("read failed: {e}"));
                        break;
                    }
                },
            }
        }
        (v, note)
    }};
}

/// The datagram scenarios' loop: `$recv` (a receive into `$buf`) raced against `$sleep(TICK)`
/// until the sender is done, then against `$sleep(DRAIN)` until nothing more comes.
macro_rules! recv_loop {
    ($sleep:expr, $sender:expr, $n:expr, |$buf:ident| $recv:expr) => {{
        let sender = $sender;
        let mut seen = dgram::Seen::new($n);
        let mut errors = 0u64;
        let mut spare: Option<Vec<u8>> = None;
        loop {
            let done = sender.done();
            let $buf = spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(load::CHUNK));
            let tick = if done { load::DRAIN } else { load::TICK };
            match race(($sleep)(tick), $recv).await {
                Won::Sleep(_) if done => break,
                Won::Sleep(_) => {}
                Won::Io(r) => {
                    let (res, b) = r.pair();
                    match res {
                        Ok(_) => seen.record(&b),
                        Err(e) if load::retryable(&e) => {}
                        Err(_) => errors += 1,
                    }
                    spare = Some(b);
                }
            }
        }
        dgram::finish_datagrams(sender, &seen, errors)
    }};
}

/// stream_drop_after_write: `$s.streams` TCP streams made by `$connect` (a future of
/// `io::Result<stream>` for the reader's address `$addr`), each written with `$write` (of the
/// stream `$st` and the owned bytes `$data`, giving an `io::Result<()>`) and dropped.
macro_rules! streams_loop {
    ($s:expr, $reader:expr, |$addr:ident| $connect:expr, |$st:ident, $data:ident| $write:expr) => {{
        let (reader_addr, reader) = $reader;
        let bytes = load::file_data($s.stream_bytes);
        let (mut made, mut sent, mut err) = (0u64, 0u64, None);
        for _ in 0..$s.streams {
            let $addr = reader_addr;
            #[allow(unused_mut)]
            let mut $st = match $connect.await {
                Ok(st) => st,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            };
            made += 1;
            let $data = bytes.clone();
            if let Err(e) = $write {
                err = Some(e);
                break;
            }
            sent += $s.stream_bytes;
            drop($st);
        }
        (reader, made, sent, err)
    }};
}

/// `hoop-peer cancel`.
pub(crate) fn run(f: &Flags) -> io::Result<()> {
    let runtime = f.get("runtime").ok_or_else(|| {
        invalid(format!(
            "--runtime is required ({})",
            CANCEL_RUNTIMES.join(", ")
        ))
    })?;
    if !CANCEL_RUNTIMES.contains(&runtime) {
        return Err(invalid(format!(
            "unknown runtime {runtime:?} (known: {})",
            CANCEL_RUNTIMES.join(", ")
        )));
    }
    let scenario = f.get("scenario").unwrap_or("");
    if !load::SCENARIOS.iter().any(|(s, _)| *s == scenario) {
        return Err(invalid(format!(
            "unknown or missing --scenario {scenario:?}"
        )));
    }
    let sizes = Sizes {
        clients: f.num("clients", 2000)?,
        bytes: f.num("bytes", 20 << 20)?,
        datagrams: f.num("datagrams", 20_000)?,
        files: f.num("files", 200)?,
        file_bytes: f.num("file-bytes", 300_000)?,
        dir: f.get("dir").map_or_else(std::env::temp_dir, Into::into),
        streams: f.num("streams", 200)?,
        stream_bytes: f.num("stream-bytes", 300_000)?,
    };
    let head = format!(
        "{{\"runtime\":{},\"scenario\":{}",
        json_str(runtime),
        json_str(scenario)
    );
    let note = |n: &Option<String>| n.as_deref().map_or("null".into(), json_str);
    match scenario_on(runtime, scenario, &sizes)? {
        Some(c) => println!(
            "{head},\"supported\":true,\"sent\":{},\"received\":{},\"lost\":{},\"note\":{}}}",
            c.sent,
            c.received,
            c.lost(),
            note(&c.note)
        ),
        None => println!(
            "{head},\"supported\":false,\"sent\":null,\"received\":null,\"lost\":null,\"note\":{}}}",
            json_str(&format!(
                "{runtime} has no Unix datagram socket (only UnixStream and UnixListener)"
            ))
        ),
    }
    Ok(())
}

/// The counts, or `None` where the runtime has no such call.
fn scenario_on(runtime: &str, scenario: &str, s: &Sizes) -> io::Result<Option<Counts>> {
    match (runtime, scenario) {
        ("compio" | "tokio-uring", "unix_recv") => Ok(None),
        ("monoio", _) => monoio_run(scenario, s).map(Some),
        ("compio", _) => compio_run(scenario, s).map(Some),
        _ => tokio_uring_run(scenario, s).map(Some),
    }
}

fn monoio_run(scenario: &str, s: &Sizes) -> io::Result<Counts> {
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
        .map_err(|e| io::Error::new(e.kind(), format!("monoio's io_uring runtime: {e}")))?;
    let sleep = monoio::time::sleep;
    if scenario == "stream_drop_after_write" {
        let reader = sink::stream_reader(s.stream_bytes)?;
        let (reader, made, sent, err) = rt.block_on(async {
            streams_loop!(
                s,
                reader,
                |addr| monoio::net::TcpStream::connect(addr),
                |st, data| st.write_all(data).await.0.map(drop)
            )
        });
        drop(rt);
        return Ok(sink::stream_counts(reader, made, sent, err));
    }
    match scenario {
        "accept" => {
            let (std_l, addr) = load::listener()?;
            rt.block_on(async {
                let l = monoio::net::TcpListener::from_std(std_l)?;
                Ok(accept_loop!(
                    sleep,
                    load::accept_clients(addr, s.clients),
                    l.accept(),
                    |stream| {
                        let mut stream = stream;
                        let _ = stream.write_all(vec![1u8]).await;
                    }
                ))
            })
        }
        "read" => {
            let (std_s, writer) = load::tcp_writer(s.bytes)?;
            let (v, note) = rt.block_on(async {
                let mut stream = monoio::net::TcpStream::from_std(std_s)?;
                Ok::<_, io::Error>(read_loop!(sleep, |buf| stream.read(buf)))
            })?;
            drop(rt);
            Ok(v.counts(writer.join().unwrap_or(0), note))
        }
        "udp_recv_from" => {
            let (rx, tx) = dgram::udp_pair()?;
            let fd = rx.as_raw_fd();
            rt.block_on(async {
                let sock = monoio::net::udp::UdpSocket::from_std(rx)?;
                let sender = dgram::datagrams(s.datagrams, fd, move |b| tx.send(b));
                Ok(recv_loop!(sleep, sender, s.datagrams, |buf| sock.recv_from(buf)))
            })
        }
        "unix_recv" => {
            let (rx, tx) = dgram::unix_pair()?;
            let fd = rx.as_raw_fd();
            rt.block_on(async {
                let sock = monoio::net::unix::UnixDatagram::from_std(rx)?;
                let sender = dgram::datagrams(s.datagrams, fd, move |b| tx.send(b));
                Ok(recv_loop!(sleep, sender, s.datagrams, |buf| sock.recv(buf)))
            })
        }
        _ => {
            let dir = sink::files_dir(&s.dir, "monoio")?;
            let data = load::file_data(s.file_bytes);
            let (sent, err) = rt.block_on(async {
                let mut sent = 0u64;
                for i in 0..s.files {
                    let f = match monoio::fs::File::create(sink::file_path(&dir, i)).await {
                        Ok(f) => f,
                        Err(e) => return (sent, Some(e)),
                    };
                    if let (Err(e), _) = f.write_all_at(data.clone(), 0).await {
                        return (sent, Some(e));
                    }
                    sent += s.file_bytes;
                    drop(f);
                }
                (sent, None)
            });
            drop(rt);
            Ok(sink::file_counts(&dir, sent, err, s.file_bytes))
        }
    }
}

fn compio_run(scenario: &str, s: &Sizes) -> io::Result<Counts> {
    use compio::io::{AsyncRead, AsyncWriteAtExt, AsyncWriteExt};
    let rt = compio::runtime::Runtime::new()
        .map_err(|e| io::Error::new(e.kind(), format!("compio's runtime: {e}")))?;
    let sleep = compio::time::sleep;
    if scenario == "stream_drop_after_write" {
        let reader = sink::stream_reader(s.stream_bytes)?;
        let (reader, made, sent, err) = rt.block_on(async {
            streams_loop!(
                s,
                reader,
                |addr| compio::net::TcpStream::connect(addr),
                |st, data| st.write_all(data).await.0
            )
        });
        drop(rt);
        return Ok(sink::stream_counts(reader, made, sent, err));
    }
    match scenario {
        "accept" => {
            let (std_l, addr) = load::listener()?;
            rt.block_on(async {
                let l = compio::net::TcpListener::from_std(std_l)?;
                Ok(accept_loop!(
                    sleep,
                    load::accept_clients(addr, s.clients),
                    l.accept(),
                    |stream| {
                        let mut stream = stream;
                        let _ = stream.write_all(vec![1u8]).await;
                    }
                ))
            })
        }
        "read" => {
            let (std_s, writer) = load::tcp_writer(s.bytes)?;
            let (v, note) = rt.block_on(async {
                let mut stream = compio::net::TcpStream::from_std(std_s)?;
                Ok::<_, io::Error>(read_loop!(sleep, |buf| stream.read(buf)))
            })?;
            drop(rt);
            Ok(v.counts(writer.join().unwrap_or(0), note))
        }
        "udp_recv_from" => {
            let (rx, tx) = dgram::udp_pair()?;
            let fd = rx.as_raw_fd();
            rt.block_on(async {
                let sock = compio::net::UdpSocket::from_std(rx)?;
                let sender = dgram::datagrams(s.datagrams, fd, move |b| tx.send(b));
                Ok(recv_loop!(sleep, sender, s.datagrams, |buf| sock.recv_from(buf)))
            })
        }
        _ => {
            let dir = sink::files_dir(&s.dir, "compio")?;
            let data = load::file_data(s.file_bytes);
            let (sent, err) = rt.block_on(async {
                let mut sent = 0u64;
                for i in 0..s.files {
                    let mut f = match compio::fs::File::create(sink::file_path(&dir, i)).await {
                        Ok(f) => f,
                        Err(e) => return (sent, Some(e)),
                    };
                    if let compio::BufResult(Err(e), _) = f.write_all_at(data.clone(), 0).await {
                        return (sent, Some(e));
                    }
                    sent += s.file_bytes;
                    drop(f);
                }
                (sent, None)
            });
            drop(rt);
            Ok(sink::file_counts(&dir, sent, err, s.file_bytes))
        }
    }
}

fn tokio_uring_run(scenario: &str, s: &Sizes) -> io::Result<Counts> {
    let rt = tokio_uring::Runtime::new(&tokio_uring::builder())
        .map_err(|e| io::Error::new(e.kind(), format!("tokio-uring's runtime: {e}")))?;
    let sleep = |d: Duration| tokio::time::sleep(d);
    if scenario == "stream_drop_after_write" {
        let reader = sink::stream_reader(s.stream_bytes)?;
        let (reader, made, sent, err) = rt.block_on(async {
            streams_loop!(
                s,
                reader,
                |addr| tokio_uring::net::TcpStream::connect(addr),
                |st, data| st.write_all(data).await.0
            )
        });
        drop(rt);
        return Ok(sink::stream_counts(reader, made, sent, err));
    }
    match scenario {
        "accept" => {
            let (std_l, addr) = load::listener()?;
            rt.block_on(async {
                let l = tokio_uring::net::TcpListener::from_std(std_l);
                Ok(accept_loop!(
                    sleep,
                    load::accept_clients(addr, s.clients),
                    l.accept(),
                    |stream| {
                        let _ = stream.write_all(vec![1u8]).await;
                    }
                ))
            })
        }
        "read" => {
            let (std_s, writer) = load::tcp_writer(s.bytes)?;
            let (v, note) = rt.block_on(async {
                let stream = tokio_uring::net::TcpStream::from_std(std_s);
                read_loop!(sleep, |buf| stream.read(buf))
            });
            drop(rt);
            Ok(v.counts(writer.join().unwrap_or(0), note))
        }
        "udp_recv_from" => {
            let (rx, tx) = dgram::udp_pair()?;
            let fd = rx.as_raw_fd();
            rt.block_on(async {
                let sock = tokio_uring::net::UdpSocket::from_std(rx);
                let sender = dgram::datagrams(s.datagrams, fd, move |b| tx.send(b));
                Ok(recv_loop!(sleep, sender, s.datagrams, |buf| sock.recv_from(buf)))
            })
        }
        _ => {
            let dir = sink::files_dir(&s.dir, "tokio-uring")?;
            let data = load::file_data(s.file_bytes);
            let (sent, err) = rt.block_on(async {
                let mut sent = 0u64;
                for i in 0..s.files {
                    let f = match tokio_uring::fs::File::create(sink::file_path(&dir, i)).await {
                        Ok(f) => f,
                        Err(e) => return (sent, Some(e)),
                    };
                    if let (Err(e), _) = f.write_all_at(data.clone(), 0).await {
                        return (sent, Some(e));
                    }
                    sent += s.file_bytes;
                    drop(f);
                }
                (sent, None)
            });
            drop(rt);
            Ok(sink::file_counts(&dir, sent, err, s.file_bytes))
        }
    }
}
