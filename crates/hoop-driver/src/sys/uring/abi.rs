//! The raw `io_uring_enter(2)` ABI: the flags, the `io_uring_getevents_arg` that bounds a
//! blocking wait, and the system call itself (the io-uring crate's `enter` takes no timeout
//! and no registered ring index).

use std::io;
use std::time::Duration;

/// `IORING_ENTER_GETEVENTS` (linux/io_uring.h): wait for or collect completions, and run deferred
/// task work.
pub(super) const IORING_ENTER_GETEVENTS: u32 = 1;

/// `IORING_ENTER_NO_IOWAIT` (linux/io_uring.h, 6.15; `IORING_FEAT_NO_IOWAIT`): the thread's
/// wait is not accounted as iowait.
pub(super) const IORING_ENTER_NO_IOWAIT: u32 = 1 << 7;

/// `IORING_FEAT_EXT_ARG`: `io_uring_enter` takes a timeout (5.11).
pub(crate) const FEAT_EXT_ARG: u32 = 1 << 8;
/// `IORING_FEAT_NO_IOWAIT`: `io_uring_enter` takes `IORING_ENTER_NO_IOWAIT` (6.15).
pub(crate) const FEAT_NO_IOWAIT: u32 = 1 << 17;
/// `IORING_FEAT_MIN_TIMEOUT`: a wait's `min_wait_usec` (6.12).
pub(crate) const FEAT_MIN_TIMEOUT: u32 = 1 << 15;
/// `IORING_FEAT_RECVSEND_BUNDLE`: bundles (6.10).
pub(crate) const FEAT_RECVSEND_BUNDLE: u32 = 1 << 14;

/// `IORING_ENTER_EXT_ARG` (linux/io_uring.h, 5.11): the argument is an `io_uring_getevents_arg`.
const IORING_ENTER_EXT_ARG: u32 = 8;

/// `struct __kernel_timespec`.
#[repr(C)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `struct io_uring_getevents_arg` (linux/io_uring.h).
#[repr(C)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

/// Waits (without submitting) until the CQ of the ring `ring_fd` holds a CQE, or `timeout`
/// passed, or a signal came: a shared ring's reaper, outside the ring's lock.
pub(crate) fn wait_for_cqe(ring_fd: std::os::fd::RawFd, timeout: Duration) -> io::Result<()> {
    // SAFETY: nothing is submitted (`to_submit` 0), so no SQE memory is handed over; a wrong
    // fd only makes the call fail.
    unsafe {
        sys_enter(
            libc::c_long::from(ring_fd),
            0,
            1,
            IORING_ENTER_GETEVENTS,
            Some(timeout),
            0,
            None,
        )
    }
    .map(drop)
}

/// `io_uring_enter(2)` on `fd` (a ring fd, or a registered index with
/// `IORING_ENTER_REGISTERED_RING` in `flags`). With `wait` the call passes an
/// `io_uring_getevents_arg` whose timeout bounds a blocking wait (`IORING_ENTER_EXT_ARG`); a
/// wait that timed out returns `Ok(to_submit)`. A `min_wait_usec` above 0 (6.12,
/// `IORING_FEAT_MIN_TIMEOUT`) goes in the same argument: the wait for `want` completions
/// ends after that long once one has come. With `region` (`Config::reg_wait`) both go in the
/// registered wait region instead (`IORING_ENTER_EXT_ARG_REG`): nothing is copied in.
///
/// # Safety
/// `fd` must name a ring the caller keeps open, and every SQE among the `to_submit` queued ones
/// must point to memory its operation owns until the final CQE.
pub(super) unsafe fn sys_enter(
    fd: libc::c_long,
    to_submit: u32,
    want: u32,
    mut flags: u32,
    wait: Option<Duration>,
    min_wait_usec: u32,
    region: Option<&super::regwait::WaitRegion>,
) -> io::Result<usize> {
    let bounded = wait.is_some() || min_wait_usec > 0;
    // The argument, when passed by pointer: built on this frame, alive for the call.
    let ts = wait.map(|d| KernelTimespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    let arg = (bounded && region.is_none()).then(|| GeteventsArg {
        sigmask: 0,
        sigmask_sz: 8,
        min_wait_usec,
        ts: ts
            .as_ref()
            .map_or(0, |ts| ts as *const KernelTimespec as u64),
    });
    let (argp, argsz) = match (region, &arg) {
        // In the registered page: the argument is its offset there.
        (Some(region), _) if bounded => {
            flags |= IORING_ENTER_EXT_ARG | super::regwait::IORING_ENTER_EXT_ARG_REG;
            region.set(wait, min_wait_usec)
        }
        (_, Some(a)) => {
            flags |= IORING_ENTER_EXT_ARG;
            (
                a as *const GeteventsArg as usize,
                std::mem::size_of::<GeteventsArg>(),
            )
        }
        _ => (0, 0),
    };
    // SAFETY: the argument is none (0, size 0), an io_uring_getevents_arg on this stack frame
    // pointing to a timespec on this stack frame (or to none), alive for the call, or an offset
    // into the ring's registered wait region, which its owner keeps alive and `set` just wrote;
    // `fd` names a ring the caller keeps open, and every SQE it submits points to memory its
    // operation owns until the final CQE (the callers' contracts).
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            fd,
            libc::c_long::from(to_submit),
            libc::c_long::from(want),
            libc::c_long::from(flags),
            argp,
            argsz,
        )
    };
    enter_result(r, to_submit, wait.is_some())
}

/// The result of `io_uring_enter` returning `r`: a wait that timed out (`ETIME`, with a
/// timeout) submitted the SQEs all the same.
fn enter_result(r: libc::c_long, to_submit: u32, timed: bool) -> io::Result<usize> {
    if r >= 0 {
        return Ok(r as usize);
    }
    let e = io::Error::last_os_error();
    if timed && e.raw_os_error() == Some(libc::ETIME) {
        return Ok(to_submit as usize);
    }
    Err(e)
}
