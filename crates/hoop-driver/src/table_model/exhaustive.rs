//! Every ordering of the events of a few operations, up to a bounded depth, run through the op
//! table against its model (`Model`), with the invariants checked after every step and a
//! shutdown (final CQEs, futures polled to their end) checked after every prefix.
//!
//! Why enumeration and not loom: the op table and the lifecycle state machine are plain data
//! owned by one thread (the per-thread driver keeps them in a `RefCell`, a shared ring behind
//! its mutex), so their concurrency is only the order in which events reach them: the kernel's
//! CQEs (final, `F_MORE`, or `-ECANCELED` after a cancel) against the future's polls and drop.
//! Every such order is one sequence of calls; enumerating the sequences checks them all, where
//! loom would only add thread interleavings that the table never sees. The mutex that makes a
//! shared ring's table one thread's at a time is checked by loom (`shared::model`).

use super::{Action, Model};

/// What one enumeration went through.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Event sequences run (each prefix once, each followed by a checked shutdown).
    pub(crate) sequences: u64,
    /// Steps checked (the events of every sequence, replayed from an empty table).
    pub(crate) steps: u64,
}

/// The events that may come next after `depth` steps, for operations `0..ops`: a submit of a
/// single-shot or a multishot operation, and per operation a final CQE, an `F_MORE` CQE, a
/// cancel's `-ECANCELED`, a poll and a drop. A CQE's result is its step number, so that the
/// model tells every CQE apart (its own result, items in order).
fn events(ops: usize, depth: usize) -> Vec<Action> {
    let res = depth as i32 + 1;
    let mut v = vec![
        Action::Submit { stream: false },
        Action::Submit { stream: true },
    ];
    for op in 0..ops {
        v.extend([
            Action::Cqe {
                op,
                res,
                more: false,
            },
            Action::Cqe {
                op,
                res,
                more: true,
            },
            Action::Cqe {
                op,
                res: -libc::ECANCELED,
                more: false,
            },
            Action::Poll { op },
            Action::Drop { op },
        ]);
    }
    v
}

/// Runs every sequence of at most `depth` events on at most `ops` operations in a table of
/// `cap` slots. A violation is returned with the shortest sequence that leads to one (the
/// search is run again at growing depths, so the report has no needless events).
pub(crate) fn explore(cap: usize, ops: usize, depth: usize) -> Result<Stats, String> {
    let mut stats = Stats::default();
    if visit(cap, ops, depth, &mut Vec::new(), &mut stats).is_ok() {
        return Ok(stats);
    }
    for shallower in 0..=depth {
        visit(cap, ops, shallower, &mut Vec::new(), &mut Stats::default())?;
    }
    Err("a violation that no sequence shows again (the table is not deterministic)".into())
}

fn visit(
    cap: usize,
    ops: usize,
    depth: usize,
    prefix: &mut Vec<Action>,
    stats: &mut Stats,
) -> Result<(), String> {
    let mut model = Model::new(cap);
    for a in prefix.iter() {
        stats.steps += 1;
        model
            .step(a.clone())
            .map_err(|e| format!("{e}\n  after the events {prefix:?}"))?;
    }
    let next: Vec<Action> = if prefix.len() < depth {
        events(ops, prefix.len())
            .into_iter()
            .filter(|a| {
                model.enabled(a)
                    && !(matches!(a, Action::Submit { .. }) && model.submitted() >= ops)
            })
            .collect()
    } else {
        Vec::new()
    };
    model
        .finish()
        .map_err(|e| format!("{e}\n  at the shutdown after the events {prefix:?}"))?;
    stats.sequences += 1;
    for a in next {
        prefix.push(a);
        visit(cap, ops, depth, prefix, stats)?;
        prefix.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two operations in two slots: every order of their events.
    #[test]
    fn every_order_of_two_operations() {
        let stats = explore(2, 2, DEPTH).unwrap_or_else(|e| panic!("{e}"));
        println!("model-check: op table, 2 slots, 2 operations, depth {DEPTH}: {stats:?}");
    }

    /// Two operations through one slot: the second reuses the first's slot (a new
    /// generation), so a CQE of the first reaching the second would show.
    #[test]
    fn every_order_through_one_reused_slot() {
        let stats = explore(1, 2, DEPTH + 1).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "model-check: op table, 1 slot, 2 operations, depth {}: {stats:?}",
            DEPTH + 1
        );
    }

    /// Three operations: every order of their first events (a submit each and up to three
    /// more; fewer under Miri).
    #[test]
    fn every_order_of_three_operations() {
        let stats = explore(3, 3, DEPTH_3).unwrap_or_else(|e| panic!("{e}"));
        println!("model-check: op table, 3 slots, 3 operations, depth {DEPTH_3}: {stats:?}");
    }

    /// Deep enough for two operations to interleave a submit, an item, a final CQE, a poll
    /// and a drop each, small enough for a debug build. Under Miri, which checks the table's
    /// memory rather than its orderings and runs some thousand times slower, every sequence
    /// of up to three events.
    const DEPTH: usize = if cfg!(miri) { 3 } else { 8 };

    /// The depth for three operations (a submit each and up to three more events).
    const DEPTH_3: usize = if cfg!(miri) { 3 } else { 6 };
}
