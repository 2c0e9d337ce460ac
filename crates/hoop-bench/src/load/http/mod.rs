//! The HTTP load: the verifying client, the static mix, the test files, the arena profiles,
//! and the attackers and fresh client of the attack.

pub mod arena;
pub mod attack;
pub mod client;
pub mod files;
pub mod fresh;
pub mod mix;
mod recv;
pub mod request;
mod tally;
