//! A model test of the op table and the lifecycle state machine: random sequences of
//! submit / CQE / more-flag CQE / poll / drop on single-shot and multi-CQE operations, checked
//! against a model after every step: a slot is freed exactly once and only after its final
//! CQE, a dropped operation's data is finished exactly once (with that CQE), every CQE a
//! stream's future did not take reaches its orphan handler, and a future gets its own result.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};

use crate::lifecycle::{Completion, Lifecycle, Stream};
use crate::lifecycle::{Orphan, StreamOrphan};
use crate::table::{Dropped, OpTable};

/// `IORING_CQE_F_MORE` (linux/io_uring.h).
const IORING_CQE_F_MORE: u32 = 1 << 1;

/// What the table handed to orphan handlers: (op id, res) per finished single-shot op, and per
/// stream item.
#[derive(Default)]
struct Log {
    finished: Vec<(usize, i32)>,
    items: Vec<(usize, i32)>,
}

struct Data {
    id: usize,
    log: Rc<RefCell<Log>>,
}

impl Orphan for Data {
    fn finish(self: Box<Self>, c: Completion) {
        self.log.borrow_mut().finished.push((self.id, c.res));
    }
}

impl StreamOrphan for Data {
    fn orphan_item(&mut self, c: Completion) {
        self.log.borrow_mut().items.push((self.id, c.res));
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Future alive, final CQE not yet.
    Pending,
    /// Future alive, final CQE stored with this res.
    Done(i32),
    /// Future dropped, final CQE not yet.
    Dropped,
    /// Slot freed.
    Freed,
}

struct ModelOp {
    user_data: u64,
    stream: bool,
    state: State,
    /// Stream CQEs delivered and not yet taken by the future.
    queued: Vec<i32>,
}

#[derive(Debug, Clone)]
pub(crate) enum Action {
    Submit { stream: bool },
    Cqe { op: usize, res: i32, more: bool },
    Poll { op: usize },
    Drop { op: usize },
}

/// Decodes fuzz input: 4 bytes per action.
pub(crate) fn decode(data: &[u8]) -> Vec<Action> {
    data.chunks_exact(4)
        .map(|b| {
            let op = usize::from(b[1] % 16);
            match b[0] % 11 {
                0 | 1 => Action::Submit {
                    stream: b[1] & 1 == 1,
                },
                2..=5 => Action::Cqe {
                    op,
                    res: i32::from(b[2] % 105) - 5,
                    more: b[3] & 1 == 1,
                },
                6..=8 => Action::Poll { op },
                _ => Action::Drop { op },
            }
        })
        .collect()
}

pub(crate) fn run(actions: Vec<Action>) -> Result<(), String> {
    let mut table = OpTable::new(64, 0);
    let log = Rc::new(RefCell::new(Log::default()));
    let mut ops: Vec<ModelOp> = Vec::new();
    let mut want_finished: Vec<(usize, i32)> = Vec::new();
    let mut want_items: Vec<(usize, i32)> = Vec::new();
    let waker = Waker::noop();
    for a in actions {
        match a {
            Action::Submit { stream } => {
                let state = if stream {
                    Lifecycle::Streaming(Stream::new(None))
                } else {
                    Lifecycle::Submitted
                };
                let Some(user_data) = table.slots.insert(state) else {
                    continue;
                };
                ops.push(ModelOp {
                    user_data,
                    stream,
                    state: State::Pending,
                    queued: Vec::new(),
                });
            }
            Action::Cqe { op, res, more } => {
                let Some(m) = ops.get_mut(op) else { continue };
                // The kernel only sends CQEs for operations it still owns.
                if !matches!(m.state, State::Pending | State::Dropped) {
                    continue;
                }
                let more = more && m.stream;
                let c = Completion {
                    res,
                    flags: if more { IORING_CQE_F_MORE } else { 0 },
                };
                if more {
                    table.item(m.user_data, c);
                } else {
                    table.complete(m.user_data, c);
                }
                match (m.state, m.stream, more) {
                    (State::Pending, false, _) => m.state = State::Done(res),
                    (State::Pending, true, true) => m.queued.push(res),
                    (State::Pending, true, false) => {
                        m.queued.push(res);
                        m.state = State::Done(res);
                    }
                    (State::Dropped, false, _) => {
                        want_finished.push((op, res));
                        m.state = State::Freed;
                    }
                    (State::Dropped, true, more) => {
                        want_items.push((op, res));
                        if !more {
                            m.state = State::Freed;
                        }
                    }
                    _ => {}
                }
                // Orphans collected by the drain are finished after it, as the driver does.
                for (data, c) in std::mem::take(&mut table.orphans) {
                    data.finish(c);
                }
            }
            Action::Poll { op } => {
                let Some(m) = ops.get_mut(op) else { continue };
                if !matches!(m.state, State::Pending | State::Done(_)) {
                    continue;
                }
                if m.stream {
                    match table.poll_item(m.user_data, waker) {
                        Poll::Ready((c, last)) => {
                            check!(!m.queued.is_empty(), "item from nowhere");
                            let first = m.queued.remove(0);
                            check_eq!(c.res, first, "items in order");
                            check_eq!(
                                last,
                                m.queued.is_empty() && matches!(m.state, State::Done(_))
                            );
                            if last {
                                m.state = State::Freed;
                            }
                        }
                        Poll::Pending => {
                            check!(m.queued.is_empty(), "a queued item not given")
                        }
                    }
                } else {
                    match table.poll_slot(m.user_data, waker) {
                        Poll::Ready(c) => {
                            check_eq!(State::Done(c.res), m.state, "its own result");
                            m.state = State::Freed;
                        }
                        Poll::Pending => check_eq!(m.state, State::Pending),
                    }
                }
            }
            Action::Drop { op } => {
                let Some(m) = ops.get_mut(op) else { continue };
                if !matches!(m.state, State::Pending | State::Done(_)) {
                    continue;
                }
                let data = Data {
                    id: op,
                    log: log.clone(),
                };
                if m.stream {
                    let cancel = table.drop_stream(m.user_data, Box::new(data));
                    // Queued items go to the orphan handler now.
                    for res in m.queued.drain(..) {
                        want_items.push((op, res));
                    }
                    if let State::Done(_) = m.state {
                        check!(!cancel, "an ended stream needs no cancel");
                        m.state = State::Freed;
                    } else {
                        check!(cancel, "an armed stream must be cancelled");
                        m.state = State::Dropped;
                    }
                } else {
                    match table.drop_slot(m.user_data, Box::new(data)) {
                        Dropped::Finished(data, c) => {
                            check_eq!(State::Done(c.res), m.state);
                            data.finish(c);
                            want_finished.push((op, c.res));
                            m.state = State::Freed;
                        }
                        Dropped::Cancel => {
                            check_eq!(m.state, State::Pending);
                            m.state = State::Dropped;
                        }
                        Dropped::Gone => check!(false, "slot gone"),
                    }
                }
            }
        }
        let live = ops.iter().filter(|m| m.state != State::Freed).count();
        check_eq!(
            table.slots.in_use(),
            live,
            "slots in use = operations not freed"
        );
        check_eq!(&log.borrow().finished, &want_finished);
        check_eq!(&log.borrow().items, &want_items);
        check_eq!(table.counters.stale_cqes, 0);
    }
    Ok(())
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            2 => any::<bool>().prop_map(|stream| Action::Submit { stream }),
            4 => (0..16usize, -5..100i32, any::<bool>())
                .prop_map(|(op, res, more)| Action::Cqe { op, res, more }),
            3 => (0..16usize).prop_map(|op| Action::Poll { op }),
            2 => (0..16usize).prop_map(|op| Action::Drop { op }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn op_table_matches_the_model(actions in proptest::collection::vec(action(), 1..120)) {
            run(actions).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn fuzz_decoding_runs_the_same_model() {
        let bytes: Vec<u8> = (0..4000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        run(decode(&bytes)).unwrap();
    }
}
