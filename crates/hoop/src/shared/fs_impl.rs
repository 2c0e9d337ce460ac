//! Files on shared rings: `hoop::shared::File`, its `OpenOptions`, and `read`/`write`.

use std::ffi::CString;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;

use hoop_driver::op;
use hoop_driver::shared::{Keep, Route, SharedOp};
use hoop_driver::{BufResult, IoBuf, IoBufMut};

use super::poll::{file_state, FileOps};
use crate::fs::at::advance;
use crate::fs::Metadata;
use crate::io_util::{fill_exact, until_done};
use crate::poll_io::PollIo;
use hoop_driver::shared::Rings;

/// A file whose operations run on shared [`Rings`]: `Send + Sync`, and every operation is a
/// `Send + 'static` future, so it can be awaited from tokio's multi-thread scheduler or any
/// other executor, and moved between threads while in flight.
///
/// Buffers are taken by value and given back with the result (the kernel never writes into
/// memory the caller still borrows); the read rule of the crate docs holds. The fd is closed when
/// the `File` and every operation that names it are gone, after the last operation's final CQE,
/// so a dropped read never reaches a file that later got the same fd number. Reads and writes of
/// a file opened with `O_DIRECT` go to an IOPOLL ring when the set has one.
///
/// Like `tokio::fs::File`, it also implements `AsyncRead`, `AsyncWrite` and `AsyncSeek`
/// (`futures::io`'s, and tokio's with the `tokio` feature) at the file's own position, with the
/// rules of [`hoop::fs::File`](crate::fs::File) (read-ahead, write-behind with a staged write,
/// buffers of up to [`max_buf_size`](File::max_buf_size), 1 MiB by default; not aligned: use
/// `read_at` with an `AlignedBuf` for `O_DIRECT`). `poll_flush` waits for the write-behind; a
/// write or a seek gives back bytes read ahead first. Dropped with writes pending, the `File`
/// still writes them, in order, as tokio's does (its operations, woken by the rings, finish
/// them on whatever thread wakes them; the fd closes after them); errors of those writes are
/// dropped, so flush where they matter.
#[derive(Debug)]
pub struct File {
    fd: Arc<OwnedFd>,
    rings: Rings,
    route: Route,
    /// The poll-based traits' state (made on first use; a clone starts without one).
    io: Option<Box<PollIo<FileOps>>>,
}

impl Drop for File {
    fn drop(&mut self) {
        // Bytes `AsyncWrite` accepted are written, even by a dropped value (DESIGN.md,
        // "Writes accepted are written"): a self-driven writer finishes them, holding the
        // fd's `Arc` (see `poll_io::finish_shared`).
        let fd = self.fd.as_raw_fd();
        crate::poll_io::finish_shared(self.io.take(), fd);
    }
}

impl Clone for File {
    /// Another handle to the same open file (the same fd and file position).
    fn clone(&self) -> File {
        File {
            fd: self.fd.clone(),
            rings: self.rings.clone(),
            route: self.route,
            io: None,
        }
    }
}

