//! An open file whose operations go through the ring.

use std::ffi::CString;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use hoop_driver::error::cvt_libc;

use hoop_driver::{op, BufResult, Driver, Home, IoBuf, IoBufMut, Op};

use super::at::{read_exact_on, write_all_on};
use super::{Metadata, OpenOptions};

/// An open file. Reads and writes take an explicit position and a buffer by value, and give
/// the buffer back with the result.
///
/// # Positions: the owned-buffer methods and the traits
///
/// * The owned-buffer methods ([`read_at`](File::read_at), [`write_at`](File::write_at),
///   `read_exact_at`, `readv_at`, …) take a position and have `pread(2)`/`pwrite(2)`
///   semantics: they neither use nor move the file's cursor (the fd's own offset), except
///   with `pos` = [`CURRENT_POS`](hoop_driver::op::CURRENT_POS), which reads or writes at the
///   cursor and advances it. (A file opened with `append` writes at its end whatever `pos`
///   says.)
/// * `futures::io::{AsyncRead, AsyncWrite, AsyncSeek}` (and tokio's with feature `tokio`) read
///   and write at the cursor (`read(2)`/`write(2)`), like `std::fs::File`'s `Read`, `Write`
///   and `Seek`, through internal buffers of at most [`max_buf_size`](File::max_buf_size)
///   bytes (1 MiB unless [`set_max_buf_size`](File::set_max_buf_size) says otherwise):
///   - reads read ahead: each read with no seek or write since the last one asks the kernel
///     for twice as much as the last (at least the caller's slice, at most the buffer size);
///     the bytes beyond the caller's slice are handed out by the next reads. The cursor may
///     thus be ahead of the bytes handed out; a write or a seek through the traits gives those
///     bytes back first, so the sequence of reads, writes and seeks lands exactly where it
///     would with std's `File`, and `SeekFrom::Current(0)` (`stream_position`) reports the
///     position the caller has seen;
///   - writes are write-behind: `poll_write` copies the bytes and returns at once; while a
///     write is in flight, more bytes are staged behind it (up to the buffer size) and written
///     when it completes, in order, one write at a time. `flush`/`close` wait for every
///     accepted byte; an error of a write-behind comes back from the next write, flush or
///     close (bytes staged behind the failed write are dropped with it). A read waits for the
///     pending writes first. Dropping the `File` with writes pending still writes them, in
///     order, then closes the file (a detached task of the runtime, as tokio's `File` finishes
///     its blocking write; the end of `block_on` and the runtime's shutdown wait for it, up to
///     the shutdown timeout, and report what did not finish in
///     [`ShutdownReport::unfinished_writes`](crate::ShutdownReport::unfinished_writes)). Only
///     `flush` and [`close`](File::close) return errors: a dropped file's write error (a full
///     disk's `ENOSPC`) is counted in
///     [`ShutdownReport::failed_writes`](crate::ShutdownReport::failed_writes) and said once
///     per process on stderr. Dropped after `block_on` returned or on another thread, the
///     pending writes are cancelled.
///
/// # Full disks
///
/// A write that fails (`ENOSPC` on a full disk) returns the kernel's `io::Error`, as std's and
/// tokio's do: [`write_at`](File::write_at) says how many bytes landed (`Ok(n)`, maybe fewer,
/// then the error on the next call); `write_all_at`, [`fs::write`](super::write) and the
/// traits' `write_all` cannot carry a count in their error, and the bytes that landed are the
/// file's length (written from its start, in order). No write returns `Ok` for a byte that did
/// not land: through the traits, a write accepts bytes before they land, and their error comes
/// back from the next write, `flush` or `close`, once. [`fs::copy`](super::copy) writes chunks
/// in parallel: after its error the destination holds an unspecified part of the source, as
/// after std's. Freed space (a file removed) makes the next writes succeed.
///
/// Before using the cursor another way after the traits (a `*_at` method with `CURRENT_POS`,
/// [`into_std`](File::into_std), another fd of the same open file), flush and seek to
/// `SeekFrom::Current(0)` through the traits: the pending bytes are written and the cursor
/// moves back to the caller's position. A positional read at an explicit `pos` does not see
/// bytes still pending in the write-behind until a flush.
///
/// Dropping a `File` closes it through the ring (`IORING_OP_CLOSE`, submitted on this tick)
/// inside a runtime, or with `close(2)` outside one. [`close`](File::close) closes it and
/// reports the error.
#[derive(Debug)]
pub struct File {
    /// `Some` for the whole life of the value: only `Drop` and the methods that consume the
    /// file take it.
    fd: Option<OwnedFd>,
    /// The driver whose SQ may hold SQEs naming the fd: the fd leaves hoop only once they
    /// are submitted, else a reused fd number would get them (see [`Home`]).
    home: Option<Home>,
    /// The state of the poll-based traits (`AsyncRead`/`AsyncWrite`), made on first use.
    io: Option<Box<crate::poll_io::PollIo>>,
}

