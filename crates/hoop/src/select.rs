//! How selecting works in hoop: [`select!`](crate::select!) and the fused types.
//!
//! [`hoop::select!`](crate::select!) is tokio's `select!`, implemented by hoop (it needs no
//! tokio): the same grammar (`biased;`, `<pattern> = <future>, if <precondition> =>
//! <handler>`, `else => ...`) and the same semantics. Its futures need not be fused nor
//! `Unpin`; a branch whose output does not match its pattern is disabled and the others go on,
//! so `Some(r) = set.join_next()` is safe on an empty [`JoinSet`](crate::task::JoinSet):
//!
//! ```
//! # hoop::Runtime::new().unwrap().block_on(async {
//! let mut set: hoop::task::JoinSet<u32> = hoop::task::JoinSet::new();
//! let got = hoop::select! {
//!     Some(r) = set.join_next() => r.ok(),
//!     else => None, // the set is empty: `join_next()` gave `None`, no branch is left
//! };
//! assert_eq!(got, None);
//! # });
//! ```
//!
//! **Other `select!`s.** `tokio::select!` works on hoop's futures too (it needs no tokio
//! runtime, only the `tokio` crate with its `macros` feature). `futures::select!` (a different
//! macro, with `complete =>` and `default =>`) wants [`FusedFuture`][FusedFuture] futures and
//! [`FusedStream`][FusedStream] streams; hoop's types implement them, so no `.fuse()` is needed:
//! [`Sleep`], [`WaitForCancellation`], [`WaitForCancellationOwned`] and [`JoinHandle`] are
//! terminated once they returned their output (a completed `Sleep` or `cancelled()` stays
//! terminated, as `.fuse()` would make it, until `Sleep::reset`); [`Incoming`],
//! [`IncomingDirect`] and [`RecvStream`] once their operation ended for good; [`Interval`] and
//! [`Signal`] never end. Futures of `async fn`s (`interval.tick()`, tokio's
//! `lines.next_line()`, `listener.accept()`) are not fused: with `futures::select!` they still
//! need `.fuse()`; `hoop::select!` needs nothing.
//!
//! [FusedFuture]: https://docs.rs/futures/0.3/futures/future/trait.FusedFuture.html
//! [FusedStream]: https://docs.rs/futures/0.3/futures/stream/trait.FusedStream.html
//!
//! ```
//! # hoop::Runtime::new().unwrap().block_on(async {
//! use futures::StreamExt; // for `next()` on a stream
//! let mut ticks = hoop::time::interval(std::time::Duration::from_millis(1));
//! let token = hoop::sync::CancellationToken::new();
//! token.cancel();
//! let mut cancelled = token.cancelled();
//! let mut n = 0;
//! loop {
//!     futures::select! {
//!         _ = ticks.next() => n += 1,
//!         // Completes once; terminated afterwards, so the loop goes on with the ticks.
//!         _ = cancelled => {}
//!     }
//!     if n == 2 {
//!         break;
//!     }
//! }
//! # });
//! ```
//!
//! **Mistakes `hoop::select!` names.** A branch without `=>`:
//!
//! ```compile_fail
//! # async fn f() {
//! hoop::select! {
//!     v = async { 1 } // hoop::select!: expected `=> <handler>` after the async expression
//! }
//! # }
//! ```
//!
//! A handler expression without the comma that ends it:
//!
//! ```compile_fail
//! # async fn f() {
//! hoop::select! {
//!     a = async { 1 } => a // hoop::select!: expected `,` after this handler
//!     b = async { 2 } => b,
//! }
//! # }
//! ```
//!
//! `else` anywhere but last, and a `select!` without branches:
//!
//! ```compile_fail
//! # async fn f() {
//! hoop::select! {
//!     else => 0, // hoop::select!: the `else` branch must be the last branch
//!     a = async { 1 } => a,
//! }
//! # }
//! ```
//!
//! ```compile_fail
//! # async fn f() {
//! hoop::select! {} // hoop::select!: expected at least one `<pattern> = ...` branch
//! # }
//! ```
//!
//! For comparison, the same macro with its mistakes fixed compiles:
//!
//! ```
//! # async fn f() -> i32 {
//! hoop::select! {
//!     a = async { 1 } => a,
//!     b = async { 2 } => b,
//!     else => 0,
//! }
//! # }
//! ```

use std::cell::Cell;
use std::hash::BuildHasher;

use futures::future::FusedFuture;
use futures::stream::FusedStream;

use crate::net::{Incoming, IncomingDirect, RecvStream};
use crate::runtime::JoinHandle;
use crate::signal::Signal;
use crate::sync::{WaitForCancellation, WaitForCancellationOwned};
use crate::time::{Interval, Sleep};

#[doc(hidden)]
/// Where an unbiased `select!` starts polling: a pseudo-random branch in `0..n`, from a
/// per-thread xorshift (cheap, not for anything but fairness).
pub fn select_start(n: u32) -> u32 {
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|state| {
        let mut x = state.get();
        if x == 0 {
            // Seeded once per thread from std's per-process random keys; never 0.
            x = std::collections::hash_map::RandomState::new().hash_one(0u8) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        ((x >> 32) % u64::from(n.max(1))) as u32
    })
}

impl FusedFuture for Sleep {
    /// Whether it completed and was not [`reset`](Sleep::reset) since.
    fn is_terminated(&self) -> bool {
        self.fired
    }
}

impl FusedFuture for WaitForCancellation<'_> {
    /// Whether it completed.
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl FusedFuture for WaitForCancellationOwned {
    /// Whether it completed.
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<T> FusedFuture for JoinHandle<T> {
    /// Whether it returned the task's output (it never completes again).
    fn is_terminated(&self) -> bool {
        self.returned()
    }
}

impl FusedStream for Incoming<'_> {
    /// Whether the stream ended for good (the runtime shut down, or it failed to re-arm).
    fn is_terminated(&self) -> bool {
        self.op.is_done()
    }
}

impl FusedStream for RecvStream<'_> {
    /// Whether the stream ended (end of stream or an error that ends it).
    fn is_terminated(&self) -> bool {
        self.op.is_done()
    }
}

impl futures::Stream for IncomingDirect<'_> {
    type Item = std::io::Result<crate::net::DirectTcpStream>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.get_mut().poll_next_conn(cx)
    }
}

impl FusedStream for IncomingDirect<'_> {
    /// Whether the stream ended for good.
    fn is_terminated(&self) -> bool {
        self.is_done()
    }
}

impl FusedStream for Interval {
    /// Never: an interval ticks forever.
    fn is_terminated(&self) -> bool {
        false
    }
}

impl FusedStream for Signal {
    /// Never: a listener's stream of arrivals does not end.
    fn is_terminated(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::select_start;

    #[test]
    fn start_is_in_range_and_varies() {
        let mut seen = [0u32; 3];
        for _ in 0..300 {
            seen[select_start(3) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
        assert_eq!(select_start(1), 0);
    }
}
