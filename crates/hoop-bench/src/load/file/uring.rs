//! The hoop engines (`uring`, `uring-fixed`, `uring-sqpoll`, `uring-iopoll`): one runtime on
//! the calling thread, QD tasks each reading or writing one random block at a time and
//! checking what it read; the flavours ([`Flavor`]) differ in registered files and buffers and
//! in the ring's setup.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hoop::fs::{File, FixedFile};
use hoop::{AlignedBuf, BufResult, FixedBuf, FixedBufPool};

use crate::load::file::content::{Picker, ALIGN};
use crate::load::file::engine::{EngineCtx, Outcome};
use crate::load::file::task::{io_loop, Block, BlockBuf, BlockIo};
use crate::record::file::{Measured, Usage, Who};

/// How long the SQ thread spins without work before it sleeps.
const SQPOLL_IDLE: Duration = Duration::from_millis(100);

/// Which hoop engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `uring`: `File::read_at`/`write_at` on a page-aligned [`AlignedBuf`] per task (so
    /// O_DIRECT works too): what a user writes first.
    Plain,
    /// `uring-fixed`: the file registered in the ring's file table ([`FixedFile`], with
    /// `IOSQE_FIXED_FILE`) and registered buffers (`READ_FIXED`/`WRITE_FIXED`), one per task.
    Fixed,
    /// `uring-sqpoll`: as `uring-fixed` on an `IORING_SETUP_SQPOLL` ring.
    Sqpoll,
    /// `uring-iopoll`: as `uring-fixed` on an `IORING_SETUP_IOPOLL` ring (O_DIRECT only;
    /// skipped when the device has no poll queues; the kernel refuses the files update there,
    /// so the file stays a plain fd).
    Iopoll,
}

/// The file as the engine uses it: plain, or registered in the ring's file table.
enum Target {
    Plain(File),
    Fixed(FixedFile),
}

impl BlockIo<AlignedBuf> for Rc<Target> {
    async fn io(&mut self, buf: AlignedBuf, off: u64, write: bool) -> Block {
        let (res, buf) = match (&**self, write) {
            (Target::Plain(f), false) => f.read_at(buf, off).await,
            (Target::Plain(f), true) => f.write_at(buf, off).await,
            (Target::Fixed(f), false) => f.read_at(buf, off).await,
            (Target::Fixed(f), true) => f.write_at(buf, off).await,
        };
        (res, Some(buf))
    }
}

impl BlockIo<FixedBuf> for Rc<Target> {
    async fn io(
        &mut self,
        buf: FixedBuf,
        off: u64,
        write: bool,
    ) -> BufResult<usize, Option<FixedBuf>> {
        let (res, buf) = match (&**self, write) {
            (Target::Plain(f), false) => f.read_fixed_at(buf, off).await,
            (Target::Plain(f), true) => f.write_fixed_at(buf, off).await,
            (Target::Fixed(f), false) => f.read_fixed_at(buf, off).await,
            (Target::Fixed(f), true) => f.write_fixed_at(buf, off).await,
        };
        (res, Some(buf))
    }
}

/// The loop of one task (see [`io_loop`]).
async fn io_task<B: BlockBuf>(
    mut file: Rc<Target>,
    buf: B,
    mut m: Rc<RefCell<Measured>>,
    picker: Picker,
    deadline: Instant,
) where
    Rc<Target>: BlockIo<B>,
{
    io_loop(&mut file, buf, picker, deadline, &mut m).await;
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
    let mut b = hoop::Runtime::builder()
        .driver(hoop::DriverKind::Uring)
        .sample_depth(true);
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
    // Opened outside the runtime (an IOPOLL ring refuses OPENAT); closed inside it.
    let std_file = cx.open()?;
    let dur = job.duration();
    let (blocks, bs, write_pct) = (cx.blocks, job.bs, cx.write_pct);
    let outcome = rt.block_on(async move {
        let mut notes = Vec::new();
        let file = if fixed {
            let f = File::from_std(std_file).into_fixed().await?;
            match f.fallback_reason() {
                None => notes.push("file registered (IOSQE_FIXED_FILE)".to_string()),
                Some(e) => notes.push(format!("file NOT registered ({e}): plain fd")),
            }
            Target::Fixed(f)
        } else {
            Target::Plain(File::from_std(std_file))
        };
        let file = Rc::new(file);
        let pool = if fixed {
            let pool = FixedBufPool::new(qd, bs)?;
            match pool.unregistered_reason() {
                None => notes.push(format!("{qd} registered buffers")),
                Some(e) => notes.push(format!(
                    "buffers NOT registered ({e}): plain reads and writes"
                )),
            }
            Some(pool)
        } else {
            None
        };
        if flavor == Flavor::Iopoll {
            let Some(buf) = pool.as_ref().and_then(|p| p.try_take()) else {
                return Err(io::Error::other("no buffer for the IOPOLL probe"));
            };
            let (r, _buf) = file.clone().io(buf, 0, false).await;
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
            let picker = Picker::new(i as u64, blocks, bs, write_pct);
            let (file, m) = (file.clone(), m.clone());
            let handle = match &pool {
                Some(pool) => {
                    let Some(buf) = pool.try_take() else {
                        return Err(io::Error::other("fewer pool buffers than tasks"));
                    };
                    hoop::spawn(io_task(file, buf, m, picker, deadline))
                }
                None => {
                    let buf = AlignedBuf::new(bs, ALIGN)?;
                    hoop::spawn(io_task(file, buf, m, picker, deadline))
                }
            };
            handles.push(handle);
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
        let closed = match Rc::try_unwrap(file) {
            Ok(Target::Fixed(f)) => f.close().await,
            Ok(Target::Plain(f)) => f.close().await,
            Err(_) => Err(io::Error::other("an I/O task outlived its join")),
        };
        if let Err(e) = closed {
            m.error(format!("closing the file: {e}"));
        }
        m.secs = secs;
        m.usage = usage;
        m.syscalls = Some(c1.enter_calls.saturating_sub(c0.enter_calls));
        m.depth_mean = c1.mean_depth_since(&c0);
        m.setup_flags = Some(flags.to_string());
        if !notes.is_empty() {
            m.note = Some(notes.join("; "));
        }
        Ok(Outcome::Ran(Box::new(m)))
    });
    drop(rt);
    outcome
}
