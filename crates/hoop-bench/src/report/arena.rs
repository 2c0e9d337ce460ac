//! The tables of `hoop bench http --profile`: one per profile, a row per server, thread count
//! and connection count (medians over rounds), and hoop (io_uring)'s ratio to each server:
//! the median of the ratios paired within a round, and those ratios.

use std::collections::BTreeMap;

use crate::compare::http::arena::ArenaOutcome;
use crate::compare::{med, pair_ratios};
use crate::measure::latency::median;
use crate::plan::arena::{label, ArenaPlan};
use crate::record::arena::ArenaResult;

/// A cell of a profile: (profile, threads, connections).
pub(crate) type ArenaCell = (&'static str, usize, usize);

/// The cells present in `results`, in first-seen order.
pub(crate) fn cells_of(results: &[ArenaResult]) -> Vec<ArenaCell> {
    let mut v: Vec<ArenaCell> = Vec::new();
    for r in results {
        let c = (r.profile, r.threads, r.conns);
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

/// Whether `r` belongs to cell `c`.
pub(crate) fn in_cell(r: &ArenaResult, c: &ArenaCell) -> bool {
    r.profile == c.0 && r.threads == c.1 && r.conns == c.2
}

/// The servers of `results`, in first-seen order.
fn servers_of(results: &[ArenaResult]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in results {
        if !v.contains(&r.server) {
            v.push(r.server.clone());
        }
    }
    v
}

/// hoop's req/s over `server`'s in cell `c`: "1.23 (1.10, 1.23, 1.40)", the median and the
/// per-round ratios; "-" without a pair.
fn ratio_text(results: &[ArenaResult], server: &str, c: &ArenaCell) -> String {
    if server == "hoop" {
        return "1.00".into();
    }
    let ratios = pair_ratios(results, "hoop", server, |r| in_cell(r, c), |r| Some(r.rps));
    match median(&ratios) {
        None => "-".into(),
        Some(m) if ratios.len() == 1 => format!("{m:.2}"),
        Some(m) => format!(
            "{m:.2} ({})",
            ratios
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// "3 (status 2, body 1)", or "0".
fn errors_text(runs: &[&ArenaResult]) -> String {
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for r in runs {
        for (k, n) in &r.errors_by_kind {
            *kinds.entry(k.as_str()).or_insert(0) += n;
        }
    }
    let total: u64 = kinds.values().sum();
    if total == 0 {
        return "0".into();
    }
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!("{total} ({})", list.join(", "))
}

/// One markdown table per profile, then the notes.
pub(crate) fn profile_tables(results: &[ArenaResult], notes: &[String]) -> String {
    let f0 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let servers = servers_of(results);
    let cells = cells_of(results);
    let mut profiles: Vec<&str> = Vec::new();
    for c in &cells {
        if !profiles.contains(&c.0) {
            profiles.push(c.0);
        }
    }
    let mut s = String::new();
    for p in profiles {
        s.push_str(&format!(
            "### {p}\n\n\
             | server | threads | conns | target | req/s (median) | MB/s | p50 µs | p99 µs | \
             errors | hoop/this req/s (median; per round) |\n\
             |---|---:|---:|---|---:|---:|---:|---:|---|---|\n"
        ));
        for c in cells.iter().filter(|c| c.0 == p) {
            for server in &servers {
                let runs: Vec<&ArenaResult> = results
                    .iter()
                    .filter(|r| &r.server == server && in_cell(r, c))
                    .collect();
                if runs.is_empty() {
                    continue;
                }
                let m =
                    |f: fn(&ArenaResult) -> Option<f64>| med(results, server, |r| in_cell(r, c), f);
                let target = if runs.iter().all(|r| r.target) {
                    "target"
                } else {
                    "no target"
                };
                s.push_str(&format!(
                    "| {} | {} | {} | {target} | {} | {} | {} | {} | {} | {} |\n",
                    label(server),
                    c.1,
                    c.2,
                    f0(m(|r| Some(r.rps))),
                    f1(m(|r| Some(r.mb_s))),
                    f1(m(|r| r.p50_us)),
                    f1(m(|r| r.p99_us)),
                    errors_text(&runs),
                    ratio_text(results, server, c),
                ));
            }
        }
        s.push('\n');
    }
    for n in notes {
        s.push_str(&format!("{n}\n"));
    }
    s
}

/// The main job's section: what ran, the tables, and the runs that failed.
pub(crate) fn suite_section(plan: &ArenaPlan, o: &ArenaOutcome) -> String {
    let mut s = format!(
        "## HTTP profiles (HttpArena)\n\n\
         HttpArena's profiles, briefly: each once at its first connection count (upload 32, the \
         others 512), {} s, {} round, one server thread pinned to its own CPU and the client on \
         another; `hoop serve arena` (io_uring), axum on tokio (`--engine axum-tokio`), \
         actix-web (`hoop-peer arena-actix`) and nginx (static and pipelined). Every answer is \
         verified: baseline sums, `ok` of 16 pipelined requests, short-lived connections of 10 \
         requests closed by the server, json items against the dataset, upload byte counts, \
         static bodies byte for byte. The full runs: `hoop bench http --profile all`.\n\n{}",
        plan.secs,
        plan.rounds,
        profile_tables(&o.results, &o.notes)
    );
    for f in &o.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::arena::test_result as r;

    #[test]
    fn tables_pair_rounds_and_mark_the_rows_without_target() {
        let mut bad = r("json", "actix", 0, 1, 100.0);
        bad.errors = 3;
        bad.errors_by_kind = BTreeMap::from([("json".to_string(), 2), ("eof".to_string(), 1)]);
        let rs = vec![
            r("json", "hoop", 0, 1, 300.0),
            bad,
            r("json", "hoop", 1, 1, 200.0),
            r("json", "actix", 1, 1, 100.0),
            r("json", "hoop", 0, 2, 500.0),
            r("json", "actix", 0, 2, 400.0),
        ];
        let t = profile_tables(&rs, &["a note".into()]);
        assert!(t.starts_with("### json\n"), "{t}");
        assert!(
            t.contains(
                "| hoop (io_uring) | 1 | 512 | target | 250 | 1.0 | 100.0 | 900.0 | 0 | 1.00 |"
            ),
            "{t}"
        );
        assert!(
            t.contains("| actix-web | 1 | 512 | target | 100 | 1.0 | 100.0 | 900.0 | 3 (eof 1, json 2) | 2.50 (3.00, 2.00) |"),
            "{t}"
        );
        assert!(
            t.contains("| actix-web | 2 | 512 | no target | 400 |"),
            "{t}"
        );
        assert!(t.contains("| 1.25 |\n"), "{t}");
        assert!(t.ends_with("a note\n"), "{t}");
    }
}
