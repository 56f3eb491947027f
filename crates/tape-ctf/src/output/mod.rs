//! The outputs: what a reader makes of decoded events.

pub mod ftrace;
pub mod graph;
pub mod latency;
pub mod profile;
pub mod text;
