//! The tables of `hoop bench fsread`: latency per engine and size, and `shared`'s ratio to the
//! others.

use std::fmt::Write as _;

use crate::plan::fsread::ENGINES;
use crate::plan::size::fmt_bytes;
use crate::record::fsread::{mean_of, ReadResult};

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