impl File {
    /// Opens `path` read-only. The path is copied before this returns: the future borrows
    /// neither `rings` nor `path` (`tokio::spawn(File::open(&rings, &path))` compiles).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is dropped, a file it opened is closed, never leaked (with
    /// `create`, the file may exist).
    pub fn open(
        rings: &Rings,
        path: impl AsRef<Path>,
    ) -> impl Future<Output = io::Result<File>> + Send + 'static {
        OpenOptions::new().read(true).open(rings, path)
    }

    /// Opens `path` write-only, creating it or truncating it. Borrows nothing (as
    /// [`File::open`]).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is dropped, a file it opened is closed, never leaked (with
    /// `create`, the file may exist).
    pub fn create(
        rings: &Rings,
        path: impl AsRef<Path>,
    ) -> impl Future<Output = io::Result<File>> + Send + 'static {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(rings, path)
    }

    /// Options to open a file with (std's rules, plus `custom_flags` such as `O_DIRECT`).
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// A `File` for an fd opened elsewhere (its flags are read to route `O_DIRECT` I/O).
    pub fn from_std(rings: &Rings, file: std::fs::File) -> File {
        let fd = OwnedFd::from(file);
        // SAFETY: fcntl(F_GETFL) on an fd we own; no memory is passed.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        File::from_owned(rings, fd, flags > 0 && flags & libc::O_DIRECT != 0)
    }

    fn from_owned(rings: &Rings, fd: OwnedFd, direct: bool) -> File {
        super::poll::install_reactor();
        File {
            fd: Arc::new(fd),
            rings: rings.clone(),
            route: if direct { Route::Direct } else { Route::Plain },
            io: None,
        }
    }

    /// [`poll_io`](Self::poll_io) for reads (a file keeps no receives).
    pub(crate) fn poll_read_io(
        &mut self,
    ) -> (RawFd, Option<&crate::net::kept::Kept>, &mut PollIo<FileOps>) {
        let (fd, io) = self.poll_io();
        (fd, None, io)
    }

    /// The fd and the poll-based traits' state.
    pub(crate) fn poll_io(&mut self) -> (RawFd, &mut PollIo<FileOps>) {
        let fd = self.fd.as_raw_fd();
        let (sfd, rings, route) = (&self.fd, &self.rings, self.route);
        (
            fd,
            self.io.get_or_insert_with(|| file_state(sfd, rings, route)),
        )
    }

    /// The size of the largest read and write of the poll-based traits (1 MiB unless set): as
    /// [`hoop::fs::File::max_buf_size`](crate::fs::File::max_buf_size).
    pub fn max_buf_size(&self) -> usize {
        self.io
            .as_ref()
            .map_or(crate::poll_io::FILE_BUF_BYTES, |io| io.max_buf())
    }

    /// Sets the size of the largest read and write of the poll-based traits: as
    /// [`hoop::fs::File::set_max_buf_size`](crate::fs::File::set_max_buf_size) (0 is taken
    /// as 1). A clone starts with the default.
    pub fn set_max_buf_size(&mut self, bytes: usize) {
        let (_, io) = self.poll_io();
        io.set_max_buf(bytes);
    }

    /// The rings this file's operations run on.
    pub fn rings(&self) -> &Rings {
        &self.rings
    }

    /// Reads into `buf` (from its start, up to its capacity) at byte offset `pos`; returns the
    /// number of bytes read, 0 at end of file. The buffer's length becomes exactly that.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub fn read_at<B: IoBufMut + Send>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + Send + 'static {
        self.read_at_op(buf, pos)
    }

    fn read_at_op<B: IoBufMut + Send>(
        &self,
        buf: B,
        pos: u64,
    ) -> SharedOp<Keep<op::Read<B>, Arc<OwnedFd>>> {
        let read = op::Read::new(self.fd.as_raw_fd(), buf, pos);
        self.rings
            .submit(self.route, Keep::new(read, self.fd.clone()))
    }

    /// Writes the initialized bytes of `buf` at byte offset `pos`; returns how many were
    /// written: maybe fewer.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub fn write_at<B: IoBuf + Send>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + Send + 'static {
        self.write_at_op(buf, pos)
    }

    fn write_at_op<B: IoBuf + Send>(
        &self,
        buf: B,
        pos: u64,
    ) -> SharedOp<Keep<op::Write<B>, Arc<OwnedFd>>> {
        let write = op::Write::new(self.fd.as_raw_fd(), buf, pos);
        self.rings
            .submit(self.route, Keep::new(write, self.fd.clone()))
    }

    /// Reads exactly `buf.len()` bytes at `pos` (the whole view of a `buf.slice(..n)`), in as
    /// many reads as it takes; `UnexpectedEof` if the file ends first.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub fn read_exact_at<B: IoBufMut + Send>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<(), B>> + Send + 'static {
        let file = self.clone();
        async move {
            let msg = "end of file before the buffer was filled";
            fill_exact(buf, msg, |s, done| file.read_at(s, advance(pos, done))).await
        }
    }

    /// Writes every initialized byte of `buf` at `pos`, in as many writes as it takes.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub fn write_all_at<B: IoBuf + Send>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<(), B>> + Send + 'static {
        let file = self.clone();
        async move {
            let total = buf.bytes_init();
            let msg = "failed to write the whole buffer";
            until_done(buf, total, io::ErrorKind::WriteZero, msg, |s, done| {
                file.write_at(s, advance(pos, done))
            })
            .await
        }
    }

    /// Flushes the file's data and metadata to its device (`fsync`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub fn sync_all(&self) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.fsync(false)
    }

    /// Flushes the file's data, and the metadata needed to read it back (`fdatasync`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub fn sync_data(&self) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.fsync(true)
    }

    fn fsync(&self, datasync: bool) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let sync = op::Fsync::new(self.fd.as_raw_fd(), datasync);
        self.rings
            .submit(Route::Plain, Keep::new(sync, self.fd.clone()))
    }

    /// The file's metadata (`statx` on the fd).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it changes nothing, so a dropped call can simply be made again.
    pub fn metadata(&self) -> impl Future<Output = io::Result<Metadata>> + Send + 'static {
        let stx = op::Statx::new(
            self.fd.as_raw_fd(),
            CString::default(),
            libc::AT_EMPTY_PATH,
            crate::fs::metadata::MASK,
        );
        let stat = self
            .rings
            .submit(Route::Plain, Keep::new(stx, self.fd.clone()));
        async move { stat.await.map(Metadata::from_statx) }
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Setters that pass each option on to `crate::fs::OpenOptions`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($ty:ty),)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&mut self, value: $ty) -> &mut OpenOptions {
                self.0.$name(value);
                self
            }
        )*
    };
}

