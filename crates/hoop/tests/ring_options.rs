//! Ring options of the runtime builder: an IOPOLL ring reading an `O_DIRECT` file, the
//! registered ring fd, the io-wq worker limits, options together, depth sampling, and file I/O
//! queued while the ring waits on a device (SQPOLL rings: `ring_options_sqpoll.rs`). These are io_uring setup options, so every test runs on io_uring only (`skip on
//! epoll` is printed once per test); where io_uring is unavailable the harness skips it.

use hoop_test_support as common;

use common::pipe;

use std::alloc::Layout;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use common::{bounded, builder, skip};
use hoop::driver::{op, IoBuf, IoBufMut, Op};

mod ring_options_common;
use ring_options_common::*;

/// A 4 KiB-aligned 4 KiB buffer for `O_DIRECT`.
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

const BLOCK: usize = 4096;

impl Aligned {
    fn new() -> Aligned {
        let layout = Layout::from_size_align(BLOCK, BLOCK).unwrap();
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation failed");
        Aligned { ptr, len: 0 }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are initialized (zeroed at allocation, then written by
        // the kernel), and the allocation is BLOCK bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe {
            std::alloc::dealloc(self.ptr, Layout::from_size_align(BLOCK, BLOCK).unwrap());
        }
    }
}

// SAFETY: the bytes are on the heap, at an address that does not change when the value moves,
// and valid for BLOCK bytes (all initialized: the allocation is zeroed).
unsafe impl IoBuf for Aligned {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        BLOCK
    }
}

// SAFETY: as above; the pointer is valid for writes of BLOCK bytes.
unsafe impl IoBufMut for Aligned {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    unsafe fn set_filled(&mut self, n: usize) {
        self.len = n;
    }
}

/// IOPOLL: the ring is set up with `IORING_SETUP_IOPOLL` and reads 16 aligned 4 KiB blocks of
/// an `O_DIRECT` file in the temp dir, each with the right bytes. Where the file system refuses
/// `O_DIRECT` (tmpfs) or the device has no poll queues (the read fails with EOPNOTSUPP), the
/// test says `skip iopoll: <reason>`.
#[test]
fn iopoll_ring_reads_o_direct_file() {
    uring_only(|kind| {
        let path = std::env::temp_dir().join(format!("hoop-iopoll-{}", std::process::id()));
        let blocks = 16usize;
        {
            let mut f = std::fs::File::create(&path).unwrap();
            for i in 0..blocks {
                f.write_all(&[i as u8 + 1; BLOCK]).unwrap();
            }
            f.sync_all().unwrap();
        }
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                eprintln!("skip iopoll: O_DIRECT refused in {:?}: {e}", path.parent());
                return;
            }
        };
        let fd = file.as_raw_fd();
        let (flags, outcome) = bounded(60, move || {
            let rt = builder(kind).iopoll(true).build().unwrap();
            let outcome = rt.block_on(async move {
                let mut got = Vec::new();
                for i in 0..blocks {
                    let (r, buf) =
                        Op::new(op::Read::new(fd, Aligned::new(), (i * BLOCK) as u64)).await;
                    match r {
                        Ok(n) => got.push((n, buf.bytes().to_vec())),
                        Err(e) => return Err(e),
                    }
                }
                Ok(got)
            });
            (rt.setup_flags(), outcome)
        });
        drop(file);
        let _ = std::fs::remove_file(&path);
        assert!(flags.contains("IOPOLL"), "{flags}");
        match outcome {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => {
                eprintln!(
                    "skip iopoll: {e} (the device of {:?} has no poll queues)",
                    std::env::temp_dir()
                );
            }
            Err(e) => panic!("O_DIRECT read on the IOPOLL ring: {e}"),
            Ok(got) => {
                assert_eq!(got.len(), blocks);
                for (i, (n, bytes)) in got.iter().enumerate() {
                    assert_eq!(*n, BLOCK, "block {i}");
                    assert!(
                        bytes.iter().all(|&b| b == i as u8 + 1),
                        "block {i} has the wrong bytes"
                    );
                }
                eprintln!("iopoll: read {blocks} O_DIRECT blocks with flags {flags}");
            }
        }
    });
}

/// The ring fd is registered by default and `io_uring_enter` goes through it; the runtime
/// works with it and without it. Forty runtimes in a row on one thread all get a registered
/// fd: the kernel allows 16 per thread, so each runtime must unregister its own when dropped.
#[test]
fn registered_ring_fd_works_and_is_released() {
    uring_only(|kind| {
        let kernel_has_it = hoop::setup::kernel_at_least(5, 18);
        bounded(60, move || {
            for register in [true, false] {
                let rt = builder(kind).register_ring_fd(register).build().unwrap();
                let (registered, enters) = rt.block_on(async {
                    nops(500, 50).await;
                    hoop::time::sleep(Duration::from_millis(5)).await;
                    (
                        driver().ring_fd_registered(),
                        hoop::runtime::current_counters().unwrap().enter_calls,
                    )
                });
                assert!(enters > 0);
                assert_eq!(registered, register && kernel_has_it, "register={register}");
            }
            for i in 0..40 {
                let rt = builder(kind).build().unwrap();
                let registered = rt.block_on(async {
                    nops(10, 10).await;
                    driver().ring_fd_registered()
                });
                assert_eq!(registered, kernel_has_it, "runtime {i} of 40");
            }
        });
        if !kernel_has_it {
            skip(kind, "no registered ring fds before Linux 5.18");
        }
    });
}

