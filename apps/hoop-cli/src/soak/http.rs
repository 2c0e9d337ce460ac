//! The HTTP load: `hoop serve http` on each driver as a child process (its fds and RSS are
//! sampled through /proc), a root of files with known contents, and client threads that fetch
//! them on kept-alive connections, half-close, reset mid-body and read slowly, checking status,
//! length and every body byte.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hoop::DriverKind;

use super::tally::{connect, linger_zero, Client, Rng, Tally};
use hoop_bench::target::child::{Ready, ServerChild};

/// Files in the root: sizes from empty to past the server's splice threshold.
const FILES: usize = 12;

/// The served files: names and contents.
pub(crate) struct Root {
    pub dir: PathBuf,
    pub files: Vec<(String, Vec<u8>)>,
}

impl Root {
    pub(crate) fn create(dir: &Path, seed: u64) -> io::Result<Root> {
        std::fs::create_dir_all(dir)?;
        let mut rng = Rng::seeded(seed, 77);
        let mut files = Vec::new();
        for i in 0..FILES {
            let len = match i {
                0 => 0,
                1 => 1,
                _ => rng.below(if i % 3 == 0 { 1 << 20 } else { 64 << 10 }) as usize,
            };
            let name = format!("f{i}.bin");
            let data = rng.bytes(len);
            std::fs::write(dir.join(&name), &data)?;
            files.push((name, data));
        }
        Ok(Root {
            dir: dir.to_path_buf(),
            files,
        })
    }
}

/// Starts `hoop serve http` (this binary) on `driver` over `root`.
pub(crate) fn start(driver: DriverKind, root: &Path) -> io::Result<ServerChild> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "http", "--addr", "127.0.0.1:0", "--threads", "1"])
        .arg("--root")
        .arg(root)
        .args(["--driver", &driver.to_string()]);
    ServerChild::spawn_cmd(&format!("http-{driver}"), cmd, None, Ready::ListeningLine)
}

/// One client thread until `until`.
pub(crate) fn client(addr: SocketAddr, root: &Root, mut rng: Rng, c: Client<'_>) {
    let tally = c.tally;
    c.drive(|conn| {
        let (file, body) = &root.files[rng.below(root.files.len() as u64) as usize];
        let action = rng.below(100);
        let res = if action < 70 {
            let s = match conn.take() {
                Some(s) => Ok(s),
                None => connect(addr),
            };
            s.and_then(|s| {
                let r = get(&s, file, body, tally, Duration::ZERO);
                if matches!(r, Ok(true)) {
                    *conn = Some(s);
                }
                r
            })
        } else if action < 80 {
            // Half-close after the request: the response must still come whole.
            Tally::add(&tally.half_closes, 1);
            connect(addr).and_then(|s| {
                (&s).write_all(request(file).as_bytes())?;
                s.shutdown(Shutdown::Write)?;
                read_response(&s, body, tally, Duration::ZERO)
            })
        } else if action < 90 {
            // Reset after the head of the response.
            Tally::add(&tally.resets, 1);
            connect(addr).and_then(|s| {
                (&s).write_all(request(file).as_bytes())?;
                let mut head = [0u8; 64];
                let _ = (&s).read(&mut head)?;
                linger_zero(&s);
                Ok(true)
            })
        } else {
            Tally::add(&tally.slow_reads, 1);
            connect(addr).and_then(|s| get(&s, file, body, tally, Duration::from_millis(1)))
        };
        Some((res, format!("{}: /{file}", c.name)))
    });
}

/// Fetches every file once on one connection (checked like any other response).
/// (Under injected faults a request may fail: each file gets up to 10 tries, on a fresh
/// connection after a failure; a wrong byte fails at once.)
pub(crate) fn warm_up(addr: SocketAddr, root: &Root, tally: &Tally) -> io::Result<()> {
    let mut conn: Option<TcpStream> = None;
    for (file, body) in &root.files {
        let mut tries = 0;
        loop {
            let s = match conn.take() {
                Some(s) => s,
                None => connect(addr)?,
            };
            match get(&s, file, body, tally, Duration::ZERO) {
                Ok(keep) => {
                    if keep {
                        conn = Some(s);
                    }
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData || tries >= 10 => return Err(e),
                Err(_) => tries += 1,
            }
        }
    }
    Ok(())
}

fn request(file: &str) -> String {
    format!("GET /{file} HTTP/1.1\r\nHost: soak\r\n\r\n")
}

/// One GET on `s`; `Ok(true)` when the connection may be kept.
fn get(s: &TcpStream, file: &str, body: &[u8], tally: &Tally, pause: Duration) -> io::Result<bool> {
    (&*s).write_all(request(file).as_bytes())?;
    read_response(s, body, tally, pause)
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads one response and checks it: 200, `Content-Length` equal to the file's size, the body
/// equal to the file. An EOF before the head is a cut connection (counted by the caller).
fn read_response(
    mut s: &TcpStream,
    body: &[u8],
    tally: &Tally,
    pause: Duration,
) -> io::Result<bool> {
    let mut head = Vec::with_capacity(512);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the head",
            ));
        }
        head.push(byte[0]);
        if head.len() > 8192 {
            return Err(bad("response head over 8 KiB".into()));
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("");
    if !status.starts_with("HTTP/1.1 200 ") {
        // Under injected faults the server may fail an open or a read it made (a 5xx, then
        // it closes): counted as an error met, not a failure. Without faults, any other
        // status is a failure.
        if hoop::fault::enabled() && status.starts_with("HTTP/1.1 5") {
            return Err(io::Error::other(format!("{status} under injected faults")));
        }
        return Err(bad(format!("expected 200, got {status:?}")));
    }
    let mut len = None;
    let mut close = false;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse::<usize>().ok();
            }
            if k.eq_ignore_ascii_case("connection") && v.trim().eq_ignore_ascii_case("close") {
                close = true;
            }
        }
    }
    if len != Some(body.len()) {
        return Err(bad(format!(
            "Content-Length {len:?}, file has {}",
            body.len()
        )));
    }
    let mut got = 0;
    let mut buf = vec![0u8; if pause.is_zero() { 64 * 1024 } else { 4096 }];
    while got < body.len() {
        let room = (body.len() - got).min(buf.len());
        let n = s.read(&mut buf[..room])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "body cut"));
        }
        if buf[..n] != body[got..got + n] {
            return Err(bad(format!(
                "wrong body byte between {got} and {}",
                got + n
            )));
        }
        got += n;
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    Tally::add(&tally.bytes_verified, got as u64);
    Ok(!close)
}
