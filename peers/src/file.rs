//! `hoop-peer file`: random block reads through one peer runtime, QD tasks on one thread (or,
//! for `tokio-io-uring` with `--workers N`, on a multi-thread tokio runtime).
//!
//! * `monoio`: `monoio::fs::File::read_at` on monoio's io_uring driver.
//! * `compio`: `compio::fs::File::read_at` (`AsyncReadAt`) on compio's io_uring driver.
//! * `tokio-uring`: `tokio_uring::fs::File::read_at`.
//! * `glommio`: `DmaFile::read_at_aligned` (O_DIRECT; glommio's own DMA buffers) or
//!   `BufferedFile::read_at` (buffered), on a `LocalExecutor`.
//! * `tokio-io-uring`: tokio's own io_uring file support (tokio 1.48+, `--cfg tokio_unstable`,
//!   feature `io-uring`, `Builder::enable_io_uring`) on a current-thread runtime, or with
//!   `--workers N` a multi-thread one (N workers, unpinned: what hoop runs, like for like with
//!   its `shared` engine; `--cpu` then pins nothing but the thread that waits): one
//!   `tokio::fs::File` per task, `seek` + `read_exact` per read (tokio has no positional read;
//!   the read goes through io_uring, the seek through the blocking pool). Buffered only:
//!   `tokio::fs::File` reads into its own unaligned buffer, so O_DIRECT reads fail with EINVAL.
//!
//! Every engine's tasks use the peer's own owned-buffer API with a page-aligned buffer per task
//! (glommio: the buffer its read returns), and every read is checked (`pattern::verify`).

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::buf::Aligned;
use crate::pattern::{Picker, SECTOR};
use crate::{invalid, json_str, q_us, read_loop, Block, Flags, Tally, Usage, FILE_ENGINES};

/// The job, from the flags.
struct Job {
    engine: String,
    path: PathBuf,
    bs: usize,
    qd: usize,
    secs: f64,
    direct: bool,
    blocks: u64,
    cpu: Option<usize>,
    /// tokio-io-uring: workers of a multi-thread runtime (none: current-thread).
    workers: Option<usize>,
}

/// What a run gives back besides the counts: the runtime's setup, for the note.
struct Ran {
    total: Tally,
    secs: f64,
    usage: Usage,
    setup: String,
}

pub(crate) fn run(f: &Flags) -> io::Result<()> {
    let engine = f.engine(&FILE_ENGINES)?;
    let path = PathBuf::from(f.get("path").ok_or_else(|| invalid("--path is required"))?);
    let size: u64 = f.num("size", 0)?;
    let bs: usize = f.num("bs", 4096)?;
    let qd: usize = f.num("qd", 32)?;
    let secs: f64 = f.num("secs", 3.0)?;
    let direct = f.has("direct");
    let cpu = f
        .get("cpu")
        .map(str::parse)
        .transpose()
        .map_err(|_| invalid("--cpu: not a number"))?;
    if bs == 0
        || !bs.is_multiple_of(SECTOR)
        || qd == 0
        || qd > 4096
        || !secs.is_finite()
        || secs <= 0.0
    {
        return Err(invalid(
            "--bs must be a positive multiple of 512, --qd 1..=4096, --secs > 0",
        ));
    }
    if size < bs as u64 {
        return Err(invalid(
            "--size (the test file's bytes) must be at least --bs",
        ));
    }
    if direct && engine == "tokio-io-uring" {
        return Err(invalid(
            "tokio-io-uring cannot do O_DIRECT: tokio::fs::File reads into its own buffer, which \
             is not aligned (buffered only)",
        ));
    }
    let workers = crate::workers_flag(f)?;
    if workers.is_some() && engine != "tokio-io-uring" {
        return Err(invalid("--workers is for tokio-io-uring only"));
    }
    let job = Job {
        engine,
        path,
        bs,
        qd,
        secs,
        direct,
        blocks: size / bs as u64,
        cpu,
        workers,
    };
    // Every thread the engine starts from here on may use every allowed CPU; only the runtime's
    // own thread is pinned (as hoop's engines pin their submitting thread).
    let allowed = crate::allowed_cpus();
    let ran = std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(cpu) = job.cpu {
                crate::pin_to(cpu)?;
            }
            match job.engine.as_str() {
                "monoio" => run_monoio(&job),
                "compio" => run_compio(&job),
                "tokio-uring" => run_tokio_uring(&job),
                #[cfg(feature = "glommio")]
                "glommio" => run_glommio(&job),
                #[cfg(not(feature = "glommio"))]
                "glommio" => Err(invalid(
                    "this hoop-peer was built without glommio (its binary with glommio: cargo \
                     build --release --features glommio --bin hoop-peer-glommio)",
                )),
                "tokio-io-uring" => run_tokio_io_uring(&job, allowed.clone()),
                other => Err(invalid(format!("unknown engine {other:?}"))),
            }
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the engine's thread panicked")))
    })?;
    let t = &ran.total;
    let h = &t.hist;
    let mean_us = if h.is_empty() {
        "null".to_string()
    } else {
        format!("{:.3}", h.mean() / 1000.0)
    };
    println!(
        "{{\"bench\":\"peer-file\",\"engine\":{},\"direct\":{},\"bs\":{},\"qd\":{},\"secs\":{:.6},\
         \"reads\":{},\"errors\":{},\"first_error\":{},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\
         \"max_us\":{},\"mean_us\":{},\"cpu_user_s\":{:.6},\"cpu_sys_s\":{:.6},\"ctx_voluntary\":{},\
         \"ctx_involuntary\":{},\"setup\":{}}}",
        json_str(&job.engine),
        job.direct,
        job.bs,
        job.qd,
        ran.secs,
        t.reads,
        t.errors,
        t.first_error.as_deref().map_or("null".to_string(), json_str),
        q_us(h, 0.5),
        q_us(h, 0.99),
        q_us(h, 0.999),
        if h.is_empty() {
            "null".to_string()
        } else {
            format!("{:.3}", h.max() as f64 / 1000.0)
        },
        mean_us,
        ran.usage.user,
        ran.usage.sys,
        ran.usage.vol,
        ran.usage.invol,
        json_str(&ran.setup),
    );
    Ok(())
}

