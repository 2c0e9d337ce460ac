//! The test file: created (stamped, with a progress bar) or reused when it has the right size
//! and its content check passes; opened for the engines (O_DIRECT refused on memory-backed file
//! systems, and probed with one read); warmed into the page cache for buffered runs.

use crate::machine::fs as fsinfo;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::load::file::content::{self, Rng, SECTOR};
use crate::machine::fs::FsInfo;
use crate::measure::latency::round3;
use crate::output::Out;

/// Chunk of sequential creation and warming.
const CHUNK: usize = 1 << 20;
/// Sectors read back (whole, filler included) to accept an existing file, besides its first
/// and last ones.
const CHECK_SECTORS: u64 = 64;

/// The test file, ready for the engines.
#[derive(Debug)]
pub(crate) struct TestFile {
    /// Its path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Where it lives.
    pub fs: FsInfo,
    /// How it came to be: "created" or "reused (...)".
    pub origin: String,
}

/// `hoop-file-<size>.dat` in `dir`.
pub(crate) fn path_for(dir: &Path, size: u64) -> PathBuf {
    dir.join(format!("hoop-file-{size}.dat"))
}

/// Creates `dir` if needed, checks that the job can run there (O_DIRECT on a memory-backed
/// file system is refused by name), and creates or reuses the test file.
pub(crate) fn prepare(dir: &Path, size: u64, direct: bool, out: &Out) -> io::Result<TestFile> {
    let existed = dir.exists();
    std::fs::create_dir_all(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    let fs = fsinfo::fs_info(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot tell the file system of {}: {e}", dir.display()),
        )
    })?;
    if direct && fs.memory_backed() {
        if !existed {
            // Made just now, for nothing: leave no trace (only if still empty).
            let _ = std::fs::remove_dir(dir);
        }
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "--direct: {} is on {}, a memory-backed file system: O_DIRECT there does not \
                 bypass any cache nor reach a device (and older kernels refuse it with EINVAL); \
                 use --dir on a disk-backed file system (ext4, xfs, btrfs), or drop --direct",
                dir.display(),
                fs.fs_type
            ),
        ));
    }
    let path = path_for(dir, size);
    let origin = match check_existing(&path, size) {
        Ok(sectors) => format!("reused: content check passed on {sectors} sectors"),
        Err(why) => {
            let (verb, why) = match why {
                None => ("created", String::new()),
                Some(w) => ("recreated", format!(" ({w})")),
            };
            create(&path, size, out)?;
            format!("{verb}{why}")
        }
    };
    Ok(TestFile {
        path,
        size,
        fs,
        origin,
    })
}

/// Checks an existing file: its size, then the full content of its first, last and
/// `CHECK_SECTORS` random sectors. `Ok(sectors checked)`; `Err(None)` when there is no file,
/// `Err(Some(why))` when it cannot be used.
fn check_existing(path: &Path, size: u64) -> Result<u64, Option<String>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(None),
        Err(e) => return Err(Some(format!("cannot open it: {e}"))),
    };
    let len = f
        .metadata()
        .map_err(|e| Some(format!("cannot stat it: {e}")))?
        .len();
    if len != size {
        return Err(Some(format!("{len} bytes, not {size}")));
    }
    let sectors = size / SECTOR as u64;
    let mut rng = Rng::new(size);
    let mut picks = vec![0, sectors - 1];
    picks.extend((0..CHECK_SECTORS).map(|_| rng.below(sectors)));
    let mut buf = [0u8; SECTOR];
    for &s in &picks {
        let off = s * SECTOR as u64;
        f.read_exact_at(&mut buf, off)
            .map_err(|e| Some(format!("cannot read it: {e}")))?;
        if !content::verify_full(&buf, off) {
            return Err(Some(format!("content check failed at byte {off}")));
        }
    }
    Ok(picks.len() as u64)
}

/// Writes the stamped content from start to end (then `fdatasync`), with a progress bar.
fn create(path: &Path, size: u64, out: &Out) -> io::Result<()> {
    let what = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("cannot create the test file {}: {e}", path.display()),
        )
    };
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(what)?;
    let mut buf = vec![0u8; CHUNK];
    out.with_bytes_bar(size, "creating the test file", |bar| {
        let mut off = 0u64;
        while off < size {
            let n = (size - off).min(CHUNK as u64) as usize;
            content::stamp(&mut buf[..n], off);
            f.write_all_at(&buf[..n], off)?;
            off += n as u64;
            bar.set_position(off);
        }
        f.sync_data()
    })
    .map_err(|e| {
        // Half a file would pass the size check of the next run only by luck; remove it.
        let _ = std::fs::remove_file(path);
        what(e)
    })
}

/// Opens the test file for an engine: read-only for randread, read-write otherwise; O_DIRECT
/// with `direct`.
pub(crate) fn open(path: &Path, write: bool, direct: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(write);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display())))
}

/// One aligned O_DIRECT read of `bs` bytes at 0, to turn the kernel's EINVAL into a clear
/// message before any engine runs.
pub(crate) fn probe_direct(tf: &TestFile, bs: usize) -> io::Result<()> {
    let f = open(&tf.path, false, true).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("--direct: {} refuses O_DIRECT: {e}", tf.fs.fs_type),
        )
    })?;
    let mut buf = content::aligned(bs)?;
    match f.read_at(buf.as_mut_slice_full(), 0) {
        Ok(n) if n == bs && content::verify(buf.as_slice_full(), 0) => Ok(()),
        Ok(n) => Err(io::Error::other(format!(
            "--direct: a probe read of {bs} bytes at 0 returned {n} bytes{}",
            if n == bs {
                " that fail the content check"
            } else {
                ""
            }
        ))),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let lbs = tf
                .fs
                .device
                .as_ref()
                .and_then(|d| d.logical_block)
                .map_or(String::new(), |b| {
                    format!(" (the device's logical block size is {b} bytes)")
                });
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "--direct: {} refused an O_DIRECT read of {bs} bytes at offset 0 with EINVAL: \
                     the block size must be a multiple of the device's logical block size{lbs}, \
                     and the file system must support O_DIRECT",
                    tf.fs.fs_type
                ),
            ))
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("--direct: probe read failed: {e}"),
        )),
    }
}

/// Reads the whole file once (buffered) so that buffered engines find it in the page cache;
/// returns the resident percentage afterwards.
pub(crate) fn warm(tf: &TestFile, out: &Out) -> io::Result<Option<f64>> {
    let f = open(&tf.path, false, false)?;
    let mut buf = vec![0u8; CHUNK];
    out.with_bytes_bar(
        tf.size,
        "reading the test file into the page cache",
        |bar| {
            let mut off = 0u64;
            while off < tf.size {
                let n = f.read_at(&mut buf, off)?;
                if n == 0 {
                    break;
                }
                off += n as u64;
                bar.set_position(off);
            }
            Ok::<_, io::Error>(())
        },
    )?;
    Ok(fsinfo::cached_pct(&f, tf.size).map(round3))
}

/// The resident percentage of the test file now.
pub(crate) fn cached_pct(tf: &TestFile) -> Option<f64> {
    let f = File::open(&tf.path).ok()?;
    fsinfo::cached_pct(&f, tf.size).map(round3)
}
