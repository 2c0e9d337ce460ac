//! The load generators and engines: what sends the work a bench measures.

pub mod count;
pub mod file;
