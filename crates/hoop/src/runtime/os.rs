//! What a thread-per-core program asks of the operating system: a thread pinned to a CPU, and
//! an open-file limit that lets it hold more than a thousand connections.

use std::io;

/// Pins the calling thread to CPU `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; all-zero is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes inside the set; `cpu` is checked against its capacity first.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        libc::CPU_SET(cpu, &mut set);
    }
    // SAFETY: passes a valid cpu_set_t of the size given; 0 means the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    hoop_driver::error::cvt_libc(r).map(drop)
}

/// Raises the soft limit on open files to the hard limit, best effort (a server with more than
/// about a thousand connections needs it; children inherit it). Returns the soft limit in
/// force afterwards, or the error of `getrlimit`.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid pointer.
    hoop_driver::error::cvt_libc(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one valid rlimit; failure leaves the limit as it was.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let soft = raise_nofile_limit().unwrap();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into the valid pointer.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(soft, lim.rlim_cur);
        // An unlimited hard limit is above what the kernel lets a soft limit be (nr_open).
        assert!(lim.rlim_cur == lim.rlim_max || lim.rlim_max == libc::RLIM_INFINITY);
    }

    #[test]
    fn pinning_to_an_impossible_cpu_is_einval() {
        let e = pin_to_cpu(libc::CPU_SETSIZE as usize).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
