//! The HTTP/1.1 response framing the arena profiles read, as pure functions on bytes: a head
//! (status, how the body is framed, whether the server closes), and a chunked body decoded.
//! Servers may frame a small body either way (axum and actix answer dynamic routes with
//! `Content-Length` or `Transfer-Encoding: chunked`), so the client accepts both and checks the
//! decoded body.

/// The largest response head accepted (a bigger one is a parse error, not a wait).
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest body accepted: the profiles' biggest answer is a few KB; a server that claims
/// more is wrong, not slow.
pub(crate) const MAX_BODY_BYTES: usize = 16 << 20;

/// How a response's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `Content-Length: N`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// No body (1xx, 204, 304).
    Empty,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// The status code.
    pub status: u16,
    /// How the body is delimited.
    pub framing: Framing,
    /// `Connection: close` in the response.
    pub close: bool,
    /// Bytes of the head, the blank line included.
    pub head_bytes: usize,
}

/// Parses a response head at the start of `buf`: `Ok(None)` when more bytes are needed,
/// `Err` (a sentence) when it is not a head this client can frame.
pub(crate) fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let head_bytes = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(format!("a response head over {MAX_HEAD_BYTES} bytes"))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("bad response head: {e}")),
    };
    let status = resp.code.unwrap_or(0);
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut close = false;
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .map_err(|_| format!("Content-Length {value:?} is not a number"))?;
            if length.is_some_and(|l| l != n) {
                return Err("two different Content-Length headers".into());
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding must be chunked for the body to be framed (RFC 9112 6.3).
            let last = value.rsplit(',').next().unwrap_or("").trim();
            if !last.eq_ignore_ascii_case("chunked") {
                return Err(format!(
                    "Transfer-Encoding {value:?} does not end in chunked"
                ));
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= value
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("close"));
        }
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        // Transfer-Encoding wins over Content-Length (RFC 9112 6.3).
        Framing::Chunked
    } else if let Some(n) = length {
        if n > MAX_BODY_BYTES {
            return Err(format!(
                "Content-Length {n}: over the {MAX_BODY_BYTES} bytes a profile's answer may have"
            ));
        }
        Framing::Length(n)
    } else {
        // A body delimited by the close is no keep-alive answer.
        return Err(format!(
            "status {status} with neither Content-Length nor chunked framing"
        ));
    };
    Ok(Some(Head {
        status,
        framing,
        close,
        head_bytes,
    }))
}

/// Decodes a chunked body at the start of `buf` into `out` (cleared first): `Ok(Some(n))` when
/// the whole body, its last chunk and trailers included, is the first `n` bytes of `buf`;
/// `Ok(None)` when more bytes are needed; `Err` when it is not chunked framing.
pub(crate) fn decode_chunked(buf: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, String> {
    out.clear();
    let mut at = 0;
    loop {
        let Some(eol) = find_crlf(&buf[at..]) else {
            return if buf.len() - at > 1024 {
                Err("a chunk-size line over 1 KiB".into())
            } else {
                Ok(None)
            };
        };
        let line = &buf[at..at + eol];
        // Chunk extensions (`;name=value`) are allowed and ignored.
        let size_text = line.split(|&b| b == b';').next().unwrap_or(&[]);
        let size_text = std::str::from_utf8(size_text)
            .map_err(|_| "a chunk size that is not text".to_string())?
            .trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("chunk size {size_text:?} is not hexadecimal"))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, each a line, until a blank line.
            loop {
                let Some(eol) = find_crlf(&buf[at..]) else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some(at));
                }
            }
        }
        if out.len() + size > MAX_BODY_BYTES {
            return Err(format!(
                "a chunked body over the {MAX_BODY_BYTES} bytes a profile's answer may have"
            ));
        }
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&buf[at..at + size]);
        if &buf[at + size..at + size + 2] != b"\r\n" {
            return Err("a chunk not followed by CRLF".into());
        }
        at += size + 2;
    }
}

/// Where the first `\r\n` of `b` starts.
fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_frame_by_length_chunked_or_nothing() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n55")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.status, h.framing, h.close, h.head_bytes),
            (200, Framing::Length(2), false, 38)
        );
        let h = parse_head(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: Close\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.framing, h.close), (Framing::Chunked, true));
        let both = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse_head(both).unwrap().unwrap().framing, Framing::Chunked);
        let h = parse_head(b"HTTP/1.1 204 No Content\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Empty);
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Len").unwrap(), None);
        for bad in [
            &b"HTTP/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"NOPE\r\n\r\n",
        ] {
            assert!(
                parse_head(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn chunked_bodies_decode_in_pieces_and_whole() {
        let body = b"2\r\n55\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let mut out = Vec::new();
        assert_eq!(
            decode_chunked(body, &mut out).unwrap(),
            Some(body.len() - 4)
        );
        assert_eq!(out, b"55abc");
        // Every prefix short of the end asks for more.
        for n in 0..body.len() - 4 {
            assert_eq!(decode_chunked(&body[..n], &mut out).unwrap(), None, "{n}");
        }
        assert_eq!(decode_chunked(b"0\r\n\r\n", &mut out).unwrap(), Some(5));
        assert!(out.is_empty());
        assert!(decode_chunked(b"zz\r\n", &mut out).is_err());
        assert!(decode_chunked(b"2\r\n55XX", &mut out).is_err());
    }
}
