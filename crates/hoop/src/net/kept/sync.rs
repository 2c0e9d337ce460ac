//! The synchronisation of the kept state: std's, or loom's in the loom model check
//! (`--cfg loom`, test builds only), so that loom explores every interleaving of the real code.

#[cfg(all(loom, test))]
pub(super) use loom::sync::{
    atomic::{AtomicBool, Ordering},
    Mutex, MutexGuard,
};
#[cfg(not(all(loom, test)))]
pub(super) use std::sync::{
    atomic::{AtomicBool, Ordering},
    Mutex, MutexGuard,
};
