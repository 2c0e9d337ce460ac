//! `futures::io::{AsyncRead, AsyncWrite}` (and, with feature `tokio`, tokio's traits) for
//! [`TcpStream`](crate::net::TcpStream), [`UnixStream`](crate::net::UnixStream) and
//! [`File`](crate::fs::File) (and `AsyncSeek` for files), on top of completion operations.
//!
//! Poll-based traits hand in borrowed slices, but the kernel needs memory the operation owns.
//! Each value therefore keeps internal buffers (made on first use, then reused: no allocation
//! per call), of at most `max_buf` bytes: 16 KiB for sockets (many connections), 1 MiB for
//! files by default (`File::set_max_buf_size`):
//! * reads go into the read buffer and are copied out; a read still in flight when the caller
//!   gives up is kept and its bytes are handed to the next `poll_read`, so nothing is lost. A
//!   socket read asks for at most the caller's slice length. A file read asks for at least the
//!   read-ahead (`read_ahead`), which each read doubles up to `max_buf` and a seek or a write
//!   resets: sequential reads of small slices become few large reads, the rest served from the
//!   buffer;
//! * `poll_write` copies the caller's bytes into the write buffer, submits the write and
//!   returns `Ready(n)` at once (write-behind): the bytes are then the value's responsibility,
//!   written in order, the rest of a short write resubmitted. On the `inline` and `both` send
//!   paths a socket first tries the send inline (`Ops::try_send`: on io_uring `send(2)` with
//!   `MSG_DONTWAIT` on this thread, see `crate::send_path`), and only what the socket has no
//!   room for goes to the write buffer and the ring. While a write is in flight, a file's `poll_write` appends to a second,
//!   staging buffer (`write_staging`, up to `max_buf`) and returns `Ready(n)` too; the staged
//!   bytes are submitted when the write in flight has written all of its bytes, so there is
//!   one write at a time at the file's position, in order, and reading one file overlaps
//!   writing another. A socket stages likewise (16 KiB at most; `Ops::stage_sockets`, not
//!   `hoop::shared`'s): by default every trait write of a socket on io_uring goes to the ring
//!   and what is written while it is in flight is staged behind it (`crate::send_path`), but
//!   a socket whose writer answers (one write per flush: `writes_since_flush`, `answers`)
//!   tries the first write after a flush inline. A
//!   socket's write direction pushes itself (`push`, `Ops::pushes`, again not `hoop::shared`'s;
//!   on both drivers, though on epoll a send is in flight only while the socket is full):
//!   once a send is in flight, a pusher task of the runtime owns it and the bytes staged
//!   behind it, and sends them (and the rest of a short send) when it completes, whether or not
//!   the value is polled again, so a write half that writes without flushing and then awaits
//!   something else still gets its bytes out. A file's staged bytes, and a socket's where no
//!   runtime can run a pusher, go out when the value is next polled (a write, a flush, a close,
//!   a read) or dropped. (`HOOP_SEND_PATH=inline` or `ring` turns staging off: a socket's
//!   `poll_write` then returns `Pending` while its write is in flight.) A `poll_write` that
//!   returns `Pending` (a write in flight and no room to stage) has taken nothing, so a write
//!   future dropped at any point neither loses accepted bytes nor duplicates them.
//!   An error of a write-behind is reported by the next `poll_write`/`poll_flush`/`poll_close`
//!   (the bytes staged behind the write that failed are dropped with it: they would land after
//!   a hole); a socket that lost accepted bytes so then fails every later write, flush and
//!   close (`BrokenPipe`), as a stream with a hole in it is of no use to its peer. `poll_flush` waits for every accepted byte, staged ones included; `poll_close`
//!   flushes, then shuts down the write half of a socket; both wait for a pusher to end first
//!   (it wakes them when it has sent everything, or failed). A socket's `poll_read` also
//!   pushes a write-behind on when it has no pusher (the rest of a short write), so a request
//!   written and not flushed still goes out while its reply is awaited. Dropping the value with
//!   writes pending finishes them (DESIGN.md, "Writes accepted are written"; `finish`): on the
//!   thread of the runtime that runs them, while it runs, the state (taken back from a pusher,
//!   the send in flight included) and the fd owner move into a detached task of the runtime
//!   that writes every accepted byte in order, then closes (a write half: shuts down the write
//!   direction); `block_on`'s end and the shutdown wait for it up to the shutdown timeout and
//!   report what did not finish (`ShutdownReport::unfinished_writes`). Only
//!   `poll_flush`/`poll_close` return errors; a detached writer's error is counted
//!   (`ShutdownReport::failed_writes`; a file's also said once on stderr). Dropped after `block_on` returned or on another
//!   thread, the writes are cancelled (the staged bytes dropped), as nothing can run them.
//!
//! Files use the file's own position (`read(2)`/`write(2)`, `CURRENT_POS`), like
//! `std::fs::File`, with at most one operation at that position in flight: a file's
//! `poll_read` waits for the pending writes first; its `poll_write` waits for a read in flight
//! and gives back the bytes read ahead and not handed out (`lseek` back by their number;
//! `poll_give_back`), and so does a seek (`poll_seek`, which also flushes first): reads,
//! writes and seeks through the traits land where they would with std's `File`.
//!
//! The state machine is generic over how its operations are made ([`Ops`]): the thread-per-core
//! types use the runtime's `Op` futures ([`Local`]); `hoop::shared`'s types use shared rings'
//! `Send` futures.
//!
//! By file: this one holds the state ([`PollIo`]: its fields, making it, the owner thread and
//! the buffer size); `ops` the operations' trait and the write direction they drive; `local`
//! the runtime's operations; `read`, `write` and `seek` the three directions of the traits;
//! `push` a socket's pusher task; `finish` the write-behind of a dropped value; `split` the
//! halves; `traits` the trait impls, as a macro for each type.

