//! `hoop bench file` on small test files in temporary directories: every engine of ours (the
//! tokio-fs and shared engines on a multi-thread tokio runtime included) completes with
//! verified I/O and no error, with O_DIRECT too; writes keep the file valid for
//! later reads; O_DIRECT on tmpfs and bad arguments are clear errors (exit 1), never a panic.
//! Nothing here asserts on speed.

mod support;

use hoop_test_support as common;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::records;

use serde_json::Value;

const HOOP: &str = env!("CARGO_BIN_EXE_hoop");
/// Our own engines (fio is left out: it may be missing, and it is not verified).
const OURS: &str = "sync,threadpool,linux-aio,uring,uring-fixed,raw-io-uring,tokio-fs,shared";

/// A directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "hoop-bench-file-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn hoop(args: &[&str]) -> Output {
    common::command(HOOP).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_no_panic(out: &Output) {
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "panic: {err}");
}

/// A small run: 8 MiB file, 0.3 s per engine, JSON lines.
fn small_run(dir: &Path, extra: &[&str]) -> Output {
    let dir = dir.to_str().unwrap();
    let mut args = vec![
        "bench", "file", "--json", "--dir", dir, "--size", "8M", "--secs", "0.3",
    ];
    args.extend_from_slice(extra);
    let out = hoop(&args);
    assert_no_panic(&out);
    out
}

/// Checks one record of a passing engine.
fn check_record(r: &Value, engine: &str, rw: &str, direct: bool) {
    for field in [
        "bench",
        "engine",
        "rw",
        "bs_bytes",
        "qd",
        "direct",
        "iops",
        "mib_s",
        "p50_us",
        "p99_us",
        "p999_us",
        "max_us",
        "ctx_switches",
        "ctx_voluntary",
        "ctx_involuntary",
        "cpu_user_s",
        "cpu_sys_s",
        "syscalls_per_io",
        "depth_mean",
        "ios",
        "errors",
        "secs",
        "file_bytes",
        "fs_type",
        "cached_pct",
        "verified",
    ] {
        assert!(r.get(field).is_some(), "{engine}: no {field} in {r}");
    }
    assert_eq!(r["bench"], "file");
    assert_eq!(r["engine"], engine);
    assert_eq!(r["rw"], rw);
    assert_eq!(r["bs_bytes"], 4096);
    assert_eq!(r["direct"], direct);
    assert_eq!(r["file_bytes"], 8 << 20);
    assert_eq!(r["errors"], 0, "{engine}: {r}");
    assert_eq!(r["verified"], true, "{engine}");
    assert!(r["iops"].as_f64().unwrap() > 0.0, "{engine}: {r}");
    assert!(r["ios"].as_u64().unwrap() > 0, "{engine}: {r}");
    assert!(r["p99_us"].as_f64().is_some(), "{engine}: {r}");
    // `qd` is the job's depth; `qd_effective` what the engine can have in flight.
    assert_eq!(r["qd"], 32, "{engine}");
    let expected_qd = if engine == "sync" { 1 } else { 32 };
    assert_eq!(r["qd_effective"], expected_qd, "{engine}");
    let ctx = r["ctx_voluntary"].as_u64().unwrap() + r["ctx_involuntary"].as_u64().unwrap();
    assert_eq!(r["ctx_switches"].as_u64().unwrap(), ctx);
    if engine == "sync" {
        assert_eq!(r["syscalls_per_io"], 1.0);
    }
    if engine == "threadpool" {
        assert!(r["syscalls_per_io"].is_null());
    }
    if engine == "tokio-fs" {
        // A multi-thread runtime's workers are not pinned, and say so.
        assert!(r["pinned_cpu"].is_null(), "{r}");
        let note = r["note"].as_str().unwrap();
        let how = if direct {
            "spawn_blocking"
        } else {
            "seek + read_exact"
        };
        assert!(note.contains(how), "{note}");
    }
}

fn check_all_ours(out: &Output, rw: &str, direct: bool) {
    let err = support::assert_success(out);
    let recs = records(out);
    let engines: Vec<&str> = OURS.split(',').collect();
    assert_eq!(recs.len(), engines.len(), "one line per engine: {recs:?}");
    for (r, e) in recs.iter().zip(&engines) {
        check_record(r, e, rw, direct);
    }
    assert!(
        err.contains("| engine |"),
        "the human table goes to stderr: {err}"
    );
}

#[test]
fn every_engine_of_ours_verifies_its_reads() {
    let dir = TempDir::new("buffered");
    let out = small_run(&dir.0, &["--engines", OURS]);
    check_all_ours(&out, "randread", false);
    let err = text(&out.stderr);
    assert!(err.contains("created"), "{err}");
    assert!(err.contains("resident"), "{err}");
    for r in records(&out) {
        assert!(r["cached_pct"].as_f64().is_some(), "{r}");
    }
    assert!(dir.0.join(format!("hoop-file-{}.dat", 8 << 20)).exists());
}

