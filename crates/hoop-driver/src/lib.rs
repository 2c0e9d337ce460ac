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
//!
//! Also: [`bufring`] (provided buffer rings), [`fixedbuf`] (registered buffers), [`shared`]
//! (rings any thread can submit to), [`fault`] (seeded fault injection), [`addr`] (socket
//! addresses for the kernel), [`error`], [`home`] (closing fds on their driver's thread) and
//! [`task_key`].
//!
//! # An operation, by hand
//!
//! A [`Driver`] is one thread's ring (or its epoll fallback: [`DriverKind::Auto`] tries
//! io_uring first). An [`Op`] is the future of one operation; it is pushed on its first poll on
//! the thread's current driver ([`Driver::enter`]) and completes after a [`Driver::turn`]
//! reaps it. hoop's runtime does this polling for you; here it is done by hand, reading the
//! start of a file into an owned buffer that comes back with the result:
//!
//! ```
//! use std::future::Future;
//! use std::os::fd::AsRawFd;
//! use std::pin::pin;
//! use std::task::{Context, Poll, Waker};
//!
//! use hoop_driver::{op, Config, Driver, DriverKind, Op};
//!
//! # fn main() -> std::io::Result<()> {
//! let path = std::env::temp_dir().join(format!("hoop-driver-doc-{}", std::process::id()));
//! std::fs::write(&path, b"hello, ring")?;
//! let file = std::fs::File::open(&path)?;
//!
//! // The driver `HOOP_DRIVER` names (uring, epoll), else io_uring with the epoll fallback.
//! let kind = DriverKind::from_env()?.unwrap_or(DriverKind::Auto);
//! let driver = Driver::new(&Config { driver: kind, ..Config::default() })?;
//! let _current = driver.enter();
//!
//! // A no-op through the whole submission and completion path, then a read at offset 0.
//! let mut cx = Context::from_waker(Waker::noop());
//! let mut nop = pin!(Op::new(op::Nop));
//! let done = loop {
//!     if let Poll::Ready(res) = nop.as_mut().poll(&mut cx) {
//!         break res;
//!     }
//!     driver.turn(true)?; // submit, wait for a completion, reap
//! };
//! done?;
//!
//! let mut read = pin!(Op::new(op::Read::new(file.as_raw_fd(), Vec::with_capacity(64), 0)));
//! let (res, buf) = loop {
//!     if let Poll::Ready(out) = read.as_mut().poll(&mut cx) {
//!         break out;
//!     }
//!     driver.turn(true)?;
//! };
//! let n = res?; // at most 11: a read may be short, as read(2) may
//! assert_eq!(buf, b"hello, ring"[..n]); // the buffer's length is exactly the bytes read
//! # std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Cargo features
//!
//! - `fault-injection` (off): seeded fault injection in both drivers, driven by
//!   `HOOP_FAULTS=seed=N,rate=P[,kinds=LIST]` (see [`fault`]); free when off.
//! - `fuzzing` (off): the model checks of the operation table and the buffer ids, for the
//!   cargo-fuzz targets; not an API.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

/// The README's examples, compiled with the doc tests so the crate page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

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
pub mod thread;

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
