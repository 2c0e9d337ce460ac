//! File metadata, from `statx`.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hoop_driver::{op, Op};

use super::cstr;

/// What `statx` is asked for: everything `stat` gives, plus the creation time.
pub(crate) const MASK: u32 = libc::STATX_BASIC_STATS | libc::STATX_BTIME;

/// Metadata of a file: a `statx` result.
#[derive(Clone, Copy)]
pub struct Metadata {
    stx: libc::statx,
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metadata")
            .field("mode", &format_args!("{:#o}", self.mode()))
            .field("len", &self.len())
            .field("ino", &self.ino())
            .field("dev", &self.dev())
            .field("nlink", &self.nlink())
            .finish_non_exhaustive()
    }
}

impl Metadata {
    /// `statx(dirfd, path, flags)` through the ring.
    pub(crate) async fn statx(dirfd: RawFd, path: CString, flags: i32) -> io::Result<Metadata> {
        let stx = Op::new(op::Statx::new(dirfd, path, flags, MASK)).await?;
        Ok(Metadata { stx })
    }

    /// Stats `path` relative to the working directory.
    pub(crate) async fn stat_path(path: &Path, flags: i32) -> io::Result<Metadata> {
        let path = cstr(path)?;
        Self::statx(libc::AT_FDCWD, path, flags | libc::AT_STATX_SYNC_AS_STAT).await
    }

    /// Wraps a `statx` result.
    pub fn from_statx(stx: libc::statx) -> Metadata {
        Metadata { stx }
    }

    /// The raw `statx` result.
    pub fn as_statx(&self) -> &libc::statx {
        &self.stx
    }

    /// Size in bytes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.stx.stx_size
    }

    fn file_type(&self) -> u32 {
        u32::from(self.stx.stx_mode) & libc::S_IFMT
    }

    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == libc::S_IFDIR
    }

    /// Whether this is a symbolic link (only from [`symlink_metadata`](super::symlink_metadata):
    /// the other calls follow links).
    pub fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }

    /// The file type and permission bits (`st_mode`), as `std::os::unix::fs::MetadataExt::mode`.
    pub fn mode(&self) -> u32 {
        u32::from(self.stx.stx_mode)
    }

    /// The permissions, as std represents them.
    pub fn permissions(&self) -> std::fs::Permissions {
        std::fs::Permissions::from_mode(self.mode())
    }

    /// Last modification time.
    pub fn modified(&self) -> io::Result<SystemTime> {
        self.time(libc::STATX_MTIME, self.stx.stx_mtime, "modification")
    }

    /// Last access time.
    pub fn accessed(&self) -> io::Result<SystemTime> {
        self.time(libc::STATX_ATIME, self.stx.stx_atime, "access")
    }

    /// Creation (birth) time; an `Unsupported` error on file systems that do not record it.
    pub fn created(&self) -> io::Result<SystemTime> {
        self.time(libc::STATX_BTIME, self.stx.stx_btime, "creation")
    }

    /// Last status change time.
    pub fn changed(&self) -> io::Result<SystemTime> {
        self.time(libc::STATX_CTIME, self.stx.stx_ctime, "status change")
    }

    fn time(&self, bit: u32, ts: libc::statx_timestamp, what: &str) -> io::Result<SystemTime> {
        if self.stx.stx_mask & bit == 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the file system does not report the {what} time"),
            ));
        }
        let t = if ts.tv_sec >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(Duration::new(ts.tv_sec as u64, ts.tv_nsec))
        } else {
            SystemTime::UNIX_EPOCH
                .checked_sub(Duration::from_secs(ts.tv_sec.unsigned_abs()))
                .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(ts.tv_nsec))))
        };
        t.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the {what} time is out of SystemTime's range"),
            )
        })
    }

    /// Preferred I/O block size.
    pub fn blksize(&self) -> u64 {
        u64::from(self.stx.stx_blksize)
    }

    /// Number of 512-byte blocks allocated.
    pub fn blocks(&self) -> u64 {
        self.stx.stx_blocks
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.stx.stx_ino
    }

    /// The device the file is on.
    pub fn dev(&self) -> u64 {
        libc::makedev(self.stx.stx_dev_major, self.stx.stx_dev_minor)
    }

    /// The device this file is, for device files.
    pub fn rdev(&self) -> u64 {
        libc::makedev(self.stx.stx_rdev_major, self.stx.stx_rdev_minor)
    }

    /// Number of hard links.
    pub fn nlink(&self) -> u64 {
        u64::from(self.stx.stx_nlink)
    }

    /// Owner's user id.
    pub fn uid(&self) -> u32 {
        self.stx.stx_uid
    }

    /// Owner's group id.
    pub fn gid(&self) -> u32 {
        self.stx.stx_gid
    }
}
