//! What a receive whose future was dropped leaves for the next call: cancel safety as tokio
//! documents it for `accept`, stream reads and datagram receives.
//!
//! A completion runtime cannot take back a receive it gave the kernel: a cancel races with the
//! completion, and what the kernel completed first is lost unless somebody keeps it. So a
//! receive future dropped while its operation is in flight does not cancel it: the operation
//! is *parked* on its socket, still in flight, and the next receive on that socket adopts it
//! (polls it before starting an operation of its own). What it brings (an accepted
//! connection, bytes, a datagram and its source, or an error) is served to that call as if the
//! call's own operation had received it, copied into the call's buffer; bytes of a stream that
//! do not fit stay for the call after. No call starts an operation while a parked one is in
//! flight, so a stream's bytes arrive in order, and adopting costs no system call (no cancel,
//! no new submission). Parked operations are cancelled only when the socket is dropped, when
//! nobody is left to receive.
//!
//! The poll-based `AsyncRead` of a stream serves what is kept here before its own next read
//! (its bytes read ahead first: they came before). The other way round holds only within each
//! kind: an `AsyncRead` read abandoned in flight keeps its bytes for the next `AsyncRead`
//! read, and an owned-buffer `read` started meanwhile does not wait for it (the two may then
//! interleave): on one stream, do not drop reads of both kinds in flight.
//!
//! Parked operations belong to the runtime of the thread that started them. A socket moved to
//! another thread with operations parked does not touch them there: calls on the new thread
//! start their own operations (the parked ones are cancelled when the socket is dropped on
//! their thread, or leaked, as the `AsyncRead` state's are, when it is dropped elsewhere).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;

use hoop_driver::op::MultishotCode;
use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, IoBuf, IoBufMut, MultiOp, Op, SockAddr};

/// What a receive brought for a call that no longer waited for it.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// An accepted connection and the peer's address (`None` from a multishot accept, which
    /// reports none: asked of the connection when served).
    Accepted(OwnedFd, Option<SockAddr>),
    /// Bytes of a stream, or one datagram (with its source when the receive asked for it).
    /// Empty bytes from a stream are its end.
    Received(Vec<u8>, Option<SockAddr>),
    /// The receive failed with this errno.
    Failed(i32),
}

/// The error of a kept outcome served to a call of another kind (a datagram socket's
/// accept, say): not reachable through hoop's types, whose sockets receive one kind.
fn mismatch() -> io::Error {
    io::Error::other("a result kept from a dropped call is not of this call's kind")
}

/// An error worth keeping for the next call, as its errno: `None` for what carries nothing
/// for a later call (a cancel, an interrupted or would-block receive, a deadline that passed).
fn kept_error(e: &io::Error) -> Option<Outcome> {
    match e.raw_os_error() {
        None | Some(libc::ECANCELED | libc::EINTR | libc::EAGAIN) => None,
        Some(errno) => Some(Outcome::Failed(errno)),
    }
}

/// The peer address of a connection (`getpeername(2)`).
fn peer_of(fd: &OwnedFd) -> io::Result<SockAddr> {
    use std::os::fd::AsRawFd;
    let mut addr = SockAddr::empty();
    let mut len = addr.len();
    // SAFETY: the kernel writes at most `len` bytes into the address storage, which `addr`
    // owns; the fd is open (borrowed from `fd`).
    let r = unsafe { libc::getpeername(fd.as_raw_fd(), addr.as_mut_ptr(), &mut len) };
    hoop_driver::error::cvt_libc(r)?;
    Ok(addr.with_len(len))
}

/// The bytes a receive delivered into `buf` (its length, by the read rule), copied out.
fn received<B: IoBuf>(buf: &B) -> Vec<u8> {
    // SAFETY: `IoBuf`'s contract: `stable_ptr()` is valid for `bytes_init()` initialized bytes,
    // and `buf` is borrowed (not written) for the copy.
    unsafe { std::slice::from_raw_parts(buf.stable_ptr(), buf.bytes_init()) }.to_vec()
}

