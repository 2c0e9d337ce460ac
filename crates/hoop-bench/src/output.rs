//! Where output goes: JSON lines on stdout with `--json` (human text on stderr then), human text
//! on stdout otherwise; and a progress bar on stderr (drawn only when stderr is a terminal).

use std::cell::Cell;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// Output routing and progress for one `hoop bench` command.
pub struct Out {
    json: bool,
    bar: ProgressBar,
    /// Planned seconds of work not yet done.
    left: Cell<f64>,
}

impl Out {
    /// `planned` is the total planned work in seconds (for the progress bar's "left").
    pub fn new(json: bool, planned: f64) -> Out {
        let bar = ProgressBar::with_draw_target(
            Some((planned.max(0.0) * 10.0) as u64),
            ProgressDrawTarget::stderr(),
        );
        if let Ok(style) =
            ProgressStyle::with_template("[{elapsed_precise}] {bar:30.cyan/blue} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(250));
        Out {
            json,
            bar,
            left: Cell::new(planned.max(0.0)),
        }
    }

    /// Human text: stdout, or stderr with `--json`.
    pub fn human(&self, text: &str) {
        self.bar.suspend(|| {
            if self.json {
                eprintln!("{text}");
            } else {
                println!("{text}");
            }
        });
    }

    /// Warns about a run that verified nothing (`verified` of `unit`, e.g. "request") or
    /// counted errors (with the first one): one wording for every side-by-side bench.
    pub fn warn_run(
        &self,
        what: &str,
        verified: u64,
        unit: &str,
        errors: u64,
        first_error: Option<&str>,
    ) {
        if verified == 0 {
            self.note(&format!("warning: {what}: no verified {unit}"));
        }
        if errors > 0 {
            self.note(&format!(
                "warning: {what}: {errors} error(s), first: {}",
                first_error.unwrap_or("?")
            ));
        }
    }

    /// A note that always goes to stderr (warnings, phase timings).
    pub fn note(&self, text: &str) {
        self.bar.suspend(|| eprintln!("{text}"));
    }

    /// One measurement as a JSON line on stdout (only with `--json`).
    pub(crate) fn measurement<T: Serialize>(&self, m: &T) {
        if !self.json {
            return;
        }
        match serde_json::to_string(m) {
            Ok(line) => self.bar.suspend(|| println!("{line}")),
            Err(e) => self.note(&format!("hoop bench: cannot serialize a result: {e}")),
        }
    }

    /// Says what runs now (planned to take `secs`).
    pub fn start(&self, what: &str, secs: f64) {
        let left = self.left.get().max(secs);
        self.bar.set_message(format!("{what} (~{left:.0}s left)"));
    }

    /// Marks `secs` of planned work as done.
    pub fn done(&self, secs: f64) {
        self.left.set((self.left.get() - secs).max(0.0));
        self.bar.inc((secs.max(0.0) * 10.0) as u64);
    }

    /// Runs `f` with a byte-count bar of `total` bytes on stderr (drawn only on a terminal) in
    /// place of the main bar, which is cleared meanwhile; `f` sets the bar's position. `f` must
    /// not print through this `Out` (the main bar is suspended while it runs).
    pub(crate) fn with_bytes_bar<R>(
        &self,
        total: u64,
        what: &str,
        f: impl FnOnce(&ProgressBar) -> R,
    ) -> R {
        self.bar.suspend(|| {
            let bytes = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} {bar:30.cyan/blue} {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            ) {
                bytes.set_style(style.progress_chars("=> "));
            }
            bytes.set_message(what.to_string());
            let r = f(&bytes);
            bytes.finish_and_clear();
            r
        })
    }

    /// Runs `f` with the bar cleared (for a child process that writes to the terminal).
    pub(crate) fn suspended<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
