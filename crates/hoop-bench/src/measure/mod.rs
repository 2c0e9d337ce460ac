//! What a run measures: latency histograms and medians.

pub mod latency;
