//! The driver's soundness rules under pressure: backpressure, CQ overflow, cancellation and
//! shutdown, cross-thread wakes. Each test names the invariant of ../shared/INVARIANTS.md it
//! checks, and runs on each driver (io_uring, then epoll); what only io_uring has (a CQ that
//! overflows, cancels that complete asynchronously) is asserted on io_uring only. The in-flight
//! cap: `driver_cap.rs`.

use hoop_test_support as common;

use common::pipe;

use std::future::Future;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{bounded, builder, each_driver, runtime, DriverKind};
use hoop::driver::{op, Op};

/// Invariant 8: a ring of 4 SQ entries runs 10,000 concurrent operations to completion; the
/// ones that find no room wait (FIFO), nothing spins, panics or is lost. (epoll caps the
/// operations in flight by the same CQ size, so the tiny CQ makes ops wait there too.)
#[test]
fn backpressure_tiny_ring_runs_10000_ops() {
    each_driver(|kind| {
        for cq in [None, Some(8)] {
            let (done, counters) = bounded(60, move || {
                let mut b = builder(kind).entries(4);
                if let Some(cq) = cq {
                    b = b.cq_entries(cq);
                }
                let rt = b.build().unwrap();
                // Every 10th op holds its slot a while: a read of an empty pipe with a
                // 200 us deadline (sleeps take no slot).
                let (r, _w) = pipe();
                let rfd = r.as_raw_fd();
                let done = rt.block_on(async {
                    let handles: Vec<_> = (0..10_000u32)
                        .map(|i| {
                            hoop::spawn(async move {
                                if i % 10 == 0 {
                                    let read = op::Read::new(rfd, vec![0u8; 1], u64::MAX);
                                    let deadline = Duration::from_micros(200);
                                    let _ = hoop::time::op_timeout(deadline, read).await;
                                } else {
                                    Op::new(op::Nop).await.unwrap();
                                }
                                1u32
                            })
                        })
                        .collect();
                    let mut n = 0;
                    for h in handles {
                        n += h.await.unwrap();
                    }
                    n
                });
                (done, rt.counters())
            });
            assert_eq!(done, 10_000);
            if cq.is_some() {
                assert!(
                    counters.room_waits > 0,
                    "the tiny CQ must make ops wait: {counters:?}"
                );
            }
            assert_eq!(counters.stale_cqes, 0);
        }
    });
}

