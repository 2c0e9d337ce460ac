//! Splitting the poll-based state of a stream between its read and write halves, and merging
//! it back (see `net::split`).

use std::io;

use super::local::Local;
use super::PollIo;

/// Splitting the state of a stream into its read and write halves (`into_split`, `split`) and
/// merging it back (`reunite`, or the stream used whole again after a `split`).
impl PollIo<Local> {
    /// Moves the write direction's state (write-behind, its error, a shutdown in flight) into
    /// a new state and leaves the read direction's here.
    pub(crate) fn split_write(&mut self) -> PollIo<Local> {
        let mut w = PollIo::new(self.kind);
        w.owner = self.owner;
        w.home = self.home.clone();
        w.max_buf = self.max_buf;
        self.swap_write_state(&mut w);
        w
    }

    /// Takes back the write direction's state from `w` (made by [`split_write`]; this state's
    /// own write direction is empty). If both directions have operations in flight on
    /// different threads' runtimes, the write's are given up as a drop on another thread
    /// would (their buffer stays with them) and the next write reports it.
    ///
    /// [`split_write`]: Self::split_write
    pub(crate) fn merge_write(&mut self, mut w: PollIo<Local>) {
        let read_busy = self.read_op.is_some();
        let write_busy = w.w.write_op.is_some() || w.pushed.is_some() || w.shutdown.is_some();
        if write_busy && w.owner != self.owner {
            if read_busy {
                // The write's operations and pusher live on the other thread: they go home to
                // be dropped there, and the pusher sends nothing more (the reunited stream's
                // writes would interleave).
                if let Some(p) = &w.pushed {
                    p.0.give_up_from_anywhere();
                }
                let parts = (w.w.write_op.take(), w.shutdown.take(), w.pushed.take());
                super::send_home(w.home.as_ref(), parts);
                w.w.write_err_bytes = w.w.pending_bytes().max(1);
                w.w.write_buf = None;
                w.w.write_staging.clear();
                w.w.write_done = 0;
                w.w.write_err = Some(io::Error::other(
                    "a write of the other half was in flight on another thread when the halves \
                     were reunited; it was abandoned",
                ));
            } else {
                self.owner = w.owner;
                self.home = w.home.clone();
            }
        }
        self.swap_write_state(&mut w);
        // `w` now holds nothing in flight: dropping it touches no operation.
    }

    /// Swaps every field of the write direction with `w`'s.
    fn swap_write_state(&mut self, w: &mut PollIo<Local>) {
        std::mem::swap(&mut self.w, &mut w.w);
        std::mem::swap(&mut self.pushed, &mut w.pushed);
        std::mem::swap(&mut self.shutdown, &mut w.shutdown);
    }
}
