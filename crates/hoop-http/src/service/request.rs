//! A request head the files did not answer, made into an [`http::Request`] for the service,
//! with how its body is framed.
//!
//! The head was already checked by `parse` (limits, version, one `Content-Length`); it is
//! parsed again here, keeping every field, only when the service is called. The framing
//! rules close the doors request smuggling uses: `Transfer-Encoding` with `Content-Length`,
//! or a coding list that does not end in `chunked`, is refused (400), as is a coding that is
//! not `chunked` at all (501 would say "not implemented"; 400 closes the connection either way).

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri, Version};

use crate::config::MAX_HEADERS;
use crate::status::Status;

/// How the request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// The chunked coding.
    Chunked,
}

/// The request (its body still to be attached), how its body is framed, and whether the
/// client waits for `100 Continue` before sending it.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) request: http::Request<()>,
    pub(crate) framing: Framing,
    pub(crate) expect_continue: bool,
}

/// Makes the request from the head bytes (from the request line to the empty line).
pub(crate) fn build(head: &[u8]) -> Result<Head, Status> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    let skip = head
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(head.len());
    match req.parse(&head[skip..]) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(Status::BadRequest),
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Status::BadRequest);
    };
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| Status::BadRequest)?;
    let uri = Uri::try_from(path).map_err(|_| Status::BadRequest)?;
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut coded = false;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| Status::BadRequest)?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| Status::BadRequest)?;
        if name == http::header::CONTENT_LENGTH {
            // `parse` already refused a bad or a second, different value.
            length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
        } else if name == http::header::TRANSFER_ENCODING {
            // Every field is one list: only its last coding may be (and must be) chunked.
            for coding in h.value.split(|&b| b == b',').map(trim) {
                if coding.is_empty() {
                    continue;
                }
                if chunked {
                    return Err(Status::BadRequest);
                }
                coded = true;
                chunked = coding.eq_ignore_ascii_case(b"chunked");
            }
        } else if name == http::header::EXPECT {
            if trim(h.value).eq_ignore_ascii_case(b"100-continue") {
                expect_continue = true;
            } else {
                // RFC 9110, 10.1.1: 417 for an expectation not met; a 400 also ends it.
                return Err(Status::BadRequest);
            }
        }
        headers.append(name, value);
    }
    let framing = match (coded, length) {
        (true, Some(_)) => return Err(Status::BadRequest),
        (true, None) if chunked => Framing::Chunked,
        (true, None) => return Err(Status::BadRequest),
        (false, Some(0) | None) => Framing::Empty,
        (false, Some(n)) => Framing::Length(n),
    };
    let mut request = http::Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = if version == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    *request.headers_mut() = headers;
    Ok(Head {
        request,
        framing,
        // An HTTP/1.0 client does not wait for one (RFC 9110, 10.1.1).
        expect_continue: expect_continue && version >= 1 && framing != Framing::Empty,
    })
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_keeps_its_method_target_headers_and_framing() {
        let h = build(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\n").unwrap();
        assert_eq!(h.request.method(), Method::POST);
        assert_eq!(h.request.uri().path(), "/baseline11");
        assert_eq!(h.request.uri().query(), Some("a=1&b=2"));
        assert_eq!(h.request.headers().get_all("x-a").iter().count(), 2);
        assert_eq!(h.framing, Framing::Length(2));
        assert!(!h.expect_continue);
        let h =
            build(b"PUT /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
                .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        assert!(h.expect_continue);
        let h = build(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(h.request.version(), Version::HTTP_10);
        assert_eq!(h.framing, Framing::Empty);
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        for bad in [
            &b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nExpect: something\r\n\r\n",
        ] {
            assert_eq!(build(bad).err(), Some(Status::BadRequest), "{bad:?}");
        }
        let ok = build(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").unwrap();
        assert_eq!(ok.framing, Framing::Chunked);
    }
}
