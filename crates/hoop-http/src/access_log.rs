//! The access log: one [`AccessLogEntry`] per answered request, given to a hook of the
//! caller's ([`Builder::access_log`](crate::Builder::access_log)), or printed on stdout by the
//! built-in logger ([`Config::access_log`](crate::Config::access_log)). [`AccessLogWriter`]
//! writes the lines to a file (or any writer) and survives a full disk: a line it cannot write
//! is counted as lost and said on stderr once per outage; the server keeps serving.

use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The request came on an HTTP/2 stream (logged as `HTTP/2.0`, as nginx does).
    pub http2: bool,
    /// `Referer`, as sent (the first, when several).
    pub referer: Option<&'a [u8]>,
    /// `User-Agent`, as sent (the first, when several).
    pub user_agent: Option<&'a [u8]>,
}

impl RequestLine<'_> {
    /// The protocol as logged: `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0`.
    pub fn version(&self) -> &'static str {
        match (self.http2, self.minor_version) {
            (true, _) => "HTTP/2.0",
            (false, 0) => "HTTP/1.0",
            (false, _) => "HTTP/1.1",
        }
    }
}

/// How the built-in logger and [`AccessLogWriter`] write an entry
/// ([`AccessLogEntry::write_as`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// `[DATE] "METHOD TARGET HTTP/1.x" STATUS` ([`AccessLogEntry::write_line`]).
    #[default]
    Hoop,
    /// nginx's `combined`: `ADDR - - [06/Dec/2026:12:00:00 +0000] "GET /a HTTP/1.1" 200 13
    /// "REFERER" "USER-AGENT"` (`-` for what is unknown; `"`, `\\`, control and non-ASCII bytes
    /// as `\xHH`, as nginx escapes them).
    Combined,
    /// One JSON object per line: `{"time":"2026-12-06T12:00:00Z","remote":"127.0.0.1:5000",
    /// "method":"GET","target":"/a","version":"HTTP/1.1","status":200,"body_bytes":13,
    /// "referer":null,"user_agent":"curl/8.0"}` (`request` fields null when it could not be
    /// parsed; strings escaped as JSON, bytes that are not UTF-8 as U+FFFD).
    Json,
}

impl std::str::FromStr for AccessLogFormat {
    type Err = String;

    /// `hoop`, `combined` or `json`.
    fn from_str(s: &str) -> Result<AccessLogFormat, String> {
        match s {
            "hoop" => Ok(AccessLogFormat::Hoop),
            "combined" => Ok(AccessLogFormat::Combined),
            "json" => Ok(AccessLogFormat::Json),
            _ => Err(format!(
                "unknown access-log format {s:?} (hoop, combined or json)"
            )),
        }
    }
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
                write!(out, " {}", r.version())?;
            }
            None => out.write_all(b"-")?,
        }
        writeln!(out, "\" {}", self.status)
    }
}

impl AccessLogEntry<'_> {
    /// Writes the entry as one line of `format`, with its newline.
    pub fn write_as(&self, format: AccessLogFormat, out: &mut impl Write) -> io::Result<()> {
        match format {
            AccessLogFormat::Hoop => self.write_line(out),
            AccessLogFormat::Combined => self.write_combined(out),
            AccessLogFormat::Json => self.write_json(out),
        }
    }

    fn write_combined(&self, out: &mut impl Write) -> io::Result<()> {
        match self.remote {
            Some(a) => write!(out, "{}", a.ip())?,
            None => out.write_all(b"-")?,
        }
        let secs = self
            .time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        write!(out, " - - [{}] \"", crate::date::common_log(secs))?;
        match &self.request {
            Some(r) => {
                write!(out, "{} ", r.method)?;
                escape_nginx(out, r.target)?;
                write!(out, " {}", r.version())?;
            }
            None => out.write_all(b"-")?,
        }
        write!(out, "\" {} {} \"", self.status, self.body_bytes)?;
        let field = |out: &mut dyn Write, v: Option<&[u8]>| match v {
            Some(v) => escape_nginx(out, v),
            None => out.write_all(b"-"),
        };
        field(out, self.request.as_ref().and_then(|r| r.referer))?;
        out.write_all(b"\" \"")?;
        field(out, self.request.as_ref().and_then(|r| r.user_agent))?;
        out.write_all(b"\"\n")
    }

    fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        let secs = self
            .time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        write!(
            out,
            "{{\"time\":\"{}\",\"remote\":",
            crate::date::rfc3339(secs)
        )?;
        match self.remote {
            Some(a) => write!(out, "\"{a}\"")?,
            None => out.write_all(b"null")?,
        }
        let r = self.request.as_ref();
        out.write_all(b",\"method\":")?;
        json_str(out, r.map(|r| r.method.as_bytes()))?;
        out.write_all(b",\"target\":")?;
        json_str(out, r.map(|r| r.target))?;
        out.write_all(b",\"version\":")?;
        match r {
            Some(r) => write!(out, "\"{}\"", r.version())?,
            None => out.write_all(b"null")?,
        }
        write!(
            out,
            ",\"status\":{},\"body_bytes\":{},\"referer\":",
            self.status, self.body_bytes
        )?;
        json_str(out, r.and_then(|r| r.referer))?;
        out.write_all(b",\"user_agent\":")?;
        json_str(out, r.and_then(|r| r.user_agent))?;
        out.write_all(b"}\n")
    }
}

