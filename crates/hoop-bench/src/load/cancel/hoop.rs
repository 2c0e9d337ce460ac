//! The scenarios on hoop (`hoop` on io_uring, `hoop-epoll` on epoll), written the tokio way:
//! each I/O raced in `hoop::select!` against a 50 µs sleep, the I/O future dropped when the
//! sleep wins; files and TCP streams written with tokio's `AsyncWriteExt::write_all` and
//! dropped unflushed.

use std::io;

use hoop::{DriverKind, Runtime};

use crate::load::cancel::dgram;
use crate::load::cancel::load::{self, Counts, Sizes, CHUNK, DRAIN, TICK};
use crate::load::cancel::sink;

/// Runs `scenario` on a hoop runtime of driver `kind`, named `runtime` (for the files' dir).
pub(crate) fn run(
    kind: DriverKind,
    runtime: &str,
    scenario: &str,
    sizes: &Sizes,
) -> Result<Counts, String> {
    // A ring's setup refused once (injected faults, a passing shortage of locked memory) is
    // tried again; a refusal that stays is the scenario's failure.
    let build = || {
        let mut last = None;
        for _ in 0..3 {
            match Runtime::builder().driver(kind).build() {
                Ok(rt) => return Ok(rt),
                Err(e) => last = Some(e),
            }
        }
        Err(format!(
            "hoop's runtime ({kind}): {}",
            last.map_or_else(String::new, |e| e.to_string())
        ))
    };
    let r = match scenario {
        "accept" => accept(build()?, sizes.clients),
        "read" => read(build()?, sizes.bytes),
        "udp_recv_from" => udp(build()?, sizes.datagrams),
        "unix_recv" => unix(build()?, sizes.datagrams),
        "drop_after_write" => files(build()?, runtime, sizes),
        "stream_drop_after_write" => streams(build()?, sizes),
        other => return Err(format!("no scenario {other:?}")),
    };
    r.map_err(|e| e.to_string())
}

fn accept(rt: Runtime, clients: u64) -> io::Result<Counts> {
    let (std_listener, addr) = load::listener()?;
    let c = rt.block_on(async {
        let listener = hoop::net::TcpListener::from_std(std_listener);
        let clients = load::accept_clients(addr, clients);
        let mut errors = 0u64;
        while !clients.done() {
            hoop::select! {
                biased;
                _ = hoop::time::sleep(TICK) => continue,
                res = listener.accept() => match res {
                    Ok((stream, _)) => {
                        let _ = stream.write_all(vec![1u8]).await;
                    }
                    Err(_) => errors += 1,
                },
            }
        }
        let mut c = clients.join();
        if errors > 0 {
            c.add_note(format!("{errors} accept errors"));
        }
        c
    });
    drop(rt);
    Ok(c)
}

fn read(rt: Runtime, bytes: u64) -> io::Result<Counts> {
    let (std_stream, writer) = load::tcp_writer(bytes)?;
    let (v, note) = rt.block_on(async {
        let stream = hoop::net::TcpStream::from_std(std_stream);
        let mut v = load::Verifier::default();
        let mut spare: Option<Vec<u8>> = None;
        loop {
            let buf = spare.take().unwrap_or_else(|| Vec::with_capacity(CHUNK));
            hoop::select! {
                biased;
                _ = hoop::time::sleep(TICK) => continue,
                (res, buf) = stream.read(buf) => match res {
                    Ok(0) => return (v, None),
                    Ok(_) => {
                        v.feed(&buf);
                        spare = Some(buf);
                    }
                    Err(e) if load::retryable(&e) => spare = Some(buf),
                    Err(e) => return (v, Some(format!("read failed: {e}"))),
                },
            }
        }
    });
    // The runtime closes the stream, so a writer still blocked on it returns.
    drop(rt);
    Ok(v.counts(writer.join().unwrap_or(0), note))
}

fn udp(rt: Runtime, datagrams: u64) -> io::Result<Counts> {
    let (rx, tx) = dgram::udp_pair()?;
    datagram_scenario(
        rt,
        datagrams,
        rx,
        hoop::net::UdpSocket::from_std,
        move |b| tx.send(b),
    )
}

fn unix(rt: Runtime, datagrams: u64) -> io::Result<Counts> {
    let (rx, tx) = dgram::unix_pair()?;
    datagram_scenario(
        rt,
        datagrams,
        rx,
        hoop::net::UnixDatagram::from_std,
        move |b| tx.send(b),
    )
}

