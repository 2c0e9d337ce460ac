//! The hoop engines: one runtime on the (pinned) calling thread, QD tasks spawned, each looping
//! a read or write of one random block at a time and checking what it read.
//!
//! * `uring`: `File::read_at`/`write_at` on page-aligned memory of an unregistered
//!   [`FixedBufPool`] (so O_DIRECT works too).
//! * `uring-fixed`: registered buffers (`READ_FIXED`/`WRITE_FIXED`), one per task.
//! * `uring-sqpoll`: as `uring-fixed` on an `IORING_SETUP_SQPOLL` ring.
//! * `uring-iopoll`: as `uring-fixed` on an `IORING_SETUP_IOPOLL` ring (O_DIRECT only; skipped
//!   when the device has no poll queues).

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hoop::fs::File;
use hoop::{FixedBuf, FixedBufPool};

use super::content::{self, Picker};
use super::metrics::{Measured, Usage, Who};
use super::{EngineCtx, Outcome};

/// How long the SQ thread spins without work before it sleeps.
const SQPOLL_IDLE: Duration = Duration::from_millis(100);

/// Which hoop engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Plain reads and writes.
    Plain,
    /// Registered buffers.
    Fixed,
    /// Registered buffers, SQPOLL ring.
    Sqpoll,
    /// Registered buffers, IOPOLL ring.
    Iopoll,
}

/// The loop of one task: until the deadline, one random block at a time.
async fn io_task(
    file: Rc<File>,
    mut buf: FixedBuf,
    m: Rc<RefCell<Measured>>,
    mut picker: Picker,
    deadline: Instant,
    fixed: bool,
) {
    let bs = buf.capacity();
    while Instant::now() < deadline {
        let (off, write) = picker.next();
        let t0;
        let (res, back) = if write {
            content::stamp(buf.as_mut_slice_full(), off);
            buf.set_len(bs);
            t0 = Instant::now();
            if fixed {
                file.write_fixed_at(buf, off).await
            } else {
                file.write_at(buf, off).await
            }
        } else {
            content::poison(buf.as_mut_slice_full());
            buf.clear();
            t0 = Instant::now();
            if fixed {
                file.read_fixed_at(buf, off).await
            } else {
                file.read_at(buf, off).await
            }
        };
        let lat = t0.elapsed().as_nanos();
        buf = back;
        m.borrow_mut().complete(
            write,
            res,
            bs,
            off,
            || content::verify(buf.as_slice_full(), off),
            lat,
        );
    }
}

