//! Step 3 of a request's story: what to answer for a file (conditionals, ranges) and the bytes
//! of the response head.

use std::io::Write;

use super::encoding::Coding;
use super::parse::Request;
use super::ranges::{self, if_range_matches, Part, Ranges};
use super::status::Status;

/// What the server knows of a file it serves (from `statx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime_secs: i64,
    /// Nanoseconds of the modification time.
    pub mtime_nsec: u32,
    /// Inode number.
    pub ino: u64,
    /// Device (major << 32 | minor).
    pub dev: u64,
    /// File type bits (`S_IFMT` part of the mode).
    pub kind: u32,
}

impl FileMeta {
    /// From a statx result.
    pub fn from_statx(s: &libc::statx) -> FileMeta {
        FileMeta {
            size: s.stx_size,
            mtime_secs: s.stx_mtime.tv_sec,
            mtime_nsec: s.stx_mtime.tv_nsec,
            ino: s.stx_ino,
            dev: u64::from(s.stx_dev_major) << 32 | u64::from(s.stx_dev_minor),
            kind: u32::from(s.stx_mode) & libc::S_IFMT,
        }
    }

    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.kind == libc::S_IFREG
    }

    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.kind == libc::S_IFDIR
    }

    /// A strong validator: changes whenever the inode, size or modification time does.
    pub fn etag(&self) -> String {
        format!(
            "\"{:x}-{:x}-{:x}.{:x}\"",
            self.ino, self.size, self.mtime_secs, self.mtime_nsec
        )
    }

    /// The validator of a file served with `coding` (a precompressed variant): its own
    /// [`etag`](Self::etag) with the coding appended, so that it never equals the identity
    /// file's, nor the variant's own when it is asked for by name (`/a.css.gz`).
    pub fn etag_for(&self, coding: Option<Coding>) -> String {
        match coding {
            None => self.etag(),
            Some(c) => format!(
                "\"{:x}-{:x}-{:x}.{:x}-{}\"",
                self.ino,
                self.size,
                self.mtime_secs,
                self.mtime_nsec,
                c.name()
            ),
        }
    }

    /// Modified in the same second as `other` or later: a precompressed variant's freshness.
    /// Whole seconds, the coarsest the compressors keep: `brotli -k` copies the source's
    /// modification time truncated to the second (`gzip -k` and `zstd` keep nanoseconds), so a
    /// finer comparison would call every brotli variant stale.
    pub fn not_older_than(&self, other: &FileMeta) -> bool {
        self.mtime_secs >= other.mtime_secs
    }
}

/// The answer for a file that exists, before any byte of it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// 304.
    NotModified,
    /// 412.
    PreconditionFailed,
    /// 200, the whole file.
    Full,
    /// 206, `len` bytes from `start`.
    Partial {
        /// First byte.
        start: u64,
        /// Bytes.
        len: u64,
    },
    /// 206 `multipart/byteranges`: these parts, in this order (see `ranges`).
    Multi(Vec<Part>),
    /// 416.
    Unsatisfiable,
}

