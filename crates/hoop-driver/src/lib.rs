//! hoop's driver: the io_uring ring, the operation lifecycle, buffers and operations.
//!
//! This crate is the lower layer of [hoop](https://docs.rs/hoop); most users want that crate.
//! Its pieces, by kernel concept:
//! - [`op`]: every operation, defined once (its data and what its completion means);
//! - [`sys::uring`]: how the io_uring driver starts each operation (`UringOp`), and the ring;
//! - [`sys::epoll`]: the readiness fallback (`EpollOp`): epoll for sockets, a pool for files;
//! - [`Driver`] and [`Op`]: the per-thread driver handle and the future of one operation;
//! - [`buf`]: the `unsafe` buffer traits that hand memory to the kernel by ownership, and
//!   [`aligned`]: aligned heap buffers for `O_DIRECT`;
//! - [`setup`]: why a ring could not be set up, in words a user can act on;
//! - [`level`]: `HOOP_KERNEL_LEVEL`, the features of an older kernel switched off.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(any(test, feature = "fuzzing"))]
#[macro_use]
mod model_check;

pub mod addr;
pub mod aligned;
pub mod buf;
pub mod bufring;
mod config;
mod counters;
mod deferred;
mod driver;
pub mod error;
pub mod fault;
pub mod fixedbuf;
mod fixedfile;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod home;
pub mod level;
mod lifecycle;
mod link;
mod msg_ring;
mod multi;
mod notifier;
pub mod op;
pub mod setup;
pub mod shared;
mod slots;
pub mod sys;
mod table;
#[cfg(any(test, feature = "fuzzing"))]
mod table_model;
pub mod task_key;

pub use addr::SockAddr;
pub use aligned::AlignedBuf;
pub use buf::{BufResult, IoBuf, IoBufMut, Slice, StaticBuf};
pub use bufring::{BufRing, RingBuf};
pub use config::{default_cq_entries, Config, DriverKind};
pub use counters::Counters;
pub use driver::future::Op;
pub use driver::{Driver, EnterGuard};
pub use fixedbuf::{FixedBuf, FixedBufPool, FixedIoBuf};
pub use home::Home;
pub use lifecycle::Completion;
pub use link::{link, Link};
pub use msg_ring::RingWaker;
pub use multi::MultiOp;
pub use notifier::Notifier;
pub use sys::uring::{PushError, ShutdownReport};
