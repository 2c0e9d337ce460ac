//! One comparison, whatever the bench: targets x cells x rounds, the targets interleaved within
//! each round (and, with [`Order::Alternate`], reversed every other round so that no target
//! always runs first on a warm or a cold machine), every run's failure recorded while the matrix
//! goes on; then medians over rounds and ratios paired within a round.
//!
//! A ratio is taken pair by pair (target A's round r over target B's round r, in the same cell)
//! and the median of those ratios is reported, never the ratio of two medians: machine noise
//! that hits one round hits both sides of its pair.

use std::io;

use serde::Serialize;

use crate::measure::latency::median;
use crate::output::Out;

/// One measurement of a comparison: which target it measured, in which round.
pub trait Sample {
    /// The target's name (`hoop`, `tokio`, `nginx`, ...).
    fn target(&self) -> &str;
    /// The round, from 0.
    fn round(&self) -> u32;
}

impl<R: Sample> Sample for &R {
    fn target(&self) -> &str {
        (*self).target()
    }
    fn round(&self) -> u32 {
        (*self).round()
    }
}

/// A measurement that counts what it verified: what the runner warns about.
pub trait Verified: Sample + Serialize {
    /// Verified successes (requests, deliveries, reads).
    fn verified(&self) -> u64;
    /// Errors counted.
    fn errors(&self) -> u64;
    /// The first error, if any.
    fn first_error(&self) -> Option<&str>;
}

/// Implements [`Sample`] and [`Verified`] for a record with the fields every bench's record
/// has (`server`, `round`, `errors`, `first_error`), verifying `$verified`.
macro_rules! measured {
    ($record:ty, $verified:ident) => {
        impl $crate::compare::matrix::Sample for $record {
            fn target(&self) -> &str {
                &self.server
            }
            fn round(&self) -> u32 {
                self.round
            }
        }

        impl $crate::compare::matrix::Verified for $record {
            fn verified(&self) -> u64 {
                self.$verified
            }
            fn errors(&self) -> u64 {
                self.errors
            }
            fn first_error(&self) -> Option<&str> {
                self.first_error.as_deref()
            }
        }
    };
}
pub(crate) use measured;

/// The exit status of a single measurement: an error if it counted errors (with the first one
/// and what it verified all the same) or verified nothing (`none` says what that means).
pub fn single_status<R: Verified>(r: &R, none: &str) -> io::Result<()> {
    if r.errors() > 0 {
        return Err(io::Error::other(format!(
            "{} error(s) during the run (first: {}); {} verified request(s)",
            r.errors(),
            r.first_error().unwrap_or("?"),
            r.verified()
        )));
    }
    if r.verified() == 0 {
        return Err(io::Error::other(none.to_string()));
    }
    Ok(())
}

/// The order of the targets within a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The order given, every round.
    Same,
    /// The order given in even rounds, reversed in odd ones.
    Alternate,
}

/// The median over rounds of `f` for `target`, among the samples `in_cell` accepts.
pub fn med<R: Sample>(
    results: &[R],
    target: &str,
    in_cell: impl Fn(&R) -> bool,
    f: impl Fn(&R) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = results
        .iter()
        .filter(|r| r.target() == target && in_cell(r))
        .filter_map(f)
        .collect();
    median(&v)
}

/// `num`'s `f` over `base`'s `f`, one ratio per round both have in the cell (a base of 0 gives
/// none).
pub fn pair_ratios<R: Sample>(
    results: &[R],
    num: &str,
    base: &str,
    in_cell: impl Fn(&R) -> bool,
    f: impl Fn(&R) -> Option<f64>,
) -> Vec<f64> {
    results
        .iter()
        .filter(|r| r.target() == num && in_cell(r))
        .filter_map(|a| {
            let b = results
                .iter()
                .find(|r| r.target() == base && r.round() == a.round() && in_cell(r))?;
            let (x, y) = (f(a)?, f(b)?);
            (y > 0.0).then(|| x / y)
        })
        .collect()
}

/// The median of [`pair_ratios`].
pub fn pair_ratio<R: Sample>(
    results: &[R],
    num: &str,
    base: &str,
    in_cell: impl Fn(&R) -> bool,
    f: impl Fn(&R) -> Option<f64>,
) -> Option<f64> {
    median(&pair_ratios(results, num, base, in_cell, f))
}

/// What a matrix produced: the measurements, and one line per failed run.
#[derive(Debug)]
pub struct Outcome<R> {
    /// Every run that completed, in the order run.
    pub results: Vec<R>,
    /// `what: error` of every run that failed.
    pub failures: Vec<String>,
}

impl<R> Default for Outcome<R> {
    fn default() -> Self {
        Outcome {
            results: Vec::new(),
            failures: Vec::new(),
        }
    }
}

/// A comparison to run: targets x cells x rounds.
#[derive(Debug)]
pub struct Matrix<'a, C> {
    /// The targets, in the order of the first round.
    pub targets: &'a [String],
    /// The cells (configurations), one after another.
    pub cells: &'a [C],
    /// Rounds of every cell.
    pub rounds: u32,
    /// The targets' order from round to round.
    pub order: Order,
    /// Seconds a run is expected to take, for the progress bar.
    pub run_secs: f64,
    /// The unit of [`Verified::verified`] in warnings ("request", "delivery").
    pub unit: &'a str,
}

