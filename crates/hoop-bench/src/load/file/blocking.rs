//! The blocking engines: `sync` (one thread, one `pread`/`pwrite` at a time) and `threadpool`
//! (a POSIX-AIO-like pool: the submitting thread keeps QD requests queued for min(QD, 20)
//! workers doing `pread`/`pwrite`, as glibc's `aio_*` does with its default 20 threads).

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Instant;

use crate::load::file::content::{self, AlignedBuf};
use crate::load::file::engine::count_io;
use crate::load::file::engine::EngineCtx;
use crate::machine::pin::allow_cpus;
use crate::record::file::{Measured, Usage, Who};

/// glibc's default `aio_threads`.
const GLIBC_AIO_THREADS: usize = 20;

/// One read or write of `bs` bytes at `off`, from or into `buf`.
fn do_io(file: &File, write: bool, buf: &mut AlignedBuf, off: u64) -> io::Result<usize> {
    if write {
        file.write_at(buf.as_slice_full(), off)
    } else {
        file.read_at(buf.as_mut_slice_full(), off)
    }
}

/// Prepares `buf` for an operation: the file's content for a write, poison for a read.
fn prepare(buf: &mut AlignedBuf, write: bool, off: u64) {
    if write {
        content::stamp(buf.as_mut_slice_full(), off);
    } else {
        content::poison(buf.as_mut_slice_full());
    }
}

/// `sync`: a `pread`/`pwrite` loop on the (pinned) calling thread; QD is 1 by nature.
pub(crate) fn run_sync(cx: &EngineCtx) -> io::Result<Measured> {
    let job = cx.job;
    let file = cx.open()?;
    let mut buf = content::aligned(job.bs)?;
    let mut picker = cx.picker(0);
    let mut m = Measured::new(1)?;
    m.note = Some(format!(
        "QD 1 by nature: one pread/pwrite at a time (--qd {} does not apply)",
        job.qd
    ));
    let mut calls = 0u64;
    let u0 = Usage::now(Who::Process);
    let start = Instant::now();
    let deadline = start + job.duration();
    while Instant::now() < deadline {
        let (off, write) = picker.next();
        prepare(&mut buf, write, off);
        let t0 = Instant::now();
        let res = do_io(&file, write, &mut buf, off);
        let lat = t0.elapsed().as_nanos();
        calls += 1;
        count_io(&mut m, write, res, (job.bs, off), &buf, lat);
    }
    m.secs = start.elapsed().as_secs_f64();
    m.usage = Usage::now(Who::Process).since(&u0);
    m.syscalls = Some(calls);
    Ok(m)
}

/// A request of the pool.
struct Req {
    off: u64,
    write: bool,
    buf: AlignedBuf,
    /// When it was queued.
    t0: Instant,
}

/// The shared request queue.
#[derive(Default)]
struct Queue {
    items: VecDeque<Req>,
    closed: bool,
}

/// `threadpool`: QD requests in flight through a shared queue to min(QD, 20) unpinned workers;
/// completions come back through a channel to the (pinned) submitting thread.
pub(crate) fn run_threadpool(cx: &EngineCtx) -> io::Result<Measured> {
    let job = cx.job;
    let file = Arc::new(cx.open()?);
    let workers = job.qd.min(GLIBC_AIO_THREADS);
    let mut m = Measured::new(job.qd)?;
    m.note = Some(format!(
        "{workers} worker threads (min(QD, {GLIBC_AIO_THREADS}), glibc's default aio_threads), \
         unpinned; syscalls per I/O not counted"
    ));
    let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
    let (done_tx, done_rx) = mpsc::channel::<(Req, io::Result<usize>)>();
    let mut bufs = (0..job.qd)
        .map(|_| content::aligned(job.bs))
        .collect::<io::Result<Vec<_>>>()?;
    let u0 = Usage::now(Who::Process);
    let result = std::thread::scope(|s| {
        for _ in 0..workers {
            let (queue, file, tx) = (queue.clone(), file.clone(), done_tx.clone());
            let allowed = cx.allowed;
            s.spawn(move || {
                // Threads inherit the creator's affinity: undo the submitter's pinning.
                allow_cpus(allowed);
                let (lock, cv) = &*queue;
                loop {
                    let mut req = {
                        let Ok(mut q) = lock.lock() else { return };
                        loop {
                            if let Some(r) = q.items.pop_front() {
                                break r;
                            }
                            if q.closed {
                                return;
                            }
                            q = match cv.wait(q) {
                                Ok(q) => q,
                                Err(_) => return,
                            };
                        }
                    };
                    let res = do_io(&file, req.write, &mut req.buf, req.off);
                    if tx.send((req, res)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let submit = |req: Req| -> io::Result<()> {
            let (lock, cv) = &*queue;
            lock.lock()
                .map_err(|_| io::Error::other("threadpool: a worker panicked"))?
                .items
                .push_back(req);
            cv.notify_one();
            Ok(())
        };
        let mut run = || -> io::Result<f64> {
            let mut picker = cx.picker(0);
            let start = Instant::now();
            let deadline = start + job.duration();
            // The next random block's request, its buffer prepared, queued now.
            let mut issue = |mut buf: AlignedBuf| {
                let (off, write) = picker.next();
                prepare(&mut buf, write, off);
                submit(Req {
                    off,
                    write,
                    buf,
                    t0: Instant::now(),
                })
            };
            let mut in_flight = 0usize;
            for buf in bufs.drain(..) {
                issue(buf)?;
                in_flight += 1;
            }
            while in_flight > 0 {
                let (req, res) = done_rx
                    .recv()
                    .map_err(|_| io::Error::other("threadpool: the workers are gone"))?;
                in_flight -= 1;
                let lat = req.t0.elapsed().as_nanos();
                let Req {
                    off, write, buf, ..
                } = req;
                count_io(&mut m, write, res, (job.bs, off), &buf, lat);
                if Instant::now() < deadline {
                    issue(buf)?;
                    in_flight += 1;
                }
            }
            Ok(start.elapsed().as_secs_f64())
        };
        let r = run();
        // Stop the workers whatever happened (the scope joins them).
        let (lock, cv) = &*queue;
        if let Ok(mut q) = lock.lock() {
            q.closed = true;
        }
        cv.notify_all();
        r
    });
    m.secs = result?;
    m.usage = Usage::now(Who::Process).since(&u0);
    Ok(m)
}
