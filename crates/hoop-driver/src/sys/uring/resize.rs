//! Growing the rings under load (`IORING_REGISTER_RESIZE_RINGS`, 6.13): a thread starts with a
//! small CQ and the in-flight cap it allows, and the CQ grows (four times over, up to the size
//! hoop would otherwise have set up front) when the operations in flight, or waiting for room,
//! come near what it holds.
//!
//! Before 6.13, on rings without `DEFER_TASKRUN` (the kernel resizes only those), on shared
//! rings (other threads wait on the ring's fd number, which a resize changes here) and where
//! the caller chose the CQ or the cap, the CQ is set up at its full size as before.
//!
//! The kernel copies the queued SQEs and the unreaped CQEs into the new rings and keeps their
//! heads and tails; the process must map the new rings again. The io-uring crate maps a ring
//! once, when an `IoUring` is built from an fd, so a resize builds a new `IoUring` on a
//! duplicate of the ring fd with the new offsets and drops the old one (which unmaps the old
//! rings and closes the old fd number). The ring itself, its registrations (the registered
//! ring index, files, buffers, buffer rings) and its operations in flight are untouched.

use std::io;
use std::os::fd::AsRawFd;

use io_uring::IoUring;

use super::build::build_ring;
use super::Uring;
use crate::config::Config;
use crate::setup::SetupError;

/// `IORING_REGISTER_RESIZE_RINGS` (linux/io_uring.h, 6.13).
const IORING_REGISTER_RESIZE_RINGS: libc::c_long = 33;
/// `IORING_SETUP_CQSIZE`: the `cq_entries` of the parameters are the CQ size.
const IORING_SETUP_CQSIZE: u32 = 1 << 3;
/// `IORING_SETUP_CLAMP`: sizes above the kernel's largest are clamped to it.
const IORING_SETUP_CLAMP: u32 = 1 << 4;

/// The CQ a growable ring starts with, at least (4 x the SQ when that is larger): 16 KiB.
pub(crate) const START_CQ_ENTRIES: u32 = 1024;

/// `struct io_uring_params` (linux/io_uring.h), the layout `io_uring::Parameters` wraps.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Params {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: [u32; 10],
    cq_off: [u32; 10],
}

const _: () = assert!(std::mem::size_of::<Params>() == 120);
const _: () = assert!(std::mem::size_of::<io_uring::Parameters>() == 120);

/// How a growable ring grows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grow {
    /// The largest CQ it grows to (what a ring of fixed size would have had from the start).
    target_cq: u32,
    /// Operations in flight or waiting for room past which the CQ grows.
    grow_at: usize,
}

impl Grow {
    pub(super) fn new(cq: u32, target_cq: u32) -> Grow {
        Grow {
            target_cq,
            grow_at: grow_at(cq),
        }
    }
}

/// Three quarters of the in-flight cap a CQ of `cq` entries allows.
fn grow_at(cq: u32) -> usize {
    crate::config::cap_for_cq(cq as usize) / 4 * 3
}

/// Whether a ring set up with `setup_flags` can be grown at this kernel level: the kernel
/// resizes only `DEFER_TASKRUN` rings, and hoop maps again only rings without an SQ index
/// array (`NO_SQARRAY`: the kernel does not say where a resized ring's array is).
pub(super) fn can_grow(setup_flags: &str) -> bool {
    crate::level::has(crate::level::since::RESIZE_RINGS)
        && setup_flags.contains("DEFER_TASKRUN")
        && setup_flags.contains("NO_SQARRAY")
}

impl Uring {
    /// Grows the CQ if the operations in flight, and those waiting for room, come near what
    /// it holds; after a drain (the CQ is empty, no CQE is posted outside an enter with
    /// `DEFER_TASKRUN`). A kernel that refuses leaves the ring as it was and stops further
    /// tries: the in-flight cap keeps the ring safe, operations wait for room.
    #[inline]
    pub(super) fn maybe_grow(&mut self) {
        if let Some(g) = self.grow {
            if self.table.slots.in_use() + self.table.room_waiters() > g.grow_at {
                self.grow_cq(g);
            }
        }
    }

    #[cold]
    fn grow_cq(&mut self, g: Grow) {
        let cq = self.ring.params().cq_entries();
        if cq >= g.target_cq {
            self.grow = None;
            return;
        }
        let new_cq = cq.saturating_mul(4).min(g.target_cq);
        match resize(&self.ring, new_cq) {
            Ok(ring) => {
                // The old `IoUring` unmaps the old rings and closes its fd number; the new one
                // owns a duplicate. No SQ or CQ view outlives this call.
                drop(std::mem::replace(&mut self.ring, ring));
                let cq = self.ring.params().cq_entries();
                self.table.counters.ring_resizes += 1;
                self.cancel_budget = (cq as usize / 16).max(1);
                self.table.set_cap(crate::config::cap_for_cq(cq as usize));
                self.grow = (cq < g.target_cq).then(|| Grow::new(cq, g.target_cq));
            }
            Err(e) => {
                self.grow = None;
                // Resized but not mapped again: the old mappings are stale.
                if e.kind() == io::ErrorKind::Other {
                    self.poison();
                }
            }
        }
    }

