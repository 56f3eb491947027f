//! The program the control and crash tests drive: tape's
//! `examples/pipeline.rs`, built beside the tests by `cargo test
//! --workspace`.

use std::path::{Path, PathBuf};

/// The `tape` binary under test.
pub const TAPE: &str = env!("CARGO_BIN_EXE_tape");

/// The pipeline example's binary (a clear failure if it was not built).
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let p = profile.join("examples").join("pipeline");
    assert!(
        p.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (which builds tape's examples)",
        p.display()
    );
    p
}
