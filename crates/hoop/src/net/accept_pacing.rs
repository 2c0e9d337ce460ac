//! How an accept loop paces itself after failures: [`AcceptPacing`], shared by hoop-http's
//! server and the `hoop` command's echo and fanout servers.

use std::io;
use std::time::Duration;

/// Pause after `accept` failed for want of descriptors or memory.
const EXHAUSTED_BACKOFF: Duration = Duration::from_millis(1);

/// First and largest pause after any other `accept` failure (doubling in between).
const MIN_BACKOFF: Duration = Duration::from_millis(1);
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// Connections an accept loop takes in a row before it yields to the runtime's other tasks
/// ([`AcceptPacing::accepted`]): a burst is drained in batches of this many, each followed by
/// the first turn of the connections it spawned and of those already open, rather than
/// thousands of accepts while every other task waits.
pub const ACCEPT_BATCH: u32 = 64;

/// How an accept loop paces itself after failures: running out of descriptors or memory waits
/// 1 ms (logged once per episode, with hoop's count of refused clients), anything else is logged and retried with a doubling backoff.
pub struct AcceptPacing {
    server: &'static str,
    worker: usize,
    /// The pause after the next ordinary failure.
    pub backoff: Duration,
    exhausted_logged: bool,
    /// Connections accepted since the loop last yielded.
    in_batch: u32,
}

impl AcceptPacing {
    /// Pacing for thread `worker` of the `server` server (named in its log lines).
    pub fn new(server: &'static str, worker: usize) -> AcceptPacing {
        AcceptPacing {
            server,
            worker,
            backoff: MIN_BACKOFF,
            exhausted_logged: false,
            in_batch: 0,
        }
    }

    /// A connection was accepted: as [`ok`](Self::ok), and every [`ACCEPT_BATCH`]th time a
    /// yield to the other tasks, so that draining a burst stays fair to them. The stream's
    /// accept stays armed meanwhile on both drivers (io_uring's multishot accept, the epoll
    /// driver's own), so the kernel's queue is still emptied at every turn: the connections
    /// wait in the stream, not in a backlog that overflows.
    pub async fn accepted(&mut self) {
        self.ok();
        self.in_batch += 1;
        if self.in_batch >= ACCEPT_BATCH {
            self.in_batch = 0;
            crate::yield_now().await;
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
                        super::refuse::refused_connections()
                    );
                    self.exhausted_logged = true;
                }
                crate::time::sleep(EXHAUSTED_BACKOFF).await;
            }
            _ => {
                eprintln!(
                    "hoop {}: thread {worker}: accept failed: {e}; retrying",
                    self.server
                );
                crate::time::sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DriverKind;

    /// Ordinary failures double the pause up to its cap; running out of descriptors leaves it
    /// as it is; a success starts afresh.
    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        crate::__private::each_driver(&[DriverKind::Uring, DriverKind::Epoll], false, |kind| {
            let rt = crate::Runtime::builder().driver(kind).build().unwrap();
            rt.block_on(async {
                let mut p = AcceptPacing::new("test", 0);
                let mut want = MIN_BACKOFF;
                for _ in 0..10 {
                    assert_eq!(p.backoff, want);
                    p.failed(io::Error::from_raw_os_error(libc::ECONNABORTED))
                        .await;
                    want = (want * 2).min(MAX_BACKOFF);
                }
                assert_eq!(p.backoff, MAX_BACKOFF);
                p.failed(io::Error::from_raw_os_error(libc::EMFILE)).await;
                assert_eq!(p.backoff, MAX_BACKOFF);
                p.ok();
                assert_eq!(p.backoff, MIN_BACKOFF);
            });
        });
    }
}
