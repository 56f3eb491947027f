//! The README's programs cannot drift from the library: each Rust block is a
//! whole program, compiled and run as a doctest (`lib.rs` includes the README
//! under `cfg(doctest)`), but for "Enable, record, save", which writes a
//! trace: it is `examples/readme.rs` as it is (checked here), built by
//! `cargo test` and run here, with its trace directory set, as a user would
//! run it.

use std::path::{Path, PathBuf};
use std::process::Command;

const README: &str = include_str!("../../../README.md");
const EXAMPLE: &str = include_str!("../examples/readme.rs");

/// The Rust blocks of the README: (info string, code).
fn rust_blocks() -> Vec<(&'static str, String)> {
    let mut blocks = Vec::new();
    let mut lines = README.lines();
    while let Some(l) = lines.next() {
        let Some(info) = l.strip_prefix("```") else {
            continue;
        };
        let mut code = String::new();
        for l in lines.by_ref().take_while(|l| *l != "```") {
            code.push_str(l);
            code.push('\n');
        }
        if info.starts_with("rust") {
            blocks.push((info, code));
        }
    }
    blocks
}

#[test]
fn the_readme_shows_the_example_as_it_is() {
    let blocks = rust_blocks();
    assert!(blocks.len() >= 4, "{blocks:?}");
    // Every block is a whole program, as a user would paste it (rustdoc
    // compiles it as it is: items outside `main`).
    for (_, code) in &blocks {
        assert!(code.contains("\nfn main()"), "{code}");
    }
    // The one that saves is run here, not by rustdoc (it writes a trace).
    let saving: Vec<_> = blocks.iter().filter(|(i, _)| *i == "rust,no_run").collect();
    assert_eq!(saving.len(), 1, "{blocks:?}");
    assert_eq!(saving[0].1, EXAMPLE, "README and examples/readme.rs differ");
}

/// The example binary `cargo test` built beside this test.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    profile.join("examples").join("readme")
}

fn run(dir: &Path, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let _ = std::fs::remove_dir_all(dir);
    let mut cmd = Command::new(example());
    cmd.env("TAPE_TRACE_DIR", dir);
    for v in ["TAPE_TRACE", "TAPE_TRACE_BUFSZ", "TAPE_TRACE_MODE"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run examples/readme");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_readme_program_leaves_one_trace_with_its_events() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-run");
    let (code, stdout, stderr) = run(&dir, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let traces: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(traces.len(), 1, "{traces:?}\n{stderr}");
    let trace = traces[0].as_ref().unwrap().path();
    assert_eq!(stdout, format!("saved to {}\n", trace.display()));
    assert_eq!(stderr, "", "nothing to say");
    let t = tape_ctf::metadata::read::find_traces(&trace).unwrap();
    let mut events = 0;
    for mut s in tape_ctf::decode::stream::open_streams(&t).unwrap() {
        events += s.count().unwrap().events;
    }
    assert_eq!(events, 1001);
}

#[test]
fn the_readme_program_prints_a_bad_variable_as_a_message() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-bad");
    let (code, _, stderr) = run(&dir, &[("TAPE_TRACE_BUFSZ", "4X")]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("Error: TAPE_TRACE_BUFSZ=\"4X\": at byte 1: unknown unit; accepted: "),
        "{stderr}"
    );
    assert!(!stderr.contains("kind"), "{stderr}");
}
