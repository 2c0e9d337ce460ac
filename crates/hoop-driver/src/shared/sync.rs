//! The synchronisation of the shared rings' concurrent core (`handoff`): std's, or loom's in
//! the loom model checks (`--cfg loom`, test builds only), so that loom explores every
//! interleaving of the real code. Only what `handoff` uses is here.

#[cfg(all(loom, test))]
pub(crate) use loom::sync::{
    atomic::{AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};
#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};