crate::poll_io::poll_io_traits!(File);
crate::poll_io::poll_io_traits!(@seek File);

impl File {
    pub(crate) fn from_owned(fd: OwnedFd) -> File {
        File {
            fd: Some(fd),
            home: Home::current(),
            io: None,
        }
    }

    /// [`poll_io`](Self::poll_io) for reads (a file keeps no receives).
    fn poll_read_io(
        &mut self,
    ) -> (
        RawFd,
        Option<&crate::net::kept::Kept>,
        &mut crate::poll_io::PollIo,
    ) {
        let (fd, io) = self.poll_io();
        (fd, None, io)
    }

    /// The fd and the poll-based traits' state (made on first use).
    fn poll_io(&mut self) -> (RawFd, &mut crate::poll_io::PollIo) {
        let fd = self.raw();
        let io = self.io.get_or_insert_with(|| {
            Box::new(crate::poll_io::PollIo::new(crate::poll_io::Kind::File))
        });
        (fd, io)
    }

    /// The size of the largest read and write of the poll-based traits (`AsyncRead`,
    /// `AsyncWrite`): the read-ahead grows up to it, and each of the two write buffers (the one
    /// in flight, the one staged behind it) holds up to it. 1 MiB unless set.
    pub fn max_buf_size(&self) -> usize {
        self.io
            .as_ref()
            .map_or(crate::poll_io::FILE_BUF_BYTES, |io| io.max_buf())
    }

    /// Sets the size of the largest read and write of the poll-based traits (tokio's
    /// `File::set_max_buf_size`): larger sizes make fewer, larger system calls for sequential
    /// copies, at the cost of up to three buffers of this size (read, write in flight, write
    /// staged; each made only when used, and grown as the reads and writes grow). 0 is taken
    /// as 1 (a read of 0 bytes would mean the end of the file) and sizes above 1 GiB as 1 GiB.
    /// Bytes already buffered are kept; it applies to the next reads and writes.
    pub fn set_max_buf_size(&mut self, bytes: usize) {
        let (_, io) = self.poll_io();
        io.set_max_buf(bytes);
    }

