//! `hoop bench http` against a running `hoop serve http`: the JSON contract, keep-alive,
//! connection per request, pipelining, byte verification, and clear failures; and the
//! smallest side-by-side run of issue 22's pair (hyper-shared against hyper-tokio).

mod support;

use hoop_test_support as common;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use support::run_hoop as hoop;

use serde_json::Value;

struct Setup {
    dir: PathBuf,
    server: Child,
    addr: SocketAddr,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn setup(name: &str) -> Setup {
    let dir = std::env::temp_dir().join(format!("hoop-bench-http-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("f.bin"), &data).unwrap();
    let mut other = data.clone();
    other[69_999] ^= 1;
    std::fs::write(dir.join("other.bin"), &other).unwrap();
    let mut server = common::command(env!("CARGO_BIN_EXE_hoop"))
        .args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    Setup { dir, server, addr }
}

/// `hoop bench http --url URL -c 2 -t 0.3 --json EXTRA`: a short run against a server the
/// test started.
fn against_url(url: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench", "http", "--url", url, "-c", "2", "-t", "0.3", "--json",
    ];
    args.extend_from_slice(extra);
    hoop(&args)
}

/// `hoop bench http --servers SERVERS --cells CELLS --rounds 2 -t SECS EXTRA --json` with a
/// directory of its own (`tag`), removed after; asserts exit status 0 and returns the JSON
/// records and the human text (stderr with `--json`).
fn bench_http_json(
    tag: &str,
    [servers, cells, secs]: [&str; 3],
    extra: &[&str],
) -> (Vec<Value>, String) {
    let dir = std::env::temp_dir().join(format!("hoop-bench-http-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut all = vec!["bench", "http", "--servers", servers, "--cells", cells];
    all.extend(["--rounds", "2", "-t", secs]);
    all.extend_from_slice(extra);
    all.extend(["--json", "--dir", dir.to_str().unwrap()]);
    let out = hoop(&all);
    let _ = std::fs::remove_dir_all(&dir);
    let err = common::stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    (common::json_lines(&out), err)
}

fn json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .expect("a JSON line");
    serde_json::from_str(line).unwrap()
}

#[test]
fn json_contract_keep_alive_close_and_pipeline() {
    let s = setup("modes");
    let url = format!("http://{}/f.bin", s.addr);
    let verify = s.dir.join("f.bin");
    let verify = verify.to_str().unwrap();
    for (extra, mode, pipeline) in [
        (vec![], "keep-alive", 1),
        (vec!["--close"], "close", 1),
        (vec!["--pipeline", "4"], "keep-alive", 4),
        (vec!["--verify", verify], "keep-alive", 1),
    ] {
        let mut args = vec![
            "bench", "http", "--url", &url, "-c", "4", "-t", "0.3", "--json",
        ];
        args.extend_from_slice(&extra);
        let out = hoop(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {err}");
        let v = json(&out);
        for field in [
            "bench",
            "server",
            "file_bytes",
            "conns",
            "mode",
            "rps",
            "mib_s",
            "p99_us",
            "errors",
            "server_cpu_us_per_req",
            "client_bound",
        ] {
            assert!(v.get(field).is_some(), "{field} in {v}");
        }
        assert_eq!(v["bench"], "http");
        assert_eq!(v["file_bytes"].as_u64(), Some(70_000), "{v}");
        assert_eq!(v["conns"].as_u64(), Some(4), "{v}");
        assert_eq!(v["mode"], mode, "{v}");
        assert_eq!(v["pipeline"].as_u64(), Some(pipeline), "{v}");
        support::assert_only_reset_errors(&v);
        assert!(v["requests"].as_u64().unwrap() > 0, "{v}");
        assert!(v["rps"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["mib_s"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["client_bound"].is_boolean(), "{v}");
    }
}

#[test]
fn wrong_bodies_and_missing_files_are_errors_not_requests() {
    let s = setup("errors");
    // Every byte compared: the last one differs.
    let url = format!("http://{}/other.bin", s.addr);
    let verify = s.dir.join("f.bin");
    let out = against_url(&url, &["--verify", verify.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["requests"].as_u64(), Some(0), "{v}");
    assert!(v["errors_by_kind"]["body"].as_u64().unwrap() > 0, "{v}");
    // A missing file: the probe says so.
    let url = format!("http://{}/nope.bin", s.addr);
    let out = hoop(&["bench", "http", "--url", &url, "-t", "0.2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));
}

#[test]
fn bad_arguments_are_refused() {
    for (args, needle) in [
        (vec!["--url", "ftp://x/"], "http://"),
        (
            vec!["--url", "http://127.0.0.1:1/", "--pipeline", "0"],
            "--pipeline",
        ),
        (
            vec!["--url", "http://127.0.0.1:1/", "--close", "--pipeline", "2"],
            "--pipeline",
        ),
        (vec!["--url", "http://127.0.0.1:1/", "-t", "0"], "-t/--secs"),
        (vec!["--url", "http://127.0.0.1:1/"], "cannot connect"),
        (vec!["--servers", "apache"], "apache"),
        (vec!["--rounds", "1"], "--rounds"),
        (vec!["--cells", "2k-c5"], "--cells"),
        (vec!["--cells", "1k-c0"], "--cells"),
        (vec!["--cells", "mix-cx"], "--cells"),
        (vec!["--cells", "1k-c5", "--full"], "--cells"),
        (vec!["--cells", "1k-c5", "-c", "3"], "--cells"),
        // wrk runs beside the side-by-side runs only.
        (vec!["--url", "http://127.0.0.1:1/", "--wrk"], "--wrk"),
        // HTTPS: checked before any tool is looked for.
        (vec!["--h2"], "--tls"),
        (
            vec!["--tls", "--url", "http://127.0.0.1:1/"],
            "--tls runs its own",
        ),
        (vec!["--tls", "--close"], "--close"),
        (vec!["--tls", "--cells", "2k"], "unknown TLS cell"),
        (vec!["--tls", "--servers", "apache"], "apache"),
        (vec!["--tls", "--rounds", "1"], "--rounds"),
        (vec!["--tls", "-c", "0"], "conn"),
    ] {
        let mut all = vec!["bench", "http"];
        all.extend_from_slice(&args);
        let out = hoop(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn server_pid_gives_cpu_and_context_switches_per_request() {
    let s = setup("pid");
    let url = format!("http://{}/f.bin", s.addr);
    let pid = s.server.id().to_string();
    let out = against_url(&url, &["--server-pid", &pid]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v = json(&out);
    assert!(v["server_cpu_us_per_req"].is_number(), "{v}");
    assert!(v["ctx_switches_per_req"].as_f64().unwrap() >= 0.0, "{v}");
    assert!(err.contains("ctx switches/req"), "{err}");
    assert!(v["server_threads"].is_object(), "{v}");
    assert!(err.contains("server threads, per request"), "{err}");
}

/// The smallest version of issue 22's comparison: both hyper servers, one small cell, the
/// minimum two rounds of 0.3 s. Checks the output's shape, never a speed.
#[test]
fn hyper_shared_against_hyper_tokio_side_by_side() {
    let (results, err) = bench_http_json("pair", ["hyper-shared,hyper-tokio", "1k-c4", "0.3"], &[]);
    for server in ["hyper-shared", "hyper-tokio"] {
        let runs: Vec<&Value> = results.iter().filter(|v| v["server"] == server).collect();
        assert_eq!(runs.len(), 2, "{server}: {results:?}");
        for v in runs {
            assert_eq!(v["file_bytes"].as_u64(), Some(1024), "{v}");
            assert_eq!(v["conns"].as_u64(), Some(4), "{v}");
            support::assert_only_reset_errors(v);
            assert!(v["requests"].as_u64().unwrap() > 0, "{v}");
            assert!(v["verified_bytes"].as_bool().unwrap(), "{v}");
            assert!(v["ctx_switches_per_req"].as_f64().unwrap() >= 0.0, "{v}");
            assert_eq!(v["pinned"], false, "{v}");
            assert!(v["server_cpus"].is_string(), "{v}");
            assert!(
                v["server_threads"]["tokio-rt-worker"]["threads"]
                    .as_u64()
                    .unwrap()
                    >= 1,
                "{v}"
            );
        }
    }
    // The human text (on stderr with --json): the table's column, the pinning line, and the
    // per-round pair table with its medians and targets.
    for needle in [
        "ctx switches/req",
        "hyper on hoop::shared",
        "hyper on tokio net",
        "pinning: ",
        "unpinned",
        "| 1k-c4 | 1 |",
        "| 1k-c4 | 2 |",
        "| 1k-c4 | **median** |",
        "Issue 22's targets",
        "Where the server's time goes",
    ] {
        assert!(err.contains(needle), "{needle:?} in {err}");
    }
}

/// `--netns-mtu 1500`: the side-by-side run once on the machine's loopback and once more inside
/// a network namespace of its own whose loopback MTU is 1500, each JSON line saying which;
/// where no namespace can be made, a line says it was skipped and the first run stands.
#[test]
fn netns_mtu_runs_again_inside_a_namespace_of_its_own() {
    let (results, err) =
        bench_http_json("netns", ["hoop", "1k-c4", "0.3"], &["--netns-mtu", "1500"]);
    let hoop_client = |v: &&Value| v["server"] == "hoop" && v["client"] == "hoop";
    let first: Vec<&Value> = results
        .iter()
        .filter(hoop_client)
        .filter(|v| v["loopback_mtu"] != 1500)
        .collect();
    assert_eq!(
        first.len(),
        2,
        "two rounds on the machine's loopback: {results:?}"
    );
    if err.contains("netns loopback MTU 1500: skipped:") {
        eprintln!("skip: no network namespace here: {err}");
        return;
    }
    assert!(
        err.contains("inside a network namespace of its own, loopback MTU 1500"),
        "{err}"
    );
    let inside: Vec<&Value> = results
        .iter()
        .filter(hoop_client)
        .filter(|v| v["loopback_mtu"] == 1500)
        .collect();
    assert_eq!(
        inside.len(),
        2,
        "two rounds inside the namespace: {results:?}"
    );
    for v in first.iter().chain(inside.iter()) {
        assert!(v["requests"].as_u64().unwrap() > 0, "{v}");
        support::assert_only_reset_errors(v);
    }
}

/// The static mix: 20 files of 3-300 KB with `.gz` variants, every request with
/// `Accept-Encoding: br, gzip`, every response verified against the file or its variant.
/// hoop's server only, two short rounds; checks the output's shape, never a speed.
#[test]
fn static_mix_cell_verifies_every_response() {
    let dir = std::env::temp_dir().join(format!("hoop-bench-http-{}-mix", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = hoop(&[
        "bench",
        "http",
        "--servers",
        "hoop",
        "--cells",
        "mix-c50",
        "--rounds",
        "2",
        "-t",
        "1",
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let gz = dir.join("root/mix/index.html.gz").is_file();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let results = common::json_lines(&out);
    let runs: Vec<&Value> = results
        .iter()
        .filter(|v| v["server"] == "hoop" && v["client"] == "hoop")
        .collect();
    assert_eq!(runs.len(), 2, "{results:?}");
    for v in runs {
        assert_eq!(v["mix"], true, "{v}");
        assert_eq!(v["conns"].as_u64(), Some(50), "{v}");
        support::assert_only_reset_errors(v);
        assert!(v["verified_bytes"].as_bool().unwrap(), "{v}");
        let requests = v["requests"].as_u64().unwrap();
        assert!(requests > 0, "{v}");
        // The mean of sizes from 3 KB to 300 KB.
        let mean = v["file_bytes"].as_u64().unwrap();
        assert!((3_000..300_000).contains(&mean), "{v}");
        let enc = &v["requests_by_encoding"];
        let (id, gzip) = (enc["identity"].as_u64(), enc["gzip"].as_u64());
        assert_eq!(id.unwrap() + gzip.unwrap(), requests, "{v}");
    }
    if !gz {
        assert!(err.contains("gzip not installed"), "{err}");
    }
    assert!(err.contains("static mix (20 files, 3-300 KB)"), "{err}");
}

#[test]
fn cells_accept_the_mix_and_refuse_nonsense() {
    for bad in [
        "mix",
        "mix-50",
        "mix-c0",
        "mixed-c50",
        "mix-c50-x",
        "3k-c50",
    ] {
        let out = hoop(&["bench", "http", "--cells", bad, "--servers", "hoop"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains("--cells"), "{bad}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

fn wrk_installed() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("wrk").is_file()))
}

/// `--wrk`: wrk right after the load generator against every server, in every cell and round
/// (a keep-alive cell, a close cell, the static mix), its req/s on the load generator's line
/// and in the table. Skipped, with a line, where wrk is not installed.
#[test]
fn wrk_runs_beside_the_load_generator_in_every_cell() {
    if !wrk_installed() {
        eprintln!("skip: wrk is not installed (apt-get install wrk)");
        return;
    }
    let (results, err) =
        bench_http_json("wrk", ["hoop", "1k-c4,1k-c4-close,mix-c4", "1"], &["--wrk"]);
    for (mode, mix) in [
        ("keep-alive", false),
        ("close", false),
        ("keep-alive", true),
    ] {
        let of = |client: &str| -> Vec<&Value> {
            results
                .iter()
                .filter(|v| {
                    v["client"] == client && v["mode"] == mode && v["mix"] == mix && v["conns"] == 4
                })
                .collect()
        };
        let (ours, wrk) = (of("hoop"), of("wrk"));
        assert_eq!(ours.len(), 2, "{mode} mix {mix}: {results:?}");
        assert_eq!(wrk.len(), 2, "{mode} mix {mix}: {results:?}");
        for (a, w) in ours.iter().zip(&wrk) {
            support::assert_only_reset_errors(a);
            assert!(w["requests"].as_u64().unwrap() > 0, "{w}");
            assert_eq!(a["wrk_req_per_sec"], w["rps"], "{a} {w}");
            assert!(a["wrk_req_per_sec"].as_f64().unwrap() > 0.0, "{a}");
        }
    }
    assert!(err.contains("| wrk req/s |"), "{err}");
    assert!(
        err.contains("wrk -t1 -c50 against hoop (io_uring)"),
        "{err}"
    );
}
