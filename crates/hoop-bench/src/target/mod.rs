//! What a bench loads or compares against: servers as child processes, the peers' binary,
//! nginx, wrk and network namespaces (fio, a file engine, is in `load::file`).

pub mod arena;
pub mod captured;
pub mod child;
pub mod http;
pub mod netns;
pub mod nginx;
pub mod peers;
pub mod tls;
pub mod wrk;
