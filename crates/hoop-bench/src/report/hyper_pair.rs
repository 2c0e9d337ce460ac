//! The per-round comparison of the hyper pair (hyper on `hoop::shared` sockets against the
//! same service on tokio's): req/s, server CPU and context switches per request, round by
//! round, their medians and paired ratios, the targets, and where the server's time goes.

use std::collections::BTreeMap;

use crate::compare::{med, pair_ratio};
use crate::measure::latency::median;
use crate::measure::usage::ThreadUse;
use crate::plan::http::{label, Cell, HYPER_PAIR};
use crate::record::http::HttpResult;
use crate::report::http::{cells_of, in_cell, threads_line};

/// The hyper pair's comparison, when both hyper-shared and hyper-tokio ran: every round of every
/// cell side by side (req/s, server CPU µs/req, context switches/req, and the two ratios
/// hyper-shared / hyper-tokio of that round), a median row per cell (medians of each column;
/// the ratios are medians of the per-round ratios), then the targets: at least 1.0x the
/// req/s, at most 1.0x the CPU per request, in every cell. With `--wrk`, the same again for
/// wrk's runs.
pub(crate) fn hyper_pair_section(results: &[HttpResult]) -> Option<String> {
    let mut s = pair_table(results, "the verifying load generator")?;
    // The table reads the load generator's results (client "hoop"); wrk's are shown through
    // it under that name.
    let wrk: Vec<HttpResult> = results
        .iter()
        .filter(|r| r.client == "wrk" && (r.server == HYPER_PAIR.0 || r.server == HYPER_PAIR.1))
        .cloned()
        .map(|mut r| {
            r.client = "hoop";
            r
        })
        .collect();
    if let Some(t) = pair_table(&wrk, "wrk -t1, bodies not verified") {
        s.push('\n');
        s.push_str(&t);
    }
    Some(s)
}

/// [`hyper_pair_section`]'s table for the results of one client (`client`: how it is named).
fn pair_table(results: &[HttpResult], client: &str) -> Option<String> {
    let (a, b) = HYPER_PAIR;
    let has = |s: &str| results.iter().any(|r| r.server == s && r.client == "hoop");
    if !has(a) || !has(b) {
        return None;
    }
    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
        _ => None,
    };
    let mut s = format!(
        "## {} / {} (issue 22), {client}: every round, paired within the round\n\n\
         | cell | round | {a} req/s | {b} req/s | req/s ratio | {a} CPU µs/req | {b} CPU µs/req | \
         CPU/req ratio | {a} ctx sw/req | {b} ctx sw/req | errors |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        label(a),
        label(b)
    );
    let cpu = |r: &HttpResult| r.server_cpu_us_per_req;
    let ctx = |r: &HttpResult| r.ctx_switches_per_req;
    let mut targets = Vec::new();
    for cell in cells_of(results) {
        let runs = |server: &str| -> Vec<&HttpResult> {
            results
                .iter()
                .filter(|r| r.server == server && in_cell(r, &cell))
                .collect()
        };
        let (ra, rb) = (runs(a), runs(b));
        if ra.is_empty() || rb.is_empty() {
            continue;
        }
        let mut rounds: Vec<u32> = ra.iter().chain(rb.iter()).map(|r| r.round).collect();
        rounds.sort_unstable();
        rounds.dedup();
        for round in rounds {
            let x = ra.iter().find(|r| r.round == round);
            let y = rb.iter().find(|r| r.round == round);
            let get = |r: Option<&&HttpResult>, g: &dyn Fn(&HttpResult) -> Option<f64>| {
                r.and_then(|r| g(r))
            };
            let rps = |r: &HttpResult| Some(r.rps);
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                cell.name(),
                round + 1,
                f(get(x, &rps), 0),
                f(get(y, &rps), 0),
                f(ratio(get(x, &rps), get(y, &rps)), 2),
                f(get(x, &cpu), 2),
                f(get(y, &cpu), 2),
                f(ratio(get(x, &cpu), get(y, &cpu)), 2),
                f(get(x, &ctx), 3),
                f(get(y, &ctx), 3),
                x.map_or(0, |r| r.errors) + y.map_or(0, |r| r.errors),
            ));
        }
        let rps_ratio = pair_ratio(results, a, b, |r| in_cell(r, &cell), |r| Some(r.rps));
        let cpu_ratio = pair_ratio(results, a, b, |r| in_cell(r, &cell), cpu);
        s.push_str(&format!(
            "| {} | **median** | {} | {} | **{}** | {} | {} | **{}** | {} | {} | {} |\n",
            cell.name(),
            f(med(results, a, |r| in_cell(r, &cell), |r| Some(r.rps)), 0),
            f(med(results, b, |r| in_cell(r, &cell), |r| Some(r.rps)), 0),
            f(rps_ratio, 2),
            f(med(results, a, |r| in_cell(r, &cell), cpu), 2),
            f(med(results, b, |r| in_cell(r, &cell), cpu), 2),
            f(cpu_ratio, 2),
            f(med(results, a, |r| in_cell(r, &cell), ctx), 3),
            f(med(results, b, |r| in_cell(r, &cell), ctx), 3),
            ra.iter().chain(rb.iter()).map(|r| r.errors).sum::<u64>(),
        ));
        let verdict = |v: Option<f64>, ok: &dyn Fn(f64) -> bool| match v {
            Some(v) if ok(v) => format!("met ({v:.2}x)"),
            Some(v) => format!("MISSED ({v:.2}x)"),
            None => "not measured".to_string(),
        };
        targets.push(format!(
            "- {}: {a} >= 1.0x {b} req/s: {}; CPU/req <= 1.0x: {}; ctx switches/req {} vs {}",
            cell.name(),
            verdict(rps_ratio, &|v| v >= 1.0),
            verdict(cpu_ratio, &|v| v <= 1.0),
            f(med(results, a, |r| in_cell(r, &cell), ctx), 3),
            f(med(results, b, |r| in_cell(r, &cell), ctx), 3),
        ));
    }
    s.push_str(&format!(
        "\nIssue 22's targets, {client} (medians of the per-round ratios):\n"
    ));
    for t in targets {
        s.push_str(&t);
        s.push('\n');
    }
    s.push_str(
        "\nWhere the server's time goes, per request by thread group (threads, CPU µs at \
         clock-tick resolution, context switches; medians over rounds):\n",
    );
    for cell in cells_of(results) {
        for server in [a, b] {
            let groups = thread_medians(results, server, &cell);
            if !groups.is_empty() {
                s.push_str(&format!(
                    "- {} {server}: {}\n",
                    cell.name(),
                    threads_line(&groups)
                ));
            }
        }
    }
    Some(s)
}

