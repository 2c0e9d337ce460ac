//! Blocking test clients and `EINTR`.

/// `read` retried after `EINTR` (`ErrorKind::Interrupted`), for the tests' blocking clients.
///
/// A socket with a receive timeout (`SO_RCVTIMEO`, which every test client sets) fails a
/// blocked receive with `EINTR` whenever a signal wakes its thread, even one whose action is to
/// be ignored: a `SIGCHLD` from a server child that exits while the thread that started it has
/// signals blocked (as glibc's `posix_spawn` does around its `vfork`) is queued, not dropped, and
/// wakes whichever thread takes it. std's `read_exact` and `write_all` retry such an error;
/// a plain `read` returns it, and std says to retry it. Nothing was read, so retrying loses
/// nothing.
pub trait ReadRetry: std::io::Read {
    /// [`std::io::Read::read`] until it ends without `Interrupted`.
    fn read_retry(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
}

impl<R: std::io::Read + ?Sized> ReadRetry for R {}
