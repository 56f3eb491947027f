//! The README's test command (`scripts/test.sh`) ends by saying what it
//! could not check: run here on the suites' tests with the suites hidden
//! (`TAPE_SHARED_DIR` pointing nowhere) and the tools not required, it
//! passes and lists the suites' checks as not checked, with where the
//! suites come from.

use std::path::Path;
use std::process::Command;

#[test]
fn the_test_command_ends_with_what_it_did_not_check() {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    if profile.file_name().is_none_or(|p| p != "opt") {
        crate::shared::skipped(
            "the test of scripts/test.sh (it runs the opt profile's tests)",
            "run the tests with --profile opt",
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let nowhere = std::env::temp_dir().join(format!("tape-no-shared-{}", std::process::id()));
    // The tests that read the suites, in this binary only (already built:
    // the same workspace and profile, so cargo builds nothing).
    let out = Command::new("bash")
        .arg(root.join("scripts/test.sh"))
        .args([
            "-p",
            "tape-ctf",
            "--test",
            "it",
            "--",
            "babeltrace_expect::",
        ])
        .env("TAPE_SHARED_DIR", &nowhere)
        .env_remove("TAPE_REQUIRE_TOOLS")
        .env_remove("TAPE_SKIPPED_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let tail: Vec<&str> = stdout.lines().rev().take(3).collect();
    assert_eq!(
        tail[2],
        "tape: NOT CHECKED here: the checks below skipped, for want of what they name (tests \
         skipping each):",
        "{stdout}"
    );
    assert!(
        tail[1].starts_with("  - the checks on the CTF conformance suites and sample traces (")
            && tail[1].contains("tape-no-shared-")
            && tail[1].contains(
                "(put the `shared` directory, which holds ctf-suites/, beside the repository) ["
            ),
        "{stdout}"
    );
    assert!(
        tail[0].starts_with("tape: install or provide what is named"),
        "{stdout}"
    );
}
