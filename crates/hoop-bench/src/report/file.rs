//! What `hoop bench file` prints: the header (job, machine, file, pinning, checks), one table
//! row per engine, and the notes under the table.

use crate::load::file::testfile::TestFile;
use crate::machine as sysinfo;
use crate::plan::file::{Engine, FileJob, Rw};
use crate::plan::size::fmt_bytes;
use crate::record::file::FileResult;

/// The human table of `results`.
pub fn table(results: &[FileResult]) -> String {
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = String::from(
        "| engine | QD | IOPS | MiB/s | p50 µs | p99 µs | p99.9 µs | max µs | ctx vol | ctx invol | CPU usr s | CPU sys s | CPU µs/IO | syscalls/IO | depth | I/Os | errors | verified |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in results {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.1} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} |\n",
            r.engine,
            r.qd_effective,
            r.iops,
            r.mib_s,
            f1(r.p50_us),
            f1(r.p99_us),
            f1(r.p999_us),
            f1(r.max_us),
            r.ctx_voluntary,
            r.ctx_involuntary,
            r.cpu_user_s,
            r.cpu_sys_s,
            r.cpu_us_per_io
                .map_or("-".to_string(), |x| format!("{x:.2}")),
            r.syscalls_per_io
                .map_or("-".to_string(), |x| format!("{x:.3}")),
            f1(r.depth_mean),
            r.ios,
            r.errors,
            if r.verified { "yes" } else { "no (fio)" },
        ));
    }
    s
}

/// The notes under the table: each engine's note and first error.
pub fn notes(results: &[FileResult]) -> String {
    let mut s = String::new();
    for r in results {
        if let Some(n) = &r.note {
            s.push_str(&format!("- {}: {n}\n", r.engine));
        }
        if let Some(e) = &r.first_error {
            s.push_str(&format!(
                "- {}: {} errors (not counted as I/O); first: {e}\n",
                r.engine, r.errors
            ));
        }
    }
    let mut unknown: Vec<&str> = Vec::new();
    for r in results.iter().filter(|r| r.syscalls_per_io.is_none()) {
        if !unknown.contains(&r.engine) {
            unknown.push(r.engine);
        }
    }
    if !unknown.is_empty() {
        s.push_str(&format!(
            "- syscalls/IO: not counted for {} (-)\n",
            unknown.join(", ")
        ));
    }
    s
}

/// The header: the job, the machine, the file and its device, pinning, verification, cache.
pub(crate) fn header(
    job: &FileJob,
    tf: &TestFile,
    allowed: &[usize],
    pin: Option<usize>,
    warmed: Option<Option<f64>>,
    order: &[Engine],
    reordered: bool,
) -> String {
    let cpus: Vec<String> = allowed.iter().map(usize::to_string).collect();
    let mode = if job.direct {
        "O_DIRECT (page cache bypassed)"
    } else {
        "buffered (hot page cache)"
    };
    let mut s = format!(
        "## hoop bench file: {}, bs {}, QD {}, {} s per engine, {mode}\n\n",
        job.rw.name(),
        fmt_bytes(job.bs as u64),
        job.qd,
        job.secs
    );
    s.push_str(&format!(
        "- machine: {}, CPUs allowed: {}; kernel {}\n",
        sysinfo::cpu_model(),
        cpus.join(","),
        sysinfo::kernel()
    ));
    s.push_str(&format!(
        "- file: {} ({}, {}) on {}\n",
        tf.path.display(),
        fmt_bytes(tf.size),
        tf.origin,
        tf.fs.describe()
    ));
    s.push_str(&match pin {
        Some(cpu) => format!(
            "- pinning: each engine's submitting thread on CPU {cpu} (fio: --cpus_allowed={cpu}); \
             threadpool workers and the kernel's threads (io-wq, SQPOLL) unpinned\n"
        ),
        None => "- pinning: none (fewer than 2 CPUs allowed)\n".to_string(),
    });
    if order.iter().any(|e| e.on_tokio()) {
        s.push_str(
            "- tokio engines: a multi-thread tokio runtime, one worker per allowed CPU; its \
             workers, blocking pool and every thread the engine starts unpinned (tasks migrate)\n",
        );
    }
    if order.iter().any(|e| e.is_peer()) {
        s.push_str(
            "- peers (monoio, compio, tokio-uring, glommio, tokio-io-uring): the hoop-peer binary \
             (peers/, a cargo project of its own, built on demand), a child process per run: QD \
             tasks on one thread of the peer's own runtime, that thread pinned like ours \
             (tokio-io-uring: on a multi-thread tokio runtime, one worker per allowed CPU, all \
             unpinned, as tokio-fs and shared), reads checked by the same code; CPU: the \
             child's own getrusage over its run\n",
        );
    }
    s.push_str(&format!(
        "- verification: a read counts only if it returned {} bytes and the first 8 bytes of \
         every 512-byte sector in it equal that sector's file offset (all sectors checked); \
         writes ({}) write the same stamped content; failed, short or wrong I/O counts as an \
         error, never as I/O; fio's results are not verified\n",
        job.bs,
        match job.rw {
            Rw::Read => "none in this job",
            Rw::Write => "all of them",
            Rw::Mixed => "half of them",
        }
    ));
    match warmed {
        Some(pct) => s.push_str(&format!(
            "- page cache: the file was read once before the engines; resident: {} (mincore)\n",
            pct.map_or("unknown".to_string(), |p| format!("{p:.1}%"))
        )),
        None => s.push_str("- page cache: bypassed (O_DIRECT)\n"),
    }
    s.push_str("- latency: per I/O, submit to completion; CPU and context switches: getrusage of the process over each run (io_uring's kernel threads included)\n");
    let names: Vec<&str> = order.iter().map(|e| e.name()).collect();
    s.push_str(&format!(
        "- engines, in order: {}{}\n",
        names.join(", "),
        if reordered {
            " (fio's last: its writes would spoil the stamped content)"
        } else {
            ""
        }
    ));
    s
}
