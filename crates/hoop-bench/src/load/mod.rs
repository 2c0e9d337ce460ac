//! The load generators and engines: what sends the work a bench measures and checks every
//! answer.

pub mod count;
pub mod echo;
pub mod fanout;
pub mod file;
pub mod http;
pub mod nop;
pub mod thread;
