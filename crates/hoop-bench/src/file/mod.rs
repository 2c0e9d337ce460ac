//! `hoop bench file`: random reads and writes on one test file, through each engine in turn —
//! blocking `pread`/`pwrite` (`sync`), a POSIX-AIO-like thread pool (`threadpool`), the
//! kernel's AIO (`linux-aio`), hoop's io_uring runtime (`uring`, `uring-fixed`,
//! `uring-sqpoll`, `uring-iopoll`), a multi-thread tokio runtime's (`tokio-fs`, and hoop's
//! shared rings from it: `shared`) and fio (`fio`, `fio-fixed`; `fio-psync`, `fio-libaio` on
//! request) — with the same metrics for each: IOPS, MiB/s, latency percentiles per I/O,
//! context switches, CPU time and, where known, syscalls per I/O.
//!
//! Every read is checked against the file's content ([`content`]); failed, short or wrong I/O
//! counts as an error, never as I/O. [`run_engines`] is the entry point for other commands.

use std::io;
use std::path::{Path, PathBuf};

pub(crate) mod quick;
mod sweep;

use crate::load::file::engine::{EngineCtx, Outcome};
use crate::load::file::{blocking, linux_aio, peer, raw, shared, testfile, tokio_fs, uring};
use crate::machine::{self as sysinfo};
use crate::plan::file::{default_dir, parse_depths, parse_engines, Engine, FileJob, Rw};
use crate::plan::invalid;
use crate::plan::size::{fmt_bytes, parse_size};
use crate::record::file::{FileResult, Measured, ResultContext};
use crate::report::file::{notes, table};
use crate::report::output::Out;
use crate::target::fio;

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every engine that ran completed with no error and \
at least one counted I/O (skipped engines do not fail the run); 1 on bad arguments, when the \
test file cannot be made or O_DIRECT is refused, or when an engine failed or counted errors \
(its result is printed all the same).";

/// Arguments of `hoop bench file`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct FileArgs {
    /// Directory of the test file [default: target/hoop-bench-file next to the binary].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Size of the test file: bytes, or with a k/m/g/t suffix (powers of 1024).
    #[arg(long, value_name = "SIZE", default_value = "2G")]
    pub size: String,
    /// Block size of every I/O: a multiple of 512 bytes, k/m suffixes allowed.
    #[arg(long, value_name = "BS", default_value = "4k")]
    pub bs: String,
    /// I/Os in flight per engine (sync and fio-psync: 1 by nature); a comma-separated list
    /// (e.g. 1,4,16,32,128) runs every engine at every depth and draws file_qd.svg (IOPS
    /// against depth, one line per engine).
    #[arg(long, value_name = "QD", default_value = "32")]
    pub qd: String,
    /// Seconds per engine (issuing stops then; what is in flight is drained).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub secs: f64,
    /// O_DIRECT: bypass the page cache (without it: buffered I/O on a hot page cache).
    #[arg(long)]
    pub direct: bool,
    /// The job: randread, randwrite or randrw (50/50).
    #[arg(long, value_name = "RW", default_value = "randread")]
    pub rw: String,
    /// Engines, comma-separated, run one after another [default: sync, threadpool, linux-aio,
    /// uring, uring-fixed, uring-sqpoll, uring-iopoll, raw-io-uring, tokio-fs, shared, fio,
    /// fio-fixed, monoio, compio, tokio-uring, glommio, tokio-io-uring; also fio-psync,
    /// fio-libaio]. The peers (monoio, compio, tokio-uring, glommio, tokio-io-uring: tokio's own
    /// io_uring files, buffered only) run in the hoop-peer binary of peers/ (glommio: in
    /// hoop-peer-glommio), built on demand (HOOP_PEER_BIN: a built one), QD tasks on one thread
    /// of their own runtime (tokio-io-uring: on a multi-thread tokio runtime, one worker per
    /// allowed CPU, as tokio-fs and shared), reads checked alike; one that cannot be built or run here is
    /// skipped with a line saying why. raw-io-uring: the io-uring crate in a plain
    /// loop (no runtime), the kernel's own ceiling for the job. tokio-fs: tokio::fs::File on a multi-thread tokio runtime, QD
    /// tasks, seek + read_exact per read; with --direct (which tokio::fs::File cannot do: its
    /// buffer is not aligned) tokio::task::spawn_blocking + pread into an aligned buffer.
    /// shared: hoop::shared::File read_at from QD tasks on the same kind of runtime.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub engines: Option<Vec<String>>,
    /// With several --qd: the directory file_qd.svg is written to [default:
    /// target/hoop-report next to the binary].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs `hoop bench file`.
pub fn run_file_command(args: FileArgs, json: bool) -> io::Result<()> {
    let depths = parse_depths(&args.qd)?;
    let job = FileJob {
        dir: args.dir.unwrap_or_else(default_dir),
        size: parse_size("--size", &args.size)?,
        bs: usize::try_from(parse_size("--bs", &args.bs)?)
            .map_err(|_| invalid("--bs is too large"))?,
        qd: depths[0],
        secs: args.secs,
        direct: args.direct,
        rw: Rw::parse(&args.rw)?,
    };
    let engines = match &args.engines {
        Some(list) => parse_engines(list)?,
        None => Engine::defaults(),
    };
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
        let dir = args
            .out
            .clone()
            .unwrap_or_else(|| sysinfo::target_dir().join("hoop-report"));
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
        let drawn = sweep::draw(&path, &results, &depths, &title)
            .map_err(|e| io::Error::other(format!("cannot draw {}: {e}", path.display())));
        out.human(&format!(
            "## IOPS by queue depth\n\n{}\n{}",
            sweep::table(&results, &depths),
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

/// The header: the job, the machine, the file and its device, pinning, verification, cache.
fn header(
    job: &FileJob,
    tf: &testfile::TestFile,
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
