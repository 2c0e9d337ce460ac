//! `hoop bench count`: a fixed number of no-ops or hot-cache 4 KiB reads through hoop or the
//! raw `io-uring` loop (the `raw-io-uring` engine's, with no clock and no check but the
//! length), and nothing else: what `scripts/instructions` counts instructions of under
//! callgrind.

use std::cell::Cell;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;

use crate::load::file::content::{self, Picker};
use crate::load::file::raw;
use crate::load::nop::{self, NopConfig, Stop};
use crate::plan::invalid;

/// Block size of `--op read`.
const READ_BS: usize = 4096;

/// What `hoop bench count` completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CountOp {
    /// No-ops in batches.
    Nop,
    /// 4 KiB reads of this file (hot in the page cache).
    Read(PathBuf),
    /// `io_uring_enter` calls that pass a bounded wait's arguments and return at once (hoop
    /// only; in the registered wait region where the kernel has one, unless `HOOP_REG_WAIT=0`):
    /// the time per call goes to stderr.
    Wait,
}

/// One `hoop bench count` run: `count` operations, `batch` per batch (no-ops) or in flight
/// (reads), through hoop or through the raw loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountPlan {
    /// The operation.
    pub op: CountOp,
    /// Through hoop (true) or the raw `io-uring` loop (false).
    pub hoop: bool,
    /// Operations to complete.
    pub count: u64,
    /// No-ops per batch, or reads in flight.
    pub batch: usize,
}

impl CountPlan {
    /// The plan of `--op`, `--engine`, `--count`, `--batch` and `--file`, checked in that
    /// order of errors: the numbers, the engine, the operation, the file.
    pub fn new(
        op: &str,
        engine: &str,
        count: u64,
        batch: usize,
        file: Option<PathBuf>,
    ) -> io::Result<CountPlan> {
        if count == 0 || batch == 0 || batch > 4096 {
            return Err(invalid(
                "--count must be at least 1 and --batch between 1 and 4096",
            ));
        }
        let hoop = match engine {
            "hoop" => true,
            "raw" => false,
            other => {
                return Err(invalid(format!(
                    "--engine must be hoop or raw (got {other:?})"
                )))
            }
        };
        let op = match op {
            "nop" => CountOp::Nop,
            "read" => CountOp::Read(file.ok_or_else(|| invalid("--op read needs --file"))?),
            "wait" if hoop => CountOp::Wait,
            "wait" => return Err(invalid("--op wait runs on --engine hoop only")),
            other => {
                return Err(invalid(format!(
                    "--op must be nop, read or wait (got {other:?})"
                )))
            }
        };
        Ok(CountPlan {
            op,
            hoop,
            count,
            batch,
        })
    }
}

/// Runs `hoop bench count`: prints `count: OP ENGINE N ops` once all of them completed; a run
/// that completed fewer fails.
pub fn run_count(plan: &CountPlan) -> io::Result<()> {
    let done = match &plan.op {
        CountOp::Nop => count_nops(plan.hoop, plan.count, plan.batch)?,
        CountOp::Read(path) => count_reads(plan.hoop, plan.count, plan.batch, path)?,
        CountOp::Wait => count_waits(plan.count)?,
    };
    if done < plan.count {
        return Err(io::Error::other(format!(
            "only {done} of {} operations completed",
            plan.count
        )));
    }
    let op = match plan.op {
        CountOp::Nop => "nop",
        CountOp::Read(_) => "read",
        CountOp::Wait => "wait",
    };
    let engine = if plan.hoop { "hoop" } else { "raw" };
    println!("count: {op} {engine} {done} ops");
    Ok(())
}

/// `count` enters with a bounded wait's arguments that return at once, on a runtime's ring;
/// prints the time per call on stderr.
fn count_waits(count: u64) -> io::Result<u64> {
    let rt = hoop::runtime::Builder::new()
        .driver(hoop::driver::DriverKind::Uring)
        .build()?;
    rt.block_on(async move {
        let driver = hoop::driver::Driver::current()
            .ok_or_else(|| io::Error::other("no driver on the runtime's thread"))?;
        let start = std::time::Instant::now();
        for _ in 0..count {
            driver.enter_bounded_nowait()?;
        }
        let ns = start.elapsed().as_nanos() as f64 / count as f64;
        eprintln!(
            "wait: {ns:.1} ns per io_uring_enter with a bounded wait's arguments (registered \
             wait region: {})",
            driver.waits_registered()
        );
        Ok(count)
    })
}

