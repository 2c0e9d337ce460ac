//! What `/proc` says of a process and of the machine: CPU time from `/proc/PID/stat`, context
//! switches from `/proc/PID/task/*/status` (threads grouped by name), the resident set from
//! `/proc/PID/status`, the listen queue overflows from `/proc/net/netstat`.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

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
pub(crate) fn clock_hz() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// A process's resident set (`VmRSS` of `/proc/PID/status`), bytes.
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&s)
}

/// `VmRSS:   77484 kB` -> bytes.
pub(crate) fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// `TcpExt: ListenOverflows` of `/proc/net/netstat`: connections the kernel dropped because
/// a listener's accept queue was full.
pub(crate) fn listen_overflows() -> Option<u64> {
    parse_listen_overflows(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

/// The `ListenOverflows` value of `/proc/net/netstat` (a line of names, then one of values).
pub(crate) fn parse_listen_overflows(netstat: &str) -> Option<u64> {
    let mut lines = netstat.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let i = names
            .split_whitespace()
            .position(|n| n == "ListenOverflows")?;
        return values.split_whitespace().nth(i)?.parse().ok();
    }
    None
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
    fn own_cpu_time_is_readable() {
        assert!(process_cpu(std::process::id()).is_ok());
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
    fn listen_overflows_parse() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 3 54983 54983\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(parse_listen_overflows(text), Some(54983));
        assert_eq!(parse_listen_overflows("IpExt: A\nIpExt: 1\n"), None);
    }

    #[test]
    fn vm_rss_parses() {
        let status = "Name:\thoop\nVmPeak:\t  100 kB\nVmRSS:\t   77484 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(77484 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
    }
}
