//! The flags of `hoop bench file`, turned into the library's file plan.

use std::io;
use std::path::PathBuf;

use hoop_bench::plan::file::{
    default_dir, parse_depths, parse_engines, Engine, FileJob, FilePlan, Rw,
};
use hoop_bench::plan::invalid;
use hoop_bench::plan::size::parse_size;

/// The exit codes, as `-h` says them.
const EXIT_CODES: &str = "Exit status: 0 when every engine that ran completed with no error and \
at least one counted I/O (skipped engines do not fail the run); 1 on bad arguments, when the \
test file cannot be made or O_DIRECT is refused, or when an engine failed or counted errors \
(its result is printed all the same).";

/// Arguments of `hoop bench file`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct FileArgs {
    /// Directory of the test file [default: target/hoop-bench-file next to the binary].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Size of the test file: bytes, or with a k/m/g/t suffix (powers of 1024).
    #[arg(long, value_name = "SIZE", default_value = "2G")]
    pub size: String,
    /// Block size of every I/O: a multiple of 512 bytes, k/m suffixes allowed.
    #[arg(long, value_name = "BS", default_value = "4k")]
    pub bs: String,
    /// I/Os in flight per engine (sync and fio-psync: 1 by nature); a comma-separated list
    /// (e.g. 1,4,16,32,128) runs every engine at every depth and draws file_qd.svg (IOPS
    /// against depth, one line per engine).
    #[arg(long, value_name = "QD", default_value = "32")]
    pub qd: String,
    /// Seconds per engine (issuing stops then; what is in flight is drained).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub secs: f64,
    /// O_DIRECT: bypass the page cache (without it: buffered I/O on a hot page cache).
    #[arg(long)]
    pub direct: bool,
    /// The job: randread, randwrite or randrw (50/50).
    #[arg(long, value_name = "RW", default_value = "randread")]
    pub rw: String,
    /// Engines, comma-separated, run one after another [default: sync, threadpool, linux-aio,
    /// uring, uring-fixed, uring-sqpoll, uring-iopoll, raw-io-uring, tokio-fs, shared, fio,
    /// fio-fixed, monoio, compio, tokio-uring, glommio, tokio-io-uring; also fio-psync,
    /// fio-libaio]. The peers (monoio, compio, tokio-uring, glommio, tokio-io-uring: tokio's own
    /// io_uring files, buffered only) run in the hoop-peer binary of peers/ (glommio: in
    /// hoop-peer-glommio), built on demand (HOOP_PEER_BIN: a built one), QD tasks on one thread
    /// of their own runtime (tokio-io-uring: on a multi-thread tokio runtime, one worker per
    /// allowed CPU, as tokio-fs and shared), reads checked alike; one that cannot be built or run here is
    /// skipped with a line saying why. raw-io-uring: the io-uring crate in a plain
    /// loop (no runtime), the kernel's own ceiling for the job. tokio-fs: tokio::fs::File on a multi-thread tokio runtime, QD
    /// tasks, seek + read_exact per read; with --direct (which tokio::fs::File cannot do: its
    /// buffer is not aligned) tokio::task::spawn_blocking + pread into an aligned buffer.
    /// shared: hoop::shared::File read_at from QD tasks on the same kind of runtime.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub engines: Option<Vec<String>>,
    /// With several --qd: the directory file_qd.svg is written to [default:
    /// target/hoop-report next to the binary].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl FileArgs {
    /// The plan these flags ask for (its job checked at every depth when it runs).
    pub fn plan(self) -> io::Result<FilePlan> {
        let depths = parse_depths(&self.qd)?;
        let job = FileJob {
            dir: self.dir.unwrap_or_else(default_dir),
            size: parse_size("--size", &self.size)?,
            bs: usize::try_from(parse_size("--bs", &self.bs)?)
                .map_err(|_| invalid("--bs is too large"))?,
            qd: depths[0],
            secs: self.secs,
            direct: self.direct,
            rw: Rw::parse(&self.rw)?,
        };
        let engines = match &self.engines {
            Some(list) => parse_engines(list)?,
            None => Engine::defaults(),
        };
        Ok(FilePlan {
            job,
            depths,
            engines,
            out: self.out,
        })
    }
}
