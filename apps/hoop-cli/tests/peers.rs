//! The peers (issues 21 and 22) from the outside, without building them: `cargo test` must stay
//! lean, so every run here points `HOOP_PEER_BIN` at a file that does not exist, or
//! `HOOP_PEERS_DIR` at a project cargo refuses at once. The peers' names are accepted
//! everywhere, and a peer that cannot be built or run is skipped with one line saying why; the
//! run goes on and succeeds with what did run.

mod support;

use hoop_test_support as common;
use std::path::PathBuf;
use std::process::Output;
use support::records;

use serde_json::Value;

const HOOP: &str = env!("CARGO_BIN_EXE_hoop");
const PEERS: [&str; 5] = [
    "monoio",
    "compio",
    "tokio-uring",
    "glommio",
    "tokio-io-uring",
];

/// A directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("hoop-peers-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `hoop ARGS` with the peers' binary missing.
fn without_peer_binary(args: &[&str]) -> Output {
    common::command(HOOP)
        .args(args)
        .env("HOOP_PEER_BIN", "/nonexistent/hoop-peer")
        .output()
        .unwrap()
}

/// `hoop bench file --json` on an 8 MiB file in `dir`, 0.2 s per engine, and `extra`.
fn small_file_job<'a>(dir: &'a TempDir, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["bench", "file", "--json", "--dir", dir.path()];
    args.extend(["--size", "8M", "--secs", "0.2"]);
    args.extend_from_slice(extra);
    args
}

fn engines_of(recs: &[Value]) -> Vec<String> {
    recs.iter()
        .map(|r| r["engine"].as_str().unwrap().to_string())
        .collect()
}

/// Every peer's name is an engine of `hoop bench file`; with no binary each is skipped with a
/// line naming the reason, and hoop's own engine still runs and passes.
#[test]
fn file_peers_are_accepted_and_skipped_with_a_line_when_their_binary_is_missing() {
    let dir = TempDir::new("file");
    let mut engines = vec!["uring"];
    engines.extend(PEERS);
    let list = engines.join(",");
    let out = without_peer_binary(&small_file_job(&dir, &["--engines", &list]));
    let err = support::assert_success(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(engines_of(&records(&out)), ["uring"], "{err}");
    for peer in PEERS {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("{peer}: skipped: ")))
            .unwrap_or_else(|| panic!("no skip line for {peer}: {err}"));
        assert!(line.contains("HOOP_PEER_BIN"), "{line}");
    }
}

/// A peers' build that fails (here: a manifest cargo refuses at once) is one skip line per
/// peer, after cargo's own output; the run succeeds with what ran.
#[test]
fn a_failed_peer_build_is_a_skip_line_not_a_failed_run() {
    let dir = TempDir::new("build");
    let peers = TempDir::new("broken-peers");
    std::fs::write(peers.0.join("Cargo.toml"), "this is not a manifest [").unwrap();
    let out = common::command(HOOP)
        .args(small_file_job(&dir, &["--engines", "sync,monoio,glommio"]))
        .env_remove("HOOP_PEER_BIN")
        .env("HOOP_PEERS_DIR", peers.path())
        .output()
        .unwrap();
    let err = support::assert_success(&out);
    assert_eq!(engines_of(&records(&out)), ["sync"], "{err}");
    assert!(err.contains("peers: building hoop-peer"), "{err}");
    for peer in ["monoio", "glommio"] {
        assert!(
            err.contains(&format!("{peer}: skipped: building the peers failed")),
            "{peer}: {err}"
        );
    }
}

/// What the peers cannot do is said without building anything: writes (they run reads), and
/// O_DIRECT through tokio's own io_uring files (buffered only).
#[test]
fn a_job_a_peer_cannot_do_is_skipped_with_the_reason() {
    let dir = TempDir::new("rw");
    let out = without_peer_binary(&small_file_job(
        &dir,
        &["--rw", "randwrite", "--engines", "sync,compio"],
    ));
    let err = support::assert_success(&out);
    assert!(
        err.contains("compio: skipped: the peers run random reads only"),
        "{err}"
    );
    assert!(
        !err.contains("HOOP_PEER_BIN"),
        "no binary was looked for: {err}"
    );
}

/// `hoop bench nop`: the compio and tokio-uring rows are skipped with a line without their
/// binary, monoio's absence is explained, and hoop's and the raw rows still run.
#[test]
fn nop_peers_are_skipped_with_a_line_and_monoio_is_explained() {
    let out = without_peer_binary(&["bench", "nop", "-T", "0.2", "-b", "8", "-n", "32", "--json"]);
    let err = support::assert_success(&out);
    assert_eq!(
        engines_of(&records(&out)),
        ["hoop", "raw-io-uring"],
        "{err}"
    );
    for peer in ["compio", "tokio-uring"] {
        assert!(err.contains(&format!("{peer}: skipped: ")), "{peer}: {err}");
    }
    assert!(err.contains("monoio: no row"), "{err}");
}

/// `hoop bench echo`: compio is a server of the matrix; without its binary it is skipped with
/// a line and the others are measured.
#[test]
fn echo_compio_is_a_server_and_skipped_with_a_line_without_its_binary() {
    let out = without_peer_binary(&[
        "bench",
        "echo",
        "--servers",
        "hoop,compio",
        "-c",
        "2",
        "-l",
        "16",
        "-t",
        "0.3",
        "--rounds",
        "2",
        "--json",
    ]);
    let err = support::assert_success(&out);
    let servers: Vec<String> = records(&out)
        .iter()
        .map(|r| r["server"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(servers, ["hoop", "hoop"], "{err}");
    assert!(err.contains("compio: skipped: "), "{err}");
}
