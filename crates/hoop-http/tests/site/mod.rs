//! What the behaviour tests of the server share (`headers.rs`, `traversal.rs`, `limits.rs`,
//! `close_wait.rs`, `bodies.rs`, `pipelining.rs`, `precompressed.rs`, `autoindex.rs`): a root
//! made for the test, the server running in this process on a thread of its own
//! ([`TestServer`]: `serve::spawn_server_for` on 127.0.0.1:0, on the driver the test names,
//! stopped by its token when dropped), and raw std clients. Under injected resets the
//! clients make a new connection and ask again (`hoop_test_support::resets`): each test's
//! exchanges are retried, and a scenario on one connection runs again on a new one.
//!
//! Every client read and write has a timeout; every loop is bounded in count.

// Each test file uses a part of it.
#![allow(dead_code)]

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::mpsc::{self, TryRecvError};

use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{Config, ServeStats, Server};
use hoop_test_support as common;
pub use hoop_test_support::http::*;

use crate::serve::{spawn_server_for, THREAD_TIMEOUT};

// ===== the server =====

/// A server of `root` on a thread of its own, serving 127.0.0.1:0 on one driver; cancelling
/// its token (on drop, or [`stop`](TestServer::stop)) stops it gracefully and the thread
/// ends with the runtime dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    token: CancellationToken,
    done: mpsc::Receiver<ServeStats>,
}

impl TestServer {
    /// The server with the defaults of `hoop serve http` (those of [`Config::default`]).
    /// `None` (said on stderr) where io_uring cannot be set up.
    pub fn start(kind: DriverKind, root: &Path) -> Option<TestServer> {
        TestServer::start_with(kind, root, Config::default())
    }

    /// The server with `cfg`.
    pub fn start_with(kind: DriverKind, root: &Path, cfg: Config) -> Option<TestServer> {
        TestServer::start_for(kind, root, cfg, 0)
    }

    /// The server with `cfg` for attempt `attempt` of a scenario that a reset (injected) runs
    /// again on a new server: each attempt's server draws faults of its own
    /// (`serve::spawn_server_for`).
    pub fn start_for(
        kind: DriverKind,
        root: &Path,
        cfg: Config,
        attempt: u32,
    ) -> Option<TestServer> {
        let server = Server::new(root, cfg).expect("a server of the test root");
        let token = CancellationToken::new();
        let (addr, done) = spawn_server_for(kind, server, token.clone(), None, attempt)?;
        Some(TestServer { addr, token, done })
    }

    /// `server` as it is (built by the test), on `kind`.
    pub fn from_server(kind: DriverKind, server: Server) -> Option<TestServer> {
        let token = CancellationToken::new();
        let (addr, done) = spawn_server_for(kind, server, token.clone(), None, 0)?;
        Some(TestServer { addr, token, done })
    }

    /// Fails unless the server is still serving (it has not returned, nor panicked).
    pub fn assert_running(&self) {
        match self.done.try_recv() {
            Err(TryRecvError::Empty) => {}
            Ok(stats) => panic!("the server stopped: {stats:?}"),
            Err(TryRecvError::Disconnected) => panic!("the server thread ended"),
        }
    }

    pub fn connect(&self) -> TcpStream {
        connect(self.addr)
    }

    /// One request on a fresh connection (a new one again while a reset ends it).
    pub fn get(&self, path: &str) -> Response {
        exchange(self.addr, &request("GET", path, ""))
    }

    /// A client that keeps its connection open between requests and makes a new one when
    /// a reset ends an exchange.
    pub fn client(&self) -> Client {
        Client::new(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.token.cancel();
        // Its runtime is gone once it sent what `serve` returned (or it panicked).
        let _ = self.done.recv_timeout(THREAD_TIMEOUT);
    }
}

/// The server's behaviour with a setting only the environment gives, read once per process or
/// per serving thread (`HOOP_HTTP_NO_OPENAT2`, `HOOP_HTTP_RING_READERS_MAX`): test `name` runs
/// again in a child process of this test binary with `env` set, where [`in_child`] is true.
pub fn run_in_child_with(name: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let out = common::command(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child with {env:?} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    // A skipped driver stays visible, past the harness's capture.
    for line in stderr.lines().filter(|l| l.contains("SKIPPED")) {
        let _ = writeln!(io::stderr(), "{name}: {line}");
    }
}

/// Set in the child processes [`run_in_child_with`] starts.
const CHILD_ENV: &str = "HOOP_HTTP_TEST_CHILD";

/// Whether this process is a child started by [`run_in_child_with`].
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}