    /// Opens the file at `path` for reading.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is dropped, a file it opened is closed, never leaked (with
    /// `create`, the file may exist).
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Opens the file at `path` for writing, creating it, or truncating it if it exists.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is dropped, a file it opened is closed, never leaked (with
    /// `create`, the file may exist).
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    /// Options to open a file with (same as [`OpenOptions::new`]).
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Wraps a std file.
    pub fn from_std(file: std::fs::File) -> File {
        File::from_owned(OwnedFd::from(file))
    }

    /// Gives the file up as a std file. Operations of this `File` dropped before they reached
    /// the kernel may still sit in its ring's submission queue: on the thread of that ring they
    /// are submitted first; on another thread the std file is a `dup` of the fd, and the
    /// original is closed by its ring behind them. Either way they never reach another file
    /// that later gets the same fd number.
    pub fn into_std(self) -> std::fs::File {
        std::fs::File::from(self.into_owned())
    }

    fn into_owned(mut self) -> OwnedFd {
        match self.fd.take() {
            Some(fd) => Home::release(self.home.as_ref(), fd),
            // Only Drop and the consuming methods take the fd, and they run once.
            None => unreachable!("hoop::fs::File without an fd"),
        }
    }

    fn raw(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Reads into `buf` (from its start, up to its capacity: `bytes_total()`) at byte offset
    /// `pos`, and returns the number of bytes read; 0 means end of file. The buffer's length
    /// becomes exactly the number of bytes read (0 on error): see the crate docs' read rule.
    ///
    /// `pos` may be [`CURRENT_POS`](hoop_driver::op::CURRENT_POS) to read at, and advance, the
    /// file's own position (for pipes and character devices); this holds for every `*_at`
    /// method.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub fn read_at<B: IoBufMut>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + '_ {
        // A plain function returning the operation (not an `async fn` around it): one state
        // machine less per I/O. The borrow of `self` keeps the fd open while it runs. At the
        // cursor, the cursor is fixed after a short read (`fs::cursor`: a kernel bug).
        let len = buf.bytes_total();
        super::cursor::at_cursor(
            self.raw(),
            pos,
            len,
            Op::new(op::Read::new(self.raw(), buf, pos)),
        )
    }

    /// [`read_at`](Self::read_at) with a deadline linked to it in the kernel
    /// (`IORING_OP_LINK_TIMEOUT`; the timer heap on epoll): if `timeout` passes first (a pipe or
    /// a FIFO with no data, a slow network file system), the read is cancelled and fails with
    /// `TimedOut` ("deadline of 200 ms passed"); the buffer comes back either way. A read that
    /// already runs in an io-wq worker may finish instead of being cancelled.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub async fn read_at_timeout<B: IoBufMut>(
        &self,
        buf: B,
        pos: u64,
        timeout: Duration,
    ) -> BufResult<usize, B> {
        let len = buf.bytes_total();
        let read = op::Read::new(self.raw(), buf, pos);
        let read = Op::new(op::Deadline::new(read, timeout));
        super::cursor::at_cursor(self.raw(), pos, len, read).await
    }

    /// [`write_at`](Self::write_at) with a deadline linked to it in the kernel (see
    /// [`read_at_timeout`](Self::read_at_timeout)).
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn write_at_timeout<B: IoBuf>(
        &self,
        buf: B,
        pos: u64,
        timeout: Duration,
    ) -> BufResult<usize, B> {
        let len = buf.bytes_init();
        let write = op::Write::new(self.raw(), buf, pos);
        let write = Op::new(op::Deadline::new(write, timeout));
        super::cursor::at_cursor(self.raw(), pos, len, write).await
    }

