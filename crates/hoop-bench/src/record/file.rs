//! The record of `hoop bench file`: what one engine measured (counts, latency, resource usage
//! over the run) and the JSON line it becomes.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::record::fsread::ReadResult;

use crate::measure::latency as stats;

/// Latency figures computed elsewhere (fio's report, a peer's own histogram), microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Latencies {
    /// 50th percentile.
    pub p50: Option<f64>,
    /// 99th.
    pub p99: Option<f64>,
    /// 99.9th.
    pub p999: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
}

/// Resource usage (`getrusage`) at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    user: Duration,
    sys: Duration,
    voluntary: u64,
    involuntary: u64,
}

/// Whose usage: this process (every thread, io_uring's kernel threads included), or the
/// children it waited for (fio).
#[derive(Debug, Clone, Copy)]
pub enum Who {
    /// `RUSAGE_SELF`.
    Process,
    /// `RUSAGE_CHILDREN`.
    Children,
}

impl Usage {
    /// Now.
    pub fn now(who: Who) -> Usage {
        let which = match who {
            Who::Process => libc::RUSAGE_SELF,
            Who::Children => libc::RUSAGE_CHILDREN,
        };
        // SAFETY: rusage is plain old data; all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into the valid pointer.
        if unsafe { libc::getrusage(which, &mut ru) } != 0 {
            return Usage::default();
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Usage {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            voluntary: ru.ru_nvcsw.max(0) as u64,
            involuntary: ru.ru_nivcsw.max(0) as u64,
        }
    }

    /// Usage as another process measured it over its own run (a peer's `getrusage`).
    pub fn from_parts(user: Duration, sys: Duration, voluntary: u64, involuntary: u64) -> Usage {
        Usage {
            user,
            sys,
            voluntary,
            involuntary,
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

/// What an engine run measured, before it becomes a [`FileResult`].
#[derive(Debug)]
pub struct Measured {
    /// Verified reads (full length, every stamp right).
    pub reads: u64,
    /// Complete writes.
    pub writes: u64,
    /// Failed, short or unverified I/O.
    pub errors: u64,
    /// The first of them.
    pub first_error: Option<String>,
    /// Per-I/O latency, submit to completion, in ns (counted I/O only).
    pub hist: Histogram<u64>,
    /// Wall time from the first submission to the last completion, seconds.
    pub secs: f64,
    /// Resource usage over the run.
    pub usage: Usage,
    /// System calls on the I/O path, when counted.
    pub syscalls: Option<u64>,
    /// Effective queue depth.
    pub qd: usize,
    /// The ring's setup flags (hoop engines).
    pub setup_flags: Option<String>,
    /// What the reader should know about this engine's run.
    pub note: Option<String>,
    /// Whether reads were verified (false for fio).
    pub verified: bool,
    /// Latency figures computed elsewhere (fio's), used instead of `hist`.
    pub external_latency: Option<Latencies>,
    /// Whether the threads that submitted ran unpinned (a multi-thread runtime's workers),
    /// whatever CPU the engine's own thread was pinned to.
    pub unpinned: bool,
    /// The mean number of I/Os in flight, where the engine measured it (hoop's rings: the
    /// driver's time-weighted count of operations in the kernel); otherwise it is derived from
    /// IOPS and mean latency (Little's law).
    pub depth_mean: Option<f64>,
}

impl Measured {
    /// An empty measurement (qd `qd`, no I/O yet).
    pub fn new(qd: usize) -> std::io::Result<Measured> {
        Ok(Measured {
            reads: 0,
            writes: 0,
            errors: 0,
            first_error: None,
            hist: stats::new_histogram()?,
            secs: 0.0,
            usage: Usage::default(),
            syscalls: None,
            qd,
            setup_flags: None,
            note: None,
            verified: true,
            external_latency: None,
            unpinned: false,
            depth_mean: None,
        })
    }

    /// Counts one completed I/O of `latency_ns`: a read must have returned `bs` bytes and
    /// verify; a write must have written `bs` bytes.
    pub fn complete(
        &mut self,
        write: bool,
        res: std::io::Result<usize>,
        bs: usize,
        offset: u64,
        verified: impl FnOnce() -> bool,
        latency_ns: u128,
    ) {
        let what = if write { "write" } else { "read" };
        match res {
            Ok(n) if n == bs => {
                if write {
                    self.writes += 1;
                } else if verified() {
                    self.reads += 1;
                } else {
                    self.error(format!(
                        "read at byte {offset}: wrong content (a sector's offset stamp differs)"
                    ));
                    return;
                }
                stats::record_ns(&mut self.hist, latency_ns);
            }
            Ok(n) => self.error(format!("short {what} at byte {offset}: {n} of {bs} bytes")),
            Err(e) => self.error(format!("{what} at byte {offset}: {e}")),
        }
    }

    /// Adds the counts and latencies of `other` (another task's share of the same run).
    pub fn absorb(&mut self, other: Measured) -> std::io::Result<()> {
        self.reads += other.reads;
        self.writes += other.writes;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.hist
            .add(&other.hist)
            .map_err(|e| std::io::Error::other(format!("cannot merge histograms: {e:?}")))
    }

    /// Counts one error.
    pub fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(msg);
        }
    }

    /// Counted I/O.
    pub fn ios(&self) -> u64 {
        self.reads + self.writes
    }
}

/// One `hoop bench file` measurement: one engine (a JSON line with `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct FileResult {
    /// Always "file".
    pub bench: &'static str,
    /// The engine's name (`sync`, `uring-fixed`, `fio`, ...).
    pub engine: &'static str,
    /// randread, randwrite or randrw (50/50).
    pub rw: &'static str,
    /// Block size.
    pub bs_bytes: usize,
    /// Queue depth of the job (`--qd`).
    pub qd: usize,
    /// Queue depth in effect: `qd`, except 1 for sync and fio-psync (one I/O at a time).
    pub qd_effective: usize,
    /// O_DIRECT.
    pub direct: bool,
    /// Measured seconds (first submission to last completion).
    pub secs: f64,
    /// Counted I/O: verified reads plus complete writes.
    pub ios: u64,
    /// Reads counted.
    pub reads: u64,
    /// Writes counted.
    pub writes: u64,
    /// Failed, short or unverified I/O (never counted in `ios`).
    pub errors: u64,
    /// The first error, if any.
    pub first_error: Option<String>,
    /// ios / secs.
    pub iops: f64,
    /// Throughput of counted I/O, MiB/s.
    pub mib_s: f64,
    /// Latency per I/O, submit to completion, microseconds (null without I/O).
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// 99.9th percentile.
    pub p999_us: Option<f64>,
    /// Largest.
    pub max_us: Option<f64>,
    /// Context switches over the run, voluntary + involuntary.
    pub ctx_switches: u64,
    /// Voluntary context switches (the process; fio: the fio processes).
    pub ctx_voluntary: u64,
    /// Involuntary context switches.
    pub ctx_involuntary: u64,
    /// User CPU seconds over the run.
    pub cpu_user_s: f64,
    /// System CPU seconds over the run.
    pub cpu_sys_s: f64,
    /// CPU (user + system) per counted I/O, microseconds: the cost of the engine when the
    /// device, not the CPU, bounds IOPS (null without I/O).
    pub cpu_us_per_io: Option<f64>,
    /// System calls per I/O on the I/O path, where known (null: threadpool, fio).
    pub syscalls_per_io: Option<f64>,
    /// Mean I/Os in flight over the run: for hoop's rings, sampled by the driver (operations
    /// submitted to the kernel and not yet reaped, time-weighted); for the others, IOPS times
    /// mean latency (Little's law; fio: its mean completion latency). Null without I/O.
    pub depth_mean: Option<f64>,
    /// Size of the test file.
    pub file_bytes: u64,
    /// File system of the test file.
    pub fs_type: String,
    /// Resident share of the test file in the page cache when the engine started, percent.
    pub cached_pct: Option<f64>,
    /// Whether every counted read was checked against the file's stamps (false for fio).
    pub verified: bool,
    /// The CPU the submitting thread was pinned to, if any (null for the engines on a
    /// multi-thread tokio runtime: their workers are unpinned).
    pub pinned_cpu: Option<usize>,
    /// The ring's setup flags (hoop engines).
    pub setup_flags: Option<String>,
    /// What the reader should know about this run.
    pub note: Option<String>,
}

/// The context of a result that the engine does not know.
#[derive(Debug, Clone)]
pub struct ResultContext {
    /// randread, randwrite, randrw.
    pub rw: &'static str,
    /// Block size.
    pub bs: usize,
    /// Queue depth of the job.
    pub qd: usize,
    /// O_DIRECT.
    pub direct: bool,
    /// Test file size.
    pub file_bytes: u64,
    /// Its file system.
    pub fs_type: String,
    /// Resident share when the engine started.
    pub cached_pct: Option<f64>,
    /// Pinned CPU.
    pub pinned_cpu: Option<usize>,
}

impl FileResult {
    /// The record of `m` for `engine`.
    pub fn new(engine: &'static str, m: &Measured, c: &ResultContext) -> FileResult {
        let ios = m.ios();
        let per_sec = |v: f64| if m.secs > 0.0 { v / m.secs } else { 0.0 };
        let u = &m.usage;
        let lat = m.external_latency.unwrap_or(Latencies {
            p50: stats::quantile_us(&m.hist, 0.5),
            p99: stats::quantile_us(&m.hist, 0.99),
            p999: stats::quantile_us(&m.hist, 0.999),
            max: stats::max_us(&m.hist),
            mean: stats::mean_us(&m.hist),
        });
        let iops = per_sec(ios as f64);
        let little = lat.mean.map(|us| iops * us / 1e6);
        let depth_mean = m
            .depth_mean
            .or(little)
            .filter(|_| ios > 0)
            .map(|d| (d * 100.0).round() / 100.0);
        FileResult {
            bench: "file",
            engine,
            rw: c.rw,
            bs_bytes: c.bs,
            qd: c.qd,
            qd_effective: m.qd,
            direct: c.direct,
            secs: stats::round3(m.secs),
            ios,
            reads: m.reads,
            writes: m.writes,
            errors: m.errors,
            first_error: m.first_error.clone(),
            iops: iops.round(),
            mib_s: stats::round3(per_sec(ios as f64 * c.bs as f64 / (1024.0 * 1024.0))),
            p50_us: lat.p50,
            p99_us: lat.p99,
            p999_us: lat.p999,
            max_us: lat.max,
            ctx_switches: u.voluntary + u.involuntary,
            ctx_voluntary: u.voluntary,
            ctx_involuntary: u.involuntary,
            cpu_user_s: stats::round3(u.user.as_secs_f64()),
            cpu_sys_s: stats::round3(u.sys.as_secs_f64()),
            cpu_us_per_io: (ios > 0).then(|| {
                let cpu = u.user.as_secs_f64() + u.sys.as_secs_f64();
                stats::round3(cpu * 1e6 / ios as f64)
            }),
            syscalls_per_io: m
                .syscalls
                .filter(|_| ios > 0)
                .map(|s| (s as f64 / ios as f64 * 10_000.0).round() / 10_000.0),
            depth_mean,
            file_bytes: c.file_bytes,
            fs_type: c.fs_type.clone(),
            cached_pct: c.cached_pct,
            verified: m.verified,
            pinned_cpu: c.pinned_cpu.filter(|_| !m.unpinned),
            setup_flags: m.setup_flags.clone(),
            note: m.note.clone(),
        }
    }

