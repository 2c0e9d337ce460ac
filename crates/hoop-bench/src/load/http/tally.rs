//! What an HTTP load generator's connection tasks count, and the run around them: the tasks
//! connect and warm up, the window opens, verified answers inside it count (in total, by
//! second, and in the latency histograms), errors count by kind, and the outcome is read
//! when the window closes. The static client and the arena profiles' client each check
//! answers their own way and count them here.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use hdrhistogram::Histogram;
use hoop::time::{sleep, Instant};

use crate::load::http::client::HttpOutcome;
use crate::measure::latency as stats;
use crate::measure::usage::thread_cpu;
use crate::measure::window::Window;

/// How often the coordinating task looks at the clock.
const TICK: Duration = Duration::from_millis(5);

/// One run's counters, shared by its connection tasks on one thread.
pub(crate) struct Tally {
    /// When verified answers count.
    pub window: Window,
    /// Tasks connected and warmed up, or given up.
    settled: Cell<usize>,
    /// Tasks still running.
    alive: Cell<usize>,
    /// Tasks connected when the window opened.
    connected: Cell<usize>,
    requests: Cell<u64>,
    body_bytes: Cell<u64>,
    errors: RefCell<BTreeMap<String, u64>>,
    first_error: RefCell<Option<String>>,
    hist: RefCell<Histogram<u64>>,
    /// When the window opened.
    start: Cell<Option<Instant>>,
    /// Verified answers by second of the window.
    per_second: RefCell<Vec<u64>>,
    hist_first_second: RefCell<Histogram<u64>>,
}

impl Tally {
    /// Nothing counted yet, the window not open.
    pub(crate) fn new() -> io::Result<Tally> {
        Ok(Tally {
            window: Window::new(),
            settled: Cell::new(0),
            alive: Cell::new(0),
            connected: Cell::new(0),
            requests: Cell::new(0),
            body_bytes: Cell::new(0),
            errors: RefCell::new(BTreeMap::new()),
            first_error: RefCell::new(None),
            hist: RefCell::new(stats::new_histogram()?),
            start: Cell::new(None),
            per_second: RefCell::new(Vec::new()),
            hist_first_second: RefCell::new(stats::new_histogram()?),
        })
    }

    /// Counts one verified answer of `body_bytes`, completed at `t1` after `latency_ns`.
    pub(crate) fn count(&self, body_bytes: u64, t1: Instant, latency_ns: u128) {
        self.requests.set(self.requests.get() + 1);
        self.body_bytes.set(self.body_bytes.get() + body_bytes);
        if let Some(start) = self.start.get() {
            let sec = t1.saturating_duration_since(start).as_secs() as usize;
            if let Some(n) = self.per_second.borrow_mut().get_mut(sec) {
                *n += 1;
            }
            if sec == 0 {
                stats::record_ns(&mut self.hist_first_second.borrow_mut(), latency_ns);
            }
        }
        stats::record_ns(&mut self.hist.borrow_mut(), latency_ns);
    }

    /// Counts an error of `kind`, described by `what` if it is the first (none once the
    /// window closed: a run cut short is not an error).
    pub(crate) fn error(&self, kind: &str, what: impl FnOnce() -> String) {
        if self.window.over() {
            return;
        }
        *self
            .errors
            .borrow_mut()
            .entry(kind.to_string())
            .or_insert(0) += 1;
        let mut first = self.first_error.borrow_mut();
        if first.is_none() {
            *first = Some(format!("{kind}: {}", what()));
        }
    }

    /// Marks a task settled (connected and warmed up, or given up) once: `settled` is the
    /// task's own flag.
    pub(crate) fn settle(&self, settled: &mut bool) {
        if !*settled {
            *settled = true;
            if !self.window.opened() {
                self.connected.set(self.connected.get() + 1);
            }
            self.settled.set(self.settled.get() + 1);
        }
    }

    /// A task's end: settled if it was not, and no longer running.
    pub(crate) fn finish(&self, settled: &mut bool) {
        self.settle(settled);
        self.alive.set(self.alive.get() - 1);
    }

    /// Starts `conns` tasks with `spawn(id)` (each ends with [`Tally::finish`]), waits up to
    /// `connect_phase` for them to settle, runs `on_start`, opens the window for `secs` and
    /// waits it out (or until every task ended). The outcome has no reconnects and no
    /// encodings: the caller adds its own.
    pub(crate) async fn run(
        &self,
        conns: usize,
        secs: Duration,
        connect_phase: Duration,
        on_start: impl FnOnce(),
        mut spawn: impl FnMut(usize),
    ) -> HttpOutcome {
        for id in 0..conns {
            self.alive.set(self.alive.get() + 1);
            spawn(id);
        }
        let connect_deadline = Instant::now() + connect_phase;
        while self.settled.get() < conns && Instant::now() < connect_deadline {
            sleep(TICK).await;
        }
        on_start();
        let cpu0 = thread_cpu();
        *self.per_second.borrow_mut() = vec![0; secs.as_secs_f64().ceil().max(1.0) as usize];
        let connected = self.connected.get();
        let deadline = self.window.open(secs);
        let start = deadline - secs;
        self.start.set(Some(start));
        self.window
            .wait_out(deadline, TICK * 20, || self.alive.get() > 0)
            .await;
        let cpu = thread_cpu().saturating_sub(cpu0);
        HttpOutcome {
            requests: self.requests.get(),
            body_bytes: self.body_bytes.get(),
            errors: self.errors.borrow().clone(),
            first_error: self.first_error.borrow().clone(),
            reconnects: 0,
            hist: self.hist.borrow().clone(),
            wall: start.elapsed(),
            cpu,
            connected,
            by_encoding: None,
            per_second: self.per_second.borrow().clone(),
            hist_first_second: self.hist_first_second.borrow().clone(),
        }
    }
}
