//! One typed record per bench: the JSON object each measurement prints, one per line. The
//! fields several records share are one struct each in [`usage`], flattened, so every JSON
//! line keeps its field names and order.

pub mod echo;
pub mod fanout;
pub mod nop;
pub mod usage;
