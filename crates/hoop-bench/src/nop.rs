//! `hoop bench nop`: kbio's nopbench on hoop, beside a raw `io-uring` loop (the ceiling).
//!
//! Each thread (with its own ring) repeatedly creates BATCH no-op operations, awaits all of them
//! together, and records the batch's latency. The raw loop pushes BATCH `IORING_OP_NOP` SQEs,
//! `submit_and_wait(BATCH)`, and reaps them: what the machine can do with no runtime at all.
//! With `--shared`, kbio's own setup comes first: THREADS OS threads, each building BATCH
//! `rings.nop()` futures on one shared `hoop::shared::Rings` and awaiting them all inside
//! `futures::executor::block_on`, polled by the same loop as hoop's row (not
//! `futures::future::join_all`, which above 30 futures allocates a task per future and would
//! measure itself).

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hoop::driver::{op::Nop, Op};

use crate::measure::latency as stats;
use crate::record::nop::NopResult;
use crate::report::output::Out;

use hoop::shared::Rings;

/// Engine names, as the JSON says them.
pub(crate) const HOOP: &str = "hoop";
/// The raw `io-uring` crate loop.
pub(crate) const RAW: &str = "raw-io-uring";
/// Every thread on one shared `hoop::shared::Rings`.
pub(crate) const SHARED: &str = "hoop-shared";
/// compio (through `hoop-peer`): `IORING_OP_NOP` defined through its public `OpCode` trait.
pub(crate) const COMPIO: &str = "compio";
/// tokio-uring (through `hoop-peer`): `tokio_uring::no_op()`.
pub(crate) const TOKIO_URING: &str = "tokio-uring";
/// The peers' rows (one thread each, in the `hoop-peer` binary).
pub(crate) const PEERS: [&str; 2] = [COMPIO, TOKIO_URING];
/// Why monoio has no row.
pub(crate) const MONOIO_NONE: &str = "monoio: no row: monoio 0.2 has no public no-op, and none \
can be defined outside it (its operation trait, OpAble, is crate-private); compio has none either, \
but its driver's OpCode trait is public, so its row is IORING_OP_NOP defined through it";

/// kbio's published figures, for reference only: they come from kbio's own machine in 2021.
pub(crate) const KBIO_REFERENCE: &str = "kbio's published figures (kbio's own machine, 2021, \
not this one): 1 thread, -b 32 -n 64: 1.2M no-ops/s, batch mean 26 µs, p99.9999 85 µs; \
4 threads, -b 32 -n 1024: 1.9M no-ops/s, batch mean 67 µs, p99.999 15.8 ms";

/// Most threads `-t` accepts.
const MAX_THREADS: usize = 256;
/// Largest batch `-b` accepts.
const MAX_BATCH: usize = 65_536;
/// Largest SQ `-n` accepts (the kernel's own limit).
const MAX_ENTRIES: u32 = 32_768;
/// Most rings `--rings` accepts.
const MAX_RINGS: usize = 256;

/// One no-op configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NopConfig {
    /// Threads, each with its own ring.
    pub threads: usize,
    /// Seconds per engine.
    pub secs: f64,
    /// No-ops per batch.
    pub batch: usize,
    /// SQ entries.
    pub entries: u32,
    /// Rings of the shared set (the `hoop-shared` engine).
    pub rings: usize,
}

impl NopConfig {
    /// Checks the numbers.
    pub(crate) fn check(&self) -> io::Result<()> {
        use crate::plan::invalid;
        crate::plan::check_secs("-T/--secs", self.secs)?;
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(invalid(format!(
                "-t/--threads must be between 1 and {MAX_THREADS} (got {})",
                self.threads
            )));
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(invalid(format!(
                "-b/--batch must be between 1 and {MAX_BATCH} (got {})",
                self.batch
            )));
        }
        if self.entries == 0 || self.entries > MAX_ENTRIES {
            return Err(invalid(format!(
                "-n/--entries must be between 1 and {MAX_ENTRIES} (got {})",
                self.entries
            )));
        }
        if self.rings == 0 || self.rings > MAX_RINGS {
            return Err(invalid(format!(
                "--rings must be between 1 and {MAX_RINGS} (got {})",
                self.rings
            )));
        }
        Ok(())
    }
}

