//! The job of `hoop bench file` and its engines by name: what the flags ask for, checked
//! before the test file is made.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::plan::check::invalid;
use crate::plan::size::fmt_bytes;
use crate::plan::size::SECTOR;

/// Largest `--qd`.
pub const MAX_QD: usize = 4096;
/// Largest `--bs`: 64 MiB.
pub const MAX_BS: u64 = 64 << 20;
/// Largest `--size`: 16 TiB.
pub const MAX_SIZE: u64 = 16 << 40;

/// Most depths one sweep takes.
pub const MAX_DEPTHS: usize = 16;

/// Parses `--qd`: one depth, or several separated by commas (sorted, duplicates dropped).
pub fn parse_depths(s: &str) -> io::Result<Vec<usize>> {
    let mut depths = Vec::new();
    for part in s.split(',').map(str::trim) {
        let qd: usize = part.parse().map_err(|_| {
            invalid(format!(
                "--qd must be a whole number or a comma-separated list of them, e.g. 32 or \
                 1,4,16,32,128 (got {s:?})"
            ))
        })?;
        if !depths.contains(&qd) {
            depths.push(qd);
        }
    }
    if depths.len() > MAX_DEPTHS {
        return Err(invalid(format!(
            "--qd takes at most {MAX_DEPTHS} depths (got {})",
            depths.len()
        )));
    }
    depths.sort_unstable();
    Ok(depths)
}

/// The random I/O job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rw {
    /// Random reads.
    Read,
    /// Random writes.
    Write,
    /// Random reads and writes, 50/50.
    Mixed,
}

impl Rw {
    /// The name, as fio says it.
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "randread",
            Rw::Write => "randwrite",
            Rw::Mixed => "randrw",
        }
    }

    /// Parses `--rw`.
    pub fn parse(s: &str) -> io::Result<Rw> {
        match s {
            "randread" => Ok(Rw::Read),
            "randwrite" => Ok(Rw::Write),
            "randrw" => Ok(Rw::Mixed),
            _ => Err(invalid(format!(
                "--rw must be randread, randwrite or randrw (got {s:?})"
            ))),
        }
    }

    /// Percent of writes.
    pub(crate) fn write_pct(self) -> u64 {
        match self {
            Rw::Read => 0,
            Rw::Write => 100,
            Rw::Mixed => 50,
        }
    }
}

/// One `hoop bench file` job.
#[derive(Debug, Clone)]
pub struct FileJob {
    /// Directory of the test file.
    pub dir: PathBuf,
    /// Test file size in bytes.
    pub size: u64,
    /// Block size.
    pub bs: usize,
    /// Queue depth.
    pub qd: usize,
    /// Seconds per engine.
    pub secs: f64,
    /// O_DIRECT.
    pub direct: bool,
    /// The job.
    pub rw: Rw,
}

impl FileJob {
    /// Checks the numbers.
    pub fn check(&self) -> io::Result<()> {
        crate::plan::check::check_secs("--secs", self.secs)?;
        if self.qd == 0 || self.qd > MAX_QD {
            return Err(invalid(format!(
                "--qd must be between 1 and {MAX_QD} (got {})",
                self.qd
            )));
        }
        let bs = self.bs as u64;
        if bs == 0 || !bs.is_multiple_of(SECTOR as u64) {
            return Err(invalid(format!(
                "--bs must be a positive multiple of {SECTOR} bytes (got {bs})"
            )));
        }
        if bs > MAX_BS {
            return Err(invalid(format!(
                "--bs must be at most {} (got {bs})",
                fmt_bytes(MAX_BS)
            )));
        }
        if !self.size.is_multiple_of(SECTOR as u64) || self.size == 0 {
            return Err(invalid(format!(
                "--size must be a positive multiple of {SECTOR} bytes (got {})",
                self.size
            )));
        }
        if self.size > MAX_SIZE {
            return Err(invalid(format!(
                "--size must be at most {} (got {})",
                fmt_bytes(MAX_SIZE),
                self.size
            )));
        }
        if bs > self.size {
            return Err(invalid(format!(
                "--bs ({bs}) must not exceed --size ({})",
                self.size
            )));
        }
        Ok(())
    }

