//! A check that cannot run here (a tool, the suites or a privilege is
//! missing): [`skipped`] prints a notice and, under the README's test
//! command (`scripts/test.sh`, which sets `TAPE_SKIPPED_LOG`), adds a line
//! to the list that command prints at its end, since cargo's capture hides
//! the notices of passing tests. A check that needs an outside tool
//! skips through [`required`], which fails instead under
//! `TAPE_REQUIRE_TOOLS=1` (CI); one that needs what CI always has (root,
//! an optimised build) through [`skipped`]. Used by the support
//! modules of every test crate.

use std::io::Write;

/// [`skipped`] for a check that needs an outside tool (`how` gets it):
/// a failure instead under `TAPE_REQUIRE_TOOLS=1`, where every tool must
/// be there.
pub fn required(what: &str, how: &str) {
    assert!(
        std::env::var("TAPE_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "{what}: not checked, and TAPE_REQUIRE_TOOLS=1 ({how})"
    );
    skipped(what, how);
}

/// Tells that `what` was not checked, and how to get it checked.
pub fn skipped(what: &str, how: &str) {
    eprintln!("NOTICE: {what} skipped ({how})");
    let Some(log) = std::env::var_os("TAPE_SKIPPED_LOG") else {
        return;
    };
    // One short line per write, appended: the tests write it in parallel.
    let line = format!("{what} ({how})\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("NOTICE: could not add to {}: {e}", log.to_string_lossy());
    }
}
