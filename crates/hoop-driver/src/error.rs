//! The one place where a kernel result becomes an `io::Error`.

use std::io;

/// Converts a kernel return value (`res` of a CQE, or of a raw syscall that returns `-errno`) into
/// an `io::Result`: negative values are `-errno`, non-negative values are the result.
///
/// This is the only conversion from `-errno` in hoop (mio's `syscall!` idea): every operation's
/// completion goes through it.
#[inline]
pub fn cvt(res: i32) -> io::Result<u32> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as u32)
    }
}

/// Converts a libc return value that signals failure with `-1` and `errno` into an `io::Result`.
#[inline]
pub fn cvt_libc(res: libc::c_int) -> io::Result<libc::c_int> {
    if res == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

/// The error every operation gets once the driver has lost completions (`-EBADR` from
/// `io_uring_enter`): a hard error instead of a hang.
pub(crate) fn completions_lost() -> io::Error {
    io::Error::other("io_uring lost completions (EBADR): the driver is poisoned")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_is_errno() {
        let e = cvt(-libc::ECONNRESET).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ECONNRESET));
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(cvt(0).unwrap(), 0);
        assert_eq!(cvt(4096).unwrap(), 4096);
    }
}
