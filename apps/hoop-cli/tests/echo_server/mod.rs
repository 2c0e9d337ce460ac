//! `hoop serve echo` under test: the server as a child process (killed on drop, its one
//! `listening on` line read), and the std clients' checks of what it echoes. The echo tests
//! (`echo.rs`) and the process tests (`echo_process.rs`) each use a part.

#![allow(dead_code)]

use hoop_test_support as common;
use hoop_test_support::resets;
use hoop_test_support::ReadRetry as _;
use std::io::{self, BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdout, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for the `listening on` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Read/write timeout of the std clients.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ===== the server process =====

/// A running `hoop serve echo`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    /// The rest of stdout (after the first line), for the "exactly one line" check.
    pub stdout: Option<BufReader<ChildStdout>>,
}

impl Server {
    /// Starts `hoop serve echo --addr 127.0.0.1:0 <extra>` and reads its first line.
    pub fn start(extra: &[&str]) -> Server {
        let mut child = crate::support::spawn_server(
            common::command(env!("CARGO_BIN_EXE_hoop"))
                .args(["serve", "echo", "--addr", "127.0.0.1:0"])
                .args(extra),
            Stdio::inherit(),
        );
        let stdout = child.stdout.take().expect("piped stdout");
        // Guard first: a failure below still kills the child.
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout: None,
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let res = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send((res, reader));
        });
        let (line, reader) = rx
            .recv_timeout(START_TIMEOUT)
            .expect("no `listening on` line within the time limit");
        let line = line.expect("read the server's stdout");
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|s| s.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        server.addr = addr.parse().expect("an IP:PORT after `listening on `");
        assert_eq!(server.addr.ip().to_string(), "127.0.0.1");
        assert_ne!(server.addr.port(), 0, "the real port, not 0");
        server.stdout = Some(reader);
        server
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits in i32")
    }

    /// Sends `sig` to the server.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) with the pid of our own child (not reaped yet, so not reused).
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(r, 0, "kill: {}", io::Error::last_os_error());
    }

    /// Waits up to `limit` for the server to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(status.is_none(), "server exited: {status:?}");
    }

    /// What the server wrote on stdout after the first line (call once it exited).
    pub fn rest_of_stdout(&mut self) -> String {
        let mut rest = String::new();
        if let Some(mut r) = self.stdout.take() {
            r.read_to_string(&mut rest).expect("read stdout");
        }
        rest
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ===== helpers =====

/// xorshift64*: deterministic payloads without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// Raises this process's soft open-file limit to the hard limit (1,000 clients need it).
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid rlimit above.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads the valid rlimit above.
        let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        assert_eq!(r, 0, "setrlimit: {}", io::Error::last_os_error());
    }
    assert!(
        lim.rlim_cur >= 2300,
        "RLIMIT_NOFILE hard limit {} is too low for two tests of 1,000 connections",
        lim.rlim_max
    );
}

/// A blocking std client with timeouts on everything.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s
}

/// Sends `payload` on `stream` (from a second thread, so neither side can block the other)
/// and reads the same number of bytes back.
pub fn echo_std(stream: &TcpStream, payload: &[u8]) -> io::Result<Vec<u8>> {
    crate::support::echo_on(stream, payload)
}

/// One fresh connection, one echo of `len` random bytes (retried after resets); fails the
/// test unless it comes back intact.
pub fn check_echo(addr: SocketAddr, len: usize, seed: u64) {
    crate::support::check_echo(addr, &Rng::new(seed).bytes(len));
}

/// Echoes on two connections open at once, used out of order (`second` on the one opened
/// last first), retried together on two fresh ones after a reset.
pub fn check_two_at_once(addr: SocketAddr, first: &[u8], second: &[u8]) {
    resets::retry("two connections at once", |_| {
        let a = crate::support::try_connect(addr)?;
        let b = crate::support::try_connect(addr)?;
        if echo_std(&b, second)? != second {
            return Err(crate::support::wrong("the second echo came back different"));
        }
        if echo_std(&a, first)? != first {
            return Err(crate::support::wrong("the first echo came back different"));
        }
        Ok(())
    });
}

/// `SO_LINGER` 0: closing the socket sends a reset instead of a FIN.
pub fn set_linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads a valid linger struct of the size given, on an open socket.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER: {}", io::Error::last_os_error());
}

/// Asserts the server closed `s`: end of stream or a reset, within the read timeout.
pub fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 16];
    match s.read_retry(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close the connection, got {other:?}"),
    }
}
