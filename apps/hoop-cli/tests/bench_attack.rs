//! `hoop bench http --attack`, in its smallest form: 50 slowloris and 50 idle
//! attackers, one-second runs, against hoop on epoll and on io_uring (not nginx, not wrk).
//! Checks that the table and one JSON line per server come out with every figure present and
//! sane; never a speed.

use std::process::Output;

mod support;

use hoop_test_support::resets;
use support::run_hoop as hoop;

use serde_json::Value;

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn attack_mode_reports_every_figure_per_server() {
    let dir = std::env::temp_dir().join(format!("hoop-bench-attack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.to_string_lossy().to_string();
    let args = [
        "bench",
        "http",
        "--attack",
        "--slowloris",
        "50",
        "--idle",
        "50",
        "-c",
        "4",
        "-t",
        "1",
        "--servers",
        "hoop-epoll,hoop",
        "--dir",
        &dir_s,
        "--json",
    ];
    let out = hoop(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let lines = json_lines(&out);
    let uring_missing = stderr.contains("io_uring") && stderr.contains("cannot");
    let expected: &[&str] = if uring_missing {
        &["hoop-epoll"]
    } else {
        &["hoop-epoll", "hoop"]
    };
    if !uring_missing {
        assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    }
    assert_eq!(lines.len(), expected.len(), "{stderr}");
    for (v, server) in lines.iter().zip(expected) {
        assert_eq!(v["bench"], "http-attack", "{v}");
        assert_eq!(v["server"], *server, "{v}");
        assert_eq!(
            (v["slowloris"].as_u64(), v["idle"].as_u64()),
            (Some(50), Some(50))
        );
        assert_eq!(v["legit_conns"], 4);
        assert_eq!(v["file_bytes"], 1024);
        for f in [
            "legit_req_per_sec_unattacked",
            "legit_req_per_sec_attacked",
            "attacked_ratio",
            "p99_ms_unattacked",
            "p99_ms_attacked",
            "p99_ms_first_second",
            "rss_bytes_per_held_connection",
            "server_cpu_ms_attack_connect",
            "legit_connect_ms_attacked",
        ] {
            let x = v[f]
                .as_f64()
                .unwrap_or_else(|| panic!("{f} is a number: {v}"));
            assert!(x.is_finite(), "{f}: {v}");
        }
        assert!(
            v["legit_req_per_sec_unattacked"].as_f64().unwrap() > 0.0,
            "{v}"
        );
        assert!(
            v["legit_req_per_sec_attacked"].as_f64().unwrap() > 0.0,
            "{v}"
        );
        assert_eq!(v["legit_errors_unattacked"], 0, "{v}");
        assert!(v["stalled"].is_boolean(), "{v}");
        let per_second = v["legit_requests_per_second_attacked"].as_array().unwrap();
        assert_eq!(per_second.len(), 1, "one bucket per second: {v}");
        let held = v["held_connections"].as_u64().unwrap();
        let closed = v["closed_by_server"].as_u64().unwrap();
        if resets::injected() {
            // An attacker's connection a reset ended (on either side) is one neither connected,
            // answered nor held: fewer of each, never more. The legitimate clients reconnect.
            assert!(v["attackers_connected"].as_u64().unwrap() <= 100, "{v}");
            assert!(v["idle_answered"].as_u64().unwrap() <= 50, "{v}");
            assert!(held + closed <= 100, "{v}");
        } else {
            assert_eq!(v["attackers_connected"], 100, "{v}");
            assert_eq!(v["idle_answered"], 50, "{v}");
            // The default timeouts (10 s header, 60 s idle) outlast a one-second run.
            assert_eq!((held, closed), (100, 0), "{v}");
            assert_eq!(v["legit_reconnects_unattacked"], 0, "{v}");
            assert_eq!(v["legit_reconnects_attacked"], 0, "{v}");
        }
        assert!(v["held_slowloris"].as_u64().unwrap() <= held, "{v}");
        for f in ["rss_bytes_before", "rss_bytes_during", "rss_bytes_after"] {
            assert!(v[f].as_u64().unwrap() > 1 << 20, "{f}: {v}");
        }
        assert!(v["fresh_requests"].as_u64().unwrap() > 0, "{v}");
        assert!(v["fresh_connect_max_ms"].as_f64().is_some(), "{v}");
        assert!(
            v["listen_overflows"].is_u64() || v["listen_overflows"].is_null(),
            "{v}"
        );
        assert!(v["pinned"].is_boolean(), "{v}");
    }
    // The table is on stderr with --json.
    assert!(
        stderr.contains("## Under attack: 50 slowloris + 50 idle"),
        "{stderr}"
    );
    assert!(stderr.contains("hoop (epoll)"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn attack_flags_are_checked() {
    let out = hoop(&["bench", "http", "--slowloris", "5"]);
    assert!(!out.status.success(), "--slowloris needs --attack");
    let out = hoop(&["bench", "http", "--attack", "--url", "http://127.0.0.1:1/f"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--attack takes"));
    let out = hoop(&[
        "bench",
        "http",
        "--attack",
        "--servers",
        "hoop",
        "--idle",
        "999999",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most"));
}
