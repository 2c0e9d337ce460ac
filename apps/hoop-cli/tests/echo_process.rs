//! `hoop serve echo` as a process: exit status 0 on SIGINT and SIGTERM with connections open,
//! the driver named on stderr, the baseline servers (tokio, monoio), and bad arguments refused
//! with a message and no output.
//!
//! Every server is a child process owned by a guard that kills it on drop; every wait has a
//! deadline.

mod echo_server;
mod support;

use echo_server::*;

use hoop_test_support as common;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

/// Starts a server, opens connections (some mid-echo, some idle), sends `sig`, and expects
/// exit status 0 within 5 s, every connection closed, and nothing more on stdout.
fn exits_zero_on(sig: i32, extra: &[&str]) {
    let mut server = Server::start(extra);
    let addr = server.addr;
    let mut open = Vec::new();
    for i in 0..4u64 {
        let payload = Rng::new(i).bytes(4096);
        let s = support::exchange("an echo before the signal", addr, |s| {
            if echo_std(s, &payload)? != payload {
                return Err(support::wrong("the echo before the signal differs"));
            }
            s.try_clone()
        });
        open.push(s);
    }
    // One with data sent but not read back, one that never sent anything.
    let mut pending = connect(addr);
    pending.write_all(&[7u8; 1000]).expect("write");
    open.push(pending);
    open.push(connect(addr));
    // Let the server accept the last two.
    std::thread::sleep(Duration::from_millis(100));

    server.signal(sig);
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("the server did not exit within 5 s of the signal");
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    for s in &mut open[..4] {
        assert_closed(s);
    }
    assert_eq!(server.rest_of_stdout(), "", "exactly one line on stdout");
}

/// SIGTERM with open connections: exit 0 within 5 s (one runtime thread).
#[test]
fn sigterm_exits_zero_with_open_connections() {
    exits_zero_on(libc::SIGTERM, &[]);
}

/// SIGINT with open connections: exit 0 within 5 s (two runtime threads).
#[test]
fn sigint_exits_zero_with_open_connections_two_threads() {
    exits_zero_on(libc::SIGINT, &["--threads", "2"]);
}

/// SIGTERM on one thread of several: the same through the multi-thread stop path.
#[test]
fn sigterm_exits_zero_two_threads() {
    exits_zero_on(libc::SIGTERM, &["--threads", "2"]);
}

/// SIGTERM with open connections on the epoll driver: exit 0 within 5 s.
#[test]
fn sigterm_exits_zero_with_open_connections_epoll() {
    exits_zero_on(libc::SIGTERM, &["--driver", "epoll"]);
}

/// SIGINT on the epoll driver with two runtime threads.
#[test]
fn sigint_exits_zero_with_open_connections_epoll_two_threads() {
    exits_zero_on(libc::SIGINT, &["--driver", "epoll", "--threads", "2"]);
}

/// `--driver` (and `HOOP_DRIVER` without it) decide the driver, which the server names once on
/// stderr before its `listening on` line; stdout's first line stays exactly that line.
#[test]
fn the_driver_is_named_on_stderr() {
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (&["--driver", "epoll"], None, "driver epoll"),
        (
            &["--driver", "epoll", "--threads", "2"],
            None,
            "driver epoll",
        ),
        (&[], Some("epoll"), "driver epoll"),
        // --driver wins over HOOP_DRIVER.
        (&["--driver", "epoll"], Some("uring"), "driver epoll"),
    ];
    for (args, env, needle) in cases {
        let mut cmd = common::command(env!("CARGO_BIN_EXE_hoop"));
        cmd.args(["serve", "echo", "--addr", "127.0.0.1:0"])
            .args(args)
            .env_remove("HOOP_DRIVER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(v) = env {
            cmd.env("HOOP_DRIVER", v);
        }
        let child = cmd.spawn().expect("spawn hoop");
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout: None,
        };
        let stdout = server.child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let res = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(res);
        });
        let line = rx
            .recv_timeout(START_TIMEOUT)
            .expect("no first line within the time limit")
            .expect("read stdout");
        assert!(
            line.starts_with("listening on 127.0.0.1:"),
            "{args:?}: {line:?}"
        );
        let addr: SocketAddr = line["listening on ".len()..]
            .trim_end()
            .parse()
            .expect("IP:PORT");
        check_echo(addr, 5000, 9);
        server.signal(libc::SIGTERM);
        let status = server
            .wait_exit(Duration::from_secs(5))
            .expect("exit after SIGTERM");
        assert_eq!(status.code(), Some(0), "{args:?}: {status:?}");
        let mut err = String::new();
        if let Some(e) = server.child.stderr.as_mut() {
            e.read_to_string(&mut err).expect("stderr");
        }
        assert!(err.contains(needle), "{args:?} {env:?}: {err}");
        assert_eq!(
            err.matches("hoop serve echo: driver").count(),
            1,
            "named once: {err}"
        );
    }
}

/// A baseline prints the line, echoes (several connections, a payload bigger than one read),
/// and exits 0 on SIGTERM.
fn baseline_echoes(server_kind: &str) {
    let mut server = Server::start(&["--server", server_kind]);
    let addr = server.addr;
    check_echo(addr, 1, 3);
    check_echo(addr, 200_000, 4);
    check_two_at_once(addr, b"world", b"hello");
    server.signal(libc::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("the baseline did not exit within 5 s of SIGTERM");
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
}

/// `--server tokio` prints the line and echoes correctly.
#[test]
fn tokio_baseline_echoes() {
    baseline_echoes("tokio");
}

/// `--server monoio` prints the line and echoes correctly.
#[test]
fn monoio_baseline_echoes() {
    baseline_echoes("monoio");
}

/// Invalid arguments fail with a message and never print the `listening on` line.
#[test]
fn invalid_arguments_are_refused() {
    for args in [
        &["--addr", "127.0.0.1:0", "--threads", "0"][..],
        &[
            "--addr",
            "127.0.0.1:0",
            "--server",
            "tokio",
            "--threads",
            "2",
        ],
        &["--addr", "127.0.0.1:0", "--server", "nginx"],
        &["--addr", "not-an-address"],
        &["--addr", "127.0.0.1:0", "--driver", "kqueue"],
        &[
            "--addr",
            "127.0.0.1:0",
            "--server",
            "tokio",
            "--driver",
            "epoll",
        ],
    ] {
        let child = support::spawn_server(
            common::command(env!("CARGO_BIN_EXE_hoop"))
                .args(["serve", "echo"])
                .args(args),
            Stdio::piped(),
        );
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout: None,
        };
        let status = server
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{args:?} did not exit"));
        assert!(!status.success(), "{args:?} succeeded");
        let mut out = String::new();
        let mut err = String::new();
        if let Some(o) = server.child.stdout.as_mut() {
            o.read_to_string(&mut out).expect("stdout");
        }
        if let Some(e) = server.child.stderr.as_mut() {
            e.read_to_string(&mut err).expect("stderr");
        }
        assert_eq!(out, "", "{args:?} printed on stdout");
        assert!(!err.trim().is_empty(), "{args:?} gave no message");
    }
}
