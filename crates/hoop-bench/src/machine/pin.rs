//! Thread affinity over a set of CPUs. `hoop::runtime::pin_to_cpu` pins a thread to one CPU;
//! a thread started by a pinned one inherits that CPU, and is let loose here on a set.

/// The CPU set holding `cpus` (those at or above `CPU_SETSIZE` are left out).
pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` is below CPU_SETSIZE, so CPU_SET writes inside the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Lets the calling thread run on any of `cpus` (empty: leaves it as it is). Best effort: a
/// refusal leaves the thread where it was.
pub fn allow_cpus(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    let set = cpu_set(cpus);
    // SAFETY: a valid cpu_set_t of the size given; 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUs the calling thread may run on.
    fn affinity() -> usize {
        // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid, writable cpu_set_t of the size given; 0 is the calling thread.
        let r =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        assert_eq!(r, 0);
        // SAFETY: `set` is a valid cpu_set_t.
        unsafe { libc::CPU_COUNT(&set) as usize }
    }

    #[test]
    fn a_pinned_thread_is_let_loose_on_every_allowed_cpu() {
        let allowed = crate::machine::allowed_cpus();
        std::thread::spawn(move || {
            hoop::runtime::pin_to_cpu(allowed[0]).unwrap();
            assert_eq!(affinity(), 1);
            allow_cpus(&allowed);
            assert_eq!(affinity(), allowed.len());
            allow_cpus(&[]);
            assert_eq!(affinity(), allowed.len());
        })
        .join()
        .unwrap();
    }
}
