//! What the report says about the machine: CPU, cores, kernel, io_uring setup, date; and which
//! CPUs the benchmarks may pin to.

pub mod fs;
pub mod nofile;
pub mod pin;
pub mod proc;
pub mod uring_paths;

pub(crate) use nofile::{nofile_hard_limit, nofile_limit, raise_nofile_limit};

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The machine, for the report's header.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SysInfo {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs online.
    pub cores_online: usize,
    /// CPUs this process may run on.
    pub cores_allowed: Vec<usize>,
    /// `uname -srv`.
    pub kernel: String,
    /// The setup flags the kernel accepted for a default hoop ring (or why none).
    pub uring_setup_flags: String,
    /// SQ and CQ sizes of that ring.
    pub uring_ring_sizes: Option<(u32, u32)>,
    /// When the report was made, UTC.
    pub date_utc: String,
    /// The command that made it.
    pub command: String,
    /// perf, if it was found.
    pub perf: Option<String>,
}

impl SysInfo {
    /// Gathers everything (sets up and closes one hoop ring).
    pub(crate) fn collect() -> SysInfo {
        // Forced io_uring: with `auto` (or HOOP_DRIVER=epoll) this line could describe epoll.
        let forced = hoop::Runtime::builder()
            .driver(hoop::DriverKind::Uring)
            .build();
        let (flags, sizes) = match forced {
            Ok(rt) => (rt.setup_flags().to_string(), Some(rt.ring_sizes())),
            Err(e) => (format!("unavailable: {e}"), None),
        };
        SysInfo {
            cpu_model: cpu_model(),
            // SAFETY: sysconf has no memory-safety preconditions.
            cores_online: usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) })
                .unwrap_or(0),
            cores_allowed: allowed_cpus(),
            kernel: kernel(),
            uring_setup_flags: flags,
            uring_ring_sizes: sizes,
            date_utc: utc_now(),
            command: command_line(),
            perf: perf_path().map(|p| p.display().to_string()),
        }
    }
}

/// `perf` on PATH, if any.
pub(crate) fn perf_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("perf"))
        .find(|p| p.is_file())
}

/// `model name` from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// `uname -srvm`: system name, release, version, machine.
pub fn kernel() -> String {
    // SAFETY: utsname is plain old data; all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname fills the struct it is given.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".to_string();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

/// The CPUs this process may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most size_of::<cpu_set_t>() bytes into `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_ISSET reads inside the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Server and client CPUs for side-by-side runs: the first two allowed CPUs, or none (unpinned)
/// when fewer than two are available.
pub(crate) fn pin_plan() -> (Option<usize>, Option<usize>) {
    match allowed_cpus().as_slice() {
        [a, b, ..] => (Some(*a), Some(*b)),
        _ => (None, None),
    }
}

/// The exact command line, shell-quoted where needed.
pub(crate) fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `target/hoop-report` of the build this binary came from (`.../target/release/hoop`), or
/// `./target/hoop-report` when the binary is not inside a `target` directory.
pub fn default_out_dir() -> PathBuf {
    target_dir().join("hoop-report")
}

/// The `target` directory of the build this binary came from, or `./target` when the binary
/// is not inside a `target` directory.
pub(crate) fn target_dir() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|p| p.file_name().is_some_and(|n| n == "target"))
            .map(|t| t.to_path_buf())
    });
    from_exe.unwrap_or_else(|| PathBuf::from("target"))
}

/// Now, as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (days to civil date: H. Hinnant).
fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!allowed_cpus().is_empty());
    }
}
