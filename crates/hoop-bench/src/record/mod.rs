//! One typed record per bench: the JSON lines the benches print.

pub mod attack;
pub mod http;
