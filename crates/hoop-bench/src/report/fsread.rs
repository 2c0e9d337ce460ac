//! `hoop bench fsread`, the command: the runs, latency per engine and size, `shared`'s ratio
//! to the others, and the run's verdict.

use std::fmt::Write as _;
use std::io;

use crate::compare::fsread::run_plan;
use crate::output::Out;
use crate::plan::fsread::{FsreadPlan, ENGINES};
use crate::plan::size::fmt_bytes;
use crate::record::fsread::{mean_of, ReadResult};

/// Runs `hoop bench fsread`.
pub fn run_fsread(plan: FsreadPlan, json: bool) -> io::Result<()> {
    plan.check()?;
    let out = Out::new(json, plan.planned_secs());
    let o = run_plan(&plan, &out)?;
    out.finish();
    out.human(&format!(
        "{}\n{}",
        table(&o.results),
        ratio_lines(&o.results).join("\n")
    ));
    let bad: Vec<String> = o
        .results
        .iter()
        .filter(|r| !r.ok())
        .map(|r| {
            format!(
                "{} {} ({} errors; first: {})",
                r.engine,
                fmt_bytes(r.file_bytes),
                r.errors,
                r.first_error.as_deref().unwrap_or("no read counted")
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(io::Error::other(format!(
            "bench fsread: {} run(s) failed: {}",
            bad.len(),
            bad.join("; ")
        )));
    }
    Ok(())
}

/// The results as a markdown table.
pub fn table(rs: &[ReadResult]) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut s = String::from(
        "| engine | file | reads | mean µs | p50 µs | p99 µs | max µs | verified | errors |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.engine,
            fmt_bytes(r.file_bytes),
            r.reads,
            f(r.mean_us),
            f(r.p50_us),
            f(r.p99_us),
            f(r.max_us),
            fmt_bytes(r.bytes_verified),
            r.errors
        );
    }
    s
}

/// `shared` against each other engine, per size: mean latency ratios (lower: hoop faster).
pub fn ratio_lines(rs: &[ReadResult]) -> Vec<String> {
    let mut sizes: Vec<u64> = rs.iter().map(|r| r.file_bytes).collect();
    sizes.dedup();
    let mut lines = Vec::new();
    for size in sizes {
        let Some(h) = mean_of(rs, "shared", size) else {
            continue;
        };
        for other in ENGINES.iter().filter(|&&e| e != "shared") {
            if let Some(o) = mean_of(rs, other, size).filter(|&o| o > 0.0) {
                lines.push(format!(
                    "- whole read {}: shared/{other} mean latency {:.2}x ({h:.1} vs {o:.1} µs)",
                    fmt_bytes(size),
                    h / o
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(engine: &'static str, errors: u64, mean: f64) -> ReadResult {
        ReadResult {
            bench: "fsread",
            engine,
            file_bytes: 65536,
            reads: 10,
            warmup: 2,
            errors,
            first_error: None,
            bytes_verified: 655_360,
            mean_us: Some(mean),
            p50_us: Some(mean),
            p99_us: Some(mean * 2.0),
            max_us: Some(mean * 3.0),
            secs: 0.01,
            workers: 2,
            setup: String::new(),
        }
    }

    #[test]
    fn shared_is_compared_with_every_engine_that_ran_clean() {
        let (h, p) = (read("shared", 0, 15.0), read("tokio-io-uring", 0, 40.0));
        let lines = ratio_lines(&[h.clone(), p]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("64 KiB: shared/tokio-io-uring mean latency 0.38x"),
            "{lines:?}"
        );
        assert!(ratio_lines(&[h, read("tokio-io-uring", 1, 40.0)]).is_empty());
        assert!(table(&[]).starts_with("| engine |"));
    }
}
