//! Echo servers as child processes, and what we measure of them from outside: CPU time from
//! `/proc/PID/stat`, context switches from `/proc/PID/task/*/status`, syscalls from
//! `perf stat -e raw_syscalls:sys_enter`.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
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

/// A running echo server (`hoop serve echo --addr 127.0.0.1:0` with [`serve_args`]). Dropping it
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

/// utime + stime of process `pid` (all its threads), from `/proc/PID/stat` fields 14 and 15.
pub(crate) fn process_cpu(pid: u32) -> io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_stat_ticks(&stat)
        .ok_or_else(|| io::Error::other(format!("cannot parse /proc/{pid}/stat")))?;
    Ok(Duration::from_micros(
        ticks.saturating_mul(1_000_000) / clock_hz(),
    ))
}

/// Fields 14 (utime) + 15 (stime), in clock ticks. The command name (field 2) may hold spaces
/// and parentheses, so fields are counted from the last `)`.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3; utime is field 14.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// One thread's counters, from `/proc/PID/task/TID/{status,stat}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadSample {
    /// Its name without a trailing number ([`thread_group`]).
    pub group: String,
    /// utime + stime, clock ticks.
    pub ticks: u64,
    /// Voluntary + involuntary context switches.
    pub ctx: u64,
}

/// Every thread of process `pid`, by thread id. A thread that exits while the directory is
/// read is skipped; an unreadable process is an error.
pub(crate) fn thread_samples(pid: u32) -> io::Result<BTreeMap<u32, ThreadSample>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(status), Some(stat)) = (read("status"), read("stat")) else {
            continue;
        };
        let (Some(ctx), Some(ticks)) = (parse_ctx_switches(&status), parse_stat_ticks(&stat))
        else {
            continue;
        };
        let name = status
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .unwrap_or("?")
            .trim();
        out.insert(
            tid,
            ThreadSample {
                group: thread_group(name),
                ticks,
                ctx,
            },
        );
    }
    Ok(out)
}

/// A thread's name without its instance number: `hoop-reaper-1` -> `hoop-reaper`,
/// `iou-wrk-4242` -> `iou-wrk`, `tokio-rt-worker` unchanged.
pub(crate) fn thread_group(name: &str) -> String {
    let g = name
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches(['-', '_', ' ', '#']);
    if g.is_empty() { name } else { g }.to_string()
}

/// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` of one `/proc/.../status`.
pub(crate) fn parse_ctx_switches(status: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(field("voluntary_ctxt_switches")? + field("nonvoluntary_ctxt_switches")?)
}

/// (clock ticks, context switches) by thread group between two snapshots of
/// [`thread_samples`]. A thread present in both counts its difference; one that appeared
/// after the first snapshot counts all of its counts (it was born inside the window). A
/// thread that exited before the second snapshot is lost: Linux keeps a dead thread's counts
/// only in the process's totals, which `/proc` does not show per thread, so its work inside
/// the window is not counted here (the servers measured here keep their threads for the
/// whole run: runtime workers, ring reapers; tokio's blocking-pool threads that retire
/// mid-run would be undercounted). Process CPU time is read from `/proc/PID/stat` instead,
/// which includes dead threads.
pub(crate) fn threads_between(
    before: &BTreeMap<u32, ThreadSample>,
    after: &BTreeMap<u32, ThreadSample>,
) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (tid, a) in after {
        let (t0, c0) = before.get(tid).map_or((0, 0), |b| (b.ticks, b.ctx));
        let e = out.entry(a.group.clone()).or_default();
        e.0 += a.ticks.saturating_sub(t0);
        e.1 += a.ctx.saturating_sub(c0);
    }
    out
}

/// Clock ticks per second.
fn clock_hz() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// `perf` on PATH, if any.
pub(crate) fn perf_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("perf"))
        .find(|p| p.is_file())
}

/// Measures a server process over the window: CPU time, and syscalls when perf is there.
pub(crate) struct ServerProbe {
    pid: u32,
    cpu0: Option<Duration>,
    threads0: Option<BTreeMap<u32, ThreadSample>>,
    perf: Option<Child>,
    perf_deadline: Instant,
}

/// One group of a server's threads (same name but for a trailing number) over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub(crate) struct ThreadUse {
    /// Threads of the group seen at the end of the window.
    pub threads: usize,
    /// CPU time per request, µs (clock-tick resolution: 10 ms over the window at 100 Hz).
    pub cpu_us_per_req: f64,
    /// Context switches per request.
    pub ctx_switches_per_req: f64,
}

/// What [`ServerProbe`] found.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerMetrics {
    /// CPU time over the window, % of wall time.
    pub cpu_pct: Option<f64>,
    /// CPU time per request, µs.
    pub cpu_us_per_req: Option<f64>,
    /// Syscalls per request.
    pub syscalls_per_req: Option<f64>,
    /// Context switches (voluntary + involuntary, every thread) per request.
    pub ctx_switches_per_req: Option<f64>,
    /// CPU and context switches per request by thread group (name without its number).
    pub threads: BTreeMap<String, ThreadUse>,
}