/// Runs `hoop bench nop`.
pub fn run_nop_command(args: NopArgs, json: bool) -> io::Result<()> {
    let cfg = NopConfig {
        threads: args.threads,
        secs: args.secs,
        batch: args.batch,
        entries: args.entries,
        rings: args.rings,
    };
    cfg.check()?;
    let mut engines: Vec<&'static str> = if args.shared {
        vec![SHARED, HOOP, RAW]
    } else {
        vec![HOOP, RAW]
    };
    if !args.no_peers {
        engines.extend(PEERS);
    }
    let out = Out::new(json, cfg.secs * engines.len() as f64);
    let (results, skipped) = run_engines(&cfg, &engines, &out)?;
    out.finish();
    out.human(&with_notes(table(&results), &skipped, !args.no_peers));
    let errors: u64 = results.iter().map(|r| r.errors).sum();
    if errors > 0 {
        return Err(io::Error::other(format!(
            "{errors} no-ops completed with an error"
        )));
    }
    Ok(())
}

/// The table with the lines of the peers that were skipped, and why monoio has no row.
pub(crate) fn with_notes(mut table: String, skipped: &[String], peers: bool) -> String {
    for s in skipped {
        table.push_str(&format!("- {s}\n"));
    }
    if peers {
        table.push_str(&format!("- {MONOIO_NONE}\n"));
    }
    table
}

/// Runs each of `engines` in turn with `cfg`; prints each result as a JSON line with `--json`.
/// A peer that cannot run here is skipped with a line (printed, and returned with the results).
pub(crate) fn run_engines(
    cfg: &NopConfig,
    engines: &[&'static str],
    out: &Out,
) -> io::Result<(Vec<NopResult>, Vec<String>)> {
    let mut results = Vec::with_capacity(engines.len());
    let mut skipped = Vec::new();
    for &engine in engines {
        let r = if PEERS.contains(&engine) {
            match run_peer(engine, cfg, out) {
                Ok(r) => r,
                Err(why) => {
                    let line = format!("{engine}: skipped: {why}");
                    out.human(&line);
                    skipped.push(line);
                    continue;
                }
            }
        } else {
            out.start(
                &format!(
                    "nop {engine}: {} thread(s), batch {}",
                    cfg.threads, cfg.batch
                ),
                cfg.secs,
            );
            let r = run_engine(engine, cfg)?;
            out.done(cfg.secs);
            r
        };
        out.measurement(&r);
        results.push(r);
    }
    Ok((results, skipped))
}

/// A peer's row: `hoop-peer nop` on one thread pinned where hoop's first thread is.
fn run_peer(engine: &'static str, cfg: &NopConfig, out: &Out) -> Result<NopResult, String> {
    use crate::target::peers::{f64_of, run_json, str_of, u64_of};
    if cfg.threads != 1 {
        return Err(format!(
            "the peers' rows run one thread (this run: -t {})",
            cfg.threads
        ));
    }
    let bin = crate::target::peers::binary(out)?;
    let mut args: Vec<String> = [
        "nop",
        "--engine",
        engine,
        "--secs",
        &cfg.secs.to_string(),
        "--batch",
        &cfg.batch.to_string(),
        "--entries",
        &cfg.entries.to_string(),
    ]
    .map(String::from)
    .to_vec();
    if let Some(&cpu) = crate::machine::allowed_cpus().first() {
        args.extend(["--cpu".to_string(), cpu.to_string()]);
    }
    out.start(
        &format!("nop {engine} (hoop-peer): 1 thread, batch {}", cfg.batch),
        cfg.secs,
    );
    let v = run_json(&bin, &args, cfg.secs);
    out.done(cfg.secs);
    let v = v?;
    let secs = f64_of(&v, "secs").unwrap_or(0.0);
    let nops = u64_of(&v, "nops");
    Ok(NopResult {
        bench: "nop",
        engine,
        threads: 1,
        batch: cfg.batch,
        entries: cfg.entries,
        rings: None,
        secs: stats::round3(secs),
        nops,
        errors: u64_of(&v, "errors"),
        nops_per_sec: if secs > 0.0 {
            (nops as f64 / secs).round()
        } else {
            0.0
        },
        batches: u64_of(&v, "batches"),
        batch_mean_us: f64_of(&v, "batch_mean_us"),
        batch_p50_us: f64_of(&v, "batch_p50_us"),
        batch_p90_us: f64_of(&v, "batch_p90_us"),
        batch_p99_us: f64_of(&v, "batch_p99_us"),
        batch_p999_us: f64_of(&v, "batch_p999_us"),
        batch_p9999_us: f64_of(&v, "batch_p9999_us"),
        batch_p99999_us: f64_of(&v, "batch_p99999_us"),
        batch_p999999_us: f64_of(&v, "batch_p999999_us"),
        batch_max_us: f64_of(&v, "batch_max_us"),
        syscalls_per_op: None,
        setup_flags: str_of(&v, "setup").unwrap_or_default(),
    })
}

/// When a no-op loop stops: at a deadline (the benchmark), or after a number of no-ops (a
/// fixed amount of work, for instruction counts).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stop {
    /// Start no new batch after this moment.
    At(Instant),
    /// Start no new batch once this many no-ops completed.
    After(u64),
}

