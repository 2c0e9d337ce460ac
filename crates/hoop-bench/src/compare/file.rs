//! `hoop bench file`'s runs: each engine in turn on one test file, and the header said before
//! them. Every read is checked against the file's stamped content; failed, short
//! or wrong I/O counts as an error, never as I/O.

use std::io;
use std::path::{Path, PathBuf};

use crate::load::file::engine::{EngineCtx, Outcome};
use crate::load::file::fio;
use crate::load::file::testfile::TestFile;
use crate::load::file::{blocking, linux_aio, peer, raw, shared, testfile, tokio_fs, uring};
use crate::machine as sysinfo;
use crate::output::Out;
use crate::plan::file::{Engine, FileJob, Rw};
use crate::plan::size::fmt_bytes;
use crate::record::file::{FileResult, Measured, ResultContext};

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
