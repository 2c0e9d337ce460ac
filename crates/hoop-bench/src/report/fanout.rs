//! `hoop bench fanout`: the command, its table (medians over rounds per load, hoop (io_uring)'s
//! ratios paired within a round), the ratio lines and the report's section.

use std::io;

use crate::compare::fanout::{self, in_load, FanoutMatrix, FanoutPlan};
use crate::compare::{med, pair_ratio, Outcome};
use crate::output::Out;
use crate::plan::check::resolve_addr;
use crate::record::fanout::FanoutResult;

/// How a server is named in tables (its JSON `server` field stays the short name).
pub(crate) fn label(server: &str) -> &str {
    match server {
        "hoop" => "hoop (io_uring)",
        "hoop-epoll" => "hoop (epoll)",
        other => other,
    }
}

/// The load a row ran under, as tables say it.
fn load_label(hog: bool) -> &'static str {
    if hog {
        "CPU hog on the server's core"
    } else {
        "unloaded"
    }
}

/// Runs `hoop bench fanout`: the servers side by side (or one by address), the table, the
/// ratio lines.
pub fn run_fanout(plan: FanoutPlan, json: bool) -> io::Result<()> {
    let m = plan.matrix()?;
    crate::machine::raise_nofile_limit();
    if let Some(addr) = &plan.addr {
        let target = resolve_addr(addr)?;
        let out = Out::new(json, fanout::external_secs(&m));
        let o = fanout::run_external(&m, target, plan.server_pid, &out)?;
        out.finish();
        out.human(&summary_table(&o.results, &["external".to_string()]));
        return fanout::finish_status(&o);
    }
    let out = Out::new(json, m.planned_secs());
    out.note(&m.describe());
    let outcome = fanout::run_matrix(&m, &out);
    out.finish();
    out.human(&summary_table(&outcome.results, &m.servers));
    for line in ratio_lines(&outcome.results) {
        out.human(&line);
    }
    fanout::finish_status(&outcome)
}

/// The loads present in `results`: unloaded first.
fn loads_of(results: &[FanoutResult]) -> Vec<bool> {
    [false, true]
        .into_iter()
        .filter(|&h| results.iter().any(|r| r.hog == h))
        .collect()
}

/// The table (markdown): medians over rounds, and hoop (io_uring)'s ratios to every server,
/// paired within a round.
pub(crate) fn summary_table(results: &[FanoutResult], servers: &[String]) -> String {
    let f0 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let f3 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    let reference = servers.iter().any(|s| s == "hoop");
    let mut s = String::from(
        "| load | server | deliveries/s | messages/s | p50 µs | p99 µs | server CPU µs/delivery | \
         server CPU % | syscalls/delivery | client CPU % | hog CPU % | errors | client-bound runs |",
    );
    if reference {
        s.push_str(" hoop (io_uring)/this deliveries/s | hoop (io_uring)/this CPU/delivery |");
    }
    s.push_str("\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if reference {
        s.push_str("---:|---:|");
    }
    s.push('\n');
    for hog in loads_of(results) {
        for server in servers {
            let runs: Vec<&FanoutResult> = results
                .iter()
                .filter(|r| &r.server == server && r.hog == hog)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let m = |f: fn(&FanoutResult) -> Option<f64>| med(results, server, in_load(hog), f);
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
                load_label(hog),
                label(server),
                f0(m(|r| Some(r.deliveries_per_sec))),
                f0(m(|r| Some(r.messages_per_sec))),
                f1(m(|r| r.latency.p50_us)),
                f1(m(|r| r.latency.p99_us)),
                f3(m(|r| r.cpu_us_per_delivery)),
                f1(m(|r| r.server_cpu_pct)),
                f3(m(|r| r.syscalls_per_delivery)),
                f1(m(|r| Some(r.client_cpu_pct))),
                f1(m(|r| r.hog_cpu_pct)),
                runs.iter().map(|r| r.errors).sum::<u64>(),
                runs.iter().filter(|r| r.client_bound).count(),
                runs.len(),
            ));
            if reference {
                let (d, c) = if server == "hoop" {
                    ("1.00".to_string(), "1.00".to_string())
                } else {
                    (
                        f2(pair_ratio(results, "hoop", server, in_load(hog), |r| {
                            Some(r.deliveries_per_sec)
                        })),
                        f2(pair_ratio(results, "hoop", server, in_load(hog), |r| {
                            r.cpu_us_per_delivery
                        })),
                    )
                };
                s.push_str(&format!(" {d} | {c} |"));
            }
            s.push('\n');
        }
    }
    s
}

