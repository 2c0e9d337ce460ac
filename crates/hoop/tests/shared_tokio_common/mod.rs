//! What `shared_tokio.rs`, `shared_tokio_threads.rs` and `shared_tokio_park.rs` share: the
//! rings, tokio's multi-thread runtime, test data and the start and finish of an operation
//! (each file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;

use std::future::Future;

use common::poll_once;

use hoop::shared::Rings;

pub fn rings() -> Option<Rings> {
    common::shared_rings(128)
}

/// tokio's multi-thread runtime, its workers under the calling test's fault opt-outs.
pub fn runtime() -> tokio::runtime::Runtime {
    let opted_out = hoop::fault::opted_out();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .on_thread_start(move || std::mem::forget(hoop::fault::opt_out_inherited(opted_out)))
        .enable_all()
        .build()
        .unwrap()
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Runs an operation future started elsewhere (`poll_once`'s result) to its end.
pub async fn finish<F: Future + Unpin>(started: Result<F::Output, F>) -> F::Output {
    match started {
        Ok(v) => v,
        Err(f) => f.await,
    }
}

/// Makes a read with `make` and polls it twice on this thread (the first poll queues its SQE,
/// the second submits it), expecting it to stay pending: there is no data. One that an
/// injected error ended (it did not run) is made again.
pub fn start<B, F>(mut make: impl FnMut() -> F, what: &str) -> F
where
    F: Future<Output = (std::io::Result<usize>, B)> + Unpin,
{
    for _ in 0..100 {
        let f = poll_once(make())
            .err()
            .unwrap_or_else(|| panic!("{what} finished at its first poll"));
        match poll_once(f) {
            Err(pending) => return pending,
            Ok((Err(e), _)) if common::injected_error(&e) => continue,
            Ok((res, _)) => panic!("{what} finished with no data to read: {res:?}"),
        }
    }
    panic!("{what}: 100 injected errors in a row")
}