impl ServerProbe {
    /// Starts measuring process `pid` for a window of `secs`.
    pub(crate) fn start(pid: u32, secs: Duration) -> ServerProbe {
        let perf = perf_path().and_then(|perf| {
            Command::new(perf)
                .args(["stat", "-e", "raw_syscalls:sys_enter", "-x,", "-p"])
                .arg(pid.to_string())
                .args(["--", "sleep"])
                .arg(format!("{:.3}", secs.as_secs_f64()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .ok()
        });
        ServerProbe {
            pid,
            cpu0: process_cpu(pid).ok(),
            threads0: thread_samples(pid).ok(),
            perf,
            perf_deadline: Instant::now() + secs + Duration::from_secs(5),
        }
    }

    /// Ends the measurement: `wall` is the window's length, `requests` the verified requests.
    pub(crate) fn finish(mut self, wall: Duration, requests: u64) -> ServerMetrics {
        let cpu = match (self.cpu0, process_cpu(self.pid).ok()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let after = thread_samples(self.pid).ok();
        let groups = match (&self.threads0, &after) {
            (Some(a), Some(b)) => Some(threads_between(a, b)),
            _ => None,
        };
        let ctx = groups
            .as_ref()
            .map(|g| g.values().map(|v| v.1).sum::<u64>());
        let syscalls = self
            .perf
            .take()
            .and_then(|p| wait_perf(p, self.perf_deadline));
        let wall_us = wall.as_secs_f64() * 1e6;
        let per_req =
            |v: f64| (requests > 0).then(|| crate::measure::latency::round3(v / requests as f64));
        ServerMetrics {
            cpu_pct: cpu.and_then(|c| {
                (wall_us > 0.0).then(|| {
                    crate::measure::latency::round3(c.as_micros() as f64 / wall_us * 100.0)
                })
            }),
            cpu_us_per_req: cpu.and_then(|c| per_req(c.as_micros() as f64)),
            syscalls_per_req: syscalls.and_then(|n| per_req(n as f64)),
            ctx_switches_per_req: ctx.and_then(|n| per_req(n as f64)),
            threads: match (groups, after) {
                (Some(groups), Some(after)) if requests > 0 => groups
                    .into_iter()
                    .map(|(g, (ticks, ctx))| {
                        let n = requests as f64;
                        let cpu_us = ticks as f64 * 1e6 / clock_hz() as f64;
                        let use_ = ThreadUse {
                            threads: after.values().filter(|t| t.group == g).count(),
                            cpu_us_per_req: crate::measure::latency::round3(cpu_us / n),
                            ctx_switches_per_req: crate::measure::latency::round3(ctx as f64 / n),
                        };
                        (g, use_)
                    })
                    .collect(),
                _ => BTreeMap::new(),
            },
        }
    }
}

impl Drop for ServerProbe {
    fn drop(&mut self) {
        if let Some(mut p) = self.perf.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

/// Waits for perf (until `deadline`, then kills it) and reads the count from its CSV stderr.
fn wait_perf(mut perf: Child, deadline: Instant) -> Option<u64> {
    loop {
        match perf.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = perf.kill();
                let _ = perf.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    perf.stderr.take()?.read_to_string(&mut text).ok()?;
    parse_perf_count(&text)
}

/// The count of `raw_syscalls:sys_enter` in `perf stat -x,` output (`<not counted>`: none).
pub(crate) fn parse_perf_count(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_with_odd_names() {
        let stat = "1234 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 5 6 7";
        assert_eq!(parse_stat_ticks(stat), Some(300));
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn parses_perf_csv() {
        let out = "55971,,raw_syscalls:sys_enter,564051457,100.00,,\n";
        assert_eq!(parse_perf_count(out), Some(55971));
        let none = "<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n";
        assert_eq!(parse_perf_count(none), None);
    }

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

    #[test]
    fn parses_ctx_switches() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_ctx_switches(status), Some(127));
        assert_eq!(
            parse_ctx_switches("Name:\tx\nvoluntary_ctxt_switches:\t1\n"),
            None
        );
        assert_eq!(parse_ctx_switches("voluntary_ctxt_switches: x\n"), None);
    }

    #[test]
    fn threads_count_new_ones_and_skip_gone_ones_by_group() {
        let t = |group: &str, ticks, ctx| ThreadSample {
            group: group.into(),
            ticks,
            ctx,
        };
        let before = BTreeMap::from([(1, t("w", 1, 10)), (2, t("w", 2, 5)), (3, t("r", 9, 100))]);
        // 1 grew by 4, 2 by 0, 3 exited (lost), 4 is new (all of its 6 count).
        let after = BTreeMap::from([(1, t("w", 3, 14)), (2, t("w", 2, 5)), (4, t("r", 7, 6))]);
        let g = threads_between(&before, &after);
        assert_eq!(g["w"], (2, 4));
        assert_eq!(g["r"], (7, 6));
    }

    #[test]
    fn thread_groups_drop_the_instance_number() {
        assert_eq!(thread_group("hoop-reaper-1"), "hoop-reaper");
        assert_eq!(thread_group("iou-wrk-4242"), "iou-wrk");
        assert_eq!(thread_group("tokio-rt-worker"), "tokio-rt-worker");
        assert_eq!(thread_group("123"), "123");
    }

    #[test]
    fn own_threads_are_readable() {
        let me = thread_samples(std::process::id()).unwrap();
        assert!(!me.is_empty());
    }

    #[test]
    fn own_cpu_time_is_readable() {
        assert!(process_cpu(std::process::id()).is_ok());
    }
}
