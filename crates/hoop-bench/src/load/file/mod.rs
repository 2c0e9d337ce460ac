//! The engines of `hoop bench file` and `hoop bench fsread`: one test file, its stamped content,
//! and every way of reading and writing it that the benches compare.

pub mod blocking;
pub mod content;
pub mod engine;
pub mod fsread;
pub mod linux_aio;
pub mod on_tokio;
pub mod peer;
pub mod raw;
pub mod shared;
pub mod task;
pub mod testfile;
pub mod tokio_fs;
pub mod uring;
