//! `hoop::epoll::Epoll`: a program's own epoll set waited on by a task, on both drivers (on
//! io_uring through `IORING_OP_EPOLL_WAIT` from 6.15, through a wait for the set's fd and a
//! non-blocking `epoll_wait(2)` before; `scripts/kernel-levels` runs the older path).

use hoop_test_support as common;

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::Duration;

use common::{bounded, each_driver, runtime, DriverKind};
use hoop::epoll::{Epoll, Event};

/// Events of three pipes come back with their data: a pipe written by another thread wakes
/// the wait; level-triggered events repeat until the pipe is drained; at most `max_events` per
/// wait; a deleted fd reports nothing more. Says which path ran.
#[test]
fn a_set_of_pipes_reports_their_events() {
    each_driver(|kind| {
        let path = bounded(60, move || {
            let rt = runtime(kind);
            let pipes: Vec<_> = (0..3)
                .map(|_| std::os::unix::net::UnixStream::pair().unwrap())
                .collect();
            rt.block_on(async move {
                let path = match hoop::driver::Driver::current() {
                    Some(d) if d.supports_opcode(hoop::op::EpollWait::OPCODE) => {
                        "IORING_OP_EPOLL_WAIT"
                    }
                    _ => "a wait for the set's fd and a non-blocking epoll_wait",
                };
                let set = Epoll::new().unwrap();
                for (i, (r, _)) in pipes.iter().enumerate() {
                    set.add(r.as_fd(), libc::EPOLLIN as u32, 100 + i as u64)
                        .unwrap();
                }
                // Written from another thread while the task waits.
                let mut w1 = pipes[1].1.try_clone().unwrap();
                let writer = common::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    w1.write_all(b"x").unwrap();
                });
                let got = set.wait(8).await.unwrap();
                assert_eq!(
                    got,
                    vec![Event {
                        events: libc::EPOLLIN as u32,
                        data: 101
                    }]
                );
                writer.join().unwrap();
                // Level-triggered: the same event again while the byte is unread.
                assert_eq!(set.wait(8).await.unwrap()[0].data, 101);
                // Two more ready: one per wait with max_events 1, both seen.
                let mut w0 = pipes[0].1.try_clone().unwrap();
                let mut w2 = pipes[2].1.try_clone().unwrap();
                w0.write_all(b"y").unwrap();
                w2.write_all(b"z").unwrap();
                let mut r1 = pipes[1].0.try_clone().unwrap();
                let mut b = [0u8; 1];
                r1.read_exact(&mut b).unwrap();
                let mut seen = Vec::new();
                while seen.len() < 2 {
                    let e = set.wait(1).await.unwrap();
                    assert_eq!(e.len(), 1);
                    let data = e[0].data;
                    let mut r = pipes[(data - 100) as usize].0.try_clone().unwrap();
                    r.read_exact(&mut b).unwrap();
                    seen.push(data);
                }
                seen.sort();
                assert_eq!(seen, vec![100, 102]);
                // Deleted: its next byte wakes nobody; the others still do.
                set.delete(pipes[0].0.as_fd()).unwrap();
                w0.write_all(b"y").unwrap();
                w2.write_all(b"z").unwrap();
                assert_eq!(set.wait(8).await.unwrap()[0].data, 102);
                let mut r2 = pipes[2].0.try_clone().unwrap();
                r2.read_exact(&mut b).unwrap();
                // A wait dropped in flight (nothing ready) leaves the set usable.
                let dropped = hoop::time::timeout(Duration::from_millis(10), set.wait(8)).await;
                assert!(dropped.is_err(), "{dropped:?}");
                w2.write_all(b"z").unwrap();
                assert_eq!(set.wait(8).await.unwrap()[0].data, 102);
                path
            })
        });
        if kind == DriverKind::Uring {
            eprintln!("epoll_set: on io_uring the wait ran through {path}");
        }
    });
}