/// Per thread group, the median over rounds of each figure (a group missing from a round
/// counts as absent there, not as zero).
fn thread_medians(
    results: &[HttpResult],
    server: &str,
    cell: &Cell,
) -> BTreeMap<String, ThreadUse> {
    let runs: Vec<&HttpResult> = results
        .iter()
        .filter(|r| r.server == server && in_cell(r, cell))
        .collect();
    let mut names: Vec<&String> = runs.iter().flat_map(|r| r.server_threads.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|g| {
            let m = |f: fn(&ThreadUse) -> f64| {
                let v: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.server_threads.get(g).map(f))
                    .collect();
                median(&v).unwrap_or(0.0)
            };
            let use_ = ThreadUse {
                threads: m(|u| u.threads as f64).round() as usize,
                cpu_us_per_req: m(|u| u.cpu_us_per_req),
                ctx_switches_per_req: m(|u| u.ctx_switches_per_req),
            };
            (g.clone(), use_)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::http::test_result as result;
    use crate::report::http::summary_table;

    #[test]
    fn hyper_pair_rounds_ratios_and_targets() {
        assert!(hyper_pair_section(&[result("hyper-shared", 0, 50, 1.0, 1.0)]).is_none());
        let rs = vec![
            result("hyper-shared", 0, 50, 800.0, 12.0),
            result("hyper-tokio", 0, 50, 1000.0, 10.0),
            result("hyper-shared", 1, 50, 1100.0, 9.0),
            result("hyper-tokio", 1, 50, 1000.0, 10.0),
            result("hyper-shared", 0, 500, 2000.0, 5.0),
            result("hyper-tokio", 0, 500, 1000.0, 10.0),
        ];
        let s = hyper_pair_section(&rs).unwrap();
        assert!(
            s.contains("| 1k-c50 | 1 | 800 | 1000 | 0.80 | 12.00 | 10.00 | 1.20 |"),
            "{s}"
        );
        assert!(s.contains("| 1k-c50 | 2 | 1100 | 1000 | 1.10 |"), "{s}");
        // Median of the per-round ratios 0.8 and 1.1.
        assert!(
            s.contains("| 1k-c50 | **median** | 950 | 1000 | **0.95** |"),
            "{s}"
        );
        assert!(
            s.contains("- 1k-c50: hyper-shared >= 1.0x hyper-tokio req/s: MISSED (0.95x)"),
            "{s}"
        );
        assert!(s.contains("- 1k-c500: hyper-shared >= 1.0x hyper-tokio req/s: met (2.00x); CPU/req <= 1.0x: met (0.50x)"), "{s}");
        assert!(!s.contains("wrk"), "{s}");
        assert!(
            s.contains("- 1k-c50 hyper-shared: tokio-rt-worker x2 10.50 µs 0.500 cs"),
            "{s}"
        );
        let mut with_wrk = rs.clone();
        for r in &rs[..2] {
            let mut w = r.clone();
            w.client = "wrk";
            with_wrk.push(w);
        }
        let s = hyper_pair_section(&with_wrk).unwrap();
        assert!(s.contains("(issue 22), wrk -t1"), "{s}");
        assert!(s.contains("Issue 22's targets, wrk -t1"), "{s}");
        let t = summary_table(&rs, &["hyper-shared".into(), "hyper-tokio".into()], &[]);
        assert!(
            t.contains("ctx switches/req") && t.contains("| 0.500 |"),
            "{t}"
        );
    }
}
