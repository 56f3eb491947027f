//! `../shared/ctf-suites` beside the repository (public CTF test data, used
//! in place): the path of one of its entries, or `None` with a printed
//! notice when it is missing — a failure instead under `TAPE_REQUIRE_TOOLS=1`
//! (CI). Used by the tests of `tape-ctf` and `tape-cli`.

use std::path::{Path, PathBuf};

pub use crate::skipped::{required, skipped};

/// The `shared` directory beside the repository (`TAPE_SHARED_DIR` names
/// another: the test of the test command hides it so).
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("TAPE_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    }
}

/// `../shared/ctf-suites/REL`, if present.
pub fn suite(rel: &str) -> Option<PathBuf> {
    let suites = shared_dir().join("ctf-suites");
    let p = suites.join(rel);
    if p.exists() {
        return Some(p);
    }
    eprintln!("NOTICE: {} is missing", p.display());
    required(
        &format!(
            "the checks on the CTF conformance suites and sample traces ({} is missing)",
            suites.display()
        ),
        "put the `shared` directory, which holds ctf-suites/, beside the repository",
    );
    None
}

/// Whether babeltrace2 runs here; when it does not, a notice that `skipped`
/// is skipped — a failure instead under `TAPE_REQUIRE_TOOLS=1` (CI).
pub fn babeltrace2(skipped: &str) -> bool {
    let ok = std::process::Command::new("babeltrace2")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        self::required(
            &format!("babeltrace2's side of {skipped}"),
            "apt-get install babeltrace2",
        );
    }
    ok
}

/// A trace of `events` events in `streams` streams of 64 KiB packets from
/// `../shared/tools/gen_lttng_like_trace.py`, written at `out`; `None`
/// (after a notice) when python3 cannot run it — a failure instead under
/// `TAPE_REQUIRE_TOOLS=1` (CI).
pub fn generated_lttng_like(out: &Path, events: u32, streams: u32) -> Option<PathBuf> {
    let tools = suite("../tools/gen_lttng_like_trace.py")?;
    let _ = std::fs::remove_dir_all(out);
    let ok = std::process::Command::new("python3")
        .arg(&tools)
        .arg(out)
        .args([events.to_string(), streams.to_string()])
        .output();
    match ok {
        Ok(o) if o.status.success() => Some(out.to_path_buf()),
        _ => {
            required(
                &format!("the checks on traces made by {}", tools.display()),
                "python3 must run it",
            );
            None
        }
    }
}
