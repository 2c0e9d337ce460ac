//! The records: one typed record per bench, each a JSON line with `--json`.

pub mod file;
pub mod fsread;
