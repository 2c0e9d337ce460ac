//! What each load did, counted from every thread: operations, bytes verified, and the
//! disturbances it caused or met (cancellations, resets, half-closes, slow reads, errors).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

/// The counters of one load (echo on one driver, HTTP on one driver, files on one driver).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub ops: AtomicU64,
    pub bytes_verified: AtomicU64,
    pub cancellations: AtomicU64,
    pub resets: AtomicU64,
    pub half_closes: AtomicU64,
    pub slow_reads: AtomicU64,
    /// Errors met and survived (a connection cut by a server-side cancel or an injected fault,
    /// a refused connect, a timed-out operation), not failures.
    pub errors: AtomicU64,
}

impl Tally {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self, name: &str) -> LoadSummary {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LoadSummary {
            load: name.to_string(),
            ops: g(&self.ops),
            bytes_verified: g(&self.bytes_verified),
            cancellations: g(&self.cancellations),
            resets: g(&self.resets),
            half_closes: g(&self.half_closes),
            slow_reads: g(&self.slow_reads),
            errors: g(&self.errors),
        }
    }
}

/// One load's totals, for the table and the JSON.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LoadSummary {
    pub load: String,
    pub ops: u64,
    pub bytes_verified: u64,
    pub cancellations: u64,
    pub resets: u64,
    pub half_closes: u64,
    pub slow_reads: u64,
    pub errors: u64,
}

/// Failures: a wrong byte, a leak, a hang. Any one fails the soak.
#[derive(Debug, Default)]
pub(crate) struct Failures(Mutex<Vec<String>>);

impl Failures {
    pub(crate) fn push(&self, what: String) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() < 100 {
                v.push(what);
            }
        }
    }

    pub(crate) fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    pub(crate) fn any(&self) -> bool {
        self.0.lock().map(|v| !v.is_empty()).unwrap_or(true)
    }
}

/// A seeded SplitMix64 generator: every load thread draws its actions from the soak's seed.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// `n` pseudo-random bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}
