//! The side-by-side table, its ratios (paired within a round, medians over rounds) and the
//! issue's speed targets evaluated from the numbers.

use super::{label, Cell, HttpResult};
use crate::bench::stats::median;

/// The configurations present in `results` (hoop's client only), in first-seen order.
pub(crate) fn cells_of(results: &[HttpResult]) -> Vec<Cell> {
    let mut v: Vec<Cell> = Vec::new();
    for r in results.iter().filter(|r| r.client == "hoop") {
        let c = Cell {
            file_bytes: r.file_bytes,
            conns: r.conns,
            close: r.mode == "close",
        };
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

fn in_cell(r: &HttpResult, c: &Cell) -> bool {
    r.client == "hoop"
        && r.file_bytes == c.file_bytes
        && r.conns == c.conns
        && (r.mode == "close") == c.close
}

/// Median over rounds of `f` for `server` in `cell`.
pub(crate) fn med(
    results: &[HttpResult],
    server: &str,
    cell: &Cell,
    f: impl Fn(&HttpResult) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = results
        .iter()
        .filter(|r| r.server == server && in_cell(r, cell))
        .filter_map(f)
        .collect();
    median(&v)
}

/// Median over rounds of `num`'s `f` / `base`'s `f`, paired within each round.
pub(crate) fn pair_ratio(
    results: &[HttpResult],
    num: &str,
    base: &str,
    cell: &Cell,
    f: impl Fn(&HttpResult) -> Option<f64>,
) -> Option<f64> {
    let ratios: Vec<f64> = results
        .iter()
        .filter(|r| r.server == num && in_cell(r, cell))
        .filter_map(|a| {
            let b = results
                .iter()
                .find(|r| r.server == base && r.round == a.round && in_cell(r, cell))?;
            let (x, y) = (f(a)?, f(b)?);
            (y > 0.0).then(|| x / y)
        })
        .collect();
    median(&ratios)
}

/// Human size of a file.
pub(crate) fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
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
    let mut s = String::from(
        "| file | conns | mode | server | req/s (median) | MiB/s | p99 µs | server CPU µs/req | \
         syscalls/req | client CPU % | errors | client-bound runs | hoop/this req/s | hoop/this CPU/req |\n\
         |---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
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
            let m = |f: fn(&HttpResult) -> Option<f64>| med(results, server, &cell, f);
            let (rr, cr) = if server == "hoop" {
                ("1.00".to_string(), "1.00".to_string())
            } else {
                (
                    f2(pair_ratio(results, "hoop", server, &cell, |r| Some(r.rps))),
                    f2(pair_ratio(results, "hoop", server, &cell, |r| {
                        r.server_cpu_us_per_req
                    })),
                )
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {:.0} | {:.1} | {} | {} | {} | {} | {} | {}/{} | {rr} | {cr} |\n",
                size_label(cell.file_bytes),
                cell.conns,
                cell.mode(),
                label(server),
                m(|r| Some(r.rps)).unwrap_or(0.0),
                m(|r| Some(r.mib_s)).unwrap_or(0.0),
                f1(m(|r| r.p99_us)),
                f2(m(|r| r.server_cpu_us_per_req)),
                f2(m(|r| r.syscalls_per_req)),
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

/// The targets, evaluated from the numbers: one line each, `met`, `MISSED` or
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
            let Some(r) = pair_ratio(results, num, base, c, f) else {
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
                size_label(c.file_bytes),
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