/// The receive call a datagram scenario races against the timer: `recv_from` for UDP, `recv`
/// for a Unix datagram socket.
trait Receive {
    /// One receive into `buf`, handed back with the result.
    async fn receive(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>);
}

impl Receive for hoop::net::UdpSocket {
    async fn receive(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let (res, buf) = self.recv_from(buf).await;
        (res.map(drop), buf)
    }
}

impl Receive for hoop::net::UnixDatagram {
    async fn receive(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let (res, buf) = self.recv(buf).await;
        (res.map(drop), buf)
    }
}

/// A datagram scenario: the std socket `rx` taken over by the runtime (`adopt`), `datagrams`
/// numbered datagrams sent to it through `send` from a std thread, each receive call raced
/// against the timer until the sender is done and the timer finds nothing more to drain.
fn datagram_scenario<R, S>(
    rt: Runtime,
    datagrams: u64,
    rx: R,
    adopt: impl FnOnce(R) -> S,
    send: impl FnMut(&[u8]) -> io::Result<usize> + Send + 'static,
) -> io::Result<Counts>
where
    R: std::os::fd::AsRawFd,
    S: Receive,
{
    let fd = rx.as_raw_fd();
    let (seen, errors, sender) = rt.block_on(async {
        let sock = adopt(rx);
        let sender = dgram::datagrams(datagrams, fd, send);
        let mut seen = dgram::Seen::new(datagrams);
        let mut errors = 0u64;
        let mut spare: Option<Vec<u8>> = None;
        loop {
            let done = sender.done();
            let buf = spare.take().unwrap_or_else(|| Vec::with_capacity(CHUNK));
            hoop::select! {
                biased;
                _ = hoop::time::sleep(if done { DRAIN } else { TICK }) => {
                    if done {
                        break;
                    }
                }
                (res, buf) = sock.receive(buf) => {
                    match res {
                        Ok(()) => seen.record(&buf),
                        Err(e) if load::retryable(&e) => {}
                        Err(_) => errors += 1,
                    }
                    spare = Some(buf);
                }
            }
        }
        (seen, errors, sender)
    });
    let c = dgram::finish_datagrams(sender, &seen, errors);
    drop(rt);
    Ok(c)
}

fn files(rt: Runtime, runtime: &str, sizes: &Sizes) -> io::Result<Counts> {
    use tokio::io::AsyncWriteExt;
    let dir = sink::files_dir(&sizes.dir, runtime)?;
    let data = load::file_data(sizes.file_bytes);
    let (sent, err) = rt.block_on(async {
        let mut sent = 0u64;
        for i in 0..sizes.files {
            let mut f = match hoop::fs::File::create(sink::file_path(&dir, i)).await {
                Ok(f) => f,
                Err(e) => return (sent, Some(e)),
            };
            if let Err(e) = AsyncWriteExt::write_all(&mut f, &data).await {
                return (sent, Some(e));
            }
            sent += sizes.file_bytes;
            // Dropped as a program would drop it: no flush, no close.
            drop(f);
        }
        (sent, None)
    });
    // As at the end of `main`.
    drop(rt);
    Ok(sink::file_counts(&dir, sent, err, sizes.file_bytes))
}

fn streams(rt: Runtime, sizes: &Sizes) -> io::Result<Counts> {
    use tokio::io::AsyncWriteExt;
    let (addr, reader) = sink::stream_reader(sizes.stream_bytes)?;
    let data = load::file_data(sizes.stream_bytes);
    let (made, sent, err) = rt.block_on(async {
        let (mut made, mut sent) = (0u64, 0u64);
        for _ in 0..sizes.streams {
            let mut s = match hoop::net::TcpStream::connect(addr).await {
                Ok(s) => s,
                Err(e) => return (made, sent, Some(e)),
            };
            made += 1;
            if let Err(e) = AsyncWriteExt::write_all(&mut s, &data).await {
                return (made, sent, Some(e));
            }
            sent += sizes.stream_bytes;
            // Dropped as a program would drop it: no flush, no shutdown.
            drop(s);
        }
        (made, sent, None)
    });
    drop(rt);
    Ok(sink::stream_counts(reader, made, sent, err))
}