impl Job {
    /// The test file, opened with std (O_DIRECT with `--direct`), read-only.
    fn open_std(&self) -> io::Result<std::fs::File> {
        let mut o = OpenOptions::new();
        o.read(true);
        if self.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&self.path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }

    fn picker(&self, stream: u64) -> Picker {
        Picker::new(stream, self.blocks, self.bs, 0)
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.secs)
    }

    /// Buffers for every task, made before the clock starts.
    fn buffers(&self) -> io::Result<Vec<Aligned>> {
        (0..self.qd).map(|_| Aligned::new(self.bs)).collect()
    }
}

/// The clock around a run: wall time and the process's usage.
struct Clock {
    start: Instant,
    u0: Usage,
}

impl Clock {
    fn start() -> Clock {
        Clock {
            u0: Usage::now(),
            start: Instant::now(),
        }
    }

    fn stop(self, total: Tally, setup: String) -> Ran {
        Ran {
            secs: self.start.elapsed().as_secs_f64(),
            usage: Usage::now().since(&self.u0),
            total,
            setup,
        }
    }
}

fn run_monoio(job: &Job) -> io::Result<Ran> {
    let entries = (job.qd as u32).next_power_of_two().max(1024);
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .with_entries(entries)
        .build()
        .map_err(|e| io::Error::new(e.kind(), format!("monoio's io_uring runtime: {e}")))?;
    let std_file = job.open_std()?;
    let bufs = job.buffers()?;
    rt.block_on(async {
        let file = Rc::new(monoio::fs::File::from_std(std_file)?);
        let clock = Clock::start();
        let deadline = clock.start + job.duration();
        let handles: Vec<_> = bufs
            .into_iter()
            .enumerate()
            .map(|(i, buf)| {
                let file = file.clone();
                let read = move |b: Aligned, off: u64| {
                    let file = file.clone();
                    async move { file.read_at(b, off).await }
                };
                monoio::spawn(read_loop(read, buf, job.bs, job.picker(i as u64), deadline))
            })
            .collect();
        let mut total = Tally::new();
        for h in handles {
            total.absorb(h.await);
        }
        let ran = clock.stop(
            total,
            format!("monoio 0.2 IoUringDriver, {entries} entries"),
        );
        if let Ok(f) = Rc::try_unwrap(file) {
            let _ = f.close().await;
        }
        Ok(ran)
    })
}

