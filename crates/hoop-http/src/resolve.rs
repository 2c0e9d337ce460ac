//! Step 2 of a request's story: the request target becomes a path inside the root, and the
//! path an open file, without ever leaving the root.
//!
//! The target's path is percent-decoded exactly once (a bad escape or a NUL is 400), split on
//! `/` (so a decoded `%2f` separates too), and normalized: empty and `.` segments dropped, `..`
//! removes the previous segment and is 400 when there is none (as nginx does). A backslash is
//! an ordinary byte on Linux, so `..\` is a file name, not a way up. A segment that starts
//! with `.` (a dotfile, `.git`) is 404. What remains is relative to the root and is opened
//! with `openat2(root, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` — through
//! `IORING_OP_OPENAT2` on io_uring, the system call on the epoll driver's pool — so the kernel
//! refuses any symlink that leads out of the root (`EXDEV`, answered 404). On a kernel without
//! openat2 (before 5.6: `ENOSYS`, or a ring without the opcode) or where seccomp refuses it
//! (`EPERM`), the file is opened with `openat` and its real path, read back from
//! `/proc/self/fd`, must lie under the root's real path, or the fd is closed and the answer is
//! 404.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use hoop::driver::{op, Op};

use super::status::Status;

/// A request target, decoded and normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Path relative to the root, segments joined by `/`, no leading or trailing slash; empty
    /// for the root itself.
    pub rel: Vec<u8>,
    /// The target named a directory (`/`, `/docs/`, `/a/.`): serve its index file.
    pub dir_form: bool,
    /// The path as sent (not decoded), for a redirect's `Location`.
    pub raw_path: Vec<u8>,
    /// The query string as sent, with its `?` (empty when none).
    pub raw_query: Vec<u8>,
}

impl Target {
    /// The file to serve: `rel`, or the index file `index` (`--index`, default `index.html`) in
    /// directory form.
    pub fn file_rel(&self, index: &[u8]) -> Vec<u8> {
        if !self.dir_form {
            return self.rel.clone();
        }
        let mut p = self.rel.clone();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(index);
        p
    }
}

/// Decodes and normalizes a request target (origin form `/path?query`, or absolute form
/// `http://host/path`).
pub fn decode(target: &[u8]) -> Result<Target, Status> {
    let mut t = target;
    for scheme in [&b"http://"[..], b"https://"] {
        if t.len() >= scheme.len() && t[..scheme.len()].eq_ignore_ascii_case(scheme) {
            let rest = &t[scheme.len()..];
            t = match rest.iter().position(|&b| b == b'/' || b == b'?') {
                Some(i) if rest[i] == b'/' => &rest[i..],
                _ => b"/",
            };
            break;
        }
    }
    let t = t.split(|&b| b == b'#').next().unwrap_or(&[]);
    if t.first() != Some(&b'/') {
        return Err(Status::BadRequest);
    }
    let (raw_path, raw_query) = match t.iter().position(|&b| b == b'?') {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, &b""[..]),
    };
    let decoded = percent_decode(raw_path)?;
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut dir_form = false;
    for seg in decoded.split(|&b| b == b'/') {
        dir_form = matches!(seg, b"" | b"." | b"..");
        match seg {
            b"" | b"." => {}
            b".." => {
                if segments.pop().is_none() {
                    return Err(Status::BadRequest);
                }
            }
            s => segments.push(s),
        }
    }
    if segments.iter().any(|s| s.first() == Some(&b'.')) {
        return Err(Status::NotFound);
    }
    Ok(Target {
        rel: segments.join(&b'/'),
        dir_form,
        raw_path: raw_path.to_vec(),
        raw_query: raw_query.to_vec(),
    })
}

/// `%XX` escapes decoded, once. A `%` not followed by two hex digits, or a decoded NUL, is 400.
pub fn percent_decode(s: &[u8]) -> Result<Vec<u8>, Status> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b == b'%' {
            let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
            let (Some(hi), Some(lo)) = (
                s.get(i + 1).copied().and_then(hex),
                s.get(i + 2).copied().and_then(hex),
            ) else {
                return Err(Status::BadRequest);
            };
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.contains(&0) {
        return Err(Status::BadRequest);
    }
    Ok(out)
}

/// The directory the server serves: an open fd, and its real path for the fallback check.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    real: PathBuf,
}

