//! `io_uring_enter`: when the driver makes the call, with which flags, and what its errors
//! mean (a signal, a full CQ backlog, lost completions).

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::abi::{sys_enter, IORING_ENTER_GETEVENTS, IORING_ENTER_NO_IOWAIT};
use super::Uring;

impl Uring {
    /// `io_uring_enter`: submit everything queued, with GETEVENTS so that deferred task work
    /// runs, and wait for one completion if `block`.
    ///
    /// With SQPOLL the SQ thread takes SQEs by itself as soon as they are pushed, so the call is
    /// made only when it is needed (liburing's rules, as in `Submitter::submit_and_wait`): to
    /// wake the SQ thread after it went to sleep (`SQ_WAKEUP`), to wait for a completion or
    /// flush the CQ overflow backlog (`GETEVENTS`), or to wait for SQ room when the SQ is full
    /// (`SQ_WAIT`). While the SQ thread is awake and nothing needs waiting: no system call.
    /// Returns whether it was asked to wait (no completion was there when it began).
    pub(super) fn enter(&mut self, block: bool) -> io::Result<bool> {
        let r = self.enter_inner(block);
        // SQEs still queued after an enter were refused (EAGAIN/EBUSY, a short submit, an
        // error): a shared ring's reaper must submit them (`has_unsent`).
        self.refused = !self.ring.params().is_setup_sqpoll() && !self.ring.submission().is_empty();
        r
    }

