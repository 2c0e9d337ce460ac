//! The quick file run of `hoop bench` (the suite): 4 KiB random reads at QD 32 on one test
//! file, O_DIRECT and then buffered on a hot page cache, a few seconds per engine, and its
//! section of the report with the file targets evaluated from the measured numbers.

use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

use super::{fio, fmt_bytes, metrics, run_engines, Engine, FileJob, FileResult, Rw};
use crate::bench::invalid;
use crate::bench::output::Out;

/// Engines of the O_DIRECT part (fio's skip themselves when fio is not installed).
const DIRECT: [Engine; 8] = [
    Engine::Sync,
    Engine::Threadpool,
    Engine::LinuxAio,
    Engine::Uring,
    Engine::UringFixed,
    Engine::TokioFs,
    Engine::Shared,
    Engine::FioFixed,
];
/// Engines of the buffered part.
const BUFFERED: [Engine; 8] = [
    Engine::Sync,
    Engine::LinuxAio,
    Engine::Uring,
    Engine::UringFixed,
    Engine::RawUring,
    Engine::TokioFs,
    Engine::Shared,
    Engine::Fio,
];
/// The peers in both parts (tokio-io-uring skips itself in the O_DIRECT one: buffered only).
/// Not glommio: its binary's build (glommio's dependencies) would take the main job past 8
/// minutes on a fresh clone here; `hoop bench file --engines glommio` runs it.
const PEERS: [Engine; 4] = [
    Engine::Monoio,
    Engine::Compio,
    Engine::TokioUring,
    Engine::TokioIoUring,
];
/// Block size of the quick run.
const BS: usize = 4096;
/// Queue depth of the quick run.
const QD: usize = 32;

/// Options of the quick run.
#[derive(Debug, Clone)]
pub(crate) struct QuickOptions {
    /// Directory of the test file.
    pub dir: PathBuf,
    /// Test file size.
    pub size: u64,
    /// Seconds per engine.
    pub secs: f64,
    /// Whether the peers run too (`hoop-peer`, built on demand).
    pub peers: bool,
}

impl QuickOptions {
    /// Planned seconds (engines only).
    pub(crate) fn planned_secs(&self) -> f64 {
        let peers = if self.peers { 2 * PEERS.len() - 1 } else { 0 };
        self.secs * (DIRECT.len() + BUFFERED.len() + peers) as f64
    }

    /// The engines of one part.
    fn engines(&self, direct: bool) -> Vec<Engine> {
        let mut v = if direct {
            DIRECT.to_vec()
        } else {
            BUFFERED.to_vec()
        };
        if self.peers {
            // Before fio's (the last of each list), so that fio stays last as it always ran.
            let at = v.iter().position(|e| e.is_fio()).unwrap_or(v.len());
            v.splice(at..at, PEERS);
        }
        v
    }

    /// The job of one part.
    fn job(&self, direct: bool) -> FileJob {
        FileJob {
            dir: self.dir.clone(),
            size: self.size,
            bs: BS,
            qd: QD,
            secs: self.secs,
            direct,
            rw: Rw::Read,
        }
    }

    /// Checks the numbers before the suite starts (a bad `--file-size` must not wait for the
    /// echo matrix to be refused), in the suite's flag names.
    pub(crate) fn check(&self) -> io::Result<()> {
        self.job(false).check().map_err(|e| {
            invalid(
                e.to_string()
                    .replace("--size", "--file-size")
                    .replace("--secs", "--file-secs")
                    .replace("--bs", "the block size"),
            )
        })
    }
}

/// What the quick run measured.
#[derive(Debug, Default)]
pub(crate) struct FileSuite {
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
    /// Parts that could not run, and engines that failed.
    pub failures: Vec<String>,
}

impl FileSuite {
    /// Every result, O_DIRECT first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &FileResult> {
        self.direct.iter().chain(&self.buffered)
    }
}