/// Copies as much of `bytes` as fits into `buf` from its start and sets its length to that (the
/// read rule); returns the count.
fn fill<B: IoBufMut>(buf: &mut B, bytes: &[u8]) -> usize {
    let n = bytes.len().min(buf.bytes_total());
    // SAFETY: `stable_mut_ptr()` is valid for writes of `bytes_total() >= n` bytes (IoBufMut's
    // contract) and cannot overlap `bytes`, a Vec of our own; those `n` bytes are then
    // initialized, as `set_filled` requires.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.stable_mut_ptr(), n);
        buf.set_filled(n);
    }
    n
}

/// A receive whose result can be kept for a later call.
pub(crate) trait Keepable: op::OpCode + UringOp + EpollOp + Sized {
    /// The output of this operation, run for a future that was dropped, as kept (`None`: it
    /// carries nothing for a later call).
    fn keep(out: Self::Output) -> Option<Outcome>;

    /// The output of a call whose operation never started, served `got`; `stream`: bytes that
    /// do not fit the call's buffer come back (to be served next) rather than being dropped as
    /// a datagram's excess is. `peer` gives the source of a datagram received without one.
    fn serve(
        self,
        got: Outcome,
        stream: bool,
        peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>);
}

impl Keepable for op::Accept {
    fn keep(out: io::Result<(OwnedFd, SockAddr)>) -> Option<Outcome> {
        match out {
            Ok((fd, addr)) => Some(Outcome::Accepted(fd, Some(addr))),
            Err(e) => kept_error(&e),
        }
    }

    fn serve(
        self,
        got: Outcome,
        _stream: bool,
        _peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        match got {
            Outcome::Accepted(fd, addr) => match addr.map_or_else(|| peer_of(&fd), Ok) {
                Ok(addr) => (Ok((fd, addr)), None),
                Err(e) => (Err(e), None),
            },
            Outcome::Failed(errno) => (Err(io::Error::from_raw_os_error(errno)), None),
            Outcome::Received(..) => (Err(mismatch()), None),
        }
    }
}

/// Serves `got` into `buf`: the count and the source, and what did not fit of a stream.
fn serve_bytes<B: IoBufMut>(
    buf: &mut B,
    got: Outcome,
    stream: bool,
) -> (io::Result<(usize, Option<SockAddr>)>, Option<Outcome>) {
    match got {
        Outcome::Received(mut bytes, from) => {
            let n = fill(buf, &bytes);
            let rest = if stream && n < bytes.len() {
                bytes.drain(..n);
                Some(Outcome::Received(bytes, from))
            } else {
                None
            };
            (Ok((n, from)), rest)
        }
        Outcome::Failed(errno) => {
            fill(buf, &[]);
            (Err(io::Error::from_raw_os_error(errno)), None)
        }
        Outcome::Accepted(..) => {
            fill(buf, &[]);
            (Err(mismatch()), None)
        }
    }
}

impl<B: IoBufMut> Keepable for op::Recv<B> {
    fn keep((res, buf): (io::Result<usize>, B)) -> Option<Outcome> {
        match res {
            Ok(_) => Some(Outcome::Received(received(&buf), None)),
            Err(e) => kept_error(&e),
        }
    }

    fn serve(
        self,
        got: Outcome,
        stream: bool,
        _peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        let mut buf = self.into_buf();
        let (res, rest) = serve_bytes(&mut buf, got, stream);
        ((res.map(|(n, _)| n), buf), rest)
    }
}

impl<B: IoBufMut> Keepable for op::RecvMsg<B> {
    fn keep((res, buf): (io::Result<(usize, SockAddr)>, B)) -> Option<Outcome> {
        match res {
            Ok((_, from)) => Some(Outcome::Received(received(&buf), Some(from))),
            Err(e) => kept_error(&e),
        }
    }

    fn serve(
        self,
        got: Outcome,
        stream: bool,
        peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        let mut buf = self.into_buf();
        let (res, rest) = serve_bytes(&mut buf, got, stream);
        // A datagram kept from a `recv` (a connected socket's) came from the peer.
        let res = res.and_then(|(n, from)| match from.or_else(peer) {
            Some(from) => Ok((n, from)),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "a datagram kept from a dropped recv has no known source",
            )),
        });
        ((res, buf), rest)
    }
}

impl<T> Keepable for op::Deadline<T>
where
    T: Keepable,
    T::Output: op::TimedOut,
    op::Deadline<T>: UringOp + EpollOp,
{
    fn keep(out: T::Output) -> Option<Outcome> {
        // A deadline that passed is an error without an errno: nothing to keep.
        T::keep(out)
    }

    fn serve(
        self,
        got: Outcome,
        stream: bool,
        peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        self.into_inner().serve(got, stream, peer)
    }
}

