//! Driver implementations. Each operation in [`crate::op`] is implemented once per driver.

pub mod epoll;
pub mod uring;
