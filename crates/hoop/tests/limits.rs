//! Past the descriptor limit a new client is refused, never left waiting unanswered: clients
//! connected (into the listen queue) while the server has descriptors for only a few of them
//! are each either served or refused (reset or closed), within a bound, and the refusals are
//! counted (`hoop::net::refused_connections`). Each driver in a child process, since the test
//! lowers the process's `RLIMIT_NOFILE`; each way of accepting: `accept()`, `incoming()` and
//! `incoming_direct()` (on io_uring the ring's file table is sized by the lowered limit).

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

use common::each_driver;
use hoop::net::TcpListener;

/// Clients that connect while the server is at its limit.
const CLIENTS: usize = 40;
/// Descriptors the server may still open once the limit is lowered.
const HEADROOM: u64 = 4;
/// Client descriptors are moved at or above this, out of the way of the server's.
const HIGH_FD: i32 = 900;

/// How the server accepts.
#[derive(Debug, Clone, Copy)]
enum Way {
    Accept,
    Incoming,
    IncomingDirect,
}

fn nofile() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

fn set_nofile(lim: &libc::rlimit) {
    // SAFETY: setrlimit reads one valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, lim) }, 0);
}

/// The limit that leaves `HEADROOM` descriptors free: one above the `HEADROOM`-th free
/// number (a new descriptor takes the lowest free number, and fails with `EMFILE` when that is
/// at or above the limit; open ones above it, such as the clients', stay usable).
fn limit_for_headroom() -> u64 {
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .collect();
    let nth_free = (0..)
        .filter(|fd| !open.contains(fd))
        .nth(HEADROOM as usize - 1)
        .unwrap();
    nth_free + 1
}

/// A client connected to `addr`, its descriptor moved to `HIGH_FD` or above.
fn client(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let c = std::net::TcpStream::connect(addr).unwrap();
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor (or -1) for an open one.
    let high = unsafe { libc::fcntl(c.as_raw_fd(), libc::F_DUPFD_CLOEXEC, HIGH_FD) };
    assert!(high >= HIGH_FD, "dup: {}", io::Error::last_os_error());
    drop(c);
    // SAFETY: `high` was just made and is owned by nothing else.
    unsafe { std::net::TcpStream::from_raw_fd(high) }
}

/// What a client saw: a greeting (served), or a reset or end of stream (refused).
#[derive(Debug, PartialEq)]
enum Seen {
    Served,
    Refused,
}

fn seen(c: &mut std::net::TcpStream) -> Seen {
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 2];
    match c.read_retry(&mut b) {
        Ok(2) if &b == b"hi" => Seen::Served,
        Ok(0) => Seen::Refused,
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Seen::Refused,
        other => panic!("a client was left waiting, or got something else: {other:?}"),
    }
}

