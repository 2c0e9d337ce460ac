//! `hoop bench cancel`: the JSON contract (one line per runtime and scenario, with
//! `sent = received + lost`), tokio (the reference) losing nothing, the peers skipped with a
//! line when their binary is missing, and bad arguments refused cleanly. Every run is small (a
//! few hundred clients, a megabyte, a few thousand datagrams, a few files and streams): a
//! second or two. hoop, on both drivers, loses nothing either (cancel safety with tokio's
//! contract).

mod support;

use hoop_test_support as common;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use serde_json::Value;

const HOOP: &str = env!("CARGO_BIN_EXE_hoop");

const SCENARIOS: [&str; 6] = [
    "accept",
    "read",
    "udp_recv_from",
    "unix_recv",
    "drop_after_write",
    "stream_drop_after_write",
];

/// A directory for the files of drop_after_write, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("hoop-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn hoop(args: &[&str], env: &[(&str, &str)]) -> Output {
    // An injected ring setup failure is retried, but the reason to skip a run is not the
    // bench's to judge.
    let _faults = common::faults_off(
        &["setup"],
        "it counts every connection, byte and datagram the runtime hands out",
    );
    let mut cmd = common::command(HOOP);
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// A small run's arguments, writing files into `dir`.
fn small<'a>(dir: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "bench",
        "cancel",
        "--json",
        "--clients",
        "200",
        "--bytes",
        "1M",
        "--datagrams",
        "2000",
        "--files",
        "10",
        "--file-bytes",
        "64k",
        "--streams",
        "10",
        "--stream-bytes",
        "64k",
        "--dir",
        dir,
    ];
    v.extend_from_slice(extra);
    v
}

/// The contract of one line; returns (runtime, scenario).
fn check_line(v: &Value) -> (String, String) {
    assert_eq!(v["bench"], "cancel", "{v}");
    let runtime = v["runtime"].as_str().expect("runtime").to_string();
    let scenario = v["scenario"].as_str().expect("scenario").to_string();
    assert!(
        [
            "hoop",
            "hoop-epoll",
            "tokio",
            "monoio",
            "compio",
            "tokio-uring"
        ]
        .contains(&runtime.as_str()),
        "{v}"
    );
    assert!(SCENARIOS.contains(&scenario.as_str()), "{v}");
    let unit = v["unit"].as_str().expect("unit");
    assert!(["connections", "bytes", "datagrams"].contains(&unit), "{v}");
    if v["supported"] == false {
        assert!(v["note"].as_str().is_some_and(|n| !n.is_empty()), "{v}");
        for k in ["sent", "received", "lost"] {
            assert!(v[k].is_null(), "{v}");
        }
    } else {
        assert_eq!(v["supported"], true, "{v}");
        let sent = v["sent"].as_u64().expect("sent");
        let received = v["received"].as_u64().expect("received");
        let lost = v["lost"].as_u64().expect("lost");
        assert!(sent > 0, "{v}");
        assert_eq!(sent, received + lost, "{v}");
    }
    (runtime, scenario)
}

#[test]
fn every_runtime_and_scenario_has_a_line_and_hoop_and_tokio_lose_nothing() {
    // Its subject is each connection itself (accepted, answered, or lost in a `select!`): a
    // connection an injected reset ends would be a loss of the fault plan, not of the runtime.
    let _faults = common::faults_off(
        &["econnreset"],
        "its subject is every connection the runtime hands out, each counted as answered or \
         lost: a reset one would be the fault plan's loss, not the runtime's",
    );
    let dir = TempDir::new("bench-cancel");
    let d = dir.0.to_string_lossy().into_owned();
    let out = hoop(&small(&d, &["--no-peers"]), &[]);
    let err = common::stderr_text(&out);
    assert!(out.status.success(), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines = common::json_lines(&out);
    let got: Vec<(String, String)> = lines.iter().map(check_line).collect();
    // hoop on io_uring is skipped with a line where io_uring cannot run.
    let mut runtimes = vec!["hoop", "hoop-epoll", "tokio"];
    if err.contains("cancel: hoop: skipped") {
        runtimes.remove(0);
    }
    let want: Vec<(String, String)> = runtimes
        .iter()
        .flat_map(|r| {
            SCENARIOS
                .iter()
                .map(move |s| (r.to_string(), s.to_string()))
        })
        .collect();
    assert_eq!(got, want, "{err}");
    for v in &lines {
        assert_eq!(v["supported"], true, "{v}");
        assert_eq!(
            v["lost"].as_u64(),
            Some(0),
            "hoop and tokio lose nothing: {v}"
        );
        let want = match v["scenario"].as_str().unwrap() {
            "accept" => 200,
            "read" => 1 << 20,
            "udp_recv_from" | "unix_recv" => 2000,
            _ => 10 * 64 * 1024,
        };
        assert_eq!(v["sent"].as_u64(), Some(want), "{v}");
    }
    // The human table goes to stderr with --json.
    assert!(
        err.contains("| runtime | scenario | sent | received | lost |"),
        "{err}"
    );
    // Nothing is left behind in the files' directory.
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}

#[test]
fn peers_without_their_binary_are_skipped_with_a_line() {
    let dir = TempDir::new("bench-cancel-peers");
    let d = dir.0.to_string_lossy().into_owned();
    let out = hoop(
        &small(
            &d,
            &[
                "--runtimes",
                "monoio,tokio,compio,tokio-uring",
                "--scenarios",
                "unix_recv,udp_recv_from",
            ],
        ),
        &[("HOOP_PEER_BIN", "/nonexistent/hoop-peer")],
    );
    let err = common::stderr_text(&out);
    assert!(out.status.success(), "stderr: {err}");
    for peer in ["monoio", "compio", "tokio-uring"] {
        assert!(
            err.contains(&format!("cancel: {peer}: skipped:")) && err.contains("HOOP_PEER_BIN"),
            "{peer}: {err}"
        );
    }
    let lines = common::json_lines(&out);
    let got: Vec<(String, String)> = lines.iter().map(check_line).collect();
    assert_eq!(
        got,
        [
            ("tokio".to_string(), "unix_recv".to_string()),
            ("tokio".to_string(), "udp_recv_from".to_string())
        ],
        "{err}"
    );
}

#[test]
fn bad_arguments_are_refused_cleanly() {
    for (args, needle) in [
        (
            &["--runtimes", "nginx"][..],
            "unknown name \"nginx\" in --runtimes",
        ),
        (
            &["--scenarios", "write"][..],
            "unknown name \"write\" in --scenarios",
        ),
        (&["--clients", "0"][..], "--clients must be in 1..="),
        (&["--bytes", "0"][..], "--bytes must be 1 byte to 4 GiB"),
        (
            &["--file-bytes", "lots"][..],
            "--file-bytes: \"lots\" is not a size",
        ),
        (
            &["--runtimes", "monoio", "--no-peers"][..],
            "--no-peers leaves no runtime",
        ),
    ] {
        let mut all = vec!["bench", "cancel"];
        all.extend_from_slice(args);
        let out = hoop(&all, &[]);
        support::assert_refused(&out, args, needle);
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