    /// Whether this ring starts small and grows (its setup found it could be resized).
    pub(crate) fn resizes(&self) -> bool {
        can_grow(self.setup_flags)
    }

    /// The bytes of the rings mapped into the process: the SQ ring with its index array, the
    /// SQEs, and the CQ ring with its CQEs (a page's rounding left out).
    pub(crate) fn ring_bytes(&self) -> usize {
        let p = params_of(&self.ring);
        let sq = p.sq_off[6] as usize + p.sq_entries as usize * 4;
        let sqes = p.sq_entries as usize * std::mem::size_of::<io_uring::squeue::Entry>();
        let cq = p.cq_off[5] as usize + p.cq_entries as usize * 16;
        sqes + if p.features & 1 != 0 {
            sq.max(cq)
        } else {
            sq + cq
        }
    }
}

/// The `io_uring_params` the ring was set up (or last resized) with.
fn params_of(ring: &IoUring) -> Params {
    // SAFETY: `Parameters` is `#[repr(transparent)]` over `io_uring_params`, whose layout
    // `Params` repeats (same size, asserted above); both are plain integers.
    unsafe { std::mem::transmute_copy(ring.params()) }
}

/// A new small ring (`ring`, of `start_cq` CQ entries) made growable up to `target_cq`: tried
/// once with a resize to its own size, so a kernel (or a sandbox) that refuses is found at
/// setup. Where it cannot grow, the ring is set up again at `target_cq`.
pub(super) fn start(
    built: Built,
    entries: u32,
    target_cq: u32,
    cfg: &Config,
) -> Result<(Built, Option<Grow>), SetupError> {
    let (ring, setup_flags, region) = built;
    let start_cq = ring.params().cq_entries();
    if can_grow(setup_flags) {
        if let Ok(resized) = resize(&ring, start_cq) {
            drop(ring);
            let grow = Grow::new(start_cq, target_cq);
            return Ok(((resized, setup_flags, region), Some(grow)));
        }
    }
    drop(ring);
    drop(region);
    Ok((build_ring(entries, target_cq, cfg, false)?, None))
}

/// A ring as `build_ring` made it: the ring, its setup flags, its wait region.
pub(super) type Built = (IoUring, &'static str, Option<super::regwait::WaitRegion>);

/// Resizes the CQ of `ring` to `cq_entries` (the SQ keeps its size) and maps the new rings:
/// the returned `IoUring`, on a duplicate of the ring fd, replaces `ring`, whose mappings are
/// stale once this returns `Ok`. An error of kind `Other` means the ring was resized but could
/// not be mapped again (`ring` is then unusable); any other, that the kernel refused (`ring`
/// is as it was).
fn resize(ring: &IoUring, cq_entries: u32) -> io::Result<IoUring> {
    let old = params_of(ring);
    let mut p = Params {
        sq_entries: old.sq_entries,
        cq_entries,
        flags: IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP,
        ..Params::default()
    };
    // SAFETY: the kernel reads and writes one `io_uring_params` at `p`, alive for the call; the
    // ring fd is open (owned by `ring`).
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd() as libc::c_long,
            IORING_REGISTER_RESIZE_RINGS,
            (&mut p as *mut Params).cast::<libc::c_void>(),
            1 as libc::c_long,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let unmapped = |e: io::Error| io::Error::other(format!("ring resized, not mapped: {e}"));
    // The kernel filled in the sizes and the new rings' offsets; the rest is the ring's.
    let new = Params {
        sq_entries: p.sq_entries,
        cq_entries: p.cq_entries,
        sq_off: p.sq_off,
        cq_off: p.cq_off,
        ..old
    };
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on the ring fd, which `ring` keeps open.
    let dup = unsafe { libc::fcntl(ring.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(unmapped(io::Error::last_os_error()));
    }
    // SAFETY: `Params` and `Parameters` have the same layout (asserted above); `dup` is a new fd
    // owned by nobody else, naming this ring, and `new` holds what the kernel filled in for its
    // current rings (the features and flags are the ring's own). `from_fd` owns `dup` and
    // closes it if the mapping fails.
    unsafe {
        let params: io_uring::Parameters = std::mem::transmute_copy(&new);
        IoUring::from_fd(dup, params)
    }
    .map_err(unmapped)
}