/// `iowq_max_workers(2, 3)`: the kernel holds those limits (read back with zeros) while a ring
/// built without the option on another thread has the defaults, and file work still completes
/// (writes, fsync, reads).
#[test]
fn iowq_max_workers_are_set() {
    uring_only(|kind| {
        if !hoop::setup::kernel_at_least(5, 15) {
            skip(
                kind,
                "no IORING_REGISTER_IOWQ_MAX_WORKERS before Linux 5.15",
            );
            return;
        }
        let path = std::env::temp_dir().join(format!("hoop-iowq-{}", std::process::id()));
        let p = path.clone();
        let (limits, default_limits) = bounded(60, move || {
            // Raw single writes and a read that must move every byte at once.
            let _faults = common::faults_off(
                &["short_io"],
                "raw single writes and a read that must move every byte at once",
            );
            let rt = builder(kind).iowq_max_workers(2, 3).build().unwrap();
            let limits = rt.block_on(async move {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&p)
                    .unwrap();
                let fd = f.as_raw_fd();
                for i in 0..16u64 {
                    let (r, _) = Op::new(op::Write::new(fd, vec![i as u8; 1000], i * 1000)).await;
                    assert_eq!(r.unwrap(), 1000);
                }
                Op::new(op::Fsync::new(fd, false)).await.unwrap();
                let (r, buf) = Op::new(op::Read::new(fd, vec![0u8; 16_000], 0)).await;
                assert_eq!(r.unwrap(), 16_000);
                assert!(buf
                    .chunks(1000)
                    .enumerate()
                    .all(|(i, c)| c.iter().all(|&b| b == i as u8)));
                driver().iowq_max_workers().unwrap()
            });
            // The limits belong to the thread's io-wq: a ring on another thread has the
            // kernel's defaults.
            let default_limits = std::thread::spawn(move || {
                let plain = builder(kind).build().unwrap();
                plain.block_on(async { driver().iowq_max_workers().unwrap() })
            })
            .join()
            .unwrap();
            (limits, default_limits)
        });
        let _ = std::fs::remove_file(&path);
        eprintln!("iowq limits: set (2, 3) -> {limits:?}; default ring {default_limits:?}");
        assert_eq!(limits, (2, 3));
        assert_ne!(default_limits, (2, 3), "another thread keeps the defaults");
    });
}

/// The options together: SQPOLL, a registered ring fd and io-wq limits on one ring.
#[test]
fn options_combine() {
    uring_only(|kind| {
        let (flags, registered, limits) = bounded(60, move || {
            let rt = builder(kind)
                .sqpoll(Duration::from_millis(10))
                .register_ring_fd(true)
                .iowq_max_workers(4, 4)
                .build()
                .unwrap();
            let out = rt.block_on(async {
                nops(1000, 100).await;
                hoop::time::sleep(Duration::from_millis(30)).await;
                nops(1000, 100).await;
                (driver().ring_fd_registered(), driver().iowq_max_workers())
            });
            (rt.setup_flags(), out.0, out.1)
        });
        eprintln!("combined: {flags}, registered fd {registered}, iowq {limits:?}");
        if hoop::setup::kernel_at_least(5, 18) {
            assert!(flags.starts_with("SQPOLL|"), "{flags}");
            assert!(registered);
            assert_eq!(limits.unwrap(), (4, 4));
        }
    });
}

/// Depth sampling: with three pipe reads parked in the kernel for most of the run,
/// the time-weighted depth is between 2 and 3; without sampling there is no figure. (The
/// bound is on a count of operations, not on a duration.)
#[test]
fn depth_sampling_counts_operations_in_the_kernel() {
    uring_only(|kind| {
        bounded(30, move || {
            let rt = builder(kind).sample_depth(true).build().expect("runtime");
            let depth = rt.block_on(async {
                let pipes: Vec<_> = (0..3).map(|_| pipe()).collect();
                let reads: Vec<_> = pipes
                    .iter()
                    .map(|(r, _)| {
                        let fd = r.as_raw_fd();
                        hoop::spawn(Op::new(op::Read::new(fd, vec![0u8; 8], u64::MAX)))
                    })
                    .collect();
                // Let the reads reach the kernel, then keep them there a while.
                hoop::time::sleep(Duration::from_millis(100)).await;
                for (_, w) in &pipes {
                    // SAFETY: writes one byte from a valid buffer into an open pipe.
                    let n = unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) };
                    assert_eq!(n, 1);
                }
                for r in reads {
                    let (res, _buf) = r.await.expect("read task");
                    assert_eq!(res.expect("read"), 1);
                }
                hoop::runtime::current_counters().expect("counters")
            });
            let d = depth.mean_depth().expect("sampled");
            assert!((2.0..=3.0).contains(&d), "mean depth {d}");
            let plain = builder(kind).build().expect("runtime");
            let c = plain.block_on(async {
                Op::new(op::Nop).await.expect("nop");
                hoop::runtime::current_counters().expect("counters")
            });
            assert_eq!(c.mean_depth(), None);
        })
    });
}

