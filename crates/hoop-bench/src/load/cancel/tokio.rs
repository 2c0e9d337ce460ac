//! The scenarios on tokio (a current-thread runtime), the reference: the same loops as
//! [`crate::load::cancel::hoop`] with `tokio::select!`, `AsyncReadExt::read` into a borrowed buffer,
//! `recv_from`/`recv`, and `tokio::fs::File` and `TcpStream` with `AsyncWriteExt::write_all`,
//! dropped unflushed.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

use crate::load::cancel::dgram;
use crate::load::cancel::load::{self, Counts, Sizes, CHUNK, DRAIN, TICK};
use crate::load::cancel::sink;

/// Runs `scenario` on a current-thread tokio runtime.
pub(crate) fn run(scenario: &str, sizes: &Sizes) -> Result<Counts, String> {
    let build = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio's runtime: {e}"))
    };
    let r = match scenario {
        "accept" => accept(build()?, sizes.clients),
        "read" => read(build()?, sizes.bytes),
        "udp_recv_from" => udp(build()?, sizes.datagrams),
        "unix_recv" => unix(build()?, sizes.datagrams),
        "drop_after_write" => files(build()?, sizes),
        "stream_drop_after_write" => streams(build()?, sizes),
        other => return Err(format!("no scenario {other:?}")),
    };
    r.map_err(|e| e.to_string())
}

fn accept(rt: Runtime, clients: u64) -> io::Result<Counts> {
    let (std_listener, addr) = load::listener()?;
    let c = rt.block_on(async {
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let clients = load::accept_clients(addr, clients);
        let mut errors = 0u64;
        while !clients.done() {
            tokio::select! {
                biased;
                _ = tokio::time::sleep(TICK) => continue,
                res = listener.accept() => match res {
                    Ok((mut stream, _)) => {
                        let _ = stream.write_all(&[1u8]).await;
                    }
                    Err(_) => errors += 1,
                },
            }
        }
        let mut c = clients.join();
        if errors > 0 {
            c.add_note(format!("{errors} accept errors"));
        }
        Ok::<_, io::Error>(c)
    })?;
    drop(rt);
    Ok(c)
}

fn read(rt: Runtime, bytes: u64) -> io::Result<Counts> {
    let (std_stream, writer) = load::tcp_writer(bytes)?;
    let (v, note) = rt.block_on(async {
        let mut stream = tokio::net::TcpStream::from_std(std_stream)?;
        let mut v = load::Verifier::default();
        let mut buf = vec![0u8; CHUNK];
        loop {
            tokio::select! {
                biased;
                _ = tokio::time::sleep(TICK) => continue,
                res = stream.read(&mut buf) => match res {
                    Ok(0) => return Ok::<_, io::Error>((v, None)),
                    Ok(n) => v.feed(&buf[..n]),
                    Err(e) if load::retryable(&e) => {}
                    Err(e) => return Ok((v, Some(format!("read failed: {e}")))),
                },
            }
        }
    })?;
    drop(rt);
    Ok(v.counts(writer.join().unwrap_or(0), note))
}

fn udp(rt: Runtime, datagrams: u64) -> io::Result<Counts> {
    let (rx, tx) = dgram::udp_pair()?;
    datagram_scenario(
        rt,
        datagrams,
        rx,
        tokio::net::UdpSocket::from_std,
        move |b| tx.send(b),
    )
}

fn unix(rt: Runtime, datagrams: u64) -> io::Result<Counts> {
    let (rx, tx) = dgram::unix_pair()?;
    datagram_scenario(
        rt,
        datagrams,
        rx,
        tokio::net::UnixDatagram::from_std,
        move |b| tx.send(b),
    )
}

/// The receive call a datagram scenario races against the timer: `recv_from` for UDP, `recv`
/// for a Unix datagram socket.
trait Receive {
    /// One receive into `buf`: the datagram's length.
    async fn receive(&self, buf: &mut [u8]) -> io::Result<usize>;
}

impl Receive for tokio::net::UdpSocket {
    async fn receive(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv_from(buf).await.map(|(n, _)| n)
    }
}

impl Receive for tokio::net::UnixDatagram {
    async fn receive(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf).await
    }
}

/// A datagram scenario: the std socket `rx` taken over by the runtime (`adopt`), `datagrams`
/// numbered datagrams sent to it through `send` from a std thread, each receive call raced
/// against the timer until the sender is done and the timer finds nothing more to drain.
fn datagram_scenario<R, S>(
    rt: Runtime,
    datagrams: u64,
    rx: R,
    adopt: impl FnOnce(R) -> io::Result<S>,
    send: impl FnMut(&[u8]) -> io::Result<usize> + Send + 'static,
) -> io::Result<Counts>
where
    R: std::os::fd::AsRawFd,
    S: Receive,
{
    let fd = rx.as_raw_fd();
    let (seen, errors, sender) = rt.block_on(async {
        let sock = adopt(rx)?;
        let sender = dgram::datagrams(datagrams, fd, send);
        let mut seen = dgram::Seen::new(datagrams);
        let mut errors = 0u64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let done = sender.done();
            tokio::select! {
                biased;
                _ = tokio::time::sleep(if done { DRAIN } else { TICK }) => {
                    if done {
                        break;
                    }
                }
                res = sock.receive(&mut buf) => match res {
                    Ok(n) => seen.record(&buf[..n]),
                    Err(e) if load::retryable(&e) => {}
                    Err(_) => errors += 1,
                },
            }
        }
        Ok::<_, io::Error>((seen, errors, sender))
    })?;
    let c = dgram::finish_datagrams(sender, &seen, errors);
    drop(rt);
    Ok(c)
}

fn files(rt: Runtime, sizes: &Sizes) -> io::Result<Counts> {
    let dir = sink::files_dir(&sizes.dir, "tokio")?;
    let data = load::file_data(sizes.file_bytes);
    let (sent, err) = rt.block_on(async {
        let mut sent = 0u64;
        for i in 0..sizes.files {
            let mut f = match tokio::fs::File::create(sink::file_path(&dir, i)).await {
                Ok(f) => f,
                Err(e) => return (sent, Some(e)),
            };
            if let Err(e) = f.write_all(&data).await {
                return (sent, Some(e));
            }
            sent += sizes.file_bytes;
            // Dropped as a program would drop it: no flush.
            drop(f);
        }
        (sent, None)
    });
    // As at the end of `main`: tokio's drop waits for the blocking pool's writes.
    drop(rt);
    Ok(sink::file_counts(&dir, sent, err, sizes.file_bytes))
}

fn streams(rt: Runtime, sizes: &Sizes) -> io::Result<Counts> {
    let (addr, reader) = sink::stream_reader(sizes.stream_bytes)?;
    let data = load::file_data(sizes.stream_bytes);
    let (made, sent, err) = rt.block_on(async {
        let (mut made, mut sent) = (0u64, 0u64);
        for _ in 0..sizes.streams {
            let mut s = match tokio::net::TcpStream::connect(addr).await {
                Ok(s) => s,
                Err(e) => return (made, sent, Some(e)),
            };
            made += 1;
            if let Err(e) = s.write_all(&data).await {
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