/// The conditionals in RFC 9110's order (13.2.2), then `Range`:
/// 1. `If-Match`: none of its tags matches strongly (`*` matches any file): 412;
/// 2. else `If-Unmodified-Since` (a valid date): the file is newer: 412;
/// 3. `If-None-Match`: one of its tags matches weakly (or `*`): 304;
/// 4. else `If-Modified-Since` (a valid date): the file is not newer: 304;
/// 5. `Range` (with `If-Range`, at most `max_ranges` parts: the rules are `ranges`'s).
///
/// Only GET and HEAD come here, so a failed `If-None-Match` is always 304. `(etag,
/// last_modified)`: the file's validators as the head says them.
pub fn decide(
    req: &Request,
    meta: &FileMeta,
    (etag, last_modified): (&str, &str),
    max_ranges: usize,
) -> Decision {
    if let Some(im) = &req.if_match {
        if !etag_matches(im, etag, Compare::Strong) {
            return Decision::PreconditionFailed;
        }
    } else if let Some(ius) = req
        .if_unmodified_since
        .as_deref()
        .and_then(super::date::parse)
    {
        if meta.mtime_secs > ius {
            return Decision::PreconditionFailed;
        }
    }
    if let Some(inm) = &req.if_none_match {
        if etag_matches(inm, etag, Compare::Weak) {
            return Decision::NotModified;
        }
    } else if let Some(ims) = req
        .if_modified_since
        .as_deref()
        .and_then(super::date::parse)
    {
        if meta.mtime_secs <= ims {
            return Decision::NotModified;
        }
    }
    let Some(range) = &req.range else {
        return Decision::Full;
    };
    range_decision(req, range, meta.size, (etag, last_modified), max_ranges)
}

/// The `Range` part of [`decide`], apart so that a request without one never enters it.
#[cold]
fn range_decision(
    req: &Request,
    range: &[u8],
    size: u64,
    (etag, last_modified): (&str, &str),
    max_ranges: usize,
) -> Decision {
    if let Some(ir) = &req.if_range {
        if !if_range_matches(ir, etag, last_modified) {
            return Decision::Full;
        }
    }
    match ranges::parse(range, size, max_ranges) {
        Ranges::Whole => Decision::Full,
        Ranges::Unsatisfiable => Decision::Unsatisfiable,
        Ranges::One(Part { start, len }) => Decision::Partial { start, len },
        Ranges::Many(parts) => Decision::Multi(parts),
    }
}

/// How entity tags compare (RFC 9110, 8.8.3.2).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compare {
    /// Both strong and equal (`If-Match`).
    Strong,
    /// Equal once a `W/` prefix is ignored (`If-None-Match`).
    Weak,
}

/// Whether `header` (`*`, or a list of entity tags) matches the file's `etag`.
fn etag_matches(header: &[u8], etag: &str, how: Compare) -> bool {
    header.split(|&b| b == b',').any(|t| {
        let t = super::parse::trim(t);
        if t == b"*" {
            return true;
        }
        match t.strip_prefix(b"W/") {
            Some(weak) => how == Compare::Weak && weak == etag.as_bytes(),
            None => t == etag.as_bytes(),
        }
    })
}

/// The fields of a response head.
#[derive(Debug)]
pub struct Head<'a> {
    /// Status.
    pub status: Status,
    /// `Date`.
    pub date: &'a str,
    /// `Connection: keep-alive` (else `close`).
    pub keep_alive: bool,
    /// `Content-Type`.
    pub content_type: &'a str,
    /// `Content-Length`, none for 304.
    pub content_length: Option<u64>,
    /// `Last-Modified` and `ETag`, for a file.
    pub validators: Option<(&'a str, &'a str)>,
    /// `Content-Range`: `(start, len, size)` for 206, `(0, 0, size)` for 416's `*/size`.
    pub content_range: Option<(u64, u64, u64)>,
    /// `Accept-Ranges: bytes`.
    pub accept_ranges: bool,
    /// `Location` (301): the path as sent, then the query.
    pub location: Option<(&'a [u8], &'a [u8])>,
    /// `Content-Encoding` (a precompressed file), not written on 304.
    pub content_encoding: Option<&'static str>,
    /// `Vary: Accept-Encoding`.
    pub vary: bool,
    /// A `Cache-Control: VALUE\r\n` line (`crate::extras`), or empty.
    pub cache_control: &'a [u8],
    /// Lines every response carries (the security headers, `crate::extras`), or empty.
    pub extra_headers: &'a [u8],
}