/// Runs one hoop engine on the calling thread.
pub(crate) fn run_uring(cx: &EngineCtx, flavor: Flavor) -> io::Result<Outcome> {
    let job = cx.job;
    if flavor == Flavor::Iopoll && !job.direct {
        return Ok(Outcome::Skipped(
            "IOPOLL busy-polls the device for O_DIRECT completions; this job is buffered \
             (add --direct)"
                .into(),
        ));
    }
    let qd = u16::try_from(job.qd)
        .map_err(|_| io::Error::other("hoop engines take a QD of at most 65535"))?;
    // Forced io_uring: this bench measures the ring, whatever HOOP_DRIVER says.
    let mut b = hoop::Runtime::builder().driver(hoop::DriverKind::Uring);
    if job.qd > 256 {
        b = b.entries((job.qd as u32).next_power_of_two());
    }
    b = match flavor {
        Flavor::Sqpoll => b.sqpoll(SQPOLL_IDLE),
        Flavor::Iopoll => b.iopoll(true),
        Flavor::Plain | Flavor::Fixed => b,
    };
    let rt = b.build()?;
    let flags = rt.setup_flags();
    if flavor == Flavor::Sqpoll && !flags.split('|').any(|f| f == "SQPOLL") {
        return Ok(Outcome::Skipped(format!(
            "the kernel refused IORING_SETUP_SQPOLL (the ring got {flags})"
        )));
    }
    if flavor == Flavor::Iopoll && !flags.split('|').any(|f| f == "IOPOLL") {
        return Ok(Outcome::Skipped(format!(
            "the kernel refused IORING_SETUP_IOPOLL (the ring got {flags})"
        )));
    }
    let fixed = flavor != Flavor::Plain;
    let std_file = cx.open()?;
    // TODO(fixed-file): for `fixed` engines, register the file here (hoop's FixedFile, a
    // registered regular file) instead of wrapping a plain `File`; the tasks' read_fixed_at /
    // write_fixed_at calls stay the same.
    // Opened outside the runtime and closed outside it too (this last clone is dropped after
    // block_on): an IOPOLL ring refuses OPENAT and CLOSE.
    let file = Rc::new(File::from_std(std_file));
    let dur = job.duration();
    let (blocks, bs, write_pct) = (cx.blocks, job.bs, cx.write_pct);
    let task_file = file.clone();
    let outcome = rt.block_on(async move {
        let file = task_file;
        let pool = if fixed {
            FixedBufPool::new(qd, bs)?
        } else {
            FixedBufPool::new_unregistered(qd, bs)?
        };
        let mut notes = Vec::new();
        if fixed {
            match pool.unregistered_reason() {
                None => notes.push(format!("{qd} registered buffers")),
                Some(e) => notes.push(format!(
                    "buffers NOT registered ({e}): plain reads and writes"
                )),
            }
        }
        if flavor == Flavor::Iopoll {
            let Some(buf) = pool.try_take() else {
                return Err(io::Error::other("no buffer for the IOPOLL probe"));
            };
            let (r, _buf) = file.read_fixed_at(buf, 0).await;
            match r {
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    let dev = cx
                        .fs
                        .device
                        .as_ref()
                        .map_or("the device".to_string(), |d| format!("{} ", d.name));
                    return Ok(Outcome::Skipped(format!(
                        "{dev}has no poll queues: an IOPOLL read fails with EOPNOTSUPP \
                         (see /sys/block/*/queue/io_poll; NVMe needs nvme.poll_queues > 0)"
                    )));
                }
                Err(e) => return Err(io::Error::new(e.kind(), format!("IOPOLL probe read: {e}"))),
                Ok(_) => {}
            }
        }
        if flavor == Flavor::Sqpoll {
            notes.push(
                "the SQ thread (unpinned) submits; its CPU time counts as this process's".into(),
            );
        }
        let m = Rc::new(RefCell::new(Measured::new(job.qd)?));
        let c0 = hoop::runtime::current_counters().unwrap_or_default();
        let u0 = Usage::now(Who::Process);
        let start = Instant::now();
        let deadline = start + dur;
        let mut handles = Vec::with_capacity(job.qd);
        for i in 0..job.qd {
            let Some(buf) = pool.try_take() else {
                return Err(io::Error::other("fewer pool buffers than tasks"));
            };
            let picker = Picker::new(i as u64, blocks, bs, write_pct);
            handles.push(hoop::spawn(io_task(
                file.clone(),
                buf,
                m.clone(),
                picker,
                deadline,
                fixed,
            )));
        }
        for h in handles {
            if let Err(e) = h.await {
                m.borrow_mut().error(format!("an I/O task failed: {e}"));
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let usage = Usage::now(Who::Process).since(&u0);
        let c1 = hoop::runtime::current_counters().unwrap_or_default();
        let mut m = Rc::try_unwrap(m)
            .map_err(|_| io::Error::other("an I/O task outlived its join"))?
            .into_inner();
        m.secs = secs;
        m.usage = usage;
        m.syscalls = Some(c1.enter_calls.saturating_sub(c0.enter_calls));
        m.setup_flags = Some(flags.to_string());
        if !notes.is_empty() {
            m.note = Some(notes.join("; "));
        }
        Ok(Outcome::Ran(Box::new(m)))
    });
    drop(rt);
    drop(file);
    outcome
}
