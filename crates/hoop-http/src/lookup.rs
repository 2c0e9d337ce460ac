//! Looking a file up beneath the root for an answer: the cached copy while a fresh `statx`
//! still shows the identity it was read with, else the file opened beneath the root
//! ([`Root::open_beneath`], from `resolve`) and its `statx`, made on the thread.

use std::cell::RefCell;
use std::ffi::CString;
use std::io;

use crate::cache::{Cache, Entry, FdEntry};
use crate::resolve::{open_error_status, Root};
use crate::response::FileMeta;
use crate::status::Status;

/// A file to serve: a cached copy still current, or the file opened and its `statx`.
pub(crate) enum Found {
    Cached(Entry),
    /// An open file kept for `sendfile(2)`, still current.
    Fd(FdEntry),
    Opened(hoop::fs::File, FileMeta),
}

impl Found {
    pub(crate) fn meta(&self) -> FileMeta {
        match self {
            Found::Cached(e) => e.meta,
            Found::Fd(e) => e.meta,
            Found::Opened(_, m) => *m,
        }
    }
}

/// The file `rel`, cached under `key`: the cached copy when a fresh `statx` of `rel` still
/// shows the identity it was read with (the very inode once opened beneath the root), else
/// `rel` opened beneath the root and its `statx`. The status of the failure otherwise.
pub(crate) async fn find(
    root: &Root,
    cache: &RefCell<Cache>,
    rel: &[u8],
    key: &[u8],
) -> Result<Found, Status> {
    let cached = cache.borrow_mut().get(key).cloned();
    if let Some(entry) = cached {
        match stat_path(root.raw_fd(), rel).await {
            Ok(meta) if meta == entry.meta => return Ok(Found::Cached(entry)),
            _ => cache.borrow_mut().remove(key),
        }
    }
    let kept = cache.borrow_mut().get_fd(key).cloned();
    if let Some(entry) = kept {
        match stat_path(root.raw_fd(), rel).await {
            Ok(meta) if meta == entry.meta => return Ok(Found::Fd(entry)),
            _ => cache.borrow_mut().remove(key),
        }
    }
    let fd = root
        .open_beneath(rel, false)
        .await
        .map_err(|e| open_error_status(&e))?;
    let file = hoop::fs::File::from(fd);
    match fstat_now(&file) {
        Ok(meta) => Ok(Found::Opened(file, meta)),
        Err(_) => Err(Status::InternalServerError),
    }
}

/// `statx` of `rel` under the root fd (following symlinks; identity is checked by the caller),
/// as a system call on this thread: io_uring runs `IORING_OP_STATX` on an io-wq worker (a
/// context switch there and back) and the epoll driver on its blocking pool, while the call
/// itself on a cached dentry takes about a microsecond (DESIGN.md, "Metadata inline").
async fn stat_path(root: i32, rel: &[u8]) -> io::Result<FileMeta> {
    let path = if rel.is_empty() {
        CString::from(c".")
    } else {
        CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
    };
    statx_now(root, &path, libc::AT_STATX_SYNC_AS_STAT)
}

/// `statx(2)` on this thread; `path` empty with `AT_EMPTY_PATH` for the fd itself.
fn statx_now(dirfd: i32, path: &CString, flags: i32) -> io::Result<FileMeta> {
    // SAFETY: all-zero is a valid statx (plain integers).
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stx` a valid statx the call fills; both
    // outlive the call.
    let r = unsafe {
        libc::statx(
            dirfd,
            path.as_ptr(),
            flags,
            libc::STATX_BASIC_STATS,
            &mut stx,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileMeta::from_statx(&stx))
}

/// The metadata of an open file (see [`stat_path`] for why on this thread).
fn fstat_now(file: &hoop::fs::File) -> io::Result<FileMeta> {
    use std::os::fd::AsRawFd;
    statx_now(file.as_raw_fd(), &CString::default(), libc::AT_EMPTY_PATH)
}
