//! `tokio-fs`: what a tokio user has today, QD tasks on a multi-thread tokio runtime. Buffered:
//! a `tokio::fs::File` per task, `seek` then `read_exact` per I/O, each on tokio's blocking pool
//! through the handle's own buffer. O_DIRECT, which `tokio::fs::File` cannot do (its buffer is
//! not aligned): `spawn_blocking` with `read_at` into the task's aligned buffer.

use crate::load::file::task::Block;
use std::fs::File;
use std::future::Future;
use std::io::{self, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use hoop::{AlignedBuf, BufResult};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::load::file::engine::EngineCtx;
use crate::load::file::on_tokio::{self, SendIo};
use crate::record::file::Measured;

/// O_DIRECT: `spawn_blocking` + `pread`/`pwrite` on a shared file.
struct BlockingAt(Arc<File>);

impl SendIo for BlockingAt {
    fn io(
        &mut self,
        mut buf: AlignedBuf,
        off: u64,
        write: bool,
    ) -> impl Future<Output = Block> + Send {
        let file = self.0.clone();
        async move {
            let done = tokio::task::spawn_blocking(move || {
                let r = if write {
                    file.write_at(buf.as_slice_full(), off)
                } else {
                    file.read_at(buf.as_mut_slice_full(), off)
                };
                (r, buf)
            })
            .await;
            match done {
                Ok((r, buf)) => (r, Some(buf)),
                Err(e) => (
                    Err(io::Error::other(format!("the blocking task failed: {e}"))),
                    None,
                ),
            }
        }
    }
}

/// Buffered: a `tokio::fs::File` of the task's own, seek then read or write.
struct Seeking(tokio::fs::File);

impl SendIo for Seeking {
    async fn io(
        &mut self,
        mut buf: AlignedBuf,
        off: u64,
        write: bool,
    ) -> BufResult<usize, Option<AlignedBuf>> {
        let file = &mut self.0;
        let r = async {
            file.seek(SeekFrom::Start(off)).await?;
            if write {
                file.write_all(buf.as_slice_full()).await?;
                file.flush().await?;
            } else {
                file.read_exact(buf.as_mut_slice_full()).await?;
            }
            Ok(buf.capacity())
        }
        .await;
        (r, Some(buf))
    }
}

/// Runs `tokio-fs`.
pub(crate) fn run_tokio_fs(cx: &EngineCtx) -> io::Result<Measured> {
    let job = cx.job;
    let rt = on_tokio::runtime(cx)?;
    let workers = on_tokio::workers(cx);
    let mut m = if job.direct {
        let file = Arc::new(cx.open()?);
        let ios = (0..job.qd).map(|_| BlockingAt(file.clone())).collect();
        on_tokio::measure(cx, &rt, ios)?
    } else {
        let ios = (0..job.qd)
            .map(|_| cx.open().map(|f| Seeking(tokio::fs::File::from_std(f))))
            .collect::<io::Result<Vec<_>>>()?;
        on_tokio::measure(cx, &rt, ios)?
    };
    m.note = Some(if job.direct {
        format!(
            "tokio::fs::File cannot do O_DIRECT (its internal buffer is not aligned): each of \
             the {} tasks awaits tokio::task::spawn_blocking(pread/pwrite into an aligned \
             buffer); multi-thread runtime, {workers} workers, all threads unpinned; syscalls \
             per I/O not counted",
            job.qd
        )
    } else {
        format!(
            "one tokio::fs::File per task (the position is per handle), seek + read_exact per \
             read (a write: seek + write_all + flush): each step a blocking-pool hop, the data \
             copied through tokio's buffer; {} tasks, multi-thread runtime, {workers} workers, \
             all threads unpinned; syscalls per I/O not counted",
            job.qd
        )
    });
    drop(rt);
    Ok(m)
}
