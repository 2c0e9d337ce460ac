//! The no-op comparison: hoop's ring, the raw loop, `hoop::shared` rings and the peers' no-ops
//! (compio, tokio-uring, in the `hoop-peer` binary) run one after the other with one
//! configuration, each a record; a peer that cannot run here is skipped with a line.

use std::io;

use crate::load::nop::{
    self, NopConfig, ThreadOutcome, COMPIO, HOOP, PEERS, RAW, SHARED, TOKIO_URING,
};
use crate::measure::latency as stats;
use crate::output::Out;
use crate::record::nop::NopResult;

/// The suite's shared-rings rows run this long at most, in seconds.
const SHARED_NOP_SECS: f64 = 2.0;

/// What `hoop bench nop` is asked.
#[derive(Debug, Clone)]
pub struct NopPlan {
    /// Threads: each with its own ring (hoop, raw), or all on one shared set.
    pub threads: usize,
    /// Seconds per engine.
    pub secs: f64,
    /// No-ops per batch.
    pub batch: usize,
    /// SQ entries of each ring.
    pub entries: u32,
    /// Also the shared rings' row, first.
    pub shared: bool,
    /// Rings of the shared set.
    pub rings: usize,
    /// Leave out the peers' rows.
    pub no_peers: bool,
}

impl NopPlan {
    /// The configuration every engine runs, checked.
    pub(crate) fn config(&self) -> io::Result<NopConfig> {
        let cfg = NopConfig {
            threads: self.threads,
            secs: self.secs,
            batch: self.batch,
            entries: self.entries,
            rings: self.rings,
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// The engines, in the order they run.
    pub(crate) fn engines(&self) -> Vec<&'static str> {
        let mut engines = if self.shared {
            vec![SHARED, HOOP, RAW]
        } else {
            vec![HOOP, RAW]
        };
        if !self.no_peers {
            engines.extend(PEERS);
        }
        engines
    }
}

/// The suite's no-op runs: hoop, the raw loop (and the peers) on one thread, then shared rings
/// in kbio's two configurations (1 thread with 64 entries, 4 threads with 1024), a couple of
/// seconds each.
pub(crate) fn suite_runs(secs: f64, peers: bool) -> Vec<(NopConfig, Vec<&'static str>)> {
    let first = NopConfig {
        threads: 1,
        secs,
        batch: 32,
        entries: 128,
        rings: 1,
    };
    let engines = if peers {
        vec![HOOP, RAW, COMPIO, TOKIO_URING]
    } else {
        vec![HOOP, RAW]
    };
    let mut runs = vec![(first, engines)];
    for (threads, entries) in [(1, 64), (4, 1024)] {
        let cfg = NopConfig {
            threads,
            secs: secs.min(SHARED_NOP_SECS),
            batch: 32,
            entries,
            rings: 1,
        };
        runs.push((cfg, vec![SHARED]));
    }
    runs
}

/// Planned seconds of `runs`, for the progress bar.
pub(crate) fn planned_secs(runs: &[(NopConfig, Vec<&'static str>)]) -> f64 {
    runs.iter()
        .map(|(cfg, engines)| cfg.secs * engines.len() as f64)
        .sum()
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
            let (o, elapsed) = nop::run_engine(engine, cfg)?;
            out.done(cfg.secs);
            make_result(engine, cfg, &o, elapsed)
        };
        out.measurement(&r);
        results.push(r);
    }
    Ok((results, skipped))
}

/// The record of one engine's run.
fn make_result(
    engine: &'static str,
    cfg: &NopConfig,
    o: &ThreadOutcome,
    elapsed: f64,
) -> NopResult {
    let h = &o.hist;
    NopResult {
        bench: "nop",
        engine,
        threads: cfg.threads,
        batch: cfg.batch,
        entries: cfg.entries,
        rings: (engine == SHARED).then_some(cfg.rings),
        secs: stats::round3(elapsed),
        nops: o.nops,
        errors: o.errors,
        nops_per_sec: if elapsed > 0.0 {
            (o.nops as f64 / elapsed).round()
        } else {
            0.0
        },
        batches: o.batches,
        batch_mean_us: stats::mean_us(h),
        batch_p50_us: stats::quantile_us(h, 0.5),
        batch_p90_us: stats::quantile_us(h, 0.9),
        batch_p99_us: stats::quantile_us(h, 0.99),
        batch_p999_us: stats::quantile_us(h, 0.999),
        batch_p9999_us: stats::quantile_us(h, 0.9999),
        batch_p99999_us: stats::quantile_us(h, 0.99999),
        batch_p999999_us: stats::quantile_us(h, 0.999999),
        batch_max_us: stats::max_us(h),
        syscalls_per_op: o
            .enters
            .filter(|_| o.nops > 0)
            .map(|e| e as f64 / o.nops as f64),
        setup_flags: o.flags.clone(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_orders_its_engines_and_the_suite_plans_kbios_rows() {
        let plan = NopPlan {
            threads: 1,
            secs: 3.0,
            batch: 32,
            entries: 128,
            shared: true,
            rings: 1,
            no_peers: false,
        };
        assert_eq!(plan.engines(), [SHARED, HOOP, RAW, COMPIO, TOKIO_URING]);
        assert!(plan.config().is_ok());
        let bad = NopPlan { batch: 0, ..plan };
        assert!(bad.config().is_err());
        let runs = suite_runs(3.0, false);
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[0].1, [HOOP, RAW]);
        assert_eq!((runs[2].0.threads, runs[2].0.entries), (4, 1024));
        // 2 engines x 3 s, then 2 shared rows of 2 s.
        assert_eq!(planned_secs(&runs), 10.0);
    }
}