    /// Seconds per engine as a duration.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.secs)
    }
}

/// What `hoop bench file` runs: the job at each queue depth, through which engines, and where
/// the chart of several depths goes.
#[derive(Debug, Clone)]
pub struct FilePlan {
    /// The job (its `qd` is the first depth).
    pub job: FileJob,
    /// The queue depths, ascending; several make a sweep.
    pub depths: Vec<usize>,
    /// The engines, in the order given.
    pub engines: Vec<Engine>,
    /// With several depths: the directory of `file_qd.svg` [default: `target/hoop-report`].
    pub out: Option<PathBuf>,
}

/// Where the test files live unless `--dir` says: `target/hoop-bench-file` next to the binary.
pub fn default_dir() -> PathBuf {
    crate::machine::target_dir().join("hoop-bench-file")
}

/// An engine of `hoop bench file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// pread/pwrite loop, one thread.
    Sync,
    /// POSIX-AIO-like thread pool.
    Threadpool,
    /// The kernel's AIO by raw syscalls.
    LinuxAio,
    /// hoop, plain reads and writes.
    Uring,
    /// hoop, registered buffers.
    UringFixed,
    /// hoop, registered buffers, SQPOLL.
    UringSqpoll,
    /// hoop, registered buffers, IOPOLL.
    UringIopoll,
    /// The io-uring crate in a plain loop: the kernel's ceiling.
    RawUring,
    /// tokio::fs on a multi-thread tokio runtime (O_DIRECT: spawn_blocking + pread).
    TokioFs,
    /// hoop::shared::File from a multi-thread tokio runtime.
    Shared,
    /// fio's io_uring engine.
    Fio,
    /// fio's io_uring engine with fixed buffers and registered files.
    FioFixed,
    /// fio's psync engine.
    FioPsync,
    /// fio's libaio engine.
    FioLibaio,
    /// monoio's io_uring driver (`monoio::fs::File::read_at`), through `hoop-peer`.
    Monoio,
    /// compio's io_uring driver (`compio::fs::File::read_at`), through `hoop-peer`.
    Compio,
    /// tokio-uring (`tokio_uring::fs::File::read_at`), through `hoop-peer`.
    TokioUring,
    /// glommio (`DmaFile::read_at_aligned`, `BufferedFile::read_at`), through `hoop-peer`.
    Glommio,
    /// tokio's own io_uring file support (buffered only), through `hoop-peer`.
    TokioIoUring,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 19] = [
        Engine::Sync,
        Engine::Threadpool,
        Engine::LinuxAio,
        Engine::Uring,
        Engine::UringFixed,
        Engine::UringSqpoll,
        Engine::UringIopoll,
        Engine::RawUring,
        Engine::TokioFs,
        Engine::Shared,
        Engine::Fio,
        Engine::FioFixed,
        Engine::FioPsync,
        Engine::FioLibaio,
        Engine::Monoio,
        Engine::Compio,
        Engine::TokioUring,
        Engine::Glommio,
        Engine::TokioIoUring,
    ];

    /// The peers: other runtimes' io_uring files, each on its own runtime in the `hoop-peer`
    /// binary (`peers/`, built on demand).
    pub const PEERS: [Engine; 5] = [
        Engine::Monoio,
        Engine::Compio,
        Engine::TokioUring,
        Engine::Glommio,
        Engine::TokioIoUring,
    ];

    /// The engines run when `--engines` is not given: all but fio's psync and libaio, which
    /// run on request.
    pub fn defaults() -> Vec<Engine> {
        Engine::ALL
            .into_iter()
            .filter(|e| !matches!(e, Engine::FioPsync | Engine::FioLibaio))
            .collect()
    }

    /// Whether this engine keeps one I/O in flight whatever the depth (sync, fio-psync).
    pub fn depth_one_by_nature(self) -> bool {
        matches!(self, Engine::Sync | Engine::FioPsync)
    }

    /// The engine named `name`, as `--engines` and the JSON say it.
    pub fn by_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The name, as `--engines` and the JSON say it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sync => "sync",
            Engine::Threadpool => "threadpool",
            Engine::LinuxAio => "linux-aio",
            Engine::Uring => "uring",
            Engine::UringFixed => "uring-fixed",
            Engine::UringSqpoll => "uring-sqpoll",
            Engine::UringIopoll => "uring-iopoll",
            Engine::RawUring => "raw-io-uring",
            Engine::TokioFs => "tokio-fs",
            Engine::Shared => "shared",
            Engine::Fio => "fio",
            Engine::FioFixed => "fio-fixed",
            Engine::FioPsync => "fio-psync",
            Engine::FioLibaio => "fio-libaio",
            Engine::Monoio => "monoio",
            Engine::Compio => "compio",
            Engine::TokioUring => "tokio-uring",
            Engine::Glommio => "glommio",
            Engine::TokioIoUring => "tokio-io-uring",
        }
    }

    /// Whether this one runs on a multi-thread tokio runtime.
    pub fn on_tokio(self) -> bool {
        matches!(self, Engine::TokioFs | Engine::Shared)
    }

    /// Whether `hoop-peer` runs this one.
    pub fn is_peer(self) -> bool {
        Engine::PEERS.contains(&self)
    }

    /// Whether fio runs this one.
    pub fn is_fio(self) -> bool {
        matches!(
            self,
            Engine::Fio | Engine::FioFixed | Engine::FioPsync | Engine::FioLibaio
        )
    }
}

