//! `hoop bench http`'s report: the side-by-side table (medians over rounds, hoop's ratios to
//! every server paired within a round), the speed targets evaluated from the numbers, and the
//! lines of one `--url` measurement.

use std::collections::BTreeMap;

use crate::compare::{med, pair_ratio};
use crate::measure::usage::ThreadUse;
use crate::plan::http::{label, Cell};
use crate::record::http::HttpResult;

/// The configurations present in `results` (hoop's client only), in first-seen order.
pub(crate) fn cells_of(results: &[HttpResult]) -> Vec<Cell> {
    let mut v: Vec<Cell> = Vec::new();
    for r in results.iter().filter(|r| r.client == "hoop") {
        let c = Cell {
            file_bytes: r.file_bytes,
            conns: r.conns,
            close: r.mode == "close",
            mix: r.mix,
        };
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

/// Whether `r` is the load generator's measurement of `c`.
pub(crate) fn in_cell(r: &HttpResult, c: &Cell) -> bool {
    r.client == "hoop"
        && r.file_bytes == c.file_bytes
        && r.conns == c.conns
        && (r.mode == "close") == c.close
        && r.mix == c.mix
}

/// The side-by-side table (markdown): medians over rounds, and hoop (io_uring)'s ratios to
/// every server, paired within a round; then the notes.
pub(crate) fn summary_table(
    results: &[HttpResult],
    servers: &[String],
    notes: &[String],
) -> String {
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let f3 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    let mut s = String::from(
        "| file | conns | mode | server | req/s (median) | wrk req/s | MiB/s | p99 µs | server CPU µs/req | \
         syscalls/req | ctx switches/req | client CPU % | errors | client-bound runs | hoop/this req/s | hoop/this CPU/req |\n\
         |---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for cell in cells_of(results) {
        for server in servers {
            let runs: Vec<&HttpResult> = results
                .iter()
                .filter(|r| &r.server == server && in_cell(r, &cell))
                .collect();
            if runs.is_empty() {
                continue;
            }
            let m =
                |f: fn(&HttpResult) -> Option<f64>| med(results, server, |r| in_cell(r, &cell), f);
            let (rr, cr) = if server == "hoop" {
                ("1.00".to_string(), "1.00".to_string())
            } else {
                (
                    f2(pair_ratio(
                        results,
                        "hoop",
                        server,
                        |r| in_cell(r, &cell),
                        |r| Some(r.rps),
                    )),
                    f2(pair_ratio(
                        results,
                        "hoop",
                        server,
                        |r| in_cell(r, &cell),
                        |r| r.server_cpu_us_per_req,
                    )),
                )
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {:.0} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {}/{} | {rr} | {cr} |\n",
                cell.file_label(),
                cell.conns,
                cell.mode(),
                label(server),
                m(|r| Some(r.rps)).unwrap_or(0.0),
                m(|r| r.wrk_req_per_sec).map_or("-".to_string(), |x| format!("{x:.0}")),
                m(|r| Some(r.mib_s)).unwrap_or(0.0),
                f1(m(|r| r.p99_us)),
                f2(m(|r| r.server_cpu_us_per_req)),
                f2(m(|r| r.syscalls_per_req)),
                f3(m(|r| r.ctx_switches_per_req)),
                f1(m(|r| r.client_cpu_pct)),
                runs.iter().map(|r| r.errors).sum::<u64>(),
                runs.iter().filter(|r| r.client_bound).count(),
                runs.len(),
            ));
        }
    }
    for n in notes {
        s.push_str(&format!("\n{n}"));
    }
    s
}

/// The speed targets of the static server against nginx and tokio+hyper, evaluated from the numbers: one line each, `met`, `MISSED` or
/// `not measured`.
pub(crate) fn targets(results: &[HttpResult]) -> Vec<String> {
    let cells = cells_of(results);
    let has = |s: &str| results.iter().any(|r| r.server == s);
    let mut lines = Vec::new();
    let mut check = |name: String,
                     num: &str,
                     base: &str,
                     f: fn(&HttpResult) -> Option<f64>,
                     min: Option<f64>,
                     max: Option<f64>,
                     only: &dyn Fn(&Cell) -> bool| {
        if !has(num) || !has(base) {
            lines.push(format!(
                "{name}: not measured ({} did not run)",
                if has(num) { base } else { num }
            ));
            return;
        }
        let mut worst: Option<(f64, Cell)> = None;
        let mut all = true;
        for c in cells.iter().filter(|c| only(c)) {
            let Some(r) = pair_ratio(results, num, base, |r| in_cell(r, c), f) else {
                continue;
            };
            let ok = min.is_none_or(|m| r >= m) && max.is_none_or(|m| r <= m);
            all &= ok;
            let worse = match (&worst, min) {
                (None, _) => true,
                (Some((w, _)), Some(_)) => r < *w,
                (Some((w, _)), None) => r > *w,
            };
            if worse {
                worst = Some((r, *c));
            }
        }
        match worst {
            None => lines.push(format!("{name}: not measured")),
            Some((r, c)) => lines.push(format!(
                "{name}: {} (worst cell {} c={} {}: {r:.2}x)",
                if all { "met" } else { "MISSED" },
                c.file_label(),
                c.conns,
                c.mode()
            )),
        }
    };
    let any = |_: &Cell| true;
    check(
        "hoop (io_uring) >= 1.0x nginx req/s in every cell".into(),
        "hoop",
        "nginx",
        |r| Some(r.rps),
        Some(1.0),
        None,
        &any,
    );
    check(
        "hoop (io_uring) server CPU/req <= nginx's in every cell".into(),
        "hoop",
        "nginx",
        |r| r.server_cpu_us_per_req,
        None,
        Some(1.0),
        &any,
    );
    check(
        "hoop (io_uring) >= 1.3x nginx req/s at 10,000 connections".into(),
        "hoop",
        "nginx",
        |r| Some(r.rps),
        Some(1.3),
        None,
        &|c: &Cell| c.conns >= 10_000,
    );
    check(
        "hoop (io_uring) >= 1.3x tokio+hyper req/s in every cell".into(),
        "hoop",
        "hyper",
        |r| Some(r.rps),
        Some(1.3),
        None,
        &any,
    );
    check(
        "hoop (epoll) >= 0.9x nginx req/s in every cell".into(),
        "hoop-epoll",
        "nginx",
        |r| Some(r.rps),
        Some(0.9),
        None,
        &any,
    );
    lines
}

/// `tokio-rt-worker x2 4.10 µs 0.412 cs; hoop-reaper x2 ...`: thread groups, busiest first.
pub(crate) fn threads_line(groups: &BTreeMap<String, ThreadUse>) -> String {
    let mut v: Vec<(&String, &ThreadUse)> = groups.iter().collect();
    v.sort_by(|a, b| {
        (b.1.cpu_us_per_req, b.1.ctx_switches_per_req)
            .partial_cmp(&(a.1.cpu_us_per_req, a.1.ctx_switches_per_req))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    v.iter()
        .filter(|(_, u)| u.cpu_us_per_req > 0.0 || u.ctx_switches_per_req > 0.0)
        .map(|(g, u)| {
            format!(
                "{g} x{} {:.2} µs {:.3} cs",
                u.threads, u.cpu_us_per_req, u.ctx_switches_per_req
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The human lines of one `--url` measurement.
pub(crate) fn describe(r: &HttpResult) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = format!(
        "http {} {} ({} B, {} conns, {}{}): {} verified requests ({:.0} req/s, {:.1} MiB/s), {} errors {:?}\n\
         latency µs: p50 {}  p99 {}  p99.9 {}  max {}\n\
         client CPU {}%  server CPU {}%  server CPU µs/req {}  syscalls/req {}  ctx switches/req {}",
        r.server,
        r.url,
        r.file_bytes,
        r.conns,
        r.mode,
        if r.pipeline > 1 {
            format!(", pipeline {}", r.pipeline)
        } else {
            String::new()
        },
        r.requests,
        r.rps,
        r.mib_s,
        r.errors,
        r.errors_by_kind,
        f(r.p50_us),
        f(r.p99_us),
        f(r.p999_us),
        f(r.max_us),
        f(r.client_cpu_pct),
        f(r.server_cpu_pct),
        r.server_cpu_us_per_req
            .map_or("-".into(), |x| format!("{x:.2}")),
        r.syscalls_per_req.map_or("-".into(), |x| format!("{x:.2}")),
        r.ctx_switches_per_req
            .map_or("-".into(), |x| format!("{x:.3}")),
    );
    if !r.server_threads.is_empty() {
        s.push_str(&format!(
            "\nserver threads, per request: {}",
            threads_line(&r.server_threads)
        ));
    }
    if let Some(e) = &r.first_error {
        s.push_str(&format!("\nfirst error: {e}"));
    }
    if r.client_bound {
        s.push_str("\nnote: the client was the bottleneck (its CPU near 100%, the server's not)");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::http::test_result as result;

    /// hoop against nginx in one cell over two rounds: req/s paired 1.5x and 0.5x (median
    /// 1.0x), CPU per request 0.5x and 2x (median 1.25x).
    fn hoop_and_nginx() -> Vec<HttpResult> {
        vec![
            result("hoop", 0, 50, 1200.0, 10.0),
            result("nginx", 0, 50, 800.0, 20.0),
            result("hoop", 1, 50, 500.0, 10.0),
            result("nginx", 1, 50, 1000.0, 5.0),
        ]
    }

    #[test]
    fn targets_are_met_missed_or_not_measured() {
        let t = targets(&hoop_and_nginx());
        assert_eq!(
            t,
            [
                "hoop (io_uring) >= 1.0x nginx req/s in every cell: met (worst cell 1 KiB c=50 \
                 keep-alive: 1.00x)",
                "hoop (io_uring) server CPU/req <= nginx's in every cell: MISSED (worst cell \
                 1 KiB c=50 keep-alive: 1.25x)",
                "hoop (io_uring) >= 1.3x nginx req/s at 10,000 connections: not measured",
                "hoop (io_uring) >= 1.3x tokio+hyper req/s in every cell: not measured (hyper \
                 did not run)",
                "hoop (epoll) >= 0.9x nginx req/s in every cell: not measured (hoop-epoll did \
                 not run)",
            ]
        );
    }

    #[test]
    fn the_table_shows_medians_and_paired_ratios() {
        let rs = hoop_and_nginx();
        let t = summary_table(&rs, &["hoop".into(), "nginx".into()], &["a note".into()]);
        assert!(
            t.contains("| 1 KiB | 50 | keep-alive | hoop (io_uring) | 850 | - |"),
            "{t}"
        );
        assert!(
            t.contains("| 1 KiB | 50 | keep-alive | nginx | 900 | - |"),
            "{t}"
        );
        assert!(t.contains("| 0/2 | 1.00 | 1.25 |\n"), "{t}");
        assert!(t.ends_with("\na note"), "{t}");
        assert_eq!(cells_of(&rs).len(), 1);
    }
}
