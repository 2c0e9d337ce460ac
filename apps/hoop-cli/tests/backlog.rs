//! `--backlog N` of `hoop serve http`, `serve echo` and `serve fanout`: the value reaches
//! `listen(2)` (read back from the kernel through sock_diag, as `ss -ltn` shows it) on both
//! drivers, the line on stderr says when net.core.somaxconn caps it, and a bad value is
//! refused with a message and the usage exit status, before anything listens.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use hoop_test_support as common;
use hoop_test_support::listen_diag::tcp_listen_queue;

const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running server, killed when dropped.
use support::Served as Server;

fn hoop() -> Command {
    common::command(env!("CARGO_BIN_EXE_hoop"))
}

/// Starts `hoop serve <args>` and reads its `listening on` line.
fn start(args: &[&str]) -> Server {
    Server::start(
        hoop().arg("serve").args(args),
        Stdio::piped(),
        START_TIMEOUT,
    )
}

/// Stops the server and returns what it wrote on stderr.
fn stderr_of(mut s: Server) -> String {
    let _ = s.child.kill();
    let _ = s.child.wait();
    let mut err = String::new();
    if let Some(e) = s.child.stderr.as_mut() {
        let _ = e.read_to_string(&mut err);
    }
    err
}

/// Whether io_uring can run here (else the uring runs are skipped, visibly).
fn uring_works() -> bool {
    hoop::Runtime::builder()
        .driver(hoop::DriverKind::Uring)
        .build()
        .is_ok()
}

/// Each server on each driver with `--backlog 100`: the kernel reports a backlog of 100 and
/// nothing is said on stderr about a cap; with a backlog above somaxconn, the kernel reports
/// somaxconn and stderr says it capped the value.
#[test]
fn backlog_flag_reaches_listen() {
    let somaxconn = hoop::net::somaxconn().expect("net.core.somaxconn");
    let root = std::env::temp_dir();
    let root = root.to_str().expect("utf-8 temp dir");
    for driver in ["uring", "epoll"] {
        if driver == "uring" && !uring_works() {
            common::skip(hoop::DriverKind::Uring, "io_uring cannot be set up here");
            continue;
        }
        let servers: [&[&str]; 3] = [&["http", "--root", root], &["echo"], &["fanout"]];
        for server in servers {
            for backlog in [100u32, somaxconn.saturating_add(1)] {
                let n = backlog.to_string();
                let mut args = server.to_vec();
                args.extend(["--addr", "127.0.0.1:0", "--driver", driver, "--backlog", &n]);
                let s = start(&args);
                let q = tcp_listen_queue(s.addr)
                    .expect("sock_diag")
                    .expect("the server's listener in the dump");
                let err = stderr_of(s);
                let capped = backlog > somaxconn;
                assert_eq!(q.backlog, backlog.min(somaxconn), "{args:?}: {err}");
                let line = format!("listen backlog {backlog} capped to {somaxconn}");
                assert_eq!(err.contains(&line), capped, "{args:?}: stderr {err:?}");
            }
        }
    }
}

/// A bad `--backlog` is refused at once with a message naming the flag, the usage exit
/// status and nothing on stdout.
#[test]
fn bad_backlog_is_refused() {
    for server in ["http", "echo", "fanout"] {
        for bad in ["0", "-5", "many", "2147483648", ""] {
            let mut cmd = hoop();
            // `--backlog=-5`: as a separate word clap would read `-5` as a flag.
            cmd.args(["serve", server, "--addr", "127.0.0.1:0"])
                .arg(format!("--backlog={bad}"));
            if server == "http" {
                cmd.args(["--root", "/"]);
            }
            let started = Instant::now();
            let out = cmd.stdin(Stdio::null()).output().expect("run hoop");
            let err = String::from_utf8_lossy(&out.stderr);
            // The CLI's usage errors exit 1 with one line (main.rs), as every other flag's.
            assert_eq!(out.status.code(), Some(1), "{server} {bad:?}: {err}");
            assert!(
                err.contains("--backlog") && err.contains("not a listen backlog"),
                "{server} {bad:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{server} {bad:?} printed on stdout");
            assert!(started.elapsed() < START_TIMEOUT);
        }
    }
}
