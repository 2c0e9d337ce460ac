//! SQPOLL rings of the runtime builder: a ring that idles and wakes, its CPU taken (or dropped
//! when it cannot be), and TCP on it. These are io_uring setup options, so every test runs on
//! io_uring only (`skip on epoll` is printed once per test); where io_uring is unavailable the
//! harness skips it.

use hoop_test_support as common;

use hoop_test_support::resets;

use std::time::Duration;

use common::{bounded, builder, skip};
use hoop::driver::{op, Op};

mod ring_options_common;
use ring_options_common::*;

/// Runs 64 tasks of 32 sequential NOPs while another task keeps the runtime busy (it yields
/// until they are done, so the runtime never blocks); returns (enter calls, NOP CQEs).
async fn busy_nops() -> (u64, u64) {
    let before = hoop::runtime::current_counters().unwrap();
    let done = std::rc::Rc::new(std::cell::Cell::new(0usize));
    let handles: Vec<_> = (0..64)
        .map(|_| {
            let done = done.clone();
            hoop::spawn(async move {
                for _ in 0..32 {
                    Op::new(op::Nop).await.expect("nop");
                }
                done.set(done.get() + 1);
            })
        })
        .collect();
    let mut spins = 0u64;
    while done.get() < 64 && spins < 50_000_000 {
        spins += 1;
        hoop::yield_now().await;
    }
    for h in handles {
        h.await.unwrap();
    }
    let after = hoop::runtime::current_counters().unwrap();
    (
        after.enter_calls - before.enter_calls,
        after.cqes_reaped - before.cqes_reaped,
    )
}

/// SQPOLL: the kernel accepts it (5.13+ needs no privilege); while the runtime is busy the SQ
/// thread takes the SQEs and the driver reaps the CQEs without `io_uring_enter` (fewer enter
/// calls than operations; the numbers, and a plain ring's, are printed); the thread goes to
/// sleep after its idle time, and operations submitted after that complete (the driver wakes it
/// with `IORING_ENTER_SQ_WAKEUP`, a system call).
#[test]
fn sqpoll_ring_idles_and_wakes() {
    uring_only(|kind| {
        let (flags, busy, asleep) = bounded(60, move || {
            let rt = builder(kind)
                .sqpoll(Duration::from_millis(20))
                .build()
                .unwrap();
            let flags = rt.setup_flags();
            let (busy, asleep) = rt.block_on(async {
                // Up to 3 busy phases, keeping the one with the fewest enter calls per
                // operation: a CPU taken by another process can starve the SQ thread for a
                // whole phase (see the assertion below).
                let mut busy = busy_nops().await;
                for _ in 0..2 {
                    if busy.0 < busy.1 / 4 {
                        break;
                    }
                    let again = busy_nops().await;
                    if again.0 * busy.1 < busy.0 * again.1 {
                        busy = again;
                    }
                }
                // A ring timer is handled by the SQ thread (its completion runs there and
                // wakes it), so idle without the ring: block this thread for 10x the SQ
                // thread's idle time.
                hoop::time::sleep(Duration::from_millis(5)).await;
                std::thread::sleep(Duration::from_millis(200));
                let asleep = driver().sq_thread_asleep();
                // The next operations must wake it.
                let before = hoop::runtime::current_counters().unwrap();
                nops(256, 32).await;
                let after = hoop::runtime::current_counters().unwrap();
                assert!(
                    after.enter_calls > before.enter_calls,
                    "waking the SQ thread takes a system call"
                );
                (busy, asleep)
            });
            (flags, busy, asleep)
        });
        let plain = bounded(60, move || {
            let rt = builder(kind).build().unwrap();
            rt.block_on(busy_nops())
        });
        eprintln!(
            "sqpoll: setup flags {flags}; busy: {} enter calls for {} NOP CQEs (a plain ring: \
             {} for {}); asleep after idling: {asleep}",
            busy.0, busy.1, plain.0, plain.1
        );
        if !hoop::setup::kernel_at_least(5, 13) {
            skip(kind, "SQPOLL needs privileges before Linux 5.13");
            return;
        }
        assert!(flags.starts_with("SQPOLL|"), "{flags}");
        // SUBMIT_ALL came in 5.18: a ring at an older kernel level has none.
        assert_eq!(
            flags.contains("SUBMIT_ALL"),
            hoop::driver::level::has((5, 18)),
            "{flags}"
        );
        assert!(!flags.contains("DEFER_TASKRUN"), "{flags}");
        assert!(busy.1 >= 64 * 32, "every NOP completed: {busy:?}");
        // Alone, this takes 0-2 enter calls for 2048 NOPs. With the CPUs oversubscribed (the SQ
        // threads of the other tests spin too) it took up to ~800: a woken SQ thread that waits
        // for a CPU still shows NEED_WAKEUP, so every flush until it runs wakes it again. So
        // only "fewer calls than operations" is asserted.
        assert!(
            busy.0 < busy.1,
            "fewer enter calls ({}) than operations ({}) while busy",
            busy.0,
            busy.1
        );
        assert!(
            asleep,
            "the SQ thread did not go to sleep after 200 ms idle"
        );
    });
}

