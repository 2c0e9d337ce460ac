//! An operation first polled by one of the runtime's tasks is woken by the task's key
//! (no waker kept). These tests check that the key path never loses a wake: an operation moved
//! to another task before it completes, an operation polled under a combinator's own waker,
//! and one task waiting on many operations at once. Each runs on both drivers.

use hoop_test_support as common;

use common::pipe;

use std::cell::RefCell;
use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use common::{bounded, each_driver, runtime};
use hoop::driver::{op, Op};

fn write_all(fd: &OwnedFd, bytes: &[u8]) {
    // SAFETY: writes from a live slice to an fd this test owns.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    assert_eq!(n, bytes.len() as isize);
}

/// Task A polls a read (pending: the pipe is empty) and hands the operation to task B, then
/// ends (its key goes stale). The data arrives; B must get it: the stale key wakes nobody, and
/// B's own poll registers B.
#[test]
fn an_operation_handed_to_another_task_completes_there() {
    each_driver(|kind| {
        bounded(20, move || {
            let rt = runtime(kind);
            rt.block_on(async move {
                let (r, w) = pipe();
                let rfd = r.as_raw_fd();
                type Read = Op<op::Read<Vec<u8>>>;
                let handoff: Rc<RefCell<Option<Read>>> = Rc::new(RefCell::new(None));
                let h = handoff.clone();
                hoop::spawn(async move {
                    let mut read = Op::new(op::Read::new(rfd, vec![0u8; 16], u64::MAX));
                    let first =
                        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut read).poll(cx))).await;
                    assert!(first.is_pending(), "the pipe is empty");
                    *h.borrow_mut() = Some(read);
                })
                .await
                .unwrap();
                let read = handoff.borrow_mut().take().unwrap();
                let b = hoop::spawn(async move {
                    let (res, buf) = read.await;
                    (res.unwrap(), buf)
                });
                hoop::time::sleep(std::time::Duration::from_millis(20)).await;
                write_all(&w, b"handed over");
                let (n, buf) = b.await.unwrap();
                assert_eq!(&buf[..n], b"handed over");
                drop(r);
            });
        });
    });
}

/// A waker that counts its wakes and passes them on.
struct Counting {
    inner: Waker,
    wakes: AtomicUsize,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.inner.wake_by_ref();
    }
}

/// Polls its future with a waker of its own, as `FuturesUnordered` or `select!` do: the
/// completion must reach that waker, not only the task.
struct OwnWaker<F> {
    inner: F,
    waker: Option<Arc<Counting>>,
}

impl<F: Future + Unpin> Future for OwnWaker<F> {
    type Output = (F::Output, usize);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let counting = self
            .waker
            .get_or_insert_with(|| {
                Arc::new(Counting {
                    inner: cx.waker().clone(),
                    wakes: AtomicUsize::new(0),
                })
            })
            .clone();
        let waker = Waker::from(counting.clone());
        let mut own = Context::from_waker(&waker);
        match Pin::new(&mut self.inner).poll(&mut own) {
            Poll::Ready(v) => Poll::Ready((v, counting.wakes.load(Ordering::SeqCst))),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[test]
fn a_combinators_own_waker_is_woken() {
    each_driver(|kind| {
        bounded(20, move || {
            let rt = runtime(kind);
            rt.block_on(async move {
                let (r, w) = pipe();
                let read = Op::new(op::Read::new(r.as_raw_fd(), vec![0u8; 8], u64::MAX));
                let task = hoop::spawn(OwnWaker {
                    inner: read,
                    waker: None,
                });
                hoop::time::sleep(std::time::Duration::from_millis(20)).await;
                write_all(&w, b"woken");
                let ((res, buf), wakes) = task.await.unwrap();
                assert_eq!(&buf[..res.unwrap()], b"woken");
                assert!(wakes >= 1, "the combinator's waker was never woken");
                drop(r);
            });
        });
    });
}

/// One task with 64 no-ops and 8 pipe reads in flight at once, then the main future doing
/// the same: every one completes (the task is queued once per drain, however many of its
/// operations completed).
#[test]
fn one_task_waiting_on_many_operations_sees_them_all() {
    each_driver(|kind| {
        bounded(20, move || {
            let rt = runtime(kind);
            rt.block_on(async move {
                for round in 0..2 {
                    let work = async move {
                        let nops: Vec<_> = (0..64).map(|_| Op::new(op::Nop)).collect();
                        let pipes: Vec<_> = (0..8).map(|_| pipe()).collect();
                        let reads: Vec<_> = pipes
                            .iter()
                            .map(|(r, _)| {
                                Op::new(op::Read::new(r.as_raw_fd(), vec![0u8; 4], u64::MAX))
                            })
                            .collect();
                        for (i, (_, w)) in pipes.iter().enumerate() {
                            write_all(w, &[i as u8; 4]);
                        }
                        let nops = futures::future::join_all(nops).await;
                        assert!(nops.iter().all(|r| r.is_ok()), "every no-op succeeds");
                        let reads = futures::future::join_all(reads).await;
                        for (i, (res, buf)) in reads.into_iter().enumerate() {
                            assert_eq!(res.unwrap(), 4);
                            assert_eq!(buf, vec![i as u8; 4]);
                        }
                        drop(pipes);
                    };
                    if round == 0 {
                        hoop::spawn(work).await.unwrap();
                    } else {
                        work.await;
                    }
                }
            });
        });
    });
}
