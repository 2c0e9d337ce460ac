//! `hoop bench nop`: kbio's nopbench on hoop, beside a raw `io-uring` loop (the ceiling).
//!
//! Each thread (with its own ring) repeatedly creates BATCH no-op operations, awaits all of them
//! together, and records the batch's latency. The raw loop pushes BATCH `IORING_OP_NOP` SQEs,
//! `submit_and_wait(BATCH)`, and reaps them: what the machine can do with no runtime at all.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hoop::driver::{op::Nop, Op};

use super::output::Out;
use super::stats::{self, NopResult};
use super::NopArgs;

/// Engine names, as the JSON says them.
pub(crate) const HOOP: &str = "hoop";
/// The raw `io-uring` crate loop.
pub(crate) const RAW: &str = "raw-io-uring";

/// Most threads `-t` accepts.
const MAX_THREADS: usize = 256;
/// Largest batch `-b` accepts.
const MAX_BATCH: usize = 65_536;
/// Largest SQ `-n` accepts (the kernel's own limit).
const MAX_ENTRIES: u32 = 32_768;

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
}

impl NopConfig {
    /// Checks the numbers.
    pub(crate) fn check(&self) -> io::Result<()> {
        use super::invalid;
        super::check_secs("-T/--secs", self.secs)?;
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
        Ok(())
    }
}

/// Runs `hoop bench nop`.
pub(crate) fn run_nop_command(args: NopArgs, json: bool) -> io::Result<()> {
    let cfg = NopConfig {
        threads: args.threads,
        secs: args.secs,
        batch: args.batch,
        entries: args.entries,
    };
    cfg.check()?;
    let out = Out::new(json, cfg.secs * 2.0);
    let results = run_both(&cfg, &out)?;
    out.finish();
    out.human(&table(&results));
    let errors: u64 = results.iter().map(|r| r.errors).sum();
    if errors > 0 {
        return Err(io::Error::other(format!(
            "{errors} no-ops completed with an error"
        )));
    }
    Ok(())
}

/// Runs hoop, then the raw loop, with `cfg`; prints each result as a JSON line with `--json`.
pub(crate) fn run_both(cfg: &NopConfig, out: &Out) -> io::Result<Vec<NopResult>> {
    let mut results = Vec::with_capacity(2);
    for engine in [HOOP, RAW] {
        out.start(
            &format!(
                "nop {engine}: {} thread(s), batch {}",
                cfg.threads, cfg.batch
            ),
            cfg.secs,
        );
        let r = run_engine(engine, cfg)?;
        out.done(cfg.secs);
        out.measurement(&r);
        results.push(r);
    }
    Ok(results)
}

/// What one thread measured.
struct ThreadOutcome {
    nops: u64,
    errors: u64,
    batches: u64,
    enters: u64,
    hist: Histogram<u64>,
    flags: String,
}

fn run_engine(engine: &'static str, cfg: &NopConfig) -> io::Result<NopResult> {
    let cpus = super::sysinfo::allowed_cpus();
    let deadline = Instant::now() + Duration::from_secs_f64(cfg.secs);
    let start = Instant::now();
    let outcomes: Vec<io::Result<ThreadOutcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|i| {
                let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
                s.spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = hoop::runtime::pin_to_cpu(cpu);
                    }
                    if engine == HOOP {
                        hoop_thread(cfg, deadline)
                    } else {
                        raw_thread(cfg, deadline)
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
    let mut hist = stats::new_histogram()?;
    let (mut nops, mut errors, mut batches, mut enters) = (0u64, 0u64, 0u64, 0u64);
    let mut flags = String::new();
    for o in outcomes {
        let o = o?;
        nops += o.nops;
        errors += o.errors;
        batches += o.batches;
        enters += o.enters;
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
        batch_max_us: stats::max_us(&hist),
        syscalls_per_op: (nops > 0).then(|| enters as f64 / nops as f64),
        setup_flags: flags,
    })
}

/// hoop: BATCH `Op<Nop>` futures, polled together until all completed.
fn hoop_thread(cfg: &NopConfig, deadline: Instant) -> io::Result<ThreadOutcome> {
    // Forced io_uring: this bench compares hoop's ring with the raw one, whatever HOOP_DRIVER
    // says.
    let rt = hoop::Runtime::builder()
        .entries(cfg.entries)
        .driver(hoop::DriverKind::Uring)
        .build()?;
    let flags = rt.setup_flags().to_string();
    let c0 = rt.counters();
    let batch = cfg.batch;
    let res = rt.block_on(async move {
        let mut hist = stats::new_histogram()?;
        let (mut nops, mut errors, mut batches) = (0u64, 0u64, 0u64);
        let mut ops: Vec<Option<Op<Nop>>> = Vec::with_capacity(batch);
        while Instant::now() < deadline {
            let t0 = Instant::now();
            ops.clear();
            ops.extend((0..batch).map(|_| Some(Op::new(Nop))));
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
        Ok::<_, io::Error>((nops, errors, batches, hist))
    });
    let (nops, errors, batches, hist) = res?;
    let enters = rt.counters().enter_calls.saturating_sub(c0.enter_calls);
    Ok(ThreadOutcome {
        nops,
        errors,
        batches,
        enters,
        hist,
        flags,
    })
}

/// The ceiling: the `io-uring` crate with nothing around it.
fn raw_thread(cfg: &NopConfig, deadline: Instant) -> io::Result<ThreadOutcome> {
    let mut ring = io_uring::IoUring::new(cfg.entries)?;
    let sq_cap = ring.params().sq_entries() as usize;
    let nop = io_uring::opcode::Nop::new().build().user_data(1);
    let mut hist = stats::new_histogram()?;
    let (mut nops, mut errors, mut batches, mut enters) = (0u64, 0u64, 0u64, 0u64);
    while Instant::now() < deadline {
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
        enters,
        hist,
        flags: "default (no setup flags)".to_string(),
    })
}

/// The human table, with hoop's share of the ceiling.
pub(crate) fn table(results: &[NopResult]) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = String::from(
        "| engine | threads | batch | entries | no-ops/s | batches | mean µs | p50 | p90 | p99 | p99.9 | p99.99 | max | enter/op |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.engine,
            r.threads,
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
            f(r.batch_max_us),
            r.syscalls_per_op
                .map_or("-".to_string(), |x| format!("{x:.4}")),
        ));
    }
    let hoop = results.iter().find(|r| r.engine == HOOP);
    let raw = results.iter().find(|r| r.engine == RAW);
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
    s
}
