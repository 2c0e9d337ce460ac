//! `hoop bench echo`: the command, its side-by-side table (medians over rounds and each hoop
//! server's ratios, paired within a round) and the lines of a single measurement.

use std::io;

use crate::compare::echo::{self, in_cell, EchoPlan};
use crate::compare::{med, pair_ratio, single_status};
use crate::output::Out;
use crate::record::echo::EchoResult;

/// The servers the ratio columns are taken against (numerators), when they ran.
const REFERENCES: [&str; 2] = ["hoop", "hoop-epoll"];

/// How a server is named in tables and charts (its JSON `server` field stays the short name).
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-basic" => "hoop (io_uring, basic)",
        "hoop-epoll" => "hoop (epoll)",
        other => other,
    }
}

/// Runs `hoop bench echo`: one server by address, or the servers side by side and the table.
pub fn run_echo(plan: EchoPlan, json: bool) -> io::Result<()> {
    let secs = plan.secs()?;
    crate::machine::raise_nofile_limit();
    if let Some(addr) = &plan.addr {
        let target = crate::plan::check::resolve_addr(addr)?;
        let out = Out::new(json, secs);
        let r = echo::run_external(target, &plan, secs, &out)?;
        out.finish();
        out.measurement(&r);
        out.human(&describe(&r));
        return external_status(&r);
    }
    let matrix = plan.matrix(secs)?;
    let out = Out::new(json, matrix.planned_secs());
    let outcome = echo::run_matrix(&matrix, &out);
    out.finish();
    let mut table = summary_table(&outcome.results, &matrix.servers);
    for s in &outcome.skipped {
        table.push_str(&format!("- {s}\n"));
    }
    out.human(&table);
    echo::finish_status(&outcome.results, &outcome.failures)
}

/// The exit status of a single measurement: an error if it counted errors or verified nothing.
fn external_status(r: &EchoResult) -> io::Result<()> {
    single_status(
        r,
        "no request was verified in the window: the server accepted connections but never \
         answered in time",
    )
}

/// Human lines for one measurement.
fn describe(r: &EchoResult) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut s = format!(
        "echo {} ({}): {} conns x {} B, {:.1} s: {} verified requests ({:.0} req/s), {} errors\n\
         latency µs: p50 {}  p99 {}  p99.9 {}  max {}\n\
         client CPU {:.1}%  server CPU {}%  server CPU µs/req {}  syscalls/req {}",
        r.server,
        r.addr,
        r.conns,
        r.len_bytes,
        r.secs,
        r.requests,
        r.rps,
        r.errors,
        f(r.latency.p50_us),
        f(r.latency.p99_us),
        f(r.latency.p999_us),
        f(r.latency.max_us),
        r.client_cpu_pct,
        f(r.usage.server_cpu_pct),
        r.usage
            .server_cpu_us_per_req
            .map_or("-".into(), |x| format!("{x:.2}")),
        r.usage
            .syscalls_per_req
            .map_or("-".into(), |x| format!("{x:.2}")),
    );
    if let Some(e) = &r.first_error {
        s.push_str(&format!("\nfirst error: {e}"));
    }
    if r.client_bound {
        s.push_str("\nnote: the client was the bottleneck (its CPU near 100%, the server's not)");
    }
    s
}

/// The configurations present in `results`, in first-seen order.
pub(crate) fn configurations(results: &[EchoResult]) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for r in results {
        if !v.contains(&(r.conns, r.len_bytes)) {
            v.push((r.conns, r.len_bytes));
        }
    }
    v
}

