//! The kernel resources registered with a ring: provided buffer rings, the fixed-buffer table,
//! and the registered file table (direct descriptors).

use std::io;
use std::rc::Rc;

use super::caps::direct_table_usable;
use super::{Driver, Engine};
use crate::sys::uring::Uring;

impl Driver {
    /// The first buffer id of a range of `entries` ids no other kernel ring of this driver
    /// uses (a CQE's buffer id then names its ring), if one is left.
    pub(crate) fn free_bid_base(&self, entries: u16) -> Option<u16> {
        let d = self.shared.engine.try_borrow().ok()?;
        let Engine::Uring(u) = &*d else {
            return None;
        };
        crate::bufring::book::free_base(&u.buf_rings, entries)
    }

    /// Registers the provided buffer ring `book` describes at `ring_addr` (incrementally
    /// consumed if the book says so), buffer ids from `base`; returns its group id. The driver
    /// keeps the book until the ring is unregistered: it settles an incremental ring's CQEs.
    pub(crate) fn register_buf_ring(
        &self,
        ring_addr: u64,
        entries: u16,
        book: std::rc::Rc<crate::bufring::book::Book>,
        base: u16,
    ) -> io::Result<u16> {
        let bgid = self.shared.next_bgid.get();
        self.with_uring_mut(|u| {
            let flags = crate::bufring::book::Tracked::flags(&book);
            // SAFETY: the caller keeps the ring memory (page-aligned, `entries` entries) alive
            // and in place until it unregisters the group.
            unsafe {
                u.submitter()
                    .register_buf_ring_with_flags(ring_addr, entries, bgid, flags)?
            };
            u.buf_rings.push(crate::bufring::book::Tracked {
                bgid,
                base,
                entries,
                book,
            });
            Ok(())
        })?;
        self.shared.next_bgid.set(bgid.wrapping_add(1));
        Ok(bgid)
    }

    /// Registers a ring of `entries` at `ring_addr` under `bgid` with `flags`, untracked (a
    /// probe).
    pub(crate) fn register_buf_ring_raw(
        &self,
        ring_addr: u64,
        entries: u16,
        bgid: u16,
        flags: u16,
    ) -> io::Result<()> {
        self.with_uring(|u| {
            // SAFETY: the caller keeps the ring memory alive and in place until it unregisters
            // it.
            unsafe {
                u.submitter()
                    .register_buf_ring_with_flags(ring_addr, entries, bgid, flags)
            }
        })
    }

    /// Unregisters a ring registered with [`register_buf_ring_raw`](Self::register_buf_ring_raw).
    pub(crate) fn unregister_buf_ring_raw(&self, bgid: u16) -> io::Result<()> {
        self.with_uring(|u| u.submitter().unregister_buf_ring(bgid))
    }

    /// Unregisters buffer group `bgid` (and forgets its book).
    pub(crate) fn unregister_buf_ring(&self, bgid: u16) -> io::Result<()> {
        self.with_uring_mut(|u| {
            u.submitter().unregister_buf_ring(bgid)?;
            u.buf_rings.retain(|t| t.bgid != bgid);
            Ok(())
        })
    }

    /// Registers `iovecs` as the ring's fixed-buffer table (`IORING_REGISTER_BUFFERS`); buffer
    /// `i` of `READ_FIXED`/`WRITE_FIXED` is `iovecs[i]`. A ring has one table: `EBUSY` if one
    /// is registered already. `Unsupported` on the epoll driver.
    ///
    /// # Safety
    /// The memory the iovecs describe must stay allocated, at the same addresses, until
    /// [`unregister_buffers`](Self::unregister_buffers) succeeded (or the ring is gone).
    pub(crate) unsafe fn register_buffers(&self, iovecs: &[libc::iovec]) -> io::Result<()> {
        let d = self
            .shared
            .engine
            .try_borrow()
            .map_err(|_| io::Error::other("driver busy"))?;
        let Engine::Uring(u) = &*d else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the epoll driver has no registered buffers",
            ));
        };
        // SAFETY: the caller keeps the memory alive and in place until it unregisters it.
        unsafe { u.submitter().register_buffers(iovecs) }
    }

    /// Unregisters the ring's fixed-buffer table (`IORING_UNREGISTER_BUFFERS`).
    pub(crate) fn unregister_buffers(&self) -> io::Result<()> {
        self.with_uring(|u| u.submitter().unregister_buffers())
    }

    /// Runs `f` on the io_uring engine: `Unsupported` on the epoll driver, "driver busy" while
    /// the engine is borrowed mutably (a registration from inside the drain).
    fn with_uring<T>(&self, f: impl FnOnce(&Uring) -> io::Result<T>) -> io::Result<T> {
        let d = self
            .shared
            .engine
            .try_borrow()
            .map_err(|_| io::Error::other("driver busy"))?;
        match &*d {
            Engine::Uring(u) => f(u),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// [`with_uring`](Self::with_uring) for what changes the engine's own bookkeeping.
    fn with_uring_mut<T>(&self, f: impl FnOnce(&mut Uring) -> io::Result<T>) -> io::Result<T> {
        let mut d = self
            .shared
            .engine
            .try_borrow_mut()
            .map_err(|_| io::Error::other("driver busy"))?;
        match &mut *d {
            Engine::Uring(u) => f(u),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// The ring's registered file table, registered (sparse) on first use. `Unsupported` on
    /// the epoll driver, an IOPOLL ring, or a kernel before 5.19 (the callers check what else
    /// they need: the accept or files-update opcode).
    pub(crate) fn direct_files(&self) -> io::Result<Rc<crate::fixedfile::FixedFiles>> {
        let mut d = self
            .shared
            .engine
            .try_borrow_mut()
            .map_err(|_| io::Error::other("driver busy"))?;
        let Engine::Uring(u) = &mut *d else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the epoll driver has no registered file table",
            ));
        };
        if !direct_table_usable(u) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "direct descriptors need the io_uring driver (not IOPOLL) on Linux 5.19 or later",
            ));
        }
        if let Some(files) = &u.fixed_files {
            return Ok(files.clone());
        }
        let size = crate::fixedfile::table_size();
        u.submitter().register_files_sparse(size).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot register a fixed-file table of {size} slots: {e}"),
            )
        })?;
        let files = crate::fixedfile::FixedFiles::new(size);
        u.fixed_files = Some(files.clone());
        Ok(files)
    }
}