/// `v` as nginx writes a variable into its log: `"`, `\\`, control bytes and bytes past ASCII
/// as `\xHH`.
fn escape_nginx(out: &mut dyn Write, v: &[u8]) -> io::Result<()> {
    for &b in v {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            write!(out, "\\x{b:02X}")?;
        } else {
            out.write_all(&[b])?;
        }
    }
    Ok(())
}

/// `v` as a JSON string (`null` for none), invalid UTF-8 as U+FFFD.
fn json_str(out: &mut dyn Write, v: Option<&[u8]>) -> io::Result<()> {
    let Some(v) = v else {
        return out.write_all(b"null");
    };
    out.write_all(b"\"")?;
    for c in String::from_utf8_lossy(v).chars() {
        match c {
            '"' => out.write_all(b"\\\"")?,
            '\\' => out.write_all(b"\\\\")?,
            c if (c as u32) < 0x20 || c == '\u{7f}' => write!(out, "\\u{:04x}", c as u32)?,
            c => write!(out, "{c}")?,
        }
    }
    out.write_all(b"\"")
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

/// The built-in logger: [`write_line`](AccessLogEntry::write_line) on stdout, through an
/// [`AccessLogWriter`] (so that stdout redirected to a file on a full disk is said on stderr,
/// not ignored).
pub fn stdout_logger() -> AccessLog {
    stdout_logger_as(AccessLogFormat::Hoop)
}

/// [`stdout_logger`] writing `format`.
pub fn stdout_logger_as(format: AccessLogFormat) -> AccessLog {
    let out = AccessLogWriter::new("stdout", io::stdout()).with_format(format);
    Arc::new(move |entry: &AccessLogEntry<'_>| out.log(entry))
}

/// Access-log lines written to a file (or any writer), one [`write_line`](AccessLogEntry::write_line)
/// per request, each line handed to the writer whole (one `write(2)` to a file opened by
/// [`append`](Self::append), which appends).
///
/// A write error (`ENOSPC` on a full disk, `EIO`) never stops the server and is never
/// ignored: the line is counted in [`lines_lost`](Self::lines_lost), and the first failure of
/// an outage prints one line on stderr (`hoop-http: access log NAME: ERROR; ...`); the lines
/// after it are only counted until a write succeeds again, which prints a line saying how many
/// were lost. A line cut short by the error (part of it landed) is ended with a newline before
/// the next one, so every line of the file after an outage is whole or a visibly cut prefix.
/// Writes block the serving thread (a local file's page cache: quick; a slow disk slows the
/// server, as a full pipe on stdout would).
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let log = hoop_http::AccessLogWriter::append("access.log")?;
/// let server = hoop_http::Server::builder("www")
///     .access_log(log.hook())
///     .build()?;
/// # let _ = server; Ok(())
/// # }
/// ```
pub struct AccessLogWriter {
    name: String,
    format: AccessLogFormat,
    out: Mutex<LogOut>,
    written: AtomicU64,
    lost: AtomicU64,
    outages: AtomicU64,
}

/// What the lock guards: the writer, a reused line buffer, and the state of an outage.
struct LogOut {
    writer: Box<dyn Write + Send>,
    line: Vec<u8>,
    /// Lines lost since the last successful write (0: no outage).
    lost_now: u64,
    /// The last failed line landed in part: the next write starts with a newline.
    torn: bool,
}

impl fmt::Debug for AccessLogWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessLogWriter")
            .field("name", &self.name)
            .field("lines_written", &self.lines_written())
            .field("lines_lost", &self.lines_lost())
            .finish()
    }
}

impl AccessLogWriter {
    /// Opens (creating it, mode 0644) the file at `path` for appending.
    pub fn append(path: impl AsRef<Path>) -> io::Result<Arc<AccessLogWriter>> {
        let path = path.as_ref();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(AccessLogWriter::new(path.display().to_string(), file))
    }

    /// Lines to `writer`, named `name` in the lines it prints on stderr.
    pub fn new(
        name: impl Into<String>,
        writer: impl Write + Send + 'static,
    ) -> Arc<AccessLogWriter> {
        Arc::new(AccessLogWriter {
            name: name.into(),
            format: AccessLogFormat::Hoop,
            out: Mutex::new(LogOut {
                writer: Box::new(writer),
                line: Vec::with_capacity(256),
                lost_now: 0,
                torn: false,
            }),
            written: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            outages: AtomicU64::new(0),
        })
    }

    /// The same writer, writing `format` ([`AccessLogFormat::Hoop`] unless said): for a
    /// writer just made, before its first line.
    pub fn with_format(self: Arc<Self>, format: AccessLogFormat) -> Arc<AccessLogWriter> {
        match Arc::try_unwrap(self) {
            Ok(mut w) => {
                w.format = format;
                Arc::new(w)
            }
            // Shared already: a new writer would split its counts; keep it as it is.
            Err(this) => this,
        }
    }

