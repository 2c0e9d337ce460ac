//! A request no file answers, answered by the fallback service: the request made from its
//! head, its body fed to the service as it arrives (while the service runs, and while its
//! response goes out: both ways stream), the response written behind the others of the
//! batch (pipelined answers leave together), and the connection kept when the body was read
//! to its end.
//!
//! One task does it all: the service's future, the body's feeder and the response writer
//! are polled together by `feed::Side`, so nothing is spawned per request and a body that arrived
//! with its head (the common case) needs no feeder at all.

use std::cell::Cell;
use std::future::poll_fn;
use std::io::Write as _;
use std::ops::Range;
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use hoop::IoBuf;
use http::header;
use http_body::Body as _;

use super::feed::{feed, Fed, Feeder, Left, Side};
use super::run::Reader;
use super::Conn;
use crate::access_log::RequestLine;
use crate::parse::Request;
use crate::response::write_status;
use crate::service::chunked::Decoder;
use crate::service::request::{self, Framing};
use crate::service::{catch, Body, CatchUnwind, ResponseBody};
use crate::status::Status;

/// How the exchange left the connection.
pub(super) enum Outcome {
    /// Answered, the body read to its end: the next request starts at this index of the
    /// input.
    Keep(usize),
    /// Answered; close (`unread`: request bytes may be unread, linger).
    Close { next: usize, unread: bool },
    /// The connection failed.
    Failed,
}

