//! The load generators and engines: what each bench does to the thing it measures, and what it
//! counts while doing it.

pub mod cancel;
pub mod idle;