/// Runs the quick file run; a part that cannot run (no O_DIRECT, no space) is a failure in
/// the result, not an error, so the rest of the suite is still reported.
pub(crate) fn run_quick(o: &QuickOptions, out: &Out) -> FileSuite {
    let mut suite = FileSuite {
        size: o.size,
        secs: o.secs,
        fio_installed: fio::fio_path().is_some(),
        ..FileSuite::default()
    };
    for direct in [true, false] {
        let job = o.job(direct);
        let engines = o.engines(direct);
        let part = if direct { "O_DIRECT" } else { "buffered" };
        match run_engines(&job, &engines, out) {
            Ok(run) => {
                for r in run.results.iter().filter(|r| !r.ok()) {
                    suite.failures.push(match &r.first_error {
                        Some(e) => {
                            format!("file {part} {}: {} errors; first: {e}", r.engine, r.errors)
                        }
                        None => format!("file {part} {}: no I/O counted", r.engine),
                    });
                }
                if direct || suite.header.is_none() {
                    suite.header = Some(run.header);
                }
                if direct {
                    suite.direct = run.results;
                } else {
                    suite.buffered = run.results;
                }
            }
            Err(e) => {
                out.note(&format!("warning: file bench ({part}): {e}"));
                suite.failures.push(format!("file bench ({part}): {e}"));
            }
        }
    }
    suite
}

/// `metric` of `engine` in `results`, if it ran with no error.
fn metric(
    results: &[FileResult],
    engine: &str,
    metric: impl Fn(&FileResult) -> Option<f64>,
) -> Option<f64> {
    results
        .iter()
        .find(|r| r.engine == engine && r.ok())
        .and_then(metric)
}

/// Which figure a target compares, and which way it must go.
#[derive(Clone, Copy)]
enum Goal {
    /// IOPS ratio at least this.
    Iops(f64),
    /// CPU per I/O ratio at most this.
    Cpu(f64),
}

/// The file targets of issues 6, 13 and 15, each evaluated from `s` (one line each).
pub(crate) fn targets(s: &FileSuite) -> Vec<String> {
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let mut lines = Vec::new();
    let mut ratio = |part: &str, rs: &[FileResult], a: &str, b: &str, goal: Goal| {
        let (what, want, f): (_, _, fn(&FileResult) -> Option<f64>) = match goal {
            Goal::Iops(min) => ("IOPS", format!(">= {min}x"), |r| Some(r.iops)),
            Goal::Cpu(max) => ("CPU per I/O", format!("<= {max}x"), |r| r.cpu_us_per_io),
        };
        let line = match (metric(rs, a, f), metric(rs, b, f)) {
            (Some(x), Some(y)) if y > 0.0 => {
                let r = x / y;
                let ok = match goal {
                    Goal::Iops(min) => r >= min,
                    Goal::Cpu(max) => r <= max,
                };
                format!(
                    "- file {part} 4 KiB QD {QD}: {a}/{b} {what} {r:.2}x (target {want}): {}",
                    verdict(ok)
                )
            }
            (_, None) if b.starts_with("fio") && !s.fio_installed => {
                format!("- file {part}: {a}/{b} (target {want}): n/a (fio not installed)")
            }
            _ => format!("- file {part}: {a}/{b} {what} (target {want}): n/a (not measured)"),
        };
        lines.push(line);
    };
    ratio(
        "O_DIRECT",
        &s.direct,
        "uring-fixed",
        "fio-fixed",
        Goal::Iops(1.0),
    );
    ratio(
        "O_DIRECT",
        &s.direct,
        "uring-fixed",
        "linux-aio",
        Goal::Iops(1.5),
    );
    ratio(
        "O_DIRECT",
        &s.direct,
        "uring-fixed",
        "sync",
        Goal::Iops(3.0),
    );
    ratio("buffered", &s.buffered, "uring", "sync", Goal::Iops(1.0));
    ratio("buffered", &s.buffered, "uring", "fio", Goal::Iops(1.0));
    ratio("O_DIRECT", &s.direct, "shared", "tokio-fs", Goal::Iops(1.0));
    ratio("O_DIRECT", &s.direct, "shared", "tokio-fs", Goal::Cpu(0.5));
    ratio(
        "buffered",
        &s.buffered,
        "shared",
        "tokio-fs",
        Goal::Iops(3.0),
    );
    // Issue 15: buffered at no more CPU per I/O than pread, and near the kernel's own ceiling.
    ratio("buffered", &s.buffered, "uring", "sync", Goal::Cpu(1.0));
    ratio(
        "buffered",
        &s.buffered,
        "uring",
        "raw-io-uring",
        Goal::Iops(0.95),
    );
    lines
}

