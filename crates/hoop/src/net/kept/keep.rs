//! The receive future that keeps what its dropped predecessors received ([`Keep`]), how it
//! starts its own operation ([`Start`]: the thread's runtime or shared rings), and peeks.

use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop_driver::{Op, SockAddr};

use super::{Keepable, Kept, Outcome, Parked, ParkedOp};

/// A peek (`MSG_PEEK`) on a socket with kept receives: what the next receive will be served
/// (a kept datagram, or an error) is copied into the peek's buffer and stays kept, so a peek
/// never shows a datagram behind one a dropped receive already took; while a parked receive is
/// in flight it waits for it. `Err(data)`: nothing is kept, the peek asks the socket itself.
/// A peek takes nothing, so it is cancel safe without parking.
pub(crate) async fn peek_kept<T: Keepable>(
    kept: &Kept,
    data: T,
    peer: impl Fn() -> Option<SockAddr>,
) -> Result<T::Output, T> {
    /// Passes the baton if the peek is dropped while it waits (see [`Kept::leave`]).
    struct Waiting<'a>(&'a Kept, bool);
    impl Drop for Waiting<'_> {
        fn drop(&mut self) {
            if self.1 {
                self.0.leave();
            }
        }
    }
    let mut waiting = Waiting(kept, false);
    let got = std::future::poll_fn(|cx| {
        let p = kept.poll_take(cx);
        waiting.1 = p.is_pending();
        p
    })
    .await;
    waiting.1 = false;
    match got {
        Some(Outcome::Received(bytes, from)) => {
            let copy = Outcome::Received(bytes.clone(), from);
            kept.put_back(Outcome::Received(bytes, from));
            Ok(data.serve(copy, false, &peer).0)
        }
        Some(Outcome::Failed(errno)) => {
            kept.put_back(Outcome::Failed(errno));
            Ok(data.serve(Outcome::Failed(errno), false, &peer).0)
        }
        Some(other) => {
            kept.put_back(other);
            Err(data)
        }
        None => Err(data),
    }
}

/// How a [`Keep`] starts its own operation and parks it: on the thread's runtime ([`Local`])
/// or on shared rings ([`Shared`]).
pub(crate) trait Start<T: Keepable> {
    /// The operation's future.
    type Fut: Future<Output = T::Output> + Unpin;
    fn start(&self, data: T) -> Self::Fut;
    fn in_flight(fut: &Self::Fut) -> bool;
    fn park(kept: &Kept, fut: Self::Fut);
}

/// Operations on the runtime of the current thread (`Op`).
pub(crate) struct Local;

impl<T: Keepable> Start<T> for Local {
    type Fut = Op<T>;
    fn start(&self, data: T) -> Op<T> {
        Op::new(data)
    }
    fn in_flight(fut: &Op<T>) -> bool {
        fut.is_in_flight()
    }
    fn park(kept: &Kept, fut: Op<T>) {
        kept.park(Box::new(ParkedOp(fut, false)));
    }
}

/// Operations on shared rings, holding the socket's fd until their completion.
pub(crate) struct Shared {
    pub(crate) rings: hoop_driver::shared::Rings,
    pub(crate) fd: std::sync::Arc<OwnedFd>,
}

type SharedFut<T> =
    hoop_driver::shared::SharedOp<hoop_driver::shared::Keep<T, std::sync::Arc<OwnedFd>>>;

impl<T: Keepable + Send> Start<T> for Shared {
    type Fut = SharedFut<T>;
    fn start(&self, data: T) -> SharedFut<T> {
        let op = hoop_driver::shared::Keep::new(data, self.fd.clone());
        self.rings.submit(hoop_driver::shared::Route::Plain, op)
    }
    fn in_flight(fut: &SharedFut<T>) -> bool {
        fut.is_in_flight()
    }
    fn park(kept: &Kept, fut: SharedFut<T>) {
        kept.park(Box::new(ParkedShared(fut, false)));
    }
}

