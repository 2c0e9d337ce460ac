//! What this driver can do: the kernel's opcodes and features, the ring's setup, and the
//! registered tables' sizes, asked by the runtime and its users before they pick a path.

use std::io;

use super::{Driver, Engine};
use crate::sys::uring::Uring;

impl Driver {
    /// The io_uring setup flags the kernel accepted, e.g.
    /// `"SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL|CQSIZE"`, or `"epoll"`.
    pub fn setup_flags(&self) -> &'static str {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.setup_flags(),
            Engine::Epoll(_) => "epoll",
        }
    }

    /// Whether this is an io_uring ring set up with `IORING_SETUP_IOPOLL` (`Config::iopoll`),
    /// which refuses close, poll, timeout and cancel operations; false for epoll.
    pub fn is_iopoll(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.is_iopoll(),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether the io_uring driver's kernel supports `opcode` (`IORING_OP_*`, from the probe
    /// taken at setup); always false for epoll.
    pub fn supports_opcode(&self, opcode: u8) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.supports(opcode),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether provided buffer rings and multishot recv can be used (io_uring on 6.0+).
    pub fn supports_buf_ring(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(_) => {
                crate::setup::kernel_at_least(6, 0)
                    && crate::level::has(crate::level::since::MULTISHOT_RECV)
            }
            Engine::Epoll(_) => false,
        }
    }

    /// The kernel's io_uring feature bits (`IORING_FEAT_*`, by kernel name without the prefix,
    /// e.g. `("FAST_POLL", true)`), in bit order; empty for epoll.
    pub fn uring_features(&self) -> Vec<(&'static str, bool)> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.features(),
            Engine::Epoll(_) => Vec::new(),
        }
    }

    /// The `IORING_OP_*` opcodes this kernel supports (from the probe taken at setup), by
    /// kernel name without the prefix (e.g. `"SEND_ZC"`), in opcode order; empty for epoll.
    pub fn supported_opcodes(&self) -> Vec<&'static str> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.opcodes(),
            Engine::Epoll(_) => Vec::new(),
        }
    }

    /// With SQPOLL (`Config::sqpoll_idle`): whether the kernel's SQ thread is asleep after its
    /// idle time, so the next submission wakes it with a system call. False without SQPOLL and
    /// for epoll.
    pub fn sq_thread_asleep(&self) -> bool {
        match &mut *self.shared.engine.borrow_mut() {
            Engine::Uring(u) => u.sq_thread_asleep(),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether `io_uring_enter` goes through a registered ring fd (`Config::register_ring_fd`
    /// and a kernel that took it); false for epoll.
    pub fn ring_fd_registered(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.ring_fd_registered(),
            Engine::Epoll(_) => false,
        }
    }

    /// The io-wq worker limits in force for this ring, `(bounded, unbounded)` (see
    /// `Config::iowq_max_workers`); `Unsupported` for epoll.
    pub fn iowq_max_workers(&self) -> io::Result<(u32, u32)> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.iowq_max_workers(),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// Whether receives may use bundles (`IORING_RECVSEND_BUNDLE`, 6.10: one CQE for several
    /// provided buffers); false for epoll.
    pub fn supports_recv_bundle(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.has_feature(crate::sys::uring::FEAT_RECVSEND_BUNDLE),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether the kernel takes incrementally consumed buffer rings (`IOU_PBUF_RING_INC`,
    /// 6.12): probed once, by registering a one-entry ring with the flag; false for epoll.
    pub fn buf_ring_inc_supported(&self) -> bool {
        if let Some(known) = self.shared.buf_ring_inc.get() {
            return known;
        }
        let ok = self.supports_buf_ring()
            && crate::level::has(crate::level::since::PBUF_RING_INC)
            && crate::bufring::probe_inc(self);
        self.shared.buf_ring_inc.set(Some(ok));
        ok
    }

    /// Whether connections can be accepted straight into a registered file table (direct
    /// descriptors): the io_uring driver on Linux 5.19 or later, not an IOPOLL ring.
    pub fn supports_direct_accept(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => {
                direct_table_usable(u) && u.supports(io_uring::opcode::Accept::CODE)
            }
            Engine::Epoll(_) => false,
        }
    }

    /// Whether an open file can be put into a slot of the registered file table
    /// ([`op::FilesUpdateAlloc`](crate::op::FilesUpdateAlloc): `IORING_OP_FILES_UPDATE` with
    /// `IORING_FILE_INDEX_ALLOC`): the io_uring driver on Linux 5.19 or later, not an IOPOLL
    /// ring (which refuses `IORING_OP_CLOSE`, so a slot could only be closed synchronously).
    pub fn supports_registered_files(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => {
                direct_table_usable(u) && u.supports(io_uring::opcode::FilesUpdate::CODE)
            }
            Engine::Epoll(_) => false,
        }
    }

    /// Occupied slots of the ring's registered file table: direct descriptors handed out by an
    /// accept stream (or orphaned by a dropped one) or by a files update (registered files,
    /// `hoop::fs::FixedFile`) whose close has not completed yet. A connection whose accept
    /// completion still waits unread in a stream is not counted until the stream yields it or
    /// is dropped. 0 when no table was registered, and on epoll.
    pub fn fixed_files_in_use(&self) -> usize {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.fixed_files.as_ref().map_or(0, |f| f.in_use()),
            Engine::Epoll(_) => 0,
        }
    }

    /// Slots of the ring's registered file table (0 until a direct accept or a registered
    /// file registered it).
    pub fn fixed_files_size(&self) -> u32 {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.fixed_files.as_ref().map_or(0, |f| f.size),
            Engine::Epoll(_) => 0,
        }
    }

    /// SQ and CQ sizes the kernel gave, now (`(0, 0)` for epoll): the CQ grows under load
    /// where `Config::resize_rings` applies.
    pub fn ring_sizes(&self) -> (u32, u32) {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => (u.params().sq_entries(), u.params().cq_entries()),
            Engine::Epoll(_) => (0, 0),
        }
    }

    /// Whether the CQ starts small and grows under load (`Config::resize_rings` on a kernel
    /// and ring that resize: 6.13, `DEFER_TASKRUN`); false for epoll.
    pub fn resizes_rings(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.resizes(),
            Engine::Epoll(_) => false,
        }
    }

    /// The min-wait of this ring's blocking waits (`Config::min_wait`, Linux 6.12), when in
    /// force; `None` when off, on older kernels and for epoll.
    pub fn min_wait(&self) -> Option<std::time::Duration> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.min_wait_in_force(),
            Engine::Epoll(_) => None,
        }
    }

    /// One `io_uring_enter` with a bounded wait's arguments that returns at once (no
    /// completion wanted): the cost of passing them, for `hoop bench count --op wait`.
    /// `Unsupported` for epoll.
    #[doc(hidden)]
    pub fn enter_bounded_nowait(&self) -> io::Result<()> {
        match &mut *self.shared.engine.borrow_mut() {
            Engine::Uring(u) => u.enter_bounded_nowait(),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// Whether bounded waits pass their arguments in a registered wait region
    /// (`Config::reg_wait`, Linux 6.13); false for epoll.
    pub fn waits_registered(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.waits_registered(),
            Engine::Epoll(_) => false,
        }
    }

    /// The bytes of the rings mapped into the process now: the SQ ring and its index array,
    /// the SQEs, and the CQ ring with its CQEs (0 for epoll).
    pub fn ring_bytes(&self) -> usize {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.ring_bytes(),
            Engine::Epoll(_) => 0,
        }
    }
}

/// Whether ring `u` can have a registered file table whose slots the kernel allocates
/// (`IORING_FILE_INDEX_ALLOC`, 5.19) and closes through the ring (`IORING_OP_CLOSE` on a slot,
/// which an IOPOLL ring refuses).
pub(super) fn direct_table_usable(u: &Uring) -> bool {
    !u.is_iopoll()
        && crate::setup::kernel_at_least(5, 19)
        && crate::level::has(crate::level::since::FILE_INDEX_ALLOC)
        && u.supports(io_uring::opcode::Close::CODE)
}
