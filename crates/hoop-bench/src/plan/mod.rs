//! What a run is asked to do, checked before anything starts: the limits of the flags, the
//! checks every command shares, server lists and sizes.

pub mod arena;
pub mod cancel;
pub mod check;
pub mod file;
pub mod fsread;
pub mod http;
pub mod idle;
pub mod size;

pub use check::{
    check_conns, check_len, check_rounds, check_secs, invalid, parse_names, parse_server_list,
    MAX_CONNS, MAX_LEN, MAX_SECS,
};
