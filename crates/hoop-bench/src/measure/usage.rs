//! What a server costs per request, measured from outside while a load runs: CPU time and
//! context switches per thread group (from `/proc`), syscalls from
//! `perf stat -e raw_syscalls:sys_enter`.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::io::Read;

use crate::machine::perf_path;
use crate::machine::proc::{clock_hz, process_cpu, thread_samples, threads_between, ThreadSample};

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

/// CPU time (user + system) of the calling thread.
pub(crate) fn thread_cpu() -> Duration {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into the valid pointer it is given.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_csv() {
        let out = "55971,,raw_syscalls:sys_enter,564051457,100.00,,\n";
        assert_eq!(parse_perf_count(out), Some(55971));
        let none = "<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n";
        assert_eq!(parse_perf_count(none), None);
    }
}
