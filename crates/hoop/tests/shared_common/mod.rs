//! What `shared.rs` and `shared_rings.rs` share: the rings (on io_uring, or on epoll in the
//! child), a first poll, and the test that runs the whole file again on the epoll engine in a
//! child process (each file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;

use std::future::Future;

use common::serial;
use hoop::shared::Rings;

/// Polls `f` once (so its SQE is pushed), expecting it pending, then returns it.
pub fn poll_once<F: Future + Unpin>(f: F) -> F {
    common::poll_once(f)
        .err()
        .expect("an operation finished at its first poll")
}

/// Set in the child that runs this file again on the epoll engine.
pub const EPOLL_CHILD_ENV: &str = "HOOP_SHARED_EPOLL_CHILD";

pub fn rings() -> Option<Rings> {
    let r = common::shared_rings(64)?;
    if std::env::var_os(EPOLL_CHILD_ENV).is_some() {
        assert_eq!(r.driver_kind(), hoop::DriverKind::Epoll);
    }
    Some(r)
}

/// A connected socket of any family, as the `TcpStream` type (its operations are recv/send).
pub fn unsafe_tcp(s: std::os::unix::net::UnixStream) -> std::net::TcpStream {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: the fd is a connected stream socket we own; TcpStream only wraps it for recv/send.
    unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) }
}

/// The whole test file (each that includes this module) once more on shared rings built on hoop's epoll driver (what a process where
/// io_uring is refused gets: `HOOP_DRIVER=epoll` makes `Rings::builder()` choose it), in a
/// child process; tests that need io_uring itself skip there with a line.
#[test]
fn every_test_again_on_the_epoll_engine() {
    if std::env::var_os(EPOLL_CHILD_ENV).is_some() {
        return;
    }
    // Serial: the child's output pipes are fds of this process, which other tests count.
    let _g = serial();
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--test-threads=1",
            "--skip",
            "every_test_again_on_the_epoll_engine",
        ])
        .env(EPOLL_CHILD_ENV, "1")
        .env("HOOP_DRIVER", "epoll")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok"),
        "the tests on the epoll engine failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    // The child's skips, said here too (its output is captured).
    for line in stderr.lines().filter(|l| l.starts_with("skip on")) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}
