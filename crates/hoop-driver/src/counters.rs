//! Per-ring counters: the numbers behind "syscalls per request".

/// What one ring did so far. Read with `Driver::counters()`; all values only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// SQEs the kernel consumed.
    pub sqes_submitted: u64,
    /// `io_uring_enter` calls (the driver's only syscall on the I/O path).
    pub enter_calls: u64,
    /// CQEs reaped.
    pub cqes_reaped: u64,
    /// Largest number of CQEs reaped in one drain.
    pub max_cqe_batch: u64,
    /// Times an operation found no room (in-flight budget or SQ full) and waited in the FIFO.
    pub room_waits: u64,
    /// Times the CQ overflowed into the kernel's backlog (`IORING_SQ_CQ_OVERFLOW` or `-EBUSY`).
    pub overflow_events: u64,
    /// `ASYNC_CANCEL` SQEs submitted for dropped operations.
    pub cancels_submitted: u64,
    /// CQEs whose `user_data` named no live operation (should stay 0).
    pub stale_cqes: u64,
    /// Times the CQ grew (`IORING_REGISTER_RESIZE_RINGS`, `Config::resize_rings`).
    pub ring_resizes: u64,
    /// With depth sampling on (`Config::sample_depth`): the sum, over time, of the operations
    /// submitted to the kernel and not yet reaped, in operation-nanoseconds (the wake-up poll
    /// and cancels not counted). Divided by `depth_sampled_ns`: the mean queue depth.
    pub depth_ns: u128,
    /// With depth sampling on: the nanoseconds `depth_ns` covers (from the first submit).
    pub depth_sampled_ns: u64,
}

impl Counters {
    /// The time-weighted mean of the operations in the kernel, when depth sampling was on and
    /// some time was sampled.
    pub fn mean_depth(&self) -> Option<f64> {
        (self.depth_sampled_ns > 0).then(|| self.depth_ns as f64 / self.depth_sampled_ns as f64)
    }

    /// The mean depth between two readings of the same ring (`self` the later one).
    pub fn mean_depth_since(&self, earlier: &Counters) -> Option<f64> {
        let ns = self
            .depth_sampled_ns
            .checked_sub(earlier.depth_sampled_ns)?;
        let sum = self.depth_ns.checked_sub(earlier.depth_ns)?;
        (ns > 0).then(|| sum as f64 / ns as f64)
    }
}