mod finish;
mod local;
mod ops;
mod push;
mod read;
mod seek;
mod split;
mod traits;
mod write;

pub(crate) use finish::{finish_shared, finish_then};
pub(crate) use local::Local;
pub(crate) use ops::{Kind, Ops};

pub(crate) use traits::poll_io_traits;

use std::io;

use local::Bound;
use ops::{Handle, WriteDir, BUF_BYTES};

/// The default largest buffer of a file: the read-ahead grows up to it, and so does each write
/// buffer (`File::set_max_buf_size` changes it). Measured in DESIGN.md ("Files through the
/// traits").
pub(crate) const FILE_BUF_BYTES: usize = 1024 * 1024;

/// The largest buffer size `set_max_buf` takes; larger values are lowered to it.
const MAX_BUF_BYTES: usize = 1 << 30;

/// The state behind the poll-based traits of one fd.
///
/// With [`Local`] operations it is `Send` and `Sync` so that the types holding it stay so,
/// although an operation in flight belongs to the runtime of the thread that started it
/// (`owner`): polled on another thread while one is in flight it fails with an error instead of
/// touching the operation, and dropped on another thread it sends the operation home, to be
/// dropped (cancelled) by that runtime's driver on its thread (its buffer stays with it until
/// the kernel is done). With nothing in flight the state moves freely.
/// Shared rings' operations are `Send` themselves: none of this applies to them.
pub(crate) struct PollIo<O: Ops = Local> {
    ops: O,
    /// The thread whose runtime runs the operations in flight.
    owner: std::thread::ThreadId,
    /// That runtime's driver's home, where a drop on another thread sends the operations
    /// (`None` for shared rings' operations, which are `Send`, or made outside a runtime).
    home: Option<hoop_driver::Home>,
    kind: Kind,
    /// The largest read and write (so the largest buffer): `BUF_BYTES` for sockets,
    /// `FILE_BUF_BYTES` for files unless `set_max_buf` changed it.
    max_buf: usize,
    /// The read buffer when no read is in flight; bytes `read_pos..len` are not handed out yet.
    read_buf: Option<Vec<u8>>,
    read_pos: usize,
    read_op: Option<O::Read>,
    /// Sockets: the last receive took less than it asked, so it emptied the socket; the next
    /// one waits for data before its first try (`op::Recv::poll_first`: a request-response
    /// peer has not sent its next request yet when its reply was just read).
    drained: bool,
    /// Files: the least the next read asks for (0: only what the caller asks), doubled by each
    /// read up to `max_buf`, back to 0 after a seek or a write.
    read_ahead: usize,
    /// The write direction, while the value holds it (see `pushed`).
    w: WriteDir<O>,
    /// A socket's write direction while a pusher task (`push`) owns it: `w` is then empty.
    /// Touched on the owner thread only (`check_thread`; `Drop` forgets it elsewhere).
    pushed: Option<Bound<Handle<O>>>,
    /// Writes never move to a pusher (a detached writer's state: `finish`).
    no_push: bool,
    /// A socket's trait writes accepted since the last `poll_flush`/`poll_close`.
    writes_since_flush: u32,
    /// The last flush covered at most one write: this value writes an answer, then flushes
    /// (a request/response protocol), so the first write after a flush goes inline
    /// (`SendPath::adaptive`).
    answers: bool,
    shutdown: Option<O::Shutdown>,
    /// A seek started (`AsyncSeek::start_seek`) and not completed yet.
    seek: Option<io::SeekFrom>,
}

impl<O: Ops> std::fmt::Debug for PollIo<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollIo")
            .field("kind", &self.kind)
            .field("max_buf", &self.max_buf)
            .field("read_in_flight", &self.read_op.is_some())
            .field("write_in_flight", &self.w.write_op.is_some())
            .field("write_staged", &self.w.write_staging.len())
            .field("write_pushed", &self.pushed.is_some())
            .finish()
    }
}