impl<'a> Head<'a> {
    /// A head with only the fields every response has.
    pub fn new(status: Status, date: &'a str, keep_alive: bool) -> Head<'a> {
        Head {
            status,
            date,
            keep_alive,
            content_type: "text/plain",
            content_length: None,
            validators: None,
            content_range: None,
            accept_ranges: false,
            location: None,
            content_encoding: None,
            vary: false,
            cache_control: b"",
            extra_headers: b"",
        }
    }

    /// Appends the head, ending with the empty line, to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nServer: hoop\r\nDate: {}\r\n",
            self.status.code(),
            self.status.reason(),
            self.date
        );
        if self.status != Status::NotModified {
            let _ = write!(out, "Content-Type: {}\r\n", self.content_type);
            if let Some(coding) = self.content_encoding {
                let _ = write!(out, "Content-Encoding: {coding}\r\n");
            }
        }
        if let Some(n) = self.content_length {
            let _ = write!(out, "Content-Length: {n}\r\n");
        }
        if let Some((lm, etag)) = self.validators {
            let _ = write!(out, "Last-Modified: {lm}\r\nETag: {etag}\r\n");
        }
        match self.content_range {
            Some((_, _, size)) if self.status == Status::RangeNotSatisfiable => {
                let _ = write!(out, "Content-Range: bytes */{size}\r\n");
            }
            Some((start, len, size)) => {
                let _ = write!(
                    out,
                    "Content-Range: bytes {start}-{}/{size}\r\n",
                    start + len - 1
                );
            }
            None => {}
        }
        if self.accept_ranges {
            out.extend_from_slice(b"Accept-Ranges: bytes\r\n");
        }
        if self.vary {
            out.extend_from_slice(b"Vary: Accept-Encoding\r\n");
        }
        if self.status == Status::MethodNotAllowed {
            out.extend_from_slice(b"Allow: GET, HEAD\r\n");
        }
        if let Some((path, query)) = self.location {
            out.extend_from_slice(b"Location: ");
            out.extend_from_slice(path);
            out.push(b'/');
            out.extend_from_slice(query);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(self.cache_control);
        out.extend_from_slice(self.extra_headers);
        out.extend_from_slice(if self.keep_alive {
            b"Connection: keep-alive\r\n\r\n"
        } else {
            b"Connection: close\r\n\r\n"
        });
    }
}