impl Conn<'_> {
    /// Answers the request whose head is `input[head]` through the service: its body is taken
    /// from the input after the head, then read through `reader`.
    pub(super) async fn exchange(
        &mut self,
        req: &Request,
        input: &mut Vec<u8>,
        head: Range<usize>,
        reader: &mut Reader<'_>,
    ) -> Outcome {
        let built = match request::build(&input[head.clone()]) {
            Ok(h) => h,
            Err(status) => return self.refuse(req, status, head.end),
        };
        let keep = req.keep_alive && !self.sh.stopping.get();
        let head_only = built.request.method() == http::Method::HEAD;
        let http10 = built.request.version() == http::Version::HTTP_10;
        let method = built.request.method().clone();
        let mut next = head.end;
        let (body, feeder) = match built.framing {
            Framing::Empty => (Body::empty(), None),
            Framing::Length(n) if n > self.sh.cfg.max_body_bytes => {
                return self.refuse(req, Status::PayloadTooLarge, next);
            }
            Framing::Length(n) if (input.len() - next) as u64 >= n => {
                let end = next + n as usize;
                let bytes = Bytes::copy_from_slice(&input[next..end]);
                next = end;
                (Body::whole(bytes), None)
            }
            Framing::Length(n) => {
                let (body, tx) = Body::streamed(Some(n));
                let arrived = input.len() - next;
                tx.push(Bytes::copy_from_slice(&input[next..]));
                input.clear();
                next = 0;
                let left = Left::Length(n - arrived as u64);
                (
                    body,
                    Some(Feeder::new(tx, left, built.expect_continue && arrived == 0)),
                )
            }
            Framing::Chunked => {
                let mut decoder = Decoder::default();
                let mut data = Vec::new();
                let Ok(took) = decoder.decode(&input[next..], &mut data) else {
                    return self.refuse(req, Status::BadRequest, next);
                };
                if data.len() as u64 > self.sh.cfg.max_body_bytes {
                    return self.refuse(req, Status::PayloadTooLarge, next);
                }
                if decoder.done() {
                    next += took;
                    (Body::whole(Bytes::from(data)), None)
                } else {
                    let arrived = input.len() - next;
                    let (body, tx) = Body::streamed(None);
                    let total = data.len() as u64;
                    tx.push(Bytes::from(data));
                    input.clear();
                    next = 0;
                    let left = Left::Chunked(decoder, total);
                    (
                        body,
                        Some(Feeder::new(tx, left, built.expect_continue && arrived == 0)),
                    )
                }
            }
        };
        let request = built.request.map(|()| body);

        let (stream, timer, sh) = (self.stream, self.timer, self.sh);
        let max_body_bytes = sh.cfg.max_body_bytes;
        let idle = sh.cfg.idle_timeout;
        let fed = feeder.is_some();
        let answered = Cell::new(false);
        let mut side = Side {
            fut: pin!(feed(
                feeder,
                input,
                reader,
                (stream, timer, idle),
                (max_body_bytes, &answered)
            )),
            done: if fed { None } else { Some(Fed::Whole) },
        };

        // The service: ready, then called; a panic or an error is a 500.
        let service = sh.service.as_ref();
        let called = match service {
            Some(svc) => {
                let ready = side
                    .alongside(poll_fn(|cx| {
                        match catch(|| svc.borrow_mut().poll_ready(cx)) {
                            Ok(Poll::Ready(Ok(()))) => Poll::Ready(true),
                            Ok(Poll::Pending) => Poll::Pending,
                            _ => Poll::Ready(false),
                        }
                    }))
                    .await;
                match ready.then(|| catch(|| svc.borrow_mut().call(request))) {
                    Some(Ok(fut)) => match side.alongside(CatchUnwind(fut)).await {
                        Ok(Ok(response)) => Some(response),
                        _ => None,
                    },
                    _ => None,
                }
            }
            None => None,
        };
        let Some(response) = called else {
            // The body may still be arriving: the 500 closes unless it was all read.
            let keep = keep && side.done.is_some_and(|f| f.complete());
            let date = self.sh.date.borrow_mut().now().to_string();
            let head = self.head(Status::InternalServerError, &date, keep);
            write_status(&mut self.out, head, head_only);
            self.log_service(req, method.as_str(), 500, 0);
            return match (keep, side.done) {
                (true, _) => Outcome::Keep(next),
                (false, Some(Fed::Broken)) => Outcome::Failed,
                (false, _) => Outcome::Close { next, unread: true },
            };
        };

        let written = {
            let write = self.write_response(response, keep, head_only, http10);
            side.alongside(write).await
        };
        let Some((status, body_bytes, keep)) = written else {
            return Outcome::Failed;
        };
        self.log_service(req, method.as_str(), status, body_bytes);
        // The body's end: read already, read now if the service left little of it, else close.
        answered.set(true);
        let fed = side.finish().await;
        match (fed, keep) {
            (Fed::Whole | Fed::Read, true) => Outcome::Keep(next),
            (Fed::Whole | Fed::Read, false) => Outcome::Close {
                next,
                unread: false,
            },
            // The response still goes out (a body that was malformed or too large is
            // answered by the service); the close lingers for the client to read it.
            (Fed::Failed | Fed::Unread, _) => Outcome::Close { next, unread: true },
            (Fed::Broken, _) => Outcome::Failed,
        }
    }

    /// Answers `status` without calling the service, and closes.
    fn refuse(&mut self, req: &Request, status: Status, next: usize) -> Outcome {
        let date = self.sh.date.borrow_mut().now().to_string();
        let head = self.head(status, &date, false);
        write_status(&mut self.out, head, false);
        self.log(req, status);
        Outcome::Close { next, unread: true }
    }

    /// Writes the service's response into `out` (sent with the batch, or as it grows):
    /// its head, then its body with a `Content-Length` where the length is known, chunked
    /// otherwise (close-delimited to an HTTP/1.0 client). Returns the status, the body bytes
    /// and whether the connection stays open; `None` if it failed (a body that errs or
    /// panics midway cannot be finished: the connection closes).
    async fn write_response(
        &mut self,
        response: http::Response<ResponseBody>,
        keep: bool,
        head_only: bool,
        http10: bool,
    ) -> Option<(u16, u64, bool)> {
        let (parts, mut body) = response.into_parts();
        let code = parts.status.as_u16();
        let bodiless = head_only || code < 200 || code == 204 || code == 304;
        let stated = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let length = body.size_hint().exact().or(stated);
        let closes = parts
            .headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        // An HTTP/2 stream frames the body itself: one of unknown length ends with the stream.
        let framed = self.stream.frames_bodies();
        let chunked = !bodiless && length.is_none() && !http10 && !framed;
        let keep = keep && !closes && (bodiless || length.is_some() || chunked);

        let out = &mut self.out;
        out.extend_from_slice(b"HTTP/1.1 ");
        // A status code is three digits (http's `StatusCode` holds 100-999).
        out.extend_from_slice(parts.status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(parts.status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\n");
        if !parts.headers.contains_key(header::SERVER) {
            out.extend_from_slice(b"Server: hoop\r\n");
        }
        if !parts.headers.contains_key(header::DATE) {
            out.extend_from_slice(b"Date: ");
            out.extend_from_slice(self.sh.date.borrow_mut().now().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(self.sh.extras.always());
        for (name, value) in &parts.headers {
            if hop_by_hop(name) {
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        match length {
            Some(n) if code >= 200 && code != 204 => {
                out.extend_from_slice(b"Content-Length: ");
                push_decimal(out, n);
                out.extend_from_slice(b"\r\n");
            }
            _ if chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            _ => {}
        }
        if !keep {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if bodiless {
            return Some((code, 0, keep));
        }

        let mut sent_bytes: u64 = 0;
        loop {
            let frame = poll_fn(|cx| match catch(|| Pin::new(&mut body).poll_frame(cx)) {
                Ok(p) => p.map(Ok),
                Err(panicked) => Poll::Ready(Err(panicked)),
            })
            .await;
            let data = match frame {
                Ok(None) => break,
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => data,
                    // Trailers are not sent (a trailer section needs the client's `TE`).
                    Err(_) => continue,
                },
                Ok(Some(Err(_))) | Err(_) => return None,
            };
            if data.is_empty() {
                continue;
            }
            sent_bytes += data.len() as u64;
            if length.is_some_and(|n| sent_bytes > n) {
                // More than the head promised: the connection cannot go on.
                return None;
            }
            if chunked {
                let _ = write!(self.out, "{:x}\r\n", data.len());
            }
            if data.len() > self.sh.cfg.one_send_max_bytes {
                // A big frame goes out as it is, behind what is pending.
                if !self.flush().await || !self.send_bytes(data).await {
                    return None;
                }
            } else {
                self.out.extend_from_slice(&data);
            }
            if chunked {
                self.out.extend_from_slice(b"\r\n");
            }
            if self.out.len() >= self.sh.cfg.out_batch_bytes && !self.flush().await {
                return None;
            }
        }
        if chunked {
            self.out.extend_from_slice(b"0\r\n\r\n");
        }
        if length.is_some_and(|n| sent_bytes != n) {
            return None;
        }
        Some((code, sent_bytes, keep))
    }

    /// Sends `data` under the idle deadline.
    async fn send_bytes(&mut self, data: Bytes) -> bool {
        self.timer.set(Instant::now() + self.sh.cfg.idle_timeout);
        matches!(
            self.timer.run(self.stream.write_all(SendBytes(data))).await,
            Some((Ok(()), _))
        )
    }

    /// Counts and logs a request the service answered.
    fn log_service(&self, req: &Request, method: &str, status: u16, body_bytes: u64) {
        let line = RequestLine {
            method,
            target: &req.target,
            minor_version: req.minor_version,
            http2: self.stream.frames_bodies(),
            referer: req.referer.as_deref(),
            user_agent: req.user_agent.as_deref(),
        };
        self.log_code(Some(line), status, body_bytes);
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Headers that belong to one connection, set by the server itself.
fn hop_by_hop(name: &header::HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::TRANSFER_ENCODING
        || name == header::CONTENT_LENGTH
        || name == "keep-alive"
        || name == "proxy-connection"
}

/// A body frame sent without copying.
struct SendBytes(Bytes);

// SAFETY: a `Bytes`' storage never moves and is never written while it is shared; the value
// keeps it alive for as long as the kernel may read it.
unsafe impl IoBuf for SendBytes {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.len()
    }
    fn bytes_total(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::push_decimal;

    #[test]
    fn decimals() {
        for n in [0u64, 7, 10, 99, 100, 12_345, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }
}
