//! A program that depends on tape compiles each of tape's dependencies once:
//! no crate in two versions (two major versions of `syn` once cost every
//! user program a second parse of its macros' grammar).

use std::process::Command;

#[test]
fn tapes_dependency_tree_has_no_crate_twice() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(&cargo)
        .args(["tree", "--manifest-path", manifest])
        .args(["-p", "tape", "-e", "normal,build", "--duplicates"])
        .output()
        .expect("run cargo tree");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo tree: {stderr}");
    assert_eq!(stdout.trim(), "", "crates in two versions:\n{stdout}");
    // It does list a crate tape depends on, so the check can fail.
    let all = Command::new(&cargo)
        .args(["tree", "--manifest-path", manifest])
        .args(["-p", "tape", "-e", "normal,build", "--prefix", "none"])
        .output()
        .expect("run cargo tree");
    let all = String::from_utf8_lossy(&all.stdout);
    assert!(all.lines().any(|l| l.starts_with("syn v3.")), "{all}");
}
