//! A ping-pong through a program's own epoll set (`hoop::epoll::Epoll`): a thread echoes each
//! byte it gets on one end of a socket pair; a task writes a byte on the other end, waits on
//! the set for the answer, reads it, and again. Prints round trips per second and the path
//! the waits took: `IORING_OP_EPOLL_WAIT` (io_uring on 6.15), or a wait for the set's fd and a
//! non-blocking `epoll_wait(2)` (older kernels, `HOOP_KERNEL_LEVEL=6.13`, or the epoll
//! driver with `HOOP_DRIVER=epoll`).
//!
//!     cargo run --release -p hoop --example epoll_pingpong -- [ROUND_TRIPS]

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use hoop::epoll::Epoll;

fn main() -> std::io::Result<()> {
    let rounds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("ROUND_TRIPS is a number"))
        .unwrap_or(200_000);
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    let echo = std::thread::spawn(move || {
        let mut b = b;
        let mut byte = [0u8; 1];
        while b.read_exact(&mut byte).is_ok() {
            if b.write_all(&byte).is_err() {
                break;
            }
        }
    });
    let cpu_before = cpu_time_us();
    let rt = hoop::runtime::Builder::new().build()?;
    let (elapsed, path) = rt.block_on(async {
        let path = match hoop::driver::Driver::current() {
            Some(d) if d.supports_opcode(hoop::op::EpollWait::OPCODE) => "IORING_OP_EPOLL_WAIT",
            Some(d) if d.kind() == hoop::driver::DriverKind::Uring => {
                "a poll of the set's fd, then a non-blocking epoll_wait"
            }
            _ => "the epoll driver (the set nested in the driver's own)",
        };
        let set = Epoll::new()?;
        set.add(a.as_fd(), libc::EPOLLIN as u32, 1)?;
        let fd = a.as_raw_fd();
        let start = Instant::now();
        let mut byte = [7u8; 1];
        for _ in 0..rounds {
            // SAFETY: write(2) and read(2) of one byte from/into a local array.
            if unsafe { libc::write(fd, byte.as_ptr().cast(), 1) } != 1 {
                return Err(std::io::Error::last_os_error());
            }
            let events = set.wait(1).await?;
            assert_eq!(events[0].data, 1);
            // SAFETY: as above.
            if unsafe { libc::read(fd, byte.as_mut_ptr().cast(), 1) } != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok::<_, std::io::Error>((start.elapsed(), path))
    })?;
    drop(a);
    let _ = echo.join();
    let cpu_us = cpu_time_us() - cpu_before;
    println!(
        "epoll_pingpong: {rounds} round trips in {:.3} s: {:.0} per second, {:.2} us of CPU \
         each (both threads), through {path}",
        elapsed.as_secs_f64(),
        rounds as f64 / elapsed.as_secs_f64(),
        cpu_us / rounds as f64
    );
    Ok(())
}

/// The process's CPU time so far (user and system), in microseconds.
fn cpu_time_us() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed local.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(ru.ru_utime) + us(ru.ru_stime)
}
