//! `raw-io-uring`: the kernel's own ceiling for the job, the `io-uring` crate with nothing
//! around it: QD I/Os in flight on one ring set up as hoop's (`SINGLE_ISSUER | DEFER_TASKRUN`),
//! reaped and resubmitted in a plain loop on the calling thread. It is hoop's `uring` engine
//! minus the runtime, so the gap between the two is the framework's cost; `hoop bench count`
//! runs the same loop, unclocked, under callgrind.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use io_uring::{opcode, types, IoUring};

use crate::load::file::content::{self, AlignedBuf, Picker};
use crate::load::file::engine::count_io;
use crate::load::file::engine::{EngineCtx, Outcome};
use crate::load::nop::Stop;
use crate::record::file::{Measured, Usage, Who};

/// One I/O slot: its buffer, what it does now and since when.
struct Slot {
    buf: AlignedBuf,
    off: u64,
    write: bool,
    t0: Option<Instant>,
}

/// What [`raw_loop`] did.
pub(crate) struct RawRun {
    /// I/Os that completed with the whole block (counted or not by the tally).
    pub ios: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
    /// The ring's setup flags.
    pub flags: &'static str,
}

/// A ring as hoop's runtime sets one up by default (`SINGLE_ISSUER | DEFER_TASKRUN` where the
/// kernel has them), with `entries` SQ entries.
pub(crate) fn ring(entries: u32) -> io::Result<(IoUring, &'static str)> {
    match IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
    {
        Ok(r) => Ok((r, "SINGLE_ISSUER|DEFER_TASKRUN")),
        Err(_) => Ok((IoUring::new(entries)?, "default (no setup flags)")),
    }
}

/// Runs `qd` block I/Os at a time on `fd` until `stop` (counted in completed I/Os), each from
/// `picker`: submit and wait for one completion in one `io_uring_enter`, reap every CQE,
/// resubmit. With `m`, every I/O is timed and counted there (reads verified); without it only
/// the length is checked (a short or failed I/O ends the loop with an error).
pub(crate) fn raw_loop(
    fd: RawFd,
    qd: usize,
    bs: usize,
    mut picker: Picker,
    stop: Stop,
    mut m: Option<&mut Measured>,
) -> io::Result<RawRun> {
    let entries = u32::try_from(qd.next_power_of_two())
        .map_err(|_| io::Error::other("queue depth too large"))?;
    let mut slots = (0..qd)
        .map(|_| {
            Ok(Slot {
                buf: content::aligned(bs)?,
                off: 0,
                write: false,
                t0: None,
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    // Declared after `slots`, so dropped before them: closing the ring waits for every I/O in
    // flight (the kernel holds the buffers until then), also on an early return.
    let (mut ring, flags) = ring(entries)?;
    let timed = m.is_some();
    let mut arm = |ring: &mut IoUring, i: usize, slot: &mut Slot| -> io::Result<()> {
        let (off, write) = picker.next();
        let len = slot.buf.capacity() as u32;
        let ptr = slot.buf.as_mut_slice_full().as_mut_ptr();
        let entry = if write {
            content::stamp(slot.buf.as_mut_slice_full(), off);
            opcode::Write::new(types::Fd(fd), ptr, len)
                .offset(off)
                .build()
        } else {
            if timed {
                content::poison(slot.buf.as_mut_slice_full());
            }
            opcode::Read::new(types::Fd(fd), ptr, len)
                .offset(off)
                .build()
        };
        slot.off = off;
        slot.write = write;
        slot.t0 = timed.then(Instant::now);
        // SAFETY: the buffer lives in `slots`, which outlives the ring (declared before it),
        // and is not touched again until this I/O's CQE is reaped.
        unsafe { ring.submission().push(&entry.user_data(i as u64)) }
            .map_err(|_| io::Error::other("raw ring: submission queue full"))
    };
    for (i, slot) in slots.iter_mut().enumerate() {
        arm(&mut ring, i, slot)?;
    }
    let (mut in_flight, mut ios, mut enters) = (qd, 0u64, 0u64);
    let mut done: Vec<(usize, i32)> = Vec::with_capacity(qd);
    while in_flight > 0 {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        enters += 1;
        done.extend(
            ring.completion()
                .map(|c| (c.user_data() as usize, c.result())),
        );
        let now = timed.then(Instant::now);
        for (i, res) in done.drain(..) {
            in_flight -= 1;
            let Some(slot) = slots.get_mut(i) else {
                return Err(io::Error::other(format!(
                    "raw ring: a CQE for unknown slot {i}"
                )));
            };
            let res = if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else {
                Ok(res as usize)
            };
            if matches!(res, Ok(n) if n == bs) {
                ios += 1;
            }
            match m.as_deref_mut() {
                Some(m) => {
                    let lat = match (now, slot.t0) {
                        (Some(now), Some(t0)) => now.saturating_duration_since(t0).as_nanos(),
                        _ => 0,
                    };
                    count_io(m, slot.write, res, (bs, slot.off), &slot.buf, lat);
                }
                None => match res {
                    Ok(n) if n == bs => {}
                    Ok(n) => return Err(io::Error::other(format!("short I/O: {n} of {bs}"))),
                    Err(e) => return Err(e),
                },
            }
            if !stop.reached(ios) {
                arm(&mut ring, i, slot)?;
                in_flight += 1;
            }
        }
    }
    Ok(RawRun { ios, enters, flags })
}

/// The `raw-io-uring` engine, on the (pinned) calling thread.
pub(crate) fn run_raw(cx: &EngineCtx) -> io::Result<Outcome> {
    let job = cx.job;
    let file = cx.open()?;
    let mut m = Measured::new(job.qd)?;
    let u0 = Usage::now(Who::Process);
    let start = Instant::now();
    let stop = Stop::At(start + job.duration());
    let run = raw_loop(
        file.as_raw_fd(),
        job.qd,
        job.bs,
        cx.picker(0),
        stop,
        Some(&mut m),
    )?;
    m.secs = start.elapsed().as_secs_f64();
    m.usage = Usage::now(Who::Process).since(&u0);
    m.syscalls = Some(run.enters);
    m.setup_flags = Some(run.flags.to_string());
    m.note = Some(
        "the kernel's ceiling: the io-uring crate in a plain loop (no runtime), same reads \
         and checks"
            .into(),
    );
    Ok(Outcome::Ran(Box::new(m)))
}