/// Invariant 8: an operation waiting for room and then dropped passes its turn on; the others
/// still complete (no lost wake-up).
#[test]
fn dropped_room_waiters_pass_their_turn() {
    each_driver(|kind| {
        let n = bounded(60, move || {
            let rt = builder(kind).entries(4).cq_entries(8).build().unwrap();
            rt.block_on(async {
                let handles: Vec<_> = (0..2000u32)
                    .map(|_| {
                        hoop::spawn(async {
                            hoop::time::sleep(Duration::from_micros(100)).await;
                        })
                    })
                    .collect();
                // Abort every third task while most of them wait for room.
                hoop::yield_now().await;
                for h in handles.iter().step_by(3) {
                    h.abort();
                }
                let mut ok = 0;
                for h in handles {
                    if h.await.is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        });
        assert!(n >= 2000 - 667, "{n} tasks finished");
    });
}

/// Invariant 9: with a CQ far smaller than the operations in flight (the in-flight cap lifted so
/// the CQ really overflows into the kernel's backlog), every completion still arrives. epoll has
/// no CQ to overflow: there the same 4596 completions must all arrive, with no overflow event.
#[test]
fn cq_overflow_loses_nothing() {
    each_driver(|kind| {
        let (sum, counters) = bounded(60, move || {
            let rt = builder(kind)
                .entries(16)
                .cq_entries(32)
                .max_in_flight(4096)
                .build()
                .unwrap();
            let sum = rt.block_on(async {
                // One task pushes 4096 ops before anything is reaped.
                let ops: Vec<_> = (0..4096).map(|_| Op::new(op::Nop)).collect();
                let mut ops: Vec<Option<Op<op::Nop>>> = ops.into_iter().map(Some).collect();
                let mut done = 0u32;
                std::future::poll_fn(|cx| {
                    for slot in ops.iter_mut() {
                        if let Some(o) = slot {
                            if let Poll::Ready(r) = Pin::new(o).poll(cx) {
                                r.unwrap();
                                done += 1;
                                *slot = None;
                            }
                        }
                    }
                    if done == 4096 {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
                // And timers completing while the CQ is full.
                let timers: Vec<_> = (0..500)
                    .map(|_| hoop::spawn(hoop::time::sleep(Duration::from_millis(2))))
                    .collect();
                for t in timers {
                    t.await.unwrap();
                }
                done + 500
            });
            (sum, rt.counters())
        });
        assert_eq!(sum, 4596);
        match kind {
            DriverKind::Uring => assert!(
                counters.overflow_events > 0,
                "the CQ should have overflowed: {counters:?}"
            ),
            _ => assert_eq!(counters.overflow_events, 0, "{counters:?}"),
        }
        assert_eq!(counters.stale_cqes, 0);
    });
}

/// Memory handed to the kernel stays owned until its final completion, shutdown cancels and
/// reaps, results nobody waits for are released: dropping a runtime with reads in flight
/// neither hangs nor leaves a read armed in the kernel (it would steal later data and write
/// into freed memory): after the drop, bytes written to the pipe are all still there for a
/// plain read.
#[test]
fn shutdown_with_reads_in_flight_reaps_everything() {
    each_driver(|kind| {
        bounded(30, move || {
            let (r, w) = pipe();
            let rfd = r.as_raw_fd();
            let rt = builder(kind)
                .shutdown_timeout(Duration::from_secs(2))
                .build()
                .unwrap();
            rt.block_on(async move {
                for _ in 0..64 {
                    hoop::spawn(async move {
                        let (res, _buf) =
                            Op::new(op::Read::new(rfd, vec![0u8; 65536], u64::MAX)).await;
                        let _ = res;
                    });
                }
                hoop::time::sleep(Duration::from_millis(20)).await;
            });
            let before = rt.counters();
            let report = rt.shutdown();
            // Every read was cancelled and its final CQE reaped before the ring was closed:
            // nothing had to be leaked, nothing is left in flight.
            // io_uring: the 64 reads were cancelled at shutdown and their CQEs reaped. epoll
            // cancels a readiness wait synchronously when its task is dropped (which shutdown
            // does first), so nothing is left for the count there.
            if kind == DriverKind::Uring {
                assert_eq!(report.cancelled, 64, "{report:?}");
            }
            assert_eq!(report.leaked, 0, "{report:?}");
            assert_eq!(report.still_in_flight, 0, "{report:?}");
            let msg = b"still here";
            // SAFETY: writes from a live local buffer to a pipe we own.
            let n = unsafe { libc::write(w.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
            assert_eq!(n as usize, msg.len());
            // SAFETY: sets O_NONBLOCK on an fd we own.
            unsafe { libc::fcntl(rfd, libc::F_SETFL, libc::O_NONBLOCK) };
            let mut buf = [0u8; 64];
            // SAFETY: reads into a live local buffer.
            let n = unsafe { libc::read(rfd, buf.as_mut_ptr().cast(), buf.len()) };
            assert_eq!(n as usize, msg.len(), "a cancelled read consumed the data");
            assert_eq!(&buf[..msg.len()], msg);
            assert!(before.sqes_submitted >= 64);
        });
    });
}

/// Invariant 4: plain `drop` of a runtime with operations in flight does the same shutdown and
/// does not hang.
#[test]
fn drop_with_ops_in_flight_does_not_hang() {
    each_driver(|kind| {
        bounded(30, move || {
            let (r, _w) = pipe();
            let rfd = r.as_raw_fd();
            let rt = runtime(kind);
            rt.block_on(async move {
                for _ in 0..32 {
                    hoop::spawn(Op::new(op::Read::new(rfd, vec![0u8; 1024], u64::MAX)));
                    hoop::spawn(hoop::time::sleep(Duration::from_secs(3600)));
                }
                hoop::yield_now().await;
            });
            drop(rt);
        });
    });
}

/// Invariant 5 and 6: a read dropped in flight gets cancelled and its buffer is freed only at
/// the final CQE; the runtime keeps working afterwards.
#[test]
fn dropped_read_is_cancelled() {
    each_driver(|kind| {
        bounded(30, move || {
            let (r, _w) = pipe();
            let rfd = r.as_raw_fd();
            let rt = runtime(kind);
            rt.block_on(async move {
                for _ in 0..200 {
                    let res = hoop::time::timeout(
                        Duration::from_micros(50),
                        Op::new(op::Read::new(rfd, vec![0u8; 4096], u64::MAX)),
                    )
                    .await;
                    assert!(res.is_err(), "nothing was written: the read must time out");
                }
                hoop::time::sleep(Duration::from_millis(10)).await;
            });
            let c = rt.counters();
            assert!(c.cancels_submitted >= 200, "{c:?}");
            assert_eq!(c.stale_cqes, 0);
        });
    });
}

/// Wakers are `Send`: waking a task from another thread wakes the runtime out of its wait.
#[test]
fn cross_thread_wake() {
    each_driver(|kind| {
        bounded(30, move || {
            let rt = runtime(kind);
            rt.block_on(async {
                for _ in 0..20 {
                    let (tx, rx) = mpsc::channel::<Waker>();
                    let waker_thread = std::thread::spawn(move || {
                        let w = rx.recv().unwrap();
                        std::thread::sleep(Duration::from_millis(5));
                        w.wake();
                    });
                    let mut sent = Some(tx);
                    let mut polled = 0;
                    std::future::poll_fn(|cx: &mut Context<'_>| {
                        polled += 1;
                        if let Some(tx) = sent.take() {
                            tx.send(cx.waker().clone()).unwrap();
                            Poll::Pending
                        } else {
                            Poll::Ready(())
                        }
                    })
                    .await;
                    assert_eq!(polled, 2);
                    waker_thread.join().unwrap();
                }
            });
        });
    });
}

/// A panicking task is reported through its handle; the runtime survives.
#[test]
fn task_panic_is_a_join_error() {
    each_driver(|kind| {
        let rt = runtime(kind);
        rt.block_on(async {
            let h = hoop::spawn(async { panic!("boom") });
            let e = h.await.unwrap_err();
            assert!(e.is_panic());
            assert!(e.to_string().contains("boom"));
            let h = hoop::spawn(async { 5 });
            assert_eq!(h.await.unwrap(), 5);
        });
    });
}

/// Aborting a task drops its future (cancelling its operations) and reports cancellation.
#[test]
fn abort_cancels_the_task() {
    let _faults = common::faults_off(
        &["ecanceled"],
        "counts the cancel the abort submits: a made-up ECANCELED can end the read first",
    );
    each_driver(|kind| {
        let rt = runtime(kind);
        rt.block_on(async {
            let (r, _w) = pipe();
            let rfd = r.as_raw_fd();
            let h = hoop::spawn(async move {
                let _ = Op::new(op::Read::new(rfd, vec![0u8; 1], u64::MAX)).await;
            });
            hoop::yield_now().await;
            h.abort();
            let e = h.await.unwrap_err();
            assert!(e.is_cancelled());
        });
        assert!(rt.counters().cancels_submitted >= 1);
    });
}

/// Operations outside a runtime fail cleanly instead of panicking (no driver involved).
#[test]
fn op_outside_runtime_is_an_error() {
    let mut fut = Op::new(op::Nop);
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    match Pin::new(&mut fut).poll(&mut cx) {
        Poll::Ready(r) => assert!(r.is_err()),
        Poll::Pending => panic!("an op outside a runtime cannot be pending"),
    }
}

/// Many runtimes on many threads at once (one ring each), as `run_per_core` does. Its runtimes
/// come from `Runtime::new()`, where `HOOP_DRIVER` chooses the driver, so each driver runs in a
/// child process with `HOOP_DRIVER` set.
#[test]
fn run_per_core_gives_each_thread_a_ring() {
    if common::is_child() {
        let expected = DriverKind::from_env().unwrap().unwrap();
        let out = hoop::run_per_core(2, |i| async move {
            for _ in 0..100 {
                Op::new(op::Nop).await.unwrap();
            }
            (i, hoop::runtime::current_driver())
        })
        .unwrap();
        assert_eq!(out, vec![(0, Some(expected)), (1, Some(expected))]);
        return;
    }
    each_driver(|kind| common::run_in_child("run_per_core_gives_each_thread_a_ring", kind));
}

/// One reuseport group on port 0 gives every `run_per_core` thread a listener on
/// the same address; each thread's runtime reports its shutdown (`run_per_core_reports`, and
/// `runtime::on_shutdown` hooks); `task_count` counts the program's tasks, not hoop's own
/// signal reader. Each driver in a child process (`HOOP_DRIVER`), as above.
#[test]
fn reuseport_group_shares_one_port_across_threads_and_reports_shutdown() {
    if common::is_child() {
        let group = hoop::net::ReuseportGroup::bind("127.0.0.1:0").unwrap();
        let addr = group.local_addr();
        assert_ne!(addr.port(), 0, "port 0 became a real port at bind");
        let hooks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ready = std::sync::Arc::new(std::sync::Barrier::new(3));
        let (g, h, r) = (group.clone(), hooks.clone(), ready.clone());
        let client_ready = ready.clone();
        let client = std::thread::spawn(move || {
            client_ready.wait();
            // Connections spread over the group's listeners by the kernel's hash; each thread
            // accepts until it saw one more than it needs, bounded in count.
            let mut streams = Vec::new();
            for _ in 0..64 {
                streams.push(std::net::TcpStream::connect(addr).unwrap());
            }
            streams
        });
        let out = hoop::run_per_core_reports(2, move |_core| {
            let (group, hooks, ready) = (g.clone(), h.clone(), r.clone());
            async move {
                let listener = group.listener().unwrap();
                assert_eq!(listener.local_addr().unwrap(), addr);
                hoop::runtime::on_shutdown(move |report| {
                    assert_eq!(report.leaked, 0);
                    hooks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                });
                // A signal listener starts hoop's own reader task: not counted.
                let mut sig =
                    hoop::signal::signal(hoop::signal::SignalKind::user_defined1()).unwrap();
                // Polled once: the reader task starts.
                let _ = hoop::time::timeout(std::time::Duration::from_millis(1), sig.recv()).await;
                assert_eq!(
                    hoop::runtime::task_count(),
                    0,
                    "hoop's own tasks are not counted"
                );
                let t = hoop::spawn(async {});
                assert_eq!(hoop::runtime::task_count(), 1);
                t.await.unwrap();
                assert_eq!(hoop::runtime::task_count(), 0);
                ready.wait();
                let mut accepted = 0;
                while let Ok((s, _)) = listener
                    .accept_timeout(std::time::Duration::from_millis(500))
                    .await
                {
                    drop(s);
                    accepted += 1;
                }
                accepted
            }
        })
        .unwrap();
        let streams = client.join().unwrap();
        assert_eq!(streams.len(), 64);
        let accepted: usize = out.iter().map(|(n, _)| n).sum();
        assert_eq!(
            accepted, 64,
            "every connection accepted by one of the group: {out:?}"
        );
        for (_, report) in &out {
            assert_eq!(report.leaked, 0, "{out:?}");
        }
        assert_eq!(hooks.load(std::sync::atomic::Ordering::SeqCst), 2);
        return;
    }
    each_driver(|kind| {
        common::run_in_child(
            "reuseport_group_shares_one_port_across_threads_and_reports_shutdown",
            kind,
        )
    });
}

/// A group bound for 2 threads (`bind_n`) spreads connections over both from the first one:
/// 100 long-lived connections made right after the bind, before any thread took its listener,
/// land on both threads (the kernel hashes each 4-tuple over the sockets that listen; with one
/// socket per thread made lazily, all 100 went to the first). A count, not a timing: each
/// thread accepts until the two together have all 100, bounded in rounds. Each driver in a
/// child process (`HOOP_DRIVER`), as above.
#[test]
fn reuseport_group_bound_for_n_threads_spreads_early_connections() {
    if common::is_child() {
        const THREADS: usize = 2;
        const CLIENTS: usize = 100;
        let group = hoop::net::ReuseportGroup::bind_n("127.0.0.1:0", THREADS).unwrap();
        assert_eq!(group.spare(), THREADS);
        let addr = group.local_addr();
        // Connected (the handshake done by the kernel) before any thread has a listener; kept
        // open to the end, as long-lived clients.
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let total = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (g, t) = (group.clone(), total.clone());
        let out = hoop::run_per_core(THREADS, move |_core| {
            let (group, total) = (g.clone(), t.clone());
            async move {
                let listener = group.listener().unwrap();
                let mut accepted = Vec::new();
                for _ in 0..200 {
                    if total.load(std::sync::atomic::Ordering::SeqCst) == CLIENTS {
                        break;
                    }
                    let got = listener
                        .accept_timeout(std::time::Duration::from_millis(50))
                        .await;
                    if let Ok((s, _)) = got {
                        accepted.push(s);
                        total.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                accepted.len()
            }
        })
        .unwrap();
        assert_eq!(group.spare(), 0, "each thread took one of the sockets");
        assert_eq!(out.iter().sum::<usize>(), CLIENTS, "all accepted: {out:?}");
        assert!(
            out.iter().all(|&n| n > 0),
            "every thread got some of the early connections: {out:?}"
        );
        drop(clients);
        return;
    }
    each_driver(|kind| {
        common::run_in_child(
            "reuseport_group_bound_for_n_threads_spreads_early_connections",
            kind,
        )
    });
}

/// The epoll driver waits with `epoll_pwait2` (a `timespec` timeout); where it is refused
/// (`ENOSYS` on a kernel before 5.11, `EPERM` under a seccomp profile) it falls back to
/// `epoll_wait`, whose millisecond timeout is rounded up: sleeps and deadlines still end, and
/// never early.
#[test]
fn sleeps_end_without_epoll_pwait2() {
    each_driver(|kind| {
        for errno in [libc::ENOSYS, libc::EPERM] {
            bounded(30, move || {
                // This thread only: the filter is not synchronised to the test's others.
                common::refuse_syscall_on_this_thread(libc::SYS_epoll_pwait2, errno);
                // SAFETY: a null event array of length 0 on fd -1: nothing is written.
                let r = unsafe { libc::syscall(libc::SYS_epoll_pwait2, -1, 0, 0, 0, 0, 0) };
                let got = std::io::Error::last_os_error().raw_os_error();
                assert!(
                    r < 0 && got == Some(errno),
                    "the filter is not in place: {got:?}"
                );
                runtime(kind).block_on(async {
                    let before = hoop::runtime::current_counters().unwrap().enter_calls;
                    for us in [50, 300, 1500, 1500, 1500] {
                        let d = Duration::from_micros(us);
                        let t = std::time::Instant::now();
                        hoop::time::sleep(d).await;
                        assert!(t.elapsed() >= d, "sleep({d:?}) ended early");
                    }
                    // A wait that failed at once, again and again, would spin through the
                    // sleeps (thousands of calls); waits that sleep take a few each.
                    let calls = hoop::runtime::current_counters().unwrap().enter_calls - before;
                    assert!(calls < 100, "{calls} waits for 5 sleeps: the driver spins");
                    // Readiness still comes through the fallback's waits.
                    let (r, w) = pipe();
                    let writer = std::thread::spawn(move || {
                        // After the read below waits (the runtime sleeps meanwhile).
                        std::thread::sleep(Duration::from_millis(5));
                        let mut w = std::fs::File::from(w);
                        std::io::Write::write_all(&mut w, b"x").unwrap();
                        w
                    });
                    let buf = Vec::with_capacity(8);
                    let read = op::Read::new(r.as_raw_fd(), buf, op::CURRENT_POS);
                    let res = hoop::time::timeout(Duration::from_secs(5), Op::new(read)).await;
                    let (n, _) = res.expect("the pipe's readiness never came");
                    assert_eq!(n.unwrap(), 1);
                    drop(writer.join().unwrap());
                });
            });
        }
    });
}

/// This CPU's iowait in /proc/stat, in clock ticks.
fn iowait_ticks(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let line = stat
        .lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .expect("a line per CPU");
    // cpuN user nice system idle iowait ...
    line.split_whitespace()
        .nth(5)
        .and_then(|v| v.parse().ok())
        .expect("an iowait column")
}

/// A runtime waiting on its sockets is idle, not in iowait, where the kernel can say so
/// (`IORING_ENTER_NO_IOWAIT`, 6.15): pinned to one CPU, a second's wait with an accept in
/// flight adds less than half a second of iowait to that CPU (all of it without the flag, on
/// an otherwise idle CPU). Skips with a line where the kernel (or the kernel level) lacks it;
/// the epoll driver never counted as iowait.
#[test]
fn a_runtime_waiting_on_sockets_is_not_in_iowait() {
    if !hoop::setup::kernel_at_least(6, 15) {
        common::skip(
            DriverKind::Uring,
            "IORING_ENTER_NO_IOWAIT needs Linux 6.15 (or a kernel level that has it)",
        );
        return;
    }
    if let Some(reason) = hoop::__private::uring_unavailable() {
        common::skip(
            DriverKind::Uring,
            &format!("io_uring unavailable here: {reason}"),
        );
        return;
    }
    // SAFETY: sched_getcpu takes no argument.
    let cpu = unsafe { libc::sched_getcpu() };
    let cpu = usize::try_from(cpu).expect("sched_getcpu");
    // SAFETY: sched_setaffinity reads a cpu_set_t that lives on this stack for the call, for
    // the calling thread (0); a zeroed cpu_set_t is an empty set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pin to CPU {cpu}"
        );
    }
    // SAFETY: sysconf takes no pointer.
    let ticks_per_sec = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100);
    let rt = runtime(DriverKind::Uring);
    let (waited, iowait) = rt.block_on(async {
        let listener = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // An operation in flight: the kernel counts a waiter as iowait only with some.
        let accept = hoop::spawn(async move { listener.accept().await.map(drop) });
        hoop::yield_now().await;
        let before = iowait_ticks(cpu);
        let start = std::time::Instant::now();
        hoop::time::sleep(Duration::from_secs(1)).await;
        let waited = start.elapsed();
        let iowait = iowait_ticks(cpu) - before;
        accept.abort();
        (waited, iowait)
    });
    let waited_ticks = waited.as_millis() as u64 * ticks_per_sec / 1000;
    assert!(
        iowait * 2 < waited_ticks,
        "CPU {cpu} was in iowait for {iowait} of {waited_ticks} ticks while the runtime waited"
    );
}

/// With a min-wait (`Builder::min_wait`, Linux 6.12; ignored before and by epoll) a blocking
/// wait asks for a batch of completions: one that never fills still ends once a completion has
/// come. A read waits on a socket with 200 other reads in flight that never complete, another
/// thread writes one byte at a time 20 times, 5 ms apart, and every byte arrives, as do timers
/// between them.
#[test]
fn a_min_wait_still_returns_for_one_completion() {
    use std::io::Write;
    each_driver(|kind| {
        let got = bounded(60, move || {
            let rt = builder(kind)
                .min_wait(Some(Duration::from_micros(500)))
                .build()
                .unwrap();
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            let (idle, _idle_peer) = std::os::unix::net::UnixStream::pair().unwrap();
            let writer = common::spawn(move || {
                for i in 0..20u8 {
                    std::thread::sleep(Duration::from_millis(5));
                    b.write_all(&[i]).unwrap();
                }
                b
            });
            let got = rt.block_on(async move {
                let idle_fd = idle.as_raw_fd();
                // Reads that never complete: more than the batch a min-wait asks for.
                let idle_reads: Vec<_> = (0..200)
                    .map(|_| Op::new(op::Read::new(idle_fd, vec![0u8; 1], u64::MAX)))
                    .map(|o| hoop::spawn(async move { drop(o.await) }))
                    .collect();
                let fd = a.as_raw_fd();
                let mut got = Vec::new();
                while got.len() < 20 {
                    hoop::time::sleep(Duration::from_micros(300)).await;
                    let (r, buf) = Op::new(op::Read::new(fd, vec![0u8; 20], u64::MAX)).await;
                    match r {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        Ok(_) => panic!("end of stream after {got:?}"),
                        Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {}
                        Err(e) => panic!("read: {e}"),
                    }
                }
                for h in idle_reads {
                    h.abort();
                }
                drop((a, idle));
                got
            });
            writer.join().unwrap();
            got
        });
        assert_eq!(got, (0..20u8).collect::<Vec<_>>());
    });
}

/// With registered wait arguments (`Builder::reg_wait`, Linux 6.13: the ring set up disabled,
/// a page registered, the ring enabled) a bounded wait still ends at its deadline and not
/// before: 30 sleeps of 2 ms each take at least 2 ms, with and without a min-wait, and a read
/// whose byte comes from another thread 20 ms later completes. Where the kernel (or the level)
/// lacks it, the same runs on an ordinary ring and a line says so.
#[test]
fn registered_wait_arguments_bound_the_wait() {
    use std::io::Write;
    each_driver(|kind| {
        for min_wait in [None, Some(Duration::from_micros(100))] {
            let registered = bounded(60, move || {
                let rt = builder(kind)
                    .reg_wait(true)
                    .min_wait(min_wait)
                    .build()
                    .unwrap();
                let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
                rt.block_on(async move {
                    let registered =
                        hoop::driver::Driver::current().is_some_and(|d| d.waits_registered());
                    for _ in 0..30 {
                        let t = std::time::Instant::now();
                        hoop::time::sleep(Duration::from_millis(2)).await;
                        assert!(t.elapsed() >= Duration::from_millis(2), "{:?}", t.elapsed());
                    }
                    let writer = common::spawn(move || {
                        std::thread::sleep(Duration::from_millis(20));
                        b.write_all(&[7]).unwrap();
                        b
                    });
                    let fd = a.as_raw_fd();
                    loop {
                        let (r, buf) = Op::new(op::Read::new(fd, vec![0u8; 1], u64::MAX)).await;
                        match r {
                            Ok(1) => {
                                assert_eq!(buf[0], 7);
                                break;
                            }
                            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {}
                            other => panic!("read: {other:?}"),
                        }
                    }
                    drop(writer.join().unwrap());
                    registered
                })
            });
            let expected = kind == DriverKind::Uring && hoop::setup::kernel_at_least(6, 13);
            if expected {
                assert!(registered, "no wait region on a 6.13 kernel");
            } else {
                common::skip(
                    kind,
                    "registered wait arguments need io_uring on Linux 6.13 (or a kernel level \
                     that has it): ran on an ordinary ring",
                );
            }
        }
    });
}
