//! How an accept loop paces itself after failures (shared with the `hoop` command's other
//! servers).

use std::io;
use std::time::Duration;

/// Pause after `accept` failed for want of descriptors or memory.
const EXHAUSTED_BACKOFF: Duration = Duration::from_millis(1);

/// First and largest pause after any other `accept` failure (doubling in between).
const MIN_BACKOFF: Duration = Duration::from_millis(1);
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// How an accept loop paces itself after failures: running out of descriptors or memory waits
/// 1 ms (logged once per episode, with hoop's count of refused clients), anything else is logged and retried with a doubling backoff.
pub struct AcceptPacing {
    server: &'static str,
    worker: usize,
    /// The pause after the next ordinary failure.
    pub backoff: Duration,
    exhausted_logged: bool,
}

impl AcceptPacing {
    /// Pacing for thread `worker` of the `server` server (named in its log lines).
    pub fn new(server: &'static str, worker: usize) -> AcceptPacing {
        AcceptPacing {
            server,
            worker,
            backoff: MIN_BACKOFF,
            exhausted_logged: false,
        }
    }

    /// An accept succeeded: the next failure starts afresh.
    pub fn ok(&mut self) {
        self.backoff = MIN_BACKOFF;
        self.exhausted_logged = false;
    }

    /// An accept failed with `e`: log and wait as the error says.
    pub async fn failed(&mut self, e: io::Error) {
        let worker = self.worker;
        match e.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                if !self.exhausted_logged {
                    // hoop refuses (closes) the clients it has no descriptor for, and counts
                    // them: say so, so a client that was reset can be matched to this line.
                    eprintln!(
                        "hoop {}: thread {worker}: accept failed: {e}; new clients are refused \
                         (closed) until connections end ({} refused so far in this process); \
                         retrying",
                        self.server,
                        hoop::net::refused_connections()
                    );
                    self.exhausted_logged = true;
                }
                hoop::time::sleep(EXHAUSTED_BACKOFF).await;
            }
            _ => {
                eprintln!(
                    "hoop {}: thread {worker}: accept failed: {e}; retrying",
                    self.server
                );
                hoop::time::sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
