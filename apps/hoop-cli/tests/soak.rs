//! `hoop soak`: a short run passes on this machine, prints its JSON contract, and draws soak.svg.

use hoop_test_support as common;

#[test]
fn a_short_soak_passes_with_its_json_and_chart() {
    let out_dir = std::env::temp_dir().join(format!("hoop-soak-test-{}", std::process::id()));
    let out = common::command(env!("CARGO_BIN_EXE_hoop"))
        .args(["soak", "--secs", "3", "--seed", "1", "--json", "--out"])
        .arg(&out_dir)
        .output()
        .expect("run hoop soak");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hoop soak failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["passed"], true);
    assert_eq!(v["secs"], 3);
    assert_eq!(v["seed"], 1);
    assert!(v["failures"].as_array().unwrap().is_empty());
    let loads = v["loads"].as_array().unwrap();
    for kind in ["echo", "http", "file"] {
        let verified: u64 = loads
            .iter()
            .filter(|l| l["load"].as_str().unwrap().starts_with(kind))
            .map(|l| l["bytes_verified"].as_u64().unwrap())
            .sum();
        assert!(verified > 0, "{kind}: no byte verified");
    }
    let samples = v["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{} samples", samples.len());
    for field in [
        "t_secs",
        "fds",
        "rss_kib",
        "in_flight",
        "ops_per_sec",
        "children",
    ] {
        assert!(!samples[0][field].is_null(), "sample field {field}");
    }
    assert_eq!(v["start"]["fds"], v["end"]["fds"]);
    assert!(v["machine"]["kernel"].as_str().unwrap().contains("Linux"));
    assert!(stderr.contains("soak: PASSED"), "{stderr}");
    let svg = std::fs::read_to_string(out_dir.join("soak.svg")).expect("soak.svg");
    assert!(svg.starts_with("<svg") && svg.contains("RSS"));
    let _ = std::fs::remove_dir_all(&out_dir);
}
