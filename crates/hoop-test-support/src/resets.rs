//! Surviving resets: a test's client reconnects and retries an exchange that a reset ended.
//!
//! Under a fault plan with `econnreset`, a socket send or receive on either side may fail with
//! `ECONNRESET` as if the peer had reset the connection. The side that sees it does what a
//! server does with a real reset (it closes the connection), so the other side sees the
//! connection end: `ECONNRESET`, `EPIPE`, or an end of stream before the whole answer. A client
//! that a production peer would write reconnects and asks again; so do the tests' clients,
//! through [`retry`] (or [`retry_async`]): the exchange runs on a fresh connection each attempt,
//! a reset-like error ([`is_reset`]) is retried only while resets are being injected
//! ([`injected`]), at most [`MAX_RETRIES`] times, and every retry is counted and said on stderr
//! (`hoop faults: TEST retried N exchanges after resets: WHAT (HOOP_FAULTS=...)`, which
//! `.ci/run` totals). Without injected resets the first error fails the test: a real reset is a
//! bug there.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most times one exchange is retried after resets. At the suite's rate (2% of socket
/// operations) a retry is needed about once in fifty operations, so twenty in a row is a
/// bug (a server that resets every connection), not bad luck.
pub const MAX_RETRIES: u32 = 20;

static RETRIED: AtomicU64 = AtomicU64::new(0);

/// Whether this thread's fault plan injects resets (`econnreset`, not opted out): only then is
/// a reset-like error retried.
pub fn injected() -> bool {
    hoop::fault::injects("econnreset")
}

/// Whether `e` is what a client sees when its connection was reset or closed under it
/// ([`hoop::net::connection_lost`]: `ECONNRESET`, `EPIPE`, `ECONNABORTED`, `ENOTCONN`, or an
/// end of stream before the whole answer).
pub use hoop::net::connection_lost as is_reset;

/// How many exchanges this process retried after resets so far.
pub fn retried() -> u64 {
    RETRIED.load(Ordering::Relaxed)
}

/// An end of stream before the whole answer, as an error [`is_reset`] retries: for a client
/// that reads until it has what it asked for and finds the connection closed.
pub fn closed_early(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the peer closed the connection before {what}"),
    )
}