impl Stop {
    /// Whether to stop, `done` no-ops into the run.
    pub(crate) fn reached(self, done: u64) -> bool {
        match self {
            Stop::At(deadline) => Instant::now() >= deadline,
            Stop::After(n) => done >= n,
        }
    }
}

/// What one thread measured.
pub(crate) struct ThreadOutcome {
    /// No-ops that completed with success.
    pub nops: u64,
    /// No-ops that completed with an error.
    pub errors: u64,
    batches: u64,
    /// `io_uring_enter` calls, where counted.
    enters: Option<u64>,
    hist: Histogram<u64>,
    flags: String,
}

fn run_engine(engine: &'static str, cfg: &NopConfig) -> io::Result<NopResult> {
    let cpus = crate::machine::allowed_cpus();
    // The shared set is built before the clock starts, on this (unpinned) thread.
    let rings = if engine == SHARED {
        Some(
            Rings::builder()
                .rings(cfg.rings)
                .entries(cfg.entries)
                .build()
                .map_err(|e| io::Error::new(e.kind(), format!("shared rings: {e}")))?,
        )
    } else {
        None
    };
    let deadline = Instant::now() + Duration::from_secs_f64(cfg.secs);
    let start = Instant::now();
    let outcomes: Vec<io::Result<ThreadOutcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|i| {
                let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
                let rings = rings.as_ref();
                s.spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = hoop::runtime::pin_to_cpu(cpu);
                    }
                    let stop = Stop::At(deadline);
                    match rings {
                        Some(rings) => shared_thread(cfg, stop, rings),
                        None if engine == HOOP => hoop_thread(cfg, stop),
                        None => raw_thread(cfg, stop),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a no-op thread panicked")))
            })
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    if let Some(rings) = rings {
        // Nothing is in flight any more: every thread awaited its last batch.
        rings.shutdown();
    }
    let mut hist = stats::new_histogram()?;
    let (mut nops, mut errors, mut batches) = (0u64, 0u64, 0u64);
    let mut enters = Some(0u64);
    let mut flags = String::new();
    for o in outcomes {
        let o = o?;
        nops += o.nops;
        errors += o.errors;
        batches += o.batches;
        enters = enters.zip(o.enters).map(|(a, b)| a + b);
        flags = o.flags;
        hist.add(&o.hist)
            .map_err(|e| io::Error::other(format!("cannot merge histograms: {e:?}")))?;
    }
    Ok(NopResult {
        bench: "nop",
        engine,
        threads: cfg.threads,
        batch: cfg.batch,
        entries: cfg.entries,
        rings: (engine == SHARED).then_some(cfg.rings),
        secs: stats::round3(elapsed),
        nops,
        errors,
        nops_per_sec: if elapsed > 0.0 {
            (nops as f64 / elapsed).round()
        } else {
            0.0
        },
        batches,
        batch_mean_us: stats::mean_us(&hist),
        batch_p50_us: stats::quantile_us(&hist, 0.5),
        batch_p90_us: stats::quantile_us(&hist, 0.9),
        batch_p99_us: stats::quantile_us(&hist, 0.99),
        batch_p999_us: stats::quantile_us(&hist, 0.999),
        batch_p9999_us: stats::quantile_us(&hist, 0.9999),
        batch_p99999_us: stats::quantile_us(&hist, 0.99999),
        batch_p999999_us: stats::quantile_us(&hist, 0.999999),
        batch_max_us: stats::max_us(&hist),
        syscalls_per_op: enters.filter(|_| nops > 0).map(|e| e as f64 / nops as f64),
        setup_flags: flags,
    })
}