struct ParkedShared<T: Keepable + Send>(SharedFut<T>, bool);

impl<T: Keepable + Send> Parked for ParkedShared<T> {
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let out = std::task::ready!(Pin::new(&mut self.0).poll(cx));
        self.1 = true;
        Poll::Ready(T::keep(out))
    }

    fn ended(&self) -> bool {
        self.1
    }
}

/// A receive on a socket that keeps what its dropped predecessors received (see the module
/// docs): serves a kept outcome, or waits for a parked operation, or runs its own operation,
/// which it parks if dropped while in flight.
pub(crate) struct Keep<K, T, S, P>
where
    K: std::ops::Deref<Target = Kept>,
    T: Keepable,
    S: Start<T>,
    P: Fn() -> Option<SockAddr>,
{
    kept: K,
    /// The operation, until it starts (or is served a kept outcome instead).
    data: Option<T>,
    op: Option<S::Fut>,
    start: S,
    stream: bool,
    peer: P,
    /// Whether this call is among the waiters of a parked operation.
    waiting: bool,
}

impl<K, T, S, P> Keep<K, T, S, P>
where
    K: std::ops::Deref<Target = Kept>,
    T: Keepable,
    S: Start<T>,
    P: Fn() -> Option<SockAddr>,
{
    /// A receive of `data` on the socket whose kept state is `kept`, started by `start`;
    /// `stream` for a stream socket's reads (bytes that do not fit stay kept), `peer` for a
    /// datagram's source when a kept one has none.
    pub(crate) fn new(kept: K, data: T, start: S, stream: bool, peer: P) -> Self {
        Keep {
            kept,
            data: Some(data),
            op: None,
            start,
            stream,
            peer,
            waiting: false,
        }
    }
}

// The operation's data is never pinned (its kernel-visible memory is on the heap, `UringOp`'s
// contract), and the operation futures are `Unpin`.
impl<K, T, S, P> Unpin for Keep<K, T, S, P>
where
    K: std::ops::Deref<Target = Kept>,
    T: Keepable,
    S: Start<T>,
    P: Fn() -> Option<SockAddr>,
{
}

impl<K, T, S, P> Future for Keep<K, T, S, P>
where
    K: std::ops::Deref<Target = Kept>,
    T: Keepable,
    S: Start<T>,
    P: Fn() -> Option<SockAddr>,
{
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self.get_mut();
        if this.op.is_none() {
            match this.kept.poll_take(cx) {
                Poll::Pending => {
                    this.waiting = true;
                    return Poll::Pending;
                }
                Poll::Ready(Some(got)) => {
                    this.waiting = false;
                    if let Some(data) = this.data.take() {
                        let (out, rest) = data.serve(got, this.stream, &this.peer);
                        if let Some(rest) = rest {
                            this.kept.put_back(rest);
                        }
                        return Poll::Ready(out);
                    }
                    // Polled after it completed (the data went with its output): keep the
                    // outcome for the next call.
                    this.kept.put_back(got);
                    return Poll::Pending;
                }
                Poll::Ready(None) => {
                    this.waiting = false;
                    match this.data.take() {
                        Some(data) => this.op = Some(this.start.start(data)),
                        None => return Poll::Pending,
                    }
                }
            }
        }
        match &mut this.op {
            Some(op) => Pin::new(op).poll(cx),
            None => Poll::Pending,
        }
    }
}

impl<K, T, S, P> Drop for Keep<K, T, S, P>
where
    K: std::ops::Deref<Target = Kept>,
    T: Keepable,
    S: Start<T>,
    P: Fn() -> Option<SockAddr>,
{
    fn drop(&mut self) {
        match self.op.take() {
            Some(op) if S::in_flight(&op) => S::park(&self.kept, op),
            _ if self.waiting => self.kept.leave(),
            _ => {}
        }
    }
}