impl<C> Matrix<'_, C> {
    /// The targets of round `round`, in order.
    pub fn targets_of(&self, round: u32) -> Vec<&str> {
        let mut t: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        if self.order == Order::Alternate && round % 2 == 1 {
            t.reverse();
        }
        t
    }

    /// Runs every cell, round and target (cells outermost, targets innermost): `what` names a
    /// run in progress lines and warnings, `one` runs it. A failed run is noted and recorded;
    /// the matrix goes on.
    pub fn run<R: Verified>(
        &self,
        out: &Out,
        what: impl Fn(&str, &C, u32) -> String,
        mut one: impl FnMut(&str, &C, u32) -> io::Result<R>,
    ) -> Outcome<R> {
        let mut o = Outcome::default();
        for cell in self.cells {
            for round in 0..self.rounds {
                for target in self.targets_of(round) {
                    let what = what(target, cell, round);
                    out.start(&what, self.run_secs);
                    match one(target, cell, round) {
                        Ok(r) => {
                            out.measurement(&r);
                            out.warn_run(
                                &what,
                                r.verified(),
                                self.unit,
                                r.errors(),
                                r.first_error(),
                            );
                            o.results.push(r);
                        }
                        Err(e) => {
                            out.note(&format!("warning: {what}: {e}"));
                            o.failures.push(format!("{what}: {e}"));
                        }
                    }
                    out.done(self.run_secs);
                }
            }
        }
        o
    }
}

/// Samples for the unit tests of the comparisons and their reports.
#[cfg(test)]
pub(crate) mod fixture {
    use super::*;

    /// A sample of target `target` in round `round` of cell `cell`, measuring `v`.
    #[derive(Debug, Serialize)]
    pub(crate) struct R {
        pub target: &'static str,
        pub round: u32,
        pub cell: u32,
        pub v: f64,
    }

    impl Sample for R {
        fn target(&self) -> &str {
            self.target
        }
        fn round(&self) -> u32 {
            self.round
        }
    }

    impl Verified for R {
        fn verified(&self) -> u64 {
            self.v as u64
        }
        fn errors(&self) -> u64 {
            0
        }
        fn first_error(&self) -> Option<&str> {
            None
        }
    }

    /// An [`R`].
    pub(crate) fn r(target: &'static str, round: u32, cell: u32, v: f64) -> R {
        R {
            target,
            round,
            cell,
            v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{r, R};
    use super::*;

    #[test]
    fn ratios_pair_within_a_round_and_a_cell() {
        // Round 1 is a noisy round for both: the paired ratio stays 2 every round.
        let rs = [
            r("a", 0, 0, 200.0),
            r("b", 0, 0, 100.0),
            r("a", 1, 0, 20.0),
            r("b", 1, 0, 10.0),
            r("a", 0, 1, 1.0),
            r("b", 0, 1, 100.0),
        ];
        let in0 = |x: &R| x.cell == 0;
        assert_eq!(pair_ratios(&rs, "a", "b", in0, |x| Some(x.v)), [2.0, 2.0]);
        assert_eq!(pair_ratio(&rs, "a", "b", in0, |x| Some(x.v)), Some(2.0));
        // The ratio of the medians would be 110/55 = 2 here too, but not in general:
        assert_eq!(med(&rs, "a", in0, |x| Some(x.v)), Some(110.0));
        assert_eq!(
            pair_ratio(&rs, "a", "b", |x| x.cell == 1, |x| Some(x.v)),
            Some(0.01)
        );
    }

    #[test]
    fn a_missing_partner_or_a_zero_base_gives_no_ratio() {
        let rs = [r("a", 0, 0, 5.0), r("b", 1, 0, 5.0), r("a", 1, 0, 5.0)];
        assert_eq!(
            pair_ratios(&rs, "a", "b", |_| true, |x| Some(x.v)),
            [1.0],
            "round 0 has no b"
        );
        let zero = [r("a", 0, 0, 5.0), r("b", 0, 0, 0.0)];
        assert_eq!(pair_ratio(&zero, "a", "b", |_| true, |x| Some(x.v)), None);
        assert_eq!(med(&zero, "c", |_| true, |x| Some(x.v)), None);
    }

    #[test]
    fn alternate_order_reverses_odd_rounds() {
        let targets = ["a".to_string(), "b".to_string(), "c".to_string()];
        let mut m = Matrix {
            targets: &targets,
            cells: &[()],
            rounds: 2,
            order: Order::Alternate,
            run_secs: 1.0,
            unit: "request",
        };
        assert_eq!(m.targets_of(0), ["a", "b", "c"]);
        assert_eq!(m.targets_of(1), ["c", "b", "a"]);
        m.order = Order::Same;
        assert_eq!(m.targets_of(1), ["a", "b", "c"]);
    }

    #[test]
    fn the_runner_records_failures_and_goes_on() {
        let targets = ["a".to_string(), "b".to_string()];
        let m = Matrix {
            targets: &targets,
            cells: &[0u32, 1],
            rounds: 2,
            order: Order::Alternate,
            run_secs: 0.0,
            unit: "request",
        };
        let out = Out::new(true, 0.0);
        let mut order = Vec::new();
        let o = m.run(
            &out,
            |t, c, r| format!("{t} c{c} r{r}"),
            |t, &c, round| {
                order.push(format!("{t}{c}{round}"));
                if t == "b" && c == 1 {
                    return Err(io::Error::other("refused"));
                }
                Ok(R {
                    target: if t == "a" { "a" } else { "b" },
                    round,
                    cell: c,
                    v: 1.0,
                })
            },
        );
        out.finish();
        assert_eq!(
            order,
            ["a00", "b00", "b01", "a01", "a10", "b10", "b11", "a11"]
        );
        assert_eq!(o.results.len(), 6);
        assert_eq!(o.failures, ["b c1 r0: refused", "b c1 r1: refused"]);
    }
}
