//! The quick file run of the `hoop bench` suite: 4 KiB random reads at QD 32, O_DIRECT then
//! buffered, a few seconds per engine, and short whole-file reads; then its targets, evaluated
//! from the measured numbers.

use std::io;
use std::path::PathBuf;

use crate::compare::file::run_engines;
use crate::compare::fsread;
use crate::load::file::fio;
use crate::output::Out;
use crate::plan::file::{Engine, FileJob, Rw};
use crate::plan::fsread::{FsreadPlan, ENGINES};
use crate::plan::invalid;
use crate::plan::size::fmt_bytes;
use crate::record::file::{FileResult, FileSuite};
use crate::record::fsread::mean_of;

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
pub(crate) const BS: usize = 4096;
/// Queue depth of the quick run.
pub(crate) const QD: usize = 32;
/// File sizes of the whole-file reads: those tokio's io_uring `fs::read` was measured at when
/// it came (DESIGN.md, "`hoop bench file`: `tokio-fs` and `shared`").
pub(crate) const WHOLE_SIZES: [u64; 2] = [64 << 10, 1 << 20];
/// Timed whole-file reads per engine and size.
pub(crate) const WHOLE_READS: u64 = 300;
/// Warm-up whole-file reads per engine and size.
pub(crate) const WHOLE_WARMUP: u64 = 30;
/// Longest time per whole-file engine and size, seconds.
pub(crate) const WHOLE_SECS: f64 = 1.0;

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
            + self.whole_plan().planned_secs()
    }

    /// The whole-file reads: tokio-io-uring only with the peers.
    fn whole_plan(&self) -> FsreadPlan {
        FsreadPlan {
            dir: self.dir.clone(),
            sizes: WHOLE_SIZES.to_vec(),
            reads: WHOLE_READS,
            warmup: WHOLE_WARMUP,
            secs: WHOLE_SECS,
            engines: ENGINES
                .into_iter()
                .filter(|&e| self.peers || e != "tokio-io-uring")
                .collect(),
        }
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
    if !o.peers {
        let line = "tokio-io-uring: skipped: the peers are left out (--no-peers)".to_string();
        out.human(&format!("whole-file reads: {line}"));
        suite.whole_skipped.push(line);
    }
    match fsread::run_plan(&o.whole_plan(), out) {
        Ok(w) => {
            for r in w.results.iter().filter(|r| !r.ok()) {
                suite.failures.push(format!(
                    "file whole read {} {}: {} errors; first: {}",
                    fmt_bytes(r.file_bytes),
                    r.engine,
                    r.errors,
                    r.first_error.as_deref().unwrap_or("no read counted")
                ));
            }
            suite.whole = w.results;
            suite.whole_skipped.extend(w.skipped);
        }
        Err(e) => {
            out.note(&format!("warning: whole-file reads: {e}"));
            suite.failures.push(format!("file whole reads: {e}"));
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

/// The file targets, in the report's order: (O_DIRECT, ours, theirs, goal). hoop's ring
/// against fio, linux-aio and sync; buffered at no more CPU per I/O than pread and near the
/// kernel's own ceiling; `shared` (hoop from a tokio runtime) against tokio's files, tokio's own
/// io_uring files and hoop's own thread-per-core ring.
const TARGETS: [(bool, &str, &str, Goal); 13] = [
    (true, "uring-fixed", "fio-fixed", Goal::Iops(1.0)),
    (true, "uring-fixed", "linux-aio", Goal::Iops(1.5)),
    (true, "uring-fixed", "sync", Goal::Iops(3.0)),
    (false, "uring", "sync", Goal::Iops(1.0)),
    (false, "uring", "fio", Goal::Iops(1.0)),
    (true, "shared", "tokio-fs", Goal::Iops(1.0)),
    (true, "shared", "tokio-fs", Goal::Cpu(0.5)),
    (false, "shared", "tokio-fs", Goal::Iops(3.0)),
    (false, "uring", "sync", Goal::Cpu(1.0)),
    (false, "uring", "raw-io-uring", Goal::Iops(0.95)),
    (false, "shared", "tokio-io-uring", Goal::Iops(5.0)),
    (true, "shared", "uring", Goal::Iops(0.95)),
    (false, "shared", "uring", Goal::Iops(0.9)),
];

/// The file targets ([`TARGETS`], then the whole-file reads'), each evaluated from `s`, one
/// line each (DESIGN.md, "Benchmarks of hoop from tokio").
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
    for &(direct, a, b, goal) in &TARGETS {
        if direct {
            ratio("O_DIRECT", &s.direct, a, b, goal);
        } else {
            ratio("buffered", &s.buffered, a, b, goal);
        }
    }
    lines.extend(whole_targets(s));
    lines
}

/// The whole-file read targets: `shared::fs::read` at most 0.5x the mean latency of
/// tokio's io_uring `tokio::fs::read`, at 64 KiB and at 1 MiB.
fn whole_targets(s: &FileSuite) -> Vec<String> {
    WHOLE_SIZES
        .iter()
        .map(|&size| {
            let what = format!(
                "- file whole read {}: shared/tokio-io-uring mean latency",
                fmt_bytes(size)
            );
            match (
                mean_of(&s.whole, "shared", size),
                mean_of(&s.whole, "tokio-io-uring", size),
            ) {
                (Some(h), Some(t)) if t > 0.0 => {
                    let r = h / t;
                    format!(
                        "{what} {r:.2}x ({h:.1} vs {t:.1} µs; target <= 0.5x): {}",
                        if r <= 0.5 { "met" } else { "NOT met" }
                    )
                }
                _ => format!("{what} (target <= 0.5x): n/a (not measured)"),
            }
        })
        .collect()
}

/// Results to test the targets and the report's section with.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{BS, QD};
    use crate::record::file::{FileResult, FileSuite, Measured, ResultContext};
    use crate::record::fsread::ReadResult;

    /// A passing result of `engine` at `iops`.
    pub(crate) fn result(engine: &'static str, iops: f64, direct: bool) -> FileResult {
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

    /// A passing whole-file read result of `engine` at `mean` µs.
    pub(crate) fn read(engine: &'static str, size: u64, mean: f64) -> ReadResult {
        ReadResult {
            bench: "fsread",
            engine,
            file_bytes: size,
            reads: 10,
            warmup: 1,
            errors: 0,
            first_error: None,
            bytes_verified: 10 * size,
            mean_us: Some(mean),
            p50_us: Some(mean),
            p99_us: Some(mean * 2.0),
            max_us: Some(mean * 3.0),
            secs: 0.1,
            workers: 2,
            setup: format!("{engine} setup"),
        }
    }

    /// `shared` against `uring` and `tokio-io-uring`, in both parts and in whole-file reads.
    pub(crate) fn shared_suite() -> FileSuite {
        FileSuite {
            direct: vec![
                result("uring", 100_000.0, true),
                result("shared", 96_000.0, true),
            ],
            buffered: vec![
                result("uring", 800_000.0, false),
                result("shared", 700_000.0, false),
                result("tokio-io-uring", 100_000.0, false),
            ],
            whole: vec![
                read("shared", 64 << 10, 15.0),
                read("tokio-io-uring", 64 << 10, 38.0),
                read("shared", 1 << 20, 90.0),
                read("tokio-io-uring", 1 << 20, 100.0),
            ],
            ..FileSuite::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::result;
    use super::*;

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
        assert_eq!(t.len(), 15);
        let expected = [
            ("0.94x", "NOT met"),
            ("1.60x", ": met"),
            ("5.33x", ": met"),
            ("0.93x", "NOT met"),
        ];
        for (line, (ratio, verdict)) in t.iter().zip(expected) {
            assert!(line.contains(ratio) && line.ends_with(verdict), "{line}");
        }
        assert!(t[9].contains("uring/raw-io-uring"), "{}", t[9]);
        assert!(t[4].ends_with("n/a (fio not installed)"), "{}", t[4]);
        let with_fio = FileSuite {
            fio_installed: true,
            ..FileSuite::default()
        };
        let t = targets(&with_fio);
        assert!(t[4].ends_with("n/a (not measured)"), "{}", t[4]);
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
    fn shared_targets_follow_its_ratios_to_tokio_io_uring_and_uring() {
        let s = fixtures::shared_suite();
        let t = targets(&s);
        let expected = [
            (
                "buffered 4 KiB QD 32: shared/tokio-io-uring IOPS 7.00x (target >= 5x)",
                ": met",
            ),
            (
                "O_DIRECT 4 KiB QD 32: shared/uring IOPS 0.96x (target >= 0.95x)",
                ": met",
            ),
            (
                "buffered 4 KiB QD 32: shared/uring IOPS 0.88x (target >= 0.9x)",
                "NOT met",
            ),
            (
                "whole read 64 KiB: shared/tokio-io-uring mean latency 0.39x",
                ": met",
            ),
            (
                "whole read 1 MiB: shared/tokio-io-uring mean latency 0.90x",
                "NOT met",
            ),
        ];
        assert_eq!(t.len(), 10 + expected.len());
        for (line, (needle, verdict)) in t[10..].iter().zip(expected) {
            assert!(line.contains(needle) && line.ends_with(verdict), "{line}");
        }
        let none = targets(&FileSuite::default());
        for line in &none[10..] {
            assert!(line.ends_with("n/a (not measured)"), "{line}");
        }
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
        // 16 engine runs of 1 s, and the whole-file reads (2 sizes x 2 engines, at most 1 s).
        assert_eq!(lean.planned_secs(), 20.0);
        assert!(!lean.whole_plan().engines.contains(&"tokio-io-uring"));
        assert_eq!(
            QuickOptions {
                peers: true,
                ..lean
            }
            .whole_plan()
            .engines,
            ENGINES
        );
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
