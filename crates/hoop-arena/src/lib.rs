//! HttpArena's benchmark endpoints (`/baseline11`, `/pipeline`, `/json/{count}`, `/upload`) as
//! one axum [`Router`](axum::Router), with the dataset `/json` answers from.
//!
//! The same Router is served two ways, so that the comparison measures the servers and not the
//! handlers: by `hoop serve arena`, on hoop-http as its fallback service (requests no file
//! answers), and by [`serve_tokio`], the axum-on-tokio baseline. (The actix-web baseline in
//! `peers/` has the same contracts in actix's style, and compiles this crate's `dataset.rs` and
//! `json.rs` themselves.)
//!
//! ```no_run
//! use std::sync::Arc;
//! let dataset = Arc::new(hoop_arena::Dataset::builtin());
//! hoop_arena::serve_tokio("127.0.0.1:8080", 2, dataset)?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod dataset;
mod json;
mod query;
mod router;
mod serve;

pub use dataset::{Dataset, Item, Rating};
pub use router::{router, BASELINE_BODY_LIMIT_BYTES, JSON_COUNT_MAX};
pub use serve::serve_tokio;