/// The decision after one failed attempt: retry (and count it), or fail the test.
fn after_failure(what: &str, attempt: u32, e: io::Error) {
    // A blocked socket call with a timeout fails with EINTR when any signal wakes its thread
    // (see `ReadRetry`): nothing happened, so the exchange goes again, injected faults or not.
    if attempt < MAX_RETRIES && e.kind() == io::ErrorKind::Interrupted {
        return;
    }
    if attempt < MAX_RETRIES && is_reset(&e) && injected() {
        RETRIED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let why = if !is_reset(&e) {
        "not a reset"
    } else if !injected() {
        "no resets are being injected, so a reset is a bug"
    } else {
        "retried too often"
    };
    panic!("{what}: {e} (attempt {}, {why})", attempt + 1);
}

/// Says on stderr how often an exchange was retried, in one write (the line is collected
/// from the log, and a line written in pieces interleaves with others).
fn say_retried(what: &str, retries: u32) {
    if retries == 0 {
        return;
    }
    use std::io::Write as _;
    let thread = std::thread::current();
    let line = format!(
        "hoop faults: {} retried {retries} exchanges after resets: {what} (HOOP_FAULTS={})\n",
        thread.name().unwrap_or("?"),
        hoop::fault::describe().unwrap_or_default()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Runs the exchange `attempt` (given the attempt's number, from 0), which makes its own
/// connection, until it succeeds; a reset-like error is retried while resets are being
/// injected (at most [`MAX_RETRIES`] times), and any other error fails the test with `what`.
/// The exchange must be one a client may repeat (a request whose effect is the same twice).
pub fn retry<T>(what: &str, mut attempt: impl FnMut(u32) -> io::Result<T>) -> T {
    let mut n = 0;
    loop {
        match attempt(n) {
            Ok(v) => {
                say_retried(what, n);
                return v;
            }
            Err(e) => after_failure(what, n, e),
        }
        n += 1;
    }
}

/// [`retry`] for an exchange made by a future (a client on a hoop runtime).
pub async fn retry_async<T, F>(what: &str, mut attempt: impl FnMut(u32) -> F) -> T
where
    F: Future<Output = io::Result<T>>,
{
    let mut n = 0;
    loop {
        match attempt(n).await {
            Ok(v) => {
                say_retried(what, n);
                return v;
            }
            Err(e) => after_failure(what, n, e),
        }
        n += 1;
    }
}

/// For the side of a test that does not retry (a server, a writer): `e` ended its connection,
/// which it drops and goes on without, as a server does after a reset. That is right only
/// for a reset while resets are being injected; anything else fails the test with `what`.
pub fn expect_reset(what: &str, e: &io::Error) {
    if !(is_reset(e) && injected()) {
        panic!("{what}: {e} (not an injected reset)");
    }
}

/// A long transfer (megabytes, thousands of operations: too long to start over after every
/// reset) that goes on over a new connection from where a reset cut it, its bytes checked in
/// order on each connection. [`Resumed::after`] takes the error that ended a connection;
/// dropped, it says how many connections were resumed, as [`retry`] says its retries.
pub struct Resumed {
    what: String,
    in_a_row: u32,
    total: u32,
}

impl Resumed {
    /// A transfer described by `what` (in the failure message and the line on stderr).
    pub fn new(what: &str) -> Resumed {
        Resumed {
            what: what.to_owned(),
            in_a_row: 0,
            total: 0,
        }
    }

    /// `e` ended a connection of the transfer after `progress` bytes (or items) on it: it goes
    /// on over a new one (counted) if `e` is a reset while resets are being injected and fewer
    /// than [`MAX_RETRIES`] connections in a row made no progress; otherwise the test fails.
    pub fn after(&mut self, e: io::Error, progress: usize) {
        if progress > 0 {
            self.in_a_row = 0;
        }
        after_failure(&self.what, self.in_a_row, e);
        self.in_a_row += 1;
        self.total += 1;
    }
}

impl Drop for Resumed {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            say_retried(&self.what, self.total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_like_errors_are_recognised() {
        for e in [
            io::Error::from_raw_os_error(libc::ECONNRESET),
            io::Error::from_raw_os_error(libc::EPIPE),
            io::Error::from_raw_os_error(libc::ECONNABORTED),
            closed_early("the reply"),
        ] {
            assert!(is_reset(&e), "{e}");
        }
        assert!(!is_reset(&io::Error::from_raw_os_error(libc::EINVAL)));
        assert!(!is_reset(&io::Error::new(
            io::ErrorKind::InvalidData,
            "bad bytes"
        )));
    }

    #[test]
    fn the_first_success_is_returned() {
        assert_eq!(retry("nothing", Ok::<_, io::Error>), 0);
    }

    #[test]
    fn a_reset_without_injected_resets_fails() {
        let _plan = hoop::fault::set_thread_plan("seed=1,rate=0,kinds=eintr").unwrap();
        let r = std::panic::catch_unwind(|| {
            retry("exchange", |_| -> io::Result<()> {
                Err(io::Error::from_raw_os_error(libc::ECONNRESET))
            })
        });
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("a reset is a bug"), "{msg}");
    }

    #[test]
    fn injected_resets_are_retried_and_counted_and_other_errors_fail() {
        let _plan = hoop::fault::set_thread_plan("seed=1,rate=0,kinds=econnreset").unwrap();
        if !injected() {
            eprintln!("SKIP: built without the fault-injection feature");
            return;
        }
        let before = retried();
        let got = retry("exchange", |n| {
            if n < 3 {
                Err(io::Error::from_raw_os_error(libc::ECONNRESET))
            } else {
                Ok(n)
            }
        });
        assert_eq!(got, 3);
        assert!(retried() >= before + 3);
        let r = std::panic::catch_unwind(|| {
            retry("exchange", |_| -> io::Result<()> {
                Err(io::Error::new(io::ErrorKind::InvalidData, "wrong bytes"))
            })
        });
        assert!(r.is_err(), "a wrong answer is never retried");
        let r = std::panic::catch_unwind(|| {
            retry("exchange", |_| -> io::Result<()> {
                Err(io::Error::from_raw_os_error(libc::ECONNRESET))
            })
        });
        assert!(r.is_err(), "retries are bounded");
        let _out = hoop::fault::opt_out_quietly(&["econnreset"]);
        assert!(!injected(), "an opt-out stops the retries");
    }
}
