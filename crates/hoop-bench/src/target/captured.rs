//! A tool run to completion as a child process (fio, the peers' binary): its output captured
//! whole, and killed if it runs past its time.

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the child is asked whether it has exited.
const POLL: Duration = Duration::from_millis(10);

/// What a child printed, and how it ended.
#[derive(Debug)]
pub(crate) struct Captured {
    /// Its exit status; `None` when it ran past its time and was killed, or could not be
    /// waited for (then killed too).
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

/// Starts `cmd` with stdin closed and stdout and stderr piped, each pipe drained on its own
/// thread so that the child never blocks on a full pipe, and waits until it exits or `within`
/// has passed (then it is killed). `Err`: it could not be started.
pub(crate) fn run_captured(cmd: &mut Command, within: Duration) -> io::Result<Captured> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let out_t = drain(child.stdout.take());
    let err_t = drain(child.stderr.take());
    let status = wait_within(&mut child, Instant::now() + within);
    Ok(Captured {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    })
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut s);
        }
        s
    })
}

/// The child's exit status, or `None` once `deadline` has passed (it is killed then).
fn wait_within(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Some(st),
            Ok(None) if Instant::now() <= deadline => std::thread::sleep(POLL),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_captured_and_a_slow_child_is_killed() {
        let c = run_captured(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(c.status.and_then(|s| s.code()), Some(3));
        assert_eq!((c.stdout.as_str(), c.stderr.as_str()), ("out\n", "err\n"));
        let c = run_captured(
            Command::new("sh").args(["-c", "exec sleep 30"]),
            Duration::from_millis(50),
        )
        .unwrap();
        assert!(c.status.is_none());
        assert!(run_captured(&mut Command::new("/nonexistent/tool"), Duration::ZERO).is_err());
    }
}
