//! `shared`: `hoop::shared::File` awaited from a multi-thread tokio runtime, QD tasks on one
//! file handle (`read_at`/`write_at` take `&self` and an owned buffer), on a `Rings` with
//! `Rings::builder()`'s defaults: io_uring for a tokio user, beside what `tokio-fs` gives.

use crate::load::file::task::Block;
use std::io;
use std::sync::Arc;

use hoop::AlignedBuf;

use crate::load::file::engine::EngineCtx;
use crate::load::file::on_tokio::{self, SendIo};
use crate::plan::file::Rw;
use crate::record::file::Measured;
use hoop::shared::{File, OpenOptions, Rings};

/// Default SQ entries of a shared ring (more when QD needs them).
const DEFAULT_ENTRIES: u32 = 256;

/// One task's handle: the shared file.
struct SharedAt(Arc<File>);

impl SendIo for SharedAt {
    async fn io(&mut self, buf: AlignedBuf, off: u64, write: bool) -> Block {
        let (r, buf) = if write {
            self.0.write_at(buf, off).await
        } else {
            self.0.read_at(buf, off).await
        };
        (r, Some(buf))
    }
}

/// Runs `shared`.
pub(crate) fn run_shared(cx: &EngineCtx) -> io::Result<Measured> {
    let job = cx.job;
    let rt = on_tokio::runtime(cx)?;
    let workers = on_tokio::workers(cx);
    let mut builder = Rings::builder();
    let entries = u32::try_from(job.qd)
        .map_err(|_| io::Error::other("QD does not fit a ring"))?
        .next_power_of_two();
    if entries > DEFAULT_ENTRIES {
        builder = builder.entries(entries);
    }
    let rings = builder
        .build()
        .map_err(|e| io::Error::new(e.kind(), format!("shared rings: {e}")))?;
    let flags = if job.direct { libc::O_DIRECT } else { 0 };
    let file = rt
        .block_on(
            OpenOptions::new()
                .read(true)
                .write(job.rw != Rw::Read)
                .custom_flags(flags)
                .open(&rings, cx.path),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", cx.path.display())))?;
    let file = Arc::new(file);
    let ios = (0..job.qd).map(|_| SharedAt(file.clone())).collect();
    let measured = on_tokio::measure(cx, &rt, ios);
    drop(file);
    drop(rt);
    let report = rings.shutdown();
    let mut m = measured?;
    m.setup_flags = rings.setup_flags(0).map(str::to_string);
    let mut note = format!(
        "hoop::shared::File ({}), one handle for the {} tasks; Rings::builder() defaults (one \
         ring per online CPU: {}){}; multi-thread tokio runtime, {workers} workers, all \
         threads unpinned; syscalls per I/O not counted",
        if job.direct { "O_DIRECT" } else { "buffered" },
        job.qd,
        rings.ring_count(),
        if entries > DEFAULT_ENTRIES {
            format!(", {entries} entries")
        } else {
            String::new()
        },
    );
    if report.leaked > 0 || report.still_in_flight > 0 {
        note.push_str(&format!(
            "; at shutdown {} ops were still in flight and {} leaked",
            report.still_in_flight, report.leaked
        ));
    }
    m.note = Some(note);
    Ok(m)
}
