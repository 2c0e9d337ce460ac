//! Byte ranges (RFC 9110, 14): the `Range` header's `bytes=` set against a file's size,
//! `If-Range`, and the framing of a `multipart/byteranges` body. Every rule of the server's
//! ranges is kept here; `response::decide` applies them after the conditionals, and
//! `conn/parts.rs` sends the parts. (Plain std only: the fuzz target compiles this file on its
//! own.)
//!
//! The rules, as nginx's `max_ranges` (and Apache) draw them:
//! * `max_ranges` ([`Config::max_ranges`](crate::Config::max_ranges)) 0: ranges are off
//!   (no `Accept-Ranges`, every `Range` ignored); 1: single ranges only; N: up to N parts.
//! * A unit other than `bytes`, or any malformed spec (`bytes=5-1`, `bytes=x-`, `bytes=-`, an
//!   empty set) anywhere in the set: the header is ignored (200, the whole file).
//! * More specs than `max_ranges`, satisfiable or not: 200, the whole file.
//! * Unsatisfiable specs (starting at or past the end, `-0`) are dropped; none left: 416
//!   (`Content-Range: bytes */SIZE`); one left: a single-part 206.
//! * A suffix (`-N`, N > 0) of an empty file is satisfiable, and the whole representation
//!   (RFC 9110, 14.1.1 and 14.1.3), which no `Content-Range` can name: 200, the empty file.
//! * Two or more left: refused as abusive (200, the whole file; RFC 9110 14.2 allows
//!   ignoring the header) when any two overlap or their lengths add up past the file's size;
//!   else a 206 `multipart/byteranges`, parts in the order asked for.
//! * `If-Range` ([`if_range_matches`]): an entity tag compares strongly (a `W/` tag never
//!   matches), a date must equal `Last-Modified` byte for byte; anything else, or no match:
//!   the whole file. Without `Range` it is ignored.
//! * A multipart body is `--B\r\nContent-Type: T\r\nContent-Range: bytes a-b/size\r\n\r\n`
//!   and the part's bytes, `\r\n` after each part, and `--B--\r\n` at the end; its length is
//!   known before the first byte goes ([`Multipart::body_len`]). `B` ([`boundary`]) is 32
//!   hex digits derived from the ETag and a per-process seed: the same for a file's GET and
//!   HEAD, not guessable from outside.

use std::io::Write;

use super::parse::{parse_u64, trim};

/// One part of a range set: `len` bytes (at least 1) from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// First byte.
    pub start: u64,
    /// Bytes.
    pub len: u64,
}

/// What a `Range` header asks of a file of a given size ([`parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranges {
    /// Ignore the header: answer with the whole file.
    Whole,
    /// Nothing satisfiable: 416.
    Unsatisfiable,
    /// One part: an ordinary 206.
    One(Part),
    /// Two or more parts, in the order asked for: a `multipart/byteranges` 206.
    Many(Vec<Part>),
}

/// One spec of a set.
enum Spec {
    Malformed,
    /// Satisfiable only by the whole representation (a suffix of an empty file).
    Whole,
    Unsatisfiable,
    Ok(Part),
}

/// The `Range` value `value` against a file of `size` bytes, with at most `max_ranges` parts
/// (see the module's rules). Allocates only for two parts or more, never more than
/// `max_ranges` of them.
pub fn parse(value: &[u8], size: u64, max_ranges: usize) -> Ranges {
    if max_ranges == 0 {
        return Ranges::Whole;
    }
    let value = trim(value);
    let Some(eq) = value.iter().position(|&b| b == b'=') else {
        return Ranges::Whole;
    };
    if !trim(&value[..eq]).eq_ignore_ascii_case(b"bytes") {
        return Ranges::Whole;
    }
    let set = &value[eq + 1..];
    // Empty list elements are allowed and skipped (RFC 9110, 5.6.1).
    let specs = || {
        set.split(|&b| b == b',')
            .map(trim)
            .filter(|s| !s.is_empty())
    };
    let count = specs().count();
    if count == 0 || count > max_ranges {
        return Ranges::Whole;
    }
    if count == 1 {
        return match specs().next().map(|s| spec(s, size)) {
            Some(Spec::Ok(p)) => Ranges::One(p),
            Some(Spec::Unsatisfiable) => Ranges::Unsatisfiable,
            Some(Spec::Malformed | Spec::Whole) | None => Ranges::Whole,
        };
    }
    let mut parts = Vec::with_capacity(count);
    for s in specs() {
        match spec(s, size) {
            Spec::Malformed | Spec::Whole => return Ranges::Whole,
            Spec::Unsatisfiable => {}
            Spec::Ok(p) => parts.push(p),
        }
    }
    match parts.len() {
        0 => Ranges::Unsatisfiable,
        1 => Ranges::One(parts[0]),
        _ if abusive(&parts, size) => Ranges::Whole,
        _ => Ranges::Many(parts),
    }
}