/// The SQ thread bound to a CPU: CPU 0 is taken (`SQ_AFF`); a CPU that does not exist is
/// dropped, and the ring still polls (SQPOLL without SQ_AFF) and works.
#[test]
fn sqpoll_cpu_is_taken_or_dropped() {
    uring_only(|kind| {
        if !hoop::setup::kernel_at_least(5, 13) {
            skip(kind, "SQPOLL needs privileges before Linux 5.13");
            return;
        }
        for (cpu, aff) in [(0u32, true), (100_000, false)] {
            let flags = bounded(30, move || {
                let rt = builder(kind)
                    .sqpoll(Duration::from_millis(10))
                    .sqpoll_cpu(cpu)
                    .build()
                    .unwrap();
                rt.block_on(async {
                    nops(100, 10).await;
                    hoop::time::sleep(Duration::from_millis(30)).await;
                    nops(100, 10).await;
                });
                rt.setup_flags()
            });
            assert!(flags.starts_with("SQPOLL|"), "cpu {cpu}: {flags}");
            assert_eq!(flags.contains("SQ_AFF"), aff, "cpu {cpu}: {flags}");
        }
    });
}

/// An SQPOLL ring carries sockets and timers like any other: a TCP echo over loopback.
#[test]
fn sqpoll_ring_runs_tcp() {
    uring_only(|kind| {
        bounded(60, move || {
            let rt = builder(kind)
                .sqpoll(Duration::from_millis(10))
                .build()
                .unwrap();
            rt.block_on(async {
                hoop::time::timeout(Duration::from_secs(20), async {
                    // Over a new connection from the exchange where a reset cut the last.
                    let mut resumed = resets::Resumed::new("20 echoes");
                    let mut done = 0;
                    while done < 20 {
                        let from = done;
                        if let Err(e) = sqpoll_echoes(&mut done).await {
                            resumed.after(e, usize::from(done - from));
                        }
                    }
                })
                .await
                .expect("echo within 20 s");
            });
        });
    });
}

/// Echoes from exchange `*done` to 20 on a new connection, counting them; a reset ends it.
async fn sqpoll_echoes(done: &mut u8) -> std::io::Result<()> {
    let listener = hoop::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = hoop::spawn(async move {
        let (s, _) = listener.accept().await?;
        for _ in 0..50 {
            let (r, buf) = s.read(vec![0u8; 64]).await;
            if r? == 0 {
                break;
            }
            s.write_all(buf).await.0?;
        }
        Ok::<_, std::io::Error>(())
    });
    let c = hoop::net::TcpStream::connect(addr).await?;
    for i in *done..20u8 {
        let msg = vec![i; 64];
        c.write_all(msg.clone()).await.0?;
        let (r, back) = c.read_exact(vec![0u8; 64]).await;
        r?;
        assert_eq!(back, msg);
        *done = i + 1;
        if i == 10 {
            // Let the SQ thread fall asleep mid-conversation.
            hoop::time::sleep(Duration::from_millis(40)).await;
        }
    }
    drop(c);
    server.await.unwrap()
}
