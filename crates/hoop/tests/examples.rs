//! Every example of `crates/hoop/examples` (but the README's echo server, which serves port
//! 7000 forever) runs here, on io_uring and on epoll (`HOOP_DRIVER`), each in its bounded
//! self-test mode, with a time limit; the proxy also runs in serve mode and must exit 0 on
//! SIGINT. `cargo test` builds the examples next to the test binaries
//! (`target/<profile>/examples/`); a missing one fails with the command to build it.

use hoop_test_support as common;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|p| p.join("examples").join(name))
        .unwrap();
    assert!(
        path.exists(),
        "{} is not built: run `cargo build --release -p hoop --examples` (cargo test builds it)",
        path.display()
    );
    path
}

fn drivers() -> Vec<&'static str> {
    if let Some(reason) = hoop::__private::uring_unavailable() {
        hoop::__private::skip(hoop::DriverKind::Uring, reason);
        vec!["epoll"]
    } else {
        vec!["uring", "epoll"]
    }
}

/// Waits for `child` with the time limit (killing it past the limit) and returns its output.
fn finish(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} did not finish in {LIMIT:?}; stdout: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why the chat and proxy examples run without injected resets: a chat client's subject is
/// its one connection (every line broadcast to it and the `bye` on SIGTERM are counted on
/// it, and a chat server keeps no history to tell a client that comes back), and the proxy's
/// self-test clients count every message through their one proxied connection, whose
/// upstream connection is tied to it (a message in flight when either hop is reset is lost
/// with the pair, and the example relays bytes, it does not retell them). The lines example's
/// client asks again on a new connection.
const EXAMPLE_CLIENTS: &str =
    "chat: every broadcast line and the bye are counted on each client's one \
     connection, and a chat keeps no history to retell; proxy: each message is counted through \
     one proxied connection tied to its upstream one, and a reset on either hop loses it";

/// Runs example `name` with `args` on `driver` and returns its stdout; fails on a non-zero
/// exit.
fn run(name: &str, args: &[&str], driver: &str) -> String {
    let _faults = ["chat", "proxy"]
        .contains(&name)
        .then(|| common::faults_off(&["econnreset"], EXAMPLE_CLIENTS));
    let child = common::command(example(name))
        .args(args)
        .env("HOOP_DRIVER", driver)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let what = format!("{name} {args:?} on {driver}");
    let out = finish(child, &what);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status,
    );
    // A client that came back after a reset is right only while resets are injected.
    assert!(
        common::resets::injected() || !stderr.contains("after resets"),
        "{what}: a reset without injected resets: {stderr}"
    );
    stdout
}

#[test]
fn copy_example_copies_and_benchmarks() {
    let dir = std::env::temp_dir();
    for driver in drivers() {
        let out = run("copy", &["--bench", "4"], driver);
        assert!(out.contains("ratio hoop/std"), "{out}");
        let src = dir.join(format!("hoop-ex-copy-src-{}-{driver}", std::process::id()));
        let dst = dir.join(format!("hoop-ex-copy-dst-{}-{driver}", std::process::id()));
        let data: Vec<u8> = (0..100_003u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&src, &data).unwrap();
        let out = run(
            "copy",
            &[src.to_str().unwrap(), dst.to_str().unwrap()],
            driver,
        );
        assert!(out.contains("copied 100003 bytes"), "{out}");
        assert!(std::fs::read(&dst).unwrap() == data);
        let _ = std::fs::remove_file(&src);
        let _ = std::fs::remove_file(&dst);
    }
}

/// The trait-copy benchmark in a small, bounded run (4 MiB, one round, one extra buffer
/// size): every copy checked byte for byte (it exits non-zero otherwise). It runs on both
/// drivers itself.
#[test]
fn file_copy_traits_example_copies_through_the_traits() {
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let out = run("file_copy_traits", &["4", dir, "1", "16"], drivers()[0]);
    assert!(out.contains("futures::io::copy, 16 KiB"), "{out}");
}

#[test]
fn proxy_example_verifies_every_message() {
    for driver in drivers() {
        let out = run("proxy", &["--self-test", "10", "50"], driver);
        assert!(out.contains("verified 500 of 500 messages"), "{out}");
    }
}

