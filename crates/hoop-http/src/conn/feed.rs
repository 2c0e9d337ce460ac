//! A request body fed to the service as it arrives: from the connection's reads (the ring's
//! receive, or readiness reads), through the chunked decoder where the body is chunked, into
//! the body's bounded queue, and, once the service has answered without reading it all, read
//! and dropped within a bound; polled beside the service and the response writer by [`Side`].

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Instant;

use super::transport::Transport;
use bytes::Bytes;

use super::run::Reader;
use crate::deadline::Timer;
use crate::service::chunked::Decoder;
use crate::service::{BodyError, BodyErrorKind, BodySender};

/// Past its response, a body the service did not read is read and dropped up to this many
/// bytes to keep the connection; a longer one closes it.
const DRAIN_MAX_BYTES: u64 = 256 * 1024;

/// A streamed body goes to the service in chunks of about this size (what has arrived by
/// then), so that its per-frame work is paid per chunk, not per received buffer.
const CHUNK_BYTES: usize = 64 * 1024;

/// The interim response to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What is left of a streamed body.
pub(super) enum Left {
    /// Bytes, by `Content-Length`.
    Length(u64),
    /// The chunked decoder, and the data bytes so far.
    Chunked(Decoder, u64),
}

impl Left {
    fn done(&self) -> bool {
        match self {
            Left::Length(n) => *n == 0,
            Left::Chunked(d, _) => d.done(),
        }
    }
}

/// Reads a streamed body for the service.
pub(super) struct Feeder {
    tx: BodySender,
    left: Left,
    /// `100 Continue` is owed when the service first polls the body.
    expect_continue: bool,
}

impl Feeder {
    pub(super) fn new(tx: BodySender, left: Left, expect_continue: bool) -> Feeder {
        Feeder {
            tx,
            left,
            expect_continue,
        }
    }
}

/// How the feeding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fed {
    /// The body arrived with its head (no feeder): the input is as it was.
    Whole,
    /// Read to its end (what followed it is in the input).
    Read,
    /// Not read to its end (the service answered without asking for it after an
    /// `Expect: 100-continue`, or it was longer than the drain allows): the connection
    /// closes.
    Unread,
    /// The body was malformed or too large: the service's answer goes out, then the close.
    Failed,
    /// The connection failed or timed out: nothing more goes out on it.
    Broken,
}

impl Fed {
    pub(super) fn complete(self) -> bool {
        matches!(self, Fed::Whole | Fed::Read)
    }
}

/// Feeds `feeder`'s body from the connection's reads: each read is queued for the service as
/// it comes (what follows the body goes back to `input`). Once the service dropped the body,
/// or `answered` is set (its response is out) and it stopped reading, the rest is read and
/// dropped, up to [`DRAIN_MAX_BYTES`].
pub(super) async fn feed(
    feeder: Option<Feeder>,
    input: &mut Vec<u8>,
    reader: &mut Reader<'_>,
    (stream, timer, idle): (&Transport, &Timer, std::time::Duration),
    (max_body_bytes, answered): (u64, &Cell<bool>),
) -> Fed {
    let Some(mut f) = feeder else {
        return Fed::Whole;
    };
    let fail = |f: &Feeder, kind| {
        f.tx.finish(Err(BodyError::new(kind)));
        match kind {
            BodyErrorKind::Closed | BodyErrorKind::TimedOut => Fed::Broken,
            BodyErrorKind::Malformed | BodyErrorKind::TooLarge => Fed::Failed,
        }
    };
    let mut drained_bytes: Option<u64> = None;
    loop {
        if f.left.done() {
            f.tx.finish(Ok(()));
            return Fed::Read;
        }
        if f.expect_continue {
            let wanted = poll_fn(|cx| match answered.get() {
                true => Poll::Ready(false),
                false => f.tx.poll_wanted(cx),
            })
            .await;
            if !wanted {
                // Answered (or dropped) without asking: the client may never send it.
                f.tx.finish(Err(BodyError::new(BodyErrorKind::Closed)));
                return Fed::Unread;
            }
            timer.set(Instant::now() + idle);
            match timer.run(stream.write_all(CONTINUE.to_vec())).await {
                Some((Ok(()), _)) => {}
                _ => return fail(&f, BodyErrorKind::Closed),
            }
            f.expect_continue = false;
        }
        if drained_bytes.is_none() {
            let wanted = poll_fn(|cx| match answered.get() {
                true => Poll::Ready(f.tx.poll_room(cx) == Poll::Ready(true)),
                false => f.tx.poll_room(cx),
            })
            .await;
            if !wanted {
                f.tx.finish(Err(BodyError::new(BodyErrorKind::Closed)));
                drained_bytes = Some(0);
            }
        }
        let mut buf = Vec::with_capacity(2 * CHUNK_BYTES);
        timer.set(Instant::now() + idle);
        match timer.run(reader.read_into(&mut buf)).await {
            Some(Ok(n)) if n > 0 => {}
            Some(_) => return fail(&f, BodyErrorKind::Closed),
            None => return fail(&f, BodyErrorKind::TimedOut),
        }
        // What else has arrived goes in the same chunk (each read adds at most 64 KiB: the
        // capacity is never outgrown): one frame per 64 KiB, not per 4 KiB
        // ring buffer (an upload of 20 MB is 300 frames for the service, not 5,000).
        while buf.len() < CHUNK_BYTES {
            if reader.read_now(&mut buf).await.is_none() {
                break;
            }
        }
        let chunk = match &mut f.left {
            Left::Length(left) => {
                let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                input.extend_from_slice(&buf[take..]);
                buf.truncate(take);
                *left -= take as u64;
                buf
            }
            Left::Chunked(decoder, total) => {
                let mut data = Vec::with_capacity(buf.len());
                let Ok(took) = decoder.decode(&buf, &mut data) else {
                    return fail(&f, BodyErrorKind::Malformed);
                };
                input.extend_from_slice(&buf[took..]);
                *total += data.len() as u64;
                if *total > max_body_bytes {
                    return fail(&f, BodyErrorKind::TooLarge);
                }
                data
            }
        };
        match &mut drained_bytes {
            Some(d) => {
                *d += chunk.len() as u64;
                if *d > DRAIN_MAX_BYTES {
                    return Fed::Unread;
                }
            }
            None => f.tx.push(Bytes::from(chunk)),
        }
    }
}

/// The body's feeder, polled alongside whatever the exchange awaits.
pub(super) struct Side<'f, F: Future<Output = Fed>> {
    pub(super) fut: Pin<&'f mut F>,
    pub(super) done: Option<Fed>,
}

impl<F: Future<Output = Fed>> Side<'_, F> {
    /// Awaits `main`, polling the feeder too until it ends.
    pub(super) async fn alongside<T>(&mut self, main: impl Future<Output = T>) -> T {
        let mut main = pin!(main);
        poll_fn(|cx| {
            if self.done.is_none() {
                if let Poll::Ready(fed) = self.fut.as_mut().poll(cx) {
                    self.done = Some(fed);
                }
            }
            main.as_mut().poll(cx)
        })
        .await
    }

    /// After the response (`answered` set): lets the feeder end, the body read to its end or
    /// given up.
    pub(super) async fn finish(&mut self) -> Fed {
        if let Some(fed) = self.done {
            return fed;
        }
        let fed = self.fut.as_mut().await;
        self.done = Some(fed);
        fed
    }
}
