//! The accept queue: the listen backlog a listener asks for reaches `listen(2)` (read back
//! from the kernel, as `ss -ltn` shows it), a burst of connects waits in the queue without a
//! dropped SYN and is then accepted to the last connection, and a reader without a buffer
//! (`Driver::try_recv` + `PollOnce::ready`) sees every byte. Every runtime test runs on
//! io_uring and on epoll.

use std::io::Write as _;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use hoop::driver::{op::PollOnce, Driver, Op};
use hoop::net::{AcceptPacing, ListenOptions, ReuseportGroup, TcpListener, DEFAULT_BACKLOG};
use hoop::time::timeout;
use hoop_test_support as common;
use hoop_test_support::listen_diag::tcp_listen_queue;
use hoop_test_support::resets;

const LIMIT: Duration = Duration::from_secs(30);

/// The backlog the kernel reports for the listener on `addr`.
fn backlog_of(addr: SocketAddr) -> u32 {
    tcp_listen_queue(addr)
        .expect("sock_diag")
        .expect("the listener is in the dump")
        .backlog
}

/// What a request of `n` becomes: capped at somaxconn.
fn capped(n: u32) -> u32 {
    hoop::net::listen_limits().effective(n)
}

/// `ListenOptions::backlog`, `set_backlog`, the default and a reuseport group's sockets each
/// reach `listen(2)`: the kernel reports the value asked (capped at somaxconn), and a second
/// value replaces the first.
#[hoop::test]
async fn backlog_setter_reaches_listen() {
    let l = ListenOptions::new()
        .backlog(37)
        .bind("127.0.0.1:0")
        .unwrap();
    let addr = l.local_addr().unwrap();
    assert_eq!(backlog_of(addr), capped(37));
    l.set_backlog(53).unwrap();
    assert_eq!(backlog_of(addr), capped(53));
    // 0 counts as 1 (a queue of one), not as "the kernel's default".
    l.set_backlog(0).unwrap();
    assert_eq!(backlog_of(addr), 1);

    let d = TcpListener::bind("127.0.0.1:0").await.unwrap();
    assert_eq!(backlog_of(d.local_addr().unwrap()), capped(DEFAULT_BACKLOG));
    assert_eq!(
        hoop::net::backlog_cap(DEFAULT_BACKLOG).is_some(),
        capped(DEFAULT_BACKLOG) < DEFAULT_BACKLOG
    );

    let group =
        ReuseportGroup::bind_n_with("127.0.0.1:0", 2, &ListenOptions::new().backlog(41)).unwrap();
    let (a, b) = (group.listener().unwrap(), group.listener().unwrap());
    // Both sockets share the address: the dump holds two entries, both with the backlog.
    assert_eq!(backlog_of(group.local_addr()), capped(41));
    // One added later by `listener` gets the group's backlog too.
    let c = group.listener().unwrap();
    drop((a, b));
    assert_eq!(backlog_of(group.local_addr()), capped(41));
    drop(c);
}

/// `TCP_ESTABLISHED` of `tcp_info.tcpi_state` (linux/tcp_states.h).
const TCP_ESTABLISHED: u8 = 1;

/// Connections in the burst test.
const BURST: usize = 2000;

/// TCP state of a client socket, and whether its SYN was retransmitted (`TCP_INFO`).
fn tcp_state(fd: i32) -> (u8, u32) {
    // SAFETY: tcp_info is plain old data; all-zero is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `info`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    (info.tcpi_state, info.tcpi_total_retrans)
}

