//! One HTTP/2 stream as the request loop's transport ([`StreamIo`]): the request handed over
//! as the HTTP/1.1 head it means (and its body's DATA, chunk-coded when it has no length),
//! the loop's response head read back into HEADERS and its body sent as DATA under the
//! peer's window.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};

/// Most bytes of one DATA frame handed to `h2` at once (it splits them into frames).
const DATA_BYTES: usize = 64 * 1024;

/// How the response body is delimited, read from its HTTP/1.1 head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// The head is not complete yet.
    Head,
    /// No body (HEAD, 1xx, 204, 304): the stream ended with the head.
    None,
    /// `Content-Length` bytes left.
    Length(u64),
    /// Until the loop finishes (a service body of unknown length).
    UntilEnd,
    /// Ended: more bytes are an error.
    Done,
}

/// What [`StreamIo::take_head`] leaves: after an interim (1xx) head, the bytes that follow
/// (another head); after the final head (or none complete yet), the body bytes that came
/// with it.
enum Taken<'a> {
    Interim(&'a [u8]),
    Head(Bytes),
}

/// Body bytes for DATA frames: borrowed (copied into frames) or owned (sliced).
enum Sent<'a> {
    Borrowed(&'a [u8]),
    Owned(Bytes),
}

impl<'a> Sent<'a> {
    fn len(&self) -> usize {
        match self {
            Sent::Borrowed(b) => b.len(),
            Sent::Owned(b) => b.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` bytes.
    fn prefix(self, n: usize) -> Sent<'a> {
        match self {
            Sent::Borrowed(b) => Sent::Borrowed(&b[..n]),
            Sent::Owned(b) => Sent::Owned(b.slice(..n)),
        }
    }

    /// The first `n` bytes as a frame's payload, and the rest.
    fn split(self, n: usize) -> (Bytes, Sent<'a>) {
        match self {
            Sent::Borrowed(b) => (Bytes::copy_from_slice(&b[..n]), Sent::Borrowed(&b[n..])),
            Sent::Owned(mut b) => {
                let rest = b.split_off(n);
                (b, Sent::Owned(rest))
            }
        }
    }
}

/// One stream as the request loop's transport.
pub(crate) struct StreamIo {
    state: RefCell<State>,
    remote: Option<SocketAddr>,
}

struct State {
    /// The request head as HTTP/1.1, and how much of it was read.
    head: Vec<u8>,
    head_read: usize,
    /// The request body, while it lasts; `chunked`: it is handed over chunk-coded.
    body: Option<RecvStream>,
    chunked: bool,
    /// Bytes of the body (or of its coding) not handed over yet.
    pending: Vec<u8>,
    pending_read: usize,
    /// The request was HEAD (its response has no body, whatever its head says).
    head_only: bool,
    respond: Option<SendResponse<Bytes>>,
    send: Option<SendStream<Bytes>>,
    /// The response head gathered until its blank line.
    response_head: Vec<u8>,
    framing: Framing,
}

impl StreamIo {
    pub(super) fn new(
        req: http::Request<RecvStream>,
        respond: SendResponse<Bytes>,
        remote: Option<SocketAddr>,
    ) -> StreamIo {
        let (parts, body) = req.into_parts();
        let head_only = parts.method == http::Method::HEAD;
        let has_length = parts.headers.contains_key(http::header::CONTENT_LENGTH);
        let ended = body.is_end_stream();
        let chunked = !ended && !has_length;
        let head = request_head(&parts, chunked);
        StreamIo {
            state: RefCell::new(State {
                head,
                head_read: 0,
                body: (!ended).then_some(body),
                chunked,
                pending: Vec::new(),
                pending_read: 0,
                head_only,
                respond: Some(respond),
                send: None,
                response_head: Vec::new(),
                framing: Framing::Head,
            }),
            remote,
        }
    }

    /// The client's address (of the connection).
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.remote
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "no peer address"))
    }

    /// Fills `buf` (cleared, up to its capacity) with the request: its head, then its body;
    /// 0 at its end.
    pub(crate) async fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        buf.clear();
        let room = buf.capacity().max(1);
        loop {
            {
                let mut st = self.state.borrow_mut();
                let st = &mut *st;
                if st.head_read < st.head.len() {
                    let n = (st.head.len() - st.head_read).min(room);
                    buf.extend_from_slice(&st.head[st.head_read..st.head_read + n]);
                    st.head_read += n;
                    return Ok(n);
                }
                if st.pending_read < st.pending.len() {
                    let n = (st.pending.len() - st.pending_read).min(room);
                    buf.extend_from_slice(&st.pending[st.pending_read..st.pending_read + n]);
                    st.pending_read += n;
                    return Ok(n);
                }
                if st.body.is_none() {
                    return Ok(0);
                }
            }
            // The next DATA frame; the body is taken out of the cell while awaited.
            let Some(mut body) = self.state.borrow_mut().body.take() else {
                return Ok(0);
            };
            let next = body.data().await;
            let mut st = self.state.borrow_mut();
            st.pending.clear();
            st.pending_read = 0;
            match next {
                Some(Ok(data)) => {
                    // The window opens again as the loop takes the bytes.
                    let _ = body.flow_control().release_capacity(data.len());
                    if st.chunked && !data.is_empty() {
                        st.pending
                            .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                        st.pending.extend_from_slice(&data);
                        st.pending.extend_from_slice(b"\r\n");
                    } else {
                        st.pending.extend_from_slice(&data);
                    }
                    st.body = Some(body);
                }
                None => {
                    if st.chunked {
                        st.pending.extend_from_slice(b"0\r\n\r\n");
                    }
                }
                Some(Err(e)) => return Err(io::Error::other(e)),
            }
        }
    }

    /// Takes body bytes it may keep (a cached body): into DATA frames without a copy.
    pub(crate) async fn write_bytes(&self, bytes: Bytes) -> io::Result<()> {
        if self.state.borrow().framing == Framing::Head {
            return self.write_all(&bytes).await;
        }
        self.send(Sent::Owned(bytes)).await
    }

    /// Takes response bytes: the head into HEADERS, the body into DATA frames.
    pub(crate) async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let framing = self.state.borrow().framing;
            match framing {
                Framing::Head => match self.take_head(bytes)? {
                    Taken::Interim(rest) => bytes = rest,
                    // The body bytes that came with the head, sliced from the head's buffer.
                    Taken::Head(rest) if rest.is_empty() => return Ok(()),
                    Taken::Head(rest) => return self.send(Sent::Owned(rest)).await,
                },
                Framing::None | Framing::Done => return Ok(()),
                Framing::Length(_) | Framing::UntilEnd => {
                    return self.send(Sent::Borrowed(bytes)).await
                }
            }
        }
        Ok(())
    }

    /// Reads the response head from `bytes`; once it is complete it goes out as HEADERS,
    /// and what follows it is returned.
    fn take_head<'b>(&self, bytes: &'b [u8]) -> io::Result<Taken<'b>> {
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        let before = st.response_head.len();
        st.response_head.extend_from_slice(bytes);
        let mut headers = [httparse::EMPTY_HEADER; 96];
        let mut parsed = httparse::Response::new(&mut headers);
        let end = match parsed.parse(&st.response_head) {
            Ok(httparse::Status::Complete(end)) => end,
            Ok(httparse::Status::Partial) => return Ok(Taken::Head(Bytes::new())),
            Err(e) => return Err(io::Error::other(format!("response head: {e}"))),
        };
        let rest = &bytes[end - before..];
        let code = parsed.code.unwrap_or(500);
        if code < 200 {
            // `100 Continue` has no place here: HTTP/2 clients send their bodies.
            st.response_head.clear();
            return Ok(Taken::Interim(rest));
        }
        // Where each field is in the head, so that the values can be slices of one buffer
        // (no allocation per field).
        let base = st.response_head.as_ptr() as usize;
        let at = |b: &[u8]| b.as_ptr() as usize - base;
        let mut fields: Vec<(usize, usize, usize, usize)> =
            Vec::with_capacity(parsed.headers.len());
        let mut length = None;
        for h in parsed.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                length = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok());
            }
            if connection_specific(h.name) {
                continue;
            }
            let (n, v) = (at(h.name.as_bytes()), at(h.value));
            fields.push((n, n + h.name.len(), v, v + h.value.len()));
        }
        let whole = Bytes::from(std::mem::take(&mut st.response_head));
        let (head, rest) = (whole.slice(..end), whole.slice(end..));
        let bad = |e: &dyn std::fmt::Display| io::Error::other(format!("response head: {e}"));
        let mut response = http::Response::new(());
        *response.status_mut() = http::StatusCode::from_u16(code).map_err(|e| bad(&e))?;
        let map = response.headers_mut();
        map.reserve(fields.len());
        for (n0, n1, v0, v1) in fields {
            let name = http::HeaderName::from_bytes(&head[n0..n1]).map_err(|e| bad(&e))?;
            let value =
                http::HeaderValue::from_maybe_shared(head.slice(v0..v1)).map_err(|e| bad(&e))?;
            map.append(name, value);
        }
        let bodiless = st.head_only || code == 204 || code == 304 || length == Some(0);
        st.framing = match (bodiless, length) {
            (true, _) => Framing::None,
            (false, Some(n)) => Framing::Length(n),
            (false, None) => Framing::UntilEnd,
        };
        let Some(mut respond) = st.respond.take() else {
            return Err(io::Error::other("a second response head"));
        };
        let send = respond
            .send_response(response, bodiless)
            .map_err(io::Error::other)?;
        st.send = (!bodiless).then_some(send);
        Ok(Taken::Head(rest))
    }

    /// Sends body bytes as the framing allows: up to the length (the last of them ending the
    /// stream), or all of them for a body that ends with the loop.
    async fn send(&self, bytes: Sent<'_>) -> io::Result<()> {
        let framing = self.state.borrow().framing;
        let (n, last) = match framing {
            Framing::Length(left) => {
                let n = (bytes.len() as u64).min(left) as usize;
                (n, n as u64 == left)
            }
            Framing::UntilEnd => (bytes.len(), false),
            // Bytes past the length (none are written) are not this stream's.
            Framing::Head | Framing::None | Framing::Done => return Ok(()),
        };
        self.send_data(bytes.prefix(n), last).await?;
        if let Framing::Length(left) = framing {
            self.state.borrow_mut().framing = match last {
                true => Framing::Done,
                false => Framing::Length(left - n as u64),
            };
        }
        Ok(())
    }

    /// Sends `bytes` as DATA, as the peer's window allows.
    async fn send_data(&self, mut bytes: Sent<'_>, end: bool) -> io::Result<()> {
        let Some(mut send) = self.state.borrow_mut().send.take() else {
            return Err(io::Error::other("no response stream"));
        };
        let res = async {
            while !bytes.is_empty() {
                send.reserve_capacity(bytes.len().min(DATA_BYTES));
                let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
                    Some(Ok(n)) => n,
                    Some(Err(e)) => return Err(io::Error::other(e)),
                    None => return Err(io::ErrorKind::BrokenPipe.into()),
                };
                if granted == 0 {
                    continue;
                }
                let n = granted.min(bytes.len());
                let last = end && n == bytes.len();
                let (now, rest) = bytes.split(n);
                send.send_data(now, last).map_err(io::Error::other)?;
                bytes = rest;
            }
            Ok(())
        }
        .await;
        self.state.borrow_mut().send = Some(send);
        res
    }

    /// The loop is done with the stream: end it (a body of unknown length ends here; a
    /// response that never began is refused with a reset).
    pub(crate) fn finish(&self) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        match st.framing {
            Framing::UntilEnd => {
                st.framing = Framing::Done;
                if let Some(send) = st.send.as_mut() {
                    send.send_data(Bytes::new(), true)
                        .map_err(io::Error::other)?;
                }
            }
            Framing::Head => {
                if let Some(mut respond) = st.respond.take() {
                    respond.send_reset(h2::Reason::INTERNAL_ERROR);
                }
            }
            Framing::Length(_) => {
                if let Some(send) = st.send.as_mut() {
                    send.send_reset(h2::Reason::INTERNAL_ERROR);
                }
            }
            Framing::None | Framing::Done => {}
        }
        Ok(())
    }
}

impl Drop for StreamIo {
    fn drop(&mut self) {
        // A response cut short (the loop failed, a deadline passed) is reset, not left open.
        let _ = self.finish();
    }
}

/// The request's HTTP/1.1 head.
fn request_head(parts: &http::request::Parts, chunked: bool) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(parts.method.as_str().as_bytes());
    head.push(b' ');
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    head.extend_from_slice(target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\n");
    let authority = parts.uri.authority();
    if let Some(a) = authority {
        head.extend_from_slice(b"Host: ");
        head.extend_from_slice(a.as_str().as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    let mut cookies: Vec<&[u8]> = Vec::new();
    for (name, value) in &parts.headers {
        if name == http::header::COOKIE {
            cookies.push(value.as_bytes());
            continue;
        }
        if (name == http::header::HOST && authority.is_some())
            || name == http::header::EXPECT
            || connection_specific(name.as_str())
        {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if !cookies.is_empty() {
        head.extend_from_slice(b"cookie: ");
        head.extend_from_slice(&cookies.join(&b"; "[..]));
        head.extend_from_slice(b"\r\n");
    }
    if chunked {
        head.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Fields HTTP/2 forbids (RFC 9113 8.2.2).
fn connection_specific(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_mean_what_the_stream_said() {
        let req = http::Request::get("https://example.com/a/b?c=1")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .header("range", "bytes=0-1")
            .header("expect", "100-continue")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let head = String::from_utf8(request_head(&parts, true)).unwrap();
        assert_eq!(
            head,
            "GET /a/b?c=1 HTTP/1.1\r\nHost: example.com\r\nrange: bytes=0-1\r\n\
             cookie: a=1; b=2\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
    }

    #[test]
    fn connection_fields_are_dropped() {
        for name in [
            "Connection",
            "keep-alive",
            "Transfer-Encoding",
            "TE",
            "upgrade",
        ] {
            assert!(connection_specific(name), "{name}");
        }
        for name in ["content-length", "etag", "vary"] {
            assert!(!connection_specific(name), "{name}");
        }
    }
}
