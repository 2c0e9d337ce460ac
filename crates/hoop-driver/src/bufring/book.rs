//! The books of a ring's buffers: where each buffer stands (provided, filled by the kernel,
//! viewed), and the settling of each buffer CQE as the driver reaps it, in the kernel's order
//! (see the parent module's "Incrementally consumed rings" and "Bundles"). Holds no driver
//! handle, so the driver may hold a book.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// `IORING_CQE_F_BUFFER`: the CQE names a buffer (its id in the upper 16 bits).
pub(crate) const F_BUFFER: u32 = 1;
/// `IORING_CQE_F_BUF_MORE`: the kernel keeps the (incrementally consumed) buffer.
pub(crate) const F_BUF_MORE: u32 = 1 << 4;
/// Set by the driver (a bit the kernel does not use) on a CQE of an incrementally consumed ring
/// it settled at reaping: the upper 16 bits are then a record index, not a buffer id, and
/// `F_BUFFER` is cleared.
pub(crate) const F_REC: u32 = 1 << 14;
/// The record index of a CQE the driver could not settle (out of step, or no room for a
/// record): its bytes cannot be located.
pub(super) const REC_LOST: u16 = u16::MAX;

/// Where one buffer stands.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct BufState {
    /// Views of it alive: [`RingBuf`]s, and segments of records not taken yet.
    pub(super) refs: u32,
    /// The kernel may still fill it (incremental: partly consumed, it goes on at `off`).
    pub(super) kernel: bool,
    /// Counted as handed out: the kernel put bytes in it, or a receive took it from the free
    /// list; until it is provided again.
    pub(super) out: bool,
    /// Bytes of it consumed so far (incremental rings; 0 otherwise).
    pub(super) off: u32,
    /// The ring position it was last provided at.
    pub(super) pos: u16,
}

/// A run of received bytes: `len` bytes of buffer `idx` from `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    pub(super) idx: u16,
    pub(super) off: u32,
    pub(super) len: u32,
}

/// The segments one CQE covers, in order (one, unless it was a bundle).
#[derive(Debug, Default)]
pub(crate) struct Segs {
    pub(super) first: Option<Seg>,
    pub(super) rest: Vec<Seg>,
}

impl Segs {
    pub(super) fn push(&mut self, s: Seg) {
        if self.first.is_none() {
            self.first = Some(s);
        } else {
            self.rest.push(s);
        }
    }
}

/// The bookkeeping of a ring's buffers, shared with the driver (which settles the CQEs of an
/// incrementally consumed ring as it reaps them). Holds no driver handle, so the driver may
/// hold it.
pub(crate) struct Book {
    /// The buffer id of buffer 0 (every kernel ring of a driver has its own id range).
    pub(super) base: u16,
    pub(super) entries: u16,
    pub(super) buf_len: u32,
    /// Registered with `IOU_PBUF_RING_INC`.
    pub(super) inc: bool,
    pub(super) bufs: RefCell<Vec<BufState>>,
    /// Ring position (masked) -> buffer index, as provided: the order a bundle takes them in.
    pub(super) order: RefCell<Vec<u16>>,
    /// Records of settled CQEs not taken yet, by index; `free` lists the empty places.
    pub(super) recs: RefCell<Vec<Option<Segs>>>,
    pub(super) free_recs: RefCell<Vec<u16>>,
    /// Buffers handed out ([`BufState::out`]).
    pub(super) out: Cell<usize>,
    /// Buffers handed out that the kernel still fills (incremental: partly consumed).
    pub(super) partial: Cell<usize>,
    /// CQEs that covered more than one buffer (bundles), for tests.
    pub(super) multi: Cell<u64>,
}

impl Book {
    pub(super) fn new(base: u16, entries: u16, buf_len: u32, inc: bool) -> Book {
        Book {
            base,
            entries,
            buf_len,
            inc,
            bufs: RefCell::new(vec![BufState::default(); entries as usize]),
            order: RefCell::new(vec![0; entries as usize]),
            recs: RefCell::new(Vec::new()),
            free_recs: RefCell::new(Vec::new()),
            out: Cell::new(0),
            partial: Cell::new(0),
            multi: Cell::new(0),
        }
    }

    /// Sets whether the kernel still fills buffer `b` (handed out), keeping `partial`.
    pub(super) fn set_kernel(&self, b: &mut BufState, kernel: bool) {
        if b.kernel != kernel {
            if kernel {
                self.partial.set(self.partial.get() + 1);
            } else {
                self.partial.set(self.partial.get().saturating_sub(1));
            }
        }
        b.kernel = kernel;
    }