/// `count` no-ops in batches of `batch`; returns how many succeeded.
fn count_nops(hoop: bool, count: u64, batch: usize) -> io::Result<u64> {
    let cfg = NopConfig {
        threads: 1,
        secs: 1.0,
        batch,
        entries: u32::try_from(batch.next_power_of_two().max(128)).unwrap_or(4096),
        rings: 1,
    };
    let stop = Stop::After(count);
    let outcome = if hoop {
        nop::hoop_thread(&cfg, stop)?
    } else {
        nop::raw_thread(&cfg, stop)?
    };
    if outcome.errors > 0 {
        return Err(io::Error::other(format!(
            "{} no-ops failed",
            outcome.errors
        )));
    }
    Ok(outcome.nops)
}

/// `count` reads of 4 KiB, `qd` in flight, at random block offsets of `path`.
fn count_reads(hoop: bool, count: u64, qd: usize, path: &std::path::Path) -> io::Result<u64> {
    let file = std::fs::File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let blocks = file.metadata()?.len() / READ_BS as u64;
    if blocks == 0 {
        return Err(invalid(format!(
            "{} holds less than one 4 KiB block",
            path.display()
        )));
    }
    let picker = |i: usize| Picker::new(i as u64, blocks, READ_BS, 0);
    if !hoop {
        let run = raw::raw_loop(
            file.as_raw_fd(),
            qd,
            READ_BS,
            picker(0),
            Stop::After(count),
            None,
        )?;
        return Ok(run.ios);
    }
    let rt = hoop::Runtime::builder()
        .driver(hoop::DriverKind::Uring)
        .build()?;
    rt.block_on(async move {
        let file = Rc::new(hoop::fs::File::from_std(file));
        let done = Rc::new(Cell::new(0u64));
        let failed = Rc::new(Cell::new(None::<io::Error>));
        let tasks: Vec<_> = (0..qd)
            .map(|i| {
                let (file, done, failed) = (file.clone(), done.clone(), failed.clone());
                let mut picker = picker(i);
                hoop::spawn(async move {
                    let mut buf = match content::aligned(READ_BS) {
                        Ok(b) => b,
                        Err(e) => return failed.set(Some(e)),
                    };
                    while done.get() < count {
                        let (off, _) = picker.next();
                        buf.clear();
                        let (res, back) = file.read_at(buf, off).await;
                        buf = back;
                        match res {
                            Ok(n) if n == READ_BS => done.set(done.get() + 1),
                            Ok(n) => {
                                return failed.set(Some(io::Error::other(format!(
                                    "short read: {n} of {READ_BS}"
                                ))))
                            }
                            Err(e) => return failed.set(Some(e)),
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await
                .map_err(|e| io::Error::other(format!("a read task failed: {e}")))?;
        }
        if let Some(e) = failed.take() {
            return Err(e);
        }
        Ok(done.get())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_checked_numbers_first_then_engine_op_and_file() {
        let p = CountPlan::new("read", "raw", 10, 32, Some(PathBuf::from("f"))).unwrap();
        assert_eq!(p.op, CountOp::Read(PathBuf::from("f")));
        assert!(!p.hoop);
        let err = |op, engine, count, batch, file: Option<&str>| {
            CountPlan::new(op, engine, count, batch, file.map(PathBuf::from))
                .unwrap_err()
                .to_string()
        };
        assert!(err("nosuch", "nosuch", 0, 1, None).starts_with("--count"));
        assert!(err("nop", "hoop", 1, 4097, None).starts_with("--count"));
        assert!(err("nosuch", "nosuch", 1, 1, None).starts_with("--engine"));
        assert!(err("nosuch", "hoop", 1, 1, None).starts_with("--op must"));
        assert!(err("read", "hoop", 1, 1, None).starts_with("--op read needs --file"));
        assert_eq!(
            CountPlan::new("nop", "hoop", 1, 1, None).unwrap().op,
            CountOp::Nop
        );
    }
}
