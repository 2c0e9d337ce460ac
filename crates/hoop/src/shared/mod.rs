//! hoop from any thread: io_uring files and sockets on rings shared by every thread, awaited as
//! ordinary `Send + 'static` futures from any executor (tokio's multi-thread runtime, hyper,
//! `futures::executor`, plain threads).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use hoop::shared::{File, Rings};
//!
//! let rings = Rings::builder().rings(2).entries(256).build()?;
//! let file = File::open(&rings, "/etc/hostname").await?;
//! // A `Send + 'static` future: spawn it on tokio's multi-thread runtime if you like.
//! let (res, buf) = file.read_at(Vec::with_capacity(4096), 0).await;
//! println!("{} bytes: {:?}", res?, String::from_utf8_lossy(&buf));
//! # Ok(()) }
//! ```
//!
//! The rules are the thread-per-core runtime's: buffers are owned by the operation until its
//! final completion, dropping a future cancels its operation in the kernel, a late accept or
//! open result is closed, and the rings' memory is freed only after every final CQE (dropping
//! the last [`Rings`] handle, from any thread, cancels and reaps first). See [`Rings`] for how
//! SQEs are batched and completions reaped, and DESIGN.md ("Shared rings") for the numbers
//! behind the design. Shared rings need io_uring: [`RingsBuilder::build`] says why it cannot
//! be set up (there is no epoll fallback for them).

mod fs_impl;
mod net;
mod poll;
#[cfg(feature = "tokio")]
mod reactor;

/// Lets shared rings hand their waiting to tokio's reactor (feature `tokio`).
pub(crate) fn install_reactor() {
    #[cfg(feature = "tokio")]
    reactor::install();
}

pub use hoop_driver::shared::{Keep, Rings, RingsBuilder, Route, SharedOp};
pub use hoop_driver::ShutdownReport;

pub use self::fs_impl::{File, OpenOptions};
pub use self::net::{TcpListener, TcpStream};

/// Whole-file helpers on shared rings.
pub mod fs {
    pub use super::fs_impl::{read, write};
}
