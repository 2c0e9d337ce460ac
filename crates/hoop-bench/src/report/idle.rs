//! `hoop bench idle`'s report: the command's run (plan, comparison, table, exit status), its
//! table, and its section of the suite's report.

use std::io;

use crate::compare::idle::{run_plan, Outcome, Plan};
use crate::output::Out;
use crate::plan::idle::IdlePlan;
use crate::record::idle::IdleResult;
use crate::report::echo::label;

/// Runs `hoop bench idle`.
pub fn run_idle(plan: IdlePlan, json: bool) -> io::Result<()> {
    let plan = Plan::check(plan)?;
    let out = Out::new(json, plan.planned_secs());
    if let Some(n) = &plan.cap_note {
        out.note(n);
    }
    let outcome = run_plan(&plan, &out);
    out.finish();
    out.human(&table(&plan, &outcome));
    if !outcome.failures.is_empty() {
        return Err(io::Error::other(format!(
            "{} server(s) could not be measured; first: {}",
            outcome.failures.len(),
            outcome.failures[0]
        )));
    }
    let bad = outcome.bad();
    if !bad.is_empty() {
        return Err(io::Error::other(format!(
            "{}: idle connections failed, or the active load counted errors or verified nothing \
             (see the table)",
            bad.join(", ")
        )));
    }
    Ok(())
}

fn mib(b: Option<u64>) -> String {
    b.map_or("-".into(), |b| {
        format!("{:.1}", b as f64 / (1024.0 * 1024.0))
    })
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// What was run, in one sentence.
fn describe(plan: &Plan) -> String {
    format!(
        "{} idle connections{} per server from {} helper process(es) on 127.0.0.x source \
         addresses ({} of them checked for an echo once all were open), {} active connections \
         of {} B for {} s without, then with them, every active reply verified",
        plan.idle,
        if plan.idle < plan.asked {
            format!(" ({} asked, capped)", plan.asked)
        } else {
            String::new()
        },
        plan.helpers(),
        plan.sample.min(plan.idle),
        plan.conns,
        plan.len,
        plan.secs
    )
}

/// The table (markdown), then the cap line and the failures.
pub(crate) fn table(plan: &Plan, o: &Outcome) -> String {
    let mut s = format!("{}.\n\n", describe(plan));
    s.push_str(
        "| server | idle held | idle failed | still open after | RSS before MiB | with idle MiB | \
         after MiB | RSS B/idle conn | req/s no idle | req/s with idle | ratio | p99 µs no idle \
         | p99 µs with idle | active errors |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &o.results {
        s.push_str(&row(r));
    }
    if let Some(n) = &plan.cap_note {
        s.push_str(&format!("\n- {n}\n"));
    }
    for r in o.results.iter().filter(|r| r.idle_failed > 0) {
        s.push_str(&format!(
            "- {}: {} idle connection(s) failed ({} not opened, {} of {} sampled without an \
             echo); first: {}\n",
            label(&r.server),
            r.idle_failed,
            r.idle_connect_failed,
            r.idle_sample_failed,
            r.idle_sampled,
            r.idle_first_error.as_deref().unwrap_or("?")
        ));
    }
    for r in o.results.iter().filter(|r| r.active_first_error.is_some()) {
        s.push_str(&format!(
            "- {}: first active error: {}\n",
            label(&r.server),
            r.active_first_error.as_deref().unwrap_or("?")
        ));
    }
    for f in &o.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s
}

fn row(r: &IdleResult) -> String {
    format!(
        "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {}/{} |\n",
        label(&r.server),
        r.idle_conns,
        r.idle_tried,
        r.idle_failed,
        r.idle_still_open,
        mib(r.rss_bytes_before),
        mib(r.rss_bytes_with_idle),
        mib(r.rss_bytes_after),
        num(r.rss_bytes_per_idle_conn, 0),
        r.active_rps_no_idle,
        r.active_rps,
        num(r.active_rps_ratio, 2),
        num(r.p99_us_no_idle, 1),
        num(r.p99_us, 1),
        r.active_errors_no_idle,
        r.active_errors,
    )
}

/// The report's section.
pub(crate) fn section(plan: &Plan, o: &Outcome) -> String {
    format!(
        "## Idle connections\n\n`hoop bench idle` at a small size: each echo server (a child \
         process pinned like the echo runs) holds idle connections while the echo client loads \
         it; server RSS (`VmRSS`) before the idle connections, with them, and 1 s after they \
         left; `RSS B/idle conn` is (with - before) / held, the server's user memory per idle \
         connection (kernel socket memory is not in it); `still open after` counts the idle \
         connections the server had not closed after the loaded run; `active errors` are \
         without/with. The full size: `hoop bench idle` (100,000 asked, capped at the \
         open-file limit). {}\n\n",
        table(plan, o)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_as_many_columns_as_the_header() {
        let plan = Plan {
            servers: vec!["hoop".into()],
            asked: 10,
            idle: 10,
            cap_note: None,
            conns: 1,
            len: 8,
            secs: 1.0,
            sample: 5,
            per_client: 10,
        };
        let r = IdleResult {
            bench: "idle",
            server: "hoop".into(),
            idle_asked: 10,
            idle_tried: 10,
            idle_conns: 10,
            idle_failed: 0,
            idle_connect_failed: 0,
            idle_sampled: 5,
            idle_sample_failed: 0,
            idle_first_error: None,
            idle_still_open: 10,
            idle_connect_secs: 0.1,
            idle_clients: 1,
            active_conns: 1,
            len_bytes: 8,
            secs: 1.0,
            rss_bytes_before: Some(1 << 20),
            rss_bytes_with_idle: Some(2 << 20),
            rss_bytes_after: None,
            rss_bytes_per_idle_conn: Some(104_857.6),
            active_rps: 10.0,
            active_rps_no_idle: 20.0,
            active_rps_ratio: Some(0.5),
            p99_us: Some(1.0),
            p99_us_no_idle: None,
            active_errors: 0,
            active_errors_no_idle: 0,
            active_first_error: None,
            pinned: true,
        };
        let o = Outcome {
            results: vec![r],
            failures: Vec::new(),
        };
        let t = table(&plan, &o);
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(lines.len(), 3, "{t}");
        let cols = lines[0].matches('|').count();
        for l in &lines {
            assert_eq!(l.matches('|').count(), cols, "{l}");
        }
        assert!(lines[2].contains("| hoop (io_uring) | 10/10 |"), "{t}");
    }
}
