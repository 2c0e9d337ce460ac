//! Registered wait arguments (`IORING_REGISTER_MEM_REGION` with
//! `IORING_MEM_REGION_REG_WAIT_ARG`, 6.13): a page of the process's memory, registered once,
//! holds the `io_uring_reg_wait` a bounded wait passes, so `io_uring_enter` reads it in place
//! (`IORING_ENTER_EXT_ARG_REG`, the argument an offset into the page) instead of copying an
//! `io_uring_getevents_arg` and its timespec in from user memory on every wait.
//!
//! The kernel takes the region only on a ring set up disabled (`IORING_SETUP_R_DISABLED`, so
//! that no waiter can see it half made), which is then enabled (`IORING_REGISTER_ENABLE_RINGS`)
//! whether or not the region was taken. On by default (`Config::reg_wait`): DESIGN.md has the
//! measurement that decided it.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::time::Duration;

use io_uring::IoUring;

use crate::config::Config;

/// `IORING_REGISTER_MEM_REGION` (linux/io_uring.h, 6.13).
const IORING_REGISTER_MEM_REGION: libc::c_long = 34;
/// `IORING_MEM_REGION_TYPE_USER`: the region is memory the process provides.
const IORING_MEM_REGION_TYPE_USER: u32 = 1;
/// `IORING_MEM_REGION_REG_WAIT_ARG`: the region holds wait arguments.
const IORING_MEM_REGION_REG_WAIT_ARG: u64 = 1;
/// `IORING_REG_WAIT_TS`: the wait argument's timeout is set.
const IORING_REG_WAIT_TS: u32 = 1;
/// `IORING_ENTER_EXT_ARG_REG`: the argument is an offset into the registered wait region.
pub(super) const IORING_ENTER_EXT_ARG_REG: u32 = 1 << 6;

/// The region: one page.
const REGION_BYTES: usize = 4096;

/// `struct io_uring_region_desc`.
#[repr(C)]
#[derive(Default)]
struct RegionDesc {
    user_addr: u64,
    size: u64,
    flags: u32,
    id: u32,
    mmap_offset: u64,
    resv: [u64; 4],
}

/// `struct io_uring_mem_region_reg`.
#[repr(C)]
struct MemRegionReg {
    region_uptr: u64,
    flags: u64,
    resv: [u64; 2],
}

/// `struct io_uring_reg_wait`.
#[repr(C)]
pub(super) struct RegWait {
    ts_sec: i64,
    ts_nsec: i64,
    min_wait_usec: u32,
    flags: u32,
    sigmask: u64,
    sigmask_sz: u32,
    pad: [u32; 3],
    pad2: [u64; 2],
}

const _: () = assert!(std::mem::size_of::<RegWait>() == 64);
const _: () = assert!(std::mem::size_of::<RegionDesc>() == 64);

/// Whether a ring for `cfg` is to be set up disabled, to register a wait region: a runtime
/// thread's own ring (a shared ring's reapers wait outside its lock, with no region, so it
/// would gain nothing).
pub(super) fn wanted(cfg: &Config) -> bool {
    cfg.reg_wait
        && cfg.taskrun_flags
        && !cfg.iopoll
        && cfg.sqpoll_idle.is_none()
        && crate::level::has(crate::level::since::MEM_REGION)
}

/// The registered page of wait arguments (the first, at offset 0, is the one used). It must
/// outlive the ring, which the kernel keeps reading it through: `Uring` drops it after the
/// ring.
pub(crate) struct WaitRegion {
    page: NonNull<RegWait>,
}

impl WaitRegion {
    /// Registers a region on `ring` (set up disabled), then enables the ring in any case. The
    /// region is `None` if the kernel refused it; the error is the enable's.
    pub(super) fn register_and_enable(ring: &IoUring) -> io::Result<Option<WaitRegion>> {
        let region = WaitRegion::register(ring).ok();
        ring.submitter().register_enable_rings()?;
        Ok(region)
    }

    fn register(ring: &IoUring) -> io::Result<WaitRegion> {
        let layout =
            Layout::from_size_align(REGION_BYTES, REGION_BYTES).map_err(io::Error::other)?;
        // SAFETY: the layout has a non-zero size.
        let page = NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<RegWait>())
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let region = WaitRegion { page };
        let desc = RegionDesc {
            user_addr: page.as_ptr() as u64,
            size: REGION_BYTES as u64,
            flags: IORING_MEM_REGION_TYPE_USER,
            ..RegionDesc::default()
        };
        let reg = MemRegionReg {
            region_uptr: &desc as *const RegionDesc as u64,
            flags: IORING_MEM_REGION_REG_WAIT_ARG,
            resv: [0; 2],
        };
        // SAFETY: the kernel reads `reg` and `desc`, both alive for the call, and pins the page
        // `desc` names, which `region` owns and frees only after the ring is gone (on failure
        // the kernel has released it again). The ring fd is open (owned by `ring`).
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring.as_raw_fd() as libc::c_long,
                IORING_REGISTER_MEM_REGION,
                (&reg as *const MemRegionReg).cast::<libc::c_void>(),
                1 as libc::c_long,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(region)
    }

    /// Writes the wait's arguments into the region's first slot; returns the `io_uring_enter`
    /// argument and size that name it (offset 0).
    #[inline]
    pub(super) fn set(&self, wait: Option<Duration>, min_wait_usec: u32) -> (usize, usize) {
        let (ts_sec, ts_nsec, flags) = match wait {
            Some(d) => (
                d.as_secs().min(i64::MAX as u64) as i64,
                i64::from(d.subsec_nanos()),
                IORING_REG_WAIT_TS,
            ),
            None => (0, 0, 0),
        };
        // SAFETY: the page is ours, aligned and large enough for one `RegWait`; the kernel reads
        // it only inside `io_uring_enter` on this thread (the ring's only issuer), never while
        // this writes it.
        unsafe {
            let w = self.page.as_ptr();
            (*w).ts_sec = ts_sec;
            (*w).ts_nsec = ts_nsec;
            (*w).min_wait_usec = min_wait_usec;
            (*w).flags = flags;
        }
        (0, std::mem::size_of::<RegWait>())
    }
}

impl Drop for WaitRegion {
    fn drop(&mut self) {
        if let Ok(layout) = Layout::from_size_align(REGION_BYTES, REGION_BYTES) {
            // SAFETY: allocated in `register` with this layout; the ring that pinned it is gone
            // (the field order of `Uring` drops the ring first).
            unsafe { dealloc(self.page.as_ptr().cast(), layout) };
        }
    }
}
