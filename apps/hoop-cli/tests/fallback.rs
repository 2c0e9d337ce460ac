//! hoop where io_uring is blocked: the real `hoop` binary runs under a seccomp filter that makes
//! `io_uring_setup` fail with EPERM (as Docker's and containerd's default profiles do), installed
//! in the child between fork and exec.
//!
//! * `hoop serve echo` (driver auto) falls back to epoll, says why on stderr, prints exactly
//!   `listening on IP:PORT` on stdout, and echoes correctly;
//! * `hoop serve echo --driver uring` refuses to start: non-zero exit, the explained error on
//!   stderr, nothing on stdout;
//! * `hoop probe --json` reports driver "epoll" and the reason.
//!
//! Each test first checks that the filter really blocks io_uring in a child (`hoop probe` under
//! it must not report "uring"), so a filter that silently did nothing fails the test rather than
//! pass it for the wrong reason.

mod support;

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
use std::io::{self, BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const HOOP: &str = env!("CARGO_BIN_EXE_hoop");
/// Longest wait for the `listening on` line, or for a refusing child to exit.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Read/write timeout of the std clients.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ===== the seccomp filter =====

/// `hoop ARGS`, to be run with io_uring_setup blocked (PR_SET_NO_NEW_PRIVS, then the filter,
/// both in the child before exec; the filter survives exec).
fn blocked_hoop(args: &[&str]) -> Command {
    let filter = common::io_uring_setup_filter();
    let mut cmd = common::command(HOOP);
    cmd.args(args)
        .env_remove("HOOP_DRIVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the hook runs in the child between fork and exec. It allocates nothing: the filter
    // was built before the fork and is only borrowed; prctl and seccomp are raw system calls
    // (async-signal-safe), and io::Error::last_os_error only reads errno.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            let r = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            );
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Runs `cmd` to completion within `START_TIMEOUT` (killed otherwise) and returns its output.
fn output_within(mut cmd: Command) -> Output {
    let child = cmd.spawn().expect("spawn hoop under the seccomp filter");
    let mut guard = Guard(child);
    let read_all = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            let _ = tx.send(v);
        });
        rx
    };
    let out_rx = read_all(Box::new(guard.0.stdout.take().expect("piped stdout")));
    let err_rx = read_all(Box::new(guard.0.stderr.take().expect("piped stderr")));
    let status = wait_within(&mut guard.0, START_TIMEOUT).expect("the child did not exit");
    let stdout = out_rx
        .recv_timeout(START_TIMEOUT)
        .expect("stdout still open after the child exited");
    let stderr = err_rx
        .recv_timeout(START_TIMEOUT)
        .expect("stderr still open after the child exited");
    Output {
        status,
        stdout,
        stderr,
    }
}

fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills and reaps the child when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `hoop probe --json` under the filter, parsed.
fn blocked_probe() -> serde_json::Value {
    let out = output_within(blocked_hoop(&["probe", "--json"]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("bad JSON {stdout:?}: {e}"))
}

/// Fails the test unless the filter really blocks io_uring in a child.
fn assert_filter_blocks_io_uring() {
    let v = blocked_probe();
    assert_eq!(
        v["driver"], "epoll",
        "the filter did not block io_uring: {v}"
    );
}

// ===== an echo server under the filter =====

/// `hoop serve echo --addr 127.0.0.1:0` under the filter, killed when dropped; stderr is
/// collected in the background.
struct Server {
    guard: Guard,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let mut cmd = blocked_hoop(&["serve", "echo", "--addr", "127.0.0.1:0"]);
        cmd.args(extra);
        let child = cmd.spawn().expect("spawn hoop serve echo");
        let mut guard = Guard(child);
        let stdout = guard.0.stdout.take().expect("piped stdout");
        let mut err = guard.0.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let keep = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = err.read_retry(&mut buf) {
                if n == 0 {
                    break;
                }
                keep.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let res = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send(res);
            // Keep draining so that the server never blocks on a full pipe.
            let _ = io::copy(&mut reader, &mut io::sink());
        });
        let line = rx
            .recv_timeout(START_TIMEOUT)
            .unwrap_or_else(|_| {
                panic!(
                    "no `listening on` line within the time limit; stderr: {}",
                    stderr.lock().unwrap()
                )
            })
            .expect("read the server's stdout");
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|s| s.strip_suffix('\n'))
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; stderr: {}",
                    stderr.lock().unwrap()
                )
            });
        let addr: SocketAddr = addr.parse().expect("an IP:PORT after `listening on `");
        assert_ne!(addr.port(), 0, "the real port, not 0");
        Server {
            guard,
            addr,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// A std client with timeouts on everything.
fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s
}

