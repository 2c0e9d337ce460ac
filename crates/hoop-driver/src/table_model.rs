//! A model test of the op table and the lifecycle state machine: random sequences of
//! submit / CQE / more-flag CQE / poll / drop on single-shot and multi-CQE operations, checked
//! against a model after every step: a slot is freed exactly once and only after its final
//! CQE, a dropped operation's data is finished exactly once (with that CQE), every CQE a
//! stream's future did not take reaches its orphan handler, a future gets its own result, and
//! a future that waits is woken by its next CQE. The proptest draws random sequences;
//! `exhaustive` runs every sequence up to a bounded depth.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Wake, Waker};

use crate::lifecycle::{Completion, Lifecycle, Stream};
use crate::lifecycle::{Orphan, StreamOrphan};
use crate::table::{Dropped, OpTable};

#[cfg(test)]
pub(crate) mod exhaustive;

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
    /// The future's waker: it notes the operation's id in the wake log.
    waker: Waker,
    /// The future's last poll found nothing: the next CQE must wake it.
    armed: bool,
}

/// Notes which operation's future was woken.
struct NoteWake {
    id: usize,
    woken: Arc<Mutex<Vec<usize>>>,
}

impl Wake for NoteWake {
    fn wake(self: Arc<Self>) {
        self.woken.lock().unwrap().push(self.id);
    }
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
    let mut model = Model::new(64);
    for a in actions {
        model.step(a)?;
    }
    Ok(())
}

/// The op table under test and the model it is checked against, one step at a time (the
/// proptest and the fuzz target feed it random actions, `exhaustive` every sequence).
pub(crate) struct Model {
    table: OpTable,
    log: Rc<RefCell<Log>>,
    ops: Vec<ModelOp>,
    want_finished: Vec<(usize, i32)>,
    want_items: Vec<(usize, i32)>,
    woken: Arc<Mutex<Vec<usize>>>,
    want_woken: Vec<usize>,
}

impl Model {
    /// A table of `cap` slots (a small one reuses slots, so a stale CQE would show).
    pub(crate) fn new(cap: usize) -> Model {
        Model {
            table: OpTable::new(cap, 0),
            log: Rc::new(RefCell::new(Log::default())),
            ops: Vec::new(),
            want_finished: Vec::new(),
            want_items: Vec::new(),
            woken: Arc::default(),
            want_woken: Vec::new(),
        }
    }

    /// Whether `a` can happen now: the kernel only completes operations it still owns, only
    /// a live future polls or is dropped, and only a multi-CQE operation gets `F_MORE`.
    #[cfg(test)]
    pub(crate) fn enabled(&self, a: &Action) -> bool {
        match *a {
            Action::Submit { .. } => self.table.slots.in_use() < self.table.slots.capacity(),
            Action::Cqe { op, more, .. } => self.ops.get(op).is_some_and(|m| {
                matches!(m.state, State::Pending | State::Dropped) && (!more || m.stream)
            }),
            Action::Poll { op } | Action::Drop { op } => self
                .ops
                .get(op)
                .is_some_and(|m| matches!(m.state, State::Pending | State::Done(_))),
        }
    }

    /// Operations submitted so far.
    #[cfg(test)]
    pub(crate) fn submitted(&self) -> usize {
        self.ops.len()
    }

    /// Applies `a` (an action that cannot happen now is skipped) and checks the invariants.
    pub(crate) fn step(&mut self, a: Action) -> Result<(), String> {
        let Model {
            table,
            log,
            ops,
            want_finished,
            want_items,
            woken,
            want_woken,
        } = self;
        match a {
            Action::Submit { stream } => {
                let state = if stream {
                    Lifecycle::Streaming(Stream::new(None))
                } else {
                    Lifecycle::Submitted
                };
                if let Some(user_data) = table.slots.insert(state) {
                    let waker = Waker::from(Arc::new(NoteWake {
                        id: ops.len(),
                        woken: woken.clone(),
                    }));
                    ops.push(ModelOp {
                        user_data,
                        stream,
                        state: State::Pending,
                        queued: Vec::new(),
                        waker,
                        armed: false,
                    });
                }
            }
            Action::Cqe { op, res, more } => {
                let Some(m) = ops.get_mut(op) else {
                    return Ok(());
                };
                // The kernel only sends CQEs for operations it still owns.
                if !matches!(m.state, State::Pending | State::Dropped) {
                    return Ok(());
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
                if m.state == State::Pending && std::mem::take(&mut m.armed) {
                    want_woken.push(op);
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
                // Wakers and orphans collected by the drain run after it, as the driver does.
                for w in table.wakeups.drain(..) {
                    w.wake();
                }
                for (data, c) in std::mem::take(&mut table.orphans) {
                    data.finish(c);
                }
            }
            Action::Poll { op } => {
                let Some(m) = ops.get_mut(op) else {
                    return Ok(());
                };
                if !matches!(m.state, State::Pending | State::Done(_)) {
                    return Ok(());
                }
                if m.stream {
                    match table.poll_item(m.user_data, &m.waker) {
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
                            check!(m.queued.is_empty(), "a queued item not given");
                            m.armed = true;
                        }
                    }
                } else {
                    match table.poll_slot(m.user_data, &m.waker) {
                        Poll::Ready(c) => {
                            check_eq!(State::Done(c.res), m.state, "its own result");
                            m.state = State::Freed;
                        }
                        Poll::Pending => {
                            check_eq!(m.state, State::Pending);
                            m.armed = true;
                        }
                    }
                }
            }
            Action::Drop { op } => {
                let Some(m) = ops.get_mut(op) else {
                    return Ok(());
                };
                if !matches!(m.state, State::Pending | State::Done(_)) {
                    return Ok(());
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
        self.check()
    }

    /// The invariants, after every step: a slot is in use exactly while its operation is not
    /// freed, every orphan handler got exactly the CQEs the model says, and no CQE was stale.
    fn check(&self) -> Result<(), String> {
        let live = self.ops.iter().filter(|m| m.state != State::Freed).count();
        check_eq!(
            self.table.slots.in_use(),
            live,
            "slots in use = operations not freed"
        );
        check_eq!(&self.log.borrow().finished, &self.want_finished);
        check_eq!(&self.log.borrow().items, &self.want_items);
        check_eq!(self.table.counters.stale_cqes, 0);
        check_eq!(
            *self.woken.lock().unwrap(),
            self.want_woken,
            "a future that waits is woken by its CQE, once"
        );
        Ok(())
    }

    /// Ends every operation as a shutdown would: each one the kernel still owns gets its final
    /// CQE (`-ECANCELED`), each live future is polled to its end; then no slot may be left in
    /// use and every dropped operation's data must have been finished.
    #[cfg(test)]
    pub(crate) fn finish(mut self) -> Result<(), String> {
        for op in 0..self.ops.len() {
            if self.enabled(&Action::Cqe {
                op,
                res: 0,
                more: false,
            }) {
                self.step(Action::Cqe {
                    op,
                    res: -libc::ECANCELED,
                    more: false,
                })?;
            }
            while self.enabled(&Action::Poll { op }) {
                self.step(Action::Poll { op })?;
            }
        }
        check_eq!(self.table.slots.in_use(), 0, "every slot freed at the end");
        Ok(())
    }
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