/// Parses `--engines` (duplicates dropped, order kept).
pub fn parse_engines(list: &[String]) -> io::Result<Vec<Engine>> {
    let mut engines = Vec::new();
    for name in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e = Engine::by_name(name).ok_or_else(|| {
            let known: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
            invalid(format!(
                "--engines: unknown engine {name:?}; known: {}",
                known.join(", ")
            ))
        })?;
        if !engines.contains(&e) {
            engines.push(e);
        }
    }
    if engines.is_empty() {
        return Err(invalid("--engines: no engine given"));
    }
    Ok(engines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_reject_unknown_names() {
        let l = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            parse_engines(&l("sync,uring,sync")).unwrap(),
            vec![Engine::Sync, Engine::Uring]
        );
        let e = parse_engines(&l("sync,nosuch")).unwrap_err().to_string();
        assert!(e.contains("nosuch") && e.contains("uring-fixed"), "{e}");
        for e in Engine::ALL {
            assert_eq!(parse_engines(&l(e.name())).unwrap(), vec![e]);
        }
    }

    #[test]
    fn depth_lists_parse() {
        assert_eq!(parse_depths("32").unwrap(), vec![32]);
        assert_eq!(
            parse_depths("128, 1,4,16,32,4").unwrap(),
            vec![1, 4, 16, 32, 128]
        );
        for bad in ["", "1,,4", "x", "1;4", "-1"] {
            assert!(parse_depths(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn jobs_are_checked() {
        let job = FileJob {
            dir: PathBuf::from("."),
            size: 8 << 20,
            bs: 4096,
            qd: 32,
            secs: 1.0,
            direct: false,
            rw: Rw::Read,
        };
        assert!(job.check().is_ok());
        for bad in [
            FileJob {
                bs: 100,
                ..job.clone()
            },
            FileJob {
                bs: 0,
                ..job.clone()
            },
            FileJob {
                qd: 0,
                ..job.clone()
            },
            FileJob {
                size: 1000,
                ..job.clone()
            },
            FileJob {
                bs: 16 << 20,
                ..job.clone()
            },
            FileJob {
                secs: 0.0,
                ..job.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
