//! `hoop bench` against small in-process servers (std::net, 127.0.0.1:0, one thread per
//! connection): correct replies are counted, wrong or missing ones are errors, bad input is a
//! clear error, never a panic.
//!
//! Exit status of `hoop bench echo --addr`: 0 when every request was verified; 1 when the run
//! counted errors or verified no request at all (the result is printed all the same), on bad
//! input, or when the server cannot be reached.

mod support;

use hoop_test_support as common;
use std::io::{Read, Write};
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
        let n = match s.read(&mut buf) {
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
fn nop_prints_hoop_and_the_raw_ceiling() {
    let out = hoop(&[
        "bench",
        "nop",
        "-t",
        "1",
        "-T",
        "1",
        "-b",
        "8",
        "-n",
        "32",
        "--json",
        "--no-peers",
    ]);
    assert!(
        out.status.success(),
        "stderr: {}",
        common::stderr_text(&out)
    );
    let lines = common::json_lines(&out);
    assert_eq!(
        lines.len(),
        2,
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let engines: Vec<&str> = lines
        .iter()
        .map(|v| v["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["hoop", "raw-io-uring"]);
    for v in &lines {
        assert_eq!(v["bench"], "nop");
        assert_eq!(v["threads"], 1);
        assert_eq!(v["batch"], 8);
        assert_eq!(v["entries"], 32);
        assert!(v["nops"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(
            v["nops"].as_u64().unwrap() % 8,
            0,
            "whole batches only: {v}"
        );
        assert!(v["nops_per_sec"].as_f64().unwrap() > 0.0, "{v}");
        for field in [
            "batch_mean_us",
            "batch_p99_us",
            "batch_p9999_us",
            "batch_max_us",
        ] {
            assert!(v[field].as_f64().unwrap() > 0.0, "{field}: {v}");
        }
        let per_op = v["syscalls_per_op"].as_f64().unwrap();
        assert!(per_op > 0.0 && per_op <= 1.0, "{v}");
    }
}

#[test]
fn nop_shared_counts_verified_no_ops_beside_the_thread_per_core_and_raw_rings() {
    let out = hoop(&[
        "bench", "nop", "--shared", "-t", "2", "-b", "8", "-n", "64", "-T", "1", "--json",
    ]);
    let err = common::stderr_text(&out);
    assert!(out.status.success(), "stderr: {err}");
    let lines = common::json_lines(&out);
    let engines: Vec<&str> = lines
        .iter()
        .map(|v| v["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["hoop-shared", "hoop", "raw-io-uring"]);
    for v in &lines {
        assert_eq!(v["threads"], 2, "{v}");
        assert_eq!(v["batch"], 8, "{v}");
        assert_eq!(v["entries"], 64, "{v}");
        assert_eq!(v["errors"], 0, "{v}");
        assert!(v["nops"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["nops"].as_u64().unwrap() % 8, 0, "whole batches: {v}");
        for field in [
            "batch_mean_us",
            "batch_p50_us",
            "batch_p90_us",
            "batch_p99_us",
            "batch_p999_us",
            "batch_p9999_us",
            "batch_p99999_us",
            "batch_p999999_us",
            "batch_max_us",
        ] {
            assert!(v[field].as_f64().unwrap() > 0.0, "{field}: {v}");
        }
    }
    let shared = &lines[0];
    assert_eq!(shared["rings"], 1, "{shared}");
    assert!(shared["syscalls_per_op"].is_null(), "not counted: {shared}");
    assert!(lines[1]["rings"].is_null(), "one ring per thread");
    // The human table goes to stderr with --json, kbio's figures labelled as its own.
    assert!(err.contains("| hoop-shared | 2 | 1 |"), "{err}");
    assert!(err.contains("kbio's own machine, 2021"), "{err}");
}

#[test]
fn nop_rejects_bad_numbers() {
    for (args, needle) in [
        (["-t", "0"], "-t/--threads"),
        (["-T", "0"], "-T/--secs"),
        (["-b", "0"], "-b/--batch"),
        (["-n", "0"], "-n/--entries"),
    ] {
        let mut all = vec!["bench", "nop"];
        all.extend_from_slice(&args);
        assert_clean_failure(&hoop(&all), needle);
    }
    assert_clean_failure(&hoop(&["bench", "nop", "--rings", "2"]), "--shared");
    assert_clean_failure(
        &hoop(&["bench", "nop", "--shared", "--rings", "0"]),
        "--rings",
    );
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

#[test]
fn the_suite_writes_a_report() {
    let _faults = common::faults_off(
        &["econnreset"],
        "the suite's idle run counts every idle connection held: one the server resets is \
         one it did not hold (see bench_idle)",
    );
    let dir = std::env::temp_dir().join(format!("hoop-bench-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_arg = dir.to_string_lossy().into_owned();
    let out = hoop(&[
        "bench",
        "--servers",
        "tokio",
        "--secs",
        "0.3",
        "--nop-secs",
        "0.3",
        "--file-size",
        "16M",
        "--file-secs",
        "0.2",
        "--http-secs",
        "0.2",
        "--no-peers",
        "--fanout-secs",
        "0.2",
        "--idle-secs",
        "0.3",
        "--out",
        &dir_arg,
        "--json",
    ]);
    let err = common::stderr_text(&out);
    if !out.status.success() && err.contains("warning: file bench (O_DIRECT): --direct:") {
        // The file system of the target dir refuses O_DIRECT (tmpfs, some overlays): a
        // property of the machine, which the suite reports as a failed part.
        eprintln!("skip: the target dir's file system refuses O_DIRECT: {err}");
        return;
    }
    assert!(out.status.success(), "stderr: {err}");
    // Quick matrix: 2 conns x 2 lens x 2 rounds x 1 server and the 16 KiB cell's 2 rounds, then
    // 2 no-op engines and 2 rows of shared rings (1 and 4 threads), then the file engines (O_DIRECT, then buffered; fio's
    // only where fio is installed).
    let lines = common::json_lines(&out);
    let (file, others): (Vec<&Value>, Vec<&Value>) =
        lines.iter().partition(|v| v["bench"] == "file");
    let (http, others): (Vec<&Value>, Vec<&Value>) =
        others.into_iter().partition(|v| v["bench"] == "http");
    let (fanout, others): (Vec<&Value>, Vec<&Value>) =
        others.into_iter().partition(|v| v["bench"] == "fanout");
    // The cancellation counts: hoop, hoop-epoll and tokio (no peers) x 6 scenarios, each line
    // with sent = received + lost, tokio losing nothing (hoop's losses are counted, not judged).
    let (cancel, others): (Vec<&Value>, Vec<&Value>) =
        others.into_iter().partition(|v| v["bench"] == "cancel");
    // The idle-connection run: the suite's servers it knows (tokio here), 2,000 idle each,
    // every one held and none failed.
    let (idle, others): (Vec<&Value>, Vec<&Value>) =
        others.into_iter().partition(|v| v["bench"] == "idle");
    assert_eq!(idle.len(), 1, "{idle:?}");
    for v in &idle {
        assert_eq!(v["server"], "tokio", "{v}");
        assert_eq!(v["idle_conns"].as_u64(), Some(2000), "{v}");
        assert_eq!(v["idle_failed"].as_u64(), Some(0), "{v}");
        assert_eq!(v["active_errors"].as_u64(), Some(0), "{v}");
        assert!(v["active_rps"].as_f64().unwrap() > 0.0, "{v}");
    }
    let uring = if err.contains("cancel: hoop: skipped") {
        0
    } else {
        6
    };
    assert_eq!(cancel.len(), 12 + uring, "{cancel:?}");
    for v in &cancel {
        let (sent, received, lost) = (
            v["sent"].as_u64().unwrap(),
            v["received"].as_u64().unwrap(),
            v["lost"].as_u64().unwrap(),
        );
        assert_eq!(sent, received + lost, "{v}");
        if v["runtime"] == "tokio" {
            assert_eq!(lost, 0, "{v}");
        }
    }
    // The whole-file reads: shared and spawn-blocking at 64 KiB and 1 MiB (tokio-io-uring is a
    // peer: left out here), every read verified.
    let (fsread, others): (Vec<&Value>, Vec<&Value>) =
        others.into_iter().partition(|v| v["bench"] == "fsread");
    let runs: Vec<(&str, u64)> = fsread
        .iter()
        .map(|v| {
            (
                v["engine"].as_str().unwrap(),
                v["file_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            ("shared", 65536),
            ("spawn-blocking", 65536),
            ("shared", 1 << 20),
            ("spawn-blocking", 1 << 20)
        ],
        "{err}"
    );
    for v in &fsread {
        assert_eq!(v["errors"].as_u64(), Some(0), "{v}");
        assert!(v["reads"].as_u64().unwrap() > 0, "{v}");
    }
    assert_eq!(others.len(), 14, "{}", String::from_utf8_lossy(&out.stdout));
    let cells: Vec<(u64, u64)> = others
        .iter()
        .filter(|v| v["bench"] == "echo")
        .map(|v| {
            (
                v["conns"].as_u64().unwrap(),
                v["len_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cells.iter().filter(|c| **c == (50, 16384)).count(),
        2,
        "{cells:?}"
    );
    let shared: Vec<(u64, u64)> = others
        .iter()
        .filter(|v| v["engine"] == "hoop-shared")
        .map(|v| {
            (
                v["threads"].as_u64().unwrap(),
                v["entries"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shared, [(1, 64), (4, 1024)], "kbio's two configurations");
    for v in others.iter().filter(|v| v["bench"] == "nop") {
        assert_eq!(v["errors"], 0, "{v}");
        assert!(v["nops"].as_u64().unwrap() > 0, "{v}");
    }
    // The quick HTTP matrix: 6 configurations (the static mix included) x 2 rounds for each
    // server that ran (nginx only where installed); wrk's lines (where installed) are apart.
    let hoop_client: Vec<&&Value> = http.iter().filter(|v| v["client"] == "hoop").collect();
    for server in ["hoop", "hoop-epoll", "hyper"] {
        let n = hoop_client.iter().filter(|v| v["server"] == server).count();
        assert_eq!(n, 12, "{server}: {http:?}");
    }
    for v in &hoop_client {
        support::assert_only_reset_errors(v);
        assert!(v["requests"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["verified_bytes"].as_bool(), Some(true), "{v}");
    }
    // The short fan-out run: 3 servers x 2 rounds, unloaded and hogged (when 2 CPUs allow it).
    let hogged = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    for server in ["hoop", "hoop-epoll", "tokio"] {
        for hog in [false, true] {
            let n = fanout
                .iter()
                .filter(|v| v["server"] == server && v["hog"] == hog)
                .count();
            let want = if hog && !hogged { 0 } else { 2 };
            assert_eq!(n, want, "{server} hog={hog}: {fanout:?}");
        }
    }
    for v in &fanout {
        assert_eq!(v["conns"].as_u64(), Some(200), "{v}");
        assert_eq!(v["errors"].as_u64(), Some(0), "{v}");
        assert!(v["deliveries"].as_u64().unwrap() > 0, "{v}");
    }
    let engines = |direct: bool| -> Vec<&str> {
        file.iter()
            .filter(|v| v["direct"] == direct)
            .map(|v| v["engine"].as_str().unwrap())
            .collect()
    };
    for e in [
        "sync",
        "linux-aio",
        "uring",
        "uring-fixed",
        "tokio-fs",
        "shared",
    ] {
        assert!(
            engines(false).contains(&e),
            "buffered {e}: {:?}",
            engines(false)
        );
        assert!(
            engines(true).contains(&e),
            "O_DIRECT {e}: {:?}",
            engines(true)
        );
    }
    for v in &file {
        assert_eq!(v["errors"].as_u64(), Some(0), "{v}");
        assert!(v["ios"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["bs_bytes"].as_u64(), Some(4096), "{v}");
        assert_eq!(v["qd"].as_u64(), Some(32), "{v}");
        assert_eq!(
            v["qd_effective"].as_u64(),
            Some(if v["engine"] == "sync" { 1 } else { 32 }),
            "{v}"
        );
    }
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let all: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(all, lines, "results.json holds every measurement");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for needle in [
        "CPU:",
        "Kernel:",
        "io_uring:",
        "Pinning:",
        "Date:",
        "Command:",
    ] {
        assert!(report.contains(needle), "missing {needle} in report.md");
    }
    assert!(report.contains("## File random reads"), "{report}");
    assert!(report.contains("uring-fixed/linux-aio IOPS"), "{report}");
    assert!(report.contains("shared/tokio-fs CPU per I/O"), "{report}");
    assert!(report.contains("### Whole-file reads"), "{report}");
    assert!(
        report.contains("- tokio-io-uring: skipped: the peers are left out (--no-peers)"),
        "{report}"
    );
    assert!(
        report.contains(
            "whole read 64 KiB: shared/tokio-io-uring mean latency (target <= 0.5x): n/a"
        ),
        "{report}"
    );
    assert!(report.contains("shared/uring IOPS"), "{report}");
    assert!(
        err.contains("whole-file reads: tokio-io-uring: skipped: the peers are left out"),
        "{err}"
    );
    assert!(report.contains("- no-op shared, 4 thread(s)"), "{report}");
    assert!(report.contains("kbio's own machine, 2021"), "{report}");
    assert!(report.contains("## HTTP static files"), "{report}");
    assert!(report.contains("- http: hoop (io_uring)"), "{report}");
    assert!(report.contains("## Fan-out (chat broadcast)"), "{report}");
    assert!(report.contains("## Cancellation in select!"), "{report}");
    assert!(report.contains("## Idle connections"), "{report}");
    assert!(
        report.contains("| runtime | scenario | sent | received | lost |"),
        "{report}"
    );
    assert!(
        report.contains("hoop (io_uring)/tokio: deliveries/s"),
        "{report}"
    );
    for svg in [
        "echo_rps.svg",
        "echo_latency.svg",
        "nop.svg",
        "file_iops.svg",
        "http_rps.svg",
    ] {
        let s = std::fs::read_to_string(dir.join(svg)).unwrap();
        assert!(s.contains("<svg"), "{svg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
