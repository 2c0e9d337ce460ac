//! `hoop bench echo` against small in-process servers (std::net, 127.0.0.1:0, one thread per
//! connection): correct replies are counted, wrong or missing ones are errors, bad input is a
//! clear error, never a panic; and side by side against hoop's own servers. (`hoop bench nop`
//! and the suite have test files of their own: `bench_nop.rs`, `bench_suite.rs`.)
//!
//! Exit status of `hoop bench echo --addr`: 0 when every request was verified; 1 when the run
//! counted errors or verified no request at all (the result is printed all the same), on bad
//! input, or when the server cannot be reached.

mod support;

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::Value;

const HOOP: &str = env!("CARGO_BIN_EXE_hoop");

/// How a test server treats each connection.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Echo every byte.
    Echo,
    /// Echo every byte with the lowest bit flipped.
    Corrupt,
    /// Read one chunk, then close without answering.
    Close,
    /// Read everything, answer nothing.
    Silent,
}

/// A server on 127.0.0.1:0 that stops accepting when dropped. Connection threads end when
/// their peer closes, or after 1 s without data (a bounded read timeout).
struct TestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl TestServer {
    fn start(behaviour: Behaviour) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        thread::spawn(move || {
            // Bounded: at most 60 s of accepting, even if the test forgot to stop us.
            for _ in 0..60_000 {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                match listener.accept() {
                    Ok((s, _)) => {
                        thread::spawn(move || serve(s, behaviour));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        TestServer { addr, stop }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(mut s: TcpStream, behaviour: Behaviour) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match s.read_retry(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        match behaviour {
            Behaviour::Echo => {}
            Behaviour::Corrupt => buf[..n].iter_mut().for_each(|b| *b ^= 1),
            Behaviour::Close => return,
            Behaviour::Silent => continue,
        }
        if s.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

fn hoop(args: &[&str]) -> Output {
    common::command(HOOP).args(args).output().unwrap()
}

/// Exit code 1 with `needle` in stderr, and no panic.
fn assert_clean_failure(out: &Output, needle: &str) {
    let err = common::stderr_text(out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
}

fn echo_json(addr: SocketAddr, conns: &str) -> (Output, Value) {
    let addr = addr.to_string();
    let out = hoop(&[
        "bench", "echo", "--addr", &addr, "-c", conns, "-l", "100", "-t", "1", "--json",
    ]);
    let v = support::one_record(&out);
    (out, v)
}

#[test]
fn echo_against_a_correct_server_counts_requests_and_no_errors() {
    let server = TestServer::start(Behaviour::Echo);
    let (out, v) = echo_json(server.addr, "4");
    assert!(
        out.status.success(),
        "stderr: {}",
        common::stderr_text(&out)
    );
    assert_eq!(v["bench"], "echo");
    assert_eq!(v["conns"], 4);
    assert_eq!(v["len_bytes"], 100);
    assert!(v["requests"].as_u64().unwrap() > 0, "{v}");
    support::assert_only_reset_errors(&v);
    assert!(v["rps"].as_f64().unwrap() > 0.0, "{v}");
    for field in ["p50_us", "p99_us", "p999_us", "max_us"] {
        assert!(v[field].as_f64().unwrap() > 0.0, "{field}: {v}");
    }
    for field in ["server_cpu_us_per_req", "syscalls_per_req", "client_bound"] {
        assert!(v.get(field).is_some(), "missing {field}: {v}");
    }
}

#[test]
fn echo_against_a_server_that_echoes_wrong_bytes_counts_only_errors() {
    let server = TestServer::start(Behaviour::Corrupt);
    let (out, v) = echo_json(server.addr, "2");
    assert_eq!(v["requests"].as_u64(), Some(0), "{v}");
    assert!(v["errors"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["p50_us"].is_null(),
        "no latency without a verified request: {v}"
    );
    assert!(
        v["first_error"].as_str().unwrap().contains("differs"),
        "{v}"
    );
    assert_clean_failure(&out, "error");
}

#[test]
fn echo_against_a_server_that_closes_connections_counts_errors() {
    let server = TestServer::start(Behaviour::Close);
    let (out, v) = echo_json(server.addr, "2");
    assert_eq!(v["requests"].as_u64(), Some(0), "{v}");
    assert!(v["errors"].as_u64().unwrap() > 0, "{v}");
    // Documented: the result is printed, and the exit status is 1 because of the errors.
    assert_clean_failure(&out, "error");
}

#[test]
fn echo_against_a_server_that_never_answers_is_not_a_success() {
    let server = TestServer::start(Behaviour::Silent);
    let (out, v) = echo_json(server.addr, "2");
    assert_eq!(v["requests"].as_u64(), Some(0), "{v}");
    assert_eq!(v["rps"].as_f64(), Some(0.0), "{v}");
    assert_clean_failure(&out, "no request was verified");
}

#[test]
fn echo_to_an_unreachable_address_is_a_clear_error() {
    // A port that was just free: nothing listens there.
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let out = hoop(&["bench", "echo", "--addr", &addr, "-t", "1", "--json"]);
    assert_clean_failure(&out, "cannot connect to");
    assert!(common::json_lines(&out).is_empty(), "no fake result");
}

#[test]
fn echo_rejects_bad_numbers() {
    let server = TestServer::start(Behaviour::Echo);
    let addr = server.addr.to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["-c", "0"], "-c/--conns must be at least 1"),
        (&["-t", "0"], "-t/--secs must be more than 0"),
        (&["-l", "0"], "-l/--len must be at least 1"),
        (&["-l", "17000000"], "16 MiB"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["bench", "echo", "--addr", &addr];
        args.extend_from_slice(extra);
        let out = hoop(&args);
        assert_clean_failure(&out, needle);
    }
}

#[test]
fn echo_side_by_side_rejects_a_single_round_and_unknown_servers() {
    let out = hoop(&["bench", "echo", "--rounds", "1", "-t", "1"]);
    assert_clean_failure(&out, "--rounds must be at least 2");
    let out = hoop(&["bench", "echo", "--servers", "nginx", "-t", "1"]);
    assert_clean_failure(&out, "unknown server");
    let out = hoop(&["bench", "echo", "--servers", "hoop-kqueue", "-t", "1"]);
    assert_clean_failure(&out, "hoop-epoll");
}

#[test]
fn side_by_side_alternates_servers_and_measures_them() {
    let out = hoop(&[
        "bench",
        "echo",
        "--servers",
        "hoop,hoop-epoll,tokio",
        "-c",
        "4",
        "-l",
        "64",
        "-t",
        "1",
        "--rounds",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "stderr: {}",
        common::stderr_text(&out)
    );
    let lines = common::json_lines(&out);
    let order: Vec<(String, u64)> = lines
        .iter()
        .map(|v| {
            (
                v["server"].as_str().unwrap().to_string(),
                v["round"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("hoop", 0),
        ("hoop-epoll", 0),
        ("tokio", 0),
        ("hoop", 1),
        ("hoop-epoll", 1),
        ("tokio", 1),
    ];
    assert_eq!(
        order,
        expected.map(|(s, r)| (s.to_string(), r)).to_vec(),
        "A B C A B C order"
    );
    // The table (human output, on stderr with --json) labels the two hoop drivers and gives
    // hoop(io_uring)/hoop(epoll).
    let err = common::stderr_text(&out);
    for needle in [
        "| hoop (io_uring) |",
        "| hoop (epoll) |",
        "hoop (io_uring)/this req/s",
        "hoop (epoll)/this req/s",
    ] {
        assert!(err.contains(needle), "missing {needle:?}: {err}");
    }
    for v in &lines {
        assert!(v["requests"].as_u64().unwrap() > 0, "{v}");
        support::assert_only_reset_errors(v);
        assert!(v["server_cpu_us_per_req"].as_f64().is_some(), "{v}");
        assert!(v["client_bound"].is_boolean(), "{v}");
    }
}
