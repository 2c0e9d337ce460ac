//! The engines of `hoop bench file` and `hoop bench fsread`: one test file, its stamped content,
//! and every way of reading and writing it that the benches compare (fio's among them).

pub(crate) mod blocking;
pub mod content;
pub(crate) mod engine;
pub(crate) mod fio;
pub(crate) mod fsread;
pub(crate) mod linux_aio;
pub(crate) mod on_tokio;
pub(crate) mod peer;
pub(crate) mod raw;
pub(crate) mod shared;
pub(crate) mod task;
pub(crate) mod testfile;
pub(crate) mod tokio_fs;
pub(crate) mod uring;