/// Appends a complete short-text response for `status` (`head_only`: HEAD, no body).
pub fn write_status(out: &mut Vec<u8>, head: Head<'_>, head_only: bool) {
    let status = head.status;
    let body = format!("{} {}\n", status.code(), status.reason());
    let head = Head {
        content_length: Some(body.len() as u64),
        ..head
    };
    head.write(out);
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse, Parsed};

    fn req(headers: &str) -> Request {
        let text = format!("GET /a HTTP/1.1\r\nHost: t\r\n{headers}\r\n");
        match parse(text.as_bytes()) {
            Parsed::Complete { request, .. } => request,
            _ => panic!("{text:?}"),
        }
    }

    #[test]
    fn ranges_after_conditionals() {
        let meta = FileMeta {
            size: 100,
            mtime_secs: 784_111_777,
            mtime_nsec: 0,
            ino: 1,
            dev: 1,
            kind: libc::S_IFREG,
        };
        let etag = meta.etag();
        let lm = crate::date::format(meta.mtime_secs);
        let v = (&*etag, &*lm);
        let d = |h: &str, max| decide(&req(h), &meta, v, max);
        use Decision::*;
        assert_eq!(d("", 32), Full);
        assert_eq!(d("Range: bytes=0-9\r\n", 32), Partial { start: 0, len: 10 });
        assert_eq!(d("Range: bytes=0-9\r\n", 0), Full);
        assert_eq!(
            d("Range: bytes=0-9,20-29\r\n", 32),
            Multi(vec![
                Part { start: 0, len: 10 },
                Part { start: 20, len: 10 }
            ])
        );
        assert_eq!(d("Range: bytes=0-9,20-29\r\n", 1), Full);
        assert_eq!(d("Range: bytes=100-\r\n", 32), Unsatisfiable);
        // If-Range: the ETag, a weak one, the exact date, another date, garbage; none
        // without Range.
        let r = "Range: bytes=0-9,20-29\r\n";
        assert!(matches!(
            d(&format!("{r}If-Range: {etag}\r\n"), 32),
            Multi(_)
        ));
        assert_eq!(d(&format!("{r}If-Range: W/{etag}\r\n"), 32), Full);
        assert!(matches!(d(&format!("{r}If-Range: {lm}\r\n"), 32), Multi(_)));
        let other = crate::date::format(meta.mtime_secs + 1);
        assert_eq!(d(&format!("{r}If-Range: {other}\r\n"), 32), Full);
        assert_eq!(d(&format!("{r}If-Range: nonsense\r\n"), 32), Full);
        assert_eq!(d(&format!("If-Range: {etag}\r\n"), 32), Full);
        // Conditionals first.
        assert_eq!(d(&format!("{r}If-None-Match: {etag}\r\n"), 32), NotModified);
    }

    /// Every combination of RFC 9110's five conditionals, each absent, passing or failing
    /// (and the dates also malformed, which counts as absent), against the order of 13.2.2.
    #[test]
    fn conditionals_in_rfc_9110_order() {
        let meta = FileMeta {
            size: 100,
            mtime_secs: 784_111_777,
            mtime_nsec: 5,
            ino: 1,
            dev: 1,
            kind: libc::S_IFREG,
        };
        let etag = meta.etag();
        let lm = crate::date::format(meta.mtime_secs);
        let before = crate::date::format(meta.mtime_secs - 1);
        let v = (&*etag, &*lm);
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum C {
            Absent,
            Pass,
            Fail,
            Garbage,
        }
        use C::*;
        let all = [Absent, Pass, Fail, Garbage];
        let mut seen = 0;
        for im in all {
            for ius in all {
                for inm in all {
                    for ims in all {
                        for range in [false, true] {
                            let mut h = String::new();
                            match im {
                                Absent => {}
                                Pass => h += &format!("If-Match: \"x\", {etag}\r\n"),
                                // A weak tag never matches If-Match.
                                Fail => h += &format!("If-Match: W/{etag}, \"x\"\r\n"),
                                Garbage => h += "If-Match: *\r\n",
                            }
                            match ius {
                                Absent => {}
                                Pass => h += &format!("If-Unmodified-Since: {lm}\r\n"),
                                Fail => h += &format!("If-Unmodified-Since: {before}\r\n"),
                                Garbage => h += "If-Unmodified-Since: yesterday\r\n",
                            }
                            // "Pass" lets the request through: the tag differs, the file is newer.
                            match inm {
                                Absent => {}
                                Pass => h += "If-None-Match: \"other\"\r\n",
                                Fail => h += &format!("If-None-Match: W/{etag}\r\n"),
                                Garbage => h += "If-None-Match: *\r\n",
                            }
                            match ims {
                                Absent => {}
                                Pass => h += &format!("If-Modified-Since: {before}\r\n"),
                                Fail => h += &format!("If-Modified-Since: {lm}\r\n"),
                                Garbage => h += "If-Modified-Since: 1994\r\n",
                            }
                            if range {
                                h += "Range: bytes=0-9\r\n";
                            }
                            // The expected answer, step by step as 13.2.2 says.
                            let want = if im == Fail || (im == Absent && ius == Fail) {
                                Decision::PreconditionFailed
                            } else if matches!(inm, Fail | Garbage)
                                || (inm == Absent && ims == Fail)
                            {
                                Decision::NotModified
                            } else if range {
                                Decision::Partial { start: 0, len: 10 }
                            } else {
                                Decision::Full
                            };
                            let got = decide(&req(&h), &meta, v, 32);
                            assert_eq!(got, want, "{h}");
                            seen += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(seen, 512);
    }
}