/// A burst of 2,000 connects at once, while nobody accepts, all complete into the accept
/// queue with no SYN dropped (a dropped SYN leaves its client in SYN_SENT until it retransmits,
/// 1 s later: every client is watched until it is established or has retransmitted), the
/// kernel counts them queued, and then the accept loop (`incoming()` paced by
/// `AcceptPacing::accepted`, in batches) takes every one and reads the byte each sent.
#[test]
fn burst_of_connects_waits_in_the_queue_and_is_accepted() {
    let _faults = common::faults_off(
        &["ecanceled", "eagain", "enobufs", "short_io"],
        "counts every one of 2,000 connections and the byte each sent: an injected error on \
         an accept or a read would lose one by design",
    );
    let somaxconn = hoop::net::somaxconn().unwrap_or(0);
    if (somaxconn as usize) < BURST {
        for k in common::DRIVERS {
            common::skip(
                k,
                &format!("net.core.somaxconn is {somaxconn}, below the burst of {BURST}"),
            );
        }
        return;
    }
    let _ = hoop::runtime::raise_nofile_limit();
    // SAFETY: getrlimit writes into a local.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if (lim.rlim_cur as usize) < 2 * BURST + 256 {
        for k in common::DRIVERS {
            common::skip(
                k,
                &format!(
                    "the open-file limit {} is below {}",
                    lim.rlim_cur,
                    2 * BURST + 256
                ),
            );
        }
        return;
    }
    common::each_driver(|kind| {
        let rt = common::builder(kind).build().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            // The burst, on a thread of its own, while this runtime accepts nothing.
            let clients = std::thread::spawn(move || burst(addr)).join().unwrap();
            let q = tcp_listen_queue(addr).unwrap().unwrap();
            assert_eq!(q.queued as usize, BURST, "{q:?}");

            let mut pacing = AcceptPacing::new("test", 0);
            let mut incoming = listener.incoming();
            let mut got = 0;
            timeout(LIMIT, async {
                while got < BURST {
                    let s = incoming.next().await.unwrap().unwrap();
                    pacing.accepted().await;
                    let (r, b) = s.read(vec![0u8; 8]).await;
                    // A reset ends the connection after it was accepted: the queue and the
                    // accept loop, the subject, did their part; its byte is not checked.
                    match r {
                        Ok(n) => assert_eq!((n, b[0]), (1, b'x')),
                        Err(e) => resets::expect_reset("a burst client's byte", &e),
                    }
                    got += 1;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("accepted {got} of {BURST}"));
            drop(clients);
        });
    });
}

/// Connects `BURST` clients to `addr` at once (non-blocking), waits until each is
/// established or has retransmitted its SYN, asserts none did, and sends a byte on each.
fn burst(addr: SocketAddr) -> Vec<std::net::TcpStream> {
    let sa = sockaddr(addr);
    let mut fds = Vec::with_capacity(BURST);
    for _ in 0..BURST {
        let s = connect_nonblocking(&sa);
        fds.push(s);
    }
    // Every client ends established or with its SYN retransmitted; bounded in time.
    let give_up = Instant::now() + LIMIT;
    loop {
        let (mut pending, mut retransmitted) = (0, 0);
        for s in &fds {
            let (state, retrans) = tcp_state(s.as_raw_fd());
            if state != TCP_ESTABLISHED {
                pending += 1;
            }
            if retrans > 0 {
                retransmitted += 1;
            }
        }
        assert_eq!(
            retransmitted, 0,
            "{retransmitted} of {BURST} clients retransmitted their SYN: the accept queue dropped it"
        );
        if pending == 0 {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "{pending} clients never connected"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for s in &mut fds {
        s.set_nonblocking(false).unwrap();
        s.write_all(b"x").unwrap();
    }
    fds
}

/// The `sockaddr_in` of `addr` (an IPv4 address: the tests bind 127.0.0.1).
fn sockaddr(addr: SocketAddr) -> libc::sockaddr_in {
    match addr {
        SocketAddr::V4(a) => libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            },
            sin_zero: [0; 8],
        },
        SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
    }
}

/// Clients that connect one by one to a listener whose queue holds 2.
const TRICKLE: usize = 40;

/// An armed `incoming()` stream empties the accept queue at every turn of the runtime, whether
/// or not its owner polls it, as io_uring's multishot accept does: 40 clients connect one by
/// one to a listener with a backlog of 1 (a queue of 2) while the task that owns the stream
/// only sleeps, and none of them has its SYN dropped (each is established at once, none
/// retransmitted); then the stream yields all 40. On epoll the stream used to accept only when
/// polled: the third client's SYN was dropped.
#[test]
fn armed_stream_empties_the_queue_while_its_owner_is_busy() {
    let _faults = common::faults_off(
        &["ecanceled", "eagain", "enobufs", "short_io", "late"],
        "counts every one of 40 connections as the kernel queued it: an injected error or a \
         completion held back past the client's check would look like a dropped SYN",
    );
    common::each_driver(|kind| {
        if kind == hoop::DriverKind::Uring && !hoop::driver::setup::kernel_at_least(5, 19) {
            common::skip(kind, "multishot accept needs Linux 5.19");
            return;
        }
        let rt = common::builder(kind).build().unwrap();
        rt.block_on(async {
            let listener = ListenOptions::new().backlog(1).bind("127.0.0.1:0").unwrap();
            let sa = sockaddr(listener.local_addr().unwrap());
            let mut incoming = listener.incoming();
            // Armed by one poll; nothing is waiting yet (the call is cancel safe).
            assert!(timeout(Duration::from_millis(1), incoming.next())
                .await
                .is_err());
            let mut clients = Vec::with_capacity(TRICKLE);
            for i in 0..TRICKLE {
                let c = connect_nonblocking(&sa);
                // The runtime turns (the owner of the stream sleeps, not polling it).
                hoop::time::sleep(Duration::from_millis(2)).await;
                let (state, retrans) = tcp_state(c.as_raw_fd());
                assert!(
                    state == TCP_ESTABLISHED && retrans == 0,
                    "{kind:?}: client {i} of {TRICKLE}: TCP state {state}, {retrans} \
                     retransmissions: its SYN was dropped, the accept queue was full"
                );
                clients.push(c);
            }
            for i in 0..TRICKLE {
                match timeout(LIMIT, incoming.next()).await {
                    Ok(Some(Ok(_))) => {}
                    other => panic!("{kind:?}: connection {i} of {TRICKLE}: {other:?}"),
                }
            }
        });
    });
}