    /// Writes the initialized bytes of `buf` at byte offset `pos` (at the end of the file when
    /// it was opened with `append`), and returns how many were written: maybe fewer.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub fn write_at<B: IoBuf>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + '_ {
        // A plain function returning the operation (not an `async fn` around it): one state
        // machine less per I/O. The borrow of `self` keeps the fd open while it runs. At the
        // cursor, the cursor is fixed after a short write (`fs::cursor`: a kernel bug).
        let len = buf.bytes_init();
        super::cursor::at_cursor(
            self.raw(),
            pos,
            len,
            Op::new(op::Write::new(self.raw(), buf, pos)),
        )
    }

    /// Reads exactly `buf.len()` bytes at `pos` (the whole view of a `buf.slice(..n)`), in as
    /// many reads as it takes; fails with `UnexpectedEof` if the file ends first (the buffer's
    /// length is then the bytes read so far). `vec![0u8; n]` or `buf.slice(..n)` ask for `n`
    /// bytes; a `Vec::with_capacity(n)` has length 0 and asks for none.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub async fn read_exact_at<B: IoBufMut>(&self, buf: B, pos: u64) -> BufResult<(), B> {
        read_exact_on(self.raw().into(), self.raw(), buf, pos).await
    }

    /// Writes every initialized byte of `buf` at `pos`, in as many writes as it takes.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn write_all_at<B: IoBuf>(&self, buf: B, pos: u64) -> BufResult<(), B> {
        write_all_on(self.raw().into(), self.raw(), buf, pos).await
    }

    /// Reads at `pos` into `bufs` in turn (`readv`), each filled to its capacity before the
    /// next; returns the total number of bytes read. Each buffer's length becomes exactly the
    /// bytes it received.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub async fn readv_at<B: IoBufMut>(&self, bufs: Vec<B>, pos: u64) -> BufResult<usize, Vec<B>> {
        Op::new(op::Readv::new(self.raw(), bufs, pos)).await
    }

    /// Writes the initialized bytes of `bufs` in turn at `pos` (`writev`); returns the total
    /// number of bytes written: maybe fewer.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn writev_at<B: IoBuf>(&self, bufs: Vec<B>, pos: u64) -> BufResult<usize, Vec<B>> {
        Op::new(op::Writev::new(self.raw(), bufs, pos)).await
    }

    /// Flushes the file's data and metadata to its device (`fsync`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub async fn sync_all(&self) -> io::Result<()> {
        Op::new(op::Fsync::new(self.raw(), false)).await
    }

    /// Flushes the file's data, and the metadata needed to read it back (`fdatasync`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub async fn sync_data(&self) -> io::Result<()> {
        Op::new(op::Fsync::new(self.raw(), true)).await
    }

    /// `fallocate(2)`: with `mode` 0, allocates `offset..offset + len` and grows the file if
    /// that ends past its end; other modes are the `libc::FALLOC_FL_*` flags.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub async fn fallocate(&self, offset: u64, len: u64, mode: i32) -> io::Result<()> {
        Op::new(op::Fallocate::new(self.raw(), mode, offset, len)).await
    }

    /// Truncates or extends (with zeros) the file to `size` bytes: `IORING_OP_FTRUNCATE`
    /// through the ring where the kernel has it (Linux 6.9+, from the opcode probe),
    /// `ftruncate(2)` on the epoll driver's blocking pool, and a plain `ftruncate(2)` on older
    /// kernels or outside a runtime (it does not block on I/O for common file systems).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub async fn set_len(&self, size: u64) -> io::Result<()> {
        let len = libc::off_t::try_from(size).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "file size larger than off_t can hold",
            )
        })?;
        let through_ring = Driver::current().is_some_and(|d| match d.kind() {
            hoop_driver::DriverKind::Uring => {
                !d.is_iopoll() && d.supports_opcode(op::Ftruncate::OPCODE)
            }
            _ => true,
        });
        if through_ring {
            return Op::new(op::Ftruncate::new(self.raw(), size)).await;
        }
        // SAFETY: ftruncate(2) has no memory-safety preconditions.
        cvt_libc(unsafe { libc::ftruncate(self.raw(), len) }).map(drop)
    }

    /// Sets the file's permission bits. Synchronous (`fchmod(2)`): io_uring has no chmod.
    pub fn set_permissions(&self, perm: std::fs::Permissions) -> io::Result<()> {
        // SAFETY: fchmod(2) has no memory-safety preconditions.
        cvt_libc(unsafe { libc::fchmod(self.raw(), perm.mode() as libc::mode_t) }).map(drop)
    }

    /// The file's metadata (`statx` on the fd: `AT_EMPTY_PATH` and an empty path).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it changes nothing, so a dropped call can simply be made again.
    pub async fn metadata(&self) -> io::Result<Metadata> {
        Metadata::statx(self.raw(), CString::default(), libc::AT_EMPTY_PATH).await
    }

    /// Writes what `AsyncWrite` accepted (as `flush` does), then closes the file through the
    /// ring and waits for the result (the error `close(2)` may report, e.g. from a network file
    /// system, that `Drop` cannot): the first error of the two. On an IOPOLL ring, which
    /// refuses `IORING_OP_CLOSE`, it is a plain `close(2)`.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(mut self) -> io::Result<()> {
        // What `AsyncWrite` accepted is written first; its error is the one reported.
        let flushed = match self.io.as_mut() {
            Some(io) => {
                let fd = self.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
                std::future::poll_fn(|cx| io.poll_flush(fd, cx)).await
            }
            None => Ok(()),
        };
        flushed.and(self.close_fd().await)
    }

    async fn close_fd(mut self) -> io::Result<()> {
        let Some(fd) = self.fd.take() else {
            return Ok(());
        };
        if self.home.as_ref().is_some_and(|h| !h.is_here()) {
            // Another thread's ring may hold SQEs naming the fd: it closes the fd behind them.
            Home::close(self.home.as_ref(), fd);
            return Ok(());
        }
        if Driver::current().is_some_and(|d| d.is_iopoll()) {
            // SAFETY: the fd is ours (taken out of the OwnedFd) and closed once.
            return cvt_libc(unsafe { libc::close(fd.into_raw_fd()) }).map(drop);
        }
        Op::new(op::Close::new(fd)).await
    }

    /// Reads into a buffer of a [`FixedBufPool`](crate::FixedBufPool) (a
    /// [`FixedBuf`](crate::FixedBuf) or a slice of one) at `pos`, like
    /// [`read_at`](Self::read_at): `READ_FIXED` when the pool is registered with this thread's
    /// ring, else a plain read into the same memory. The buffers are page-aligned, so this
    /// also serves files opened with `O_DIRECT`.
    pub fn read_fixed_at<B>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + '_
    where
        B: hoop_driver::FixedIoBuf + IoBufMut,
    {
        // A plain function returning the operation (not an `async fn` around it): one state
        // machine less per I/O. The borrow of `self` keeps the fd open while it runs.
        let len = buf.bytes_total();
        super::cursor::at_cursor(
            self.raw(),
            pos,
            len,
            Op::new(op::ReadFixed::new(self.raw(), buf, pos)),
        )
    }

    /// Writes the initialized bytes of a buffer of a [`FixedBufPool`](crate::FixedBufPool) at
    /// `pos`, like [`write_at`](Self::write_at): `WRITE_FIXED` when the pool is registered with
    /// this thread's ring, else a plain write from the same memory.
    pub fn write_fixed_at<B>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + '_
    where
        B: hoop_driver::FixedIoBuf,
    {
        // A plain function returning the operation (not an `async fn` around it): one state
        // machine less per I/O. The borrow of `self` keeps the fd open while it runs.
        let len = buf.bytes_init();
        super::cursor::at_cursor(
            self.raw(),
            pos,
            len,
            Op::new(op::WriteFixed::new(self.raw(), buf, pos)),
        )
    }
}

