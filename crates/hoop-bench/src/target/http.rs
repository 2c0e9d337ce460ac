//! The static-file servers `hoop bench http` starts as child processes: `hoop serve http` on
//! io_uring, on epoll and its hyper variants, and nginx with a configuration of its own.

use std::io;
use std::path::Path;
use std::process::Command;

use crate::plan::invalid;
use crate::target::child::{Ready, ServerChild};
use crate::target::nginx;

/// Starts server `name` pinned to `cpu`, serving `root` (`Ok(None)`: nginx is not installed).
pub(crate) fn start_server(
    name: &str,
    root: &Path,
    dir: &Path,
    cpu: Option<usize>,
) -> io::Result<Option<ServerChild>> {
    let exe = std::env::current_exe()?;
    let hoop = |extra: &[&str]| {
        let mut cmd = Command::new(&exe);
        cmd.args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra);
        cmd
    };
    let (cmd, ready) = match name {
        "hoop" => (hoop(&["--driver", "uring"]), Ready::ListeningLine),
        "hoop-epoll" => (hoop(&["--driver", "epoll"]), Ready::ListeningLine),
        "hyper" => (hoop(&["--server", "hyper"]), Ready::ListeningLine),
        "hyper-shared" => (hoop(&["--server", "hyper-shared"]), Ready::ListeningLine),
        "hyper-tokio" => (hoop(&["--server", "hyper-tokio"]), Ready::ListeningLine),
        "hyper-hoop" => (hoop(&["--server", "hyper-hoop"]), Ready::ListeningLine),
        "nginx" => {
            let Some(bin) = nginx::find() else {
                return Ok(None);
            };
            let addr = nginx::free_addr()?;
            let root = std::fs::canonicalize(root)?;
            (
                nginx::command(&bin, &dir.join("nginx"), &root, addr)?,
                Ready::Connect(addr),
            )
        }
        other => return Err(invalid(format!("unknown server {other}"))),
    };
    ServerChild::spawn_cmd(name, cmd, cpu, ready).map(Some)
}
