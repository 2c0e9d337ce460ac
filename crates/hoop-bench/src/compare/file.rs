//! `hoop bench file`: each engine in turn on one test file, at one queue depth or several, and
//! the run's verdict. Every read is checked against the file's stamped content; failed, short
//! or wrong I/O counts as an error, never as I/O.

use std::io;
use std::path::{Path, PathBuf};

use crate::load::file::engine::{EngineCtx, Outcome};
use crate::load::file::{blocking, linux_aio, peer, raw, shared, testfile, tokio_fs, uring};
use crate::machine as sysinfo;
use crate::plan::file::{Engine, FileJob, FilePlan, Rw};
use crate::plan::size::fmt_bytes;
use crate::record::file::{FileResult, Measured, ResultContext};
use crate::report::file::{header, notes, table};
use crate::report::file_sweep;
use crate::report::output::Out;
use crate::target::fio;

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

/// Prepares the test file, says where and how everything runs, then runs each engine in
/// `engines` (fio's after hoop's and the others', whatever the order given) with `job`, one
/// after another, printing each result as a JSON line with `--json`. Skipped engines are said
/// on one line and have no result; an engine that fails has a result with its error.
pub(crate) fn run_engines(job: &FileJob, engines: &[Engine], out: &Out) -> io::Result<FileRun> {
    job.check()?;
    let tf = testfile::prepare(&job.dir, job.size, job.direct, out)?;
    if job.direct {
        testfile::probe_direct(&tf, job.bs)?;
    }
    let warmed = if job.direct {
        None
    } else {
        Some(testfile::warm(&tf, out)?)
    };
    let allowed = sysinfo::allowed_cpus();
    let pin = if allowed.len() >= 2 {
        sysinfo::pin_plan().0
    } else {
        None
    };
    // fio's writes are not stamped: our engines first, so they find a valid file.
    let mut order: Vec<Engine> = engines.iter().copied().filter(|e| !e.is_fio()).collect();
    order.extend(engines.iter().copied().filter(|e| e.is_fio()));
    let header = header(job, &tf, &allowed, pin, warmed, &order, order != engines);
    out.human(&header);

    let fio = order
        .iter()
        .any(|e| e.is_fio())
        .then(fio::fio_path)
        .flatten();
    // The peers' binary, built now (before any clock starts) if a peer is to run this job.
    let wants = |glommio: bool| {
        order.iter().any(|&e| {
            e.is_peer() && (e == Engine::Glommio) == glommio && peer::refuses_job(job, e).is_none()
        })
    };
    let peer_bin = wants(false).then(|| crate::target::peers::binary(out));
    let glommio_bin = wants(true).then(|| crate::target::peers::binary_glommio(out));
    let cx = EngineCtx {
        job,
        path: &tf.path,
        file_bytes: tf.size,
        blocks: tf.size / job.bs as u64,
        write_pct: job.rw.write_pct(),
        pin,
        allowed: &allowed,
        fs: &tf.fs,
    };
    let mut results = Vec::new();
    let mut fio_wrote = false;
    for engine in order {
        let name = engine.name();
        out.start(&format!("file {name}: {}", job.rw.name()), job.secs);
        let cached_pct = testfile::cached_pct(&tf);
        let bin = if engine == Engine::Glommio {
            glommio_bin.as_ref()
        } else {
            peer_bin.as_ref()
        };
        let outcome = run_one(&cx, engine, fio.as_deref(), bin);
        out.done(job.secs);
        let ctx = ResultContext {
            rw: job.rw.name(),
            bs: job.bs,
            qd: job.qd,
            direct: job.direct,
            file_bytes: tf.size,
            fs_type: tf.fs.fs_type.clone(),
            cached_pct,
            pinned_cpu: pin,
        };
        let r = match outcome {
            Ok(Outcome::Skipped(why)) => {
                out.human(&format!("{name}: skipped: {why}"));
                continue;
            }
            Ok(Outcome::Ran(m)) => FileResult::new(name, &m, &ctx),
            Err(e) => {
                out.human(&format!("{name}: failed: {e}"));
                let mut m = Measured::new(job.qd)?;
                m.error(e.to_string());
                m.verified = !engine.is_fio();
                FileResult::new(name, &m, &ctx)
            }
        };
        fio_wrote |= engine.is_fio() && job.rw != Rw::Read && r.ios > 0;
        out.measurement(&r);
        results.push(r);
    }
    if fio_wrote {
        let gone = std::fs::remove_file(&tf.path);
        out.human(&format!(
            "note: fio wrote its own data into the test file, so it no longer holds the stamped \
             content: {}",
            match gone {
                Ok(()) => "removed it (the next run creates it again)".to_string(),
                Err(e) => format!("could not remove it ({e}); the next run's check recreates it"),
            }
        ));
    }
    Ok(FileRun { header, results })
}

