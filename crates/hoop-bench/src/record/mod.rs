//! One typed record per bench: the JSON lines the benches print with `--json`. The fields
//! several records share are one struct each in [`usage`], flattened, so every JSON line keeps
//! its field names and order.

pub mod arena;
pub mod attack;
pub mod cancel;
pub mod echo;
pub mod fanout;
pub mod file;
pub mod fsread;
pub mod http;
pub mod idle;
pub mod nop;
pub mod usage;
