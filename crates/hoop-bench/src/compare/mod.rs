//! The comparisons: one runner for every bench (targets x cells x rounds, medians, ratios
//! paired within a round) in [`matrix`], and each bench's targets, cells and run.

pub mod cancel;
pub mod echo;
pub mod fanout;
pub mod file;
pub mod file_quick;
pub mod fsread;
pub mod http;
pub mod idle;
pub mod matrix;
pub mod nop;

pub use matrix::{
    med, pair_ratio, pair_ratios, single_status, Matrix, Order, Outcome, Sample, Verified,
};
