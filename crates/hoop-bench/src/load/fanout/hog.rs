//! The CPU hog of `hoop bench fanout --hog`: one thread of the bench process, pinned to the
//! server's CPU, busy-looping at normal priority (SCHED_OTHER at the bench's own nice level:
//! it is not reniced) for the whole run, so the scheduler shares that core between the server
//! and the hog as it would with any other busy process. Bounded: it stops when told, and in any
//! case after the longest run it was started for.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::measure::usage::thread_cpu;

/// Spins between two looks at the stop flag and the clock (a few µs of work).
const SPINS: u32 = 4096;

/// A running hog. [`Hog::stop`] ends it and says how much CPU it got.
pub(crate) struct Hog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Duration>>,
    started: Instant,
}

impl Hog {
    /// Starts a hog pinned to `cpu` that runs until stopped, `max` at most.
    pub(crate) fn start(cpu: usize, max: Duration) -> io::Result<Hog> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (tx, rx) = mpsc::channel::<io::Result<()>>();
        let thread = std::thread::Builder::new()
            .name("hoop-bench-hog".into())
            .spawn(move || {
                if let Err(e) = hoop::runtime::pin_to_cpu(cpu) {
                    let _ = tx.send(Err(io::Error::new(
                        e.kind(),
                        format!("cannot pin the CPU hog to CPU {cpu}: {e}"),
                    )));
                    return Duration::ZERO;
                }
                let _ = tx.send(Ok(()));
                drop(tx);
                let cpu0 = thread_cpu();
                let until = Instant::now() + max;
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
                while !flag.load(Ordering::Relaxed) && Instant::now() < until {
                    for _ in 0..SPINS {
                        // xorshift: work the optimizer cannot drop.
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x = std::hint::black_box(x);
                    }
                }
                thread_cpu().saturating_sub(cpu0)
            })?;
        let started = Instant::now();
        match rx.recv() {
            Ok(Ok(())) => Ok(Hog {
                stop,
                thread: Some(thread),
                started,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(io::Error::other(
                    "the CPU hog thread ended before it started",
                ))
            }
        }
    }

    /// Stops the hog; returns its CPU time as % of its wall time.
    pub(crate) fn stop(mut self) -> Option<f64> {
        self.halt()
    }

    fn halt(&mut self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let cpu = self.thread.take()?.join().ok()?;
        let wall = self.started.elapsed().as_secs_f64();
        (wall > 0.0).then(|| crate::measure::latency::round3(cpu.as_secs_f64() / wall * 100.0))
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}
