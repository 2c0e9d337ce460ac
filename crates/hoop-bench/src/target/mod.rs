//! What a bench loads or compares against: servers as child processes, the peers' binary,
//! nginx, fio and network namespaces.

pub mod captured;
pub mod child;
pub mod fio;
pub mod http;
pub mod netns;
pub mod nginx;
pub mod peers;
pub mod wrk;
