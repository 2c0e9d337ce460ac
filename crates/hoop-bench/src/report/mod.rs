//! What a reader sees: the tables' and the report's words, the charts, and the quick suite
//! that writes them all (where output goes is [`crate::output`], below every layer that
//! prints).

pub mod arena;
pub mod arena_command;
pub mod attack;
pub mod cancel;
pub mod canvas;
pub mod charts;
pub mod echo;
pub mod fanout;
pub mod file;
pub mod file_quick;
pub mod file_sweep;
pub mod fsread;
pub mod http;
pub mod http_command;
pub mod hyper_pair;
pub mod idle;
pub mod markdown;
pub mod nop;
pub mod ratio;
pub mod ratios;
#[cfg(test)]
mod samples;
pub mod suite;
pub mod tls;
