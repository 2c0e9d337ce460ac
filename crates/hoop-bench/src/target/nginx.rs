//! nginx for the side-by-side HTTP runs: found on PATH or in /usr/sbin, started with a
//! configuration the bench writes under its own directory (one process, sendfile on, access
//! log off, keep-alive unlimited, `gzip_static on` for the static mix's `.gz` variants).

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the table says when nginx is missing.
pub(crate) const MISSING: &str = "nginx not installed (apt-get install nginx-light)";

/// The nginx binary, if installed.
pub(crate) fn find() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

/// The configuration: one process (`master_process off`, so its CPU time is the server's),
/// `sendfile on` with `tcp_nopush`, no access log, keep-alive without a request limit, and
/// `gzip_static on`: a request accepting gzip gets `NAME.gz` when it exists (the static mix's
/// variants; the single test files have none), as hoop's server serves precompressed files.
/// Its listen backlog is hoop's default ([`hoop::net::DEFAULT_BACKLOG`]), so both get the
/// same accept queue (the kernel caps both at `net.core.somaxconn`).
pub(crate) fn config(prefix: &Path, root: &Path, addr: SocketAddr) -> String {
    config_with(prefix, root, addr, 1, "")
}

/// [`config`] with `workers` worker processes (more than one needs the master process, whose
/// own CPU time is then all a probe of its pid sees) and `extra` lines in the server block.
pub(crate) fn config_with(
    prefix: &Path,
    root: &Path,
    addr: SocketAddr,
    workers: usize,
    extra: &str,
) -> String {
    let p = prefix.display();
    let master = if workers > 1 { "on" } else { "off" };
    format!(
        "worker_processes {workers};\n\
         master_process {master};\n\
         daemon off;\n\
         worker_rlimit_nofile 65536;\n\
         error_log {p}/error.log warn;\n\
         pid {p}/nginx.pid;\n\
         events {{ worker_connections 20000; }}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   sendfile on;\n\
         \x20   tcp_nopush on;\n\
         \x20   tcp_nodelay on;\n\
         \x20   keepalive_requests 1000000000;\n\
         \x20   keepalive_timeout 300s;\n\
         \x20   gzip_static on;\n\
         \x20   default_type application/octet-stream;\n\
         \x20   client_body_temp_path {p}/body;\n\
         \x20   proxy_temp_path {p}/proxy;\n\
         \x20   fastcgi_temp_path {p}/fastcgi;\n\
         \x20   uwsgi_temp_path {p}/uwsgi;\n\
         \x20   scgi_temp_path {p}/scgi;\n\
         \x20   server {{\n\
         \x20       listen {addr} backlog={backlog};\n\
         \x20       root {};\n\
         {extra}\
         \x20   }}\n\
         }}\n",
        root.display(),
        backlog = hoop::net::DEFAULT_BACKLOG,
    )
}

/// Writes the configuration under `prefix` and returns the command that runs nginx with it.
pub(crate) fn command(
    nginx: &Path,
    prefix: &Path,
    root: &Path,
    addr: SocketAddr,
) -> io::Result<Command> {
    command_with(nginx, prefix, &config(prefix, root, addr))
}

/// Writes configuration `text` under `prefix` and returns the command that runs nginx with it.
pub(crate) fn command_with(nginx: &Path, prefix: &Path, text: &str) -> io::Result<Command> {
    std::fs::create_dir_all(prefix)?;
    let conf = prefix.join("nginx.conf");
    std::fs::write(&conf, text)?;
    let mut cmd = Command::new(nginx);
    cmd.arg("-p").arg(prefix).arg("-c").arg(&conf);
    // nginx 1.19.5+: the startup error log too goes under the prefix, not /var/log.
    cmd.arg("-e").arg(prefix.join("error.log"));
    Ok(cmd)
}

/// A free port on 127.0.0.1 (bound and released; nginx binds it right after).
pub(crate) fn free_addr() -> io::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    l.local_addr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_the_rules() {
        let c = config(
            Path::new("/tmp/p"),
            Path::new("/srv/www"),
            "127.0.0.1:8080".parse().unwrap(),
        );
        for needle in [
            "worker_processes 1;",
            "sendfile on;",
            "access_log off;",
            "keepalive_requests 1000000000;",
            "listen 127.0.0.1:8080",
            "root /srv/www;",
            "gzip_static on;",
        ] {
            assert!(c.contains(needle), "{needle} in {c}");
        }
    }
}
