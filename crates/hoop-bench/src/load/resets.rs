//! Resets the load generators survive: a client that finds its connection reset (or ended
//! before the whole reply) reconnects and goes on, as wrk does. A reset is counted as an error,
//! except while this process's fault plan injects resets (`HOOP_FAULTS` with `econnreset`,
//! only in builds with fault injection, the test suite's): then the server, which gets the same
//! plan, closes connections on purpose, and each such reconnect is counted apart
//! (`reconnects`), at most [`MAX_IN_A_ROW`] in a row on one connection without a verified
//! reply (more is a server that resets everything: errors again). Only verified replies are
//! ever counted as requests.

use std::io;

/// Resets in a row on one connection, with no verified reply between them, that count as
/// reconnects while resets are injected; past it they are errors.
pub(crate) const MAX_IN_A_ROW: u32 = 20;

/// Whether this process's fault plan injects resets.
pub(crate) fn injected() -> bool {
    hoop::fault::injects("econnreset")
}

/// Whether `e` is what a client sees when its connection was reset or closed under it
/// ([`hoop::net::connection_lost`]).
pub(crate) use hoop::net::connection_lost as is_reset;

/// One connection's resets in a row.
#[derive(Debug, Default)]
pub(crate) struct Streak(u32);

impl Streak {
    /// Whether a reset (or an early end of stream) on this connection is a reconnect rather
    /// than an error: resets are injected and the streak is under [`MAX_IN_A_ROW`].
    pub(crate) fn excuses(&mut self) -> bool {
        if self.0 < MAX_IN_A_ROW && injected() {
            self.0 += 1;
            return true;
        }
        false
    }

    /// Whether `e` is a reset this connection excuses ([`Streak::excuses`]).
    pub(crate) fn excuses_error(&mut self, e: &io::Error) -> bool {
        is_reset(e) && self.excuses()
    }

    /// A verified reply: the streak starts again.
    pub(crate) fn verified(&mut self) {
        self.0 = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_are_excused_only_while_injected_and_only_so_many_in_a_row() {
        let reset = io::Error::from_raw_os_error(libc::ECONNRESET);
        let wrong = io::Error::new(io::ErrorKind::InvalidData, "wrong bytes");
        assert!(is_reset(&reset));
        assert!(is_reset(&io::Error::from(io::ErrorKind::UnexpectedEof)));
        assert!(!is_reset(&wrong));
        let mut s = Streak::default();
        {
            let _plan = hoop::fault::set_thread_plan("seed=1,rate=0,kinds=eintr").unwrap();
            assert!(!s.excuses_error(&reset), "not injected: an error");
        }
        let _plan = hoop::fault::set_thread_plan("seed=1,rate=0,kinds=econnreset").unwrap();
        if !injected() {
            eprintln!("SKIP: built without the fault-injection feature");
            return;
        }
        assert!(!s.excuses_error(&wrong), "wrong bytes are never excused");
        for _ in 0..MAX_IN_A_ROW {
            assert!(s.excuses_error(&reset));
        }
        assert!(!s.excuses_error(&reset), "too many in a row");
        s.verified();
        assert!(s.excuses_error(&reset));
    }
}
