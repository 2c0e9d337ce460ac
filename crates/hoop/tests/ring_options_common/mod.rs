//! What `ring_options.rs` and `ring_options_sqpoll.rs` share: io_uring only and one test at a
//! time, the driver of this thread, and batches of no-ops (each file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;

use common::{skip, DriverKind};
use hoop::driver::{op, Driver, Op};

/// One test at a time: SQPOLL rings each have a kernel thread that spins for its idle time,
/// and on a 2-CPU machine several at once starve each other (and the runtimes they serve), so
/// what one test observes would depend on the others.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on io_uring only, saying so for epoll; one such test at a time.
pub fn uring_only(f: impl FnMut(DriverKind)) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    skip(
        DriverKind::Epoll,
        "ring options are io_uring setup flags and registrations",
    );
    hoop::__private::each_driver(&[DriverKind::Uring], false, f)
}

/// The driver of the runtime running on this thread.
pub fn driver() -> Driver {
    Driver::current().expect("inside block_on")
}

/// Runs `n` NOPs, `width` at a time (each in its own task), and checks every result.
pub async fn nops(n: usize, width: usize) {
    let mut left = n;
    while left > 0 {
        let batch = left.min(width);
        left -= batch;
        let handles: Vec<_> = (0..batch).map(|_| hoop::spawn(Op::new(op::Nop))).collect();
        for h in handles {
            h.await.expect("nop task").expect("nop");
        }
    }
}
