//! Memory given back after a burst of closed connections: glibc's malloc keeps the
//! memory that thousands of connections freed (their buffers, tasks and response vectors) in
//! its arenas, so a server that held 8,000 attackers stayed at ~75 MB of RSS after they left.
//! Once the open connections fell by [`TRIM_AFTER_CLOSES`] from their peak since the last trim,
//! `malloc_trim(0)` gives the free pages back (75 -> 11 MB measured), on the blocking pool so
//! that the server thread does not wait for it. Checked once a second, by one thread (the trim
//! is process-wide). A no-op on other C libraries.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections closed since the peak that make a trim worth it.
pub(crate) const TRIM_AFTER_CLOSES: usize = 1024;
/// How often the count is looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Whether `open` connections, after a peak of `peak` since the last trim, call for one.
pub(crate) fn due(peak: usize, open: usize) -> bool {
    peak.saturating_sub(open) >= TRIM_AFTER_CLOSES
}

/// Watches the open connections forever, trimming after each burst of closes.
pub(crate) async fn trim_forever(open_conns: Arc<AtomicUsize>) {
    let mut peak = 0;
    loop {
        hoop::time::sleep(CHECK_EVERY).await;
        let open = open_conns.load(Ordering::Acquire);
        peak = peak.max(open);
        if due(peak, open) {
            peak = open;
            trim().await;
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
async fn trim() {
    // SAFETY: malloc_trim only walks the allocator's own arenas (under their locks).
    let _ = hoop::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
async fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_closes_is_due_a_trim() {
        assert!(!due(0, 0));
        assert!(!due(5000, 4000));
        assert!(due(5000, 5000 - TRIM_AFTER_CLOSES));
        assert!(due(8050, 50));
        assert!(!due(10, 20), "more open than the peak: nothing");
    }
}
