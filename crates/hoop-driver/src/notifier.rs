//! Waking a driver from another thread.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// Wakes a driver from another thread (writes its eventfd, which the ring polls).
#[derive(Debug, Clone)]
pub struct Notifier {
    pub(crate) fd: Arc<OwnedFd>,
}

impl Notifier {
    /// Wakes the driver if it is waiting.
    pub fn notify(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a local u64 to an eventfd this handle keeps open.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}
