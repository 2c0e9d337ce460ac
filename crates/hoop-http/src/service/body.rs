//! The request body a service reads: empty, whole (it arrived with the head), or streamed
//! from the connection as it arrives, through a queue bounded in bytes.
//!
//! The body is `Send` (axum's `Router` wants one), while the connection that feeds it is a
//! task of one runtime thread: the two meet in a small queue under a mutex. Both ends
//! normally run in the same task, so the lock is never contended; it is what keeps a body
//! moved to another thread sound. The queue holds at most [`BODY_QUEUE_BYTES`] before the
//! connection stops reading, so a 20 MB upload is never held whole unless the service
//! gathers it itself.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// Bytes the connection queues for the service before it stops reading the body.
pub(crate) const BODY_QUEUE_BYTES: usize = 256 * 1024;

/// The body of a request handed to the service ([`Builder::fallback_service`](crate::Builder::fallback_service)):
/// an [`http_body::Body`] of [`Bytes`] frames, read from the connection as the service polls
/// it (an `Expect: 100-continue` is answered when it is first polled).
pub struct Body {
    inner: Inner,
}

enum Inner {
    Empty,
    Whole(Option<Bytes>),
    Streamed {
        queue: Arc<Mutex<Queue>>,
        /// Bytes still to come, where the length is known (`Content-Length`).
        left_bytes: Option<u64>,
    },
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.inner {
            Inner::Empty => "empty",
            Inner::Whole(_) => "whole",
            Inner::Streamed { .. } => "streamed",
        };
        f.debug_struct("Body").field("kind", &kind).finish()
    }
}

/// Why a request body ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyError {
    kind: BodyErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyErrorKind {
    /// The connection closed (or failed) before the body ended.
    Closed,
    /// A chunked body's framing is malformed.
    Malformed,
    /// The body grew past `Config::max_body_bytes`.
    TooLarge,
    /// No body bytes arrived within the idle timeout.
    TimedOut,
}

impl BodyError {
    pub(crate) fn new(kind: BodyErrorKind) -> BodyError {
        BodyError { kind }
    }

    /// Whether the body grew past the server's limit (`Config::max_body_bytes`).
    pub fn is_too_large(&self) -> bool {
        self.kind == BodyErrorKind::TooLarge
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            BodyErrorKind::Closed => "the connection closed before the request body ended",
            BodyErrorKind::Malformed => "the request body's chunked encoding is malformed",
            BodyErrorKind::TooLarge => "the request body is larger than the server's limit",
            BodyErrorKind::TimedOut => "the request body stopped arriving (idle timeout)",
        })
    }
}

impl std::error::Error for BodyError {}

/// What the body and the connection share.
#[derive(Default)]
pub(crate) struct Queue {
    chunks: VecDeque<Bytes>,
    queued_bytes: usize,
    /// How the body ended, once it did (`Ok`: all of it arrived).
    end: Option<Result<(), BodyError>>,
    /// The service polled the body (an `Expect: 100-continue` may be answered).
    polled: bool,
    /// The body was dropped: nothing more is queued.
    dropped: bool,
    reader: Option<Waker>,
    sender: Option<Waker>,
}

fn lock(q: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    // Neither side panics while holding the lock; a poisoned queue is still consistent.
    q.lock().unwrap_or_else(|e| e.into_inner())
}

impl Body {
    /// No body.
    pub fn empty() -> Body {
        Body {
            inner: Inner::Empty,
        }
    }

    /// A body that arrived whole.
    pub(crate) fn whole(bytes: Bytes) -> Body {
        if bytes.is_empty() {
            return Body::empty();
        }
        Body {
            inner: Inner::Whole(Some(bytes)),
        }
    }

    /// A body the connection streams in through the returned sender; `len_bytes`: its
    /// `Content-Length`, if it has one.
    pub(crate) fn streamed(len_bytes: Option<u64>) -> (Body, BodySender) {
        let queue = Arc::new(Mutex::new(Queue::default()));
        let body = Body {
            inner: Inner::Streamed {
                queue: queue.clone(),
                left_bytes: len_bytes,
            },
        };
        (body, BodySender { queue })
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::empty()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let (queue, left_bytes) = match &mut self.inner {
            Inner::Empty => return Poll::Ready(None),
            Inner::Whole(b) => return Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Inner::Streamed { queue, left_bytes } => (queue, left_bytes),
        };
        let mut q = lock(queue);
        let first_poll = !q.polled;
        q.polled = true;
        let (ready, wake) = if let Some(chunk) = q.chunks.pop_front() {
            q.queued_bytes -= chunk.len();
            if let Some(left) = left_bytes {
                *left = left.saturating_sub(chunk.len() as u64);
            }
            (Poll::Ready(Some(Ok(Frame::data(chunk)))), q.sender.take())
        } else {
            match q.end {
                Some(Ok(())) => (Poll::Ready(None), None),
                Some(Err(e)) => {
                    // Said once; the body then ends.
                    q.end = Some(Ok(()));
                    (Poll::Ready(Some(Err(e))), None)
                }
                None => {
                    match &mut q.reader {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        w => *w = Some(cx.waker().clone()),
                    }
                    // The connection waits for the first poll before a 100 Continue.
                    let wake = if first_poll { q.sender.take() } else { None };
                    (Poll::Pending, wake)
                }
            }
        };
        drop(q);
        if let Some(w) = wake {
            w.wake();
        }
        ready
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Empty => true,
            Inner::Whole(b) => b.is_none(),
            Inner::Streamed { left_bytes, .. } => *left_bytes == Some(0),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Empty => SizeHint::with_exact(0),
            Inner::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::Streamed {
                left_bytes: Some(n),
                ..
            } => SizeHint::with_exact(*n),
            Inner::Streamed { .. } => SizeHint::default(),
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Inner::Streamed { queue, .. } = &self.inner {
            let mut q = lock(queue);
            q.dropped = true;
            q.chunks.clear();
            q.queued_bytes = 0;
            let w = q.sender.take();
            drop(q);
            if let Some(w) = w {
                w.wake();
            }
        }
    }
}

