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

/// What a traced program links: `tape` and `tape-tracing` depend on the
/// shared model (`tape-ctf-model`), never on the reader (`tape-ctf`:
/// the TSDL parser, the decoder, the outputs) nor the consumer
/// (`tape-consumer`). Issue 47 found
/// tape-tracing linking the whole reader to name five model types.
#[test]
fn traced_programs_do_not_link_the_reader() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    for krate in ["tape", "tape-tracing"] {
        let out = Command::new(&cargo)
            .args(["tree", "--manifest-path", manifest])
            .args(["-p", krate, "-e", "normal", "--prefix", "none"])
            .output()
            .expect("run cargo tree");
        let tree = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "cargo tree: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The model is there, so the check reads a real tree.
        assert!(
            tree.lines().any(|l| l.starts_with("tape-ctf-model v")),
            "{krate}: {tree}"
        );
        assert!(
            !tree.lines().any(|l| l.starts_with("tape-ctf v")),
            "{krate} links the reader:\n{tree}"
        );
        // Nor the consumer of shared rings (`tape record`, `pipe`,
        // `recover`: issue 48 found every program linking them).
        assert!(
            !tree.lines().any(|l| l.starts_with("tape-consumer v")),
            "{krate} links the consumer:\n{tree}"
        );
    }
}
