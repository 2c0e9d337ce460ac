//! The engines of `hoop bench fsread`: whole-file reads (open, size, read to the end, close)
//! one after another from ONE task of a multi-thread tokio runtime, through
//! `hoop::shared::fs::read` (`shared`), tokio's io_uring `tokio::fs::read` (`tokio-io-uring`, in
//! `hoop-peer`) and `spawn_blocking(std::fs::read)` (`spawn-blocking`); each read timed from the
//! call to the bytes in hand and counted only if every byte is the file's.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::load::file::content;
use crate::plan::fsread::{FsreadPlan, PEER};
use crate::plan::invalid;
use crate::record::fsread::ReadResult;
use crate::target::peers::{f64_of, run_json, str_of, u64_of};

/// Why an engine has no result: skipped (cannot run here) or failed.
pub(crate) enum NoResult {
    /// It cannot run here, for this reason.
    Skip(String),
    /// It failed.
    Fail(io::Error),
}
use NoResult::Skip;

/// `hoop-fsread-<size>.dat` in `dir`, holding hoop's stamped content (made, or reused when it
/// checks out), read once so that it is in the page cache.
pub(crate) fn prepare(dir: &Path, size: u64) -> io::Result<PathBuf> {
    let path = dir.join(format!("hoop-fsread-{size}.dat"));
    let len = usize::try_from(size).map_err(|_| invalid("a size does not fit in memory"))?;
    let good =
        |p: &Path| std::fs::read(p).is_ok_and(|v| v.len() == len && content::verify_full(&v, 0));
    if !good(&path) {
        let mut v = vec![0u8; len];
        content::stamp(&mut v, 0);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &v)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        if !good(&path) {
            return Err(io::Error::other(format!(
                "{}: written, but it does not read back as written",
                path.display()
            )));
        }
    }
    Ok(path)
}

