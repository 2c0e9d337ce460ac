//! `linux-aio`: the kernel's native AIO by raw `syscall(2)`, without libaio: QD iocbs in
//! flight, each completion batch reaped in one `io_getevents` and replaced in one `io_submit`,
//! the syscalls counted. Only O_DIRECT I/O is asynchronous here: a buffered `io_submit` does
//! the I/O before it returns.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use crate::load::file::content::{self, AlignedBuf};
use crate::load::file::engine::count_io;
use crate::load::file::engine::EngineCtx;
use crate::record::file::{Measured, Usage, Who};

/// `IOCB_CMD_PREAD`.
const IOCB_CMD_PREAD: u16 = 0;
/// `IOCB_CMD_PWRITE`.
const IOCB_CMD_PWRITE: u16 = 1;

/// `struct iocb` of `<linux/aio_abi.h>`, as laid out on 64-bit little-endian machines
/// (x86_64): `aio_key` comes before `aio_rw_flags`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: i32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const _: () = assert!(std::mem::size_of::<Iocb>() == 64);
const _: () = assert!(std::mem::size_of::<IoEvent>() == 32);
#[cfg(not(all(target_endian = "little", target_pointer_width = "64")))]
compile_error!("the hand-written iocb layout is for 64-bit little-endian machines (x86_64)");

/// An AIO context, destroyed on drop.
struct Ctx(libc::c_ulong);

impl Ctx {
    fn new(nr_events: usize) -> io::Result<Ctx> {
        let mut id: libc::c_ulong = 0;
        // SAFETY: io_setup writes the new context id into the valid pointer.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_setup,
                nr_events as libc::c_long,
                &mut id as *mut libc::c_ulong,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            let hint = if e.raw_os_error() == Some(libc::EAGAIN) {
                " (more events than /proc/sys/fs/aio-max-nr allows)"
            } else {
                ""
            };
            return Err(io::Error::new(
                e.kind(),
                format!("io_setup({nr_events}): {e}{hint}"),
            ));
        }
        Ok(Ctx(id))
    }

    /// Submits `iocbs`; returns how many the kernel took.
    fn submit(&self, iocbs: &mut [*mut Iocb]) -> io::Result<usize> {
        loop {
            // SAFETY: every pointer is an iocb in the caller's array, whose buffer stays alive
            // and untouched until its event is reaped (the caller's invariant).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    self.0,
                    iocbs.len() as libc::c_long,
                    iocbs.as_mut_ptr(),
                )
            };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Waits for at least `min` events; returns how many were written to `events`.
    fn get_events(&self, min: usize, events: &mut [IoEvent]) -> io::Result<usize> {
        // SAFETY: the kernel writes at most `events.len()` events into the array; no timeout.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.0,
                min as libc::c_long,
                events.len() as libc::c_long,
                events.as_mut_ptr(),
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(r as usize)
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: destroys our context; the kernel waits for (or cancels) what is in flight
        // before it returns, so no buffer is written afterwards.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.0) };
    }
}

/// One slot: an iocb, its buffer and when it was submitted.
struct Slot {
    iocb: Iocb,
    buf: AlignedBuf,
    write: bool,
    off: u64,
    t0: Instant,
}

impl Slot {
    fn arm(&mut self, fd: u32, index: usize, write: bool, off: u64) {
        if write {
            content::stamp(self.buf.as_mut_slice_full(), off);
        } else {
            content::poison(self.buf.as_mut_slice_full());
        }
        let len = self.buf.as_slice_full().len();
        self.iocb = Iocb {
            aio_data: index as u64,
            aio_lio_opcode: if write {
                IOCB_CMD_PWRITE
            } else {
                IOCB_CMD_PREAD
            },
            aio_fildes: fd,
            aio_buf: self.buf.as_mut_slice_full().as_mut_ptr() as u64,
            aio_nbytes: len as u64,
            aio_offset: off as i64,
            ..Iocb::default()
        };
        self.write = write;
        self.off = off;
    }
}