fn run_compio(job: &Job) -> io::Result<Ran> {
    use compio::io::AsyncReadAt;
    let entries = (job.qd as u32).next_power_of_two().max(1024);
    let mut proactor = compio::driver::ProactorBuilder::new();
    proactor.capacity(entries);
    let rt = compio::runtime::RuntimeBuilder::new()
        .with_proactor(proactor)
        .build()
        .map_err(|e| io::Error::new(e.kind(), format!("compio's runtime: {e}")))?;
    let bufs = job.buffers()?;
    rt.block_on(async {
        let mut o = compio::fs::OpenOptions::new();
        o.read(true);
        if job.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let file = Rc::new(o.open(&job.path).await?);
        let clock = Clock::start();
        let deadline = clock.start + job.duration();
        let handles: Vec<_> = bufs
            .into_iter()
            .enumerate()
            .map(|(i, buf)| {
                let file = file.clone();
                let read = move |b: Aligned, off: u64| {
                    let file = file.clone();
                    async move {
                        let compio::BufResult(res, b) = file.read_at(b, off).await;
                        (res, b)
                    }
                };
                compio::runtime::spawn(read_loop(read, buf, job.bs, job.picker(i as u64), deadline))
            })
            .collect();
        let mut total = Tally::new();
        for h in handles {
            match h.await {
                Ok(t) => total.absorb(t),
                Err(_) => total.error("an I/O task panicked".into()),
            }
        }
        let ran = clock.stop(
            total,
            format!("compio 0.19 io_uring driver, {entries} entries"),
        );
        if let Ok(f) = Rc::try_unwrap(file) {
            let _ = f.close().await;
        }
        Ok(ran)
    })
}

fn run_tokio_uring(job: &Job) -> io::Result<Ran> {
    let entries = (job.qd as u32).next_power_of_two().max(256);
    let std_file = job.open_std()?;
    let bufs = job.buffers()?;
    tokio_uring::builder().entries(entries).start(async {
        let file = Rc::new(tokio_uring::fs::File::from_std(std_file));
        let clock = Clock::start();
        let deadline = clock.start + job.duration();
        let handles: Vec<_> = bufs
            .into_iter()
            .enumerate()
            .map(|(i, buf)| {
                let file = file.clone();
                let read = move |b: Aligned, off: u64| {
                    let file = file.clone();
                    async move { file.read_at(b, off).await }
                };
                tokio_uring::spawn(read_loop(read, buf, job.bs, job.picker(i as u64), deadline))
            })
            .collect();
        let mut total = Tally::new();
        for h in handles {
            match h.await {
                Ok(t) => total.absorb(t),
                Err(e) => total.error(format!("an I/O task failed: {e}")),
            }
        }
        let ran = clock.stop(total, format!("tokio-uring 0.5, {entries} entries"));
        if let Ok(f) = Rc::try_unwrap(file) {
            let _ = f.close().await;
        }
        Ok(ran)
    })
}

#[cfg(feature = "glommio")]
/// glommio's read result as the loop's block: the buffer glommio returned (none before a read).
struct GlommioBlock(Option<glommio::io::ReadResult>);

#[cfg(feature = "glommio")]
impl Block for GlommioBlock {
    fn full(&self) -> &[u8] {
        self.0.as_deref().unwrap_or(&[])
    }
    fn reset(&mut self) {
        self.0 = None;
    }
}

#[cfg(feature = "glommio")]
/// The test file as glommio opens it: O_DIRECT (`DmaFile`) or through the page cache.
enum GlommioFile {
    Dma(glommio::io::DmaFile),
    Buffered(glommio::io::BufferedFile),
}

