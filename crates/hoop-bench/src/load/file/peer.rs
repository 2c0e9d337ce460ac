//! The peer engines (`monoio`, `compio`, `tokio-uring`, `glommio`, `tokio-io-uring`): the same
//! job through another runtime in the `hoop-peer` child process ([`crate::target::peers`]),
//! every read checked by the very code hoop's engines use (`content/pattern.rs`); the peer
//! measures itself (counts, latency per I/O, its own `getrusage` over the run, start-up and
//! build excluded).

use std::io;
use std::path::Path;
use std::time::Duration;

use crate::load::file::engine::{EngineCtx, Outcome};
use crate::plan::file::{Engine, FileJob, Rw};
use crate::record::file::{Latencies, Measured, Usage};
use crate::target::peers::{f64_of, run_json, str_of, u64_of};

/// Why `engine` cannot run this job, if it cannot (said before anything is started).
pub(crate) fn refuses(cx: &EngineCtx, engine: Engine) -> Option<String> {
    refuses_job(cx.job, engine)
}

/// Why `engine` cannot run `job`, if it cannot.
pub(crate) fn refuses_job(job: &FileJob, engine: Engine) -> Option<String> {
    if job.rw != Rw::Read {
        return Some(format!(
            "the peers run random reads only (this job is --rw {})",
            job.rw.name()
        ));
    }
    if engine == Engine::TokioIoUring && job.direct {
        return Some(
            "buffered only: tokio::fs::File reads into its own buffer, which is not aligned, so \
             it cannot do O_DIRECT (tokio's io_uring support has no positional read on an owned \
             buffer)"
                .into(),
        );
    }
    None
}

/// Runs `engine` through `bin` (the `hoop-peer` binary) with the job of `cx`: QD tasks on ONE
/// thread of the peer's runtime, pinned to the CPU hoop's engines run on (the child pins it,
/// `--cpu`; any other thread it starts stays unpinned, as hoop's engines leave theirs), each
/// reading one random block at a time into its own aligned buffer. `tokio-io-uring` runs as
/// hoop's `shared` and `tokio-fs` do, like for like: QD tasks on a multi-thread tokio runtime,
/// one worker per allowed CPU, every thread unpinned (`--workers`).
pub(crate) fn run_peer(cx: &EngineCtx, engine: Engine, bin: &Path) -> io::Result<Outcome> {
    if let Some(why) = refuses(cx, engine) {
        return Ok(Outcome::Skipped(why));
    }
    let job = cx.job;
    let mut args: Vec<String> = vec![
        "file".into(),
        "--engine".into(),
        engine.name().into(),
        "--path".into(),
        cx.path.display().to_string(),
        "--size".into(),
        cx.file_bytes.to_string(),
        "--bs".into(),
        job.bs.to_string(),
        "--qd".into(),
        job.qd.to_string(),
        "--secs".into(),
        job.secs.to_string(),
    ];
    if job.direct {
        args.push("--direct".into());
    }
    // tokio-io-uring runs as hoop's tokio engines (`shared`, `tokio-fs`) do: a multi-thread
    // runtime with one worker per allowed CPU, every thread unpinned; the others on one thread
    // pinned like hoop's own engines.
    let multi_thread = engine == Engine::TokioIoUring;
    if multi_thread {
        args.push("--workers".into());
        args.push(crate::load::file::on_tokio::workers(cx).to_string());
    } else if let Some(cpu) = cx.pin {
        args.push("--cpu".into());
        args.push(cpu.to_string());
    }
    let v = match run_json(bin, &args, job.secs) {
        Ok(v) => v,
        Err(why) => return Ok(Outcome::Skipped(format!("hoop-peer: {why}"))),
    };
    let mut m = Measured::new(job.qd)?;
    m.reads = u64_of(&v, "reads");
    let errors = u64_of(&v, "errors");
    if errors > 0 {
        m.error(str_of(&v, "first_error").unwrap_or_else(|| "an I/O failed".into()));
        m.errors = errors;
    }
    m.secs = f64_of(&v, "secs").unwrap_or(0.0);
    let secs = |k: &str| Duration::from_secs_f64(f64_of(&v, k).unwrap_or(0.0).max(0.0));
    m.usage = Usage::from_parts(
        secs("cpu_user_s"),
        secs("cpu_sys_s"),
        u64_of(&v, "ctx_voluntary"),
        u64_of(&v, "ctx_involuntary"),
    );
    m.external_latency = Some(Latencies {
        p50: f64_of(&v, "p50_us"),
        p99: f64_of(&v, "p99_us"),
        p999: f64_of(&v, "p999_us"),
        max: f64_of(&v, "max_us"),
        mean: f64_of(&v, "mean_us"),
    });
    m.setup_flags = str_of(&v, "setup");
    m.unpinned = multi_thread;
    m.note = Some(format!(
        "peer: hoop-peer (child process), {} tasks on {} {}, every read verified; CPU and \
         context switches: the peer's own getrusage over its run",
        job.qd,
        if multi_thread { "a" } else { "one thread of" },
        str_of(&v, "setup").unwrap_or_else(|| engine.name().to_string())
    ));
    Ok(Outcome::Ran(Box::new(m)))
}
