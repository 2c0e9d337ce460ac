use super::*;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

thread_local! {
    static RING: RefCell<Option<BufRing>> = const { RefCell::new(None) };
    static REENTERED: Cell<bool> = const { Cell::new(false) };
}

/// A waker that, when woken, takes the returned buffer and waits again on the same ring:
/// it touches the ring's waiter list from inside `wake`.
struct Reenter;
impl Wake for Reenter {
    fn wake(self: Arc<Self>) {
        RING.with(|r| {
            let r = r.borrow();
            let ring = r.as_ref().expect("ring set");
            let _ = ring.take_user();
            let waker = Waker::from(self.clone());
            let mut cx = Context::from_waker(&waker);
            assert!(ring.poll_available(&mut cx).is_pending());
            REENTERED.with(|x| x.set(true));
        });
    }
}

/// A buffer's return wakes its waiters outside the ring's own borrow, so a waker
/// that runs synchronously may use the ring.
#[test]
fn returning_a_buffer_wakes_outside_every_borrow() {
    let ring = BufRing::new_user(2, 64).unwrap();
    let (a, _) = ring.take_user().unwrap();
    let (_b, _) = ring.take_user().unwrap();
    RING.with(|r| *r.borrow_mut() = Some(ring.clone()));
    let waker = Waker::from(Arc::new(Reenter));
    let mut cx = Context::from_waker(&waker);
    assert!(ring.poll_available(&mut cx).is_pending());
    ring.give_back(a);
    assert!(REENTERED.with(|x| x.get()), "the waiter was woken");
    RING.with(|r| *r.borrow_mut() = None);
}

/// Counts its wake-ups.
struct Count(std::sync::atomic::AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn woken(c: &Arc<Count>) -> usize {
    c.0.load(std::sync::atomic::Ordering::Relaxed)
}

/// N receives waiting for a buffer cost O(N) in all. Each returned buffer wakes
/// one waiter (the oldest), polling again while queued keeps the place without a scan, and
/// a woken waiter that leaves without its buffer hands the wake-up on. (The list it
/// replaces was scanned on every poll and woken whole on every returned buffer: O(N^2).)
#[test]
fn n_waiters_cost_linear_work_and_each_buffer_wakes_one() {
    const N: usize = 2000;
    let ring = BufRing::new_user(1, 64).unwrap();
    let (mut bid, _) = ring.take_user().unwrap();
    let counts: Vec<Arc<Count>> = (0..N)
        .map(|_| Arc::new(Count(Default::default())))
        .collect();
    let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
    let mut tickets: Vec<WaitTicket> = vec![None; N];
    for round in 0..3 {
        for (w, t) in wakers.iter().zip(tickets.iter_mut()) {
            let mut cx = Context::from_waker(w);
            assert!(ring.poll_available_queued(&mut cx, t).is_pending());
        }
        assert_eq!(
            ring.queued(),
            N,
            "polled again (round {round}), queued once"
        );
    }
    let before = ring.wait_work();
    for i in 0..N {
        ring.give_back(bid);
        assert_eq!(woken(&counts[i]), 1, "waiter {i} woken, in order");
        if i + 1 < N {
            assert_eq!(woken(&counts[i + 1]), 0, "one waiter per buffer");
        }
        let mut cx = Context::from_waker(&wakers[i]);
        assert!(ring
            .poll_available_queued(&mut cx, &mut tickets[i])
            .is_ready());
        assert_eq!(tickets[i], None, "the ticket is used up");
        bid = ring.take_user().unwrap().0;
    }
    assert_eq!(ring.queued(), 0);
    let work = ring.wait_work() - before;
    assert!(work <= 3 * N as u64, "{work} steps for {N} waiters");

    // A woken waiter that leaves without the buffer wakes the next one; one that leaves
    // while queued wakes nobody.
    let mut t = [None, None, None];
    for (w, t) in wakers.iter().zip(t.iter_mut()) {
        let mut cx = Context::from_waker(w);
        assert!(ring.poll_available_queued(&mut cx, t).is_pending());
    }
    ring.leave_queue(&mut t[1]);
    assert_eq!(ring.queued(), 2);
    ring.give_back(bid);
    assert_eq!(woken(&counts[0]), 2);
    ring.leave_queue(&mut t[0]);
    assert_eq!(
        (woken(&counts[1]), woken(&counts[2])),
        (1, 2),
        "handed on to the third"
    );
    assert_eq!(ring.queued(), 0);
    let mut cx = Context::from_waker(&wakers[2]);
    assert!(ring.poll_available_queued(&mut cx, &mut t[2]).is_ready());
}
