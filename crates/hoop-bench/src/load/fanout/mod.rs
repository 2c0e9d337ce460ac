//! The fan-out load: chat clients that send and verify every delivery ([`client`]), the
//! message format and its in-order verifier ([`verify`]), and the CPU hog ([`hog`]).

pub mod client;
pub mod hog;
mod state;
pub mod verify;
