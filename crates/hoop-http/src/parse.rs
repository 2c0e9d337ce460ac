//! Step 1 of a request's story: received bytes become a [`Request`], or the status that
//! refuses them. Parsing is `httparse`'s; this module adds the limits (414, 431), the version
//! rule (505), the `Host` rule (400: RFC 9112, 3.2), the body's framing and the headers the
//! server acts on.

use super::config::{MAX_HEADERS, MAX_HEADER_BYTES, MAX_URI_BYTES};
use super::encoding::Accepted;
use super::status::Status;

/// The request method, as far as a static server cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: GET's headers, no body.
    Head,
    /// Anything else (405).
    Other,
}

/// One parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The request target as sent (not decoded).
    pub target: Vec<u8>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Whether the connection stays open after the response (version default, then the
    /// `Connection` header).
    pub keep_alive: bool,
    /// A non-zero `Content-Length` or any `Transfer-Encoding`: a body the files do not take.
    pub has_body: bool,
    /// `Content-Length`, when sent (every copy the same).
    pub content_length: Option<u64>,
    /// A `Transfer-Encoding` was sent.
    pub transfer_encoding: bool,
    /// `If-Match`, as sent.
    pub if_match: Option<Vec<u8>>,
    /// `If-Unmodified-Since`, as sent.
    pub if_unmodified_since: Option<Vec<u8>>,
    /// `If-None-Match`, as sent.
    pub if_none_match: Option<Vec<u8>>,
    /// `If-Modified-Since`, as sent.
    pub if_modified_since: Option<Vec<u8>>,
    /// `Range`, as sent.
    pub range: Option<Vec<u8>>,
    /// `If-Range`, as sent.
    pub if_range: Option<Vec<u8>>,
    /// Every `Accept-Encoding` field, parsed as one list.
    pub accept_encoding: Accepted,
    /// `Referer`, as sent (for the access log).
    pub referer: Option<Vec<u8>>,
    /// `User-Agent`, as sent (for the access log).
    pub user_agent: Option<Vec<u8>>,
}

/// What the bytes received so far hold.
// The complete request is the common case: boxing it to shrink the rare ones would cost an
// allocation per request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A complete request head of `len_bytes` bytes (leading empty lines included).
    Complete {
        /// The request.
        request: Request,
        /// Bytes it took from the front of the buffer.
        len_bytes: usize,
    },
    /// Not a whole head yet, and nothing wrong so far.
    Partial,
    /// A request the server refuses with this status (and then closes the connection).
    Invalid(Status),
}

/// Slack over [`MAX_URI_BYTES`] for the method and version on the request line.
const LINE_SLACK_BYTES: usize = 64;

