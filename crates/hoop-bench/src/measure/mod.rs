//! What a run measures: latency histograms and medians, and the window in which results count.

pub mod latency;
pub mod usage;
pub mod window;
