//! Multishot accept as a stream, on both drivers (on epoll it is a loop of single accepts):
//! many connections accepted, a dropped stream leaks no fd, and the single-shot accept loop
//! where multishot accept is missing.

use hoop_test_support as common;
use hoop_test_support::{fd_count, resets};
use std::io::Read;

use std::time::Duration;

mod multishot_common;
use multishot_common::*;

/// One multishot accept serves many connections; each accepted stream works.
#[test]
fn incoming_accepts_many_connections() {
    each_driver(|kind| {
        rt(kind).block_on(async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let clients = common::spawn(move || {
                (0..50)
                    .map(|i| {
                        // A connection a reset ended (the server dropped it) connects again.
                        resets::retry(&format!("client {i}"), |_| {
                            let mut c = std::net::TcpStream::connect(addr)?;
                            c.set_read_timeout(Some(Duration::from_secs(10)))?;
                            std::io::Write::write_all(&mut c, &[i as u8])?;
                            let mut b = [0u8; 1];
                            c.read_exact(&mut b)?;
                            Ok(b[0])
                        })
                    })
                    .collect::<Vec<u8>>()
            });
            let mut incoming = l.incoming();
            let mut served = 0;
            while served < 50 {
                let s = hoop::time::timeout(Duration::from_secs(10), incoming.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: no connection within 10 s"))
                    .expect("stream ended")
                    .unwrap();
                let (res, buf) = s.read(Vec::with_capacity(1)).await;
                match res {
                    Ok(n) => assert_eq!(n, 1),
                    Err(e) => {
                        resets::expect_reset("the server's read", &e);
                        continue;
                    }
                }
                let reply = vec![buf[0].wrapping_add(1)];
                let (res, _) = s.write_all(reply).await;
                match res {
                    Ok(()) => served += 1,
                    Err(e) => resets::expect_reset("the server's write", &e),
                }
            }
            let got = clients.join().unwrap();
            assert_eq!(
                got,
                (0..50u8).map(|i| i + 1).collect::<Vec<_>>(),
                "driver={kind}"
            );
        });
    });
}

/// Invariant 14: connections the kernel accepted for a dropped stream go to the listener's
/// next `accept`, none lost, and are closed with the listener, never leaked.
#[test]
fn dropped_incoming_leaks_no_fd() {
    each_driver(|kind| {
        let baseline = fd_count();
        let runtime = rt(kind);
        runtime.block_on(async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let inside = fd_count();
            for round in 0..20 {
                let mut incoming = l.incoming();
                // Arm it, then let connections arrive while nobody takes them.
                let _ = hoop::time::timeout(Duration::from_millis(1), incoming.next()).await;
                let clients: Vec<_> = (0..5)
                    .map(|_| std::net::TcpStream::connect(addr).unwrap())
                    .collect();
                hoop::time::sleep(Duration::from_millis(5)).await;
                drop(incoming);
                // What the dropped stream accepted is kept for the listener: the next accepts
                // get every connection (kept or still in the kernel's backlog), none lost.
                for i in 0..5 {
                    let accepted = hoop::time::timeout(Duration::from_secs(10), l.accept()).await;
                    let (s, _) = accepted
                        .unwrap_or_else(|_| {
                            panic!("driver={kind} round {round}: connection {i} lost")
                        })
                        .unwrap();
                    drop(s);
                }
                drop(clients);
            }
            hoop::time::sleep(Duration::from_millis(20)).await;
            // While the runtime still runs: every connection the dropped streams accepted was
            // handed out and closed (not kept, not leaked).
            assert_eq!(fd_count(), inside, "driver={kind}: accepted fds leaked");
            // Connections kept for a listener are closed with it.
            let mut incoming = l.incoming();
            let _ = hoop::time::timeout(Duration::from_millis(1), incoming.next()).await;
            let clients: Vec<_> = (0..5)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            hoop::time::sleep(Duration::from_millis(5)).await;
            drop(incoming);
            l.close().await.unwrap();
            drop(clients);
        });
        drop(runtime);
        assert_eq!(
            fd_count(),
            baseline,
            "driver={kind}: fds leaked by a dropped incoming()"
        );
    });
}

/// The multishot-accept fallback forced on io_uring: a loop of single-shot accepts (what a
/// kernel before 5.19 gets) serves connections the same way.
#[test]
fn single_shot_accept_loop_fallback() {
    each_driver(|kind| {
        rt(kind).block_on(async move {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let clients: Vec<_> = (0..20)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
            let accept = hoop::driver::op::AcceptMulti::single_shot(fd);
            assert!(!accept.is_multishot());
            let mut stream = hoop::driver::MultiOp::new(accept);
            for i in 0..20 {
                let fd = hoop::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: connection {i} not accepted"))
                    .expect("the loop re-arms")
                    .unwrap();
                drop(fd);
            }
            drop(stream);
            drop(clients);
        });
    });
}