    /// The kernel put `res` bytes in the buffers from index `idx` on (one, or several for a
    /// bundle), `more` when the CQE had `BUF_MORE`: the segments, each holding a reference on
    /// its buffer. Mirrors the kernel's consumption: a whole buffer per CQE (or per bundle
    /// step) for an ordinary ring; for an incremental one, as many bytes as arrived from the
    /// buffer's offset, the buffer kept by the kernel while it has room. `Err` when the CQE
    /// does not fit what was provided (its bytes cannot be located): the buffers touched stay
    /// out, never reused.
    pub(super) fn consume(&self, idx: u16, res: u32, more: bool) -> Result<Segs, ()> {
        let mut bufs = self.bufs.borrow_mut();
        let order = self.order.borrow();
        let mask = self.entries - 1;
        let mut segs = Segs::default();
        let mut n = res;
        let mut idx = idx;
        let mut steps = 0u32;
        let mut last = None;
        while n > 0 {
            if idx >= self.entries || steps >= u32::from(self.entries) {
                return Err(());
            }
            let b = &mut bufs[usize::from(idx)];
            // The kernel can fill only a buffer it holds: provided and untouched, or partly
            // consumed (incremental).
            if b.out && !b.kernel {
                return Err(());
            }
            if !b.out {
                b.out = true;
                b.kernel = false;
                self.out.set(self.out.get() + 1);
            }
            let this = n.min(self.buf_len - b.off);
            if this == 0 {
                return Err(());
            }
            b.refs += 1;
            segs.push(Seg {
                idx,
                off: b.off,
                len: this,
            });
            n -= this;
            if self.inc {
                b.off += this;
                self.set_kernel(b, b.off < self.buf_len);
            } else {
                self.set_kernel(b, false);
            }
            last = Some(idx);
            if n > 0 {
                if b.kernel {
                    return Err(());
                }
                idx = order[usize::from(b.pos.wrapping_add(1) & mask)];
            }
            steps += 1;
        }
        if steps > 1 {
            self.multi.set(self.multi.get() + 1);
        }
        // The kernel says it keeps the last buffer: it does (a buffer given back while the
        // kernel may write it would be unsound; one kept too long is only idle).
        if let (true, true, Some(i)) = (self.inc, more, last) {
            self.set_kernel(&mut bufs[usize::from(i)], true);
        }
        Ok(segs)
    }

    /// Settles a CQE of this (incremental) ring in the kernel's order: its record's index.
    pub(super) fn deliver(&self, idx: u16, res: u32, more: bool) -> u16 {
        let Ok(segs) = self.consume(idx, res, more) else {
            return REC_LOST;
        };
        let mut recs = self.recs.borrow_mut();
        if let Some(i) = self.free_recs.borrow_mut().pop() {
            recs[usize::from(i)] = Some(segs);
            return i;
        }
        if recs.len() >= usize::from(REC_LOST) {
            // No room for another record (65,535 CQEs settled and not received): its
            // buffers stay referenced, never reused.
            return REC_LOST;
        }
        recs.push(Some(segs));
        (recs.len() - 1) as u16
    }

    /// Takes record `i` (once).
    pub(super) fn take_rec(&self, i: u16) -> Option<Segs> {
        if i == REC_LOST {
            return None;
        }
        let segs = self.recs.borrow_mut().get_mut(usize::from(i))?.take()?;
        self.free_recs.borrow_mut().push(i);
        Some(segs)
    }

    /// Drops one reference on buffer `idx`: whether it is now free to provide again (the
    /// kernel done with it, no view left); it is then no longer counted out.
    pub(super) fn release(&self, idx: u16) -> bool {
        let mut bufs = self.bufs.borrow_mut();
        let Some(b) = bufs.get_mut(usize::from(idx)) else {
            return false;
        };
        b.refs = b.refs.saturating_sub(1);
        if b.refs == 0 && !b.kernel && b.out {
            b.out = false;
            b.off = 0;
            self.out.set(self.out.get().saturating_sub(1));
            return true;
        }
        false
    }
}

/// A kernel ring of a driver, as the driver tracks it: its group, its buffer id range and its
/// bookkeeping.
pub(crate) struct Tracked {
    pub(crate) bgid: u16,
    pub(crate) base: u16,
    pub(crate) entries: u16,
    pub(crate) book: Rc<Book>,
}

impl Tracked {
    /// The incremental flag the ring is registered with (`IOU_PBUF_RING_INC` or 0).
    pub(crate) fn flags(book: &Book) -> u16 {
        if book.inc {
            io_uring::types::IOU_PBUF_RING_INC as u16
        } else {
            0
        }
    }
}

/// The first buffer id of a free range of `entries` ids among the tracked rings' ranges, if
/// any.
pub(crate) fn free_base(tracked: &[Tracked], entries: u16) -> Option<u16> {
    let mut ranges: Vec<(u32, u32)> = tracked
        .iter()
        .map(|t| (u32::from(t.base), u32::from(t.base) + u32::from(t.entries)))
        .collect();
    ranges.sort_unstable();
    let mut start = 0u32;
    for (lo, hi) in ranges {
        if lo >= start + u32::from(entries) {
            break;
        }
        start = start.max(hi);
    }
    (start + u32::from(entries) <= 1 << 16).then_some(start as u16)
}

/// The driver's hook for a reaped CQE that names a buffer of one of its kernel rings: settles
/// it now, in the kernel's order, and returns the flags carrying its record ([`F_REC`]); other
/// CQEs' flags come back as they were. (A bundle's next buffers are the next ring positions,
/// which user space may fill again once those buffers come back: only at reaping, before any
/// later CQE's buffers can return, are they sure to be the ones the kernel took.)
pub(crate) fn on_cqe(tracked: &[Tracked], res: i32, flags: u32) -> u32 {
    let bid = (flags >> 16) as u16;
    let Some(t) = tracked
        .iter()
        .find(|t| bid.wrapping_sub(t.base) < t.entries)
    else {
        return flags;
    };
    if res <= 0 {
        // No bytes. An incremental ring's kernel keeps the buffer (the receive recycles it);
        // an ordinary ring's buffer named so goes back (`give_back_kernel`).
        return if t.book.inc {
            flags & !F_BUFFER & 0xffff
        } else {
            flags
        };
    }
    let rec = t
        .book
        .deliver(bid - t.base, res as u32, flags & F_BUF_MORE != 0);
    (flags & 0xffff & !F_BUFFER) | F_REC | (u32::from(rec) << 16)
}
