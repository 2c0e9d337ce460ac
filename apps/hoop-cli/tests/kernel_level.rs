//! `hoop probe` at each kernel level (`HOOP_KERNEL_LEVEL`): the level is printed (a line and
//! the JSON's `kernel_level`), what it lacks is listed and reported absent (opcodes, feature
//! bits, hoop's features, setup flags), and every line and field of a native probe is still
//! there.

use hoop_test_support as common;

use serde_json::Value;

const HOOP: &str = env!("CARGO_BIN_EXE_hoop");

fn probe(level: Option<&str>, json: bool) -> std::process::Output {
    let mut cmd = common::command(HOOP);
    cmd.arg("probe").env_remove("HOOP_DRIVER");
    if json {
        cmd.arg("--json");
    }
    match level {
        Some(l) => cmd.env("HOOP_KERNEL_LEVEL", l),
        None => cmd.env_remove("HOOP_KERNEL_LEVEL"),
    };
    let out = cmd.output().expect("run hoop probe");
    assert!(
        out.status.success(),
        "hoop probe at {level:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn probe_json(level: Option<&str>) -> Value {
    let out = probe(level, true);
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

fn absent(v: &Value) -> Vec<String> {
    v["kernel_level_absent"]
        .as_array()
        .expect("kernel_level_absent is an array")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect()
}

#[test]
fn probe_names_the_level_and_what_it_lacks() {
    // The probe sets up its own ring: an injected setup failure would only say "epoll".
    let _faults = common::faults_off(&["setup"], "it checks the driver each level picks");
    let native = probe_json(None);
    assert_eq!(native["kernel_level"], "native", "{native}");
    assert!(absent(&native).is_empty(), "{native}");
    let native_uring = native["driver"] == "uring";
    for level in ["5.10", "5.15", "5.19", "6.1", "6.10"] {
        let v = probe_json(Some(level));
        assert_eq!(v["kernel_level"], level, "{v}");
        // Every field of the native probe is there, in the same order.
        assert_eq!(keys(&v), keys(&native), "{level}");
        let lacks = absent(&v);
        let lacks_name = |name: &str| lacks.iter().any(|a| a.starts_with(&format!("{name} (")));
        let hoop = &v["hoop_features"];
        match level {
            "5.10" => {
                assert!(lacks_name("MKDIRAT"), "{level}: {lacks:?}");
                assert_eq!(v["driver"], "epoll", "{v}");
                let reason = v["reason"].as_str().expect("a reason");
                // SOCKET (5.19) is not needed: sockets are made with socket(2) without it.
                assert!(
                    reason.contains(&format!("HOOP_KERNEL_LEVEL={level}"))
                        && reason.contains("MKDIRAT 5.15")
                        && !reason.contains("SOCKET"),
                    "{reason}"
                );
                assert!(v["features"].is_null() && v["opcodes"].is_null(), "{v}");
                continue;
            }
            // io_uring without SOCKET: sockets from socket(2).
            "5.15" => assert!(lacks_name("SOCKET"), "{level}: {lacks:?}"),
            _ => assert!(!lacks_name("SOCKET"), "{level}: {lacks:?}"),
        }
        if !native_uring {
            continue;
        }
        assert_eq!(v["driver"], "uring", "{v}");
        let opcodes: Vec<&str> = v["opcodes"]
            .as_array()
            .expect("opcodes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        // Nothing the level lacks is reported there.
        for name in &lacks {
            let name = name.split(" (").next().unwrap();
            assert!(!opcodes.contains(&name), "{level}: {name} in {opcodes:?}");
            if let Some(bit) = name.strip_prefix("FEAT_") {
                assert_eq!(v["features"][bit], false, "{level}: {bit}");
            }
            if let Some(flag) = name.strip_prefix("SETUP_") {
                let flags = v["setup_flags"].as_str().unwrap();
                assert!(!flags.split('|').any(|f| f == flag), "{level}: {flags}");
            }
        }
        let before_6_0 = level == "5.15" || level == "5.19";
        assert_eq!(lacks_name("SEND_ZC"), before_6_0, "{level}");
        assert_eq!(lacks_name("SETUP_DEFER_TASKRUN"), before_6_0, "{level}");
        assert_eq!(
            lacks_name("FEAT_RECVSEND_BUNDLE"),
            level != "6.10",
            "{level}"
        );
        assert!(lacks_name("PBUF_RING_INC"), "{level}");
        for feature in ["send_zc", "multishot_recv", "buf_ring"] {
            if before_6_0 {
                assert_eq!(hoop[feature], false, "{level}: {feature}");
            }
        }
        assert_eq!(hoop["buf_ring_inc"], false, "{level}");
        assert_eq!(hoop["msg_ring_wake"], false, "{level}");
        if level == "5.15" {
            assert_eq!(hoop["multishot_accept"], false, "{level}");
        } else {
            assert_eq!(
                hoop["multishot_accept"],
                native["hoop_features"]["multishot_accept"]
            );
        }
        if level != "6.10" {
            assert_eq!(hoop["recv_bundle"], false, "{level}");
        }
        // The newest features, all from 6.12 on: none at these levels, each saying why.
        let paths = &v["hoop_paths"];
        for name in [
            "min_wait",
            "no_iowait",
            "resize_rings",
            "mem_region",
            "epoll_wait",
            "zcrx",
            "fixed_vec",
        ] {
            assert_eq!(paths[name]["available"], false, "{level}: {name}");
            assert_eq!(paths[name]["used"], false, "{level}: {name}");
            let reason = paths[name]["reason"].as_str().expect("a reason");
            assert!(
                reason.contains("needs Linux 6.1") || reason.contains("epoll driver"),
                "{level}: {name}: {reason}"
            );
        }
        // SEND_ZC came with 6.0.
        let zc = matches!(level, "6.1" | "6.10") && native_uring;
        assert_eq!(paths["send_zc"]["available"], zc, "{level}");
    }
    // Natively, each has its three fields, and what is used is available.
    let paths = native["hoop_paths"].as_object().expect("hoop_paths");
    assert_eq!(paths.len(), 8, "{native}");
    for (name, p) in paths {
        let (available, used) = (p["available"].as_bool(), p["used"].as_bool());
        assert!(available.is_some() && used.is_some(), "{name}: {p}");
        assert!(
            !used.unwrap() || available.unwrap(),
            "{name}: used, not available"
        );
        assert!(
            p["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{name}"
        );
    }
}

/// The human form has the line (`kernel_level: 6.1 (HOOP_KERNEL_LEVEL)`, or `native`), and a
/// line per JSON field, as without a level.
#[test]
fn the_level_has_a_line() {
    let _faults = common::faults_off(&["setup"], "it checks the driver each level picks");
    for (level, want) in [
        (None, "kernel_level: native"),
        (Some("6.1"), "kernel_level: 6.1 (HOOP_KERNEL_LEVEL)"),
        (Some("5.15"), "kernel_level: 5.15 (HOOP_KERNEL_LEVEL)"),
    ] {
        let out = probe(level, false);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.lines().any(|l| l == want), "{level:?}: {text}");
        assert_eq!(
            text.lines().count(),
            keys(&probe_json(level)).len(),
            "{level:?}: {text}"
        );
    }
}

/// An invalid level: the probe still prints (it is how a user finds out), says the level is
/// invalid, and no driver starts.
#[test]
fn an_invalid_level_is_reported() {
    let v = probe_json(Some("4.19"));
    assert_eq!(v["kernel_level"], "4.19", "{v}");
    assert_eq!(v["driver"], "none", "{v}");
    let reason = v["reason"].as_str().expect("a reason");
    assert!(
        reason.contains("HOOP_KERNEL_LEVEL=\"4.19\"")
            && reason.contains("5.10, 5.15, 5.19, 6.1, 6.10, 6.12, 6.13 or native"),
        "{reason}"
    );
    let out = probe(Some("4.19"), false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kernel_level: 4.19 (HOOP_KERNEL_LEVEL, invalid: no driver starts)"),
        "{text}"
    );
}
