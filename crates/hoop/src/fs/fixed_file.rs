//! Registered (fixed) files: an open file in a slot of the ring's registered file table.
//!
//! An operation on an fd makes the kernel look the fd up in the process's fd table and take a
//! reference to the file (`fget`/`fput`) each time; an operation on a registered file names a
//! slot of the ring's own table (`IOSQE_FIXED_FILE`), which already holds the reference. For a
//! file read or written many times (a benchmark, a database's data file) that saves the lookup
//! and the atomic reference count per operation.
//!
//! [`File::register`] and [`File::into_fixed`] put the file into a free slot with one
//! `IORING_OP_FILES_UPDATE` whose offset is `IORING_FILE_INDEX_ALLOC` (Linux 5.19): the kernel
//! picks the slot. The table is the one direct accepts use (registered sparse on first use).
//! Where that is unavailable — the epoll driver, an IOPOLL ring, an older kernel, a table the
//! kernel refuses to register, a full table — the [`FixedFile`] holds a plain fd instead and
//! every method works the same; [`FixedFile::is_fixed`] tells which, and
//! [`FixedFile::fallback_reason`] why.

use std::cell::OnceCell;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use hoop_driver::error::cvt_libc;
use hoop_driver::op::{self, DirectFd, Target};
use hoop_driver::{BufResult, FixedIoBuf, IoBuf, IoBufMut, Op};

use super::at::{read_exact_on, write_all_on};
use super::File;

/// A file in a slot of the ring's registered file table, or (the fallback) a plain fd; made by
/// [`File::register`] or [`File::into_fixed`]. Its methods mean what [`File`]'s do.
///
/// Dropping it closes the slot through the ring (on the next driver turn), or the fd as a
/// [`File`] does; [`close`](Self::close) closes it and reports the error. A slot belongs to the
/// ring of the runtime it was made on: use the value on that runtime's thread only.
#[derive(Debug)]
pub struct FixedFile {
    inner: Inner,
    /// Why the file is not in a slot (`None` when it is).
    fallback: Option<io::Error>,
    /// An fd of the slot's open file, installed (`IORING_OP_FIXED_FD_INSTALL`, 6.8) by the first
    /// operation at the cursor: a slot has no position to read or fix, and operations at the
    /// cursor fix it after a short result (`fs::cursor`). `None` inside: the kernel refused.
    cursor: OnceCell<Option<OwnedFd>>,
}

#[derive(Debug)]
enum Inner {
    Fixed(DirectFd),
    Plain(File),
}

