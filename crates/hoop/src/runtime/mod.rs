//! The thread-per-core runtime: one ring, one executor, one thread. [`Runtime::block_on`] runs
//! a future and every task [`spawn`]ed from it; each turn polls the ready tasks, submits what
//! they queued and waits for completions in one `io_uring_enter`, then wakes the tasks whose
//! operations completed. Other threads reach a runtime through its [`Handle`]; blocking calls go
//! to a bounded thread pool with [`spawn_blocking`].

mod blocking;
mod builder;
mod context;
mod executor;
mod handle;
mod join;
mod os;
mod per_core;
mod poll;
mod send_join;
mod shutdown;
mod spawn;
mod task;
pub(crate) mod timers;
mod writers;

pub use blocking::{DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS};
pub use builder::Builder;
pub use context::{current_counters, current_driver, task_count};
pub(crate) use context::{current_id, with_timers, writers};
pub use executor::Runtime;
pub use handle::{spawn_blocking, Handle, WakePath};
pub use join::{AbortHandle, JoinError, JoinHandle};
pub use os::{pin_to_cpu, raise_nofile_limit};
pub use per_core::{run_per_core, run_per_core_reports};
pub use send_join::SendJoinHandle;
pub use shutdown::on_shutdown;
pub use spawn::{spawn, yield_now};
pub(crate) use spawn::{spawn_internal, spawn_pusher, spawn_writer};
pub(crate) use writers::Writers;
