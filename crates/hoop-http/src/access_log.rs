//! The access log: one [`AccessLogEntry`] per answered request, given to a hook of the
//! caller's ([`Builder::access_log`](crate::Builder::access_log)), or printed on stdout by the
//! built-in logger ([`Config::access_log`](crate::Config::access_log)).

use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

/// An access-log hook: called on the serving thread, once per answered request, after its
/// response is written (before it is sent). It should be quick: the connection's thread waits
/// for it.
pub type AccessLog = Arc<dyn Fn(&AccessLogEntry<'_>) + Send + Sync>;

/// One answered request, as the access-log hook sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AccessLogEntry<'a> {
    /// The client's address, where known (not on io_uring direct descriptors, which have no
    /// `getpeername`).
    pub remote: Option<SocketAddr>,
    /// The request line; `None` when the request could not be parsed (answered with the
    /// error status, and the connection closed).
    pub request: Option<RequestLine<'a>>,
    /// The status code of the response.
    pub status: u16,
    /// Bytes of the response body (its `Content-Length`; 0 for `HEAD` and `304`).
    pub body_bytes: u64,
    /// When the response was written.
    pub time: SystemTime,
    /// The same time as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`), as in the `Date`
    /// header of the response.
    pub date: &'a str,
}

/// The request line of a logged request.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RequestLine<'a> {
    /// `GET`, `HEAD`, or `OTHER` for any other method (answered 405).
    pub method: &'a str,
    /// The request target as sent (not decoded; bytes, as a client may send non-UTF-8).
    pub target: &'a [u8],
    /// The HTTP minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
}

impl AccessLogEntry<'_> {
    /// Writes the entry as one line in the format of `hoop serve http --access-log`:
    /// `[DATE] "METHOD TARGET HTTP/1.x" STATUS` (the request `"-"` when it could not be
    /// parsed), the target written as its bytes, and a newline.
    pub fn write_line(&self, out: &mut impl Write) -> io::Result<()> {
        write!(out, "[{}] \"", self.date)?;
        match &self.request {
            Some(r) => {
                write!(out, "{} ", r.method)?;
                out.write_all(r.target)?;
                write!(out, " HTTP/1.{}", r.minor_version)?;
            }
            None => out.write_all(b"-")?,
        }
        writeln!(out, "\" {}", self.status)
    }
}

/// The line of [`write_line`](AccessLogEntry::write_line) without its newline (a target that
/// is not UTF-8 shown lossily).
impl fmt::Display for AccessLogEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = Vec::new();
        self.write_line(&mut line).map_err(|_| fmt::Error)?;
        line.pop();
        f.write_str(&String::from_utf8_lossy(&line))
    }
}

/// The built-in logger: [`write_line`](AccessLogEntry::write_line) on stdout.
pub fn stdout_logger() -> AccessLog {
    Arc::new(|entry: &AccessLogEntry<'_>| {
        let _ = entry.write_line(&mut io::stdout().lock());
    })
}

/// The hook as the serving threads hold it (so that what holds it can derive `Debug`).
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) AccessLog);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_of_hoop_serve_http() {
        let mut entry = AccessLogEntry {
            remote: None,
            request: Some(RequestLine {
                method: "GET",
                target: b"/a%20b?x=\xff",
                minor_version: 1,
            }),
            status: 200,
            body_bytes: 6,
            time: SystemTime::UNIX_EPOCH,
            date: "Thu, 01 Jan 1970 00:00:00 GMT",
        };
        let mut out = Vec::new();
        entry.write_line(&mut out).unwrap();
        assert_eq!(
            out,
            b"[Thu, 01 Jan 1970 00:00:00 GMT] \"GET /a%20b?x=\xff HTTP/1.1\" 200\n"
        );
        assert_eq!(
            entry.to_string(),
            "[Thu, 01 Jan 1970 00:00:00 GMT] \"GET /a%20b?x=\u{fffd} HTTP/1.1\" 200"
        );
        entry.request = None;
        entry.status = 400;
        assert_eq!(
            entry.to_string(),
            "[Thu, 01 Jan 1970 00:00:00 GMT] \"-\" 400"
        );
    }
}