    pub(super) fn enter_inner(&mut self, block: bool) -> io::Result<bool> {
        self.turns_since_enter = 0;
        self.urgent = false;
        self.storage_queued = false;
        let sqpoll = self.ring.params().is_setup_sqpoll();
        // Completions already posted: reap them rather than wait in the kernel.
        let block = block && self.ring.completion().is_empty();
        loop {
            let want = u32::from(block);
            let (to_submit, flags) = if sqpoll {
                let sq = self.ring.submission();
                let len = sq.len();
                let mut flags = 0;
                // `need_wakeup` orders our tail store before its load of the flags (SeqCst
                // fence), so a thread that went to sleep after missing our SQEs is seen asleep.
                if sq.need_wakeup() {
                    flags |= io_uring::EnterFlags::SQ_WAKEUP.bits();
                }
                if block || sq.cq_overflow() || sq.taskrun() {
                    flags |= IORING_ENTER_GETEVENTS;
                }
                if sq.is_full() {
                    flags |= io_uring::EnterFlags::SQ_WAIT.bits();
                }
                drop(sq);
                // `sqes_submitted` is not counted here: the SQ thread takes SQEs on its own,
                // and the io-uring crate does not expose the SQ head, so what it consumed is
                // not known (it would be: SQEs pushed so far minus `len`).
                if flags == 0 {
                    return Ok(block);
                }
                (len as u32, flags)
            } else {
                (self.ring.submission().len() as u32, IORING_ENTER_GETEVENTS)
            };
            // A blocking wait is not iowait where the kernel can say so (6.15): a thread
            // waiting on its sockets is idle, and the kernel counted it as waiting for the
            // disk (an idle server showed 100% iowait on its CPU in /proc/stat).
            let flags = if block && self.has_feature(super::FEAT_NO_IOWAIT) {
                flags | IORING_ENTER_NO_IOWAIT
            } else {
                flags
            };
            self.table.counters.enter_calls += 1;
            let wait = if block { self.wait } else { None };
            // The SQEs of this call are in the kernel from here on (SQPOLL's already were).
            self.sample_depth(true);
            let r = match self.fault_at_enter(sqpoll, to_submit) {
                Some(Err(e)) => Err(e),
                // A short submit: the kernel does not wait after taking fewer SQEs than asked.
                Some(Ok(fewer)) => self.raw_enter(fewer, 0, flags, None, 0),
                None => {
                    let (want, min_wait_usec) = self.min_wait(block, want);
                    self.raw_enter(to_submit, want, flags, wait, min_wait_usec)
                }
            };
            match r {
                Ok(n) => {
                    if !sqpoll {
                        self.table.counters.sqes_submitted += n as u64;
                    }
                    if self.chain_queued && self.ring.submission().is_empty() {
                        self.chain_queued = false;
                    }
                    return Ok(block);
                }
                Err(e) => match e.raw_os_error() {
                    // A signal: nothing was lost; the caller's loop comes back.
                    Some(libc::EINTR) => {
                        if block {
                            return Ok(block);
                        }
                    }
                    // The CQ backlog is full (-EBUSY) or the kernel is short of memory (-EAGAIN):
                    // reap first, then submit again; unsubmitted SQEs stay queued.
                    Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                        self.table.counters.overflow_events += 1;
                        if self.drain_once() == 0 {
                            // Nothing to reap: let the caller retry on its next turn.
                            return Ok(false);
                        }
                    }
                    // Completions were really lost: a hard error for everyone, never a hang.
                    Some(libc::EBADR) => {
                        self.poison();
                        return Err(crate::error::completions_lost());
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// `io_uring_enter(2)`: on the registered ring index (with `IORING_ENTER_REGISTERED_RING`)
    /// when the ring fd is registered, else on the ring fd. With `wait` (a blocking wait, on a
    /// kernel with `IORING_FEAT_EXT_ARG`), the wait ends after that long at the latest
    /// (`IORING_ENTER_EXT_ARG`); it then returns `Ok` as if a completion had come.
    pub(super) fn raw_enter(
        &self,
        to_submit: u32,
        want: u32,
        mut flags: u32,
        wait: Option<Duration>,
        min_wait_usec: u32,
    ) -> io::Result<usize> {
        let fd = match &self.registered {
            Some(reg) => {
                flags |= io_uring::EnterFlags::REGISTERED_RING.bits();
                reg.index as libc::c_long
            }
            None => self.ring.as_raw_fd() as libc::c_long,
        };
        // SAFETY: a registered index names this ring in this thread's table (the driver never
        // leaves the thread that built it, and a shared ring registers none); the SQEs pushed
        // point to memory their operations own until the final CQE (UringOp's contract).
        unsafe {
            sys_enter(
                fd,
                to_submit,
                want,
                flags,
                wait,
                min_wait_usec,
                self.wait_region.as_ref(),
            )
        }
    }

    /// With `Config::min_wait` on a kernel that has it (6.12, `IORING_FEAT_MIN_TIMEOUT`): a
    /// blocking wait asks for a batch of completions (as many as are owed, at most
    /// [`MIN_WAIT_BATCH`]) and returns after `min_wait` once one has come, rather than at the
    /// first. Otherwise `want` as it is, and no minimum.
    #[inline]
    fn min_wait(&mut self, block: bool, want: u32) -> (u32, u32) {
        if !block || self.min_wait_usec == 0 || !self.has_feature(super::FEAT_MIN_TIMEOUT) {
            return (want, 0);
        }
        let owed = self.owed_cqes().clamp(1, MIN_WAIT_BATCH);
        (owed as u32, self.min_wait_usec)
    }
}

impl Uring {
    /// One `io_uring_enter` that passes a bounded wait's arguments (a 1 s deadline, the
    /// min-wait) and waits for no completion, so it returns at once: what the arguments cost
    /// the system call (`hoop bench count --op wait`).
    pub(crate) fn enter_bounded_nowait(&mut self) -> io::Result<()> {
        self.raw_enter(
            0,
            0,
            super::abi::IORING_ENTER_GETEVENTS,
            Some(Duration::from_secs(1)),
            self.min_wait_usec,
        )
        .map(drop)
    }

    /// Whether bounded waits pass their arguments in a registered wait region.
    pub(crate) fn waits_registered(&self) -> bool {
        self.wait_region.is_some()
    }

    /// The min-wait in force: `Config::min_wait`, where the kernel has it.
    pub(crate) fn min_wait_in_force(&self) -> Option<Duration> {
        (self.min_wait_usec > 0 && self.has_feature(super::FEAT_MIN_TIMEOUT))
            .then(|| Duration::from_micros(u64::from(self.min_wait_usec)))
    }
}

/// Most completions a min-wait asks for at once.
const MIN_WAIT_BATCH: usize = 32;
