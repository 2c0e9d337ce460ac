//! `hoop bench http --netns-mtu MTU`: the side-by-side run again inside a network namespace of
//! its own whose loopback has a smaller MTU. HttpArena sets 1500 "since 65536 hides the
//! kernel's segmentation cost": a 64 KiB response then leaves in 44 segments instead of one,
//! as it would on a real NIC.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Command;

/// Moves the calling thread (and every thread and process it starts from now on: the
/// servers, the load generator's threads) into a new network namespace and brings its
/// loopback up with `mtu`. Needs `CAP_SYS_ADMIN` (root, or a user namespace) and `ip`.
pub(crate) fn enter(mtu: u32) -> io::Result<()> {
    // SAFETY: unshare takes flags only; CLONE_NEWNET affects the calling thread's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("unshare(CLONE_NEWNET): {e} (needs CAP_SYS_ADMIN, e.g. root)"),
        ));
    }
    let mtu_arg = mtu.to_string();
    let status = Command::new("ip")
        .args(["link", "set", "lo", "mtu", &mtu_arg, "up"])
        .status()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run `ip`: {e}")))?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "`ip link set lo mtu {mtu} up` failed ({status})"
        )));
    }
    match loopback_mtu() {
        Some(m) if m == mtu => Ok(()),
        other => Err(io::Error::other(format!(
            "the namespace's loopback MTU is {other:?}, not {mtu}"
        ))),
    }
}

/// The MTU of `lo` in the calling thread's network namespace (`SIOCGIFMTU`), if it can be
/// read.
pub(crate) fn loopback_mtu() -> Option<u32> {
    // SAFETY: socket takes integer arguments; a new fd nothing else owns is returned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by socket and is owned here only.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a zeroed ifreq is valid; the name and the MTU are set/read below.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCGIFMTU reads the name and writes the MTU into `req`, a live local.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    if r != 0 {
        return None;
    }
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_loopback_mtu_is_read() {
        // Every Linux network namespace has a loopback; its MTU is positive.
        assert!(super::loopback_mtu().is_some_and(|m| m > 0));
    }
}
