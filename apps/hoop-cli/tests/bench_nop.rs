//! `hoop bench nop`: hoop's no-op rings beside the raw io_uring ceiling and the shared rings,
//! every no-op verified; bad numbers are a clear error, never a panic.

mod support;

use hoop_test_support as common;
use support::run_hoop as hoop;

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
        support::assert_refused(&hoop(&all), &all, needle);
    }
    for (args, needle) in [
        (&["bench", "nop", "--rings", "2"][..], "--shared"),
        (&["bench", "nop", "--shared", "--rings", "0"][..], "--rings"),
    ] {
        support::assert_refused(&hoop(args), args, needle);
    }
}
