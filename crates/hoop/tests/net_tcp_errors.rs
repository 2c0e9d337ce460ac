//! TCP's error paths: a connect to a closed port is refused, a read after the peer reset is an
//! error or end of stream, and a write to a reset peer fails without a SIGPIPE.
//!
//! Every test takes one lock and they run one at a time. Every test runs on each driver
//! (io_uring, then epoll).

use hoop_test_support as common;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::Duration;

use common::each_driver;
use hoop::net::{TcpListener, TcpStream};
use hoop::time::sleep;

mod net_common;
use net_common::*;

#[test]
fn tcp_connect_to_closed_port_is_refused() {
    each_driver(|kind| {
        run(kind, async {
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            };
            let err = TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        });
    });
}

#[test]
fn tcp_peer_reset_is_an_error_or_eof_on_read() {
    each_driver(|kind| {
        run(kind, async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (c, s) = tcp_pair(&l).await;
            c.set_linger(Some(Duration::ZERO)).unwrap();
            c.close().await.unwrap(); // SO_LINGER 0: close sends RST
            let (res, _) = s.read(Vec::with_capacity(64)).await;
            match res {
                Ok(0) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
                other => panic!("read after peer reset: {other:?}"),
            }
            // And writing to it now fails without a SIGPIPE.
            let (res, _) = s.write(b"anyone?".to_vec()).await;
            let e = res.unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ),
                "{e:?}"
            );
        });
    });
}

static SIGPIPES: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count_sigpipe(_: libc::c_int) {
    SIGPIPES.fetch_add(1, Ordering::SeqCst);
}

/// Counts SIGPIPEs (Rust ignores them by default, which would hide a missing `MSG_NOSIGNAL`)
/// until dropped, then restores the previous disposition.
struct SigpipeCounter(libc::sighandler_t);

impl SigpipeCounter {
    fn install() -> SigpipeCounter {
        SIGPIPES.store(0, Ordering::SeqCst);
        let handler: extern "C" fn(libc::c_int) = count_sigpipe;
        // SAFETY: the handler only touches an atomic, which is async-signal-safe.
        let prev = unsafe { libc::signal(libc::SIGPIPE, handler as libc::sighandler_t) };
        assert_ne!(prev, libc::SIG_ERR);
        SigpipeCounter(prev)
    }
}

impl Drop for SigpipeCounter {
    fn drop(&mut self) {
        // SAFETY: restores the disposition `install` replaced.
        unsafe { libc::signal(libc::SIGPIPE, self.0) };
    }
}

#[test]
fn tcp_write_to_reset_peer_fails_without_sigpipe() {
    let _faults = common::faults_off(
        &["econnreset"],
        "its subject is the kernel's own errors after a real reset (ECONNRESET, then EPIPE \
         where a send without MSG_NOSIGNAL raises SIGPIPE): an injected ECONNRESET in place of \
         the third send's EPIPE is the plan's, not the kernel's",
    );
    each_driver(|kind| {
        run(kind, async {
            let _counter = SigpipeCounter::install();
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let (c, s) = tcp_pair(&l).await;
            c.set_linger(Some(Duration::ZERO)).unwrap();
            drop(c); // close from Drop, through the ring: SO_LINGER 0 sends RST
            let mut buf = vec![7u8; 32 * 1024];
            let mut errors = Vec::new();
            // The first error may be ECONNRESET; the ones after it are EPIPE, which is where a
            // send without MSG_NOSIGNAL raises SIGPIPE.
            for _ in 0..100 {
                let (res, b) = s.write(buf).await;
                buf = b;
                match res {
                    Ok(_) => sleep(Duration::from_millis(5)).await,
                    Err(e) => {
                        errors.push(e);
                        if errors.len() == 3 {
                            break;
                        }
                    }
                }
            }
            assert_eq!(errors.len(), 3, "writes to a reset peer kept succeeding");
            for e in &errors {
                assert!(
                    matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                    ),
                    "{e:?}"
                );
            }
            assert_eq!(errors[2].kind(), io::ErrorKind::BrokenPipe);
            assert_eq!(SIGPIPES.load(Ordering::SeqCst), 0, "a write raised SIGPIPE");
        });
    });
}