/// The connection's end of a streamed [`Body`].
pub(crate) struct BodySender {
    queue: Arc<Mutex<Queue>>,
}

impl BodySender {
    /// Ready once the queue has room (true), or the body was dropped (false).
    pub(crate) fn poll_room(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut q = lock(&self.queue);
        if q.dropped {
            return Poll::Ready(false);
        }
        if q.queued_bytes < BODY_QUEUE_BYTES {
            return Poll::Ready(true);
        }
        q.sender = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Ready once the service polled the body (true), or dropped it (false).
    pub(crate) fn poll_wanted(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut q = lock(&self.queue);
        if q.dropped {
            return Poll::Ready(false);
        }
        if q.polled {
            return Poll::Ready(true);
        }
        q.sender = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Queues `chunk` (dropped if the body was).
    pub(crate) fn push(&self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        let mut q = lock(&self.queue);
        if q.dropped {
            return;
        }
        q.queued_bytes += chunk.len();
        q.chunks.push_back(chunk);
        let w = q.reader.take();
        drop(q);
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Ends the body: whole (`Ok`), or with an error the service reads after what was queued.
    pub(crate) fn finish(&self, end: Result<(), BodyError>) {
        let mut q = lock(&self.queue);
        if q.end.is_none() {
            q.end = Some(end);
        }
        let w = q.reader.take();
        drop(q);
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl Drop for BodySender {
    /// A sender dropped before it finished (the exchange was cut off) ends the body with
    /// `Closed`, so a service still reading it is not left waiting.
    fn drop(&mut self) {
        self.finish(Err(BodyError::new(BodyErrorKind::Closed)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use std::task::Waker;

    fn poll(body: &mut Body) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(body).poll_frame(&mut cx)
    }

    fn data(p: Poll<Option<Result<Frame<Bytes>, BodyError>>>) -> Option<Bytes> {
        match p {
            Poll::Ready(Some(Ok(f))) => f.into_data().ok(),
            _ => None,
        }
    }

    #[test]
    fn a_streamed_body_yields_what_was_queued_then_its_end() {
        let (mut body, tx) = Body::streamed(Some(5));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(tx.poll_wanted(&mut cx), Poll::Pending, "not polled yet");
        assert!(poll(&mut body).is_pending());
        assert_eq!(tx.poll_wanted(&mut cx), Poll::Ready(true));
        tx.push(Bytes::from_static(b"ab"));
        tx.push(Bytes::from_static(b"cde"));
        assert_eq!(body.size_hint().exact(), Some(5));
        assert_eq!(data(poll(&mut body)).as_deref(), Some(&b"ab"[..]));
        assert_eq!(body.size_hint().exact(), Some(3));
        assert_eq!(data(poll(&mut body)).as_deref(), Some(&b"cde"[..]));
        assert!(body.is_end_stream());
        tx.finish(Ok(()));
        assert!(matches!(poll(&mut body), Poll::Ready(None)));
    }

    #[test]
    fn the_queue_is_bounded_and_an_error_is_said_once() {
        let (mut body, tx) = Body::streamed(None);
        let mut cx = Context::from_waker(Waker::noop());
        tx.push(Bytes::from(vec![0u8; BODY_QUEUE_BYTES]));
        assert_eq!(tx.poll_room(&mut cx), Poll::Pending, "full");
        assert!(data(poll(&mut body)).is_some());
        assert_eq!(tx.poll_room(&mut cx), Poll::Ready(true));
        tx.finish(Err(BodyError::new(BodyErrorKind::Malformed)));
        assert!(matches!(poll(&mut body), Poll::Ready(Some(Err(_)))));
        assert!(matches!(poll(&mut body), Poll::Ready(None)));
    }

    #[test]
    fn a_dropped_body_stops_the_sender_and_a_dropped_sender_ends_the_body() {
        let (body, tx) = Body::streamed(Some(10));
        drop(body);
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(tx.poll_room(&mut cx), Poll::Ready(false));
        let (mut body, tx) = Body::streamed(Some(10));
        drop(tx);
        assert!(
            matches!(poll(&mut body), Poll::Ready(Some(Err(e))) if e.kind == BodyErrorKind::Closed)
        );
    }
}
