//! The operations of the thread-per-core types ([`Local`]): the runtime's `Op` futures, held
//! as [`Bound`] to the thread that started them.

use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop_driver::{op, BufResult, IoBuf, Op, Slice};

use super::ops::{Handle, Kind, Ops};
use super::push::Pusher;
use crate::send_path::Inline;

/// Operations on the runtime of the current thread (`Op`).
#[derive(Debug)]
pub(crate) struct Local;

impl Ops for Local {
    type Read = Bound<ReadOp>;
    type Write = Bound<WriteOp>;
    type Shutdown = Bound<Op<op::Shutdown>>;
    const THREAD_BOUND: bool = true;
    fn read(
        &self,
        fd: RawFd,
        kind: Kind,
        slice: Slice<Vec<u8>>,
        poll_first: bool,
    ) -> Bound<ReadOp> {
        Bound(match kind {
            Kind::Socket => {
                ReadOp::Socket(Op::new(op::Recv::new(fd, slice, 0).poll_first(poll_first)))
            }
            Kind::File => {
                // The cursor is fixed after a short read (`fs::cursor`), as after a write.
                let len = slice.bytes_total();
                let read = Op::new(op::Read::new(fd, slice, op::CURRENT_POS));
                ReadOp::File(crate::fs::cursor::at_cursor(fd, op::CURRENT_POS, len, read))
            }
        })
    }
    fn write(&self, fd: RawFd, kind: Kind, slice: Slice<Vec<u8>>) -> Bound<WriteOp> {
        Bound(match kind {
            Kind::Socket => WriteOp::Socket(Op::new(op::Send::new(fd, slice, 0))),
            Kind::File => {
                // The cursor is fixed after a short write (`fs::cursor`: a kernel bug).
                let len = slice.bytes_init();
                let write = Op::new(op::Write::new(fd, slice, op::CURRENT_POS));
                WriteOp::File(crate::fs::cursor::at_cursor(
                    fd,
                    op::CURRENT_POS,
                    len,
                    write,
                ))
            }
        })
    }
    fn shutdown(&self, fd: RawFd) -> Bound<Op<op::Shutdown>> {
        Bound(Op::new(op::Shutdown::new(fd, libc::SHUT_WR)))
    }
    fn try_send(&self, fd: RawFd, bufs: &[io::IoSlice<'_>], answer: bool) -> Inline {
        let path = crate::send_path::send_path();
        crate::send_path::try_send(fd, bufs, path.trait_inline || (answer && path.adaptive))
    }
    fn stage_sockets(&self) -> bool {
        crate::send_path::send_path().staging
    }
    fn pushes(&self) -> bool {
        crate::send_path::send_path().push
    }
    fn spawn_pusher(&self, handle: &Handle<Local>, fd: RawFd) -> bool {
        crate::runtime::spawn_pusher(Pusher::new(handle, fd, Local))
    }
}

/// An operation of the thread's runtime (or a pusher's handle, `push::Handle`) held by a
/// [`PollIo<Local>`], which touches it only on the thread that started it (`check_thread`) and
/// sends it home to that thread's driver from any other (`send_home`).
#[derive(Debug)]
pub(crate) struct Bound<T>(pub(super) T);

// SAFETY: a `Bound` is only made by `Local` (its operations) and by `PollIo::push` (a pusher's
// handle, made only where `Ops::pushes`, which only `Local` says), and only held by a
// `PollIo<Local>` (`pushed` is `None` for every other `Ops`), which polls, borrows and drops
// it on its owner thread only (`check_thread`; `Drop` and `merge_write` send it home, where
// the owner's driver drops it, or leak it when no runtime runs there)
// and gives no access to it through `&self`: the runtime's `Rc`s inside are never used on
// another thread. The one thing touched elsewhere is a handle's `gone` flag, an
// `Arc<AtomicBool>`, which is `Send + Sync` itself.
unsafe impl<T> Send for Bound<T> {}
// SAFETY: as above: no access through `&Bound`.
unsafe impl<T> Sync for Bound<T> {}

impl<T: std::future::Future + Unpin> std::future::Future for Bound<T> {
    type Output = T::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

#[derive(Debug)]
pub(crate) enum ReadOp {
    Socket(Op<op::Recv<Slice<Vec<u8>>>>),
    File(crate::fs::cursor::AtCursor<Op<op::Read<Slice<Vec<u8>>>>>),
}

impl std::future::Future for ReadOp {
    type Output = BufResult<usize, Slice<Vec<u8>>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            ReadOp::Socket(op) => Pin::new(op).poll(cx),
            ReadOp::File(op) => Pin::new(op).poll(cx),
        }
    }
}

#[derive(Debug)]
pub(crate) enum WriteOp {
    Socket(Op<op::Send<Slice<Vec<u8>>>>),
    File(crate::fs::cursor::AtCursor<Op<op::Write<Slice<Vec<u8>>>>>),
}

impl std::future::Future for WriteOp {
    type Output = BufResult<usize, Slice<Vec<u8>>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            WriteOp::Socket(op) => Pin::new(op).poll(cx),
            WriteOp::File(op) => Pin::new(op).poll(cx),
        }
    }
}