/// The server's side: accepts `CLIENTS` connections' worth (served or refused) in `way`,
/// greeting each one it holds; returns the streams held (they stay open while the clients
/// read), the refusals counted, and the greetings a made-up reset ended (under injected
/// resets only: that connection is closed, and its client sees it refused).
async fn serve(listener: &TcpListener, way: Way) -> (Vec<Box<dyn std::any::Any>>, u64, usize) {
    let refused_before = hoop::net::refused_connections();
    let refused = || hoop::net::refused_connections() - refused_before;
    let mut held: Vec<Box<dyn std::any::Any>> = Vec::new();
    let mut failures = 0usize;
    let mut reset = 0usize;
    let mut incoming = None;
    let mut direct = None;
    // Bounded: every round accepts, refuses, or fails (at most 20 x CLIENTS failures).
    while held.len() + (refused() as usize) + reset < CLIENTS {
        assert!(
            failures < 20 * CLIENTS,
            "{way:?}: {} held, {} refused, {failures} failed accepts",
            held.len(),
            refused()
        );
        let got: Option<io::Result<Box<dyn std::any::Any>>> = match way {
            Way::Accept => Some(match listener.accept().await {
                Ok((s, _)) => {
                    let (r, _) = s.write_all(b"hi".to_vec()).await;
                    r.map(|()| Box::new(s) as Box<dyn std::any::Any>)
                }
                Err(e) => Err(e),
            }),
            Way::Incoming => {
                let inc = incoming.get_or_insert_with(|| listener.incoming());
                match inc.next().await {
                    Some(Ok(s)) => {
                        let (r, _) = s.write_all(b"hi".to_vec()).await;
                        Some(r.map(|()| Box::new(s) as Box<dyn std::any::Any>))
                    }
                    Some(Err(e)) => Some(Err(e)),
                    None => None,
                }
            }
            Way::IncomingDirect => {
                let inc = direct.get_or_insert_with(|| listener.incoming_direct());
                match inc.next().await {
                    Some(Ok(s)) => {
                        let (r, _) = s.write_all(b"hi".to_vec()).await;
                        Some(r.map(|()| Box::new(s) as Box<dyn std::any::Any>))
                    }
                    Some(Err(e)) => Some(Err(e)),
                    None => None,
                }
            }
        };
        match got {
            Some(Ok(s)) => held.push(s),
            Some(Err(e))
                if common::resets::injected()
                    && common::injected_error(&e)
                    && e.raw_os_error() == Some(libc::ECONNRESET) =>
            {
                reset += 1
            }
            Some(Err(_)) => failures += 1,
            // The stream ended (an error ends a multishot accept): a new one.
            None => {
                incoming = None;
                direct = None;
                failures += 1;
            }
        }
    }
    (held, refused(), reset)
}

fn past_the_limit(way: Way) {
    // Each client's one connection is counted as served or refused; under injected resets a
    // greeting a made-up reset ended is counted apart (its client sees it closed).
    let kind = hoop::DriverKind::from_env().unwrap().unwrap();
    let rt = common::runtime(kind);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut clients: Vec<_> = (0..CLIENTS).map(|_| client(addr)).collect();
    let saved = nofile();
    set_nofile(&libc::rlimit {
        rlim_cur: limit_for_headroom(),
        rlim_max: saved.rlim_max,
    });
    let (held, refused, reset) = rt.block_on(async {
        hoop::time::timeout(Duration::from_secs(20), serve(&listener, way))
            .await
            .expect("the server neither served nor refused every client in 20 s")
    });
    set_nofile(&saved);
    let seen: Vec<Seen> = clients.iter_mut().map(seen).collect();
    let served = seen.iter().filter(|s| **s == Seen::Served).count();
    eprintln!("{kind} {way:?}: {served} served, {refused} refused (counted), {reset} reset");
    assert_eq!(served, held.len(), "{kind} {way:?}");
    assert!(served >= 1, "{kind} {way:?}: the headroom serves some");
    assert!(
        refused >= 1,
        "{kind} {way:?}: past the limit clients are refused"
    );
    assert_eq!(served + refused as usize + reset, CLIENTS, "{kind} {way:?}");
    drop(held);
}

#[test]
fn past_the_fd_limit_accept_refuses_clients() {
    if common::is_child() {
        return past_the_limit(Way::Accept);
    }
    each_driver(|kind| common::run_in_child("past_the_fd_limit_accept_refuses_clients", kind));
}

#[test]
fn past_the_fd_limit_incoming_refuses_clients() {
    if common::is_child() {
        return past_the_limit(Way::Incoming);
    }
    each_driver(|kind| common::run_in_child("past_the_fd_limit_incoming_refuses_clients", kind));
}

#[test]
fn past_the_fd_limit_incoming_direct_refuses_clients() {
    if common::is_child() {
        return past_the_limit(Way::IncomingDirect);
    }
    each_driver(|kind| {
        common::run_in_child("past_the_fd_limit_incoming_direct_refuses_clients", kind)
    });
}