/// Serve mode: `listening on ADDR`, traffic through it, then SIGINT: exit 0. Under injected
/// resets the traffic is asked again on a new connection (the upstream echo takes each).
#[test]
fn proxy_example_stops_on_ctrl_c() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for driver in drivers() {
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let up_addr = upstream.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let echo = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                for conn in upstream.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut s) = conn else { continue };
                    let Ok(mut r) = s.try_clone() else { continue };
                    let _ = std::io::copy(&mut r, &mut s);
                }
            })
        };
        let mut child = common::command(example("proxy"))
            .args(["127.0.0.1:0", &up_addr.to_string()])
            .env("HOOP_DRIVER", driver)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line: {line:?}"))
            .to_string();
        common::resets::retry("a message through the proxy", |_| {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(&addr)?;
            c.set_read_timeout(Some(LIMIT))?;
            c.write_all(b"through the proxy")?;
            let mut back = [0u8; 17];
            c.read_exact(&mut back)?;
            assert_eq!(&back, b"through the proxy");
            Ok(())
        });
        // SAFETY: kill(2) has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        child.stdout = Some(stdout.into_inner());
        let out = finish(child, &format!("proxy serve on {driver}"));
        assert!(out.status.success(), "proxy on {driver}: {}", out.status);
        assert!(String::from_utf8_lossy(&out.stdout).contains("stopping on Ctrl-C"));
        // Wakes the upstream's accept so that it sees the stop.
        stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(up_addr);
        echo.join().unwrap();
    }
}

#[test]
fn lines_example_answers_every_request() {
    for driver in drivers() {
        let out = run("lines", &["--self-test", "40"], driver);
        assert!(out.contains("40 of 40 answers correct"), "{out}");
        assert!(out.contains("end of stream after QUIT: true"), "{out}");
    }
}

/// The chat on `run_per_core` (one reuseport group, owned halves, deadlines,
/// broadcast): every line to every client, the idle cut, and `bye` to everyone on SIGTERM.
#[test]
fn chat_example_broadcasts_every_line_and_says_bye_on_sigterm() {
    for driver in drivers() {
        let out = run("chat", &["--self-test", "200", "5"], driver);
        assert!(out.contains("verified 200000 of 200000 lines"), "{out}");
        assert!(out.contains("bye to 200 of 200 clients"), "{out}");
        assert!(out.contains("idle client cut"), "{out}");
    }
}

/// The chat's rate mode (its writer writes through the traits): every delivery verified, in
/// order per sender (no speed is asserted).
#[test]
fn chat_example_rate_mode_verifies_every_delivery() {
    for driver in drivers() {
        let out = run("chat", &["--self-test-rate", "20", "1"], driver);
        assert_every_delivery_verified(&out, driver);
    }
}

/// The rate mode with its lag as small as its window (4): the server's backlog is then 80
/// lines, and no writer may ever fall past it, however unevenly the machine runs the server's
/// two threads (before the lag, the senders of one thread ran ahead of the other thread's
/// writers until those were cut, and their lines never came).
#[test]
fn chat_example_rate_mode_keeps_every_writer_within_the_backlog() {
    for driver in drivers() {
        let out = run("chat", &["--self-test-rate", "20", "1", "4", "4"], driver);
        assert_every_delivery_verified(&out, driver);
    }
}

fn assert_every_delivery_verified(out: &str, driver: &str) {
    assert!(out.contains("messages/s "), "{driver}: {out}");
    let verified = out
        .lines()
        .find(|l| l.starts_with("verified "))
        .unwrap_or_else(|| panic!("{driver}: no verified line: {out}"));
    let words: Vec<&str> = verified.split_whitespace().collect();
    assert_eq!(words.get(1), words.get(3), "{driver}: {out}");
    assert!(verified.ends_with(" 0 errors"), "{driver}: {out}");
}

#[test]
fn service_example_mixes_sockets_interval_and_signals() {
    for driver in drivers() {
        let out = run("service", &["--self-test"], driver);
        assert!(
            out.contains("self-test: tcp, udp and status answered"),
            "{out}"
        );
        assert!(out.contains("stopped by SIGTERM"), "{out}");
        assert!(out.matches("tick:").count() >= 2, "{out}");
    }
}

#[test]
fn remote_spawn_example_spawns_from_other_threads_on_every_wake_path() {
    // The example runs every wake path itself (MSG_RING and eventfd on io_uring, epoll).
    let out = run("remote_spawn", &["--self-test"], drivers()[0]);
    assert!(out.contains("epoll wake=EventFd throughput"), "{out}");
    if hoop::__private::uring_unavailable().is_none() {
        assert!(out.contains("uring wake=EventFd throughput"), "{out}");
    }
    assert!(out.matches("verified spawns/s").count() >= 2, "{out}");
}