/// Submits the iocbs of `batch` (slot indices), all of them; counts the calls.
fn submit_all(ctx: &Ctx, slots: &mut [Slot], batch: &[usize], calls: &mut u64) -> io::Result<()> {
    let now = Instant::now();
    let mut ptrs: Vec<*mut Iocb> = batch
        .iter()
        .map(|&i| {
            slots[i].t0 = now;
            &mut slots[i].iocb as *mut Iocb
        })
        .collect();
    let mut done = 0;
    while done < ptrs.len() {
        *calls += 1;
        let n = ctx.submit(&mut ptrs[done..]).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EINVAL) {
                " (with O_DIRECT: the block size or buffer must match the device's alignment)"
            } else {
                ""
            };
            io::Error::new(e.kind(), format!("io_submit: {e}{hint}"))
        })?;
        if n == 0 {
            return Err(io::Error::other("io_submit took no iocb"));
        }
        done += n;
    }
    Ok(())
}

/// `linux-aio`, on the (pinned) calling thread.
pub(crate) fn run_linux_aio(cx: &EngineCtx) -> io::Result<Measured> {
    let job = cx.job;
    let file: File = cx.open()?;
    let fd = u32::try_from(file.as_raw_fd()).map_err(|_| io::Error::other("bad fd"))?;
    let qd = job.qd;
    let mut m = Measured::new(qd)?;
    if !job.direct {
        m.note = Some("buffered: the kernel's AIO does the I/O inside io_submit".into());
    }
    let mut slots = (0..qd)
        .map(|_| {
            Ok(Slot {
                iocb: Iocb::default(),
                buf: content::aligned(job.bs)?,
                write: false,
                off: 0,
                t0: Instant::now(),
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    // Declared after `slots`, so dropped before them: `io_destroy` waits for every iocb in
    // flight before the buffers are freed, also on an early return.
    let ctx = Ctx::new(qd)?;
    let mut events = vec![IoEvent::default(); qd];
    let mut picker = cx.picker(0);
    let mut calls = 0u64;
    let u0 = Usage::now(Who::Process);
    let start = Instant::now();
    let deadline = start + job.duration();
    let mut batch: Vec<usize> = (0..qd).collect();
    for &i in &batch {
        let (off, write) = picker.next();
        slots[i].arm(fd, i, write, off);
    }
    submit_all(&ctx, &mut slots, &batch, &mut calls)?;
    let mut in_flight = qd;
    while in_flight > 0 {
        calls += 1;
        let n = ctx
            .get_events(1, &mut events)
            .map_err(|e| io::Error::new(e.kind(), format!("io_getevents: {e}")))?;
        let now = Instant::now();
        batch.clear();
        for ev in &events[..n] {
            in_flight -= 1;
            let i = ev.data as usize;
            let Some(slot) = slots.get(i) else {
                m.error(format!("io_getevents: an event for unknown iocb {i}"));
                continue;
            };
            let res = if ev.res < 0 {
                Err(io::Error::from_raw_os_error((-ev.res) as i32))
            } else {
                Ok(ev.res as usize)
            };
            let lat = now.saturating_duration_since(slot.t0).as_nanos();
            count_io(&mut m, slot.write, res, (job.bs, slot.off), &slot.buf, lat);
            if now < deadline {
                batch.push(i);
            }
        }
        if !batch.is_empty() {
            for &i in &batch {
                let (off, write) = picker.next();
                slots[i].arm(fd, i, write, off);
            }
            submit_all(&ctx, &mut slots, &batch, &mut calls)?;
            in_flight += batch.len();
        }
    }
    m.secs = start.elapsed().as_secs_f64();
    m.usage = Usage::now(Who::Process).since(&u0);
    m.syscalls = Some(calls);
    drop(ctx);
    Ok(m)
}
