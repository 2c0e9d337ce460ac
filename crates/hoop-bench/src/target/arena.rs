//! The servers of `hoop bench http --profile`, each a child process: `hoop serve arena` (on
//! io_uring, without its cache, on epoll, and its axum-on-tokio engine), actix-web in the
//! peers' `hoop-peer arena-actix`, nginx and h2o (static and pipelined only); and the files
//! they all get: the json profile's dataset (`--dataset FILE`) and the static profile's root.
//! A server that is not there (nginx or h2o not installed, no `serve arena` in this binary, no
//! `arena-actix` in the peers' binary) is skipped with one line saying why.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::load::http::arena::dataset;
use crate::load::http::mix::{self, MixFile};
use crate::output::Out;
use crate::plan::arena::Profile;
use crate::plan::invalid;
use crate::target::child::{Ready, ServerChild};
use crate::target::nginx;

/// The directory of the static files under the root, and their URL prefix (HttpArena's).
const STATIC_DIR: &str = "static";
/// nginx's answer to `/pipeline`.
const NGINX_PIPELINE: &str =
    "        location = /pipeline { default_type text/plain; return 200 \"ok\"; }\n";

/// The files every server gets.
#[derive(Debug, Clone)]
pub(crate) struct ArenaFiles {
    /// The dataset file (`--dataset`).
    pub dataset: PathBuf,
    /// Its items, as the json checker compares them.
    pub items: Arc<[Value]>,
    /// The static root (`--root`): the mix under `static/` (asked for as `/static/NAME`), the
    /// same files linked at the top (for a server mapping `/static/` onto its root), and
    /// `pipeline` holding `ok` (h2o's answer to `/pipeline`).
    pub root: PathBuf,
    /// The static files, as the client verifies them.
    pub mix: Arc<[MixFile]>,
    /// Lines for the table (no gzip, so no `.gz` variants).
    pub notes: Vec<String>,
}

/// Writes the dataset and the static root under `dir` (files kept when already right).
pub(crate) fn make_files(dir: &Path) -> io::Result<ArenaFiles> {
    let (dataset, items) = dataset::write(dir)?;
    let root = dir.join("arena-root");
    let (files, note) = mix::make_at(&root, STATIC_DIR)?;
    // Linked, not copied: the same bytes at both paths.
    for entry in std::fs::read_dir(root.join(STATIC_DIR))? {
        let entry = entry?;
        let top = root.join(entry.file_name());
        let _ = std::fs::remove_file(&top);
        if std::fs::hard_link(entry.path(), &top).is_err() {
            std::fs::copy(entry.path(), &top)?;
        }
    }
    std::fs::write(root.join("pipeline"), "ok")?;
    Ok(ArenaFiles {
        dataset,
        items: Arc::from(items),
        root,
        mix: Arc::from(files),
        notes: note.into_iter().collect(),
    })
}

/// A started server, or why it is skipped.
pub(crate) enum Started {
    /// Running.
    Running(ServerChild),
    /// Not available here: the line the table shows.
    Skipped(String),
}

