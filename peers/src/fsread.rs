//! `hoop-peer fsread`: whole-file reads, one after another from ONE task, through a peer's
//! whole-file read, for `hoop bench fsread`'s latency figures.
//!
//! * `tokio-io-uring`: `tokio::fs::read` on a tokio runtime built with `enable_io_uring`
//!   (tokio 1.48+, `--cfg tokio_unstable`, feature `io-uring`): open, statx and reads through
//!   tokio's io_uring driver. `--workers N`: a multi-thread runtime with N workers, every
//!   thread unpinned (what `hoop bench fsread` runs, as its `shared` engine runs); without it a
//!   current-thread runtime.
//!
//! `--warmup` untimed reads first, then up to `--reads` timed ones until `--secs` are up; each
//! read is timed from the call to the bytes in hand, and counts only if it returned `--size`
//! bytes that are the file's content, every byte of it (`pattern::verify_full`: the test file
//! holds hoop's stamped content). One JSON line on stdout.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::pattern::{self, SECTOR};
use crate::{invalid, json_str, q_us, Flags, Tally, Usage};

/// The whole-file read engines.
pub(crate) const FSREAD_ENGINES: [&str; 1] = ["tokio-io-uring"];

pub(crate) fn run(f: &Flags) -> io::Result<()> {
    let engine = f.engine(&FSREAD_ENGINES)?;
    let path = PathBuf::from(f.get("path").ok_or_else(|| invalid("--path is required"))?);
    let size: usize = f.num("size", 0)?;
    let reads: u64 = f.num("reads", 200)?;
    let warmup: u64 = f.num("warmup", 20)?;
    let secs: f64 = f.num("secs", 5.0)?;
    let workers = crate::workers_flag(f)?;
    if size == 0 || !size.is_multiple_of(SECTOR) || reads == 0 || !secs.is_finite() || secs <= 0.0 {
        return Err(invalid(
            "--size must be a positive multiple of 512 (the test file's bytes), --reads > 0, \
             --secs > 0",
        ));
    }
    let allowed = crate::allowed_cpus();
    let rt = crate::file::tokio_runtime(workers, allowed)?;
    let u0 = Usage::now();
    let start = Instant::now();
    let task = {
        let path = path.clone();
        async move {
            let mut t = Tally::new();
            let check = |t: &mut Tally, r: io::Result<Vec<u8>>, lat: Option<Duration>| {
                let (res, ok) = match r {
                    Ok(v) => (Ok(v.len()), v.len() == size && pattern::verify_full(&v, 0)),
                    Err(e) => (Err(e), false),
                };
                match lat {
                    Some(lat) => t.complete(res, size, 0, || ok, lat),
                    None if !ok => t.error(format!(
                        "a warm-up read of {} failed or did not verify",
                        path.display()
                    )),
                    None => {}
                }
            };
            for _ in 0..warmup {
                let r = tokio::fs::read(&path).await;
                check(&mut t, r, None);
            }
            let deadline = Instant::now() + Duration::from_secs_f64(secs);
            while t.reads + t.errors < reads && Instant::now() < deadline {
                let t0 = Instant::now();
                let r = tokio::fs::read(&path).await;
                let lat = t0.elapsed();
                check(&mut t, r, Some(lat));
            }
            t
        }
    };
    // From a task of the runtime (a worker's, on a multi-thread one), not from block_on's thread.
    let t = rt
        .block_on(async { tokio::spawn(task).await })
        .map_err(|e| io::Error::other(format!("the reading task failed: {e}")))?;
    let wall = start.elapsed().as_secs_f64();
    let usage = Usage::now().since(&u0);
    let h = &t.hist;
    let opt = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.3}"));
    println!(
        "{{\"bench\":\"peer-fsread\",\"engine\":{},\"file_bytes\":{size},\"reads\":{},\
         \"warmup\":{warmup},\"errors\":{},\"first_error\":{},\"bytes_verified\":{},\
         \"mean_us\":{},\"p50_us\":{},\"p99_us\":{},\"max_us\":{},\"secs\":{wall:.6},\
         \"cpu_user_s\":{:.6},\"cpu_sys_s\":{:.6},\"setup\":{}}}",
        json_str(&engine),
        t.reads,
        t.errors,
        t.first_error
            .as_deref()
            .map_or("null".to_string(), json_str),
        t.reads * size as u64,
        opt((!h.is_empty()).then(|| h.mean() / 1000.0)),
        q_us(h, 0.5),
        q_us(h, 0.99),
        opt((!h.is_empty()).then(|| h.max() as f64 / 1000.0)),
        usage.user,
        usage.sys,
        json_str(&format!(
            "tokio 1.x {}, enable_io_uring (tokio_unstable); tokio::fs::read from one task",
            crate::file::runtime_name(workers)
        )),
    );
    Ok(())
}
