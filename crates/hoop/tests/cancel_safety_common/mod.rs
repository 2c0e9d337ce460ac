//! The bounds and the retry rule `cancel_safety.rs` and `cancel_safety_datagrams.rs` share
//! (each file uses a part).

#![allow(dead_code)]

use std::time::Duration;

pub const LIMIT: Duration = Duration::from_secs(30);

pub const TICK: Duration = Duration::from_micros(50);

/// Whether `e` is an error an injected fault may produce on a receive, after which the loop
/// just calls again (nothing was received).
pub fn retry(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(libc::ECANCELED)
}