    /// Whether this run passes: no error and at least one counted I/O.
    pub fn ok(&self) -> bool {
        self.errors == 0 && self.ios > 0
    }
}

/// What the quick run measured.
#[derive(Debug, Default)]
pub struct FileSuite {
    /// Test file size.
    pub size: u64,
    /// Seconds per engine.
    pub secs: f64,
    /// The header of the O_DIRECT part (machine, file, device, pinning, verification), or of
    /// the buffered part when the O_DIRECT one could not run.
    pub header: Option<String>,
    /// Whether fio is on PATH (its engines skip themselves otherwise).
    pub fio_installed: bool,
    /// O_DIRECT results.
    pub direct: Vec<FileResult>,
    /// Buffered (hot page cache) results.
    pub buffered: Vec<FileResult>,
    /// Whole-file read latencies (`hoop bench fsread`'s engines).
    pub whole: Vec<ReadResult>,
    /// Whole-file engines skipped, each with why.
    pub whole_skipped: Vec<String>,
    /// Parts that could not run, and engines that failed.
    pub failures: Vec<String>,
}

impl FileSuite {
    /// Every result, O_DIRECT first.
    pub fn all(&self) -> impl Iterator<Item = &FileResult> {
        self.direct.iter().chain(&self.buffered)
    }
}