/// One fresh connection, one echo of `payload` (retried on another after a reset); fails the
/// test unless it comes back intact.
fn check_echo(addr: SocketAddr, payload: &[u8]) {
    support::check_echo(addr, payload);
}

/// Deterministic bytes (xorshift).
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

// ===== tests =====

/// The test: io_uring blocked by seccomp, `auto` falls back to epoll, says why (EPERM,
/// seccomp) on stderr, and serves echo correctly.
#[test]
fn blocked_io_uring_falls_back_to_epoll_and_echoes() {
    assert_filter_blocks_io_uring();
    let server = Server::start(&[]);
    for (i, len) in [1usize, 100, 4096, 65_536, 300_000].into_iter().enumerate() {
        check_echo(server.addr, &payload(len, i as u64 + 1));
    }
    // Two connections at once, used out of order; one that closes without a byte. After a
    // reset, both again on fresh connections.
    common::resets::retry("two connections at once", |_| {
        let a = support::try_connect(server.addr)?;
        let b = support::try_connect(server.addr)?;
        drop(connect(server.addr));
        if support::echo_on(&b, b"second")? != b"second" {
            return Err(support::wrong("the second echo came back different"));
        }
        if support::echo_on(&a, b"first")? != b"first" {
            return Err(support::wrong("the first echo came back different"));
        }
        Ok(())
    });
    check_echo(server.addr, b"still serving");

    let mut guard = server.guard;
    assert!(
        guard.0.try_wait().expect("try_wait").is_none(),
        "server exited"
    );
    // Everything the server says at startup was written before its `listening on` line.
    let err = server.stderr.lock().unwrap().clone();
    let fallback = err
        .lines()
        .find(|l| l.contains("io_uring unavailable, using the epoll driver"))
        .unwrap_or_else(|| panic!("no fallback line on stderr: {err}"));
    assert!(fallback.contains("EPERM"), "{fallback}");
    assert!(fallback.contains("seccomp"), "{fallback}");
    assert_eq!(
        err.matches("io_uring unavailable").count(),
        1,
        "the fallback is said once: {err}"
    );
    assert!(err.contains("driver epoll"), "the driver is named: {err}");
    // SAFETY: kill(2) on our own child, not reaped yet (so the pid is not reused).
    let r = unsafe { libc::kill(guard.0.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0);
    let status = wait_within(&mut guard.0, Duration::from_secs(5)).expect("exit after SIGTERM");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// The same with two runtime threads: one fallback line, not one per thread.
#[test]
fn blocked_io_uring_falls_back_once_with_two_threads() {
    assert_filter_blocks_io_uring();
    let server = Server::start(&["--threads", "2"]);
    for seed in 0..8u64 {
        check_echo(server.addr, &payload(1000 + seed as usize * 777, seed));
    }
    let err = server.stderr();
    assert_eq!(
        err.matches("io_uring unavailable").count(),
        1,
        "one fallback line: {err}"
    );
    assert!(err.contains("driver epoll"), "{err}");
}

/// `--driver uring` where io_uring is blocked: no fallback, a non-zero exit with the reason and
/// the remedy on stderr, and nothing on stdout (no `listening on` line).
#[test]
fn forced_uring_refuses_to_start_with_the_reason() {
    assert_filter_blocks_io_uring();
    let out = output_within(blocked_hoop(&[
        "serve",
        "echo",
        "--addr",
        "127.0.0.1:0",
        "--driver",
        "uring",
    ]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "nothing on stdout"
    );
    assert!(err.contains("EPERM"), "{err}");
    assert!(err.contains("seccomp"), "{err}");
    assert!(err.contains("HOOP_DRIVER=epoll"), "the remedy: {err}");
    assert!(!err.contains("io_uring unavailable"), "no fallback: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `HOOP_DRIVER=uring` does the same as `--driver uring`.
#[test]
fn hoop_driver_uring_refuses_to_start_too() {
    assert_filter_blocks_io_uring();
    let mut cmd = blocked_hoop(&["serve", "echo", "--addr", "127.0.0.1:0"]);
    cmd.env("HOOP_DRIVER", "uring");
    let out = output_within(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert!(
        err.contains("EPERM") && err.contains("HOOP_DRIVER"),
        "{err}"
    );
}

/// `hoop probe --json` under the filter: driver epoll, and the reason names EPERM and seccomp;
/// the facts it reads without io_uring are still there.
#[test]
fn probe_reports_epoll_and_the_reason() {
    let v = blocked_probe();
    assert_eq!(v["driver"], "epoll", "{v}");
    let reason = v["reason"]
        .as_str()
        .unwrap_or_else(|| panic!("no reason: {v}"));
    assert!(reason.contains("EPERM"), "{reason}");
    assert!(reason.contains("seccomp"), "{reason}");
    assert!(v["setup_flags"].is_null(), "{v}");
    assert!(
        v["sq_entries"].is_null() && v["cq_entries"].is_null(),
        "{v}"
    );
    assert!(v["hoop_driver_env"].is_null(), "{v}");
    // No ring, so no feature bits or opcodes, and every hoop io_uring feature is off.
    assert!(v["features"].is_null() && v["opcodes"].is_null(), "{v}");
    let hoop = v["hoop_features"]
        .as_object()
        .unwrap_or_else(|| panic!("no hoop_features object: {v}"));
    for key in HOOP_FEATURES {
        assert_eq!(
            hoop.get(key),
            Some(&serde_json::Value::Bool(false)),
            "{key}: {v}"
        );
    }
    assert!(
        v["kernel"].as_str().is_some_and(|k| k.starts_with("Linux")),
        "{v}"
    );
    for key in ["io_uring_disabled", "memlock_soft", "memlock_hard"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
}

/// The keys of `hoop_features` in `hoop probe --json`.
const HOOP_FEATURES: [&str; 8] = [
    "multishot_accept",
    "multishot_recv",
    "buf_ring",
    "send_zc",
    "fixed_files",
    "registered_buffers",
    "sqpoll",
    "link_timeout",
];

/// `hoop probe --json` with io_uring working: the kernel's feature bits by name (all booleans,
/// the long-standing ones set), the supported opcodes (every one hoop needs, no duplicates),
/// and hoop's features consistent with them (SEND_ZC and LINK_TIMEOUT follow the opcode list).
fn check_uring_probe(v: &serde_json::Value) {
    let features = v["features"]
        .as_object()
        .unwrap_or_else(|| panic!("no features object: {v}"));
    assert!(features.values().all(|b| b.is_boolean()), "{v}");
    for bit in [
        "SINGLE_MMAP",
        "NODROP",
        "FAST_POLL",
        "EXT_ARG",
        "REG_REG_RING",
    ] {
        assert!(features.contains_key(bit), "{bit} missing: {v}");
    }
    // Set by every kernel hoop runs io_uring on (5.4 and later).
    assert_eq!(features["SINGLE_MMAP"], true, "{v}");
    assert_eq!(features["NODROP"], true, "{v}");
    let opcodes: Vec<&str> = v["opcodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no opcodes array: {v}"))
        .iter()
        .map(|o| {
            o.as_str()
                .unwrap_or_else(|| panic!("opcode {o} is not a string"))
        })
        .collect();
    for needed in [
        "NOP",
        "READ",
        "WRITE",
        "ACCEPT",
        "RECV",
        "SEND",
        "TIMEOUT",
        "ASYNC_CANCEL",
    ] {
        assert!(opcodes.contains(&needed), "{needed} missing: {opcodes:?}");
    }
    let mut unique = opcodes.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), opcodes.len(), "duplicates: {opcodes:?}");
    let hoop = v["hoop_features"]
        .as_object()
        .unwrap_or_else(|| panic!("no hoop_features object: {v}"));
    for key in HOOP_FEATURES {
        assert!(hoop.get(key).is_some_and(|b| b.is_boolean()), "{key}: {v}");
    }
    assert_eq!(hoop["send_zc"], opcodes.contains(&"SEND_ZC"), "{v}");
    assert_eq!(
        hoop["link_timeout"],
        opcodes.contains(&"LINK_TIMEOUT"),
        "{v}"
    );
    assert_eq!(hoop["multishot_recv"], hoop["buf_ring"], "{v}");
}

/// `hoop probe` without the filter (and its human form): where io_uring works here, it says
/// "uring" with the ring's flags and sizes, feature bits, opcodes and hoop's features; where it
/// does not, "epoll" with a reason. Either way the JSON and the lines agree.
#[test]
fn probe_without_the_filter_is_consistent() {
    let out = common::command(HOOP)
        .args(["probe", "--json"])
        .env("HOOP_DRIVER", "epoll")
        .output()
        .expect("run hoop probe");
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["hoop_driver_env"], "epoll", "{v}");
    match v["driver"].as_str() {
        Some("uring") => {
            assert!(v["reason"].is_null(), "{v}");
            assert!(
                v["setup_flags"].as_str().is_some_and(|f| !f.is_empty()),
                "{v}"
            );
            assert!(v["sq_entries"].as_u64().is_some_and(|n| n > 0), "{v}");
            assert!(v["cq_entries"].as_u64().is_some_and(|n| n > 0), "{v}");
            check_uring_probe(&v);
        }
        Some("epoll") => {
            assert!(v["reason"].as_str().is_some(), "{v}");
            assert!(v["features"].is_null() && v["opcodes"].is_null(), "{v}");
        }
        other => panic!("driver {other:?}: {v}"),
    }
    let human = common::command(HOOP)
        .arg("probe")
        .output()
        .expect("run hoop probe");
    assert!(human.status.success());
    let text = String::from_utf8_lossy(&human.stdout);
    let keys: Vec<&str> = text
        .lines()
        .map(|l| {
            l.split_once(": ")
                .unwrap_or_else(|| panic!("not key: value: {l:?}"))
                .0
        })
        .collect();
    let obj = v.as_object().expect("an object");
    assert_eq!(keys.len(), obj.len(), "{text}");
    for k in keys {
        assert!(obj.contains_key(k), "{k} is not a JSON field: {v}");
    }
    let driver = text
        .lines()
        .find_map(|l| l.strip_prefix("driver: "))
        .expect("a driver line");
    assert_eq!(Some(driver), v["driver"].as_str(), "{text}");
    // The human lists are the JSON's, comma-separated (the features that are on first).
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} line: {text}"))
            .to_string()
    };
    if let Some(opcodes) = v["opcodes"].as_array() {
        let names: Vec<&str> = opcodes.iter().filter_map(|o| o.as_str()).collect();
        assert_eq!(line("opcodes"), names.join(", "), "{text}");
    }
    if let Some(features) = v["features"].as_object() {
        let on = line("features");
        let on = on.split(" (off: ").next().unwrap_or_default();
        let listed: Vec<&str> = on.split(", ").collect();
        for (name, set) in features {
            assert_eq!(
                listed.contains(&name.as_str()),
                set == true,
                "{name}: {text}"
            );
        }
    }
    let hoop = line("hoop_features");
    for key in HOOP_FEATURES {
        assert!(
            hoop.contains(key),
            "{key} not on the hoop_features line: {hoop}"
        );
    }
}
