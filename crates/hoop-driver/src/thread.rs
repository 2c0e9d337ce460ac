//! hoop's helper threads (blocking pool, file pool, timer, reapers, teardown) never take a
//! signal meant for the process.
//!
//! hoop reads signals from a `signalfd`, which only sees a signal that every thread able to take
//! it blocks: a process-directed signal goes to *any* thread that does not block it, and there
//! its default action runs (for SIGTERM: the process ends) before any listener could read it.
//! So every thread hoop starts for itself blocks every asynchronous signal, and from its first
//! instruction: [`spawn`] blocks them in the calling thread, starts the thread (which inherits
//! the mask) and restores the caller's mask. Blocking inside the new thread instead would leave
//! a window between its start and its first `pthread_sigmask` in which a SIGTERM ends the
//! process. A signal that arrives for the caller during the spawn stays pending and is
//! delivered when its mask is restored.
//!
//! The fault signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS) and SIGPIPE stay
//! unblocked: they are raised by the thread's own instruction or system call and meant for it
//! (a blocked fault signal kills the process anyway; a blocked SIGPIPE would stay pending on the
//! thread forever), and a signalfd never reads them for a listener.

use std::io;
use std::thread::{Builder, JoinHandle};

/// The signals a helper thread blocks: every one but those its own code raises for itself.
fn helper_mask() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage; sigfillset and sigdelset initialize and
    // edit it in place.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for own in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
            libc::SIGSYS,
            libc::SIGPIPE,
        ] {
            libc::sigdelset(&mut set, own);
        }
        set
    }
}

/// Starts a helper thread of hoop's that blocks every asynchronous signal from its first
/// instruction (the module docs say why and which signals).
pub fn spawn<F, T>(builder: Builder, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let mask = helper_mask();
    // SAFETY: a zeroed sigset_t is valid storage for the old mask pthread_sigmask writes.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `mask` is initialized; `old` is writable. Only this thread's mask changes.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &mask, &mut old) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    let spawned = builder.spawn(f);
    // SAFETY: `old` was filled by the call above; restoring it is always valid.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    spawned
}

/// Whether the calling thread blocks `signo` (for the tests of the threads above).
pub fn blocks(signo: i32) -> bool {
    // SAFETY: a zeroed sigset_t is valid storage for the current mask.
    let mut cur: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new set only reads the mask into `cur`.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur) };
    // SAFETY: `cur` was initialized by pthread_sigmask.
    unsafe { libc::sigismember(&cur, signo) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_blocks_the_asynchronous_signals_and_the_caller_keeps_its_mask() {
        let before: Vec<bool> = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
            .iter()
            .map(|&s| blocks(s))
            .collect();
        let seen = spawn(Builder::new(), || {
            [
                libc::SIGTERM,
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGUSR1,
                libc::SIGCHLD,
                libc::SIGPIPE,
                libc::SIGSEGV,
            ]
            .map(blocks)
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(seen, [true, true, true, true, true, false, false]);
        let after: Vec<bool> = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
            .iter()
            .map(|&s| blocks(s))
            .collect();
        assert_eq!(before, after, "the caller's mask is restored");
    }
}
