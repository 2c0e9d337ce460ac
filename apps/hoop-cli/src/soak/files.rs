//! The file load: random block writes and reads on a hoop runtime of each driver, against a
//! model of the file's contents; one write in 50 is cancelled in flight (dropped after a few
//! microseconds) and then written again whole, so the model stays exact whatever the cancel did.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hoop::DriverKind;

use super::tally::{Failures, Rng, Tally};

const FILE_BYTES: usize = 4 << 20;

/// An error an injected fault makes up for an operation that did not run: try it again.
fn retryable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECANCELED) | Some(libc::EINTR) | Some(libc::EAGAIN)
    )
}

/// Runs the load on `driver` until `until`, in `path`; `in_flight` is sampled from inside.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    driver: DriverKind,
    path: PathBuf,
    seed: u64,
    until: Instant,
    tally: &Tally,
    failures: &Failures,
    in_flight: Arc<AtomicUsize>,
    name: &str,
) {
    let rt = match hoop::Runtime::builder().driver(driver).build() {
        Ok(rt) => rt,
        Err(e) => {
            failures.push(format!("{name}: cannot start the runtime: {e}"));
            return;
        }
    };
    let res = rt.block_on(async {
        let file = hoop::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await?;
        let mut model = vec![0u8; FILE_BYTES];
        write_fully(&file, &model, 0, tally).await?;
        let mut rng = Rng::seeded(seed, 500);
        while Instant::now() < until && !failures.any() {
            if let Some(d) = hoop::driver::Driver::current() {
                in_flight.store(d.in_flight(), Ordering::Relaxed);
            }
            let len = 1 + rng.below(64 * 1024) as usize;
            let at = rng.below((FILE_BYTES - len) as u64) as usize;
            if rng.below(2) == 0 {
                let data = rng.bytes(len);
                if rng.below(50) == 0 {
                    let wait = Duration::from_micros(rng.below(100));
                    let write = file.write_at(data.clone(), at as u64);
                    if hoop::time::timeout(wait, write).await.is_err() {
                        Tally::add(&tally.cancellations, 1);
                    }
                }
                write_fully(&file, &data, at, tally).await?;
                model[at..at + len].copy_from_slice(&data);
            } else {
                let got = read_fully(&file, len, at, tally).await?;
                if got[..] != model[at..at + len] {
                    failures.push(format!("{name}: wrong bytes read at {at}..{}", at + len));
                    break;
                }
                Tally::add(&tally.bytes_verified, len as u64);
            }
            Tally::add(&tally.ops, 1);
        }
        io::Result::Ok(())
    });
    if let Err(e) = res {
        failures.push(format!("{name}: {e}"));
    }
    let _ = std::fs::remove_file(&path);
}

async fn write_fully(
    file: &hoop::fs::File,
    data: &[u8],
    at: usize,
    tally: &Tally,
) -> io::Result<()> {
    let mut done = 0;
    while done < data.len() {
        match file
            .write_at(data[done..].to_vec(), (at + done) as u64)
            .await
            .0
        {
            Ok(n) => done += n,
            Err(e) if retryable(&e) => Tally::add(&tally.errors, 1),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn read_fully(
    file: &hoop::fs::File,
    len: usize,
    at: usize,
    tally: &Tally,
) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let (r, buf) = file
            .read_at(Vec::with_capacity(len - out.len()), (at + out.len()) as u64)
            .await;
        match r {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than written",
                ))
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if retryable(&e) => Tally::add(&tally.errors, 1),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