/// What [`run_engines`] measured.
#[derive(Debug)]
pub(crate) struct FileRun {
    /// The header printed before the runs: machine, file, device, pinning, verification.
    pub header: String,
    /// One result per engine that ran (skipped engines have none).
    pub results: Vec<FileResult>,
}

/// Runs one engine on its own thread: pinned for the submitting thread of our engines; fio's
/// thread stays unpinned (fio pins its job itself with --cpus_allowed), and so does a peer's
/// (the child pins its runtime's thread itself). `peer_bin`: the peers' binary, or why there is
/// none.
fn run_one(
    cx: &EngineCtx,
    engine: Engine,
    fio: Option<&Path>,
    peer_bin: Option<&Result<PathBuf, String>>,
) -> io::Result<Outcome> {
    if engine.is_fio() && fio.is_none() {
        return Ok(Outcome::Skipped(
            "fio is not on PATH (install fio to compare with it)".into(),
        ));
    }
    if engine.is_peer() {
        if let Some(why) = peer::refuses(cx, engine) {
            return Ok(Outcome::Skipped(why));
        }
        return match peer_bin {
            Some(Ok(bin)) => peer::run_peer(cx, engine, bin),
            Some(Err(why)) => Ok(Outcome::Skipped(why.clone())),
            None => Ok(Outcome::Skipped(
                "the peers' binary was not prepared".into(),
            )),
        };
    }
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            if let (Some(cpu), false) = (cx.pin, engine.is_fio()) {
                hoop::runtime::pin_to_cpu(cpu)?;
            }
            let ran = |r: io::Result<Measured>| r.map(|m| Outcome::Ran(Box::new(m)));
            match (engine, fio) {
                (Engine::Sync, _) => ran(blocking::run_sync(cx)),
                (Engine::Threadpool, _) => ran(blocking::run_threadpool(cx)),
                (Engine::LinuxAio, _) => ran(linux_aio::run_linux_aio(cx)),
                (Engine::Uring, _) => uring::run_uring(cx, uring::Flavor::Plain),
                (Engine::UringFixed, _) => uring::run_uring(cx, uring::Flavor::Fixed),
                (Engine::UringSqpoll, _) => uring::run_uring(cx, uring::Flavor::Sqpoll),
                (Engine::UringIopoll, _) => uring::run_uring(cx, uring::Flavor::Iopoll),
                (Engine::RawUring, _) => raw::run_raw(cx),
                (Engine::TokioFs, _) => ran(tokio_fs::run_tokio_fs(cx)),
                (Engine::Shared, _) => ran(shared::run_shared(cx)),
                (Engine::Fio, Some(f)) => fio::run_fio(cx, f, fio::FioKind::Uring),
                (Engine::FioFixed, Some(f)) => fio::run_fio(cx, f, fio::FioKind::UringFixed),
                (Engine::FioPsync, Some(f)) => fio::run_fio(cx, f, fio::FioKind::Psync),
                (Engine::FioLibaio, Some(f)) => fio::run_fio(cx, f, fio::FioKind::Libaio),
                (_, None) => Ok(Outcome::Skipped("fio is not on PATH".into())),
                (e, _) => Ok(Outcome::Skipped(format!("{} runs elsewhere", e.name()))),
            }
        });
        h.join()
            .unwrap_or_else(|_| Err(io::Error::other("the engine's thread panicked")))
    })
}