impl From<OwnedFd> for File {
    fn from(fd: OwnedFd) -> File {
        File::from_owned(fd)
    }
}

impl From<std::fs::File> for File {
    fn from(file: std::fs::File) -> File {
        File::from_std(file)
    }
}

impl From<File> for OwnedFd {
    fn from(file: File) -> OwnedFd {
        file.into_owned()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd stays open as long as `self` (it is only taken by value or in Drop).
        unsafe { BorrowedFd::borrow_raw(self.raw()) }
    }
}

impl IntoRawFd for File {
    fn into_raw_fd(self) -> RawFd {
        self.into_owned().into_raw_fd()
    }
}

impl FromRawFd for File {
    /// # Safety
    /// `fd` must be an open file descriptor that nothing else owns.
    unsafe fn from_raw_fd(fd: RawFd) -> File {
        // SAFETY: the caller hands over ownership of an open fd.
        File::from_owned(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // The write-behind first (finished by a detached writer, or cancelled where none can
        // run: see `poll_io::finish_then`), then the close behind its operations (DESIGN.md,
        // "Writes accepted are written").
        let io = self.io.take();
        let fd = self.fd.take();
        let raw = fd.as_ref().map_or(-1, |f| f.as_raw_fd());
        let home = self.home.take();
        crate::poll_io::finish_then(io, raw, move || {
            if let Some(fd) = fd {
                Home::close(home.as_ref(), fd);
            }
        });
    }
}