/// Starts server `name` for profile `p` with `threads` threads (workers), pinned to `cpu` when
/// given; `dir` holds its configuration.
pub(crate) fn start(
    name: &str,
    p: Profile,
    threads: usize,
    cpu: Option<usize>,
    files: &ArenaFiles,
    dir: &Path,
    out: &Out,
) -> io::Result<Started> {
    let threads_arg = threads.to_string();
    let root_args: Vec<&std::ffi::OsStr> = if p == Profile::Static {
        vec!["--root".as_ref(), files.root.as_os_str()]
    } else {
        Vec::new()
    };
    let (cmd, ready) = match name {
        "hoop" | "hoop-nocache" | "hoop-epoll" | "axum-tokio" => {
            if let Err(why) = serve_arena_available() {
                return Ok(Started::Skipped(format!("{name}: skipped: {why}")));
            }
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args(["serve", "arena", "--addr", "127.0.0.1:0", "--threads"])
                .arg(&threads_arg)
                .arg("--dataset")
                .arg(&files.dataset)
                .args(&root_args);
            match name {
                "hoop" => cmd.args(["--driver", "uring"]),
                "hoop-nocache" => cmd.args(["--driver", "uring", "--cache-bytes", "0"]),
                "hoop-epoll" => cmd.args(["--driver", "epoll"]),
                _ => cmd.args(["--engine", "axum-tokio"]),
            };
            (cmd, Ready::ListeningLine)
        }
        "actix" => {
            let bin = match actix_binary(out) {
                Ok(b) => b,
                Err(why) => return Ok(Started::Skipped(format!("actix: skipped: {why}"))),
            };
            let mut cmd = Command::new(bin);
            cmd.args(["arena-actix", "--addr", "127.0.0.1:0", "--workers"])
                .arg(&threads_arg)
                .arg("--dataset")
                .arg(&files.dataset)
                .args(&root_args);
            (cmd, Ready::ListeningLine)
        }
        "nginx" => {
            let Some(bin) = nginx::find() else {
                return Ok(Started::Skipped(nginx::MISSING.to_string()));
            };
            let addr = nginx::free_addr()?;
            let prefix = dir.join(format!("arena-nginx-{threads}"));
            let root = std::fs::canonicalize(&files.root)?;
            let text = nginx::config_with(&prefix, &root, addr, threads, NGINX_PIPELINE);
            (
                nginx::command_with(&bin, &prefix, &text)?,
                Ready::Connect(addr),
            )
        }
        "h2o" => {
            let Some(bin) = find_on_path("h2o") else {
                return Ok(Started::Skipped(
                    "h2o not installed (apt-get install h2o)".to_string(),
                ));
            };
            let addr = nginx::free_addr()?;
            let prefix = dir.join(format!("arena-h2o-{threads}"));
            std::fs::create_dir_all(&prefix)?;
            let conf = prefix.join("h2o.conf");
            let root = std::fs::canonicalize(&files.root)?;
            std::fs::write(&conf, h2o_config(&prefix, &root, addr, threads))?;
            let mut cmd = Command::new(bin);
            cmd.arg("-c").arg(&conf);
            (cmd, Ready::Connect(addr))
        }
        other => return Err(invalid(format!("unknown server {other}"))),
    };
    ServerChild::spawn_cmd(name, cmd, cpu, ready).map(Started::Running)
}

/// h2o's configuration: `threads` threads, no access log, the root served as files with the
/// precompressed `.gz` variants (`file.send-compressed`), `/pipeline` being the file `pipeline`.
fn h2o_config(prefix: &Path, root: &Path, addr: std::net::SocketAddr, threads: usize) -> String {
    format!(
        "listen:\n  host: {}\n  port: {}\nnum-threads: {threads}\nerror-log: {}\n\
         hosts:\n  default:\n    paths:\n      /:\n        file.dir: {}\n        \
         file.send-compressed: ON\n",
        addr.ip(),
        addr.port(),
        prefix.join("error.log").display(),
        root.display()
    )
}

/// `name` on PATH or in the sbin directories.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// Whether `SUBCOMMAND --help` of `bin` succeeds: `Err` says in a sentence why not.
fn has_subcommand(bin: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(bin)
        .args(args)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    Err(format!(
        "`{} {}` is not there ({first})",
        bin.display(),
        args.join(" ")
    ))
}

/// Whether this binary has `hoop serve arena` (checked once).
fn serve_arena_available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            has_subcommand(&exe, &["serve", "arena"])
        })
        .clone()
}

/// The peers' binary, if it has `arena-actix` (built and checked once).
fn actix_binary(out: &Out) -> Result<PathBuf, String> {
    static ACTIX: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ACTIX
        .get_or_init(|| {
            let bin = crate::target::peers::binary(out)?;
            has_subcommand(&bin, &["arena-actix"])?;
            Ok(bin)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_root_serves_both_ways_and_h2o_is_configured() {
        let dir = std::env::temp_dir().join(format!("hoop-arena-files-{}", std::process::id()));
        let f = make_files(&dir).unwrap();
        assert_eq!(f.items.len(), 50);
        assert!(f.dataset.is_file());
        let first = &f.mix[0];
        assert!(first.path.starts_with("/static/"), "{}", first.path);
        let name = first.path.trim_start_matches("/static/");
        let a = std::fs::read(f.root.join("static").join(name)).unwrap();
        assert_eq!(a, std::fs::read(f.root.join(name)).unwrap());
        assert_eq!(std::fs::read(f.root.join("pipeline")).unwrap(), b"ok");
        let c = h2o_config(&dir, &f.root, "127.0.0.1:8080".parse().unwrap(), 2);
        assert!(
            c.contains("port: 8080") && c.contains("num-threads: 2"),
            "{c}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
