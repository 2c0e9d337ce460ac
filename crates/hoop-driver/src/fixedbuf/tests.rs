//! The pool's bookkeeping without a ring (an unregistered pool makes no system call), so
//! Miri checks the raw-pointer arithmetic of `buf_ptr`, the slices over the pool's memory and
//! the memory's lifetime (a buffer outliving its pool's handle).

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn buffers_are_disjoint_and_outlive_the_pool_handle() {
    let pool = FixedBufPool::new_unregistered(3, 100).unwrap();
    assert!(!pool.is_registered());
    let mut bufs: Vec<FixedBuf> = (0..3).map(|_| pool.try_take().unwrap()).collect();
    assert!(pool.try_take().is_none(), "all three are out");
    for (i, b) in bufs.iter_mut().enumerate() {
        assert_eq!((b.len(), b.capacity()), (0, 100));
        assert!(b.as_slice_full().iter().all(|&x| x == 0), "zeroed memory");
        b.as_mut_slice_full().fill(i as u8 + 1);
        b.set_len(100);
    }
    // A buffer that overlapped another would show the other's bytes.
    for (i, b) in bufs.iter().enumerate() {
        assert!(b.iter().all(|&x| x == i as u8 + 1));
    }
    let mut indexes: Vec<u16> = bufs.iter().map(FixedBuf::index).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, [0, 1, 2]);
    // The handle goes first: the buffers keep the memory alive.
    drop(pool);
    let last = bufs.pop().unwrap();
    drop(bufs);
    assert_eq!(last.len(), 100);
    assert_eq!(last[99], 3);
}

#[test]
fn copy_from_stops_at_the_capacity() {
    let pool = FixedBufPool::new_unregistered(1, 8).unwrap();
    let mut b = pool.try_take().unwrap();
    assert_eq!(b.copy_from(b"0123456789"), 8);
    assert_eq!(&b[..], b"01234567");
    b.clear();
    assert!(b.is_empty());
    drop(b);
    assert_eq!(pool.available(), 1);
}

#[test]
fn a_waiter_gets_the_returned_buffer() {
    let pool = FixedBufPool::new_unregistered(1, 16).unwrap();
    let held = pool.try_take().unwrap();
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut take = std::pin::pin!(pool.take());
    assert!(take.as_mut().poll(&mut cx).is_pending());
    let index = held.index();
    drop(held);
    assert_eq!(
        count.0.load(Ordering::Relaxed),
        1,
        "the return wakes the waiter"
    );
    match take.as_mut().poll(&mut cx) {
        Poll::Ready(b) => assert_eq!(b.index(), index),
        Poll::Pending => panic!("the returned buffer is the waiter's"),
    }
}

#[test]
#[should_panic(expected = "beyond its capacity")]
fn set_len_past_the_capacity_panics() {
    let pool = FixedBufPool::new_unregistered(1, 8).unwrap();
    pool.try_take().unwrap().set_len(9);
}
