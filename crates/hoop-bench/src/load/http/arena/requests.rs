//! What each arena profile sends and what it expects back, one exchange at a time (a request,
//! or the pipelined profile's 16 written together): the bytes, the shared upload body's share,
//! and the answer each request must get.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// Requests of the pipelined profile written together.
pub(crate) const PIPELINE_DEPTH: usize = 16;
/// Requests of a short-lived connection: the last carries `Connection: close`.
pub(crate) const SHORT_LIVED_REQUESTS: u32 = 10;
/// The json profile's (count, m) pairs, taken in turn.
pub(crate) const JSON_PAIRS: [(usize, u64); 7] =
    [(1, 3), (5, 7), (10, 2), (15, 5), (25, 4), (40, 8), (50, 6)];
/// The upload profile's body sizes, decimal (500 KB, 2 MB, 10 MB, 20 MB), taken in turn.
pub(crate) const UPLOAD_SIZES: [usize; 4] = [500_000, 2_000_000, 10_000_000, 20_000_000];
/// The baseline POSTs' body, added to the sum.
const POST_BODY: u64 = 20;

/// What a connection sends, by profile (the static profile runs on the static-file client).
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    /// `/baseline11`: GET, POST with Content-Length, POST chunked, by connection.
    Baseline,
    /// 16 `GET /pipeline` in one write.
    Pipelined,
    /// The baseline shapes, 10 requests per connection.
    ShortLived,
    /// `/json/{count}?m={m}` checked against these dataset items.
    Json(Arc<[Value]>),
    /// `POST /upload` of bodies from this shared buffer (at least the largest size).
    Upload(Arc<[u8]>),
}

/// The answer one request must get (status 200 and this body).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expect {
    /// Exactly these bytes.
    Static(&'static [u8]),
    /// Exactly this text (a sum, a byte count).
    Text(String),
    /// The json profile's answer for (count, m).
    Json {
        /// Items asked for.
        count: usize,
        /// The multiplier.
        m: u64,
    },
}

/// One write's worth of requests and what each must get back.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// The request bytes (heads, and small bodies).
    pub bytes: Vec<u8>,
    /// Body bytes written after `bytes` from the shared upload buffer.
    pub upload_bytes: usize,
    /// The answers, in order.
    pub expects: Vec<Expect>,
}

/// The next exchanges of one connection.
#[derive(Debug)]
pub(crate) struct Requests {
    shape: Shape,
    /// The connection's index: its baseline shape, and where its turns start.
    conn: usize,
    /// Requests made so far (varies the sums and picks the turns).
    seq: u64,
    host: String,
}

impl Requests {
    /// Connection `conn`'s requests to `host`.
    pub(crate) fn new(shape: &Shape, conn: usize, host: &str) -> Requests {
        Requests {
            shape: shape.clone(),
            conn,
            seq: 0,
            host: host.to_string(),
        }
    }

    /// The next exchange; `close` puts `Connection: close` on its (last) request.
    pub(crate) fn next(&mut self, close: bool) -> Exchange {
        let seq = self.seq;
        self.seq += 1;
        let turn = self.conn + seq as usize;
        let host = &self.host;
        let conn_header = if close { "Connection: close\r\n" } else { "" };
        match &self.shape {
            Shape::Baseline | Shape::ShortLived => {
                // Both vary, so that a sum is computed, not remembered.
                let a = seq % 10_000;
                let b = (self.conn as u64 * 31 + seq * 7) % 1_000;
                let path = format!("/baseline11?a={a}&b={b}");
                let (bytes, sum) = match self.conn % 3 {
                    0 => (
                        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{conn_header}\r\n"),
                        a + b,
                    ),
                    1 => (
                        format!(
                            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{conn_header}\
                             Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{POST_BODY}"
                        ),
                        a + b + POST_BODY,
                    ),
                    _ => (
                        format!(
                            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{conn_header}\
                             Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n\
                             2\r\n{POST_BODY}\r\n0\r\n\r\n"
                        ),
                        a + b + POST_BODY,
                    ),
                };
                Exchange {
                    bytes: bytes.into_bytes(),
                    upload_bytes: 0,
                    expects: vec![Expect::Text(sum.to_string())],
                }
            }
            Shape::Pipelined => {
                let one = format!("GET /pipeline HTTP/1.1\r\nHost: {host}\r\n\r\n");
                let mut bytes = one.repeat(PIPELINE_DEPTH - 1).into_bytes();
                bytes.extend_from_slice(
                    format!("GET /pipeline HTTP/1.1\r\nHost: {host}\r\n{conn_header}\r\n")
                        .as_bytes(),
                );
                Exchange {
                    bytes,
                    upload_bytes: 0,
                    expects: vec![Expect::Static(b"ok"); PIPELINE_DEPTH],
                }
            }
            Shape::Json(_) => {
                let (count, m) = JSON_PAIRS[turn % JSON_PAIRS.len()];
                Exchange {
                    bytes: format!(
                        "GET /json/{count}?m={m} HTTP/1.1\r\nHost: {host}\r\n{conn_header}\r\n"
                    )
                    .into_bytes(),
                    upload_bytes: 0,
                    expects: vec![Expect::Json { count, m }],
                }
            }
            Shape::Upload(_) => upload(host, UPLOAD_SIZES[turn % UPLOAD_SIZES.len()], close),
        }
    }