#[test]
fn direct_io_on_a_disk_file_system() {
    let dir = TempDir::new("direct");
    let out = small_run(&dir.0, &["--engines", OURS, "--direct"]);
    let err = text(&out.stderr);
    if !out.status.success() && (err.contains("O_DIRECT") || err.contains("memory-backed")) {
        eprintln!("SKIPPED: O_DIRECT is refused in {}: {err}", dir.0.display());
        return;
    }
    check_all_ours(&out, "randread", true);
    assert!(err.contains("O_DIRECT"), "{err}");
}

#[test]
fn writes_keep_the_file_valid_for_later_reads() {
    let dir = TempDir::new("writes");
    let w = small_run(&dir.0, &["--engines", OURS, "--rw", "randwrite"]);
    check_all_ours(&w, "randwrite", false);
    for r in records(&w) {
        assert_eq!(r["reads"], 0);
        assert!(r["writes"].as_u64().unwrap() > 0);
    }
    let rw = small_run(&dir.0, &["--engines", OURS, "--rw", "randrw"]);
    check_all_ours(&rw, "randrw", false);
    let r = small_run(&dir.0, &["--engines", OURS, "--rw", "randread"]);
    check_all_ours(&r, "randread", false);
    let err = text(&r.stderr);
    assert!(err.contains("reused: content check passed"), "{err}");
}

