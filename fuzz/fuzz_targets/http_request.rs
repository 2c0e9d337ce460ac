//! The static-file server's request parser and path resolution (crates/hoop-http/src/
//! parse.rs and resolve.rs, compiled here as they are): no panic, no hang, and no resolved
//! path that leaves the root (absolute, a `..` or `.` segment, an empty segment, a NUL).
#![no_main]
#![allow(dead_code)]

// At the crate root (not in an inline module, whose `#[path]`s would go through a directory
// that does not exist in a fresh clone): `parse.rs` and `resolve.rs` name their neighbours
// as `super::config` and `super::status`.
#[path = "../../crates/hoop-http/src/config.rs"]
mod config;
#[path = "../../crates/hoop-http/src/parse.rs"]
mod parse;
#[path = "../../crates/hoop-http/src/resolve.rs"]
mod resolve;
#[path = "../../crates/hoop-http/src/status.rs"]
mod status;

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

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The bytes as a whole request head, and as a bare request target.
    if let Parsed::Complete { request, len_bytes } = parse(data) {
        assert!(len_bytes <= data.len());
        check_target(&request.target);
    }
    check_target(data);
});