/// Whether parts overlap, or add up to more than the file.
fn abusive(parts: &[Part], size: u64) -> bool {
    let total = parts
        .iter()
        .try_fold(0u64, |t, p| t.checked_add(p.len))
        .unwrap_or(u64::MAX);
    if total > size {
        return true;
    }
    let mut sorted = parts.to_vec();
    sorted.sort_unstable_by_key(|p| p.start);
    sorted
        .windows(2)
        .any(|w| w[1].start < w[0].start + w[0].len)
}

/// One `first-last`, `first-` or `-suffix` against `size`.
fn spec(s: &[u8], size: u64) -> Spec {
    let Some(dash) = s.iter().position(|&b| b == b'-') else {
        return Spec::Malformed;
    };
    let (first, last) = (trim(&s[..dash]), trim(&s[dash + 1..]));
    match (first.is_empty(), last.is_empty()) {
        // bytes=-N: the last N bytes.
        (true, false) => match parse_u64(last) {
            None => Spec::Malformed,
            Some(0) => Spec::Unsatisfiable,
            Some(_) if size == 0 => Spec::Whole,
            Some(n) => {
                let len = n.min(size);
                Spec::Ok(Part {
                    start: size - len,
                    len,
                })
            }
        },
        // bytes=A- and bytes=A-B.
        (false, _) => {
            let Some(a) = parse_u64(first) else {
                return Spec::Malformed;
            };
            let b = if last.is_empty() {
                u64::MAX
            } else {
                match parse_u64(last) {
                    Some(b) if b >= a => b,
                    _ => return Spec::Malformed,
                }
            };
            if a >= size {
                return Spec::Unsatisfiable;
            }
            let end = b.min(size - 1);
            Spec::Ok(Part {
                start: a,
                len: end - a + 1,
            })
        }
        (true, true) => Spec::Malformed,
    }
}

/// `If-Range` (RFC 9110, 13.1.5): whether the validator `value` still names the file whose
/// strong `etag` and `last_modified` are given. An entity tag matches only by the strong
/// comparison (a weak tag never does); a date only when it is the `Last-Modified` value
/// itself; anything else does not match (the whole file is sent).
pub fn if_range_matches(value: &[u8], etag: &str, last_modified: &str) -> bool {
    let v = trim(value);
    match v.first() {
        Some(b'"') => v == etag.as_bytes(),
        Some(b'W') if v.starts_with(b"W/") => false,
        Some(_) => v == last_modified.as_bytes(),
        None => false,
    }
}

/// The boundary of a multipart answer for the file whose validator is `etag`: 32 hex digits,
/// two 64-bit FNV-1a hashes of the ETag under a seed drawn once per process (the process id,
/// the time it first served parts, an address in it). The same ETag gives the same boundary
/// in one process, so a HEAD's head equals its GET's.
pub fn boundary(etag: &str) -> String {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let here = &SEED as *const _ as u64;
        fnv(
            fnv(0xcbf2_9ce4_8422_2325, &now.to_le_bytes()),
            &(u64::from(std::process::id()) ^ here).to_le_bytes(),
        )
    });
    let a = fnv(seed, etag.as_bytes());
    let b = fnv(a ^ 0x9e37_79b9_7f4a_7c15, etag.as_bytes());
    format!("{a:016x}{b:016x}")
}

/// FNV-1a, 64 bits, from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A `multipart/byteranges` body to send: its parts and what frames them.
#[derive(Debug, Clone)]
pub struct Multipart {
    /// The boundary ([`boundary`]).
    pub boundary: String,
    /// The parts, in the order asked for.
    pub parts: Vec<Part>,
    /// Each part's `Content-Type` (the file's).
    pub content_type: &'static str,
    /// The file's size (each part's `Content-Range` says it).
    pub size: u64,
}

impl Multipart {
    /// The response's `Content-Type` value.
    pub fn content_type_value(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }

