//! `hoop bench cancel`'s report: the command's run (plan, comparison, table, exit status), its
//! table, and its section of the suite's report.

use std::io;

use crate::compare::cancel::{run_plan, Outcome, Plan};
use crate::output::Out;
use crate::plan::cancel::CancelPlan;

/// Runs `hoop bench cancel`.
pub fn run_cancel(plan: CancelPlan, json: bool) -> io::Result<()> {
    let plan = Plan::check(plan)?;
    let out = Out::new(json, plan.planned_secs());
    out.note(&format!("hoop bench cancel: {}", plan.describe()));
    let o = run_plan(&plan, &out);
    out.finish();
    out.human(&format!("## Cancellation in select!\n\n{}", table(&o)));
    if !o.failures.is_empty() {
        return Err(io::Error::other(format!(
            "{} scenario(s) could not run: {}",
            o.failures.len(),
            o.failures.join("; ")
        )));
    }
    Ok(())
}

/// The table: runtime | scenario | sent | received | lost | note, then the skipped runtimes
/// and the failed scenarios.
pub(crate) fn table(o: &Outcome) -> String {
    let mut s = String::from(
        "| runtime | scenario | sent | received | lost | unit | note |\n|---|---|---:|---:|---:|---|---|\n",
    );
    let num = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
    for r in &o.results {
        let note = if r.supported {
            r.note.clone().unwrap_or_default()
        } else {
            format!("not supported: {}", r.note.as_deref().unwrap_or(""))
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.runtime,
            r.scenario,
            num(r.sent),
            num(r.received),
            num(r.lost),
            r.unit,
            note.replace('|', "/")
        ));
    }
    for k in &o.skipped {
        s.push_str(&format!("- {k}\n"));
    }
    for f in &o.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s
}

/// The report's section.
pub(crate) fn section(plan: &Plan, o: &Outcome) -> String {
    format!(
        "## Cancellation in select!\n\n\
         What programs written the tokio way lose when an I/O future is dropped: every call is \
         raced against a 50 µs sleep in a biased `select!` loop (the sleep first), so the I/O \
         future is dropped whenever the sleep wins; the load runs on std threads in the same \
         process and counts what arrived (`hoop bench cancel`; tokio is the reference, the \
         peers run in `hoop-peer cancel`). accept: each client waits for one byte the server \
         writes on every connection it accepted; read: bytes read in order before any gap; \
         udp_recv_from, unix_recv: distinct numbered datagrams, paced so the socket never \
         overflows; drop_after_write: bytes on disk after each file was written with the \
         runtime's write-all and dropped unflushed, and the runtime dropped; \
         stream_drop_after_write: the same with TCP streams, bytes their reader got. {}. Only \
         counts, no speed.\n\n{}\n",
        plan.describe(),
        table(o)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::cancel::{counted, unsupported};
    use crate::load::cancel::load::Counts;

    #[test]
    fn rows_have_as_many_columns_as_the_header() {
        let counts = Counts {
            sent: 10,
            received: 7,
            note: Some("a | b".into()),
        };
        let o = Outcome {
            results: vec![
                counted("hoop", "read", counts),
                unsupported("compio", "unix_recv", "no socket".into()),
            ],
            skipped: vec!["monoio: skipped: no binary".into()],
            failures: vec!["tokio: accept: boom".into()],
        };
        let t = table(&o);
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 4, "{t}");
        let cols = rows[0].matches('|').count();
        for r in &rows {
            assert_eq!(r.matches('|').count(), cols, "{r}");
        }
        assert_eq!(
            rows[2], "| hoop | read | 10 | 7 | 3 | bytes | a / b |",
            "{t}"
        );
        assert_eq!(
            rows[3], "| compio | unix_recv | - | - | - | datagrams | not supported: no socket |",
            "{t}"
        );
        assert!(
            t.ends_with("- monoio: skipped: no binary\n- failed: tokio: accept: boom\n"),
            "{t}"
        );
    }
}