/// hoop: BATCH `Op<Nop>` futures, polled together until all completed.
pub(crate) fn hoop_thread(cfg: &NopConfig, stop: Stop) -> io::Result<ThreadOutcome> {
    // Forced io_uring: this bench compares hoop's ring with the raw one, whatever HOOP_DRIVER
    // says.
    let rt = hoop::Runtime::builder()
        .entries(cfg.entries)
        .driver(hoop::DriverKind::Uring)
        .build()?;
    let flags = rt.setup_flags().to_string();
    let c0 = rt.counters();
    let outcome = rt.block_on(batch_loop(cfg.batch, stop, || Op::new(Nop)))?;
    let enters = rt.counters().enter_calls.saturating_sub(c0.enter_calls);
    Ok(ThreadOutcome {
        enters: Some(enters),
        flags,
        ..outcome
    })
}

/// The batch loop of hoop and hoop-shared: until `stop`, BATCH no-op futures from `make`,
/// polled together until every one completed, the batch's latency recorded. The futures are
/// polled in place (no task, no allocation per future); only successes count as no-ops.
async fn batch_loop<F: Future<Output = io::Result<()>> + Unpin>(
    batch: usize,
    stop: Stop,
    mut make: impl FnMut() -> F,
) -> io::Result<ThreadOutcome> {
    let mut hist = stats::new_histogram()?;
    let (mut nops, mut errors, mut batches) = (0u64, 0u64, 0u64);
    let mut ops: Vec<Option<F>> = Vec::with_capacity(batch);
    while !stop.reached(nops + errors) {
        let t0 = Instant::now();
        ops.clear();
        ops.extend((0..batch).map(|_| Some(make())));
        let mut left = batch;
        poll_fn(|cx| {
            for slot in ops.iter_mut() {
                if let Some(op) = slot {
                    if let Poll::Ready(r) = Pin::new(op).poll(cx) {
                        match r {
                            Ok(()) => nops += 1,
                            Err(_) => errors += 1,
                        }
                        *slot = None;
                        left -= 1;
                    }
                }
            }
            if left == 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        stats::record_ns(&mut hist, t0.elapsed().as_nanos());
        batches += 1;
    }
    Ok(ThreadOutcome {
        nops,
        errors,
        batches,
        enters: None,
        hist,
        flags: String::new(),
    })
}

/// kbio's loop on shared rings: BATCH `rings.nop()` futures awaited together in a plain
/// `futures::executor::block_on` (no runtime), by the same batch loop as hoop's row.
fn shared_thread(cfg: &NopConfig, stop: Stop, rings: &Rings) -> io::Result<ThreadOutcome> {
    let outcome = futures::executor::block_on(batch_loop(cfg.batch, stop, || rings.nop()))?;
    Ok(ThreadOutcome {
        flags: format!(
            "hoop::shared: {} ring(s) of {} entries for all threads; {}",
            rings.ring_count(),
            cfg.entries,
            rings.setup_flags(0).unwrap_or("no ring")
        ),
        ..outcome
    })
}

/// The ceiling: the `io-uring` crate with nothing around it.
pub(crate) fn raw_thread(cfg: &NopConfig, stop: Stop) -> io::Result<ThreadOutcome> {
    let mut ring = io_uring::IoUring::new(cfg.entries)?;
    let sq_cap = ring.params().sq_entries() as usize;
    let nop = io_uring::opcode::Nop::new().build().user_data(1);
    let mut hist = stats::new_histogram()?;
    let (mut nops, mut errors, mut batches, mut enters) = (0u64, 0u64, 0u64, 0u64);
    while !stop.reached(nops + errors) {
        let t0 = Instant::now();
        let mut left = cfg.batch;
        while left > 0 {
            // Batches larger than the SQ go in SQ-sized chunks.
            let chunk = left.min(sq_cap);
            {
                let mut sq = ring.submission();
                for _ in 0..chunk {
                    // SAFETY: a NOP carries no pointer: nothing must outlive the submission.
                    unsafe { sq.push(&nop) }
                        .map_err(|_| io::Error::other("raw ring: submission queue full"))?;
                }
            }
            let mut reaped = 0;
            while reaped < chunk {
                match ring.submit_and_wait(chunk - reaped) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                enters += 1;
                for cqe in ring.completion() {
                    reaped += 1;
                    if cqe.result() < 0 {
                        errors += 1;
                    } else {
                        nops += 1;
                    }
                }
            }
            left -= chunk;
        }
        stats::record_ns(&mut hist, t0.elapsed().as_nanos());
        batches += 1;
    }
    Ok(ThreadOutcome {
        nops,
        errors,
        batches,
        enters: Some(enters),
        hist,
        flags: "default (no setup flags)".to_string(),
    })
}

/// The human table (kbio's percentiles), with hoop's share of the ceiling and, when shared
/// rings were measured, their share of the thread-per-core ring and kbio's published figures.
pub(crate) fn table(results: &[NopResult]) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = String::from(
        "| engine | threads | rings | batch | entries | no-ops/s | batches | mean µs | p50 | p90 | p99 | p99.9 | p99.99 | p99.999 | p99.9999 | max | enter/op |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.engine,
            r.threads,
            r.rings.map_or("1 per thread".to_string(), |n| n.to_string()),
            r.batch,
            r.entries,
            r.nops_per_sec,
            r.batches,
            f(r.batch_mean_us),
            f(r.batch_p50_us),
            f(r.batch_p90_us),
            f(r.batch_p99_us),
            f(r.batch_p999_us),
            f(r.batch_p9999_us),
            f(r.batch_p99999_us),
            f(r.batch_p999999_us),
            f(r.batch_max_us),
            r.syscalls_per_op
                .map_or("-".to_string(), |x| format!("{x:.4}")),
        ));
    }
    let find = |engine: &str, threads: usize| {
        results
            .iter()
            .find(|r| r.engine == engine && r.threads == threads)
    };
    let hoop = results.iter().find(|r| r.engine == HOOP);
    let raw = hoop.and_then(|h| find(RAW, h.threads));
    if let (Some(h), Some(r)) = (hoop, raw) {
        if r.nops_per_sec > 0.0 {
            s.push_str(&format!(
                "\nhoop / raw ceiling: {:.2}x no-ops/s",
                h.nops_per_sec / r.nops_per_sec
            ));
        }
        if let (Some(p), Some(m)) = (h.batch_p9999_us, h.batch_mean_us) {
            if m > 0.0 {
                s.push_str(&format!("; hoop batch p99.99 / mean: {:.1}x", p / m));
            }
        }
        s.push('\n');
    }
    if let Some(h) = hoop.filter(|h| h.nops_per_sec > 0.0) {
        for p in results
            .iter()
            .filter(|r| PEERS.contains(&r.engine) && r.threads == h.threads)
            .filter(|r| r.nops_per_sec > 0.0)
        {
            s.push_str(&format!(
                "hoop / {}: {:.2}x no-ops/s\n",
                p.engine,
                h.nops_per_sec / p.nops_per_sec
            ));
        }
    }
    let shared: Vec<&NopResult> = results.iter().filter(|r| r.engine == SHARED).collect();
    for sh in &shared {
        if let Some(h) = find(HOOP, sh.threads).filter(|h| h.nops_per_sec > 0.0) {
            s.push_str(&format!(
                "hoop-shared / hoop thread-per-core ring at {} thread(s): {:.2}x no-ops/s\n",
                sh.threads,
                sh.nops_per_sec / h.nops_per_sec
            ));
        }
    }
    if !shared.is_empty() {
        s.push_str(&format!("\n{KBIO_REFERENCE}\n"));
    }
    s
}

