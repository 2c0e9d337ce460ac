//! The records: one typed record per bench, each one JSON line of `--json`.

pub mod cancel;
pub mod idle;