/// How a [`File`] on shared rings is opened: std's `OpenOptions`, opened with `open(&rings,
/// path)` through `IORING_OP_OPENAT`. A late open result (the future was dropped) is closed.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions(crate::fs::OpenOptions);

impl OpenOptions {
    /// Options with everything off and mode `0o666`.
    pub fn new() -> OpenOptions {
        OpenOptions(crate::fs::OpenOptions::new())
    }
    setters! {
        /// Open for reading.
        read(bool),
        /// Open for writing.
        write(bool),
        /// Open for appending.
        append(bool),
        /// Truncate the file to 0 bytes.
        truncate(bool),
        /// Create the file if it is missing.
        create(bool),
        /// Create the file; fail if it exists.
        create_new(bool),
        /// The mode bits of a created file (default `0o666`, before the umask).
        mode(u32),
        /// More `open(2)` flags, e.g. `libc::O_DIRECT` (the access mode bits are ignored).
        custom_flags(i32),
    }

    /// Opens `path` on `rings`. The path is converted (to a C string) and `rings` cloned before
    /// this returns, so the future borrows neither; a path with a NUL byte fails when the
    /// future is first polled.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is dropped, a file it opened is closed, never leaked (with
    /// `create`, the file may exist).
    pub fn open(
        &self,
        rings: &Rings,
        path: impl AsRef<Path>,
    ) -> impl Future<Output = io::Result<File>> + Send + 'static {
        self.open_with(rings, path, false)
    }

    /// `open`; `eager`: submitted on the first poll (see `SharedOp::eager`).
    fn open_with(
        &self,
        rings: &Rings,
        path: impl AsRef<Path>,
        eager: bool,
    ) -> impl Future<Output = io::Result<File>> + Send + 'static {
        let prepared = self
            .0
            .flags()
            .and_then(|flags| Ok((flags, crate::fs::cstr(path.as_ref())?)));
        let mode = self.0.mode_bits();
        let rings = rings.clone();
        async move {
            let (flags, path) = prepared?;
            let open = op::OpenAt::new(libc::AT_FDCWD, path, flags | libc::O_CLOEXEC, mode);
            let open = rings.submit(Route::Plain, open);
            let fd = if eager {
                open.eager().await
            } else {
                open.await
            }?;
            Ok(File::from_owned(&rings, fd, flags & libc::O_DIRECT != 0))
        }
    }
}

/// Reads the whole file at `path` through `rings`. The path is copied and `rings` cloned
/// before this returns: the future borrows neither.
///
/// # Cancel safety
///
/// This method is cancel safe: it changes nothing, so a dropped call can simply be made again.
pub fn read(
    rings: &Rings,
    path: impl AsRef<Path>,
) -> impl Future<Output = io::Result<Vec<u8>>> + Send + 'static {
    // Each step waits for the one before: nothing to batch, so every operation is submitted
    // on its first poll (a hot-cache open and read complete inside that submit, without going
    // back to the executor).
    let open = OpenOptions::new().read(true).open_with(rings, path, true);
    async move {
        let file = open.await?;
        let hint = size_hint(file.fd.as_raw_fd());
        crate::io_util::read_to_end(hint, |s, pos| file.read_at_op(s, pos).eager()).await
    }
}

/// The file's size by `fstat(2)` on its fd, made here: a read of the inode's attributes that
/// never waits for the device, where a `statx` through the ring would be handed to a kernel
/// worker thread (io_uring runs statx off the submitting thread) and cost a wake-up. 0 when it
/// fails (the read then grows its buffer as it goes).
fn size_hint(fd: RawFd) -> u64 {
    // SAFETY: fstat writes a stat struct into a local.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `sb` is a live, writable stat struct; `fd` is open (the caller holds it).
    if unsafe { libc::fstat(fd, &mut sb) } == 0 {
        u64::try_from(sb.st_size).unwrap_or(0)
    } else {
        0
    }
}

/// Writes `contents` (its initialized bytes) to the file at `path` through `rings`, creating
/// it or truncating it first. The path is copied and `rings` cloned before this returns: the
/// future borrows neither (`contents` is owned, as every buffer here).
///
/// # Cancel safety
///
/// This method is not cancel safe: if it is dropped before it completes, the change may have
/// happened in part or in whole.
pub fn write(
    rings: &Rings,
    path: impl AsRef<Path>,
    contents: impl IoBuf + Send,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    // As `read`: one step after another, each submitted on its first poll.
    let create = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open_with(rings, path, true);
    async move {
        let file = create.await?;
        let total = contents.bytes_init();
        let msg = "failed to write the whole buffer";
        let (res, _) = until_done(contents, total, io::ErrorKind::WriteZero, msg, |s, done| {
            file.write_at_op(s, done as u64).eager()
        })
        .await;
        res
    }
}
