//! Operations, each defined once: its data, and what its completion means.
//!
//! An operation is a struct that owns everything the kernel will touch (buffer, path, sockaddr,
//! timespec) with stable addresses (heap memory), plus [`OpCode::complete`], which turns the raw
//! [`Completion`] into the typed output and takes ownership of the result. How a driver starts the
//! operation is implemented per driver (`sys::uring` builds an SQE; a readiness driver performs
//! the syscall), so the semantics live here once.
//!
//! `complete` also runs when nobody waits any more (the future was dropped): its output is then
//! dropped, which is how an accepted or opened fd gets closed and a buffer freed (invariant 5).

use crate::lifecycle::Completion;

pub mod fs;
pub mod net;
pub mod nop;
pub mod time;

pub use fs::*;
pub use net::*;
pub use nop::Nop;
pub use time::Timeout;

/// One operation's data and the meaning of its completion.
pub trait OpCode: 'static {
    /// What the operation's future resolves to.
    type Output;

    /// Takes ownership of the operation's data and result. Called exactly once, with the final
    /// CQE, whether or not a future still waits for the output.
    fn complete(self, c: Completion) -> Self::Output;
}

/// Type-erased data of an operation whose future is gone, kept until the final CQE.
pub(crate) trait Orphan {
    /// The final completion arrived: release everything the result owns.
    fn finish(self: Box<Self>, c: Completion);
}

impl<T: OpCode> Orphan for T {
    fn finish(self: Box<Self>, c: Completion) {
        drop((*self).complete(c));
    }
}