#[cfg(feature = "glommio")]
fn run_glommio(job: &Job) -> io::Result<Ran> {
    // The thread is pinned already (or not, without --cpu): glommio leaves it as it is.
    let ring_depth = job.qd.next_power_of_two().max(128);
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .ring_depth(ring_depth)
        .make()
        .map_err(|e| io::Error::other(format!("glommio's executor: {e}")))?;
    let bs = job.bs;
    ex.run(async move {
        let file = if job.direct {
            GlommioFile::Dma(
                glommio::io::DmaFile::open(&job.path)
                    .await
                    .map_err(io::Error::from)?,
            )
        } else {
            GlommioFile::Buffered(
                glommio::io::BufferedFile::open(&job.path)
                    .await
                    .map_err(io::Error::from)?,
            )
        };
        let file = Rc::new(file);
        let clock = Clock::start();
        let deadline = clock.start + job.duration();
        let handles: Vec<_> = (0..job.qd)
            .map(|i| {
                let file = file.clone();
                let read = move |mut b: GlommioBlock, off: u64| {
                    let file = file.clone();
                    async move {
                        let r = match &*file {
                            GlommioFile::Dma(f) => f.read_at_aligned(off, bs).await,
                            GlommioFile::Buffered(f) => f.read_at(off, bs).await,
                        };
                        match r {
                            Ok(r) => {
                                let n = r.len();
                                b.0 = Some(r);
                                (Ok(n), b)
                            }
                            Err(e) => (Err(io::Error::from(e)), b),
                        }
                    }
                };
                glommio::spawn_local(read_loop(
                    read,
                    GlommioBlock(None),
                    bs,
                    job.picker(i as u64),
                    deadline,
                ))
            })
            .collect();
        let mut total = Tally::new();
        for h in handles {
            total.absorb(h.await);
        }
        let ran = clock.stop(
            total,
            format!(
                "glommio 0.9 LocalExecutor, ring depth {ring_depth}, {}",
                if job.direct {
                    "DmaFile::read_at_aligned (glommio's DMA buffers)"
                } else {
                    "BufferedFile::read_at"
                }
            ),
        );
        if let Ok(f) = Rc::try_unwrap(file) {
            let _ = match f {
                GlommioFile::Dma(f) => f.close().await,
                GlommioFile::Buffered(f) => f.close().await,
            };
        }
        Ok(ran)
    })
}

/// A tokio task's block: its buffer and its own file handle (the position is the handle's).
struct TokioBlock {
    buf: Aligned,
    file: tokio::fs::File,
}

impl Block for TokioBlock {
    fn full(&self) -> &[u8] {
        self.buf.full()
    }
    fn reset(&mut self) {
        self.buf.reset();
    }
}

fn run_tokio_io_uring(job: &Job, allowed: Vec<usize>) -> io::Result<Ran> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let rt = tokio_runtime(job.workers, allowed)?;
    let bufs = job.buffers()?;
    rt.block_on(async {
        // Opened through tokio (with io_uring enabled, the open itself goes through the ring),
        // one handle per task: the file position belongs to the handle.
        let mut files = Vec::with_capacity(job.qd);
        for _ in 0..job.qd {
            files.push(tokio::fs::File::open(&job.path).await?);
        }
        let clock = Clock::start();
        let deadline = clock.start + job.duration();
        let handles: Vec<_> = bufs
            .into_iter()
            .zip(files)
            .enumerate()
            .map(|(i, (buf, file))| {
                let read = |mut b: TokioBlock, off: u64| async move {
                    let r = async {
                        b.file.seek(io::SeekFrom::Start(off)).await?;
                        b.file.read_exact(b.buf.full_mut()).await
                    }
                    .await;
                    let n = b.buf.full().len();
                    (r.map(|_| n), b)
                };
                let block = TokioBlock { buf, file };
                tokio::spawn(read_loop(
                    read,
                    block,
                    job.bs,
                    job.picker(i as u64),
                    deadline,
                ))
            })
            .collect();
        let mut total = Tally::new();
        for h in handles {
            match h.await {
                Ok(t) => total.absorb(t),
                Err(e) => total.error(format!("an I/O task failed: {e}")),
            }
        }
        Ok(clock.stop(
            total,
            format!(
                "tokio 1.x {}, enable_io_uring (tokio_unstable); one tokio::fs::File per task, \
                 seek (blocking pool) + read_exact (io_uring read into tokio's buffer, copied out)",
                runtime_name(job.workers)
            ),
        ))
    })
}

/// tokio's runtime with io_uring: multi-thread with `workers` workers (every thread unpinned:
/// on every CPU in `allowed`), or current-thread on the calling thread (pinned or not, as it
/// is) when `workers` is `None`; the blocking pool's threads on every CPU in `allowed` either
/// way.
pub(crate) fn tokio_runtime(
    workers: Option<usize>,
    allowed: Vec<usize>,
) -> io::Result<tokio::runtime::Runtime> {
    let mut b = match workers {
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n.max(1));
            b
        }
        None => tokio::runtime::Builder::new_current_thread(),
    };
    b.enable_all()
        .enable_io_uring()
        .on_thread_start(move || {
            let _ = crate::set_affinity(&allowed);
        })
        .build()
        .map_err(|e| io::Error::new(e.kind(), format!("tokio's runtime with io_uring: {e}")))
}

/// How [`tokio_runtime`] runs, for the setup line.
pub(crate) fn runtime_name(workers: Option<usize>) -> String {
    match workers {
        Some(n) => format!("multi-thread runtime, {n} workers (unpinned)"),
        None => "current-thread runtime".into(),
    }
}