    /// A connection's warm-up exchange (checked, not counted): the next one, but the smallest
    /// body for uploads (256 connections warming up with 20 MB each would take seconds).
    pub(crate) fn warm_up(&mut self) -> Exchange {
        match &self.shape {
            Shape::Upload(_) => upload(&self.host, UPLOAD_SIZES[0], false),
            _ => self.next(false),
        }
    }
}

/// `POST /upload` of `body_bytes` (the body comes from the shared buffer).
fn upload(host: &str, body_bytes: usize, close: bool) -> Exchange {
    let conn_header = if close { "Connection: close\r\n" } else { "" };
    Exchange {
        bytes: format!(
            "POST /upload HTTP/1.1\r\nHost: {host}\r\n{conn_header}\
             Content-Type: application/octet-stream\r\nContent-Length: {body_bytes}\r\n\r\n"
        )
        .into_bytes(),
        upload_bytes: body_bytes,
        expects: vec![Expect::Text(body_bytes.to_string())],
    }
}

/// The shared upload body: the largest size, filled once per process (never a 20 MB
/// allocation per request).
pub(crate) fn upload_body() -> Arc<[u8]> {
    static BODY: OnceLock<Arc<[u8]>> = OnceLock::new();
    BODY.get_or_init(|| {
        let max = UPLOAD_SIZES.iter().copied().max().unwrap_or(0);
        Arc::from(crate::load::http::files::file_content(max as u64))
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(e: &Exchange) -> String {
        String::from_utf8(e.bytes.clone()).unwrap()
    }

    #[test]
    fn baseline_shapes_rotate_by_connection_and_sums_vary() {
        let mut get = Requests::new(&Shape::Baseline, 0, "h");
        let e = get.next(false);
        assert_eq!(
            text(&e),
            "GET /baseline11?a=0&b=0 HTTP/1.1\r\nHost: h\r\n\r\n"
        );
        assert_eq!(e.expects, [Expect::Text("0".into())]);
        let e = get.next(false);
        assert_eq!(
            text(&e),
            "GET /baseline11?a=1&b=7 HTTP/1.1\r\nHost: h\r\n\r\n"
        );
        assert_eq!(e.expects, [Expect::Text("8".into())]);
        let e = Requests::new(&Shape::Baseline, 1, "h").next(true);
        let t = text(&e);
        assert!(
            t.starts_with("POST /baseline11?a=0&b=31 HTTP/1.1\r\n"),
            "{t}"
        );
        assert!(t.contains("Connection: close\r\n") && t.ends_with("Content-Length: 2\r\n\r\n20"));
        assert_eq!(e.expects, [Expect::Text("51".into())]);
        let e = Requests::new(&Shape::ShortLived, 2, "h").next(false);
        let t = text(&e);
        assert!(
            t.ends_with("Transfer-Encoding: chunked\r\n\r\n2\r\n20\r\n0\r\n\r\n"),
            "{t}"
        );
        assert_eq!(e.expects, [Expect::Text("82".into())]);
    }

    #[test]
    fn pipelines_json_and_uploads() {
        let e = Requests::new(&Shape::Pipelined, 5, "h").next(false);
        assert_eq!(text(&e).matches("GET /pipeline HTTP/1.1\r\n").count(), 16);
        assert_eq!(e.expects.len(), 16);
        let items: Arc<[Value]> = Arc::from(Vec::new());
        let mut j = Requests::new(&Shape::Json(items), 1, "h");
        assert!(text(&j.next(false)).starts_with("GET /json/5?m=7 HTTP/1.1\r\n"));
        assert_eq!(j.next(false).expects, [Expect::Json { count: 10, m: 2 }]);
        let mut u = Requests::new(&Shape::Upload(upload_body()), 3, "h");
        let e = u.next(false);
        assert_eq!(e.upload_bytes, 20_000_000);
        assert!(text(&e).ends_with("Content-Length: 20000000\r\n\r\n"));
        assert_eq!(e.expects, [Expect::Text("20000000".into())]);
        assert_eq!(u.next(false).upload_bytes, 500_000);
        assert_eq!(u.warm_up().upload_bytes, 500_000);
        assert!(upload_body().len() >= 20_000_000);
    }
}
