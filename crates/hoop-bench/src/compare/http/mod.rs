//! `hoop bench http`'s comparisons: the side-by-side runs of the static servers (with wrk
//! beside the load generator), one server by URL, and the servers under attack.

pub mod arena;
pub mod attack;
pub mod result;
pub mod run;
pub mod tls;
pub mod url;
pub mod wrk;
