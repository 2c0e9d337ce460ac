//! The quick file run's section of the suite's report: the header, both tables, the peers side
//! by side, the whole-file reads and the targets.

use std::fmt::Write as _;

use crate::compare::file_quick::{targets, QD, WHOLE_READS, WHOLE_SECS, WHOLE_SIZES, WHOLE_WARMUP};
use crate::plan::file::Engine;
use crate::plan::size::fmt_bytes;
use crate::record::file::FileSuite;
use crate::report::file::table;
use crate::report::fsread::{ratio_lines, table as read_table};

/// hoop's `uring` engine against each peer that ran, IOPS and CPU per I/O, one line per part
/// and peer, and hoop's `shared` against `tokio-io-uring` (both QD tasks on a multi-thread
/// tokio runtime) (no target here: the figures, for the reader).
pub fn peer_lines(s: &FileSuite) -> Vec<String> {
    let mut lines = Vec::new();
    for (part, rs, ours) in [
        ("O_DIRECT", &s.direct, "uring"),
        ("buffered", &s.buffered, "uring"),
        ("buffered", &s.buffered, "shared"),
    ] {
        let Some(h) = rs.iter().find(|r| r.engine == ours && r.ok()) else {
            continue;
        };
        for p in rs.iter().filter(|r| {
            r.ok()
                && Engine::by_name(r.engine).is_some_and(Engine::is_peer)
                && (ours == "uring" || r.engine == "tokio-io-uring")
        }) {
            let cpu = match (h.cpu_us_per_io, p.cpu_us_per_io) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                _ => "-".into(),
            };
            lines.push(format!(
                "- file {part}: {ours}/{} IOPS {:.2}x ({:.0} vs {:.0}), CPU per I/O {cpu}",
                p.engine,
                if p.iops > 0.0 { h.iops / p.iops } else { 0.0 },
                h.iops,
                p.iops,
            ));
        }
    }
    lines
}

/// The report's section: the job, both tables, the CPU per I/O note and the targets.
pub fn section(s: &FileSuite) -> String {
    let mut m = String::new();
    let _ = writeln!(
        m,
        "## File random reads ({} test file, 4 KiB, QD {QD}, {} s per engine)\n",
        fmt_bytes(s.size),
        s.secs
    );
    if let Some(h) = &s.header {
        // The header's own title line is replaced by this section's.
        for line in h.lines().filter(|l| l.starts_with("- ")) {
            let _ = writeln!(m, "{line}");
        }
        m.push('\n');
    }
    for (part, rs) in [
        ("O_DIRECT (page cache bypassed)", &s.direct),
        ("Buffered, hot page cache", &s.buffered),
    ] {
        let _ = writeln!(m, "### {part}\n");
        if rs.is_empty() {
            let _ = writeln!(m, "Not measured.\n");
        } else {
            let _ = writeln!(m, "{}", table(rs));
            if let Some(c) = rs.iter().find_map(|r| r.cached_pct) {
                if part.starts_with("Buffered") {
                    let _ = writeln!(m, "Page cache residency of the file: {c:.1}%.\n");
                }
            }
            for r in rs.iter() {
                if let Some(n) = &r.note {
                    let _ = writeln!(m, "- {}: {n}", r.engine);
                }
            }
            m.push('\n');
        }
    }
    let _ = writeln!(
        m,
        "With O_DIRECT at QD {QD} the device's latency bounds every engine (IOPS ≈ QD / p50 \
         latency, Little's law), so the engines differ more in CPU µs per I/O than in IOPS.\n"
    );
    let peers = peer_lines(s);
    if !peers.is_empty() {
        let _ = writeln!(
            m,
            "### Peers side by side (hoop's `uring` / each peer, and `shared` / `tokio-io-uring` \
             on the same multi-thread tokio runtime shape; same reads, same checks)\n"
        );
        for l in peers {
            let _ = writeln!(m, "{l}");
        }
        m.push('\n');
    }
    let _ = writeln!(
        m,
        "### Whole-file reads (hot cache, one task of a multi-thread tokio runtime)\n"
    );
    if s.whole.is_empty() {
        let _ = writeln!(m, "Not measured.");
    } else {
        let _ = writeln!(
            m,
            "Up to {WHOLE_READS} timed reads after {WHOLE_WARMUP} warm-up per engine and size (at \
             most {WHOLE_SECS} s each), every byte of every read checked; `hoop bench fsread` \
             runs more.\n"
        );
        let _ = writeln!(m, "{}", read_table(&s.whole));
        for r in &s.whole {
            if !r.setup.is_empty() && r.file_bytes == WHOLE_SIZES[0] {
                let _ = writeln!(m, "- {}: {}", r.engine, r.setup);
            }
        }
        for l in ratio_lines(&s.whole) {
            let _ = writeln!(m, "{l}");
        }
    }
    for why in &s.whole_skipped {
        let _ = writeln!(m, "- {why}");
    }
    m.push('\n');
    let _ = writeln!(m, "### File targets\n");
    for t in targets(s) {
        let _ = writeln!(m, "{t}");
    }
    m.push('\n');
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::file_quick::fixtures::{result, shared_suite};

    #[test]
    fn the_section_has_the_tables_and_the_targets() {
        let s = FileSuite {
            direct: vec![result("uring-fixed", 160_000.0, true)],
            ..FileSuite::default()
        };
        let md = section(&s);
        assert!(md.contains("## File random reads"));
        assert!(md.contains("| uring-fixed | 32 |"), "{md}");
        assert!(md.contains("### File targets"), "{md}");
    }

    #[test]
    fn shared_is_side_by_side_with_tokio_io_uring_and_whole_reads_are_shown() {
        let s = shared_suite();
        let peers = peer_lines(&s);
        assert!(
            peers
                .iter()
                .any(|l| l.contains("buffered: shared/tokio-io-uring IOPS 7.00x")),
            "{peers:?}"
        );
        let md = section(&FileSuite {
            whole_skipped: vec!["tokio-io-uring: skipped: --no-peers".into()],
            ..s
        });
        assert!(md.contains("### Whole-file reads"), "{md}");
        assert!(md.contains("| shared | 64 KiB |"), "{md}");
        assert!(md.contains("- tokio-io-uring: skipped: --no-peers"), "{md}");
    }

    #[test]
    fn uring_is_compared_with_each_peer_that_ran() {
        let with_cpu = |engine, iops, cpu| {
            let mut r = result(engine, iops, false);
            r.cpu_us_per_io = Some(cpu);
            r
        };
        let mut failed = with_cpu("compio", 1.0, 1.0);
        failed.errors = 1;
        let s = FileSuite {
            buffered: vec![
                with_cpu("uring", 800_000.0, 1.2),
                with_cpu("monoio", 400_000.0, 2.4),
                failed,
                with_cpu("tokio-fs", 100_000.0, 9.0),
            ],
            ..FileSuite::default()
        };
        let lines = peer_lines(&s);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("uring/monoio IOPS 2.00x") && lines[0].contains("CPU per I/O 0.50x"),
            "{lines:?}"
        );
        assert!(section(&s).contains("### Peers side by side"));
    }
}
