//! The open-file limit (`RLIMIT_NOFILE`): raised to the hard limit by every bench that holds
//! many connections, and read. std and libc only: the peers' binary includes this file too.

/// Raises the soft limit on open files to the hard limit (1000 connections need more than
/// 1024 descriptors with the server's). Children inherit it.
pub(crate) fn raise_nofile_limit() {
    // SAFETY: rlimit is plain old data.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads one valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

/// The open-file hard limit of this process (its children inherit it); 1024 if it cannot be
/// read.
pub(crate) fn nofile_hard_limit() -> u64 {
    // SAFETY: rlimit is plain old data.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    lim.rlim_max
}

/// The soft limit on open files (after [`raise_nofile_limit`], the hard one); 0 if unknown.
pub(crate) fn nofile_limit() -> u64 {
    // SAFETY: rlimit is plain old data.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    lim.rlim_cur
}
