//! One typed record per bench: the JSON lines the benches print with `--json`.

pub mod attack;
pub mod cancel;
pub mod file;
pub mod fsread;
pub mod http;
pub mod idle;
