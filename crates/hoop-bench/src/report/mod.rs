//! What a reader sees: where output goes, the tables' and the report's words, the charts,
//! and the quick suite that writes them all.

pub mod cancel;
pub mod charts;
pub mod idle;
pub mod markdown;
pub mod output;
pub mod suite;
