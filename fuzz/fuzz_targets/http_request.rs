//! The static-file server's request parser, path resolution, `Accept-Encoding` parser and
//! `Range` parser (crates/hoop-http/src/parse.rs, resolve.rs, encoding.rs and ranges.rs,
//! compiled here as they are): no panic, no hang, no resolved path that leaves the root
//! (absolute, a `..` or `.` segment, an empty segment, a NUL), no coding chosen that the client
//! gave weight 0, and no range outside the file, overlapping another, or past the part bound.
#![no_main]
#![allow(dead_code)]

// At the crate root (not in an inline module, whose `#[path]`s would go through a directory
// that does not exist in a fresh clone): `parse.rs` and `resolve.rs` name their neighbours
// as `super::config` and `super::status`.
// `config.rs` names the types of `cache_control.rs`, `config_error.rs` and `error_page.rs`.
#[path = "../../crates/hoop-http/src/cache_control.rs"]
mod cache_control;
#[path = "../../crates/hoop-http/src/config.rs"]
mod config;
#[path = "../../crates/hoop-http/src/config_error.rs"]
mod config_error;
#[path = "../../crates/hoop-http/src/encoding.rs"]
mod encoding;
#[path = "../../crates/hoop-http/src/error_page.rs"]
mod error_page;
#[path = "../../crates/hoop-http/src/parse.rs"]
mod parse;
#[path = "../../crates/hoop-http/src/ranges.rs"]
mod ranges;
#[path = "../../crates/hoop-http/src/resolve.rs"]
mod resolve;
#[path = "../../crates/hoop-http/src/status.rs"]
mod status;

use encoding::Accepted;
use parse::{parse, Parsed};
use resolve::decode;

fn check_target(target: &[u8]) {
    let Ok(t) = decode(target) else { return };
    for rel in [&t.rel, &t.file_rel(b"index.html")] {
        assert!(!rel.starts_with(b"/"), "absolute: {:?}", String::from_utf8_lossy(rel));
        assert!(!rel.contains(&0), "NUL in {:?}", String::from_utf8_lossy(rel));
        if rel.is_empty() {
            continue;
        }
        for seg in rel.split(|&b| b == b'/') {
            assert!(
                !seg.is_empty() && seg != b".." && seg != b".",
                "segment {:?} in {:?}",
                String::from_utf8_lossy(seg),
                String::from_utf8_lossy(rel)
            );
        }
    }
}

fn check_accepted(a: &Accepted) {
    let mut n = 0;
    for coding in a.preferred() {
        assert!(a.q(coding) > 0, "{coding:?} chosen with weight 0 in {a:?}");
        n += 1;
    }
    assert!(n <= encoding::CODINGS);
}

/// The bytes as a `Range` value against a few sizes and part bounds.
fn check_ranges(value: &[u8]) {
    for (size, max) in [(0, 32), (1, 1), (100, 2), (100, 32), (1 << 40, 32), (u64::MAX, 5)] {
        match ranges::parse(value, size, max) {
            ranges::Ranges::Whole | ranges::Ranges::Unsatisfiable => {}
            ranges::Ranges::One(p) => {
                assert!(p.len > 0 && p.start.checked_add(p.len).is_some_and(|e| e <= size))
            }
            ranges::Ranges::Many(mut parts) => {
                assert!(parts.len() >= 2 && parts.len() <= max, "{} parts", parts.len());
                for p in &parts {
                    assert!(p.len > 0 && p.start.checked_add(p.len).is_some_and(|e| e <= size));
                }
                parts.sort_by_key(|p| p.start);
                for w in parts.windows(2) {
                    assert!(w[0].start + w[0].len <= w[1].start, "overlap");
                }
            }
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The bytes as a whole request head, as a bare request target, and as `Accept-Encoding`
    // values (whole, and split in two fields at the first newline).
    if let Parsed::Complete { request, len_bytes } = parse(data) {
        assert!(len_bytes <= data.len());
        check_target(&request.target);
        check_accepted(&request.accept_encoding);
        if let Some(range) = &request.range {
            check_ranges(range);
        }
    }
    check_target(data);
    check_ranges(data);
    check_accepted(&Accepted::parse(data));
    if let Some(nl) = data.iter().position(|&b| b == b'\n') {
        let mut a = Accepted::parse(&data[..nl]);
        a.add(&data[nl + 1..]);
        check_accepted(&a);
    }
});
