//! The tables of `hoop bench file`: one row per engine, and the notes under them.

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
