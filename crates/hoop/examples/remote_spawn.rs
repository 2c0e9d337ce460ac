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
//! works, for `tests/examples.rs`). `--paired BLOCKS [ROUNDS]` (default 20 2000) keeps the
//! three runtimes up and measures, in BLOCKS blocks, latency (ROUNDS round trips) and
//! throughput (4 threads x 10,000 spawns), taking the paths in turn (the order rotates), and
//! prints per path the median over the blocks (fairer on a shared,
//! noisy machine: each path sees the same noise).

use std::future::Future;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use hoop::{DriverKind, Handle, Runtime};

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

struct Rt {
    kind: DriverKind,
    handle: Handle,
    stop: futures::channel::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

/// A runtime on its own thread, pinned to CPU 0, idle until stopped.
fn start(kind: DriverKind, msg_ring: bool) -> Option<Rt> {
    let (tx, rx) = mpsc::channel();
    let (stop, stop_rx) = futures::channel::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || -> std::io::Result<()> {
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
    match rx.recv() {
        Ok(handle) => Some(Rt {
            kind,
            handle,
            stop,
            thread,
        }),
        Err(_) => {
            println!("{kind}: no runtime: {:?}", thread.join());
            None
        }
    }
}

impl Rt {
    fn stop(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        self.thread.join().expect("runtime thread panicked")
    }
}

struct Lat {
    samples: Vec<Duration>,
    calls: Vec<Duration>,
    total: Duration,
    cpu: Duration,
    rt_cpu: Duration,
    sqes: f64,
    cqes: f64,
}

/// `rounds` sequential round trips from one thread pinned to CPU 1 (sorted samples).
fn latency(handle: &Handle, rounds: u64) -> Lat {
    let h = handle.clone();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::spawn(move || {
        if cpus > 1 {
            let _ = hoop::runtime::pin_to_cpu(1);
        }
        let mut samples = Vec::with_capacity(rounds as usize);
        let mut calls = Vec::with_capacity(rounds as usize);
        // CPU time of the runtime's thread and its ring's counters, read by a task there.
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
        let per = |f: fn(&hoop::Counters) -> u64| match (&c0, &c1) {
            (Some(a), Some(b)) => (f(b) - f(a)) as f64 / rounds as f64,
            _ => 0.0,
        };
        samples.sort();
        calls.sort();
        Lat {
            samples,
            calls,
            total,
            cpu,
            rt_cpu: rt_cpu1 - rt_cpu0,
            sqes: per(|c| c.sqes_submitted),
            cqes: per(|c| c.cqes_reaped),
        }
    })
    .join()
    .expect("latency thread panicked")
}

/// `threads` threads spawn `per_thread` tasks each at once, then wait for all: verified
/// spawns/s and ring wake-ups per 1000 spawns.
fn throughput(handle: &Handle, threads: u64, per_thread: u64) -> (f64, String) {
    let counters = || {
        block_on(handle.spawn(async { hoop::runtime::current_counters() }))
            .ok()
            .flatten()
    };
    let before = counters();
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
    // Wake-ups that reached the ring (a MSG_RING CQE or an eventfd poll CQE each; the tasks
    // do no I/O), per 1000 spawns: how well wakes coalesce under load.
    let wakes = match (before, counters()) {
        (Some(a), Some(b)) => format!(
            "{:.1}",
            (b.cqes_reaped - a.cqes_reaped) as f64 * 1000.0 / ok as f64
        ),
        _ => "-".into(),
    };
    (ok as f64 / secs, wakes)
}

const PATHS: [(DriverKind, bool); 3] = [
    (DriverKind::Uring, true),
    (DriverKind::Uring, false),
    (DriverKind::Epoll, false),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn paired(blocks: u64, rounds: u64) -> std::io::Result<()> {
    let rts: Vec<Rt> = PATHS.iter().filter_map(|&(k, m)| start(k, m)).collect();
    // Per path: p50, p99, runtime-thread CPU, spawning-thread CPU (us per round trip), and
    // spawns/s of 4 threads x 10,000 spawns.
    let mut stats = vec![[vec![], vec![], vec![], vec![], vec![]]; rts.len()];
    for b in 0..blocks as usize {
        for j in 0..rts.len() {
            // Rotate the order so no path always runs first.
            let j = (j + b) % rts.len();
            let l = latency(&rts[j].handle, rounds);
            let per = |d: Duration| d.as_secs_f64() * 1e6 / rounds as f64;
            stats[j][0].push(pct(&l.samples, 0.50));
            stats[j][1].push(pct(&l.samples, 0.99));
            stats[j][2].push(per(l.rt_cpu));
            stats[j][3].push(per(l.cpu));
            stats[j][4].push(throughput(&rts[j].handle, 4, 10_000).0);
        }
    }
    for (rt, s) in rts.iter().zip(stats) {
        let [p50, p99, rt_cpu, cpu, rate] = s.map(median);
        println!(
            "{:>5} wake={:<8?} paired, median of {blocks} blocks x {rounds} round trips: \
             p50 {p50:.1} us, p99 {p99:.1} us; CPU per round trip: runtime thread \
             {rt_cpu:.2} us, spawning thread {cpu:.2} us; 4 threads x 10000 spawns: \
             {rate:.0} verified spawns/s",
            rt.kind,
            rt.handle.wake_path()
        );
    }
    for rt in rts {
        rt.stop()?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "kernel {:?}, {cpus} CPUs; runtime pinned to CPU 0, latency thread to CPU 1",
        hoop::driver::setup::kernel_version()
    );
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--paired") {
        let num = |j: usize, d: u64| args.get(j).and_then(|a| a.parse().ok()).unwrap_or(d);
        return paired(num(i + 1, 20).max(1), num(i + 2, 2000).max(1));
    }
    let rounds = arg(1, 20_000).max(1);
    let threads = arg(2, 4).max(1);
    let per_thread = arg(3, 50_000).max(1);
    for (kind, msg_ring) in PATHS {
        let Some(rt) = start(kind, msg_ring) else {
            continue;
        };
        let path = rt.handle.wake_path();
        let l = latency(&rt.handle, rounds);
        let per = |d: Duration| d.as_secs_f64() * 1e6 / rounds as f64;
        println!(
            "{kind:>5} wake={path:<8?} latency: {rounds} round trips, {:.0}/s, p50 {:.1} us, \
             p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; the spawn call itself p50 {:.2} us; \
             CPU per round trip: spawning thread {:.2} us, runtime thread {:.2} us; \
             per round trip {:.2} SQEs, {:.2} CQEs",
            rounds as f64 / l.total.as_secs_f64(),
            pct(&l.samples, 0.50),
            pct(&l.samples, 0.99),
            pct(&l.samples, 0.999),
            l.samples.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
            pct(&l.calls, 0.50),
            per(l.cpu),
            per(l.rt_cpu),
            l.sqes,
            l.cqes,
        );
        let (rate, wakes) = throughput(&rt.handle, threads, per_thread);
        println!(
            "{kind:>5} wake={path:<8?} throughput: {threads} threads x {per_thread} spawns, \
             {rate:.0} verified spawns/s; ring wake-ups per 1000 spawns: {wakes}"
        );
        rt.stop()?;
    }
    Ok(())
}