    /// The hook for [`Builder::access_log`](crate::Builder::access_log).
    pub fn hook(self: &Arc<Self>) -> impl Fn(&AccessLogEntry<'_>) + Send + Sync + 'static {
        let this = self.clone();
        move |entry: &AccessLogEntry<'_>| this.log(entry)
    }

    /// Writes one entry's line (see the type's docs for errors).
    pub fn log(&self, entry: &AccessLogEntry<'_>) {
        // A panic elsewhere while holding the lock leaves nothing half-done that matters here.
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let out = &mut *out;
        out.line.clear();
        if out.torn {
            out.line.push(b'\n');
        }
        // Writing into a Vec cannot fail.
        let _ = entry.write_as(self.format, &mut out.line);
        let (landed, res) = write_counted(&mut *out.writer, &out.line);
        match res {
            Ok(()) => {
                out.torn = false;
                self.written.fetch_add(1, Ordering::Relaxed);
                if out.lost_now > 0 {
                    let _ = writeln!(
                        io::stderr(),
                        "hoop-http: access log {}: writing again; {} lines lost",
                        self.name,
                        out.lost_now
                    );
                    out.lost_now = 0;
                }
            }
            Err(e) => {
                // Bytes of this line landed (past a newline written for a torn one): the
                // next line ends it first.
                let lead = usize::from(out.torn);
                out.torn = landed > lead || (out.torn && landed == 0);
                self.lost.fetch_add(1, Ordering::Relaxed);
                if out.lost_now == 0 {
                    self.outages.fetch_add(1, Ordering::Relaxed);
                    let _ = writeln!(
                        io::stderr(),
                        "hoop-http: access log {}: {e}; lines are counted as lost until a \
                         write succeeds",
                        self.name
                    );
                }
                out.lost_now += 1;
            }
        }
    }

    /// Lines written.
    pub fn lines_written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Lines that could not be written (or were cut short) because a write failed.
    pub fn lines_lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Outages: runs of failed lines, each said once on stderr.
    pub fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }
}

/// Writes all of `buf` and flushes (stdout's line buffer); returns how many bytes of `buf`
/// the writer took, and the first error (`Interrupted` is retried, a write of 0 bytes is
/// `WriteZero`).
fn write_counted(w: &mut dyn Write, buf: &[u8]) -> (usize, io::Result<()>) {
    let mut at = 0;
    while at < buf.len() {
        match w.write(&buf[at..]) {
            Ok(0) => return (at, Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (at, Err(e)),
        }
    }
    (at, w.flush())
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
                http2: false,
                referer: None,
                user_agent: None,
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

    fn line(entry: &AccessLogEntry<'_>, format: AccessLogFormat) -> String {
        let mut out = Vec::new();
        entry.write_as(format, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn nginx_combined_and_json_lines() {
        let entry = AccessLogEntry {
            remote: Some("127.0.0.1:5000".parse().unwrap()),
            request: Some(RequestLine {
                method: "GET",
                target: b"/a\"b\xff",
                minor_version: 1,
                http2: false,
                referer: Some(b"http://x/"),
                user_agent: Some(b"curl/8.0 \"q\""),
            }),
            status: 200,
            body_bytes: 13,
            time: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_558_400),
            date: "",
        };
        assert_eq!(
            line(&entry, AccessLogFormat::Combined),
            "127.0.0.1 - - [06/Dec/2026:12:00:00 +0000] \"GET /a\\x22b\\xFF HTTP/1.1\" 200 13 \
             \"http://x/\" \"curl/8.0 \\x22q\\x22\"\n"
        );
        assert_eq!(
            line(&entry, AccessLogFormat::Json),
            "{\"time\":\"2026-12-06T12:00:00Z\",\"remote\":\"127.0.0.1:5000\",\"method\":\"GET\",\
             \"target\":\"/a\\\"b\u{fffd}\",\"version\":\"HTTP/1.1\",\"status\":200,\"body_bytes\":13,\
             \"referer\":\"http://x/\",\"user_agent\":\"curl/8.0 \\\"q\\\"\"}\n"
        );
        let bare = AccessLogEntry {
            remote: None,
            request: None,
            status: 400,
            body_bytes: 16,
            ..entry
        };
        assert_eq!(
            line(&bare, AccessLogFormat::Combined),
            "- - - [06/Dec/2026:12:00:00 +0000] \"-\" 400 16 \"-\" \"-\"\n"
        );
        assert_eq!(
            line(&bare, AccessLogFormat::Json),
            "{\"time\":\"2026-12-06T12:00:00Z\",\"remote\":null,\"method\":null,\"target\":null,\
             \"version\":null,\"status\":400,\"body_bytes\":16,\"referer\":null,\"user_agent\":null}\n"
        );
        // Every JSON line parses.
        for e in [&entry, &bare] {
            let text = line(e, AccessLogFormat::Json);
            assert!(text.starts_with('{') && text.ends_with("}\n"));
        }
        assert_eq!("combined".parse(), Ok(AccessLogFormat::Combined));
        assert!("apache".parse::<AccessLogFormat>().is_err());
    }
}