/// A parked operation or multishot stream, its output type erased.
trait Parked {
    /// `Ready` with what the operation brought (`None`: nothing worth keeping): its result, or
    /// a stream's next item.
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>>;

    /// Whether it brings nothing more (an operation after its result, a stream after its
    /// end).
    fn ended(&self) -> bool;
}

struct ParkedOp<T: Keepable>(Op<T>, bool);

impl<T: Keepable> Parked for ParkedOp<T> {
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let out = std::task::ready!(Pin::new(&mut self.0).poll(cx));
        self.1 = true;
        Poll::Ready(T::keep(out))
    }

    fn ended(&self) -> bool {
        self.1
    }
}

/// A multishot stream dropped while armed: cancelled, it yields what the kernel delivered
/// before the cancel ran, each item kept as `keep` says.
struct ParkedStream<T: MultishotCode> {
    stream: MultiOp<T>,
    keep: fn(T::Item) -> Option<Outcome>,
}

impl<T: MultishotCode + UringOp + EpollOp> Parked for ParkedStream<T> {
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        match std::task::ready!(self.stream.poll_next(cx)) {
            Some(item) => Poll::Ready((self.keep)(item)),
            None => Poll::Ready(None),
        }
    }

    fn ended(&self) -> bool {
        self.stream.is_done()
    }
}

/// A multishot accept's connection, as kept.
pub(crate) fn keep_accepted(item: io::Result<OwnedFd>) -> Option<Outcome> {
    match item {
        Ok(fd) => Some(Outcome::Accepted(fd, None)),
        Err(e) => kept_error(&e),
    }
}

/// What a socket keeps for its next receive: operations parked in flight and outcomes they
/// brought that no call took yet.
struct Inner {
    /// The thread whose runtime runs the parked operations.
    owner: ThreadId,
    parked: Vec<Box<dyn Parked>>,
    ready: VecDeque<Outcome>,
    /// Calls waiting for a parked operation: woken when an outcome is taken or a parked
    /// operation added, so that each looks again (an operation wakes only its last poller).
    waiters: Vec<Waker>,
}

// SAFETY: in a thread-bound `Kept`, the parked operations (`Op`s holding the runtime's `Rc`s)
// are polled only on `owner` (`poll_take` checks the thread) and dropped only there (`clear`
// forgets them on any other thread); a `Kept::shared` holds only `Send` operations (`Shared`
// parks `SharedOp`s). Everything else in `Inner` is `Send`.
unsafe impl Send for Inner {}

impl Inner {
    fn is_empty(&self) -> bool {
        self.parked.is_empty() && self.ready.is_empty()
    }

    fn wake_waiters(&mut self) {
        for w in self.waiters.drain(..) {
            w.wake();
        }
    }
}

/// The kept state of one socket (see the module docs). Empty, it is a flag and an empty lock:
/// a receive checks the flag and takes no lock.
pub(crate) struct Kept {
    any: AtomicBool,
    /// Whether parked operations belong to one thread's runtime (`Op`s), or may be polled and
    /// dropped anywhere (the shared rings' `Send` operations).
    thread_bound: bool,
    inner: Mutex<Option<Box<Inner>>>,
}