/// The side-by-side table (markdown): medians over rounds, and for each hoop server that ran
/// (io_uring, epoll) its ratios to every server, paired within a round: so the `hoop (epoll)`
/// row's `hoop (io_uring)/this` column is hoop(io_uring)/hoop(epoll).
pub(crate) fn summary_table(results: &[EchoResult], servers: &[String]) -> String {
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let refs: Vec<&str> = REFERENCES
        .into_iter()
        .filter(|r| servers.iter().any(|s| s == r))
        .collect();
    let mut s = String::from(
        "| conns | len | server | req/s (median) | p99 µs | server CPU µs/req | server CPU % | \
         syscalls/req | client CPU % | errors | client-bound runs |",
    );
    for r in &refs {
        let l = label(r);
        s.push_str(&format!(" {l}/this req/s | {l}/this CPU/req |"));
    }
    s.push_str("\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    s.push_str(&"---:|---:|".repeat(refs.len()));
    s.push('\n');
    for (conns, len) in configurations(results) {
        let cell = in_cell(conns, len);
        for server in servers {
            let runs: Vec<&EchoResult> = results
                .iter()
                .filter(|r| &r.server == server && cell(r))
                .collect();
            if runs.is_empty() {
                continue;
            }
            let m = |f: fn(&EchoResult) -> Option<f64>| med(results, server, cell, f);
            s.push_str(&format!(
                "| {conns} | {len} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {}/{} |",
                label(server),
                m(|r| Some(r.rps)).unwrap_or(0.0),
                f1(m(|r| r.latency.p99_us)),
                f2(m(|r| r.usage.server_cpu_us_per_req)),
                f1(m(|r| r.usage.server_cpu_pct)),
                f2(m(|r| r.usage.syscalls_per_req)),
                f1(m(|r| Some(r.client_cpu_pct))),
                runs.iter().map(|r| r.errors).sum::<u64>(),
                runs.iter().filter(|r| r.client_bound).count(),
                runs.len(),
            ));
            for r in &refs {
                let (rps, cpu) = if server == r {
                    ("1.00".to_string(), "1.00".to_string())
                } else {
                    (
                        f2(pair_ratio(results, r, server, cell, |x| Some(x.rps))),
                        f2(pair_ratio(results, r, server, cell, |x| {
                            x.usage.server_cpu_us_per_req
                        })),
                    )
                };
                s.push_str(&format!(" {rps} | {cpu} |"));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::echo::test_result as result;

    #[test]
    fn the_table_has_both_hoop_ratios() {
        let servers: Vec<String> = ["hoop", "hoop-epoll", "tokio"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let results = vec![
            result("hoop", 0, 300.0, 2.0),
            result("hoop-epoll", 0, 200.0, 4.0),
            result("tokio", 0, 100.0, 8.0),
            result("hoop", 1, 300.0, 2.0),
            result("hoop-epoll", 1, 200.0, 4.0),
            result("tokio", 1, 100.0, 8.0),
        ];
        let t = summary_table(&results, &servers);
        assert!(t.contains("hoop (io_uring)/this req/s"), "{t}");
        assert!(t.contains("hoop (epoll)/this req/s"), "{t}");
        let row = |name: &str| {
            t.lines()
                .find(|l| l.contains(&format!("| {name} |")))
                .unwrap_or_else(|| panic!("no {name} row: {t}"))
                .to_string()
        };
        // hoop(io_uring)/hoop(epoll): 1.50 req/s, 0.50 CPU; then hoop(epoll)/hoop(epoll).
        assert!(
            row("hoop (epoll)").ends_with("| 1.50 | 0.50 | 1.00 | 1.00 |"),
            "{t}"
        );
        // Against tokio: io_uring 3x, epoll 2x.
        assert!(
            row("tokio").ends_with("| 3.00 | 0.25 | 2.00 | 0.50 |"),
            "{t}"
        );
        let header_cols = t.lines().next().unwrap().matches('|').count();
        for line in t.lines().skip(1) {
            assert_eq!(line.matches('|').count(), header_cols, "{line}");
        }
    }

    #[test]
    fn a_single_measurement_says_what_it_saw() {
        let mut r = result("external", 0, 100.0, 2.0);
        assert!(external_status(&r).is_ok());
        let d = describe(&r);
        assert!(
            d.contains("50 conns x 128 B") && d.contains("p99 20.0"),
            "{d}"
        );
        r.errors = 1;
        r.first_error = Some("read: reset".into());
        let e = external_status(&r).unwrap_err().to_string();
        assert!(e.contains("first: read: reset"), "{e}");
        assert!(describe(&r).contains("first error: read: reset"));
    }
}
