//! `hoop bench count`: a fixed number of operations and nothing else, for counting the
//! instructions they take (`scripts/instructions` runs it under `valgrind --tool=callgrind`).
//!
//! * `--op nop`: batches of `--batch` no-ops, through hoop (the loop of `hoop bench nop`) or
//!   through the raw `io-uring` loop.
//! * `--op read`: `--batch` 4 KiB reads in flight on `--file` (hot in the page cache), through
//!   hoop (`--batch` tasks, `File::read_at` into an aligned buffer, as the `uring` engine of
//!   `hoop bench file` does, minus its clock and content check) or through the raw loop of the
//!   `raw-io-uring` engine (also without clock and check). Every read must return the whole
//!   block.
//!
//! It prints one line, `count: OP ENGINE N ops`, once all of them completed; a run that counted
//! fewer (an error) fails.

use std::cell::Cell;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;

use crate::load::file::content::{self, Picker};
use crate::load::file::raw;
use crate::nop::{self, NopConfig, Stop};
use crate::plan::invalid;

/// Block size of `--op read`.
const READ_BS: usize = 4096;

/// Arguments of `hoop bench count`.
#[derive(Debug, clap::Args)]
pub struct CountArgs {
    /// The operation: nop or read.
    #[arg(long, value_name = "OP")]
    pub op: String,
    /// Who runs it: hoop or raw (the io-uring crate in a plain loop).
    #[arg(long, value_name = "ENGINE")]
    pub engine: String,
    /// Operations to complete.
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// No-ops per batch, or reads in flight.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub batch: usize,
    /// The file `--op read` reads (at least 4 KiB; its size is rounded down to 4 KiB blocks).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// Runs `hoop bench count`.
pub fn run_count_command(args: CountArgs) -> io::Result<()> {
    if args.count == 0 || args.batch == 0 || args.batch > 4096 {
        return Err(invalid(
            "--count must be at least 1 and --batch between 1 and 4096",
        ));
    }
    let hoop = match args.engine.as_str() {
        "hoop" => true,
        "raw" => false,
        other => {
            return Err(invalid(format!(
                "--engine must be hoop or raw (got {other:?})"
            )))
        }
    };
    let done = match args.op.as_str() {
        "nop" => count_nops(hoop, args.count, args.batch)?,
        "read" => {
            let path = args
                .file
                .as_ref()
                .ok_or_else(|| invalid("--op read needs --file"))?;
            count_reads(hoop, args.count, args.batch, path)?
        }
        other => return Err(invalid(format!("--op must be nop or read (got {other:?})"))),
    };
    if done < args.count {
        return Err(io::Error::other(format!(
            "only {done} of {} operations completed",
            args.count
        )));
    }
    println!("count: {} {} {done} ops", args.op, args.engine);
    Ok(())
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
