//! What a drain produces runs after it, so a waker that runs at once never finds the driver
//! borrowed: wakes and drops that happen while the driver's state is borrowed (inside the CQE
//! drain, or while a dropped stream hands its queued items to its orphan handler) wait in
//! thread-local lists until the borrow is released.
//!
//! An orphaned item (a connection accepted or a buffer received after its stream was dropped)
//! is dropped here rather than in the drain: dropping it closes an fd or returns a buffer to
//! its ring, which wakes the streams waiting for a buffer and may free the ring itself (which
//! unregisters it from the driver). Neither may run with the driver borrowed.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::task::Waker;

thread_local! {
    /// Depth of driver sections in progress on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Something waits in the lists (so a section that deferred nothing ends cheaply).
    static PENDING: Cell<bool> = const { Cell::new(false) };
    static WAKES: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
    static DROPS: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Marks a section in which the driver's state is borrowed; when the outermost one ends
/// (after the borrow was released: drop the guard after the borrow), the deferred wakes and
/// drops run.
#[must_use]
pub(crate) struct Section(());

impl Section {
    pub(crate) fn enter() -> Section {
        DEPTH.with(|d| d.set(d.get() + 1));
        Section(())
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        let outermost = DEPTH.with(|d| {
            let n = d.get().saturating_sub(1);
            d.set(n);
            n == 0
        });
        if outermost && PENDING.with(|p| p.replace(false)) {
            flush();
        }
    }
}

fn inside() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Wakes `w` now, or after the driver section in progress.
pub(crate) fn wake(w: Waker) {
    if inside() {
        WAKES.with(|l| l.borrow_mut().push(w));
        PENDING.with(|p| p.set(true));
    } else {
        w.wake();
    }
}

/// Drops `value` now, or after the driver section in progress.
pub(crate) fn drop_later(value: Box<dyn Any>) {
    if inside() {
        DROPS.with(|l| l.borrow_mut().push(value));
        PENDING.with(|p| p.set(true));
    } else {
        drop(value);
    }
}

/// Runs what was deferred (a drop may defer more: loop until both lists are empty).
fn flush() {
    loop {
        let drops = DROPS.with(|l| std::mem::take(&mut *l.borrow_mut()));
        let wakes = WAKES.with(|l| std::mem::take(&mut *l.borrow_mut()));
        if drops.is_empty() && wakes.is_empty() {
            return;
        }
        drop(drops);
        for w in wakes {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Count(AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn wakes_and_drops_wait_for_the_outermost_section() {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let outer = Section::enter();
        let inner = Section::enter();
        wake(Waker::from(c.clone()));
        drop_later(Box::new(c.clone()));
        drop(inner);
        assert_eq!(c.0.load(Ordering::Relaxed), 0);
        assert_eq!(Arc::strong_count(&c), 3);
        drop(outer);
        assert_eq!(c.0.load(Ordering::Relaxed), 1);
        assert_eq!(Arc::strong_count(&c), 1);
        wake(Waker::from(c.clone()));
        assert_eq!(c.0.load(Ordering::Relaxed), 2, "outside a section: at once");
    }
}
