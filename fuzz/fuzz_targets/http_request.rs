//! The static-file server's request parser and path resolution (apps/hoop-cli/src/http/
//! parse.rs and resolve.rs, compiled here as they are): no panic, no hang, and no resolved
//! path that leaves the root (absolute, a `..` or `.` segment, an empty segment, a NUL).
#![no_main]
#![allow(dead_code)]

mod http {
    #[path = "../../../apps/hoop-cli/src/http/config.rs"]
    pub mod config;
    #[path = "../../../apps/hoop-cli/src/http/parse.rs"]
    pub mod parse;
    #[path = "../../../apps/hoop-cli/src/http/resolve.rs"]
    pub mod resolve;
    #[path = "../../../apps/hoop-cli/src/http/status.rs"]
    pub mod status;
}

use http::parse::{parse, Parsed};
use http::resolve::decode;

fn check_target(target: &[u8]) {
    let Ok(t) = decode(target) else { return };
    for rel in [&t.rel, &t.file_rel()] {
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
