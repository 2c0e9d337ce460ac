//! Files and directories, with every operation on the ring.
//!
//! The API follows `std::fs` and tokio's, with one difference: reads and writes take their
//! buffers by value and give them back with the result ([`BufResult`]), so the kernel never
//! writes into memory the caller still borrows. Positions are explicit (`read_at`, `write_at`),
//! as in `pread`/`pwrite`.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! hoop::Runtime::new()?.block_on(async {
//!     hoop::fs::write("/tmp/hoop-example", b"hello" as &'static [u8]).await?;
//!     let file = hoop::fs::File::open("/tmp/hoop-example").await?;
//!     let (res, buf) = file.read_at(Vec::with_capacity(16), 0).await;
//!     assert_eq!(&buf[..res?], b"hello");
//!     file.close().await?;
//!     hoop::fs::remove_file("/tmp/hoop-example").await
//! })
//! # }
//! ```
//!
//! Dropping a future cancels its operation; a file opened after its `open` future was dropped
//! is closed when the completion arrives, never leaked. A [`File`] dropped inside a runtime is
//! closed through the ring on the same tick.
//!
//! For `O_DIRECT` files, [`AlignedBuf`] is a buffer aligned to the block size; for files read
//! and written many times, [`File::register`] puts the file into the ring's registered file
//! table ([`FixedFile`]), and [`FixedBufPool`](crate::FixedBufPool) registers the buffers.
//!
//! [`BufResult`]: crate::BufResult

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use hoop_driver::{op, IoBuf, Op};

mod file;
mod fixed_file;
mod metadata;
mod open_options;

pub use file::File;
pub use fixed_file::FixedFile;
pub use hoop_driver::AlignedBuf;
pub use metadata::Metadata;
pub use open_options::OpenOptions;

/// Size of the buffer [`copy`] streams through.
const COPY_BUF: usize = 64 * 1024;

/// Converts a path to the NUL-terminated string the kernel reads. A path with an interior NUL
/// byte cannot name a file: it is an `InvalidInput` error.
pub(crate) fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path contains an interior NUL byte: {path:?}"),
        )
    })
}

/// The metadata of the file at `path`, following symbolic links (`statx`).
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    Metadata::stat_path(path.as_ref(), 0).await
}

/// The metadata of the file at `path` itself: a symbolic link is not followed (`statx` with
/// `AT_SYMLINK_NOFOLLOW`).
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    Metadata::stat_path(path.as_ref(), libc::AT_SYMLINK_NOFOLLOW).await
}

/// Removes a file or a symbolic link (`unlinkat`).
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = cstr(path.as_ref())?;
    Op::new(op::UnlinkAt::new(libc::AT_FDCWD, path, 0)).await
}

/// Removes an empty directory (`unlinkat` with `AT_REMOVEDIR`).
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = cstr(path.as_ref())?;
    Op::new(op::UnlinkAt::new(libc::AT_FDCWD, path, libc::AT_REMOVEDIR)).await
}

/// Renames `from` to `to`, replacing `to` if it exists (`renameat2`).
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let from = cstr(from.as_ref())?;
    let to = cstr(to.as_ref())?;
    Op::new(op::RenameAt::new(
        libc::AT_FDCWD,
        from,
        libc::AT_FDCWD,
        to,
        0,
    ))
    .await
}

/// Creates a directory with mode `0o777` (less the umask) (`mkdirat`). Its parent must exist.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = cstr(path.as_ref())?;
    Op::new(op::MkdirAt::new(libc::AT_FDCWD, path, 0o777)).await
}

/// Creates a directory and every missing ancestor. A directory that already exists (or is
/// created meanwhile by someone else) is not an error.
pub async fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    if path.as_os_str().is_empty() {
        return Ok(());
    }
    // Walk up until a directory can be created or exists, remembering the missing ones; the
    // walk is bounded by the number of components of `path`.
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut cur = path;
    loop {
        match create_dir(cur).await {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => match cur.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => {
                    missing.push(cur.to_path_buf());
                    cur = parent;
                }
                _ => return Err(e),
            },
            Err(e) => {
                if is_dir(cur).await {
                    break;
                }
                return Err(e);
            }
        }
    }
    for dir in missing.iter().rev() {
        if let Err(e) = create_dir(dir).await {
            if !is_dir(dir).await {
                return Err(e);
            }
        }
    }
    Ok(())
}

async fn is_dir(path: &Path) -> bool {
    metadata(path).await.is_ok_and(|m| m.is_dir())
}

/// Reads the whole file at `path`.
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let file = File::open(path).await?;
    // The size is a hint only: files in /proc say 0, and a file may grow while it is read.
    let hint = file.metadata().await.map_or(0, |m| m.len());
    let hint = usize::try_from(hint).unwrap_or(0);
    let mut buf = Vec::with_capacity(hint.saturating_add(1).max(64));
    let mut pos = 0u64;
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().max(8192));
        }
        let len = buf.len();
        let (res, slice) = file.read_at(buf.slice(len..), pos).await;
        buf = slice.into_inner();
        match res {
            Ok(0) => break,
            Ok(n) => pos += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

/// Writes `contents` (its initialized bytes) to the file at `path`, creating it or truncating
/// it first, and closes it, reporting the close's error too.
pub async fn write(path: impl AsRef<Path>, contents: impl IoBuf) -> io::Result<()> {
    let file = File::create(path).await?;
    let (res, _) = file.write_all_at(contents, 0).await;
    res?;
    file.close().await
}

/// Copies the contents of the file `from` to `to`, creating or truncating `to` and giving it
/// the permissions of `from`. Returns the number of bytes copied.
///
/// The data streams through one 64 KiB buffer, read with `read_at` and written with
/// `write_all_at`.
pub async fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    let from = from.as_ref();
    let src = File::open(from).await?;
    let meta = src.metadata().await?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot copy {from:?}: not a regular file"),
        ));
    }
    let dst = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(meta.mode() & 0o7777)
        .open(to)
        .await?;
    // An existing destination keeps its mode on open: set it as std::fs::copy does.
    dst.set_permissions(meta.permissions())?;
    let mut buf = Vec::with_capacity(COPY_BUF);
    let mut pos = 0u64;
    loop {
        buf.clear();
        let (res, b) = src.read_at(buf, pos).await;
        buf = b;
        match res {
            Ok(0) => break,
            Ok(n) => {
                let (res, b) = dst.write_all_at(buf, pos).await;
                buf = b;
                res?;
                pos += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    dst.close().await?;
    Ok(pos)
}