impl Default for Kept {
    /// The kept state of a socket of the thread-per-core runtime.
    fn default() -> Kept {
        Kept {
            any: AtomicBool::new(false),
            thread_bound: true,
            inner: Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("any", &self.any.load(Ordering::Relaxed))
            .finish()
    }
}

impl Kept {
    /// The kept state of a socket on shared rings, whose operations are `Send`.
    pub(crate) fn shared() -> Kept {
        Kept {
            any: AtomicBool::new(false),
            thread_bound: false,
            inner: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Box<Inner>>> {
        // A panic while the lock was held (none of this code panics) leaves consistent data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ready(Some(_))`: an outcome for this call; `Ready(None)`: nothing kept here, the call
    /// starts its own operation; `Pending`: a parked operation is in flight and will bring
    /// this call's result (the call is woken then).
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        if !self.any.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        let mut guard = self.lock();
        let Some(inner) = guard.as_mut() else {
            self.any.store(false, Ordering::Release);
            return Poll::Ready(None);
        };
        let here = !self.thread_bound || std::thread::current().id() == inner.owner;
        if here {
            // Every parked operation that ended brings its outcome, in the order they were
            // parked.
            let mut i = 0;
            while i < inner.parked.len() {
                match inner.parked[i].poll_parked(cx) {
                    Poll::Ready(got) => {
                        inner.ready.extend(got);
                        if inner.parked[i].ended() {
                            inner.parked.remove(i);
                        }
                    }
                    Poll::Pending if inner.parked[i].ended() => {
                        inner.parked.remove(i);
                    }
                    Poll::Pending => i += 1,
                }
            }
        }
        let taken = inner.ready.pop_front();
        let result = match taken {
            Some(got) => {
                // Others waiting may find another outcome, or nothing parked left to wait for.
                inner.wake_waiters();
                Poll::Ready(Some(got))
            }
            None if here && !inner.parked.is_empty() => {
                if !inner.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    inner.waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
            // Nothing ready; parked operations of another thread's runtime are not this
            // call's to wait for.
            None => Poll::Ready(None),
        };
        if inner.is_empty() && inner.waiters.is_empty() {
            *guard = None;
            self.any.store(false, Ordering::Release);
        }
        result
    }

    /// Puts back what did not fit a call's buffer, to be served first.
    pub(crate) fn put_back(&self, rest: Outcome) {
        let mut guard = self.lock();
        let inner = guard.get_or_insert_with(|| new_inner(std::thread::current().id()));
        inner.ready.push_front(rest);
        self.any.store(true, Ordering::Release);
    }

    /// Parks `op` (in flight, its future dropped). Parked operations of another thread's
    /// runtime already here: `op` is dropped (cancelled) instead, as before hoop kept results,
    /// since one socket's parked operations must belong to one runtime.
    fn park(&self, op: Box<dyn Parked>) {
        let here = std::thread::current().id();
        let mut guard = self.lock();
        let inner = guard.get_or_insert_with(|| new_inner(here));
        if self.thread_bound && inner.owner != here {
            if !inner.parked.is_empty() {
                drop(guard);
                drop(op);
                return;
            }
            inner.owner = here;
        }
        inner.parked.push(op);
        // A call already waiting polls the new operation too.
        inner.wake_waiters();
        self.any.store(true, Ordering::Release);
    }

    /// Parks a multishot stream dropped while armed (see [`ParkedStream`]), after asking the
    /// kernel to end it; a stream not armed is dropped.
    pub(crate) fn park_stream<T: MultishotCode + UringOp + EpollOp>(
        &self,
        mut stream: MultiOp<T>,
        keep: fn(T::Item) -> Option<Outcome>,
    ) {
        stream.cancel();
        if !stream.is_done() {
            self.park(Box::new(ParkedStream { stream, keep }));
        }
    }

    /// Whether nothing is kept (no parked operation, no outcome waiting): one atomic load.
    #[cfg(feature = "tokio")]
    pub(crate) fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// A call that waited is gone: the others look again (the one a parked operation would
    /// have woken may have been this one).
    fn leave(&self) {
        if let Some(inner) = self.lock().as_mut() {
            inner.wake_waiters();
        }
    }
}

fn new_inner(owner: ThreadId) -> Box<Inner> {
    Box::new(Inner {
        owner,
        parked: Vec::new(),
        ready: VecDeque::new(),
        waiters: Vec::new(),
    })
}

impl Kept {
    /// Drops everything kept: parked operations are cancelled (on their runtime's thread; on
    /// another they are leaked, never freed under the kernel), kept connections closed. The
    /// socket calls it before queueing its close, so the cancels go ahead of the close.
    pub(crate) fn clear(&self) {
        let taken = self.lock().take();
        self.any.store(false, Ordering::Release);
        if let Some(mut inner) = taken {
            if self.thread_bound && std::thread::current().id() != inner.owner {
                // Not the runtime's thread: its `Rc`s must not be touched here (their memory
                // stays with the kernel's operations: leaked, never freed under it).
                std::mem::forget(std::mem::take(&mut inner.parked));
            }
            inner.wake_waiters();
        }
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.clear();
    }
}

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