/// Parses the request at the front of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    // Empty lines before a request line are ignored (RFC 9112, 2.2).
    let skip = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let head = &buf[skip..];
    if head.is_empty() {
        return Parsed::Partial;
    }
    // The request line alone decides 414.
    let line_len = match head.iter().position(|&b| b == b'\n') {
        Some(i) => {
            if target_of(&head[..i]).len() > MAX_URI_BYTES {
                return Parsed::Invalid(Status::UriTooLong);
            }
            i + 1
        }
        None if head.len() > MAX_URI_BYTES + LINE_SLACK_BYTES => {
            return Parsed::Invalid(Status::UriTooLong)
        }
        None => return Parsed::Partial,
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(head) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if head.len() - line_len > MAX_HEADER_BYTES {
                Parsed::Invalid(Status::HeaderFieldsTooLarge)
            } else {
                Parsed::Partial
            };
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Invalid(Status::HeaderFieldsTooLarge)
        }
        Err(_) if !is_http1(&head[..line_len - 1]) => {
            return Parsed::Invalid(Status::VersionNotSupported)
        }
        Err(_) => return Parsed::Invalid(Status::BadRequest),
    };
    if len - line_len > MAX_HEADER_BYTES {
        return Parsed::Invalid(Status::HeaderFieldsTooLarge);
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Invalid(Status::BadRequest);
    };
    let mut request = Request {
        method: match method {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            _ => Method::Other,
        },
        target: path.as_bytes().to_vec(),
        minor_version: version,
        keep_alive: version >= 1,
        has_body: false,
        content_length: None,
        transfer_encoding: false,
        if_match: None,
        if_unmodified_since: None,
        if_none_match: None,
        if_modified_since: None,
        range: None,
        if_range: None,
        accept_encoding: Accepted::default(),
        referer: None,
        user_agent: None,
    };
    let mut content_length: Option<u64> = None;
    let mut hosts = 0;
    for h in req.headers.iter() {
        let name = h.name;
        let value = trim(h.value);
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    request.keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && version == 0 {
                    request.keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let Some(n) = parse_u64(value) else {
                return Parsed::Invalid(Status::BadRequest);
            };
            if content_length.is_some_and(|c| c != n) {
                return Parsed::Invalid(Status::BadRequest);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            request.has_body = true;
            request.transfer_encoding = true;
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if !valid_host(value) {
                return Parsed::Invalid(Status::BadRequest);
            }
        } else if name.eq_ignore_ascii_case("if-match") {
            request.if_match.get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("if-unmodified-since") {
            request
                .if_unmodified_since
                .get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("if-none-match") {
            request.if_none_match.get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("if-modified-since") {
            request
                .if_modified_since
                .get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("range") {
            request.range.get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("if-range") {
            request.if_range.get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("accept-encoding") {
            request.accept_encoding.add(value);
        } else if name.eq_ignore_ascii_case("referer") {
            request.referer.get_or_insert_with(|| value.to_vec());
        } else if name.eq_ignore_ascii_case("user-agent") {
            request.user_agent.get_or_insert_with(|| value.to_vec());
        }
    }
    // One Host, and on HTTP/1.1 at least one (RFC 9112, 3.2): a server that guessed would
    // answer for a site the client did not name.
    if hosts > 1 || (hosts == 0 && version >= 1) {
        return Parsed::Invalid(Status::BadRequest);
    }
    request.content_length = content_length;
    if content_length.is_some_and(|n| n > 0) {
        request.has_body = true;
    }
    // `Connection: close` wins over keep-alive, whatever the order.
    if has_close(&req) {
        request.keep_alive = false;
    }
    Parsed::Complete {
        request,
        len_bytes: skip + len,
    }
}

fn has_close(req: &httparse::Request<'_, '_>) -> bool {
    req.headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|&b| b == b','))
        .any(|t| trim(t).eq_ignore_ascii_case(b"close"))
}

/// A `Host` value: `uri-host [":" port]` (RFC 9110, 7.2), the host a registered name of
/// unreserved, sub-delimiter and percent-encoded bytes (empty allowed: a target with no
/// authority), an IPv4 address (a registered name's bytes) or a bracketed IP literal (a
/// zone's `%25` allowed, RFC 6874), the port digits.
fn valid_host(value: &[u8]) -> bool {
    let sub_delim = |b: u8| b"!$&'()*+,;=".contains(&b);
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-._~".contains(&b);
    let (host, port) = if let Some(rest) = value.strip_prefix(b"[") {
        let Some(end) = rest.iter().position(|&b| b == b']') else {
            return false;
        };
        let literal = &rest[..end];
        let ok = !literal.is_empty()
            && literal
                .iter()
                .all(|&b| b == b':' || b == b'%' || unreserved(b) || sub_delim(b));
        if !ok {
            return false;
        }
        (&[][..], &rest[end + 1..])
    } else {
        match value.iter().position(|&b| b == b':') {
            Some(i) => (&value[..i], &value[i..]),
            None => (value, &[][..]),
        }
    };
    let host_ok = host.iter().enumerate().all(|(i, &b)| {
        unreserved(b)
            || sub_delim(b)
            || (b == b'%'
                && host.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && host.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    let port_ok = match port {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    host_ok && port_ok
}

/// The second space-separated token of a request line (its target), or empty.
fn target_of(line: &[u8]) -> &[u8] {
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    parts.next();
    parts.next().unwrap_or(&[])
}

/// Whether the request line's version is `HTTP/1.` followed by anything, or not a
/// well-formed `HTTP/x.y` at all (both 400, not 505).
fn is_http1(line: &[u8]) -> bool {
    let line = trim(line);
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or(&[]);
    let Some(rest) = version.strip_prefix(b"HTTP/") else {
        return true;
    };
    let mut nums = rest.split(|&b| b == b'.');
    let (Some(major), Some(minor), None) = (nums.next(), nums.next(), nums.next()) else {
        return true;
    };
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if !digits(major) || !digits(minor) {
        return true;
    }
    major == b"1"
}

/// Leading and trailing spaces, tabs and CR removed.
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = s {
        s = rest;
    }
    s
}

/// A decimal number of at most 19 digits (no sign, no spaces).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(buf: &[u8]) -> (Request, usize) {
        match parse(buf) {
            Parsed::Complete { request, len_bytes } => (request, len_bytes),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(buf)),
        }
    }

    #[test]
    fn simple_get_and_keep_alive_defaults() {
        let (r, n) = complete(b"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\nGET");
        assert_eq!(n, 30);
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.target, b"/a?b");
        assert!(r.keep_alive);
        let (r, _) = complete(b"HEAD / HTTP/1.0\r\n\r\n");
        assert_eq!(r.method, Method::Head);
        assert!(!r.has_body && r.content_length.is_none() && !r.transfer_encoding);
        assert!(!r.keep_alive);
        let (r, _) = complete(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(r.keep_alive);
        let (r, _) =
            complete(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n");
        assert!(!r.keep_alive);
    }

    #[test]
    fn host_per_rfc_9112() {
        let host = |h: &str| {
            let h = if h.is_empty() {
                String::new()
            } else {
                format!("{h}\r\n")
            };
            parse(format!("GET / HTTP/1.1\r\n{h}\r\n").as_bytes())
        };
        let bad = Parsed::Invalid(Status::BadRequest);
        for ok in [
            "Host: example.com",
            "Host: example.com:8080",
            "Host: 127.0.0.1:80",
            "Host: [::1]:8080",
            "Host: [fe80::1%25eth0]",
            "Host: xn--bcher-kva.example",
            "Host: a%41b",
            "Host: example.com:",
            "Host: ",
            "HOST: x",
        ] {
            assert!(matches!(host(ok), Parsed::Complete { .. }), "{ok}");
        }
        for no in [
            "",
            "X-Host: x",
            "Host: a\r\nHost: a",
            "Host: a b",
            "Host: a/b",
            "Host: a@b",
            "Host: a:80x",
            "Host: a:1:2",
            "Host: [::1",
            "Host: []",
            "Host: [::1]x",
            "Host: a%4",
            "Host: a%zz",
            "Host: \"a\"",
        ] {
            assert_eq!(host(no), bad, "{no:?}");
        }
        // HTTP/1.0 may leave Host out, never repeat it.
        assert!(matches!(
            parse(b"GET / HTTP/1.0\r\n\r\n"),
            Parsed::Complete { .. }
        ));
        assert_eq!(parse(b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), bad);
    }

    #[test]
    fn limits_and_errors() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost"), Parsed::Partial);
        assert_eq!(parse(b"\r\n\r\n"), Parsed::Partial);
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_URI_BYTES));
        assert_eq!(parse(long.as_bytes()), Parsed::Invalid(Status::UriTooLong));
        let long = format!("GET /{}", "a".repeat(MAX_URI_BYTES + 100));
        assert_eq!(parse(long.as_bytes()), Parsed::Invalid(Status::UriTooLong));
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: 1\r\n")).collect();
        let req = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(
            parse(req.as_bytes()),
            Parsed::Invalid(Status::HeaderFieldsTooLarge)
        );
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n", "v".repeat(MAX_HEADER_BYTES));
        assert_eq!(
            parse(big.as_bytes()),
            Parsed::Invalid(Status::HeaderFieldsTooLarge)
        );
        assert_eq!(
            parse(b"GET / HTTP/2.0\r\n\r\n"),
            Parsed::Invalid(Status::VersionNotSupported)
        );
        assert_eq!(
            parse(b"GET / HTXP/1.1\r\n\r\n"),
            Parsed::Invalid(Status::BadRequest)
        );
        assert_eq!(parse(b"GET /\r\n\r\n"), Parsed::Invalid(Status::BadRequest));
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Parsed::Invalid(Status::BadRequest)
        );
        let (r, _) = complete(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n");
        assert!(r.has_body && r.content_length == Some(5) && !r.transfer_encoding);
        let (r, _) = complete(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
        assert!(!r.has_body);
        let (r, _) = complete(b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(r.has_body && r.transfer_encoding);
    }

    #[test]
    fn accept_encoding_fields_are_one_list() {
        use crate::encoding::Coding;
        let (r, _) = complete(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(!r.accept_encoding.present);
        let (r, _) = complete(
            b"GET / HTTP/1.1\r\nHost: x\r\naccept-encoding: gzip;q=0.5\r\nX: y\r\nACCEPT-ENCODING:  br ;q=0.7\r\n\r\n",
        );
        let order: Vec<Coding> = r.accept_encoding.preferred().collect();
        assert_eq!(order, vec![Coding::Br, Coding::Gzip]);
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), None);
        assert_eq!(
            parse_u64(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
    }
}

#[cfg(test)]
mod properties {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::{parse, Parsed};
    use crate::resolve::decode;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// Any bytes: no panic, and a complete request never claims more than it was given.
        #[test]
        fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..4096)) {
            if let Parsed::Complete { len_bytes, .. } = parse(&bytes) {
                prop_assert!(len_bytes <= bytes.len());
            }
            let _ = decode(&bytes);
        }

        /// Well-formed requests parse whole, and none of their proper prefixes is complete.
        #[test]
        fn requests_and_their_prefixes(
            method in "[A-Z]{1,7}",
            path in "/[!-~]{0,60}",
            minor in 0u8..2,
            headers in vec(("[A-Za-z][A-Za-z0-9-]{0,15}", "[!-~]([ -~]{0,30}[!-~])?"), 0..12),
        ) {
            let mut req = format!("{method} {path} HTTP/1.{minor}\r\nHost: h\r\n");
            for (k, v) in headers.iter().filter(|(k, _)| !k.eq_ignore_ascii_case("host")) {
                req.push_str(&format!("{k}: {v}\r\n"));
            }
            req.push_str("\r\n");
            let bytes = req.as_bytes();
            let whole = parse(bytes);
            match &whole {
                Parsed::Complete { len_bytes, request } => {
                    prop_assert_eq!(*len_bytes, bytes.len());
                    prop_assert_eq!(request.target.as_slice(), path.as_bytes());
                }
                // Header values the parser refuses (a bad Content-Length, say).
                Parsed::Invalid(_) => {}
                Parsed::Partial => prop_assert!(false, "a whole request read as partial"),
            }
            for cut in 0..bytes.len() {
                let p = parse(&bytes[..cut]);
                prop_assert!(
                    !matches!(p, Parsed::Complete { .. }),
                    "a prefix of {} bytes read as complete", cut
                );
            }
        }

        /// Whatever a target decodes to stays beneath the root: no `..` or `.` segment, no
        /// absolute path, no NUL.
        #[test]
        fn decoded_targets_stay_beneath_the_root(
            parts in vec(prop_oneof![
                Just("..".to_string()), Just("%2e%2e".to_string()), Just("%2E.".to_string()),
                Just(".".to_string()), Just("%2f".to_string()), Just("\\".to_string()),
                Just("%00".to_string()), Just("%5c..".to_string()), "[a-z%0-9.]{0,6}",
            ], 0..10)
        ) {
            let target = format!("/{}", parts.join("/"));
            if let Ok(t) = decode(target.as_bytes()) {
                prop_assert!(!t.rel.starts_with(b"/"));
                prop_assert!(!t.rel.contains(&0));
                for seg in t.rel.split(|&b| b == b'/') {
                    prop_assert!(seg != b".." && seg != b".", "{:?}", target);
                    prop_assert!(!seg.is_empty() || t.rel.is_empty(), "{:?}", target);
                }
            }
        }
    }
}