/// The shared-rings targets of issue 13, each evaluated from `results` (one line each): at
/// batch 32, 1 thread and 4 threads at least 4M no-ops/s, p99.9999 batch latency under 1 ms at
/// 1 thread, and at least half the thread-per-core ring's no-ops/s at 1 thread.
pub(crate) fn shared_targets(results: &[NopResult]) -> Vec<String> {
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let shared = |threads: usize| {
        results
            .iter()
            .find(|r| r.engine == SHARED && r.threads == threads && r.errors == 0)
    };
    let mut lines = Vec::new();
    for threads in [1, 4] {
        if let Some(r) = shared(threads) {
            lines.push(format!(
                "- no-op shared, {threads} thread(s), batch {}: {:.2}M no-ops/s (target >= 4M/s): {}",
                r.batch,
                r.nops_per_sec / 1e6,
                verdict(r.nops_per_sec >= 4e6)
            ));
        }
    }
    if let Some(r) = shared(1) {
        if let Some(p) = r.batch_p999999_us {
            lines.push(format!(
                "- no-op shared, 1 thread: batch p99.9999 {p:.1} µs (target < 1000 µs): {}",
                verdict(p < 1000.0)
            ));
        }
        let ring = results
            .iter()
            .find(|h| h.engine == HOOP && h.threads == 1 && h.nops_per_sec > 0.0);
        if let Some(h) = ring {
            let x = r.nops_per_sec / h.nops_per_sec;
            lines.push(format!(
                "- no-op shared / thread-per-core ring, 1 thread: {x:.2}x no-ops/s (target >= \
                 0.5x): {}",
                verdict(x >= 0.5)
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(engine: &'static str, threads: usize, nops_per_sec: f64, p6_us: f64) -> NopResult {
        NopResult {
            bench: "nop",
            engine,
            threads,
            rings: (engine == SHARED).then_some(1),
            batch: 32,
            entries: 64,
            secs: 1.0,
            nops: nops_per_sec as u64,
            errors: 0,
            nops_per_sec,
            batches: 1,
            batch_mean_us: Some(10.0),
            batch_p50_us: Some(9.0),
            batch_p90_us: Some(11.0),
            batch_p99_us: Some(12.0),
            batch_p999_us: Some(13.0),
            batch_p9999_us: Some(14.0),
            batch_p99999_us: Some(15.0),
            batch_p999999_us: Some(p6_us),
            batch_max_us: Some(p6_us),
            syscalls_per_op: None,
            setup_flags: String::new(),
        }
    }

    #[test]
    fn shared_rows_are_judged_and_kbio_is_quoted_as_a_reference() {
        let rs = [
            result(SHARED, 1, 4.5e6, 900.0),
            result(SHARED, 4, 3.0e6, 5000.0),
            result(HOOP, 1, 8.0e6, 50.0),
            result(RAW, 1, 12.0e6, 20.0),
        ];
        let t = shared_targets(&rs);
        assert_eq!(t.len(), 4, "{t:?}");
        let expected = [
            ("1 thread(s)", ": met"),
            ("4 thread(s)", "NOT met"),
            ("900.0 µs", ": met"),
            ("0.56x", ": met"),
        ];
        for (line, (needle, verdict)) in t.iter().zip(expected) {
            assert!(line.contains(needle) && line.ends_with(verdict), "{line}");
        }
        let shown = table(&rs);
        assert!(shown.contains("| hoop-shared | 1 | 1 | 32 |"), "{shown}");
        assert!(shown.contains("p99.9999"), "{shown}");
        assert!(shown.contains("hoop-shared / hoop thread-per-core ring at 1 thread(s): 0.56x"));
        assert!(shown.contains("kbio's own machine, 2021"), "{shown}");
        // Without shared rows: no shared line, no kbio reference.
        let plain = table(&rs[2..]);
        assert!(
            !plain.contains("kbio") && !plain.contains("hoop-shared"),
            "{plain}"
        );
        assert!(shared_targets(&rs[2..]).is_empty());
    }
}

/// Arguments of `hoop bench nop`.
#[derive(Debug, clap::Args)]
pub struct NopArgs {
    /// Threads: each with its own ring (hoop, raw), or all on one shared set (--shared).
    #[arg(short = 't', long, value_name = "THREADS", default_value_t = 1)]
    pub threads: usize,
    /// Seconds per engine.
    #[arg(short = 'T', long = "secs", value_name = "SECS", default_value_t = 3.0)]
    pub secs: f64,
    /// No-ops per batch (created together, awaited together).
    #[arg(short = 'b', long, value_name = "BATCH", default_value_t = 32)]
    pub batch: usize,
    /// SQ entries of each ring.
    #[arg(short = 'n', long, value_name = "ENTRIES", default_value_t = 128)]
    pub entries: u32,
    /// Also kbio's setup, first: THREADS OS threads each awaiting batches of `rings.nop()` on
    /// one shared `hoop::shared::Rings` (in a plain block_on, no runtime), with kbio's
    /// percentiles and its published figures (its own machine, 2021) for reference.
    #[arg(long)]
    pub shared: bool,
    /// With --shared: rings in the shared set (kbio used one).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "shared")]
    pub rings: usize,
    /// Leave out the peers' rows (compio, tokio-uring; 1 thread only), which run in the
    /// hoop-peer binary of peers/, built on demand. monoio has no row: it has no public no-op.
    #[arg(long)]
    pub no_peers: bool,
}
