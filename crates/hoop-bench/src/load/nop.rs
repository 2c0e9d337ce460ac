//! The no-op engines: batches of no-ops through hoop's ring, through `hoop::shared` rings
//! from plain threads (kbio's nopbench), and through a raw `io-uring` loop, the ceiling with no
//! runtime at all. A batch is created together and awaited together; its latency is recorded.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hoop::driver::{op::Nop, Op};
use hoop::shared::Rings;

use crate::measure::latency as stats;
use crate::plan::{check_secs, invalid};

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
        check_secs("-T/--secs", self.secs)?;
        let within = |flag: &str, v: usize, max: usize| {
            if v == 0 || v > max {
                return Err(invalid(format!(
                    "{flag} must be between 1 and {max} (got {v})"
                )));
            }
            Ok(())
        };
        within("-t/--threads", self.threads, MAX_THREADS)?;
        within("-b/--batch", self.batch, MAX_BATCH)?;
        within("-n/--entries", self.entries as usize, MAX_ENTRIES as usize)?;
        within("--rings", self.rings, MAX_RINGS)
    }
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
    /// Batches completed.
    pub batches: u64,
    /// `io_uring_enter` calls, where counted.
    pub enters: Option<u64>,
    /// Batch latency, nanoseconds.
    pub hist: Histogram<u64>,
    /// The rings' setup flags, as the record says them.
    pub flags: String,
}

impl ThreadOutcome {
    /// Nothing counted yet.
    fn new(enters: Option<u64>, flags: &str) -> io::Result<ThreadOutcome> {
        Ok(ThreadOutcome {
            nops: 0,
            errors: 0,
            batches: 0,
            enters,
            hist: stats::new_histogram()?,
            flags: flags.to_string(),
        })
    }

    /// One more batch, started at `t0`, completed now.
    fn batch_done(&mut self, t0: Instant) {
        stats::record_ns(&mut self.hist, t0.elapsed().as_nanos());
        self.batches += 1;
    }
}

/// Runs `engine` (one of [`HOOP`], [`RAW`], [`SHARED`]) on `cfg.threads` threads pinned
/// round-robin over the allowed CPUs until `cfg.secs` passed; returns the threads' outcomes
/// merged and the wall time of the run in seconds.
pub(crate) fn run_engine(engine: &str, cfg: &NopConfig) -> io::Result<(ThreadOutcome, f64)> {
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
    let mut all = ThreadOutcome::new(Some(0), "")?;
    for o in outcomes {
        let o = o?;
        all.nops += o.nops;
        all.errors += o.errors;
        all.batches += o.batches;
        all.enters = all.enters.zip(o.enters).map(|(a, b)| a + b);
        all.flags = o.flags;
        all.hist
            .add(&o.hist)
            .map_err(|e| io::Error::other(format!("cannot merge histograms: {e:?}")))?;
    }
    Ok((all, elapsed))
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
    let mut o = ThreadOutcome::new(None, "")?;
    let mut ops: Vec<Option<F>> = Vec::with_capacity(batch);
    while !stop.reached(o.nops + o.errors) {
        let t0 = Instant::now();
        ops.clear();
        ops.extend((0..batch).map(|_| Some(make())));
        let mut left = batch;
        poll_fn(|cx| {
            for slot in ops.iter_mut() {
                if let Some(op) = slot {
                    if let Poll::Ready(r) = Pin::new(op).poll(cx) {
                        match r {
                            Ok(()) => o.nops += 1,
                            Err(_) => o.errors += 1,
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
        o.batch_done(t0);
    }
    Ok(o)
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
    let mut o = ThreadOutcome::new(None, "default (no setup flags)")?;
    let mut enters = 0u64;
    while !stop.reached(o.nops + o.errors) {
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
                        o.errors += 1;
                    } else {
                        o.nops += 1;
                    }
                }
            }
            left -= chunk;
        }
        o.batch_done(t0);
    }
    o.enters = Some(enters);
    Ok(o)
}
