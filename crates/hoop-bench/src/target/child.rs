//! Echo servers as child processes, and what we measure of them from outside: CPU time from
//! `/proc/PID/stat`, context switches from `/proc/PID/task/*/status`, syscalls from
//! `perf stat -e raw_syscalls:sys_enter`.

use std::io::{self, BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a server may take to print `listening on IP:PORT`.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(3);
/// How much of a server's stderr is kept for error messages.
const STDERR_KEEP: usize = 4096;

/// How a started server shows it is ready.
#[derive(Debug, Clone, Copy)]
pub enum Ready {
    /// It prints `listening on IP:PORT` first (hoop's servers).
    ListeningLine,
    /// A TCP connect to this address succeeds (nginx).
    Connect(SocketAddr),
}

/// A running echo server (`hoop serve echo --addr 127.0.0.1:0` with `serve_args`). Dropping it
/// stops the process (SIGTERM, then SIGKILL) and waits for it.
pub struct ServerChild {
    child: Child,
    name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl ServerChild {
    /// Starts server `name` from this very binary, pinned to `cpu` when given (every thread the
    /// server creates inherits the mask), and waits for its `listening on` line.
    pub fn spawn(name: &str, cpu: Option<usize>) -> io::Result<ServerChild> {
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "echo", "--addr", "127.0.0.1:0"])
            .args(serve_args(name));
        ServerChild::spawn_cmd(name, cmd, cpu, Ready::ListeningLine)
    }

    /// Starts `cmd` as server `name`, pinned to `cpu` when given, and waits until it is ready:
    /// its `listening on` line, or a TCP connect to a given address succeeding.
    pub fn spawn_cmd(
        name: &str,
        mut cmd: Command,
        cpu: Option<usize>,
        ready: Ready,
    ) -> io::Result<ServerChild> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cpu) = cpu {
            let set = cpu_set(cpu)?;
            // SAFETY: the closure runs in the child between fork and exec; it only calls
            // sched_setaffinity (a raw syscall, async-signal-safe) on a cpu_set_t prepared before
            // the fork, and builds an io::Error from errno, which does not allocate.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(e.kind(), format!("cannot start the {name} server: {e}"))
        })?;
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(err) = child.stderr.take() {
            let keep = stderr.clone();
            std::thread::spawn(move || drain_stderr(err, &keep));
        }
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut out = BufReader::new(out);
                let mut line = String::new();
                let res = out.read_line(&mut line).map(|_| line);
                let _ = tx.send(res);
                // Keep reading so that the server never blocks on a full pipe.
                let _ = io::copy(&mut out, &mut io::sink());
            });
        }
        let mut server = ServerChild {
            child,
            name: name.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
        };
        if let Ready::Connect(addr) = ready {
            let until = Instant::now() + START_TIMEOUT;
            loop {
                if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    server.addr = addr;
                    return Ok(server);
                }
                server.check_alive()?;
                if Instant::now() >= until {
                    return Err(server.failure(&format!(
                        "not listening on {addr} within {}s",
                        START_TIMEOUT.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => return Err(server.failure(&format!("reading its stdout failed: {e}"))),
            Err(_) => {
                return Err(server.failure(&format!(
                    "no `listening on` line within {}s",
                    START_TIMEOUT.as_secs()
                )))
            }
        };
        server.addr = parse_listening(&line).ok_or_else(|| {
            server.failure(&format!(
                "expected `listening on IP:PORT`, got {:?}",
                line.trim()
            ))
        })?;
        Ok(server)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the server exited (it should run until we stop it).
    pub fn check_alive(&mut self) -> io::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.failure(&format!("it exited during the run ({status})"))),
            Err(e) => Err(self.failure(&format!("cannot check on it: {e}"))),
        }
    }

    /// An error naming the server, with the tail of its stderr.
    fn failure(&mut self, what: &str) -> io::Error {
        // Give a dying server a moment so that its last words are read.
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!(" (exited: {s})"),
            _ => String::new(),
        };
        let err = self
            .stderr
            .lock()
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let err = if err.is_empty() {
            String::new()
        } else {
            format!("; its stderr: {err}")
        };
        io::Error::other(format!(
            "the {} server failed: {what}{status}{err}",
            self.name
        ))
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child's pid, which we have not reaped yet (so the pid
            // cannot have been reused).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let until = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < until {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                _ => return,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn drain_stderr(mut err: impl Read, keep: &Mutex<String>) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = err.read(&mut buf) {
        if n == 0 {
            break;
        }
        if let Ok(mut s) = keep.lock() {
            if s.len() < STDERR_KEEP {
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    }
}

/// The `hoop serve echo` arguments that start server `name`. Both hoop servers force their
/// driver, so that `hoop` never silently runs on epoll (where io_uring is unavailable it fails
/// with the reason instead) and `HOOP_DRIVER` cannot change what a label means.
pub(crate) fn serve_args(name: &str) -> Vec<&str> {
    match name {
        "hoop" => vec!["--server", "hoop", "--driver", "uring"],
        "hoop-basic" => vec!["--server", "hoop", "--driver", "uring", "--basic"],
        "hoop-epoll" => vec!["--server", "hoop", "--driver", "epoll"],
        other => vec!["--server", other],
    }
}

/// `listening on 127.0.0.1:PORT` -> the address.
pub(crate) fn parse_listening(line: &str) -> Option<SocketAddr> {
    line.trim()
        .strip_prefix("listening on ")?
        .trim()
        .parse()
        .ok()
}

fn cpu_set(cpu: usize) -> io::Result<libc::cpu_set_t> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_SET writes inside the set.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hoop_servers_force_their_driver() {
        assert_eq!(serve_args("hoop")[2..], ["--driver", "uring"]);
        assert_eq!(serve_args("hoop-epoll")[2..], ["--driver", "epoll"]);
        assert_eq!(serve_args("tokio"), ["--server", "tokio"]);
    }

    #[test]
    fn parses_listening_line() {
        assert_eq!(
            parse_listening("listening on 127.0.0.1:4321\n"),
            Some(SocketAddr::from(([127, 0, 0, 1], 4321)))
        );
        assert_eq!(parse_listening("hello"), None);
    }
}
