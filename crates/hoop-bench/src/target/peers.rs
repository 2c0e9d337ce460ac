//! hoop's peers (monoio, compio, tokio-uring, glommio, tokio's own io_uring files) on the same
//! work, through the `hoop-peer` binary of `peers/`: a cargo project of its own (not a member
//! of hoop's workspace, so `cargo test` and CI's build never compile the peers), built here on
//! demand, once per `hoop` process, with its output visible:
//! `cargo build --release --locked --bin hoop-peer` in `peers/` (whose `.cargo/config.toml`
//! adds `--cfg tokio_unstable` for tokio's `io-uring` feature); glommio's engine runs in
//! `hoop-peer-glommio` (`--features glommio`), built only when glommio is asked for.
//!
//! Where the binary comes from:
//! * `HOOP_PEER_BIN=PATH`: that binary, nothing built (missing or failing: the peers are
//!   skipped with one line).
//! * otherwise `peers/` of this source tree (`HOOP_PEERS_DIR=DIR` to point elsewhere): found
//!   beside the `target/` directory the `hoop` binary runs from, else where it was compiled.
//!
//! A peer that cannot be built or run here is skipped with one line saying why; the run goes on.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::output::Out;
use crate::target::captured::run_captured;

/// Extra time a peer gets beyond its job (start-up, drain) before it is killed.
const GRACE: Duration = Duration::from_secs(60);

/// How the peers' binary was found or built, once per process.
static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
/// The same for the binary with glommio.
static GLOMMIO: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The `hoop-peer` binary (monoio, compio, tokio-uring, tokio-io-uring), built now if need be
/// (the first call only; later calls return what the first found). `Err` says in one sentence
/// why the peers cannot run here.
pub(crate) fn binary(out: &Out) -> Result<PathBuf, String> {
    BINARY
        .get_or_init(|| find_or_build(out, "hoop-peer", None))
        .clone()
}

/// `hoop-peer-glommio`: the same program with glommio, whose dependencies would add about a
/// third to every cold build of [`binary`], so it is built only when glommio is asked for.
pub(crate) fn binary_glommio(out: &Out) -> Result<PathBuf, String> {
    GLOMMIO
        .get_or_init(|| find_or_build(out, "hoop-peer-glommio", Some("glommio")))
        .clone()
}

/// The `hoop-peer` binary if [`binary`] found or built it already.
pub(crate) fn built() -> Option<PathBuf> {
    BINARY.get().and_then(|r| r.as_ref().ok().cloned())
}

fn find_or_build(out: &Out, name: &str, feature: Option<&str>) -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("HOOP_PEER_BIN") {
        let bin = PathBuf::from(bin);
        return if is_executable(&bin) {
            Ok(bin)
        } else {
            Err(format!(
                "HOOP_PEER_BIN={} is not an executable file",
                bin.display()
            ))
        };
    }
    let dir = peers_dir().ok_or_else(|| {
        "no peers/ project found (set HOOP_PEERS_DIR to the peers/ directory of hoop's source, \
         or HOOP_PEER_BIN to a built hoop-peer)"
            .to_string()
    })?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = dir.join("target");
    let mut args = vec!["build", "--release", "--locked", "--bin", name];
    if let Some(f) = feature {
        args.extend(["--features", f]);
    }
    out.note(&format!(
        "peers: building {name}: cargo {} in {} (a minute or so the first time)",
        args.join(" "),
        dir.display()
    ));
    let t = Instant::now();
    // In peers/ itself, so that its .cargo/config.toml applies (`--cfg tokio_unstable`), with
    // its own target directory: the caller's RUSTFLAGS or CARGO_TARGET_DIR would override
    // both. Its output goes to stderr (stdout may carry JSON lines).
    let status = out.suspended(|| {
        Command::new(&cargo)
            .args(&args)
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .stdin(Stdio::null())
            .stdout(stdout_to_stderr())
            .stderr(Stdio::inherit())
            .status()
    });
    let status = status.map_err(|e| {
        format!(
            "cannot run {} to build the peers ({e})",
            PathBuf::from(&cargo).display()
        )
    })?;
    if !status.success() {
        return Err(format!(
            "building the peers failed ({status}; cargo's output is above; by hand: cd {} && \
             cargo {})",
            dir.display(),
            args.join(" ")
        ));
    }
    let bin = target.join("release").join(name);
    if !is_executable(&bin) {
        return Err(format!("the peers' build made no {}", bin.display()));
    }
    out.note(&format!(
        "peers: {name} ready in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        bin.display()
    ));
    Ok(bin)
}

/// The child's stdout as this process's stderr (cargo prints nothing there, but a JSON reader of
/// our stdout must never see a stray line).
fn stdout_to_stderr() -> Stdio {
    use std::os::fd::AsFd;
    io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

/// `peers/`: `HOOP_PEERS_DIR`, else beside the `target/` the binary runs from, else where this
/// crate was compiled.
fn peers_dir() -> Option<PathBuf> {
    let has_manifest = |d: &Path| d.join("Cargo.toml").is_file();
    if let Some(d) = std::env::var_os("HOOP_PEERS_DIR") {
        let d = PathBuf::from(d);
        return has_manifest(&d).then_some(d);
    }
    let beside_target = crate::machine::target_dir()
        .parent()
        .map(|root| root.join("peers"));
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers");
    beside_target
        .into_iter()
        .chain([compiled])
        .find(|d| has_manifest(d))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What one `hoop-peer` run printed: its JSON line.
pub(crate) fn run_json(bin: &Path, args: &[String], secs: f64) -> Result<Value, String> {
    let run = run_captured(
        Command::new(bin).args(args),
        Duration::from_secs_f64(secs) + GRACE,
    )
    .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let (status, stdout, stderr) = (run.status, run.stdout, run.stderr);
    let last = |s: &str| {
        s.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .trim_start_matches("hoop-peer: ")
            .to_string()
    };
    match status {
        None => Err(format!(
            "hoop-peer did not finish within {:.0} s of its run; killed",
            GRACE.as_secs_f64()
        )),
        Some(st) if !st.success() => Err(match last(&stderr) {
            e if e.is_empty() => format!("hoop-peer failed ({st})"),
            e => e,
        }),
        Some(_) => {
            let line = last(&stdout);
            serde_json::from_str(&line)
                .map_err(|e| format!("hoop-peer printed no JSON line ({e}): {line:?}"))
        }
    }
}

/// `v[key]` as a number.
pub(crate) fn f64_of(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// `v[key]` as a count.
pub(crate) fn u64_of(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `v[key]` as a string.
pub(crate) fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}
