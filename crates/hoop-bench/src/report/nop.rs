//! `hoop bench nop`: the command, its table (kbio's percentiles, hoop's share of the ceiling
//! and of each peer) and the shared rings' targets.

use std::io;

use crate::compare::nop::{self, NopPlan};
use crate::load::nop::{HOOP, PEERS, RAW, SHARED};
use crate::output::Out;
use crate::record::nop::NopResult;

/// Why monoio has no row.
pub(crate) const MONOIO_NONE: &str = "monoio: no row: monoio 0.2 has no public no-op, and none \
can be defined outside it (its operation trait, OpAble, is crate-private); compio has none either, \
but its driver's OpCode trait is public, so its row is IORING_OP_NOP defined through it";

/// kbio's published figures, for reference only: they come from kbio's own machine in 2021.
pub(crate) const KBIO_REFERENCE: &str = "kbio's published figures (kbio's own machine, 2021, \
not this one): 1 thread, -b 32 -n 64: 1.2M no-ops/s, batch mean 26 µs, p99.9999 85 µs; \
4 threads, -b 32 -n 1024: 1.9M no-ops/s, batch mean 67 µs, p99.999 15.8 ms";

/// Runs `hoop bench nop`: every engine with the plan's configuration, then the table.
pub fn run_nop(plan: NopPlan, json: bool) -> io::Result<()> {
    let cfg = plan.config()?;
    let engines = plan.engines();
    let out = Out::new(json, cfg.secs * engines.len() as f64);
    let (results, skipped) = nop::run_engines(&cfg, &engines, &out)?;
    out.finish();
    out.human(&with_notes(table(&results), &skipped, !plan.no_peers));
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

/// The shared rings' targets, each evaluated from `results` (one line each): at batch 32, 1
/// thread and 4 threads at least 4M no-ops/s, p99.9999 batch latency under 1 ms at 1 thread,
/// and at least half the thread-per-core ring's no-ops/s at 1 thread (kbio's figures on a
/// shared set, on this machine).
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
    use crate::record::nop::test_result as result;

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
