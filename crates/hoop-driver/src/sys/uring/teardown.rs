//! How a ring stops: poisoned when the kernel lost completions, shut down by its owner (or
//! when dropped), without ever handing back memory the kernel may still write.

use std::time::{Duration, Instant};

use io_uring::{opcode, types};

use super::Uring;
use crate::slots::tag;

impl Uring {
    /// After `-EBADR` (completions lost): the driver takes no new operation, and no memory
    /// the kernel may still use is handed back.
    ///
    /// First a synchronous cancel of every request (`IORING_REGISTER_SYNC_CANCEL` with
    /// `IORING_ASYNC_CANCEL_ANY`, 6.0): once it returns, the kernel holds no request, so an
    /// operation without its final CQE lost it, and its memory is free. Every waiting future
    /// then completes with `EBADR` and gets its buffer back, and dropped operations are
    /// finished as orphans (their fds closed, buffers freed). Where that cancel is missing or
    /// fails, a cancel is queued for every operation instead and the futures keep waiting for
    /// their final CQE (which gives their buffer back); one whose CQE was lost waits until
    /// dropped, and its memory is then leaked, never freed.
    pub(crate) fn poison(&mut self) {
        if self.poisoned {
            return;
        }
        self.poisoned = true;
        // SQEs still queued in the SQ would reach the kernel at the next `io_uring_enter`,
        // after their operations' memory was handed back below: submit them first, so that
        // the synchronous cancel covers them too. If any stay queued, the quiet path is not
        // safe (found by tests/teardown.rs: heap corruption under ASan and glibc).
        self.submit_queued();
        let ts = types::Timespec::new().sec(1);
        let barrier = self
            .ring
            .submitter()
            .register_sync_cancel(Some(ts), types::CancelBuilder::any());
        let queued = !self.ring.params().is_setup_sqpoll() && !self.ring.submission().is_empty();
        let quiet = !queued
            && match barrier {
                Ok(()) => true,
                Err(e) => e.raw_os_error() == Some(libc::ENOENT),
            };
        self.drain_once();
        self.table.release_all_waiters();
        if quiet {
            self.cancels.clear();
            // The kernel holds no request any more: no CQE can come.
            self.awaiting_cqes = 0;
            self.wake_armed = false;
            self.table.fail_all(-libc::EBADR);
        } else {
            let _ = self.table.leak_ignored();
            for user_data in self.table.unfinished() {
                if !self.cancels.contains(&user_data) {
                    self.cancels.push_back(user_data);
                }
            }
            self.urgent = true;
        }
    }

    /// Cancels everything in flight and reaps until every final CQE arrived, or until the
    /// shutdown timeout, after which the remaining operations' memory is leaked on purpose (the
    /// kernel may still write it). The ring itself is closed when the driver is dropped, after
    /// this.
    pub(crate) fn shutdown(&mut self) -> ShutdownReport {
        if self.shut_down {
            return ShutdownReport::default();
        }
        let mut report = ShutdownReport::default();
        let live = self.table.unfinished();
        report.cancelled = live.len();
        for user_data in live {
            if !self.cancels.contains(&user_data) {
                self.cancels.push_back(user_data);
            }
        }
        if self.wake_armed {
            let entry = opcode::PollRemove::new(tag::WAKE)
                .build()
                .user_data(tag::CANCEL);
            if self.push_sqe(&entry) {
                self.cancels_in_flight += 1;
            }
        }
        self.shut_down = true;
        let deadline = Instant::now() + self.shutdown_timeout;
        while !self.poisoned && Instant::now() < deadline {
            let busy = self.table.any_unfinished();
            if !busy && self.cancels_in_flight == 0 && !self.wake_armed {
                break;
            }
            self.flush_cancels();
            let ts = types::Timespec::new().nsec(20_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            self.table.counters.enter_calls += 1;
            let r = if self.has_feature(super::FEAT_EXT_ARG) {
                self.ring.submitter().submit_with_args(1, &args).map(drop)
            } else {
                let r = self.ring.submitter().submit().map(drop);
                std::thread::sleep(Duration::from_millis(1));
                r
            };
            if let Err(e) = r {
                if e.raw_os_error() == Some(libc::EBADR) {
                    self.poison();
                }
            }
            self.drain();
        }
        // Whatever did not come back: the kernel may still write it, so it is never freed.
        report.leaked = self.table.leak_ignored();
        report.still_in_flight = self.table.unfinished().len();
        report
    }
}

impl Drop for Uring {
    /// The ring is never closed with operations' memory still owned by the kernel: shut down
    /// (cancel, reap, or leak on purpose) first if the owner did not.
    fn drop(&mut self) {
        let _ = self.shutdown();
        let _ = self.table.leak_ignored();
    }
}

/// What a shutdown did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Operations that were in flight and got a cancel.
    pub cancelled: usize,
    /// Operations whose final CQE never came within the timeout: their memory was leaked on
    /// purpose, because the kernel may still write it.
    pub leaked: usize,
    /// Operations whose futures are still alive and whose final CQE did not come (their memory
    /// will be leaked when the futures are dropped).
    pub still_in_flight: usize,
    /// Files, streams and write halves dropped with write-behind pending (bytes their
    /// `AsyncWrite` had accepted) whose writes did not finish within the shutdown timeout: the
    /// runtime waited for them, then cancelled the rest and closed them (filled in by `hoop`'s
    /// runtime; the driver alone leaves it 0).
    pub unfinished_writes: usize,
    /// The bytes those writes had accepted and not written (or not known to be written).
    pub unfinished_write_bytes: u64,
    /// Files, streams and write halves dropped with write-behind pending whose writes ended
    /// in an error (a full disk's `ENOSPC`, a peer's reset): nobody was left to return it to
    /// (only `flush` and `close` return write errors), so it is counted here rather than lost
    /// without a trace (filled in by `hoop`'s runtime; the driver alone leaves it 0).
    pub failed_writes: usize,
    /// The bytes those writes had accepted and did not write (the rest after the error).
    pub failed_write_bytes: u64,
}