/// A non-blocking TCP socket whose `connect` to `sa` has started (the handshake completes, or
/// its SYN waits to be retransmitted, without this call waiting).
fn connect_nonblocking(sa: &libc::sockaddr_in) -> std::net::TcpStream {
    // SAFETY: socket(2) has no memory-safety preconditions.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let s = unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: `sa` is a live sockaddr_in of the length given.
    let r = unsafe {
        libc::connect(
            fd,
            (sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    let e = std::io::Error::last_os_error();
    assert!(
        r == 0 || e.raw_os_error() == Some(libc::EINPROGRESS),
        "connect: {e}"
    );
    s
}

/// A reader holding no buffer: `try_recv` until `WouldBlock`, then `PollOnce::ready`. Bytes
/// that arrive while it waits, bytes that arrived before it started waiting (after a short
/// read, while the runtime turned), and the end of stream are all seen; nothing hangs.
#[hoop::test]
async fn try_recv_and_ready_wait_see_every_byte() {
    let _faults = common::faults_off(
        &["ecanceled", "eagain", "enobufs"],
        "checks every byte of one connection read through the readiness wait",
    );
    timeout(LIMIT, async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        // The scenario is one connection's: a reset reruns it whole on a new one.
        resets::retry_async("bytes through the readiness wait", |_| {
            read_by_readiness(&l)
        })
        .await;
    })
    .await
    .unwrap();
}

/// One connection of [`try_recv_and_ready_wait_see_every_byte`]: `Err` only for a failed
/// receive (a reset, which the caller retries).
async fn read_by_readiness(l: &TcpListener) -> std::io::Result<()> {
    let addr = l.local_addr().unwrap();
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    let (server, _) = l.accept().await.unwrap();
    let fd = server.as_raw_fd();
    let d = Driver::current().unwrap();
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();

    // Nothing there yet.
    match d.try_recv(fd, &mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) if resets::is_reset(&e) => return Err(e),
        r => panic!("a receive with nothing sent: {r:?}"),
    }

    // Bytes written while the reader waits.
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        client.write_all(b"one").unwrap();
        client
    });
    let first = read_some(&d, fd, &mut buf, &mut got).await;
    let mut client = writer.join().unwrap();
    first?;
    assert_eq!(got, b"one");

    // A short read drained the socket; bytes then arrive while the runtime turns (its
    // edge is seen with no reader waiting) and must not be taken for "still drained".
    client.write_all(b"two").unwrap();
    hoop::time::sleep(Duration::from_millis(20)).await;
    got.clear();
    read_some(&d, fd, &mut buf, &mut got).await?;
    assert_eq!(got, b"two");

    // Many small writes, each waited for.
    got.clear();
    for i in 0..50u8 {
        client.write_all(&[i]).unwrap();
        let before = got.len();
        while got.len() == before {
            read_some(&d, fd, &mut buf, &mut got).await?;
        }
    }
    assert_eq!(got, (0..50u8).collect::<Vec<_>>());

    // End of stream: 0, and again 0 (it stays readable).
    drop(client);
    let n = loop {
        match d.try_recv(fd, &mut buf) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                Op::new(PollOnce::ready(fd)).await.unwrap();
            }
            Err(e) => return Err(e),
        }
    };
    assert_eq!(n, 0);
    assert_eq!(d.try_recv(fd, &mut buf)?, 0);
    drop(server);
    Ok(())
}

/// Reads what arrives next (at least one byte) into `got`, waiting with no buffer held.
async fn read_some(d: &Driver, fd: i32, buf: &mut [u8], got: &mut Vec<u8>) -> std::io::Result<()> {
    for _ in 0..1000 {
        match d.try_recv(fd, buf) {
            Ok(0) => panic!("end of stream"),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                Op::new(PollOnce::ready(fd)).await.unwrap();
            }
            Err(e) => return Err(e),
        }
    }
    panic!("1000 waits and no byte");
}