impl<O: Ops> Drop for PollIo<O> {
    fn drop(&mut self) {
        if O::THREAD_BOUND && this_thread() != self.owner {
            // Not the owner's thread: the operations' `Rc`s must not be touched here. The
            // pusher is told (an atomic flag) to send nothing more (the fd is closed behind
            // this drop); then the operations and the pusher's handle go home, to be dropped
            // on the owner's thread by its driver (their cancels queue there, and the `Rc`s
            // are freed once the kernel is done with them).
            if let Some(p) = &self.pushed {
                p.0.give_up_from_anywhere();
            }
            let parts = (
                self.read_op.take(),
                self.w.write_op.take(),
                self.shutdown.take(),
                self.pushed.take(),
            );
            send_home(self.home.as_ref(), parts);
        } else if let Some(p) = self.pushed.take() {
            // Dropped with a pusher running (not through `finish_then`, which takes its writes
            // back): they are given up, as a write in flight of a dropped value is.
            push::abandon(&p.0.shared);
        }
    }
}

/// The home of this thread's driver, for state whose operations are bound to it.
fn home_here<O: Ops>() -> Option<hoop_driver::Home> {
    if O::THREAD_BOUND {
        hoop_driver::Driver::current().map(|d| d.home())
    } else {
        None
    }
}

/// Sends `parts` (operations and pusher state of the owner thread, dropped on another) to be
/// dropped by the owner's driver; with no home (no runtime there), they are leaked: the kernel
/// may still own their memory.
pub(crate) fn send_home<T: 'static>(home: Option<&hoop_driver::Home>, parts: T) {
    match home {
        // SAFETY: `parts` hold the owner thread's operations and pusher state, whose `Rc`s are
        // shared with that thread only; the caller gives them up here and never touches them
        // again.
        Some(home) => unsafe { home.send_drop(parts) },
        None => std::mem::forget(parts),
    }
}

impl PollIo<Local> {
    pub(crate) fn new(kind: Kind) -> PollIo<Local> {
        PollIo::with_ops(kind, Local)
    }
}

/// The calling thread's id, cached per thread: `std::thread::current()` clones the thread's
/// handle (an atomic increment and decrement), and every poll of a value asks (1.1% of a
/// hyper server's CPU on io_uring, profiled, for a compare that is nearly always equal).
#[inline]
pub(crate) fn this_thread() -> std::thread::ThreadId {
    thread_local! {
        static HERE: std::thread::ThreadId = std::thread::current().id();
    }
    // After the thread's locals are gone (a value dropped by another one's destructor), the
    // handle's own path.
    HERE.try_with(|id| *id)
        .unwrap_or_else(|_| std::thread::current().id())
}

impl<O: Ops> PollIo<O> {
    /// `Err` if an operation is in flight on another thread's runtime; with none, the state
    /// moves to this thread.
    fn check_thread(&mut self) -> io::Result<()> {
        if !O::THREAD_BOUND {
            return Ok(());
        }
        let here = this_thread();
        if here == self.owner {
            return Ok(());
        }
        if self.read_op.is_some()
            || self.w.write_op.is_some()
            || self.pushed.is_some()
            || self.shutdown.is_some()
        {
            return Err(io::Error::other(
                "an AsyncRead/AsyncWrite operation of this value is in flight on another \
                 thread's runtime: poll it on that thread",
            ));
        }
        self.owner = here;
        self.home = home_here::<O>();
        Ok(())
    }

    pub(crate) fn with_ops(kind: Kind, ops: O) -> PollIo<O> {
        PollIo {
            ops,
            owner: this_thread(),
            home: home_here::<O>(),
            kind,
            max_buf: match kind {
                Kind::Socket => BUF_BYTES,
                Kind::File => FILE_BUF_BYTES,
            },
            read_buf: None,
            read_pos: 0,
            read_op: None,
            drained: false,
            read_ahead: 0,
            w: WriteDir::new(),
            pushed: None,
            no_push: false,
            writes_since_flush: 0,
            answers: true,
            shutdown: None,
            seek: None,
        }
    }

    /// The largest read and write buffer.
    pub(crate) fn max_buf(&self) -> usize {
        self.max_buf
    }

    /// Sets the largest read and write buffer (`File::set_max_buf_size`): 0 is taken as 1
    /// (a read of 0 bytes would look like the end of the file), more than 1 GiB as 1 GiB.
    /// Bytes already buffered stay; idle buffers larger than the new size are freed.
    pub(crate) fn set_max_buf(&mut self, bytes: usize) {
        self.max_buf = bytes.clamp(1, MAX_BUF_BYTES);
        self.read_ahead = self.read_ahead.min(self.max_buf);
        let big = |b: &Vec<u8>, max: usize| b.capacity() > max;
        if self.read_op.is_none()
            && self.unread() == 0
            && self.read_buf.as_ref().is_some_and(|b| big(b, self.max_buf))
        {
            self.read_buf = None;
        }
        if self.w.write_op.is_none()
            && self
                .w
                .write_buf
                .as_ref()
                .is_some_and(|b| b.is_empty() && big(b, self.max_buf))
        {
            self.w.write_buf = None;
        }
        if self.w.write_staging.is_empty() && big(&self.w.write_staging, self.max_buf) {
            self.w.write_staging = Vec::new();
        }
    }

    /// Bytes read and not handed out yet.
    fn unread(&self) -> usize {
        self.read_buf
            .as_ref()
            .map_or(0, |b| b.len().saturating_sub(self.read_pos))
    }
}
