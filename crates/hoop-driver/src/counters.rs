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
}
