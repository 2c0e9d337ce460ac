//! `hoop bench cancel`'s scenarios: the std side of the load and its counting ([`load`],
//! [`dgram`], [`sink`]; std and libc only, so the peers' binary includes these three files),
//! and the select loops on hoop ([`hoop`]) and tokio ([`tokio`]).

pub mod dgram;
pub mod hoop;
pub mod load;
pub mod sink;
pub mod tokio;
