//! Measures `Handle::spawn` from other threads on each wake path: io_uring woken by MSG_RING
//! (`IORING_REGISTER_SEND_MSG_RING`, 6.13+), io_uring woken by its eventfd, and epoll (eventfd).
//!
//! - latency: one thread does `ROUNDS` sequential round trips (spawn a task that returns its
//!   number, wait for the result on a parked plain thread), so every spawn finds the runtime
//!   asleep in the kernel and pays a full wake-up; prints p50/p99/p99.9/max and round trips/s;
//! - throughput: `THREADS` threads each spawn `PER_THREAD` tasks at once, then wait for all;
//!   prints spawns/s (wake-ups coalesce under load).
//!
//! Every result is checked. The runtime's thread is pinned to CPU 0, the latency thread to
//! CPU 1 (when there is one).
//!
//! `cargo run --release -p hoop --example remote_spawn -- [ROUNDS] [THREADS] [PER_THREAD]`
//! (defaults 20000 4 50000); `--self-test` runs 200 2 500 (a bounded check that every path
//! works, for `tests/examples.rs`).

use std::future::Future;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use hoop::{DriverKind, Runtime};

/// Polls `f` to completion on this plain thread, parking between polls.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a local.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn arg(i: usize, default: u64) -> u64 {
    if std::env::args().any(|a| a == "--self-test") {
        return [0, 200, 2, 500][i];
    }
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[i].as_secs_f64() * 1e6
}

fn main() -> std::io::Result<()> {
    let rounds = arg(1, 20_000).max(1);
    let threads = arg(2, 4).max(1);
    let per_thread = arg(3, 50_000).max(1);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "kernel {:?}, {cpus} CPUs; runtime pinned to CPU 0",
        hoop::driver::setup::kernel_version()
    );
    for (kind, msg_ring) in [
        (DriverKind::Uring, true),
        (DriverKind::Uring, false),
        (DriverKind::Epoll, false),
    ] {
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
        let runner = std::thread::spawn(move || -> std::io::Result<()> {
            let _ = hoop::runtime::pin_to_cpu(0);
            let rt = Runtime::builder()
                .driver(kind)
                .msg_ring_wake(msg_ring)
                .build()?;
            let _ = tx.send(rt.handle());
            rt.block_on(async {
                let _ = stop_rx.await;
            });
            Ok(())
        });
        let Ok(handle) = rx.recv() else {
            println!("{kind}: no runtime: {:?}", runner.join());
            continue;
        };
        let path = handle.wake_path();

        // Latency: sequential round trips from one thread.
        let h = handle.clone();
        let lat = std::thread::spawn(move || {
            if cpus > 1 {
                let _ = hoop::runtime::pin_to_cpu(1);
            }
            let mut samples = Vec::with_capacity(rounds as usize);
            let mut calls = Vec::with_capacity(rounds as usize);
            // CPU time of the runtime's thread, read by a task running there.
            let probe = || async { (thread_cpu(), hoop::runtime::current_counters()) };
            let (rt_cpu0, c0) = block_on(h.spawn(probe())).expect("cpu probe");
            let cpu0 = thread_cpu();
            let start = Instant::now();
            for i in 0..rounds {
                let t = Instant::now();
                let jh = h.spawn(async move { i });
                // The spawn call alone: queue + wake-up (system call) on this thread.
                calls.push(t.elapsed());
                let v = block_on(jh);
                samples.push(t.elapsed());
                assert_eq!(v.expect("remote task failed"), i);
            }
            let total = start.elapsed();
            let cpu = thread_cpu() - cpu0;
            let (rt_cpu1, c1) = block_on(h.spawn(probe())).expect("cpu probe");
            // Per round trip on the runtime's ring: SQEs submitted, CQEs reaped.
            let per = |f: fn(&hoop::Counters) -> u64| match (&c0, &c1) {
                (Some(a), Some(b)) => (f(b) - f(a)) as f64 / rounds as f64,
                _ => 0.0,
            };
            let ring = (per(|c| c.sqes_submitted), per(|c| c.cqes_reaped));
            (samples, calls, total, cpu, rt_cpu1 - rt_cpu0, ring)
        })
        .join()
        .expect("latency thread panicked");
        let (mut samples, mut calls, total, cpu, rt_cpu, ring) = lat;
        samples.sort();
        calls.sort();
        println!(
            "{kind:>5} wake={path:<8?} latency: {rounds} round trips, {:.0}/s, p50 {:.1} us, \
             p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; the spawn call itself p50 {:.2} us; \
             CPU per round trip: spawning thread {:.2} us, runtime thread {:.2} us; \
             per round trip {:.2} SQEs, {:.2} CQEs",
            rounds as f64 / total.as_secs_f64(),
            pct(&samples, 0.50),
            pct(&samples, 0.99),
            pct(&samples, 0.999),
            samples.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
            pct(&calls, 0.50),
            cpu.as_secs_f64() * 1e6 / rounds as f64,
            rt_cpu.as_secs_f64() * 1e6 / rounds as f64,
            ring.0,
            ring.1,
        );

        // Throughput: many threads spawn at once.
        let start = Instant::now();
        let spawners: Vec<_> = (0..threads)
            .map(|t| {
                let h = handle.clone();
                std::thread::spawn(move || {
                    let handles: Vec<_> = (0..per_thread)
                        .map(|i| h.spawn(async move { t * per_thread + i }))
                        .collect();
                    let mut ok = 0u64;
                    for (i, jh) in handles.into_iter().enumerate() {
                        if block_on(jh).expect("remote task failed") == t * per_thread + i as u64 {
                            ok += 1;
                        }
                    }
                    ok
                })
            })
            .collect();
        let ok: u64 = spawners
            .into_iter()
            .map(|s| s.join().expect("spawning thread panicked"))
            .sum();
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(
            ok,
            threads * per_thread,
            "a remote task returned a wrong value"
        );
        println!(
            "{kind:>5} wake={path:<8?} throughput: {threads} threads x {per_thread} spawns, \
             {:.0} verified spawns/s",
            ok as f64 / secs
        );
        let _ = stop_tx.send(());
        runner.join().expect("runtime thread panicked")?;
    }
    Ok(())
}
