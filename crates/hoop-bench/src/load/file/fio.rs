//! The same job through fio (`fio`, `fio-fixed` on its io_uring engine; `fio-psync` and
//! `fio-libaio` as cross-checks of `sync` and `linux-aio`), its JSON output parsed into the same
//! metrics. fio does not check what it reads, so these results are not verified; and what it
//! writes is not the stamped content, so a write job through fio spoils the test file.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::load::file::engine::{EngineCtx, Outcome};
use crate::plan::file::Rw;
use crate::record::file::{Latencies, Measured, Usage, Who};
use crate::target::captured::run_captured;

/// Extra time fio gets beyond the job's runtime (startup, file checks) before it is killed.
const GRACE: Duration = Duration::from_secs(60);

/// fio's flavours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FioKind {
    /// io_uring.
    Uring,
    /// io_uring with `--fixedbufs --registerfiles`.
    UringFixed,
    /// psync (QD 1).
    Psync,
    /// libaio.
    Libaio,
}

/// fio on PATH, if any.
pub(crate) fn fio_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("fio"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `path` as fio's `--filename` wants it (`:` separates file names there).
fn fio_filename(path: &Path) -> String {
    path.display().to_string().replace(':', "\\:")
}

/// The fio command line for the job.
pub(crate) fn fio_args(cx: &EngineCtx, kind: FioKind) -> Vec<String> {
    let job = cx.job;
    let (ioengine, qd) = match kind {
        FioKind::Uring | FioKind::UringFixed => ("io_uring", job.qd),
        FioKind::Psync => ("psync", 1),
        FioKind::Libaio => ("libaio", job.qd),
    };
    let runtime_ms = ((job.secs * 1000.0).round() as u64).max(1);
    let mut a = vec![
        "--name=hoop-bench-file".to_string(),
        format!("--filename={}", fio_filename(cx.path)),
        format!("--rw={}", job.rw.name()),
        format!("--bs={}", job.bs),
        format!("--size={}", cx.file_bytes),
        format!("--ioengine={ioengine}"),
        format!("--iodepth={qd}"),
        format!("--direct={}", u8::from(job.direct)),
        "--time_based".into(),
        format!("--runtime={runtime_ms}ms"),
        "--invalidate=0".into(),
        "--randrepeat=0".into(),
        "--norandommap".into(),
        "--allow_file_create=0".into(),
        "--output-format=json".into(),
        "--percentile_list=50:99:99.9".into(),
        "--lat_percentiles=1".into(),
        "--unified_rw_reporting=both".into(),
    ];
    if job.rw == Rw::Mixed {
        a.push("--rwmixread=50".into());
    }
    if let Some(cpu) = cx.pin {
        a.push(format!("--cpus_allowed={cpu}"));
    }
    if kind == FioKind::UringFixed {
        a.push("--fixedbufs".into());
        a.push("--registerfiles".into());
    }
    a
}

/// Runs fio with the job and parses its report.
pub(crate) fn run_fio(cx: &EngineCtx, fio: &Path, kind: FioKind) -> io::Result<Outcome> {
    let args = fio_args(cx, kind);
    let u0 = Usage::now(Who::Children);
    let run = run_captured(Command::new(fio).args(&args), cx.job.duration() + GRACE)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run {}: {e}", fio.display())))?;
    let usage = Usage::now(Who::Children).since(&u0);
    let (stdout, stderr) = (run.stdout, run.stderr);
    let tail = |s: &str| {
        let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" / ")
    };
    let Some(status) = run.status else {
        return Err(io::Error::other(format!(
            "fio did not finish within {:.0} s of its runtime; killed",
            GRACE.as_secs_f64()
        )));
    };
    if !status.success() {
        return Err(io::Error::other(format!(
            "fio failed ({status}): {}",
            tail(&stderr)
        )));
    }
    let qd = if kind == FioKind::Psync { 1 } else { cx.job.qd };
    let mut m = parse_report(&stdout, qd)?;
    m.usage = usage;
    m.note = Some(format!(
        "not verified: fio does its own I/O and checks nothing; CPU and context switches are \
         the fio processes' (getrusage of children), startup included; fio {}",
        args.iter()
            .filter(|a| a.starts_with("--ioengine")
                || a.starts_with("--fixedbufs")
                || a.starts_with("--registerfiles")
                || a.starts_with("--cpus_allowed"))
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    Ok(Outcome::Ran(Box::new(m)))
}

/// Parses fio's `--output-format=json` report (with `--unified_rw_reporting=both`: `read`,
/// `write` and their sum, `mixed`).
fn parse_report(stdout: &str, qd: usize) -> io::Result<Measured> {
    let start = stdout
        .find('{')
        .ok_or_else(|| io::Error::other("fio printed no JSON report"))?;
    let v: Value = serde_json::from_str(&stdout[start..])
        .map_err(|e| io::Error::other(format!("cannot parse fio's JSON report: {e}")))?;
    let job = v
        .get("jobs")
        .and_then(|j| j.get(0))
        .ok_or_else(|| io::Error::other("fio's report has no job"))?;
    let mut m = Measured::new(qd)?;
    m.verified = false;
    let err = job.get("error").and_then(Value::as_i64).unwrap_or(0);
    if err != 0 {
        m.error(format!(
            "fio reported error {err} ({})",
            io::Error::from_raw_os_error(err as i32)
        ));
    }
    let u = |k: &str, f: &str| {
        job.get(k)
            .and_then(|s| s.get(f))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    m.reads = u("read", "total_ios");
    m.writes = u("write", "total_ios");
    let bad: u64 = ["read", "write"]
        .iter()
        .map(|k| u(k, "short_ios") + u(k, "drop_ios"))
        .sum();
    if bad > 0 {
        m.error(format!("fio counted {bad} short or dropped I/Os"));
        m.errors += bad - 1;
    }
    let ios = m.ios();
    // Latency over reads and writes together: the `mixed` section (a lone direction's when
    // fio gave no `mixed`).
    let section = job.get("mixed").or_else(|| {
        ["read", "write"]
            .iter()
            .filter_map(|k| job.get(*k))
            .max_by_key(|s| s.get("total_ios").and_then(Value::as_u64).unwrap_or(0))
    });
    let ms = job.get("job_runtime").and_then(Value::as_u64).unwrap_or(0);
    m.secs = ms as f64 / 1000.0;
    if let Some(s) = section {
        let lat = s
            .get("lat_ns")
            .filter(|l| l.get("percentile").is_some())
            .or_else(|| s.get("clat_ns"));
        if let Some(lat) = lat.filter(|_| ios > 0) {
            let pct = |k: &str| {
                lat.get("percentile")
                    .and_then(|p| p.get(k))
                    .and_then(Value::as_f64)
                    .map(|ns| crate::measure::latency::round3(ns / 1000.0))
            };
            m.external_latency = Some(Latencies {
                p50: pct("50.000000"),
                p99: pct("99.000000"),
                p999: pct("99.900000"),
                max: lat
                    .get("max")
                    .and_then(Value::as_f64)
                    .map(|ns| crate::measure::latency::round3(ns / 1000.0)),
                mean: lat
                    .get("mean")
                    .and_then(Value::as_f64)
                    .map(|ns| ns / 1000.0),
            });
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_mixed_report_after_a_preamble() {
        let text = r#"note: something
{"jobs":[{"error":0,"job_runtime":2000,"read":{"total_ios":600},"write":{"total_ios":400},
"mixed":{"total_ios":1000,"short_ios":0,"drop_ios":0,"lat_ns":{"max":90000.0,"percentile":{"50.000000":1000,"99.000000":5000,"99.900000":9000}}}}]}"#;
        let m = parse_report(text, 8).unwrap();
        assert_eq!((m.reads, m.writes), (600, 400));
        assert_eq!(m.errors, 0);
        assert!(!m.verified);
        assert_eq!(m.secs, 2.0);
        let l = m.external_latency.unwrap();
        assert_eq!(l.p50, Some(1.0));
        assert_eq!(l.p999, Some(9.0));
        assert_eq!(l.max, Some(90.0));
    }

    #[test]
    fn counts_fio_errors() {
        let text = r#"{"jobs":[{"error":5,"job_runtime":10,"read":{"total_ios":0}}]}"#;
        let m = parse_report(text, 1).unwrap();
        assert_eq!(m.errors, 1);
        assert!(parse_report("garbage", 1).is_err());
    }
}
