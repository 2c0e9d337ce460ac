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
//!     hoop::fs::write("/tmp/hoop-example", hoop::StaticBuf(b"hello")).await?;
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
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use hoop_driver::{op, IoBuf, Op};

pub(crate) mod at;
pub(crate) mod cursor;
pub(crate) mod file;
mod fixed_file;
pub(crate) mod metadata;
mod open_options;

pub use file::File;
pub use fixed_file::FixedFile;
pub use hoop_driver::AlignedBuf;
pub use metadata::Metadata;
pub use open_options::OpenOptions;

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
///
/// # Cancel safety
///
/// This method is cancel safe: it changes nothing, so a dropped call can simply be made again.
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    Metadata::stat_path(path.as_ref(), 0).await
}

/// The metadata of the file at `path` itself: a symbolic link is not followed (`statx` with
/// `AT_SYMLINK_NOFOLLOW`).
///
/// # Cancel safety
///
/// This method is cancel safe: it changes nothing, so a dropped call can simply be made again.
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    Metadata::stat_path(path.as_ref(), libc::AT_SYMLINK_NOFOLLOW).await
}

/// Removes a file or a symbolic link (`unlinkat`).
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = cstr(path.as_ref())?;
    Op::new(op::UnlinkAt::new(libc::AT_FDCWD, path, 0)).await
}

/// Removes an empty directory (`unlinkat` with `AT_REMOVEDIR`).
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = cstr(path.as_ref())?;
    Op::new(op::UnlinkAt::new(libc::AT_FDCWD, path, libc::AT_REMOVEDIR)).await
}

/// Renames `from` to `to`, replacing `to` if it exists (`renameat2`).
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
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
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = cstr(path.as_ref())?;
    Op::new(op::MkdirAt::new(libc::AT_FDCWD, path, 0o777)).await
}

/// Creates a directory and every missing ancestor. A directory that already exists (or is
/// created meanwhile by someone else) is not an error.
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
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
///
/// # Cancel safety
///
/// This method is cancel safe: it changes nothing, so a dropped call can simply be made again.
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let file = File::open(path).await?;
    // The size is a hint only: files in /proc say 0, and a file may grow while it is read.
    let hint = file.metadata().await.map_or(0, |m| m.len());
    crate::io_util::read_to_end(hint, |s, pos| file.read_at(s, pos)).await
}

/// Writes `contents` (its initialized bytes) to the file at `path`, creating it or truncating
/// it first, and closes it, reporting the close's error too.
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
pub async fn write(path: impl AsRef<Path>, contents: impl IoBuf) -> io::Result<()> {
    let file = File::create(path).await?;
    let (res, _) = file.write_all_at(contents, 0).await;
    res?;
    file.close().await
}

/// Copies the contents of the file `from` to `to`, creating or truncating `to` and giving it
/// the permissions of `from`. Returns the number of bytes copied.
///
/// The destination's blocks are reserved first (`fallocate`, best effort), then the file is
/// copied in chunks of 1 MiB, 8 chunks in flight. Each chunk is spliced through
/// a pipe of its own (`IORING_OP_SPLICE` file -> pipe, then pipe -> file: the pages are passed
/// by reference into the pipe, so the data crosses memory once and never through user space,
/// and the kernel runs the splices in parallel workers); where splice is unavailable (an
/// IOPOLL ring, no pipe) each chunk is read into one of 8 reused buffers and written back at
/// the same offset. On the epoll driver the splices run on its blocking pool. A file that
/// changes while it is copied may be copied inconsistently, as with `std::fs::copy`.
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
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
    // An existing destination keeps its mode on open: set it as std::fs::copy does, only on
    // a regular file (a copy onto a device, e.g. /dev/full or a disk, must not chmod it).
    let dst_is_file = dst.metadata().await?.is_file();
    if dst_is_file {
        dst.set_permissions(meta.permissions())?;
    }
    // Reserve the destination's blocks in one call rather than block by block as the
    // writes land (best effort: a file system without fallocate just skips it).
    if meta.len() > 0 && dst_is_file {
        let _ = dst.fallocate(0, meta.len(), 0).await;
    }
    let chunk = usize::try_from(meta.len())
        .unwrap_or(COPY_CHUNK)
        .clamp(4096, COPY_CHUNK);
    let next = std::cell::Cell::new(0u64);
    let end = std::cell::Cell::new(u64::MAX);
    // A device as the destination (e.g. /dev/full) may refuse a splice at an offset
    // (`EINVAL`): it gets plain writes, which report its own error (`ENOSPC`).
    let can_splice = dst_is_file
        && hoop_driver::Driver::current().is_some_and(|d| {
            !d.is_iopoll()
                && (d.kind() != crate::DriverKind::Uring || d.supports_opcode(op::Splice::OPCODE))
        });
    let pipes: Vec<(File, File, usize)> = if can_splice {
        (0..COPY_IN_FLIGHT)
            .map_while(|_| copy_pipe(chunk).ok())
            .collect()
    } else {
        Vec::new()
    };
    let copied: u64 = if pipes.len() == COPY_IN_FLIGHT {
        let workers = pipes
            .iter()
            .map(|(r, w, size)| splice_chunks(&src, &dst, (r, w), *size, &next, &end));
        futures::future::try_join_all(workers)
            .await?
            .into_iter()
            .sum()
    } else {
        let workers = (0..COPY_IN_FLIGHT).map(|_| copy_chunks(&src, &dst, chunk, &next, &end));
        futures::future::try_join_all(workers)
            .await?
            .into_iter()
            .sum()
    };
    drop(pipes);
    if copied < meta.len() && dst_is_file {
        // The source shrank while it was copied: do not keep the reserved length.
        dst.set_len(copied).await?;
    }
    dst.close().await?;
    Ok(copied)
}

