//! `hoop bench file`, the command: the runs at one queue depth or several, one table row per
//! engine, the notes under the table, the queue-depth chart, and the run's verdict.

use std::io;

use crate::compare::file::run_engines;
use crate::machine as sysinfo;
use crate::output::Out;
use crate::plan::file::{Engine, FileJob, FilePlan};
use crate::plan::size::fmt_bytes;
use crate::record::file::FileResult;
use crate::report::file_sweep;

/// Runs `hoop bench file`.
pub fn run_file(plan: FilePlan, json: bool) -> io::Result<()> {
    let FilePlan {
        job,
        depths,
        engines,
        out: chart_dir,
    } = plan;
    for &qd in &depths {
        FileJob { qd, ..job.clone() }.check()?;
    }
    // Sync and fio-psync keep one I/O in flight whatever the depth: they run at the first only.
    let plan: Vec<(usize, Vec<Engine>)> = depths
        .iter()
        .enumerate()
        .map(|(i, &qd)| {
            let at_depth = engines
                .iter()
                .copied()
                .filter(|e| i == 0 || !e.depth_one_by_nature())
                .collect();
            (qd, at_depth)
        })
        .collect();
    let runs: usize = plan.iter().map(|(_, at_depth)| at_depth.len()).sum();
    let out = Out::new(json, job.secs * runs as f64);
    let mut results = Vec::new();
    for (qd, at_depth) in &plan {
        if at_depth.is_empty() {
            continue;
        }
        let qd = *qd;
        results.extend(run_engines(&FileJob { qd, ..job.clone() }, at_depth, &out)?.results);
    }
    out.finish();
    if !results.is_empty() {
        out.human(&format!("{}\n{}", table(&results), notes(&results)));
    }
    if depths.len() > 1 {
        let dir = chart_dir.unwrap_or_else(|| sysinfo::target_dir().join("hoop-report"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let path = dir.join("file_qd.svg");
        let title = format!(
            "file: {} {} IOPS by queue depth, {}",
            job.rw.name(),
            fmt_bytes(job.bs as u64),
            if job.direct {
                "O_DIRECT"
            } else {
                "buffered (hot cache)"
            }
        );
        let drawn = file_sweep::draw(&path, &results, &depths, &title)
            .map_err(|e| io::Error::other(format!("cannot draw {}: {e}", path.display())));
        out.human(&format!(
            "## IOPS by queue depth\n\n{}\n{}",
            file_sweep::table(&results, &depths),
            match drawn {
                Ok(()) => format!("chart: {}", path.display()),
                Err(e) => format!("chart: not drawn: {e}"),
            }
        ));
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.ok())
        .map(|r| match &r.first_error {
            Some(e) => format!("{} ({} errors; first: {e})", r.engine, r.errors),
            None => format!("{} (no I/O counted)", r.engine),
        })
        .collect();
    if !failed.is_empty() {
        return Err(io::Error::other(format!(
            "bench file: {} engine(s) failed: {}",
            failed.len(),
            failed.join("; ")
        )));
    }
    Ok(())
}

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