/// While the ring waits on a device (an operation still in the kernel, the last
/// enter waited), a file read a woken task queues is submitted before the next woken task
/// runs, not at the end of the batch. Two tasks are woken in one batch (their pipe reads
/// complete while the runtime thread is held); the first queues a file read; the second sees
/// it already submitted.
#[test]
fn file_io_queued_while_waiting_on_a_device_is_submitted_before_the_next_task_runs() {
    use std::cell::Cell;
    use std::rc::Rc;
    uring_only(|kind| {
        bounded(30, move || {
            // A refused or short submit leaves the read queued, a held completion reorders
            // the wakes: either makes the order this test checks a matter of luck.
            let _faults = common::faults_off(
                &["eagain", "ebusy", "eintr", "short_submit", "late"],
                "checks the order of submits and wakes, which these make a matter of luck",
            );
            let rt = builder(kind).build().expect("runtime");
            if !rt.setup_flags().contains("DEFER_TASKRUN") {
                // Measured at HOOP_KERNEL_LEVEL=5.19 (COOP_TASKRUN): the read stayed queued.
                // The early submit is armed by a turn that waited; with task work run at any
                // system call, the pipes' completions are in the CQ before the loop turns.
                return skip(
                    kind,
                    "needs DEFER_TASKRUN (6.1): without it the completions are posted before \
                     the loop waits, so no turn arms the early submit",
                );
            }
            rt.block_on(async {
                let dir = std::env::temp_dir().join(format!("hoop-flush-{}", std::process::id()));
                std::fs::write(&dir, b"0123456789").unwrap();
                let file = Rc::new(std::fs::File::open(&dir).unwrap());
                let _ = std::fs::remove_file(&dir);
                let (parked_r, parked_w) = pipe();
                let (b_r, b_w) = pipe();
                let (c_r, c_w) = pipe();
                // Stays in the kernel the whole time: the device is "at work".
                let parked = hoop::spawn(Op::new(op::Read::new(
                    parked_r.as_raw_fd(),
                    vec![0u8; 1],
                    u64::MAX,
                )));
                let after_push = Rc::new(Cell::new(0u64));
                let (b_fd, c_fd) = (b_r.as_raw_fd(), c_r.as_raw_fd());
                let b = {
                    let (file, after_push) = (file.clone(), after_push.clone());
                    hoop::spawn(async move {
                        let (r, _) = Op::new(op::Read::new(b_fd, vec![0u8; 1], u64::MAX)).await;
                        r.expect("b's pipe");
                        let mut read = Op::new(op::Read::new(file.as_raw_fd(), vec![0u8; 4], 0));
                        // Polled once: the read is queued (pushed), not awaited yet.
                        let first = std::future::poll_fn(|cx| {
                            std::task::Poll::Ready(std::future::Future::poll(
                                std::pin::Pin::new(&mut read),
                                cx,
                            ))
                        })
                        .await;
                        assert!(first.is_pending(), "a file read does not complete at push");
                        let c = hoop::runtime::current_counters().unwrap();
                        after_push.set(c.sqes_submitted);
                        let (r, buf) = read.await;
                        assert_eq!(r.expect("file read"), 4);
                        assert_eq!(&buf[..], b"0123");
                    })
                };
                let c_task = {
                    let after_push = after_push.clone();
                    hoop::spawn(async move {
                        let (r, _) = Op::new(op::Read::new(c_fd, vec![0u8; 1], u64::MAX)).await;
                        r.expect("c's pipe");
                        let now = hoop::runtime::current_counters().unwrap().sqes_submitted;
                        (after_push.get(), now)
                    })
                };
                // Let the three reads reach the kernel and the loop wait on them.
                hoop::time::sleep(Duration::from_millis(50)).await;
                // Both pipes become readable while this thread is held, so B and C are
                // woken by the same drain, in that order.
                let writer = std::thread::spawn(move || {
                    for w in [&b_w, &c_w] {
                        write_byte(w);
                    }
                    (b_w, c_w)
                });
                let _keep = writer.join().unwrap();
                std::thread::sleep(Duration::from_millis(20));
                b.await.expect("b");
                let (b_saw, c_saw) = c_task.await.expect("c");
                assert!(
                    c_saw > b_saw,
                    "B's file read was still queued when C ran ({b_saw} -> {c_saw} SQEs)"
                );
                write_byte(&parked_w);
                let (r, _) = parked.await.expect("parked");
                assert_eq!(r.expect("parked read"), 1);
            });
        })
    });
}

/// Writes one byte into the pipe `w`.
fn write_byte(w: &std::os::fd::OwnedFd) {
    // SAFETY: one byte from a valid buffer into an open pipe.
    let n = unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    assert_eq!(n, 1, "write to a pipe");
}