impl Root {
    /// Opens `dir`; an error (in words) if it is missing, not a directory or unreadable.
    pub fn open(dir: &Path) -> io::Result<Root> {
        let real = std::fs::canonicalize(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", dir.display())))?;
        let file = std::fs::File::open(&real)
            .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", dir.display())))?;
        let meta = file.metadata()?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("root {}: not a directory", dir.display()),
            ));
        }
        // Listing it proves it is readable (a directory without read permission opens fine).
        std::fs::read_dir(&real)
            .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", dir.display())))?;
        Ok(Root {
            fd: file.into(),
            real,
        })
    }

    /// The root's fd.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Opens `rel` (from [`Target`]) read-only, never outside the root. `O_NONBLOCK` so that a
    /// FIFO in the root cannot block the server. `directory`: only a directory (`O_DIRECTORY`).
    pub async fn open_beneath(&self, rel: &[u8], directory: bool) -> io::Result<OwnedFd> {
        let path = if rel.is_empty() {
            CString::from(c".")
        } else {
            CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
        };
        let mut flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        if directory {
            flags |= libc::O_DIRECTORY;
        }
        if openat2_usable() {
            let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
            let opened = Op::new(op::OpenAt2::new(
                self.raw_fd(),
                path.clone(),
                flags,
                0,
                resolve,
            ))
            .await;
            match opened {
                // No openat2 in this kernel (ENOSYS), or a seccomp filter that refuses it
                // (EPERM: openat2 itself never says EPERM for a read-only open).
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    OPENAT2.store(NO, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        let fd = Op::new(op::OpenAt::new(self.raw_fd(), path, flags, 0)).await?;
        self.check_beneath(&fd)?;
        Ok(fd)
    }

    /// The fallback's check: `fd`'s real path lies under the root's.
    pub(crate) fn check_beneath(&self, fd: &OwnedFd) -> io::Result<()> {
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let real = std::fs::read_link(link)?;
        let root = self.real.as_os_str().as_bytes();
        let path = real.as_os_str().as_bytes();
        let inside = path == root
            || (path.starts_with(root)
                && (root.ends_with(b"/") || path.get(root.len()) == Some(&b'/')));
        if inside {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::EXDEV))
        }
    }
}

const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;

/// Whether openat2 is tried: unknown (try it) until a kernel said `ENOSYS`; never when
/// `HOOP_HTTP_NO_OPENAT2=1` (to test the fallback).
static OPENAT2: AtomicU8 = AtomicU8::new(UNKNOWN);

fn openat2_usable() -> bool {
    // A ring without IORING_OP_OPENAT2 (before 5.6) would fail it with EINVAL: use the
    // fallback there (the epoll driver's system call says ENOSYS by itself).
    let ring_lacks_it = hoop::driver::Driver::current().is_some_and(|d| {
        d.kind() == hoop::DriverKind::Uring && !d.supports_opcode(io_uring::opcode::OpenAt2::CODE)
    });
    if ring_lacks_it {
        return false;
    }
    match OPENAT2.load(Ordering::Relaxed) {
        UNKNOWN => {
            let off = std::env::var_os("HOOP_HTTP_NO_OPENAT2").is_some_and(|v| v == "1");
            OPENAT2.store(if off { NO } else { YES }, Ordering::Relaxed);
            !off
        }
        v => v == YES,
    }
}

/// The status for a failed open.
pub fn open_error_status(e: &io::Error) -> Status {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => Status::Forbidden,
        Some(
            libc::ENOENT
            | libc::ENOTDIR
            | libc::EXDEV
            | libc::ELOOP
            | libc::ENAMETOOLONG
            | libc::ENXIO
            | libc::ENODEV,
        ) => Status::NotFound,
        _ if e.kind() == io::ErrorKind::InvalidInput => Status::NotFound,
        _ => Status::InternalServerError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(t: &str) -> Result<(String, bool), Status> {
        decode(t.as_bytes()).map(|t| (String::from_utf8(t.rel).unwrap(), t.dir_form))
    }

    #[test]
    fn normalizes_inside_the_root() {
        assert_eq!(rel("/"), Ok(("".into(), true)));
        assert_eq!(rel("/a/b.txt?x=1"), Ok(("a/b.txt".into(), false)));
        assert_eq!(rel("/a//b/./c/"), Ok(("a/b/c".into(), true)));
        assert_eq!(rel("/a/../b"), Ok(("b".into(), false)));
        assert_eq!(rel("/a/.."), Ok(("".into(), true)));
        assert_eq!(rel("/text..txt"), Ok(("text..txt".into(), false)));
        assert_eq!(rel("/a%2fb"), Ok(("a/b".into(), false)));
        assert_eq!(rel("/a..%5c"), Ok(("a..\\".into(), false)));
        assert_eq!(rel("/..%5c"), Err(Status::NotFound));
        assert_eq!(rel("/%252e%252e/x"), Ok(("%2e%2e/x".into(), false)));
        assert_eq!(rel("http://h/x"), Ok(("x".into(), false)));
        assert_eq!(rel("http://h"), Ok(("".into(), true)));
    }

    #[test]
    fn refuses_escapes_and_bad_input() {
        assert_eq!(rel("/../etc/passwd"), Err(Status::BadRequest));
        assert_eq!(rel("/%2e%2e/etc/passwd"), Err(Status::BadRequest));
        assert_eq!(rel("/a/%2e%2e%2f%2e%2e/etc"), Err(Status::BadRequest));
        assert_eq!(rel("/a%00b"), Err(Status::BadRequest));
        assert_eq!(rel("/a%zz"), Err(Status::BadRequest));
        assert_eq!(rel("/a%2"), Err(Status::BadRequest));
        assert_eq!(rel("etc/passwd"), Err(Status::BadRequest));
        assert_eq!(rel("*"), Err(Status::BadRequest));
        assert_eq!(rel("/.env"), Err(Status::NotFound));
        assert_eq!(rel("/a/.git/config"), Err(Status::NotFound));
        assert_eq!(rel("/%2egit/x"), Err(Status::NotFound));
    }
}
