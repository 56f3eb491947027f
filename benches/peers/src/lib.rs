//! See `benches/traced.rs`.
