//! What `fs.rs`, `fs_fds.rs`, `fs_traits.rs` and `fs_ops.rs` share: the one lock the tests
//! run under (they count fds), temporary directories, a runtime per driver and test data
//! (each file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::DriverKind;

pub static LOCK: Mutex<()> = Mutex::new(());

pub fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub use hoop_test_support::TempDir;

/// Runs `f` on a fresh runtime of `kind`, with a time limit. The caller holds the lock.
pub fn run<F: Future>(kind: DriverKind, f: F) -> F::Output {
    let rt = common::runtime(kind);
    rt.block_on(async {
        hoop::time::timeout(Duration::from_secs(30), f)
            .await
            .expect("test timed out")
    })
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        let take = r.len().min(len - v.len());
        v.extend_from_slice(&r[..take]);
    }
    v
}
