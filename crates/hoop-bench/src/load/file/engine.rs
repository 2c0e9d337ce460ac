//! What an engine of `hoop bench file` is given (the job, the test file, pinning) and what
//! running it gives (a measurement, or why it cannot run here).

use std::fs::File;
use std::io;
use std::path::Path;

use crate::load::file::content::{self, AlignedBuf, Picker};
use crate::load::file::testfile;
use crate::machine::fs::FsInfo;
use crate::plan::file::{FileJob, Rw};
use crate::record::file::Measured;

/// Counts one I/O of `bs` bytes at `off` through `buf` on `m`, taking `latency_ns`: a read
/// counts only if `buf` carries the stamped content of `off` ([`content::verify`]).
pub(crate) fn count_io(
    m: &mut Measured,
    write: bool,
    res: io::Result<usize>,
    (bs, off): (usize, u64),
    buf: &AlignedBuf,
    latency_ns: u128,
) {
    m.complete(
        write,
        res,
        bs,
        off,
        || content::verify(buf.as_slice_full(), off),
        latency_ns,
    );
}

/// What an engine needs to run.
pub(crate) struct EngineCtx<'a> {
    /// The job.
    pub job: &'a FileJob,
    /// The test file.
    pub path: &'a Path,
    /// Its size.
    pub file_bytes: u64,
    /// Blocks of `bs` in it.
    pub blocks: u64,
    /// Percent of writes.
    pub write_pct: u64,
    /// The CPU the submitting thread runs on, if pinned.
    pub pin: Option<usize>,
    /// Every CPU the process may use (for threads that must not stay pinned).
    pub allowed: &'a [usize],
    /// Where the file lives.
    pub fs: &'a FsInfo,
}

impl EngineCtx<'_> {
    /// Opens the test file for this job (std, blocking).
    pub(crate) fn open(&self) -> io::Result<File> {
        testfile::open(self.path, self.job.rw != Rw::Read, self.job.direct)
    }

    /// The random stream number `stream` of this job.
    pub(crate) fn picker(&self, stream: u64) -> Picker {
        Picker::new(stream, self.blocks, self.job.bs, self.write_pct)
    }
}

/// What running an engine gave.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// It ran.
    Ran(Box<Measured>),
    /// It cannot run here, for this reason.
    Skipped(String),
}