    /// Appends what goes before part `i`'s bytes: the end of the previous part (`\r\n`), the
    /// delimiter and the part's head.
    pub fn write_part_head(&self, out: &mut Vec<u8>, i: usize) {
        let p = self.parts[i];
        if i > 0 {
            out.extend_from_slice(b"\r\n");
        }
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            "--{}\r\nContent-Type: {}\r\nContent-Range: bytes {}-{}/{}\r\n\r\n",
            self.boundary,
            self.content_type,
            p.start,
            p.start + p.len - 1,
            self.size
        );
    }

    /// Appends what follows the last part's bytes: its `\r\n` and the close delimiter.
    pub fn write_end(&self, out: &mut Vec<u8>) {
        let _ = write!(out, "\r\n--{}--\r\n", self.boundary);
    }

    /// The body's exact length: every part's head and bytes, and the end.
    pub fn body_len(&self) -> u64 {
        let mut scratch = Vec::with_capacity(256);
        let mut total = 0u64;
        for (i, p) in self.parts.iter().enumerate() {
            scratch.clear();
            self.write_part_head(&mut scratch, i);
            total += scratch.len() as u64 + p.len;
        }
        scratch.clear();
        self.write_end(&mut scratch);
        total + scratch.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: u64, len: u64) -> Part {
        Part { start, len }
    }

    fn one(start: u64, len: u64) -> Ranges {
        Ranges::One(p(start, len))
    }

    #[test]
    fn single_ranges() {
        use Ranges::*;
        assert_eq!(parse(b"bytes=0-9", 100, 32), one(0, 10));
        assert_eq!(parse(b"bytes=90-", 100, 32), one(90, 10));
        assert_eq!(parse(b"bytes=90-1000", 100, 32), one(90, 10));
        assert_eq!(parse(b"bytes=-10", 100, 32), one(90, 10));
        assert_eq!(parse(b"bytes=-1000", 100, 32), one(0, 100));
        assert_eq!(parse(b" Bytes = 1 - 2 ", 100, 32), one(1, 2));
        assert_eq!(parse(b"bytes=100-", 100, 32), Unsatisfiable);
        assert_eq!(parse(b"bytes=-0", 100, 32), Unsatisfiable);
        // A suffix of an empty file is the whole (empty) file; a -0 is never satisfiable.
        assert_eq!(parse(b"bytes=-5", 0, 32), Whole);
        assert_eq!(parse(b"bytes=-5,0-1", 0, 32), Whole);
        assert_eq!(parse(b"bytes=-0", 0, 32), Unsatisfiable);
        assert_eq!(parse(b"bytes=0-", 0, 32), Unsatisfiable);
        assert_eq!(parse(b"bytes=5-1", 100, 32), Whole);
        assert_eq!(parse(b"items=0-1", 100, 32), Whole);
        assert_eq!(parse(b"bytes=x-1", 100, 32), Whole);
        assert_eq!(parse(b"bytes=-", 100, 32), Whole);
        assert_eq!(parse(b"bytes=", 100, 32), Whole);
        assert_eq!(parse(b"bytes=,,", 100, 32), Whole);
        assert_eq!(parse(b"bytes 0-1", 100, 32), Whole);
        assert_eq!(parse(b"bytes=0-99999999999999999999", 100, 32), Whole);
        let big = 5u64 << 30;
        assert_eq!(
            parse(b"bytes=4294967296-", big, 32),
            one(1 << 32, big - (1 << 32))
        );
    }

    #[test]
    fn several_ranges() {
        use Ranges::*;
        assert_eq!(
            parse(b"bytes=0-1,5-6", 100, 32),
            Many(vec![p(0, 2), p(5, 2)])
        );
        // In the order asked for; empty elements skipped; adjacent parts are not overlapping.
        assert_eq!(
            parse(b"bytes=-10, ,20-29,0-9,10-19", 100, 32),
            Many(vec![p(90, 10), p(20, 10), p(0, 10), p(10, 10)])
        );
        // Unsatisfiable ones dropped: one left is a single range, none left is 416.
        assert_eq!(parse(b"bytes=200-300,0-1", 100, 32), one(0, 2));
        assert_eq!(
            parse(b"bytes=200-,0-1,-0,4-5", 100, 32),
            Many(vec![p(0, 2), p(4, 2)])
        );
        assert_eq!(parse(b"bytes=200-,100-,-0", 100, 32), Unsatisfiable);
        // A malformed spec anywhere: ignored.
        assert_eq!(parse(b"bytes=0-1,x", 100, 32), Whole);
        assert_eq!(parse(b"bytes=0-1,5-3", 100, 32), Whole);
        assert_eq!(parse(b"bytes=200-,5-3", 100, 32), Whole);
        // Overlapping, or more than the file: refused.
        assert_eq!(parse(b"bytes=0-10,10-20", 100, 32), Whole);
        assert_eq!(parse(b"bytes=50-60,0-50", 100, 32), Whole);
        assert_eq!(parse(b"bytes=0-,-1", 100, 32), Whole);
        assert_eq!(parse(b"bytes=0-0,0-0", 100, 32), Whole);
        assert!(abusive(&[p(0, 60), p(60, 60)], 100));
    }

    #[test]
    fn the_part_bound() {
        use Ranges::*;
        assert_eq!(parse(b"bytes=0-1", 100, 0), Whole);
        assert_eq!(parse(b"bytes=0-1", 100, 1), one(0, 2));
        assert_eq!(parse(b"bytes=0-1,5-6", 100, 1), Whole);
        assert_eq!(
            parse(b"bytes=0-1,5-6", 100, 2),
            Many(vec![p(0, 2), p(5, 2)])
        );
        assert_eq!(parse(b"bytes=0-1,5-6,8-9", 100, 2), Whole);
        // Unsatisfiable specs count too.
        assert_eq!(parse(b"bytes=0-1,200-,300-", 100, 2), Whole);
        let set: Vec<String> = (0..33).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
        let set = format!("bytes={}", set.join(","));
        assert_eq!(parse(set.as_bytes(), 100, 32), Whole);
        match parse(set.as_bytes(), 100, 33) {
            Many(parts) => assert_eq!(parts.len(), 33),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn if_range() {
        let (etag, lm) = ("\"1-2-3.4\"", "Sun, 06 Nov 1994 08:49:37 GMT");
        assert!(if_range_matches(b"\"1-2-3.4\"", etag, lm));
        assert!(if_range_matches(b" \"1-2-3.4\" ", etag, lm));
        assert!(!if_range_matches(b"W/\"1-2-3.4\"", etag, lm));
        assert!(!if_range_matches(b"\"1-2-3.5\"", etag, lm));
        assert!(if_range_matches(lm.as_bytes(), etag, lm));
        assert!(!if_range_matches(
            b"Sun, 06 Nov 1994 08:49:38 GMT",
            etag,
            lm
        ));
        // Another form of the same date is not the Last-Modified value.
        assert!(!if_range_matches(
            b"Sunday, 06-Nov-94 08:49:37 GMT",
            etag,
            lm
        ));
        assert!(!if_range_matches(b"garbage", etag, lm));
        assert!(!if_range_matches(b"", etag, lm));
        assert!(!if_range_matches(b"*", etag, lm));
        // A weak validator of ours (none today) never matches either.
        assert!(!if_range_matches(b"W/\"x\"", "W/\"x\"", lm));
    }

    #[test]
    fn framing() {
        let m = Multipart {
            boundary: boundary("\"e\""),
            parts: vec![p(0, 2), p(5, 3)],
            content_type: "text/plain",
            size: 10,
        };
        assert_eq!(m.boundary.len(), 32);
        assert!(m.boundary.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(m.boundary, boundary("\"e\""));
        assert_ne!(m.boundary, boundary("\"f\""));
        let file = b"0123456789";
        let mut body = Vec::new();
        for (i, part) in m.parts.iter().enumerate() {
            m.write_part_head(&mut body, i);
            body.extend_from_slice(&file[part.start as usize..(part.start + part.len) as usize]);
        }
        m.write_end(&mut body);
        let b = &m.boundary;
        let want = format!(
            "--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n01\r\n\
             --{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 5-7/10\r\n\r\n567\r\n\
             --{b}--\r\n"
        );
        assert_eq!(String::from_utf8(body.clone()).unwrap(), want);
        assert_eq!(m.body_len(), body.len() as u64);
        assert_eq!(
            m.content_type_value(),
            format!("multipart/byteranges; boundary={b}")
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::{parse, Ranges};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// Any bytes, any size and bound: no panic, parts inside the file, at most the bound,
        /// never overlapping.
        #[test]
        fn any_bytes(bytes in vec(any::<u8>(), 0..256), size in 0u64..1000, max in 0usize..40) {
            check(&bytes, size, max)?;
        }

        /// Plausible sets.
        #[test]
        fn plausible_sets(
            specs in vec("[0-9]{0,4}-[0-9]{0,4}", 0..40),
            size in 0u64..10_000,
            max in 0usize..40,
        ) {
            let v = format!("bytes={}", specs.join(","));
            check(v.as_bytes(), size, max)?;
        }
    }

    fn check(bytes: &[u8], size: u64, max: usize) -> Result<(), TestCaseError> {
        match parse(bytes, size, max) {
            Ranges::Whole => {}
            Ranges::Unsatisfiable => prop_assert!(max > 0),
            Ranges::One(p) => {
                prop_assert!(max >= 1 && p.len > 0 && p.start + p.len <= size);
            }
            Ranges::Many(parts) => {
                prop_assert!(parts.len() >= 2 && parts.len() <= max);
                let mut sorted = parts.clone();
                sorted.sort_by_key(|p| p.start);
                for w in sorted.windows(2) {
                    prop_assert!(w[0].start + w[0].len <= w[1].start);
                }
                for p in &parts {
                    prop_assert!(p.len > 0 && p.start + p.len <= size);
                }
            }
        }
        Ok(())
    }
}
