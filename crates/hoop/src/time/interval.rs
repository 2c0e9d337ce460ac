//! [`Interval`]: ticks at a fixed period, with tokio's choices for ticks that were missed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{sleep_until, Instant, Sleep};

/// A tick later than this after its deadline counts as missed (tokio's threshold).
const LATE: Duration = Duration::from_millis(5);

/// What an [`Interval`] does when ticks were missed (the task was busy longer than a period):
/// the same three choices as tokio's, with the same default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Tick as fast as possible until caught up: the deadlines stay `start + k * period`.
    #[default]
    Burst,
    /// Tick once now, then every `period` from now on (the schedule shifts).
    Delay,
    /// Tick once now, then at the next deadline of the original schedule (missed ones are
    /// dropped).
    Skip,
}

impl MissedTickBehavior {
    fn next_deadline(self, missed: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => missed + period,
            MissedTickBehavior::Delay => now + period,
            MissedTickBehavior::Skip => {
                let late_ns = (now - missed).as_nanos() % period.as_nanos();
                now + (period - Duration::from_nanos(late_ns as u64))
            }
        }
    }
}

/// Ticks every `period`; the first tick completes at once. See [`Interval`].
///
/// # Panics
/// If `period` is zero (as tokio's `interval`).
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
/// If `period` is zero.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "hoop::time::interval: `period` must be non-zero"
    );
    Interval {
        next: start,
        period,
        sleep: Box::pin(sleep_until(start)),
        behavior: MissedTickBehavior::default(),
    }
}

/// A timer that ticks at a fixed period (tokio's `Interval`): [`tick`](Self::tick) completes
/// at each deadline and returns it. Each wait is one timer on the ring.
///
/// ```no_run
/// # hoop::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// let mut every = hoop::time::interval(Duration::from_millis(100));
/// every.set_missed_tick_behavior(hoop::time::MissedTickBehavior::Skip);
/// for _ in 0..3 {
///     every.tick().await; // the first one at once
/// }
/// # });
/// ```
#[derive(Debug)]
pub struct Interval {
    /// The deadline of the next tick.
    next: Instant,
    period: Duration,
    sleep: Pin<Box<Sleep>>,
    behavior: MissedTickBehavior,
}

impl Interval {
    /// Completes at the next tick's deadline and returns it. Cancel-safe: a dropped `tick`
    /// loses no tick.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a tick a dropped call would have returned is returned by the
    /// next call.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (for hand-written futures).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let deadline = self.next;
        let now = Instant::now();
        self.next = if now > deadline + LATE {
            self.behavior.next_deadline(deadline, now, self.period)
        } else {
            deadline + self.period
        };
        self.sleep = Box::pin(sleep_until(self.next));
        Poll::Ready(deadline)
    }

    /// Restarts the schedule: the next tick comes one period from now.
    pub fn reset(&mut self) {
        self.reset_at(Instant::now() + self.period);
    }

    /// The next tick comes at `deadline`, and the period counts from there.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.next = deadline;
        self.sleep = Box::pin(sleep_until(deadline));
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What happens to missed ticks.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.behavior
    }

    /// Sets what happens to missed ticks.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.behavior = behavior;
    }
}

impl futures::Stream for Interval {
    type Item = Instant;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_tick_rules() {
        let t0 = Instant::now();
        let p = Duration::from_millis(10);
        let now = t0 + Duration::from_millis(35);
        assert_eq!(MissedTickBehavior::Burst.next_deadline(t0, now, p), t0 + p);
        assert_eq!(MissedTickBehavior::Delay.next_deadline(t0, now, p), now + p);
        assert_eq!(
            MissedTickBehavior::Skip.next_deadline(t0, now, p),
            t0 + Duration::from_millis(40)
        );
    }
}
