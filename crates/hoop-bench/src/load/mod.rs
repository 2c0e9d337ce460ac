//! The load generators and engines: what each bench does to the thing it measures, and what it
//! counts while doing it (every answer checked).

pub mod cancel;
pub mod count;
pub mod echo;
pub mod fanout;
pub mod file;
pub mod http;
pub mod idle;
pub mod nop;
pub(crate) mod resets;
pub mod thread;