impl File {
    /// Puts the file into a slot of the ring's registered file table (see [`FixedFile`]); this
    /// `File` stays open and usable, and the two share the open file (its flags, such as
    /// `O_DIRECT`, and its position).
    ///
    /// The slot is filled from a duplicate of the fd, which is closed once the slot holds the
    /// file. Where registered files are unavailable the duplicate becomes the `FixedFile`'s
    /// plain fd. Fails only if the fd cannot be duplicated (`EMFILE`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the registered slot it may have taken is released and
    /// the `File` stays as it was: nothing is leaked.
    pub async fn register(&self) -> io::Result<FixedFile> {
        // SAFETY: F_DUPFD_CLOEXEC has no memory-safety preconditions; the fd is open while
        // `self` lives.
        let dup = cvt_libc(unsafe { libc::fcntl(self.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
        // SAFETY: fcntl returned a new fd that nothing else owns.
        let dup = unsafe { OwnedFd::from_raw_fd(dup) };
        Ok(FixedFile::install(dup).await)
    }

    /// Puts the file into a slot of the ring's registered file table (see [`FixedFile`]) and
    /// closes its fd once the slot holds the file. Where registered files are unavailable the
    /// `FixedFile` keeps this fd. Does not fail today; the `Result` leaves room for errors a
    /// future kernel mechanism may report.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the file is closed (it was moved into the call) and
    /// any slot released: nothing is leaked.
    pub async fn into_fixed(self) -> io::Result<FixedFile> {
        Ok(FixedFile::install(OwnedFd::from(self)).await)
    }
}

impl FixedFile {
    /// Installs `fd` into a free slot, or keeps it as the plain fallback. Once the slot holds
    /// the file, `fd` is closed through the ring (the close's own error is ignored: the slot
    /// keeps the file open, so a failure could only come from the fd's flush, which the slot's
    /// own close reports again).
    async fn install(fd: OwnedFd) -> FixedFile {
        let (res, fd) = match op::FilesUpdateAlloc::new(fd) {
            Ok(update) => Op::new(update).await,
            Err((e, fd)) => (Err(e), fd),
        };
        match res {
            Ok(slot) => {
                let _ = Op::new(op::Close::new(fd)).await;
                FixedFile {
                    inner: Inner::Fixed(slot),
                    fallback: None,
                    cursor: OnceCell::new(),
                }
            }
            Err(e) => FixedFile {
                inner: Inner::Plain(File::from_owned(fd)),
                fallback: Some(e),
                cursor: OnceCell::new(),
            },
        }
    }

    /// What operations name: the slot, or the plain fd.
    fn target(&self) -> Target {
        match &self.inner {
            Inner::Fixed(slot) => Target::from(slot),
            Inner::Plain(file) => Target::Fd(file.as_raw_fd()),
        }
    }

    /// For an operation at `pos`: the fd whose position is the file's cursor when `pos` is
    /// `CURRENT_POS` (installed from the slot on first use, see `cursor`), else -1 (nothing to
    /// fix). -1 too where the kernel cannot install one (before 6.8): the cursor then goes
    /// unfixed, as it did before.
    async fn cursor_fd(&self, pos: u64) -> RawFd {
        if pos != op::CURRENT_POS {
            return -1;
        }
        let slot = match &self.inner {
            Inner::Plain(file) => return file.as_raw_fd(),
            Inner::Fixed(slot) => slot,
        };
        if self.cursor.get().is_none() {
            let fd = Op::new(op::FixedFdInstall::new(slot)).await.ok();
            // A concurrent first call may have set it meanwhile: its fd stays, this one closes.
            let _ = self.cursor.set(fd);
        }
        self.cursor
            .get()
            .and_then(Option::as_ref)
            .map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Whether the file is in a slot of the ring's registered file table (else a plain fd).
    pub fn is_fixed(&self) -> bool {
        matches!(self.inner, Inner::Fixed(_))
    }

    /// The slot in the ring's registered file table, if the file is in one.
    pub fn slot(&self) -> Option<u32> {
        match &self.inner {
            Inner::Fixed(slot) => Some(slot.slot()),
            Inner::Plain(_) => None,
        }
    }

    /// Why the file is a plain fd rather than in a slot: `Unsupported` on the epoll driver, an
    /// IOPOLL ring or a kernel before 5.19, the kernel's error otherwise (`ENFILE`: the table
    /// is full); `None` when it is in a slot.
    pub fn fallback_reason(&self) -> Option<&io::Error> {
        self.fallback.as_ref()
    }

    /// The plain file, for the fallback (`None` when the file is in a slot, which has no fd).
    pub fn as_file(&self) -> Option<&File> {
        match &self.inner {
            Inner::Fixed(_) => None,
            Inner::Plain(file) => Some(file),
        }
    }

    /// Reads into `buf` (from its start, up to its capacity) at `pos`; see [`File::read_at`].
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
        // The borrow of `self` keeps the slot open while it runs; at the cursor, the cursor is
        // fixed after a short result (`fs::cursor`) through the fd `cursor_fd` installs.
        let len = buf.bytes_total();
        let read = Op::new(op::Read::new(self.target(), buf, pos));
        async move { super::cursor::at_cursor(self.cursor_fd(pos).await, pos, len, read).await }
    }

    /// Writes the initialized bytes of `buf` at `pos`; maybe fewer. See [`File::write_at`].
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
        // The borrow of `self` keeps the slot open while it runs; at the cursor, the cursor is
        // fixed after a short result (`fs::cursor`) through the fd `cursor_fd` installs.
        let len = buf.bytes_init();
        let write = Op::new(op::Write::new(self.target(), buf, pos));
        async move { super::cursor::at_cursor(self.cursor_fd(pos).await, pos, len, write).await }
    }

    /// Reads exactly `buf.len()` bytes at `pos` (the whole view of a slice); `UnexpectedEof`
    /// if the file ends first. See [`File::read_exact_at`].
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that nothing is consumed: a positional read does not
    /// move the file's position, so a dropped call loses only its buffer; call it again.
    pub async fn read_exact_at<B: IoBufMut>(&self, buf: B, pos: u64) -> BufResult<(), B> {
        let fd = self.cursor_fd(pos).await;
        read_exact_on(self.target(), fd, buf, pos).await
    }

    /// Writes every initialized byte of `buf` at `pos`. See [`File::write_all_at`].
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, part or all of the
    /// data may have been written. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn write_all_at<B: IoBuf>(&self, buf: B, pos: u64) -> BufResult<(), B> {
        let fd = self.cursor_fd(pos).await;
        write_all_on(self.target(), fd, buf, pos).await
    }

    /// Reads into a buffer of a [`FixedBufPool`](crate::FixedBufPool) at `pos`: `READ_FIXED`
    /// when the pool is registered with this thread's ring, else a plain read. See
    /// [`File::read_fixed_at`].
    pub fn read_fixed_at<B>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + '_
    where
        B: FixedIoBuf + IoBufMut,
    {
        // The borrow of `self` keeps the slot open while it runs; at the cursor, the cursor is
        // fixed after a short result (`fs::cursor`) through the fd `cursor_fd` installs.
        let len = buf.bytes_total();
        let read = Op::new(op::ReadFixed::new(self.target(), buf, pos));
        async move { super::cursor::at_cursor(self.cursor_fd(pos).await, pos, len, read).await }
    }

    /// Writes the initialized bytes of a buffer of a [`FixedBufPool`](crate::FixedBufPool) at
    /// `pos`: `WRITE_FIXED` when the pool is registered with this thread's ring, else a plain
    /// write. See [`File::write_fixed_at`].
    pub fn write_fixed_at<B>(
        &self,
        buf: B,
        pos: u64,
    ) -> impl Future<Output = BufResult<usize, B>> + '_
    where
        B: FixedIoBuf,
    {
        // The borrow of `self` keeps the slot open while it runs; at the cursor, the cursor is
        // fixed after a short result (`fs::cursor`) through the fd `cursor_fd` installs.
        let len = buf.bytes_init();
        let write = Op::new(op::WriteFixed::new(self.target(), buf, pos));
        async move { super::cursor::at_cursor(self.cursor_fd(pos).await, pos, len, write).await }
    }

    /// Flushes the file's data and metadata to its device (`fsync`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub async fn sync_all(&self) -> io::Result<()> {
        Op::new(op::Fsync::new(self.target(), false)).await
    }

    /// Flushes the file's data, and the metadata needed to read it back (`fdatasync`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the operation may still take place; calling it again
    /// is harmless.
    pub async fn sync_data(&self) -> io::Result<()> {
        Op::new(op::Fsync::new(self.target(), true)).await
    }

    /// Closes the file and waits for the result: `IORING_OP_CLOSE` on the slot, or the plain
    /// fd's close ([`File::close`]).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(self) -> io::Result<()> {
        match self.inner {
            Inner::Fixed(slot) => Op::new(op::CloseDirect::new(slot)).await,
            Inner::Plain(file) => file.close().await,
        }
    }
}
