//! `hoop bench fsread`'s runs: every engine on every file size, one after another, and the
//! header said before them.

use std::io;

use crate::load::file::fsread::{prepare, run_local, run_peer, NoResult};
use crate::machine as sysinfo;
use crate::output::Out;
use crate::plan::fsread::{FsreadPlan, PEER};
use crate::plan::size::fmt_bytes;
use crate::record::fsread::ReadResult;

/// What [`run_plan`] measured.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// One result per engine and size that ran.
    pub results: Vec<ReadResult>,
    /// Engines skipped, each with why (one line each).
    pub skipped: Vec<String>,
}

/// Prepares the test files, says how everything runs, then runs every engine on every size,
/// printing each result as a JSON line with `--json`. A skipped engine is said on one line.
pub(crate) fn run_plan(plan: &FsreadPlan, out: &Out) -> io::Result<Outcome> {
    plan.check()?;
    std::fs::create_dir_all(&plan.dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot create {}: {e}", plan.dir.display()),
        )
    })?;
    let files = plan
        .sizes
        .iter()
        .map(|&size| Ok((size, prepare(&plan.dir, size)?)))
        .collect::<io::Result<Vec<_>>>()?;
    let workers = sysinfo::allowed_cpus().len().max(1);
    let fs = crate::machine::fs::fs_info(&plan.dir)
        .map(|f| f.describe())
        .unwrap_or_else(|e| format!("file system unknown ({e})"));
    out.human(&header(plan, &fs, workers));
    let peer_bin = plan
        .engines
        .contains(&PEER)
        .then(|| crate::target::peers::binary(out));
    let mut o = Outcome::default();
    for (size, path) in &files {
        for &engine in &plan.engines {
            out.start(&format!("fsread {engine}: {}", fmt_bytes(*size)), plan.secs);
            let r = match (engine, &peer_bin) {
                (PEER, Some(Ok(bin))) => run_peer(bin, path, *size, plan, workers),
                (PEER, Some(Err(why))) => Err(NoResult::Skip(why.clone())),
                (PEER, None) => Err(NoResult::Skip("the peers' binary was not prepared".into())),
                _ => run_local(engine, path, *size, plan, workers).map_err(NoResult::Fail),
            };
            out.done(plan.secs);
            let r = match r {
                Ok(r) => r,
                Err(NoResult::Skip(why)) => {
                    let line = format!("{engine}: skipped: {why}");
                    if !o.skipped.contains(&line) {
                        out.human(&line);
                        o.skipped.push(line);
                    }
                    continue;
                }
                Err(NoResult::Fail(e)) => {
                    out.human(&format!("{engine} {}: failed: {e}", fmt_bytes(*size)));
                    ReadResult::failed(engine, *size, workers, &e)
                }
            };
            out.measurement(&r);
            o.results.push(r);
        }
    }
    Ok(o)
}

/// The header printed before the runs: the files, the runtime, the checks, the engines.
pub fn header(plan: &FsreadPlan, fs: &str, workers: usize) -> String {
    format!(
        "## hoop bench fsread: whole-file reads, {} timed after {} warm-up per engine and size \
         (at most {} s each)\n\n\
         - files: {} in {} on {fs}, hoop's stamped content, read once before the engines (hot \
         page cache)\n\
         - runtime: a multi-thread tokio runtime per engine, {workers} workers (one per allowed \
         CPU), every thread unpinned; the reads one after another from one task of it\n\
         - verification: a read counts only if it returned the whole file and every byte of it \
         is the file's content; anything else is an error, never a read\n\
         - latency: per read, from the call to the bytes in hand (open, size, read, close)\n\
         - engines, in order: {}\n",
        plan.reads,
        plan.warmup,
        plan.secs,
        plan.sizes
            .iter()
            .map(|&s| fmt_bytes(s))
            .collect::<Vec<_>>()
            .join(", "),
        plan.dir.display(),
        plan.engines.join(", ")
    )
}