/// Latencies of the timed reads and the errors.
#[derive(Debug, Default)]
struct Tally {
    lat_us: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    /// Counts one read of `size` that gave `r`: timed (`lat`) or a warm-up one.
    fn count(&mut self, r: io::Result<Vec<u8>>, size: usize, lat: Option<Duration>) {
        let bad = match r {
            Ok(v) if v.len() != size => Some(format!("short read: {} of {size} bytes", v.len())),
            Ok(v) if !content::verify_full(&v, 0) => {
                Some("wrong content (a byte differs from the file's)".to_string())
            }
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        match bad {
            Some(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
            None => {
                if let Some(lat) = lat {
                    self.lat_us.push(lat.as_secs_f64() * 1e6);
                }
            }
        }
    }
}

/// Mean, p50, p99 and max of `v` (nearest rank), `None` when empty.
fn stats(v: &mut [f64]) -> [Option<f64>; 4] {
    if v.is_empty() {
        return [None; 4];
    }
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    [
        Some(mean),
        Some(rank(0.5)),
        Some(rank(0.99)),
        v.last().copied(),
    ]
}

/// One whole-file read through `rings` (hoop's shared rings) or, without, through
/// `spawn_blocking(std::fs::read)`.
async fn read_once(rings: Option<&hoop::shared::Rings>, path: &Path) -> io::Result<Vec<u8>> {
    match rings {
        Some(r) => hoop::shared::fs::read(r, path).await,
        None => {
            let p = path.to_path_buf();
            tokio::task::spawn_blocking(move || std::fs::read(p))
                .await
                .map_err(|e| io::Error::other(format!("the blocking read panicked: {e}")))?
        }
    }
}

/// `shared` or `spawn-blocking`, here: like for like with the peer, a multi-thread tokio
/// runtime with one worker per allowed CPU, every thread unpinned, the reads issued from a task
/// of it (not from `block_on`'s thread); `shared` on `Rings::builder()`'s defaults.
pub(crate) fn run_local(
    engine: &'static str,
    path: &Path,
    size: u64,
    plan: &FsreadPlan,
    workers: usize,
) -> io::Result<ReadResult> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .thread_name("hoop-bench-fsread")
        .build()?;
    let rings = if engine == "shared" {
        Some(
            hoop::shared::Rings::builder()
                .build()
                .map_err(|e| io::Error::new(e.kind(), format!("shared rings: {e}")))?,
        )
    } else {
        None
    };
    let len = usize::try_from(size).map_err(|_| invalid("a size does not fit in memory"))?;
    let (reads, warmup) = (plan.reads, plan.warmup);
    let limit = Duration::from_secs_f64(plan.secs);
    let task = {
        let rings = rings.clone();
        let path = path.to_path_buf();
        async move {
            let mut t = Tally::default();
            for _ in 0..warmup {
                t.count(read_once(rings.as_ref(), &path).await, len, None);
            }
            let deadline = Instant::now() + limit;
            while (t.lat_us.len() as u64) + t.errors < reads && Instant::now() < deadline {
                let t0 = Instant::now();
                let r = read_once(rings.as_ref(), &path).await;
                let lat = t0.elapsed();
                t.count(r, len, Some(lat));
            }
            t
        }
    };
    let start = Instant::now();
    // From a task of the runtime (a worker), not from block_on's thread.
    let mut t = rt
        .block_on(async { tokio::spawn(task).await })
        .map_err(|e| io::Error::other(format!("the reading task failed: {e}")))?;
    let secs = start.elapsed().as_secs_f64();
    drop(rt);
    let setup = match &rings {
        Some(r) => {
            let n = r.ring_count();
            let report = r.shutdown();
            let mut s = format!(
                "hoop::shared::fs::read, Rings::builder() defaults ({n} rings); multi-thread \
                 tokio runtime, {workers} workers, unpinned; one task"
            );
            if report.leaked > 0 || report.still_in_flight > 0 {
                let _ = write!(
                    s,
                    "; at shutdown {} ops were still in flight and {} leaked",
                    report.still_in_flight, report.leaked
                );
            }
            s
        }
        None => format!(
            "tokio::task::spawn_blocking(std::fs::read), plain tokio (no io_uring); multi-thread \
             runtime, {workers} workers, unpinned; one task"
        ),
    };
    let n = t.lat_us.len() as u64;
    let [mean_us, p50_us, p99_us, max_us] = stats(&mut t.lat_us);
    Ok(ReadResult {
        bench: "fsread",
        engine,
        file_bytes: size,
        reads: n,
        warmup,
        errors: t.errors,
        first_error: t.first_error,
        bytes_verified: n * size,
        mean_us,
        p50_us,
        p99_us,
        max_us,
        secs,
        workers,
        setup,
    })
}

/// `tokio-io-uring`, through `hoop-peer fsread`.
pub(crate) fn run_peer(
    bin: &Path,
    path: &Path,
    size: u64,
    plan: &FsreadPlan,
    workers: usize,
) -> Result<ReadResult, NoResult> {
    let args: Vec<String> = [
        "fsread",
        "--engine",
        PEER,
        "--path",
        &path.display().to_string(),
        "--size",
        &size.to_string(),
        "--reads",
        &plan.reads.to_string(),
        "--warmup",
        &plan.warmup.to_string(),
        "--secs",
        &plan.secs.to_string(),
        "--workers",
        &workers.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let v = run_json(bin, &args, plan.secs).map_err(|why| Skip(format!("hoop-peer: {why}")))?;
    Ok(peer_result(&v, size, plan.warmup, workers))
}

/// A result from `hoop-peer fsread`'s JSON line.
fn peer_result(v: &serde_json::Value, size: u64, warmup: u64, workers: usize) -> ReadResult {
    let errors = u64_of(v, "errors");
    ReadResult {
        bench: "fsread",
        engine: PEER,
        file_bytes: size,
        reads: u64_of(v, "reads"),
        warmup,
        errors,
        first_error: str_of(v, "first_error")
            .or_else(|| (errors > 0).then(|| "a read failed".to_string())),
        bytes_verified: u64_of(v, "bytes_verified"),
        mean_us: f64_of(v, "mean_us"),
        p50_us: f64_of(v, "p50_us"),
        p99_us: f64_of(v, "p99_us"),
        max_us: f64_of(v, "max_us"),
        secs: f64_of(v, "secs").unwrap_or(0.0),
        workers,
        setup: format!(
            "hoop-peer (child process): {}",
            str_of(v, "setup").unwrap_or_else(|| PEER.to_string())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_nearest_rank() {
        assert_eq!(stats(&mut []), [None; 4]);
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(
            stats(&mut v),
            [Some(50.5), Some(50.0), Some(99.0), Some(100.0)]
        );
        assert_eq!(stats(&mut [7.0]), [Some(7.0); 4]);
    }

    #[test]
    fn a_peer_line_becomes_a_result() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"bench":"peer-fsread","engine":"tokio-io-uring","file_bytes":65536,"reads":10,
            "warmup":2,"errors":0,"first_error":null,"bytes_verified":655360,"mean_us":40.0,
            "p50_us":38.0,"p99_us":90.5,"max_us":120.0,"secs":0.01,"setup":"tokio"}"#,
        )
        .unwrap();
        let p = peer_result(&v, 65536, 2, 2);
        assert!(p.ok());
        assert_eq!(p.bytes_verified, 655_360);
        assert_eq!(p.p99_us, Some(90.5));
        let mut bad = p;
        bad.errors = 1;
        assert!(!bad.ok());
    }

    #[test]
    fn reads_count_only_when_every_byte_is_right() {
        let mut good = vec![0u8; 4096];
        content::stamp(&mut good, 0);
        let mut t = Tally::default();
        t.count(Ok(good.clone()), 4096, Some(Duration::from_micros(5)));
        t.count(Ok(good.clone()), 4096, None);
        assert_eq!((t.lat_us.len(), t.errors), (1, 0));
        t.count(Ok(good[..512].to_vec()), 4096, Some(Duration::ZERO));
        let mut wrong = good;
        wrong[100] ^= 1;
        t.count(Ok(wrong), 4096, Some(Duration::ZERO));
        t.count(Err(io::Error::other("boom")), 4096, None);
        assert_eq!((t.lat_us.len(), t.errors), (1, 3));
        assert!(t.first_error.unwrap().starts_with("short read"));
    }
}
