//! The engines on a multi-thread tokio runtime (`tokio-fs`, `shared`): where most Rust services
//! run. QD tasks, each looping one random block at a time ([`io_loop`]) with its own aligned
//! buffer and its own counts, merged when all are done; the runtime's workers, its blocking
//! pool and any thread the engine starts run unpinned (tasks migrate between workers).

use std::future::Future;
use std::io;
use std::time::Instant;

use hoop::AlignedBuf;
use tokio::runtime::Runtime;

use crate::load::file::content;
use crate::load::file::engine::EngineCtx;
use crate::load::file::task::{io_loop, Block, BlockIo};
use crate::machine::pin::allow_cpus;
use crate::record::file::{Measured, Usage, Who};

/// One task's way to the file, with a future that may move between worker threads.
pub(crate) trait SendIo: Send + 'static {
    /// Reads (`write` false) or writes the whole of `buf` at byte `off`; the buffer comes back
    /// with the result (`None`: lost, which ends the task).
    fn io(&mut self, buf: AlignedBuf, off: u64, write: bool) -> impl Future<Output = Block> + Send;
}

/// A [`SendIo`] as the task loop takes it.
struct Sendable<I>(I);

impl<I: SendIo> BlockIo<AlignedBuf> for Sendable<I> {
    async fn io(&mut self, buf: AlignedBuf, off: u64, write: bool) -> Block {
        self.0.io(buf, off, write).await
    }
}

/// Unpins the calling thread (the engine's own, which ends with the engine, so that every
/// thread it starts inherits every allowed CPU), then builds a multi-thread runtime with one
/// worker per allowed CPU and tokio's I/O driver.
pub(crate) fn runtime(cx: &EngineCtx) -> io::Result<Runtime> {
    allow_cpus(cx.allowed);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers(cx))
        .thread_name("hoop-bench-tokio")
        // I/O on: the shared rings hand their waiting to tokio's reactor (a runtime without
        // it leaves it to their reaper threads).
        .enable_io()
        .build()
}

/// Worker threads of [`runtime`]: one per allowed CPU.
pub(crate) fn workers(cx: &EngineCtx) -> usize {
    cx.allowed.len().max(1)
}

/// Runs one task per element of `ios` on `rt` until the job's time is up, each with its own
/// buffer of the block size and random stream; returns the merged counts, the wall time and the
/// process's resource usage over the run.
pub(crate) fn measure<I: SendIo>(
    cx: &EngineCtx,
    rt: &Runtime,
    ios: Vec<I>,
) -> io::Result<Measured> {
    let job = cx.job;
    let mut tasks = Vec::with_capacity(ios.len());
    for (i, io) in ios.into_iter().enumerate() {
        tasks.push((
            Sendable(io),
            content::aligned(job.bs)?,
            Measured::new(job.qd)?,
            cx.picker(i as u64),
        ));
    }
    let mut total = Measured::new(job.qd)?;
    let u0 = Usage::now(Who::Process);
    let start = Instant::now();
    let deadline = start + job.duration();
    let handles: Vec<_> = tasks
        .into_iter()
        .map(|(mut io, buf, mut m, picker)| {
            rt.spawn(async move {
                io_loop(&mut io, buf, picker, deadline, &mut m).await;
                m
            })
        })
        .collect();
    rt.block_on(async {
        for h in handles {
            match h.await {
                Ok(m) => total.absorb(m)?,
                Err(e) => total.error(format!("an I/O task failed: {e}")),
            }
        }
        Ok::<_, io::Error>(())
    })?;
    total.secs = start.elapsed().as_secs_f64();
    total.usage = Usage::now(Who::Process).since(&u0);
    total.unpinned = true;
    Ok(total)
}