/// hoop (io_uring)/hoop (epoll) and hoop (io_uring)/tokio, per load: deliveries/s and server
/// CPU per delivery, medians of per-round ratios.
pub(crate) fn ratio_lines(results: &[FanoutResult]) -> Vec<String> {
    let mut lines = Vec::new();
    for hog in loads_of(results) {
        for base in ["hoop-epoll", "tokio"] {
            let d = pair_ratio(results, "hoop", base, in_load(hog), |r| {
                Some(r.deliveries_per_sec)
            });
            let c = pair_ratio(results, "hoop", base, in_load(hog), |r| {
                r.cpu_us_per_delivery
            });
            if let Some(d) = d {
                let cpu = c.map_or(String::new(), |c| {
                    format!(", server CPU per delivery {c:.2}x")
                });
                lines.push(format!(
                    "- fanout ({}): hoop (io_uring)/{}: deliveries/s {d:.2}x{cpu}",
                    load_label(hog),
                    label(base)
                ));
            }
        }
    }
    lines
}

/// The report's section: what ran, the table, the ratios.
pub(crate) fn section(plan: &FanoutMatrix, o: &Outcome<FanoutResult>) -> String {
    let mut s = format!(
        "## Fan-out (chat broadcast)\n\n`hoop serve fanout` (a line chat server: every line goes \
         to every connected client, the sender included; one `tokio::sync::broadcast` channel, a \
         reader and a writer task per connection, one thread) on hoop io_uring, on hoop epoll \
         (the same code) and on tokio's current-thread runtime, each a child process pinned like \
         the echo servers; the client (`hoop bench fanout`, one hoop thread on the other CPU) \
         verifies every delivery per sender in order, byte for byte. {}. Values are medians over \
         rounds; ratios are taken pair by pair within a round.\n\n",
        plan.describe()
    );
    if o.results.is_empty() {
        s.push_str("No fan-out measurement.\n\n");
    } else {
        s.push_str(&summary_table(&o.results, &plan.servers));
        s.push('\n');
        for l in ratio_lines(&o.results) {
            s.push_str(&l);
            s.push('\n');
        }
        s.push('\n');
    }
    for f in &o.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fanout::SERVERS;
    use crate::record::fanout::test_result as result;

    #[test]
    fn ratios_pair_within_round_and_load() {
        let servers: Vec<String> = SERVERS.iter().map(|s| s.to_string()).collect();
        let mut results = Vec::new();
        for round in 0..2 {
            for hog in [false, true] {
                let k = if hog { 0.5 } else { 1.0 };
                results.push(result("hoop", round, hog, 300.0 * k, 1.0));
                results.push(result("hoop-epoll", round, hog, 200.0 * k, 2.0));
                results.push(result("tokio", round, hog, 100.0 * k, 4.0));
            }
        }
        let t = summary_table(&results, &servers);
        let row = |load: &str, name: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("| {load} | {name} |")))
                .unwrap_or_else(|| panic!("no {load}/{name} row: {t}"))
                .to_string()
        };
        assert!(
            row("unloaded", "hoop (epoll)").ends_with("| 1.50 | 0.50 |"),
            "{t}"
        );
        assert!(row("unloaded", "tokio").ends_with("| 3.00 | 0.25 |"), "{t}");
        assert!(
            row("CPU hog on the server's core", "tokio").ends_with("| 3.00 | 0.25 |"),
            "{t}"
        );
        let header_cols = t.lines().next().unwrap().matches('|').count();
        for line in t.lines().skip(1) {
            assert_eq!(line.matches('|').count(), header_cols, "{line}");
        }
        let lines = ratio_lines(&results);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("hoop (io_uring)/hoop (epoll): deliveries/s 1.50x"));
        assert!(lines[3].contains("CPU hog"), "{lines:?}");
    }
}