/// hoop's `uring` engine against each peer that ran, IOPS and CPU per I/O, one line per part
/// and peer (no target: the figures, for the reader).
pub(crate) fn peer_lines(s: &FileSuite) -> Vec<String> {
    let mut lines = Vec::new();
    for (part, rs) in [("O_DIRECT", &s.direct), ("buffered", &s.buffered)] {
        let Some(h) = rs.iter().find(|r| r.engine == "uring" && r.ok()) else {
            continue;
        };
        for p in rs
            .iter()
            .filter(|r| r.ok() && Engine::by_name(r.engine).is_some_and(Engine::is_peer))
        {
            let cpu = match (h.cpu_us_per_io, p.cpu_us_per_io) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                _ => "-".into(),
            };
            lines.push(format!(
                "- file {part}: uring/{} IOPS {:.2}x ({:.0} vs {:.0}), CPU per I/O {cpu}",
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
pub(crate) fn section(s: &FileSuite) -> String {
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
            let _ = writeln!(m, "{}", metrics::table(rs));
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
            "### Peers side by side (hoop's `uring` / each peer, same reads, same checks)\n"
        );
        for l in peers {
            let _ = writeln!(m, "{l}");
        }
        m.push('\n');
    }
    let _ = writeln!(m, "### File targets\n");
    for t in targets(s) {
        let _ = writeln!(m, "{t}");
    }
    m.push('\n');
    m
}

/// The quick run's defaults: the `hoop bench file` test file directory.
pub(crate) fn default_dir() -> PathBuf {
    crate::bench::sysinfo::target_dir().join("hoop-bench-file")
}

/// Parses `--file-size`.
pub(crate) fn parse_size(s: &str) -> io::Result<u64> {
    super::parse_size("--file-size", s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::file::metrics::{Measured, ResultContext};

    fn result(engine: &'static str, iops: f64, direct: bool) -> FileResult {
        let m = Measured::new(QD).unwrap();
        let c = ResultContext {
            rw: "randread",
            bs: BS,
            qd: QD,
            direct,
            file_bytes: 1 << 20,
            fs_type: "ext4".into(),
            cached_pct: None,
            pinned_cpu: None,
        };
        let mut r = FileResult::new(engine, &m, &c);
        r.iops = iops;
        r.ios = 1000;
        r
    }

    #[test]
    fn targets_follow_the_measured_ratios() {
        let s = FileSuite {
            size: 1 << 20,
            secs: 1.0,
            direct: vec![
                result("sync", 30_000.0, true),
                result("linux-aio", 100_000.0, true),
                result("uring-fixed", 160_000.0, true),
                result("fio-fixed", 170_000.0, true),
            ],
            buffered: vec![
                result("sync", 700_000.0, false),
                result("uring", 650_000.0, false),
            ],
            ..FileSuite::default()
        };
        let t = targets(&s);
        assert_eq!(t.len(), 10);
        assert!(
            t[0].contains("0.94x") && t[0].ends_with("NOT met"),
            "{}",
            t[0]
        );
        assert!(
            t[1].contains("1.60x") && t[1].ends_with(": met"),
            "{}",
            t[1]
        );
        assert!(
            t[2].contains("5.33x") && t[2].ends_with(": met"),
            "{}",
            t[2]
        );
        assert!(
            t[3].contains("0.93x") && t[3].ends_with("NOT met"),
            "{}",
            t[3]
        );
        assert!(t[9].contains("uring/raw-io-uring"), "{}", t[9]);
        assert!(t[4].ends_with("n/a (fio not installed)"), "{}", t[4]);
        let with_fio = FileSuite {
            fio_installed: true,
            ..FileSuite::default()
        };
        let t = targets(&with_fio);
        assert!(t[4].ends_with("n/a (not measured)"), "{}", t[4]);
        let md = section(&s);
        assert!(md.contains("## File random reads"));
        assert!(md.contains("| uring-fixed | 32 |"), "{md}");
    }

    #[test]
    fn shared_is_compared_with_tokio_fs_on_iops_and_cpu() {
        let with_cpu = |engine, iops, cpu, direct| {
            let mut r = result(engine, iops, direct);
            r.cpu_us_per_io = Some(cpu);
            r
        };
        let s = FileSuite {
            direct: vec![
                with_cpu("tokio-fs", 40_000.0, 10.0, true),
                with_cpu("shared", 41_000.0, 6.0, true),
            ],
            buffered: vec![
                with_cpu("tokio-fs", 100_000.0, 9.0, false),
                with_cpu("shared", 350_000.0, 2.0, false),
            ],
            ..FileSuite::default()
        };
        let t = targets(&s);
        let expected = [
            ("shared/tokio-fs IOPS 1.02x", ": met"),
            (
                "shared/tokio-fs CPU per I/O 0.60x (target <= 0.5x)",
                "NOT met",
            ),
            ("shared/tokio-fs IOPS 3.50x", ": met"),
        ];
        for (line, (needle, verdict)) in t[5..].iter().zip(expected) {
            assert!(line.contains(needle) && line.ends_with(verdict), "{line}");
        }
        let none = targets(&FileSuite::default());
        assert!(none[6].ends_with("n/a (not measured)"), "{}", none[6]);
    }

    #[test]
    fn an_engine_with_errors_is_not_measured() {
        let mut bad = result("uring", 900_000.0, false);
        bad.errors = 3;
        let s = FileSuite {
            buffered: vec![result("sync", 700_000.0, false), bad],
            ..FileSuite::default()
        };
        assert!(targets(&s)[3].contains("n/a"), "{:?}", targets(&s));
    }

    #[test]
    fn the_peers_run_in_both_parts_before_fio_unless_left_out() {
        let o = QuickOptions {
            dir: PathBuf::from("."),
            size: 16 << 20,
            secs: 1.0,
            peers: true,
        };
        for direct in [true, false] {
            let e = o.engines(direct);
            let names: Vec<&str> = e.iter().map(|e| e.name()).collect();
            assert!(e.last().is_some_and(|e| e.is_fio()), "{names:?}");
            let peers: Vec<Engine> = e.iter().copied().filter(|e| e.is_peer()).collect();
            assert_eq!(peers, PEERS, "{names:?}");
            assert!(!e.contains(&Engine::Glommio), "{names:?}");
        }
        let lean = QuickOptions { peers: false, ..o };
        assert_eq!(lean.engines(true), DIRECT);
        assert_eq!(lean.engines(false), BUFFERED);
        assert_eq!(lean.planned_secs(), 16.0);
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

    #[test]
    fn bad_sizes_are_refused_before_the_suite_runs_in_its_flag_names() {
        let o = QuickOptions {
            dir: PathBuf::from("."),
            size: 16 << 20,
            secs: 0.2,
            peers: false,
        };
        assert!(o.check().is_ok());
        for size in [1000, 0, 2048] {
            let e = QuickOptions { size, ..o.clone() }.check().unwrap_err();
            assert!(e.to_string().contains("--file-size"), "{size}: {e}");
        }
        let e = QuickOptions { secs: 0.0, ..o }.check().unwrap_err();
        assert!(e.to_string().contains("--file-secs"), "{e}");
    }
}
