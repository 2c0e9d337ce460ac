//! The load generators and engines: what drives a target during a run and counts what it
//! verified (echo, no-ops, fan-out).

pub mod echo;
pub mod fanout;
pub mod nop;
pub mod thread;
