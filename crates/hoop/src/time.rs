//! Time: sleeps and timeouts on the runtime's own timers, and deadlines linked to operations
//! in the kernel (`IORING_OP_LINK_TIMEOUT`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub use std::time::Instant;

mod interval;
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};

use hoop_driver::op::OpCode;
use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, Op};

use crate::runtime::timers::{GlobalTimers, TimerKey};
use crate::runtime::with_timers;

/// A future that completes at a deadline. Dropping it forgets its timer.
///
/// A sleep costs no SQE: it waits in its runtime's own timer map, whose next deadline bounds
/// the runtime's wait in the driver, so it works on every ring (IOPOLL rings, which refuse
/// timeout operations, included) and never blocks the thread. Polled where no hoop runtime
/// runs (from another executor), it is woken by hoop's timer thread.
#[must_use = "a sleep does nothing unless awaited"]
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    reg: Option<Reg>,
    /// It returned `Ready` since the deadline was set (`FusedFuture`, in `crate::select`).
    pub(crate) fired: bool,
}

/// Where a pending sleep's waker is registered.
#[derive(Debug, Clone, Copy)]
enum Reg {
    /// In the timers of runtime `runtime`.
    Local { runtime: u64, key: TimerKey },
    /// In the process-wide timer thread's.
    Global(TimerKey),
}

/// Completes after `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Completes at `deadline` (at once if it passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        reg: None,
        fired: false,
    }
}

impl Sleep {
    /// When the sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline passed.
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Moves the deadline (the sleep becomes pending again if the new one is later).
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        this.unregister();
        this.deadline = deadline;
        this.fired = false;
    }

    fn unregister(&mut self) {
        match self.reg.take() {
            Some(Reg::Local { runtime, key }) => {
                // On another thread than its runtime's, the entry stays until it fires: a
                // spurious wake-up at most.
                let _ = with_timers(|t, id| {
                    if id == runtime {
                        t.remove(key);
                    }
                });
            }
            Some(Reg::Global(key)) => {
                if let Some(g) = GlobalTimers::get() {
                    g.remove(key);
                }
            }
            None => {}
        }
    }

    /// Registers (or refreshes) the waker where this poll runs.
    fn register(&mut self, waker: &std::task::Waker) {
        let deadline = self.deadline;
        let local = with_timers(|t, id| match self.reg {
            Some(Reg::Local { runtime, key }) if runtime == id && t.update(key, waker) => {
                Reg::Local { runtime, key }
            }
            _ => Reg::Local {
                runtime: id,
                key: t.insert(deadline, waker),
            },
        });
        let reg = match local {
            Some(reg) => Some(reg),
            None => GlobalTimers::get().map(|g| match self.reg {
                Some(Reg::Global(key)) if g.update(key, waker) => Reg::Global(key),
                _ => Reg::Global(g.insert(deadline, waker)),
            }),
        };
        if let (Some(Reg::Global(old)), Some(Reg::Local { .. })) = (self.reg, reg) {
            if let Some(g) = GlobalTimers::get() {
                g.remove(old);
            }
        }
        self.reg = reg;
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        this.fired = Instant::now() >= this.deadline;
        if this.fired {
            this.unregister();
            return Poll::Ready(());
        }
        this.register(cx.waker());
        if this.reg.is_none() {
            // No runtime here and no timer thread could start: complete rather than hang
            // (the one case a sleep ends early; spawning a thread failed).
            this.fired = true;
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

/// The error of [`timeout`] and of every `*_timeout` method: the deadline passed first. It
/// names the deadline ("deadline of 200 ms passed"); as an `io::Error` its kind is `TimedOut`.
pub use hoop_driver::op::Elapsed;

/// Runs `future` with a time limit: its output, or [`Elapsed`] ("deadline of 200 ms passed")
/// if `duration` passed first (the future is then dropped, which cancels its operations).
///
/// # Cancel safety
///
/// This function is cancel safe if `future` is: dropping the timeout drops the future.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = std::pin::pin!(future);
    let mut sleep = sleep(duration);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed::new(duration))),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Runs operation `op` with a deadline linked to it in the kernel (`IORING_OP_LINK_TIMEOUT`): no
/// separate timer and no second wake-up, unlike [`timeout`]. If the deadline passes first, the
/// kernel cancels the operation and it fails with `io::ErrorKind::TimedOut` (its buffer is given
/// back as usual). On the epoll driver the driver's timer heap does the same.
pub fn op_timeout<T>(duration: Duration, op: T) -> Op<op::Deadline<T>>
where
    T: OpCode + UringOp + EpollOp,
    T::Output: op::TimedOut,
{
    Op::new(op::Deadline::new(op, duration))
}
