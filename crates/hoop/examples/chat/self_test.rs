//! `--self-test CLIENTS LINES`: the server in this process and its clients on another thread,
//! every line checked on every client, an idle client cut, and the goodbye at SIGTERM.

use std::cell::Cell;
use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::server::*;
use hoop::net::tcp::OwnedReadHalf;
use hoop::net::{ReuseportGroup, TcpStream};
use hoop::sync::CancellationToken;
use hoop::StaticBuf;

/// Reads lines from `rd` until end of stream (or the deadline passes between reads); once
/// `wanted` lines starting with `c` arrived, adds one to `done`. Returns every line.
pub(crate) async fn read_all_lines(
    rd: OwnedReadHalf,
    deadline: Duration,
    wanted: usize,
    done: Rc<Cell<usize>>,
) -> io::Result<Vec<String>> {
    let mut data = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut chat_lines = 0;
    let mut counted = false;
    loop {
        let (res, b) = rd.read_timeout(buf, deadline).await;
        buf = b;
        if res? == 0 {
            break;
        }
        for (i, &c) in buf.iter().enumerate() {
            let starts_line = if i == 0 {
                data.last().is_none_or(|&last| last == b'\n')
            } else {
                buf[i - 1] == b'\n'
            };
            if c == b'c' && starts_line {
                chat_lines += 1;
            }
        }
        data.extend_from_slice(&buf);
        if !counted && chat_lines >= wanted {
            counted = true;
            done.set(done.get() + 1);
        }
    }
    Ok(String::from_utf8_lossy(&data)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// A connection that read its `welcome` (so the server subscribed it to the chat).
pub(crate) async fn connect_welcomed(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    let (res, buf) = s
        .read_exact_timeout(vec![0u8; 8], Duration::from_secs(10))
        .await;
    res?;
    if &buf[..] != b"welcome\n" {
        return Err(io::Error::other("no welcome"));
    }
    Ok(s)
}

/// What the self-test's clients saw.
struct Seen {
    verified: usize,
    wanted: usize,
    byes: usize,
    idle_cut: bool,
}

/// The self-test's clients, on their own runtime: every line to everyone, the idle cut, then
/// SIGTERM and the byes.
async fn clients(
    addr: SocketAddr,
    clients: usize,
    lines: usize,
    idle: Duration,
) -> io::Result<Seen> {
    // The silent client first: the idle timeout must cut it.
    let silent = connect_welcomed(addr).await?;
    let (silent_rd, _silent_wr) = silent.into_split();
    let silent_lines = hoop::spawn(read_all_lines(silent_rd, idle * 4, 0, Rc::default()));

    // Everyone connected and welcomed (so subscribed) before anyone speaks.
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(connect_welcomed(addr).await?.into_split());
    }
    let stop = CancellationToken::new();
    let wanted_each = clients * lines;
    let done: Rc<Cell<usize>> = Rc::default();
    let mut readers = Vec::new();
    let mut writers = Vec::new();
    for (id, (rd, wr)) in conns.into_iter().enumerate() {
        readers.push(hoop::spawn(read_all_lines(
            rd,
            Duration::from_secs(30),
            wanted_each,
            done.clone(),
        )));
        let stop = stop.clone();
        writers.push(hoop::spawn(async move {
            for n in 0..lines {
                let (res, _) = wr.write_all(format!("c{id} l{n}\n").into_bytes()).await;
                res?;
            }
            // Keep the connection alive under the idle timeout until the test ends.
            loop {
                hoop::select! {
                    _ = stop.cancelled() => break,
                    _ = hoop::time::sleep(idle / 4) => {
                        let (res, _) = wr.write_all(StaticBuf(b"/ping\n")).await;
                        res?;
                    }
                }
            }
            Ok::<_, io::Error>(wr)
        }));
    }
    let idle_cut = {
        let got = silent_lines.await.map_err(io::Error::other)??;
        got.iter().any(|l| l == "idle timeout")
    };
    // Every line reached every client (bounded wait; the check below counts what arrived).
    for _ in 0..3000 {
        if done.get() == clients {
            break;
        }
        hoop::time::sleep(Duration::from_millis(10)).await;
    }
    // SAFETY: kill(2) on our own pid with a signal the server listens for; no pointers.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    let mut verified = 0;
    let mut byes = 0;
    for (id, r) in readers.into_iter().enumerate() {
        let got = r.await.map_err(io::Error::other)??;
        let chat: HashSet<&str> = got
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with('c'))
            .collect();
        let count = got.iter().filter(|l| l.starts_with('c')).count();
        let mut ok = 0;
        for c in 0..clients {
            for n in 0..lines {
                if chat.contains(format!("c{c} l{n}").as_str()) {
                    ok += 1;
                }
            }
        }
        if count != ok {
            eprintln!("client {id}: {count} chat lines, {ok} expected ones (duplicates?)");
        }
        verified += ok.min(count);
        if got.last().map(String::as_str) == Some("bye") {
            byes += 1;
        }
    }
    stop.cancel();
    for w in writers {
        // A writer may fail once the server closed: the byes above are what counts.
        let _ = w.await;
    }
    Ok(Seen {
        verified,
        wanted: clients * wanted_each,
        byes,
        idle_cut,
    })
}

pub(crate) fn self_test(clients_n: usize, lines: usize) -> io::Result<()> {
    let config = Config {
        idle: Duration::from_millis(1500),
        ..CONFIG
    };
    let group = ReuseportGroup::bind_n("127.0.0.1:0", 2)?;
    let addr = group.local_addr();
    let client_thread = std::thread::spawn(move || -> io::Result<Seen> {
        // SIGTERM is for the server's listener: this thread must never take it.
        // SAFETY: a sigset on the stack, filled by sigemptyset/sigaddset, passed to
        // pthread_sigmask for this thread only.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        hoop::Runtime::new()?.block_on(clients(addr, clients_n, lines, config.idle))
    });
    let said_bye = serve(group, 2, config)?;
    let seen = client_thread
        .join()
        .map_err(|_| io::Error::other("the client thread panicked"))??;
    println!("verified {} of {} lines", seen.verified, seen.wanted);
    println!("bye to {} of {} clients", seen.byes, clients_n);
    if seen.idle_cut {
        println!("idle client cut");
    }
    eprintln!("server said bye {said_bye} times");
    if seen.verified == seen.wanted && seen.byes == clients_n && seen.idle_cut {
        Ok(())
    } else {
        Err(io::Error::other("self-test failed"))
    }
}
