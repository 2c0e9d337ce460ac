//! `hoop::shared` rings and their setups: an idle reaper uses no CPU, SQPOLL rings run no-ops
//! and files, and an IOPOLL set sends what a polled ring refuses to its plain ring. Plain OS
//! threads and a minimal `block_on` (no runtime at all), one test at a time
//! (`common::serial`: the reaper's CPU time is counted); the whole file runs again on the
//! epoll engine in a child process, where the tests that need io_uring skip with a line.

use hoop_test_support as common;
use hoop_test_support::block_on;

use std::os::fd::AsRawFd;

use std::time::Duration;

use common::serial;
use hoop::shared::{Rings, TcpStream};

mod shared_common;
use shared_common::*;

/// Whether this process runs the tests on the epoll engine; `what` needs io_uring, and the
/// skip is said on stderr.
fn skip_on_epoll(what: &str) -> bool {
    let epoll = std::env::var_os(EPOLL_CHILD_ENV).is_some();
    if epoll {
        hoop::__private::skip(hoop::DriverKind::Epoll, &format!("{what} needs io_uring"));
    }
    epoll
}

#[test]
fn an_idle_reaper_uses_no_cpu() {
    let _g = serial();
    let Some(rings) = rings() else { return };
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let stream = TcpStream::from_std(&rings, unsafe_tcp(a));
    // One read stays in flight: the reaper waits in the kernel for it.
    let read = poll_once(Box::pin(stream.read(vec![0u8; 8])));
    block_on(rings.nop()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let cpu = reaper_cpu_ticks();
    std::thread::sleep(Duration::from_millis(500));
    let used = reaper_cpu_ticks() - cpu;
    // A busy loop would use ~50 ticks (100 Hz) in 500 ms.
    assert!(used <= 2, "reapers used {used} ticks of CPU while idle");
    drop(read);
    let _ = stream.as_raw_fd();
}

/// utime + stime of every reaper thread of this process, in clock ticks.
fn reaper_cpu_ticks() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("hoop-reaper") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of stat (utime, stime) are the 12th and 13th after the comm.
        total += fields
            .get(11)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
        total += fields
            .get(12)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

#[test]
fn sqpoll_rings_run_no_ops_and_files() {
    let _g = serial();
    if skip_on_epoll("SQPOLL") {
        return;
    }
    let rings = match Rings::builder().rings(1).entries(32).sqpoll(true).build() {
        Ok(r) => r,
        Err(e) => return eprintln!("SKIP: {e}"),
    };
    eprintln!("sqpoll ring flags: {:?}", rings.setup_flags(0));
    for _ in 0..100 {
        let batch: Vec<_> = (0..8).map(|_| rings.nop()).collect();
        for r in block_on(futures::future::join_all(batch)) {
            r.unwrap();
        }
    }
    let path = std::env::temp_dir().join(format!("hoop-shared-sqpoll-{}", std::process::id()));
    block_on(hoop::shared::fs::write(&rings, &path, vec![7u8; 10_000])).unwrap();
    assert_eq!(
        block_on(hoop::shared::fs::read(&rings, &path)).unwrap(),
        vec![7u8; 10_000]
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(rings.in_flight(), 0);
}

#[test]
fn iopoll_sets_send_what_a_polled_ring_refuses_to_the_plain_ring() {
    let _g = serial();
    if skip_on_epoll("IOPOLL") {
        return;
    }
    let rings = match Rings::builder().rings(1).entries(32).iopoll(true).build() {
        Ok(r) => r,
        Err(e) => return eprintln!("SKIP: IOPOLL rings unavailable: {e}"),
    };
    if let Some(reason) = rings.fallback_reason() {
        // The set fell back to epoll (io_uring refused, or below its kernel level).
        return hoop::__private::skip(
            hoop::DriverKind::Uring,
            &format!("IOPOLL needs io_uring: {reason}"),
        );
    }
    assert_eq!(rings.ring_count(), 2, "one polled ring and one plain ring");
    // Opens, statx, buffered files and sockets would fail with EINVAL on the polled ring.
    // On the disk (a tmpfs /tmp would refuse O_DIRECT).
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hoop-shared-iopoll-{}", std::process::id()));
    block_on(hoop::shared::fs::write(&rings, &path, vec![1u8; 8192])).unwrap();
    assert_eq!(
        block_on(hoop::shared::fs::read(&rings, &path))
            .unwrap()
            .len(),
        8192
    );
    let direct = block_on(
        hoop::shared::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&rings, &path),
    );
    match direct {
        Err(e) => eprintln!("SKIP: O_DIRECT unavailable here: {e}"),
        Ok(file) => {
            let (res, buf) = block_on(file.read_at(hoop::AlignedBuf::new(4096, 4096).unwrap(), 0));
            match res {
                Ok(n) => {
                    assert_eq!(n, 4096);
                    assert!(buf[..].iter().all(|&b| b == 1));
                }
                // A device without poll queues refuses polled I/O: visible, not a failure.
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    eprintln!("SKIP: this device has no poll queues: {e}")
                }
                Err(e) => panic!("O_DIRECT read on the polled ring: {e}"),
            }
        }
    }
    std::fs::remove_file(&path).unwrap();
}