#[test]
fn direct_on_tmpfs_is_refused_by_name() {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let shm_is_tmpfs = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.len() > 2 && f[1] == "/dev/shm" && f[2] == "tmpfs"
    });
    if !shm_is_tmpfs {
        eprintln!("SKIPPED: /dev/shm is not tmpfs here");
        return;
    }
    let dir = format!("/dev/shm/hoop-bench-file-test-{}", std::process::id());
    let out = hoop(&[
        "bench",
        "file",
        "--dir",
        &dir,
        "--direct",
        "--size",
        "8M",
        "--secs",
        "0.2",
        "--engines",
        "sync",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_no_panic(&out);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("tmpfs"), "{err}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let dir = TempDir::new("bad");
    let d = dir.0.to_str().unwrap();
    for (args, needle) in [
        (vec!["--engines", "nosuch"], "nosuch"),
        (vec!["--bs", "100"], "multiple of 512"),
        (vec!["--qd", "0"], "--qd"),
        (vec!["--qd", "1,,4"], "--qd"),
        (vec!["--qd", "1,4,0"], "--qd"),
        (vec!["--size", "12x"], "--size"),
        (vec!["--size", "4k", "--bs", "8k"], "must not exceed"),
        (vec!["--rw", "seqread"], "--rw"),
    ] {
        let mut all = vec!["bench", "file", "--dir", d, "--secs", "0.2"];
        all.extend_from_slice(&args);
        let out = hoop(&all);
        assert_no_panic(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Nothing was created for bad arguments.
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}

/// `--qd 1,4` runs every engine at every depth (sync once: its depth is 1 by
/// nature), each record saying its depth and mean depth, and draws file_qd.svg with a line per
/// engine.
#[test]
fn a_depth_list_sweeps_every_engine_and_draws_the_chart() {
    let dir = TempDir::new("sweep");
    let out_dir = dir.0.join("report");
    let out = small_run(
        &dir.0,
        &[
            "--engines",
            "sync,uring,raw-io-uring",
            "--qd",
            "4,1",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let err = support::assert_success(&out);
    let recs = records(&out);
    let runs: Vec<(String, u64)> = recs
        .iter()
        .map(|r| {
            (
                r["engine"].as_str().unwrap().to_string(),
                r["qd"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = [
        ("sync", 1),
        ("uring", 1),
        ("raw-io-uring", 1),
        ("uring", 4),
        ("raw-io-uring", 4),
    ]
    .iter()
    .map(|(e, q)| (e.to_string(), *q))
    .collect();
    assert_eq!(runs, expected, "{err}");
    for r in &recs {
        assert_eq!(r["errors"], 0, "{r}");
        assert_eq!(r["verified"], true, "{r}");
        let depth = r["depth_mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("no depth: {r}"));
        let qd = r["qd_effective"].as_f64().unwrap();
        assert!(
            depth > 0.0 && depth <= qd + 0.5,
            "mean depth {depth} at QD {qd}: {r}"
        );
    }
    assert!(err.contains("| engine | QD 1 IOPS | QD 4 IOPS |"), "{err}");
    let svg = std::fs::read_to_string(out_dir.join("file_qd.svg")).expect("file_qd.svg");
    for needle in [
        "sync (QD 1 by nature)",
        "uring",
        "raw-io-uring",
        "queue depth",
    ] {
        assert!(svg.contains(needle), "{needle} not in the chart");
    }
}

/// `hoop bench fsread` with `args` after `--json --dir DIR`, the peers' binary at `peer_bin`.
fn fsread(dir: &Path, peer_bin: &Path, args: &[&str]) -> Output {
    let mut all = vec!["bench", "fsread", "--json", "--dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = common::command(HOOP)
        .args(&all)
        .env("HOOP_PEER_BIN", peer_bin)
        .output()
        .unwrap();
    assert_no_panic(&out);
    out
}

/// Checks one `hoop bench fsread` record: every field, verified reads, no error.
fn check_fsread_record(r: &Value, engine: &str, size: u64, reads: u64) {
    for field in [
        "bench",
        "engine",
        "file_bytes",
        "reads",
        "warmup",
        "errors",
        "first_error",
        "bytes_verified",
        "mean_us",
        "p50_us",
        "p99_us",
        "max_us",
        "secs",
        "workers",
        "setup",
    ] {
        assert!(r.get(field).is_some(), "{engine}: no {field} in {r}");
    }
    assert_eq!(r["bench"], "fsread");
    assert_eq!(r["engine"], engine);
    assert_eq!(r["file_bytes"], size, "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["reads"], reads, "{r}");
    assert_eq!(r["bytes_verified"], reads * size, "{r}");
    for q in ["mean_us", "p50_us", "p99_us", "max_us"] {
        assert!(r[q].as_f64().is_some_and(|v| v > 0.0), "{q}: {r}");
    }
    assert!(r["workers"].as_u64().unwrap() >= 1, "{r}");
}

/// Whole-file reads: shared and spawn-blocking run and verify every read of every size;
/// tokio-io-uring, with no peers' binary, is skipped with one line saying why (once, not per
/// size), and the run succeeds.
#[test]
fn fsread_verifies_whole_files_and_skips_tokio_io_uring_without_its_binary() {
    let dir = TempDir::new("fsread");
    let out = fsread(
        &dir.0,
        Path::new("/nonexistent/hoop-peer"),
        &[
            "--sizes", "64k,4k", "--reads", "5", "--warmup", "1", "--secs", "5",
        ],
    );
    let err = support::assert_success(&out);
    let recs = records(&out);
    let runs: Vec<(&str, u64)> = recs
        .iter()
        .map(|r| {
            (
                r["engine"].as_str().unwrap(),
                r["file_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            ("shared", 65536),
            ("spawn-blocking", 65536),
            ("shared", 4096),
            ("spawn-blocking", 4096)
        ],
        "{err}"
    );
    for r in &recs {
        check_fsread_record(
            r,
            r["engine"].as_str().unwrap(),
            r["file_bytes"].as_u64().unwrap(),
            5,
        );
    }
    let skips: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("tokio-io-uring: skipped: "))
        .collect();
    assert_eq!(skips.len(), 1, "{err}");
    assert!(skips[0].contains("HOOP_PEER_BIN"), "{err}");
    assert!(err.contains("| engine | file | reads | mean µs |"), "{err}");
    assert!(
        err.contains("whole read 64 KiB: shared/spawn-blocking mean latency"),
        "{err}"
    );
    for (args, needle) in [
        (vec!["--sizes", "1000"], "--sizes"),
        (vec!["--engines", "tokio-fs"], "tokio-fs"),
        (vec!["--reads", "0"], "--reads"),
    ] {
        let out = fsread(&dir.0, Path::new("/nonexistent/hoop-peer"), &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(text(&out.stderr).contains(needle), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// tokio's own io_uring `tokio::fs::read` through the peers' binary, when one is built already
/// (`HOOP_PEER_BIN`, or peers/target/release/hoop-peer): this test never builds it (no network,
/// no minutes on `cargo test`'s clock), and says so on stderr when it skips.
#[test]
fn fsread_tokio_io_uring_through_a_built_peer_binary() {
    let bin = std::env::var_os("HOOP_PEER_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/target/release/hoop-peer"),
        PathBuf::from,
    );
    if !bin.is_file() {
        eprintln!(
            "skipped: no built hoop-peer at {} (cd peers && cargo build --release --bin \
             hoop-peer, or HOOP_PEER_BIN=PATH)",
            bin.display()
        );
        return;
    }
    let dir = TempDir::new("fsread-peer");
    let out = fsread(
        &dir.0,
        &bin,
        &[
            "--sizes",
            "64k",
            "--reads",
            "5",
            "--warmup",
            "1",
            "--engines",
            "tokio-io-uring,shared",
        ],
    );
    let err = support::assert_success(&out);
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "{err}");
    check_fsread_record(&recs[0], "tokio-io-uring", 65536, 5);
    assert!(
        recs[0]["setup"]
            .as_str()
            .unwrap()
            .contains("enable_io_uring"),
        "{}",
        recs[0]
    );
    check_fsread_record(&recs[1], "shared", 65536, 5);
    assert!(
        err.contains("whole read 64 KiB: shared/tokio-io-uring mean latency"),
        "{err}"
    );
}
