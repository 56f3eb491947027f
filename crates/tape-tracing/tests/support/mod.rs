//! What the tape-tracing tests share: tape recording into a temporary
//! directory, and babeltrace2 reading a trace (skipped with a notice when
//! it is not installed, a failure under `TAPE_REQUIRE_TOOLS=1`).

use std::path::{Path, PathBuf};

#[path = "../../../tape-ctf/tests/support/skipped.rs"]
mod skipped;

/// tape recording into a fresh temporary directory named after `tag` (no
/// control socket, no shared rings, no save at exit); the directory.
pub fn tape_in(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tape-tracing-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    tape::Config::new()
        .dir(&dir)
        .control(false)
        .shared_rings(false)
        .init()
        .expect("init")
        .disarm();
    dir
}

/// babeltrace2's text of `trace` (checked to succeed), or `None` when it
/// is not installed.
#[allow(dead_code)] // not every test binary asks babeltrace2
pub fn babeltrace2(trace: &Path) -> Option<String> {
    match std::process::Command::new("babeltrace2")
        .arg(trace)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Err(_) => {
            assert!(
                std::env::var("TAPE_REQUIRE_TOOLS").as_deref() != Ok("1"),
                "babeltrace2 is not installed and TAPE_REQUIRE_TOOLS=1"
            );
            skipped::skipped(
                "babeltrace2's reading of the tape-tracing traces",
                "apt-get install babeltrace2",
            );
            None
        }
    }
}