/// A pipe for [`copy`]'s splices, grown towards `chunk` bytes: (read end, write end, size).
fn copy_pipe(chunk: usize) -> io::Result<(File, File, usize)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array.
    hoop_driver::error::cvt_libc(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 returned two new fds that nothing else owns.
    let (r, w) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    // Best effort: a smaller pipe only means smaller splices.
    // SAFETY: F_SETPIPE_SZ/F_GETPIPE_SZ have no memory-safety preconditions.
    let size = unsafe {
        libc::fcntl(fds[0], libc::F_SETPIPE_SZ, chunk as libc::c_int);
        libc::fcntl(fds[0], libc::F_GETPIPE_SZ)
    };
    let size = usize::try_from(size).unwrap_or(0);
    if size == 0 {
        return Err(io::Error::other("pipe of size 0"));
    }
    Ok((File::from(r), File::from(w), size.min(chunk)))
}

/// One of [`copy`]'s splice workers: claims the next chunk's offset until the end of the file
/// is found, splices the chunk from `src` into its pipe and from the pipe into `dst` at the
/// same offset. Returns the bytes it copied.
/// `SPLICE_F_MOVE`: move pages rather than copy where the kernel can.
const MOVE: u32 = libc::SPLICE_F_MOVE;

async fn splice_chunks(
    src: &File,
    dst: &File,
    (pipe_r, pipe_w): (&File, &File),
    chunk: usize,
    next: &std::cell::Cell<u64>,
    end: &std::cell::Cell<u64>,
) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let (src_fd, dst_fd) = (src.as_raw_fd(), dst.as_raw_fd());
    let (r, w) = (pipe_r.as_raw_fd(), pipe_w.as_raw_fd());
    let mut copied = 0u64;
    loop {
        let pos = next.get();
        if pos >= end.get() {
            return Ok(copied);
        }
        next.set(pos + chunk as u64);
        let mut got = 0usize;
        while got < chunk {
            let at = pos + got as u64;
            let want = (chunk - got) as u32;
            let n = match Op::new(op::Splice::new(src_fd, Some(at), w, None, want, MOVE)).await {
                Ok(0) => {
                    end.set(end.get().min(pos + got as u64));
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // Drain the pipe into the destination at the same offset.
            let mut out = 0usize;
            while out < n {
                let to = pos + (got + out) as u64;
                let left = (n - out) as u32;
                match Op::new(op::Splice::new(r, None, dst_fd, Some(to), left, MOVE)).await {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "the destination took no byte",
                        ))
                    }
                    Ok(m) => out += m,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            got += n;
            copied += n as u64;
        }
    }
}

/// Chunks in flight in [`copy`], and their size.
const COPY_IN_FLIGHT: usize = 8;
const COPY_CHUNK: usize = 1 << 20;

/// One of [`copy`]'s workers: claims the next chunk's offset until the end of the file is
/// found, reads the chunk (in as many reads as it takes) and writes it at the same offset.
/// Returns the bytes it copied.
async fn copy_chunks(
    src: &File,
    dst: &File,
    chunk: usize,
    next: &std::cell::Cell<u64>,
    end: &std::cell::Cell<u64>,
) -> io::Result<u64> {
    let mut buf: Vec<u8> = Vec::with_capacity(chunk);
    let mut copied = 0u64;
    loop {
        let pos = next.get();
        if pos >= end.get() {
            return Ok(copied);
        }
        next.set(pos + chunk as u64);
        buf.clear();
        // Fill the chunk; a read of 0 bytes is the end of the file.
        while buf.len() < chunk {
            let len = buf.len();
            let (res, slice) = src.read_at(buf.slice(len..chunk), pos + len as u64).await;
            buf = slice.into_inner();
            match res {
                Ok(0) => {
                    end.set(end.get().min(pos + buf.len() as u64));
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if buf.is_empty() {
            continue;
        }
        let n = buf.len() as u64;
        let (res, b) = dst.write_all_at(buf, pos).await;
        buf = b;
        res?;
        copied += n;
    }
}
